/* Plans as JSON (written, and read back) or a table (plan-json.h). */
#include "engine/plan-json.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "engine/json-fields.h"
#include "engine/json.h"
#include "engine/snapshot.h"

/* ---- plans read back ------------------------------------------------------------------------ */

static gboolean plan_fill(PolPlan *plan, JsonObject *root, const char *name, GError **error)
{
    OrchJsonItem top = {name, "plan", root, NULL};
    JsonNode *node;
    const char *policy, *drained;
    gint64 n, ms;
    int p;

    if (!orch_json_item_string(&top, "policy", TRUE, &policy, error) ||
        !orch_json_item_string(&top, "drained", FALSE, &drained, error))
        return FALSE;
    if ((p = pol_policy_from_string(policy)) < 0)
        return orch_json_item_bad(&top, "policy", error, "must be consolidate, drain or balance, not '%.64s'",
                   policy);
    plan->policy = p;
    plan->drained = g_strdup(drained);
    node = json_object_get_member(root, "migrations");
    if (!node || !JSON_NODE_HOLDS_ARRAY(node))
        return orch_json_item_bad(&top, "migrations", error, node ? "must be an array" : "missing");
    for (guint i = 0; i < json_array_get_length(json_node_get_array(node)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(node), i);
        g_autofree char *where = g_strdup_printf("migrations[%u]", i);
        OrchJsonItem it = {name, where, NULL, NULL};
        g_autoptr(PolMigration) m = g_new0(PolMigration, 1);
        const char *vm, *from, *to;
        gint64 mem, dur;

        if (!JSON_NODE_HOLDS_OBJECT(el)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "plan '%s': %s: must be an object",
                        name, where);
            return FALSE;
        }
        it.obj = json_node_get_object(el);
        if (!orch_json_item_string(&it, "vm", TRUE, &vm, error) ||
            !orch_json_item_string(&it, "from", TRUE, &from, error) ||
            !orch_json_item_string(&it, "to", TRUE, &to, error) ||
            !orch_json_item_int(&it, "memory_mib", FALSE, 0, (gint64)POL_MEMORY_MIB_MAX, 0, &mem, error) ||
            !orch_json_item_int(&it, "duration_ms", FALSE, 0, G_MAXINT64 / 2, 0, &dur, error) ||
            !orch_json_item_bool(&it, "extra", &m->extra, error))
            return FALSE;
        if (!*vm || !*from || !*to || strlen(vm) > POL_NAME_MAX || strlen(from) > POL_NAME_MAX ||
            strlen(to) > POL_NAME_MAX)
            return orch_json_item_bad(&it, "vm", error, "names must be 1 to %d bytes", POL_NAME_MAX);
        m->vm = g_strdup(vm);
        m->from = g_strdup(from);
        m->to = g_strdup(to);
        m->memory_mib = (guint64)mem;
        m->duration_s = dur / 1000.0;
        plan->extra_moves += m->extra;
        plan->duration_s += m->duration_s;
        plan->moved_mib += m->memory_mib;
        g_ptr_array_add(plan->migrations, g_steal_pointer(&m));
    }
    node = json_object_get_member(root, "hosts");
    if (node && !JSON_NODE_HOLDS_ARRAY(node))
        return orch_json_item_bad(&top, "hosts", error, "must be an array of strings");
    for (guint i = 0; node && i < json_array_get_length(json_node_get_array(node)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(node), i);

        if (!JSON_NODE_HOLDS_VALUE(el) || json_node_get_value_type(el) != G_TYPE_STRING)
            return orch_json_item_bad(&top, "hosts", error, "must be an array of strings");
        g_ptr_array_add(plan->hosts, g_strdup(json_node_get_string(el)));
    }
    if (!orch_json_item_int(&top, "hosts_before", FALSE, 0, POL_HOSTS_MAX, 0, &n, error))
        return FALSE;
    plan->hosts_before = (guint)n;
    if (!orch_json_item_int(&top, "lower_bound", FALSE, 0, POL_HOSTS_MAX, 0, &n, error))
        return FALSE;
    plan->lower_bound = (guint)n;
    if (!orch_json_item_int(&top, "duration_ms", FALSE, 0, G_MAXINT64 / 2, -1, &ms, error))
        return FALSE;
    if (ms >= 0)
        plan->duration_s = ms / 1000.0;
    plan->hosts_used = plan->hosts->len;
    return orch_json_item_double(&top, "max_load_before", 0, &plan->max_load_before, error) &&
           orch_json_item_double(&top, "max_load_after", 0, &plan->max_load_after, error) &&
           orch_json_item_double(&top, "plan_ms", 0, &plan->plan_ms, error);
}

