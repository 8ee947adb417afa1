/* The daemon's figures for /metrics; see stats.h. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/stats.h"

#include <json-glib/json-glib.h>
#include <math.h>

/* The phases of @report (seconds and count of each). */
static void stats_add_report(HotmigdStats *stats, const char *report)
{
    g_autoptr(JsonNode) root = report ? json_from_string(report, NULL) : NULL;
    JsonNode *phases;

    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return;
    phases = json_object_get_member(json_node_get_object(root), "phases");
    if (!phases || !JSON_NODE_HOLDS_ARRAY(phases))
        return;
    for (guint i = 0; i < json_array_get_length(json_node_get_array(phases)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(phases), i);
        JsonObject *o = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
        const char *name = o ? json_object_get_string_member_with_default(o, "name", "") : "";
        const char *status = o ? json_object_get_string_member_with_default(o, "status", "") : "";
        int phase = orch_phase_from_string(name);
        double ms = o ? json_object_get_double_member_with_default(o, "ms", -1) : -1;

        if (phase < 0 || !isfinite(ms) || ms < 0 ||
            !(g_str_equal(status, "ok") || g_str_equal(status, "failed") ||
              g_str_equal(status, "undone")))
            continue;
        stats->phase_seconds_sum[phase] += ms / 1000.0;
        stats->phase_count[phase]++;
    }
}

void hotmigd_stats_add_move(HotmigdStats *stats, PolMoveState state, const char *report)
{
    switch (state) {
    case POL_MOVE_DONE:
        stats->migrations_ok++;
        break;
    case POL_MOVE_FAILED:
        stats->migrations_failed++;
        break;
    default:
        stats->migrations_skipped++;
        break;
    }
    stats_add_report(stats, report);
}
