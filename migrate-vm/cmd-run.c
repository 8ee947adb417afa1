/* `migrate-vm run PLAN_FILE [--reason TEXT] [--wait] [--json]`: asks this host's hotmigd (its
 * local API) to run a plan. */
#include <stdio.h>

#include "engine/local-protocol.h"
#include "engine/plan-json.h"
#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

/* The local API's "run" arguments: the plan file's JSON and --reason. */
static JsonNode *run_args(JsonNode *plan_node)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "plan");
    json_builder_add_value(b, plan_node);
    if (local_cli.reason) {
        json_builder_set_member_name(b, "reason");
        json_builder_add_string_value(b, local_cli.reason);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

static int run_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("PLAN_FILE - run a plan");
    g_autoptr(GError) error = NULL;
    g_autofree char *socket = NULL;
    g_autofree char *data = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(JsonNode) plan_node = NULL;
    gsize len = 0;
    JsonObject *r;
    int status = EXIT_FAILED;

    g_option_context_add_main_entries(ctx, local_schedule_entries, NULL);
    g_option_context_add_main_entries(ctx, local_entries, NULL);
    g_option_context_set_summary(
        ctx, "Asks this host's hotmigd to run a plan (as `migrate-vm plan --json` prints it);\n"
             "it is checked against the cluster as it is now first.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm run: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (argc != 2 || local_cli.timeout < 1) {
        fprintf(stderr, "usage: migrate-vm run PLAN_FILE [--wait] [--json]\n");
        return EXIT_USAGE;
    }
    if (!hm_file_read_limited(argv[1], ORCH_SNAPSHOT_MAX_BYTES, &data, &len, &error) ||
        !(plan = orch_plan_parse(data, len, argv[1], &error)) ||
        !(plan_node = json_from_string(data, &error))) {
        fprintf(stderr, "migrate-vm run: %s\n", error->message);
        return EXIT_USAGE;
    }
    args = run_args(g_steal_pointer(&plan_node));
    if (!(result = local_ask("run", args, &socket, &status)))
        return status;
    if (!(r = local_schedule_started("run", result)))
        return EXIT_FAILED;
    if (!local_cli.wait) {
        if (local_cli.json)
            local_print_json(result);
        else
            printf("schedule %s started (%u moves); follow it: migrate-vm status %s\n",
                   local_member_str(r, "id"), plan->migrations->len, local_member_str(r, "id"));
        return EXIT_OK;
    }
    fprintf(stderr, "schedule %s started (%u moves)\n", local_member_str(r, "id"),
            plan->migrations->len);
    return local_wait_schedule(socket, local_member_str(r, "id"), local_cli.json,
                               (guint)local_cli.timeout);
}

int cmd_run_main(int argc, char **argv)
{
    int status;

    local_cli_reset();
    status = run_main(argc, argv);
    local_cli_clear();
    return status;
}
