/* migrate-vm's subcommands that ask the local hotmigd (its local API, engine/local-protocol.h):
 *
 *   migrate-vm drain HOST [--deadline SEC] [--reason TEXT] [--wait] [--json]
 *   migrate-vm status [ID] [--json]
 *   migrate-vm run PLAN_FILE [--reason TEXT] [--wait] [--json]
 *   migrate-vm plan consolidate|drain HOST|balance        (without --snapshot: migrate-vm/plan.c)
 *
 * Exit status: 0 done (a drain or run with --wait: every move done); 1 failed (a move failed or
 * was skipped, no plan exists, hotmigd unreachable); 2 bad usage, or hotmigd refused the
 * request as bad (unknown host, bad argument); 4 bad configuration file. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "engine/local-protocol.h"
#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

#define CLI_TIMEOUT_S 60         /* an answer to a request */
#define CLI_WAIT_TIMEOUT_S 86400 /* --wait: how long the schedule may take (--timeout) */

enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_CONFIG = 4,
};

/* ---- common ---------------------------------------------------------------------------------- */

char *orch_daemon_socket(const char *config_path, const char *socket, GError **error)
{
    g_autoptr(HmConfig) config = NULL;

    if (socket)
        return g_strdup(socket);
    if (config_path)
        config = hm_config_load(config_path, error);
    else if (g_file_test(HM_CONFIG_PATH_DEFAULT, G_FILE_TEST_EXISTS))
        config = hm_config_load(HM_CONFIG_PATH_DEFAULT, error);
    else
        config = hm_config_new();
    if (!config)
        return NULL;
    return g_strdup(hm_config_get_string(config, HM_CONFIG_HOTMIGD_SOCKET));
}

int orch_daemon_exit_status(const GError *error)
{
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) ||
        g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND))
        return EXIT_USAGE;
    if (error->domain == HM_COMMON_ERROR)
        return EXIT_CONFIG;
    return EXIT_FAILED;
}

static const char *member_str(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n)
               : NULL;
}

static gint64 member_int(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64
               ? json_node_get_int(n)
               : 0;
}

