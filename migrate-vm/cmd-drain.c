/* `migrate-vm drain HOST [--deadline SEC] [--reason TEXT] [--wait] [--json]`: asks this host's
 * hotmigd (its local API) to move every VM off HOST. */
#include <stdio.h>

#include "common/config.h"
#include "engine/local-protocol.h"
#include "migrate-vm/commands.h"

int cmd_drain_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("HOST - move every VM off HOST");
    g_autoptr(GError) error = NULL;
    g_autofree char *config = NULL;
    g_autofree char *socket_opt = NULL;
    g_autofree char *socket = NULL;
    g_autofree char *reason = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    gboolean wait = FALSE, json = FALSE;
    gint64 deadline = 0;
    gint timeout = CLI_WAIT_TIMEOUT_S;
    JsonObject *r;
    JsonArray *late;
    GOptionEntry entries[] = {
        {"deadline", 0, 0, G_OPTION_ARG_INT64, &deadline,
         "Order the moves to save the most VMs within SEC seconds from now", "SEC"},
        {"reason", 0, 0, G_OPTION_ARG_STRING, &reason, "Why, for hotmigd's log and status", "TEXT"},
        {"wait", 0, 0, G_OPTION_ARG_NONE, &wait,
         "Wait until every move ended, showing each, then print the report", NULL},
        {"timeout", 0, 0, G_OPTION_ARG_INT, &timeout,
         "With --wait: stop waiting after SEC seconds (the drain goes on; default 86400)", "SEC"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the answer (or report) as JSON", NULL},
        {"config", 0, 0, G_OPTION_ARG_FILENAME, &config,
         "Configuration file (default $" HM_CONFIG_ENV ", else " HM_CONFIG_PATH_DEFAULT "): its [hotmigd] socket", "FILE"},
        {"socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_opt,
         "hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(
        ctx, "Asks this host's hotmigd to move every VM off HOST (a drain plan, run by its\n"
             "scheduler, each move driven from HOST). Running it again while the drain runs\n"
             "gives the same schedule.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm drain: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: migrate-vm drain HOST [--deadline SEC] [--wait] [--json]\n");
        return EXIT_USAGE;
    }
    if (deadline < 0 || deadline > 365 * 24 * 3600 || timeout < 1) {
        fprintf(
            stderr,
            "migrate-vm drain: --deadline must be 0 to 31536000 seconds and --timeout at least 1\n");
        return EXIT_USAGE;
    }
    socket = local_socket(config, socket_opt, &error);
    if (!socket) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_CONFIG;
    }
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "host");
    json_builder_add_string_value(b, argv[1]);
    if (deadline) {
        json_builder_set_member_name(b, "deadline");
        json_builder_add_int_value(b, g_get_real_time() / G_USEC_PER_SEC + deadline);
    }
    if (reason) {
        json_builder_set_member_name(b, "reason");
        json_builder_add_string_value(b, reason);
    }
    json_builder_end_object(b);
    args = json_builder_get_root(b);
    result = orch_local_call(socket, "drain", args, CLI_TIMEOUT_S, NULL, NULL, &error);
    if (!result) {
        fprintf(stderr, "migrate-vm drain: %s\n", error->message);
        return local_exit_status(error);
    }
    r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    if (!r || !local_member_str(r, "id")) {
        fprintf(stderr, "migrate-vm drain: hotmigd answered without a schedule id\n");
        return EXIT_FAILED;
    }
    if (json && !wait) {
        local_print_json(result);
        return EXIT_OK;
    }
    late = local_member_array(r, "late");
    fprintf(wait ? stderr : stdout, "drain of %s: schedule %s %s\n", argv[1],
            local_member_str(r, "id"),
            json_object_get_boolean_member_with_default(r, "merged", FALSE) ? "(running already)"
                                                                            : "started");
    if (late && json_array_get_length(late)) {
        fprintf(wait ? stderr : stdout, "predicted to miss the deadline:");
        for (guint i = 0; i < json_array_get_length(late); i++)
            fprintf(wait ? stderr : stdout, "%s %s", i ? "," : "",
                    json_array_get_string_element(late, i));
        fprintf(wait ? stderr : stdout, "\n");
    }
    if (!wait) {
        printf("follow it: migrate-vm status %s\n", local_member_str(r, "id"));
        return EXIT_OK;
    }
    return local_wait_schedule(socket, local_member_str(r, "id"), json, (guint)timeout);
}
