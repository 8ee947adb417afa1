/* `migrate-vm status [ID] [--json]`: hosts and schedules as this host's hotmigd (its local API)
 * sees them. */
#include <stdio.h>

#include "engine/local-protocol.h"
#include "migrate-vm/commands.h"

/* Hosts by state, then each host's reason for its state. */
static void status_print_hosts(JsonObject *r)
{
    JsonObject *by_state = local_member_obj(r, "by_state");
    JsonArray *list = local_member_array(r, "hosts");

    printf("hosts:\n");
    if (by_state) {
        g_autoptr(GList) states = json_object_get_members(by_state);

        for (GList *st = states; st; st = st->next) {
            JsonArray *names = json_object_get_array_member(by_state, st->data);

            printf("  %-12s", (const char *)st->data);
            for (guint i = 0; i < json_array_get_length(names); i++)
                printf("%s %s", i ? "," : "", json_array_get_string_element(names, i));
            printf("\n");
        }
    }
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        JsonObject *h = json_array_get_object_element(list, i);

        if (local_member_str(h, "reason"))
            printf("  %s is %s: %s\n", local_member_str(h, "name"), local_member_str(h, "state"),
                   local_member_str(h, "reason"));
    }
}

/* The migrations this hotmigd runs for other hosts, if any. */
static void status_print_migrations(JsonObject *r)
{
    JsonArray *list = local_member_array(r, "migrations");

    if (!list || !json_array_get_length(list))
        return;
    printf("migrations run here for other hosts:\n");
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonObject *m = json_array_get_object_element(list, i);

        printf("  %s  %s -> %s  %s%s%s\n", local_member_str(m, "id"),
               local_member_str(m, "domain"), local_member_str(m, "destination"),
               local_member_str(m, "state"), local_member_str(m, "error") ? ": " : "",
               local_member_str(m, "error") ? local_member_str(m, "error") : "");
    }
}

/* The whole status for people. */
static void status_print(JsonObject *r)
{
    JsonArray *list;

    printf("hotmigd on %s, inventory taken %s\n", local_member_str(r, "host"),
           local_member_str(r, "inventory_taken") ? local_member_str(r, "inventory_taken")
                                                  : "not yet");
    status_print_hosts(r);
    list = local_member_array(r, "schedules");
    printf("schedules:%s\n", list && json_array_get_length(list) ? "" : " none");
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        printf("  ");
        local_print_schedule(json_array_get_object_element(list, i), FALSE);
    }
    status_print_migrations(r);
    list = local_member_array(r, "warnings");
    for (guint i = 0; list && i < json_array_get_length(list); i++)
        printf("warning: %s\n", json_array_get_string_element(list, i));
}

static int status_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("[ID] - hosts and schedules");
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    JsonObject *r;
    int status = EXIT_FAILED;

    g_option_context_add_main_entries(ctx, local_entries, NULL);
    g_option_context_set_summary(
        ctx, "Shows what this host's hotmigd sees and runs: hosts by state, schedules with\n"
             "their moves, migrations it runs for other hosts; with ID, that schedule with\n"
             "each move's report.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "migrate-vm status: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (argc > 2) {
        fprintf(stderr, "usage: migrate-vm status [ID] [--json]\n");
        return EXIT_USAGE;
    }
    if (argc == 2) {
        g_autoptr(JsonBuilder) b = json_builder_new();

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, argv[1]);
        json_builder_end_object(b);
        args = json_builder_get_root(b);
    }
    if (!(result = local_ask("status", args, NULL, &status)))
        return status;
    if (local_cli.json) {
        local_print_json(result);
        return EXIT_OK;
    }
    r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    if (argc == 2) {
        if (r)
            local_print_schedule(r, TRUE);
        return EXIT_OK;
    }
    status_print(r);
    return EXIT_OK;
}

int cmd_status_main(int argc, char **argv)
{
    int status;

    local_cli_reset();
    status = status_main(argc, argv);
    local_cli_clear();
    return status;
}
