/* `migrate-vm run PLAN_FILE [--reason TEXT] [--wait] [--json]`: asks this host's hotmigd (its
 * local API) to run a plan. */
#include <stdio.h>

#include "engine/local-protocol.h"
#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

int cmd_run_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("PLAN_FILE - run a plan");
    g_autoptr(GError) error = NULL;
    g_autofree char *config = NULL;
    g_autofree char *socket_opt = NULL;
    g_autofree char *socket = NULL;
    g_autofree char *reason = NULL;
    g_autofree char *data = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(JsonNode) plan_node = NULL;
    gboolean wait = FALSE, json = FALSE;
    gint timeout = CLI_WAIT_TIMEOUT_S;
    gsize len = 0;
    JsonObject *r;
    GOptionEntry entries[] = {
        {"reason", 0, 0, G_OPTION_ARG_STRING, &reason, "Why, for hotmigd's log and status", "TEXT"},
        {"wait", 0, 0, G_OPTION_ARG_NONE, &wait, "Wait until every move ended", NULL},
        {"timeout", 0, 0, G_OPTION_ARG_INT, &timeout,
         "With --wait: stop waiting after SEC seconds (default 86400)", "SEC"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the answer (or report) as JSON", NULL},
        {"config", 0, 0, G_OPTION_ARG_FILENAME, &config, "Configuration file", "FILE"},
        {"socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_opt,
         "hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(
        ctx, "Asks this host's hotmigd to run a plan (as `migrate-vm plan --json` prints it);\n"
             "it is checked against the cluster as it is now first.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm run: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (argc != 2 || timeout < 1) {
        fprintf(stderr, "usage: migrate-vm run PLAN_FILE [--wait] [--json]\n");
        return EXIT_USAGE;
    }
    if (!hm_file_read_limited(argv[1], ORCH_SNAPSHOT_MAX_BYTES, &data, &len, &error) ||
        !(plan = orch_plan_parse(data, len, argv[1], &error)) ||
        !(plan_node = json_from_string(data, &error))) {
        fprintf(stderr, "migrate-vm run: %s\n", error->message);
        return EXIT_USAGE;
    }
    socket = local_socket(config, socket_opt, &error);
    if (!socket) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_CONFIG;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "plan");
    json_builder_add_value(b, g_steal_pointer(&plan_node));
    if (reason) {
        json_builder_set_member_name(b, "reason");
        json_builder_add_string_value(b, reason);
    }
    json_builder_end_object(b);
    args = json_builder_get_root(b);
    result = orch_local_call(socket, "run", args, CLI_TIMEOUT_S, NULL, NULL, &error);
    if (!result) {
        fprintf(stderr, "migrate-vm run: %s\n", error->message);
        return local_exit_status(error);
    }
    r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    if (!r || !local_member_str(r, "id")) {
        fprintf(stderr, "migrate-vm run: hotmigd answered without a schedule id\n");
        return EXIT_FAILED;
    }
    if (!wait) {
        if (json)
            local_print_json(result);
        else
            printf("schedule %s started (%u moves); follow it: migrate-vm status %s\n",
                   local_member_str(r, "id"), plan->migrations->len, local_member_str(r, "id"));
        return EXIT_OK;
    }
    fprintf(stderr, "schedule %s started (%u moves)\n", local_member_str(r, "id"),
            plan->migrations->len);
    return local_wait_schedule(socket, local_member_str(r, "id"), json, (guint)timeout);
}