static JsonObject *member_obj(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

static JsonArray *member_array(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

static void print_json(JsonNode *node)
{
    g_autofree char *text = json_to_string(node, TRUE);

    printf("%s\n", text);
}

/* Seconds between two RFC 3339 times, -1 when either is missing. */
static double seconds_between(const char *a, const char *b)
{
    g_autoptr(GDateTime) ta = a ? g_date_time_new_from_iso8601(a, NULL) : NULL;
    g_autoptr(GDateTime) tb = b ? g_date_time_new_from_iso8601(b, NULL) : NULL;

    return ta && tb ? g_date_time_difference(tb, ta) / 1e6 : -1;
}

/* The time a move took: its report's total_ms, else its start and end. */
static char *move_time(JsonObject *m)
{
    JsonObject *report = member_obj(m, "report");
    JsonNode *total = report ? json_object_get_member(report, "total_ms") : NULL;
    double s = total && JSON_NODE_HOLDS_VALUE(total)
                   ? json_node_get_double(total) / 1000.0
                   : seconds_between(member_str(m, "started"), member_str(m, "finished"));

    return s >= 0 ? g_strdup_printf("%.1f s", s) : g_strdup("-");
}

/* A schedule as text: its summary line, then one line per move. */
static void print_schedule(JsonObject *s, gboolean moves)
{
    JsonObject *p = member_obj(s, "progress");
    JsonArray *late = member_array(s, "late");
    JsonArray *list = member_array(s, "moves");
    const char *host = member_str(s, "host");
    const char *state = member_str(s, "state");
    JsonNode *ok = json_object_get_member(s, "ok");
    gboolean finished = g_strcmp0(state, "finished") == 0;

    printf("%s  %s%s%s  %s%s  %" G_GINT64_FORMAT " moves: %" G_GINT64_FORMAT
           " done, %" G_GINT64_FORMAT " running, %" G_GINT64_FORMAT " pending, %" G_GINT64_FORMAT
           " failed, %" G_GINT64_FORMAT " skipped\n",
           member_str(s, "id"),
           g_strcmp0(member_str(s, "kind"), "drain") == 0 ? "drain" : member_str(s, "policy"),
           host ? " of " : "", host ? host : "", state ? state : "?",
           finished && ok && JSON_NODE_HOLDS_VALUE(ok)
               ? (json_node_get_boolean(ok) ? " ok" : " with failures")
               : "",
           member_int(p, "total"), member_int(p, "done"), member_int(p, "running"),
           member_int(p, "pending"), member_int(p, "failed"), member_int(p, "skipped"));
    if (member_str(s, "reason"))
        printf("  reason: %s\n", member_str(s, "reason"));
    if (member_str(s, "error"))
        printf("  error: %s\n", member_str(s, "error"));
    if (late && json_array_get_length(late)) {
        printf("  predicted to miss the deadline:");
        for (guint i = 0; i < json_array_get_length(late); i++)
            printf("%s %s", i ? "," : "", json_array_get_string_element(late, i));
        printf("\n");
    }
    if (!moves || !list || !json_array_get_length(list))
        return;
    printf("  %-20s %-10s %-10s %-8s %8s  %s\n", "VM", "FROM", "TO", "STATE", "TIME", "DETAIL");
    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonObject *m = json_array_get_object_element(list, i);
        g_autofree char *time = move_time(m);
        const char *by = member_str(m, "driven_by");
        const char *detail = member_str(m, "detail");
        g_autofree char *by_text =
            by && g_strcmp0(by, "here") != 0
                ? g_strdup_printf("%s[run by %s's hotmigd]", detail ? " " : "", by)
                : g_strdup("");

        printf("  %-20s %-10s %-10s %-8s %8s  %s%s\n", member_str(m, "vm"), member_str(m, "from"),
               member_str(m, "to"), member_str(m, "state"), time, detail ? detail : "", by_text);
    }
}

static void print_event(JsonNode *event, gpointer data)
{
    JsonObject *e = JSON_NODE_HOLDS_OBJECT(event) ? json_node_get_object(event) : NULL;
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%H:%M:%S");
    const char *detail = member_str(e, "detail");
    const char *state = member_str(e, "state");

    if (!e)
        return;
    fprintf(stderr, "%s %s %s -> %s %s%s%s\n", stamp, member_str(e, "vm"), member_str(e, "from"),
            member_str(e, "to"), g_strcmp0(state, "running") == 0 ? "started" : state,
            detail ? ": " : "", detail ? detail : "");
}

/* Waits for schedule @id to end, printing each move's start and end on stderr; prints its
 * report; the exit status. */
static int wait_schedule(const char *socket, const char *id, gboolean json, guint timeout_s)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    g_autoptr(GError) error = NULL;
    JsonObject *s;
    JsonNode *ok;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, id);
    json_builder_end_object(b);
    args = json_builder_get_root(b);
    result = orch_local_call(socket, "wait", args, timeout_s, print_event, NULL, &error);
    if (!result) {
        fprintf(stderr, "migrate-vm: %s%s\n", error->message,
                g_error_matches(error, ORCH_ERROR, ORCH_ERROR_TIMEOUT)
                    ? " (the schedule goes on: migrate-vm status ID)"
                    : "");
        return orch_daemon_exit_status(error);
    }
    if (json)
        print_json(result);
    else if (JSON_NODE_HOLDS_OBJECT(result))
        print_schedule(json_node_get_object(result), TRUE);
    s = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    ok = s ? json_object_get_member(s, "ok") : NULL;
    return ok && JSON_NODE_HOLDS_VALUE(ok) && json_node_get_boolean(ok) ? EXIT_OK : EXIT_FAILED;
}

/* ---- drain -------------------------------------------------------------------------------------
 */

static int drain_main(int argc, char **argv)
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
         "Configuration file (default " HM_CONFIG_PATH_DEFAULT "): its [hotmigd] socket", "FILE"},
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
    socket = orch_daemon_socket(config, socket_opt, &error);
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
        return orch_daemon_exit_status(error);
    }
    r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    if (!r || !member_str(r, "id")) {
        fprintf(stderr, "migrate-vm drain: hotmigd answered without a schedule id\n");
        return EXIT_FAILED;
    }
    if (json && !wait) {
        print_json(result);
        return EXIT_OK;
    }
    late = member_array(r, "late");
    fprintf(wait ? stderr : stdout, "drain of %s: schedule %s %s\n", argv[1], member_str(r, "id"),
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
        printf("follow it: migrate-vm status %s\n", member_str(r, "id"));
        return EXIT_OK;
    }
    return wait_schedule(socket, member_str(r, "id"), json, (guint)timeout);
}

/* ---- run ----------------------------------------------------------------------------------------
 */

static int run_main(int argc, char **argv)
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
    socket = orch_daemon_socket(config, socket_opt, &error);
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
        return orch_daemon_exit_status(error);
    }
    r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    if (!r || !member_str(r, "id")) {
        fprintf(stderr, "migrate-vm run: hotmigd answered without a schedule id\n");
        return EXIT_FAILED;
    }
    if (!wait) {
        if (json)
            print_json(result);
        else
            printf("schedule %s started (%u moves); follow it: migrate-vm status %s\n",
                   member_str(r, "id"), plan->migrations->len, member_str(r, "id"));
        return EXIT_OK;
    }
    fprintf(stderr, "schedule %s started (%u moves)\n", member_str(r, "id"), plan->migrations->len);
    return wait_schedule(socket, member_str(r, "id"), json, (guint)timeout);
}