PolPlan *orch_plan_parse_node(JsonNode *root, const char *name, GError **error)
{
    g_autoptr(PolPlan) plan = g_new0(PolPlan, 1);

    plan->migrations = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    plan->hosts = g_ptr_array_new_with_free_func(g_free);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "plan '%s': must be an object with \"policy\" and \"migrations\"", name);
        return NULL;
    }
    if (!plan_fill(plan, json_node_get_object(root), name, error))
        return NULL;
    return g_steal_pointer(&plan);
}

PolPlan *orch_plan_parse(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;

    if (len > ORCH_SNAPSHOT_MAX_BYTES) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "plan '%s': larger than %d bytes",
                    name, ORCH_SNAPSHOT_MAX_BYTES);
        return NULL;
    }
    g_autofree char *what = g_strdup_printf("snapshot '%s'", name);

    if (!orch_json_check_depth(data, len, what, ORCH_SNAPSHOT_MAX_DEPTH, error))
        return NULL;
    if (len == 0 || !json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "plan '%s': not JSON: %s", name,
                    local ? local->message : "empty");
        return NULL;
    }
    return orch_plan_parse_node(json_parser_get_root(parser), name, error);
}

/* ---- writing ----------------------------------------------------------------------------- */

static double rounded(double x, double scale)
{
    return round(x * scale) / scale;
}

/* Member @name: @value, or null when it is @none (not computed, no limit). */
static void add_count_or_null(JsonBuilder *b, const char *name, guint value, guint none)
{
    json_builder_set_member_name(b, name);
    if (value == none)
        json_builder_add_null_value(b);
    else
        json_builder_add_int_value(b, value);
}

