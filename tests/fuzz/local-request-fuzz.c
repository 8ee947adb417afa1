/* Fuzz target for hotmigd's local API requests (orch_local_request_parse(),
 * engine/local-protocol.c) and the plans they carry (orch_plan_parse(), engine/snapshot.c):
 * whatever bytes arrive as a request line must be refused with an error class and a message, or
 * read into a command and its arguments, without crashing, leaking or tripping a sanitizer; a
 * plan read must format as JSON and as a table, and its JSON must read back.
 *
 * libFuzzer: see tests/fuzz/local-request.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the
 * corpus in tests/fuzz/corpus/local-request/ is replayed by local-request-fuzz-replay. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine/local-protocol.h"
#include "engine/plan-json.h"
#include "engine/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_plan(PolPlan *plan, GError *error)
{
    g_autofree char *json = NULL;
    g_autofree char *table = NULL;
    g_autoptr(PolPlan) again = NULL;
    g_autoptr(GError) local = NULL;

    g_assert((plan == NULL) == (error != NULL));
    if (!plan)
        return;
    json = orch_plan_format_json(plan, FALSE, TRUE);
    table = orch_plan_format_table(plan);
    g_assert(json && table);
    again = orch_plan_parse(json, strlen(json), "again", &local);
    if (!again)
        g_error("a formatted plan does not read back: %s", local->message);
    g_assert(again->migrations->len == plan->migrations->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) args = NULL;
    g_autofree char *command = NULL;
    OrchLocalErrorClass cls = ORCH_LOCAL_ERROR_LAST;
    gboolean ok;

    if (size > ORCH_LOCAL_API_MAX_LINE)
        return 0;
    ok = orch_local_request_parse((const char *)data, size, &command, &args, &cls, &error);
    g_assert(ok == (error == NULL));
    if (!ok) {
        g_assert(cls < ORCH_LOCAL_ERROR_LAST);
        g_assert(g_utf8_validate(error->message, -1, NULL) || cls == ORCH_LOCAL_ERROR_INVALID_JSON);
    } else {
        g_assert(command != NULL);
        if (args && json_object_has_member(args, "plan")) {
            g_autoptr(GError) perr = NULL;
            g_autoptr(PolPlan) plan =
                orch_plan_parse_node(json_object_get_member(args, "plan"), "plan", &perr);

            check_plan(plan, perr);
        }
    }
    /* The same bytes as a plan file (migrate-vm run PLAN_FILE). */
    {
        g_autoptr(GError) perr = NULL;
        g_autoptr(PolPlan) plan = orch_plan_parse((const char *)data, size, "fuzz", &perr);

        check_plan(plan, perr);
    }
    return 0;
}