/* ---- status
 * --------------------------------------------------------------------------------------- */

static int status_main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("[ID] - hosts and schedules");
    g_autoptr(GError) error = NULL;
    g_autofree char *config = NULL;
    g_autofree char *socket_opt = NULL;
    g_autofree char *socket = NULL;
    g_autoptr(JsonNode) args = NULL;
    g_autoptr(JsonNode) result = NULL;
    gboolean json = FALSE;
    JsonObject *r;
    JsonObject *by_state;
    JsonArray *list;
    GOptionEntry entries[] = {
        {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print it as JSON", NULL},
        {"config", 0, 0, G_OPTION_ARG_FILENAME, &config, "Configuration file", "FILE"},
        {"socket", 0, 0, G_OPTION_ARG_FILENAME, &socket_opt,
         "hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
        {NULL, 0, 0, 0, NULL, NULL, NULL}};

    g_option_context_add_main_entries(ctx, entries, NULL);
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
    socket = orch_daemon_socket(config, socket_opt, &error);
    if (!socket) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_CONFIG;
    }
    if (argc == 2) {
        g_autoptr(JsonBuilder) b = json_builder_new();

        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, argv[1]);
        json_builder_end_object(b);
        args = json_builder_get_root(b);
    }
    result = orch_local_call(socket, "status", args, CLI_TIMEOUT_S, NULL, NULL, &error);
    if (!result) {
        fprintf(stderr, "migrate-vm status: %s\n", error->message);
        return orch_daemon_exit_status(error);
    }
    if (json) {
        print_json(result);
        return EXIT_OK;
    }
    r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    if (argc == 2) {
        if (r)
            print_schedule(r, TRUE);
        return EXIT_OK;
    }
    printf("hotmigd on %s, inventory taken %s\n", member_str(r, "host"),
           member_str(r, "inventory_taken") ? member_str(r, "inventory_taken") : "not yet");
    by_state = member_obj(r, "by_state");
    list = member_array(r, "hosts");
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

        if (member_str(h, "reason"))
            printf("  %s is %s: %s\n", member_str(h, "name"), member_str(h, "state"),
                   member_str(h, "reason"));
    }
    list = member_array(r, "schedules");
    printf("schedules:%s\n", list && json_array_get_length(list) ? "" : " none");
    for (guint i = 0; list && i < json_array_get_length(list); i++) {
        printf("  ");
        print_schedule(json_array_get_object_element(list, i), FALSE);
    }
    list = member_array(r, "migrations");
    if (list && json_array_get_length(list)) {
        printf("migrations run here for other hosts:\n");
        for (guint i = 0; i < json_array_get_length(list); i++) {
            JsonObject *m = json_array_get_object_element(list, i);

            printf("  %s  %s -> %s  %s%s%s\n", member_str(m, "id"), member_str(m, "domain"),
                   member_str(m, "destination"), member_str(m, "state"),
                   member_str(m, "error") ? ": " : "",
                   member_str(m, "error") ? member_str(m, "error") : "");
        }
    }
    list = member_array(r, "warnings");
    for (guint i = 0; list && i < json_array_get_length(list); i++)
        printf("warning: %s\n", json_array_get_string_element(list, i));
    return EXIT_OK;
}

/* ---- plan (from migrate-vm/plan.c)
 * ---------------------------------------------------------------------- */

int orch_daemon_plan(const char *socket, JsonNode *args, gboolean json, gboolean pretty,
                     gboolean timing)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) result =
        orch_local_call(socket, "plan", args, CLI_TIMEOUT_S, NULL, NULL, &error);
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *out = NULL;

    if (!result || !(plan = orch_plan_parse_node(result, "hotmigd's answer", &error))) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CONFLICT)
                   ? EXIT_FAILED
                   : orch_daemon_exit_status(error);
    }
    out = json ? orch_plan_format_json(plan, pretty, timing) : orch_plan_format_table(plan);
    fputs(out, stdout);
    if (json)
        fputc('\n', stdout);
    return EXIT_OK;
}

int orch_daemon_cli_main(int argc, char **argv)
{
    g_return_val_if_fail(argc > 0, EXIT_USAGE);
    if (g_str_equal(argv[0], "drain"))
        return drain_main(argc, argv);
    if (g_str_equal(argv[0], "status"))
        return status_main(argc, argv);
    if (g_str_equal(argv[0], "run"))
        return run_main(argc, argv);
    fprintf(stderr, "migrate-vm: unknown subcommand '%s'\n", argv[0]);
    return EXIT_USAGE;
}
