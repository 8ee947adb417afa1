/* The pre-flight checks as a list (OrchCheck): their statuses' words, adding one, the list as
 * a table and as JSON. The checks themselves are preflight.c's and preflight-target.c's. */
#include "engine/engine.h"
#include "engine/json.h"
#include "engine/preflight-priv.h"

HM_ENUM_IMPL(orch_check_status, OrchCheckStatus, ORCH_CHECK_LAST, "pass", "fail", "skip")

void orch_check_free(OrchCheck *check)
{
    if (!check)
        return;
    g_free(check->name);
    g_free(check->detail);
    g_free(check);
}

OrchCheck *orch_checks_addv(GPtrArray *checks, const char *name, OrchCheckStatus status,
                            const char *fmt, va_list ap)
{
    OrchCheck *check = g_new0(OrchCheck, 1);

    check->name = g_strdup(name);
    check->status = status;
    check->detail = g_strdup_vprintf(fmt, ap);
    g_ptr_array_add(checks, check);
    return check;
}

char *orch_checks_format_table(GPtrArray *checks)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < checks->len; i++) {
        OrchCheck *check = g_ptr_array_index(checks, i);
        g_autofree char *status = g_ascii_strup(orch_check_status_to_string(check->status), -1);

        g_string_append_printf(out, "%-4s  %-14s %s\n", status, check->name, check->detail);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

char *orch_checks_format_json(GPtrArray *checks, gboolean pretty)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    gboolean ok = TRUE;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "checks");
    json_builder_begin_array(b);
    for (guint i = 0; i < checks->len; i++) {
        OrchCheck *check = g_ptr_array_index(checks, i);

        ok = ok && check->status != ORCH_CHECK_FAIL;
        json_builder_begin_object(b);
        orch_json_member_string(b, "name", check->name);
        orch_json_member_string(b, "status", orch_check_status_to_string(check->status));
        orch_json_member_string(b, "detail", check->detail);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    orch_json_member_bool(b, "ok", ok);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}
