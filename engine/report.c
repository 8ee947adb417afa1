/* The report of a migration (OrchReport): made, freed, and rendered for people (a table) and
 * for programs (JSON). */
#include <json-glib/json-glib.h>

#include "engine/engine.h"
#include "engine/json.h"

static void rollback_record_free(OrchRollbackRecord *rec)
{
    g_free(rec->action);
    g_free(rec->detail);
    g_free(rec);
}

void orch_report_free(OrchReport *report)
{
    if (!report)
        return;
    g_free(report->domain);
    g_free(report->source_uri);
    g_free(report->dest_uri);
    for (guint i = 0; i < ORCH_PHASE_LAST; i++)
        g_free(report->phases[i].detail);
    g_ptr_array_unref(report->rollback);
    g_free(report->error);
    g_free(report->final_host);
    g_free(report);
}

OrchReport *orch_report_new(const OrchOptions *opts)
{
    OrchReport *report = g_new0(OrchReport, 1);

    report->domain = g_strdup(opts->domain);
    report->source_uri = g_strdup(opts->source_uri);
    report->dest_uri = g_strdup(opts->dest_uri);
    report->rollback = g_ptr_array_new_with_free_func((GDestroyNotify)rollback_record_free);
    report->final_host = g_strdup("source");
    for (guint i = 0; i < ORCH_PHASE_LAST; i++)
        report->phases[i].phase = i;
    return report;
}

static char *format_duration(gint64 us)
{
    if (us < 10 * G_TIME_SPAN_SECOND)
        return g_strdup_printf("%.0f ms", us / 1000.0);
    return g_strdup_printf("%.1f s", us / 1e6);
}

char *orch_report_format_table(const OrchReport *report)
{
    g_autoptr(GString) out = g_string_new(NULL);
    g_autofree char *total = format_duration(report->total_us);

    g_string_append_printf(out, "%-10s %-8s %9s  %s\n", "PHASE", "STATUS", "TIME", "DETAIL");
    for (guint i = 0; i < ORCH_PHASE_LAST; i++) {
        const OrchPhaseRecord *rec = &report->phases[i];
        g_autofree char *time = rec->status == ORCH_STATUS_OK || rec->status == ORCH_STATUS_FAILED ||
                                        rec->status == ORCH_STATUS_UNDONE
                                    ? format_duration(rec->duration_us)
                                    : g_strdup("-");

        g_string_append_printf(out, "%-10s %-8s %9s  %s\n", orch_phase_to_string(rec->phase),
                               orch_status_to_string(rec->status), time,
                               rec->detail ? rec->detail : "");
    }
    for (guint i = 0; i < report->rollback->len; i++) {
        const OrchRollbackRecord *rec = g_ptr_array_index(report->rollback, i);
        g_autofree char *time = format_duration(rec->duration_us);
        g_autofree char *name = g_strdup_printf("undo:%s", rec->action);

        g_string_append_printf(out, "%-10s %-8s %9s  %s\n", name, rec->ok ? "ok" : "failed", time,
                               rec->detail ? rec->detail : "");
    }
    g_string_append_printf(out, "%-10s %-8s %9s  domain '%s' on %s host, %u of %u VF(s)\n",
                           "total", report->ok ? "ok" : "failed", total, report->domain,
                           report->final_host, report->vfs_attached, report->vfs_total);
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* A phase's "standby" (when the standby path was used): the prepare's switch
 * {"switched","paused","ms"}, the resume's switch back {"sends","receives","ms"}. */
static void report_json_standby(JsonBuilder *b, const OrchPhaseRecord *rec)
{
    const OrchStandbyFigures *sb = &rec->standby;

    if (!sb->used || (rec->phase != ORCH_PHASE_PREPARE && rec->phase != ORCH_PHASE_RESUME))
        return;
    json_builder_set_member_name(b, "standby");
    json_builder_begin_object(b);
    if (rec->phase == ORCH_PHASE_PREPARE) {
        orch_json_member_int(b, "switched", sb->switched);
        orch_json_member_int(b, "paused", sb->paused);
    } else {
        orch_json_member_int(b, "sends", (gint64)sb->sends);
        orch_json_member_int(b, "receives", (gint64)sb->receives);
    }
    orch_json_member_int(b, "ms", sb->ms);
    json_builder_end_object(b);
}

char *orch_report_format_json(const OrchReport *report, gboolean pretty)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    orch_json_member_string(b, "domain", report->domain);
    orch_json_member_string(b, "source", report->source_uri);
    orch_json_member_string(b, "destination", report->dest_uri);
    orch_json_member_bool(b, "ok", report->ok);
    orch_json_member_string(b, "failed_phase",
                            report->ok ? NULL : orch_phase_to_string(report->failed_phase));
    orch_json_member_string(b, "error", report->error);
    orch_json_member_string(b, "final_host", report->final_host);
    orch_json_member_int(b, "vfs_total", report->vfs_total);
    orch_json_member_int(b, "vfs_attached", report->vfs_attached);
    orch_json_member_double(b, "total_ms", report->total_us / 1000.0);

    json_builder_set_member_name(b, "phases");
    json_builder_begin_array(b);
    for (guint i = 0; i < ORCH_PHASE_LAST; i++) {
        const OrchPhaseRecord *rec = &report->phases[i];

        json_builder_begin_object(b);
        orch_json_member_string(b, "name", orch_phase_to_string(rec->phase));
        orch_json_member_string(b, "status", orch_status_to_string(rec->status));
        orch_json_member_double(b, "ms", rec->duration_us / 1000.0);
        orch_json_member_string(b, "detail", rec->detail);
        report_json_standby(b, rec);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "rollback");
    json_builder_begin_array(b);
    for (guint i = 0; i < report->rollback->len; i++) {
        const OrchRollbackRecord *rec = g_ptr_array_index(report->rollback, i);

        json_builder_begin_object(b);
        orch_json_member_string(b, "action", rec->action);
        orch_json_member_bool(b, "ok", rec->ok);
        orch_json_member_double(b, "ms", rec->duration_us / 1000.0);
        orch_json_member_string(b, "detail", rec->detail);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}
