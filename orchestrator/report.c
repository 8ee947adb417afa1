/* Renders an OrchReport for people (a table) and for programs (JSON). */
#include <json-glib/json-glib.h>

#include "orchestrator/orchestrator.h"

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

char *orch_report_format_json(const OrchReport *report, gboolean pretty)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "domain");
    json_builder_add_string_value(b, report->domain);
    json_builder_set_member_name(b, "source");
    json_builder_add_string_value(b, report->source_uri);
    json_builder_set_member_name(b, "destination");
    json_builder_add_string_value(b, report->dest_uri);
    json_builder_set_member_name(b, "ok");
    json_builder_add_boolean_value(b, report->ok);
    json_builder_set_member_name(b, "failed_phase");
    if (report->ok)
        json_builder_add_null_value(b);
    else
        json_builder_add_string_value(b, orch_phase_to_string(report->failed_phase));
    json_builder_set_member_name(b, "error");
    if (report->error)
        json_builder_add_string_value(b, report->error);
    else
        json_builder_add_null_value(b);
    json_builder_set_member_name(b, "final_host");
    json_builder_add_string_value(b, report->final_host);
    json_builder_set_member_name(b, "vfs_total");
    json_builder_add_int_value(b, report->vfs_total);
    json_builder_set_member_name(b, "vfs_attached");
    json_builder_add_int_value(b, report->vfs_attached);
    json_builder_set_member_name(b, "total_ms");
    json_builder_add_double_value(b, report->total_us / 1000.0);

    json_builder_set_member_name(b, "phases");
    json_builder_begin_array(b);
    for (guint i = 0; i < ORCH_PHASE_LAST; i++) {
        const OrchPhaseRecord *rec = &report->phases[i];

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "name");
        json_builder_add_string_value(b, orch_phase_to_string(rec->phase));
        json_builder_set_member_name(b, "status");
        json_builder_add_string_value(b, orch_status_to_string(rec->status));
        json_builder_set_member_name(b, "ms");
        json_builder_add_double_value(b, rec->duration_us / 1000.0);
        json_builder_set_member_name(b, "detail");
        if (rec->detail)
            json_builder_add_string_value(b, rec->detail);
        else
            json_builder_add_null_value(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);

    json_builder_set_member_name(b, "rollback");
    json_builder_begin_array(b);
    for (guint i = 0; i < report->rollback->len; i++) {
        const OrchRollbackRecord *rec = g_ptr_array_index(report->rollback, i);

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "action");
        json_builder_add_string_value(b, rec->action);
        json_builder_set_member_name(b, "ok");
        json_builder_add_boolean_value(b, rec->ok);
        json_builder_set_member_name(b, "ms");
        json_builder_add_double_value(b, rec->duration_us / 1000.0);
        json_builder_set_member_name(b, "detail");
        if (rec->detail)
            json_builder_add_string_value(b, rec->detail);
        else
            json_builder_add_null_value(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}