/* "migrations": each move of @plan. */
static void plan_json_migrations(JsonBuilder *b, const PolPlan *plan)
{
    json_builder_set_member_name(b, "migrations");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(plan->migrations, i);
        json_builder_begin_object(b);
        orch_json_member_string(b, "vm", m->vm);
        orch_json_member_string(b, "from", m->from);
        orch_json_member_string(b, "to", m->to);
        orch_json_member_int(b, "memory_mib", (gint64)m->memory_mib);
        orch_json_member_int(b, "duration_ms", (gint64)llround(m->duration_s * 1000.0));
        orch_json_member_bool(b, "extra", m->extra);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

/* The plan's figures: hosts against the lower bound, moves, time, loads. */
static void plan_json_figures(JsonBuilder *b, const PolPlan *plan)
{
    orch_json_member_int(b, "hosts_used", plan->hosts_used);
    orch_json_member_int(b, "hosts_before", plan->hosts_before);
    orch_json_member_int(b, "lower_bound", plan->lower_bound);
    orch_json_member_int(b, "gap", (gint64)plan->hosts_used - (gint64)plan->lower_bound);
    orch_json_member_double(
        b, "ratio",
        plan->lower_bound ? rounded((double)plan->hosts_used / plan->lower_bound, 1e4) : 0.0);
    orch_json_member_int(b, "extra_moves", plan->extra_moves);
    orch_json_member_int(b, "duration_ms", (gint64)llround(plan->duration_s * 1000.0));
    orch_json_member_double(b, "max_load_before", rounded(plan->max_load_before, 1e4));
    orch_json_member_double(b, "max_load_after", rounded(plan->max_load_after, 1e4));
    orch_json_member_int(b, "moved_mib", (gint64)plan->moved_mib);
}

/* A consolidation's front: each (hosts, migrations) point it weighed, and the one chosen. */
static void plan_json_front(JsonBuilder *b, const PolPlan *plan)
{
    add_count_or_null(b, "migration_bound", plan->migration_bound, G_MAXUINT);
    orch_json_member_int(b, "host_value", plan->host_value);
    add_count_or_null(b, "max_migrations", plan->max_migrations, 0);
    json_builder_set_member_name(b, "front");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->front->len; i++) {
        const PolFrontPoint *f = &g_array_index(plan->front, PolFrontPoint, i);
        json_builder_begin_object(b);
        orch_json_member_int(b, "hosts", f->hosts);
        orch_json_member_int(b, "migrations", f->migrations);
        orch_json_member_int(b, "moved_mib", (gint64)f->moved_mib);
        add_count_or_null(b, "migration_bound", f->migration_bound, G_MAXUINT);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    orch_json_member_int(b, "chosen", plan->front_chosen);
}

char *orch_plan_format_json(const PolPlan *plan, gboolean pretty, gboolean timing)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    orch_json_member_string(b, "policy", pol_policy_to_string(plan->policy));
    if (plan->drained)
        orch_json_member_string(b, "drained", plan->drained);
    plan_json_migrations(b, plan);
    plan_json_figures(b, plan);
    if (plan->policy == POL_POLICY_CONSOLIDATE && plan->front)
        plan_json_front(b, plan);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->hosts->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(plan->hosts, i));
    json_builder_end_array(b);
    if (timing)
        orch_json_member_double(b, "plan_ms", rounded(plan->plan_ms, 1000.0));
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}

char *orch_plan_format_table(const PolPlan *plan)
{
    GString *out = g_string_new(NULL);

    g_string_append_printf(out, "%s plan: %u migrations (%u detours), %.1f s predicted\n",
                           pol_policy_to_string(plan->policy), plan->migrations->len,
                           plan->extra_moves, plan->duration_s);
    g_string_append_printf(out, "hosts with VMs: %u -> %u (lower bound %u), max load %.2f -> %.2f\n",
                           plan->hosts_before, plan->hosts_used, plan->lower_bound,
                           plan->max_load_before, plan->max_load_after);
    if (plan->policy == POL_POLICY_CONSOLIDATE && plan->front) {
        g_autofree char *bound = plan->migration_bound == G_MAXUINT
                                     ? g_strdup("none")
                                     : g_strdup_printf("%u", plan->migration_bound);
        g_string_append_printf(out, "migrations %u (lower bound %s on %u hosts), %.1f GiB moved; a host is worth %u migrations; %u plans on the front:\n",
                               plan->migrations->len, bound, plan->hosts_used,
                               plan->moved_mib / 1024.0, plan->host_value, plan->front->len);
        /* The points around the chosen one; --json has them all. */
        guint from = plan->front_chosen > 4 ? plan->front_chosen - 4 : 0;
        guint to = MIN(plan->front->len, from + 10);
        for (guint i = from; i < to; i++) {
            const PolFrontPoint *f = &g_array_index(plan->front, PolFrontPoint, i);
            g_string_append_printf(out, "  %5u hosts %7u migrations %10.1f GiB%s\n", f->hosts,
                                   f->migrations, f->moved_mib / 1024.0,
                                   i == plan->front_chosen ? "  <- chosen" : "");
        }
        if (to - from < plan->front->len)
            g_string_append_printf(out, "  (%u more in --json)\n", plan->front->len - (to - from));
    }
    for (guint i = 0; i < plan->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(plan->migrations, i);
        g_string_append_printf(out, "%5u  %-24s %-16s -> %-16s %8.1f s%s\n", i + 1, m->vm,
                               m->from, m->to, m->duration_s, m->extra ? "  (detour)" : "");
    }
    return g_string_free(out, FALSE);
}
