/* `migrate-vm drain HOST [--deadline SEC] [--reason TEXT] [--wait] [--json]`: asks this host's
 * hotmigd (its local API) to move every VM off HOST. */
#include <stdio.h>

#include "common/config.h"
#include "engine/local-protocol.h"
#include "migrate-vm/commands.h"

static gint64 drain_deadline;

static GOptionEntry drain_entries[] = {
    {"deadline", 0, 0, G_OPTION_ARG_INT64, &drain_deadline,
     "Order the moves to save the most VMs within SEC seconds from now", "SEC"},
    {NULL, 0, 0, 0, NULL, NULL, NULL}};

/* The local API's "drain" arguments for @host. */
static JsonNode *drain_args(const char *host)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "host");
    json_builder_add_string_value(b, host);
    if (drain_deadline) {
        json_builder_set_member_name(b, "deadline");
        json_builder_add_int_value(b, g_get_real_time() / G_USEC_PER_SEC + drain_deadline);
    }
    if (local_cli.reason) {
        json_builder_set_member_name(b, "reason");
        json_builder_add_string_value(b, local_cli.reason);
    }
    json_builder_end_object(b);
    return json_builder_get_root(b);
}

/* Says the drain of @host started (and which VMs it predicts to miss the deadline); follows
 * it with --wait. */
static int drain_started(const char *host, const char *socket, JsonNode *result, JsonObject *r)
{
    FILE *out = local_cli.wait ? stderr : stdout;
    JsonArray *late = local_member_array(r, "late");

    if (local_cli.json && !local_cli.wait) {
        local_print_json(result);
        return EXIT_OK;
    }
    fprintf(out, "drain of %s: schedule %s %s\n", host, local_member_str(r, "id"),
            json_object_get_boolean_member_with_default(r, "merged", FALSE) ? "(running already)"
                                                                            : "started");
    if (late && json_array_get_length(late)) {
        fprintf(out, "predicted to miss the deadline:");
        for (guint i = 0; i < json_array_get_length(late); i++)
            fprintf(out, "%s %s", i ? "," : "", json_array_get_string_element(late, i));
        fprintf(out, "\n");
    }
    if (!local_cli.wait) {
        printf("follow it: migrate-vm status %s\n", local_member_str(r, "id"));
        return EXIT_OK;
    }
    return local_wait_schedule(socket, local_member_str(r, "id"), local_cli.json,
                               (guint)local_cli.timeout);
}

static int drain_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("HOST - move every VM off HOST");
    g_autoptr(GError) error = NULL;
    g_autofree char *socket = NULL;
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    JsonObject *r;
    int status = EXIT_FAILED;

    g_option_context_add_main_entries(ctx, drain_entries, NULL);
    g_option_context_add_main_entries(ctx, local_schedule_entries, NULL);
    g_option_context_add_main_entries(ctx, local_entries, NULL);
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
    if (drain_deadline < 0 || drain_deadline > 365 * 24 * 3600 || local_cli.timeout < 1) {
        fprintf(
            stderr,
            "migrate-vm drain: --deadline must be 0 to 31536000 seconds and --timeout at least 1\n");
        return EXIT_USAGE;
    }
    args = drain_args(argv[1]);
    if (!(result = local_ask("drain", args, &socket, &status)))
        return status;
    if (!(r = local_schedule_started("drain", result)))
        return EXIT_FAILED;
    return drain_started(argv[1], socket, result, r);
}

int cmd_drain_main(int argc, char **argv)
{
    int status;

    local_cli_reset();
    drain_deadline = 0;
    status = drain_main(argc, argv);
    local_cli_clear();
    return status;
}
