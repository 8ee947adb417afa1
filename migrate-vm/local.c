/* What migrate-vm's subcommands that ask this host's hotmigd (its local API,
 * engine/local-protocol.h) share: finding the socket, reading and printing the answers,
 * following a schedule. The subcommands:
 *
 *   migrate-vm drain HOST [--deadline SEC] [--reason TEXT] [--wait] [--json]   cmd-drain.c
 *   migrate-vm status [ID] [--json]                                             cmd-status.c
 *   migrate-vm run PLAN_FILE [--reason TEXT] [--wait] [--json]                  cmd-run.c
 *   migrate-vm plan consolidate|drain HOST|balance (without --snapshot)         cmd-plan.c
 *
 * Exit status: 0 done (a drain or run with --wait: every move done); 1 failed (a move failed or
 * was skipped, no plan exists, hotmigd unreachable); 2 bad usage, or hotmigd refused the
 * request as bad (unknown host, bad argument); 4 bad configuration file. */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "engine/local-protocol.h"
#include "engine/plan-json.h"
#include "engine/snapshot.h"
#include "migrate-vm/commands.h"

char *local_socket(const char *config_path, const char *socket, GError **error)
{
    g_autoptr(HmConfig) config = NULL;

    if (socket)
        return g_strdup(socket);
    config = hm_config_open(config_path, error); /* --config, $HOTMIG_CONFIG, the default */
    if (!config)
        return NULL;
    return g_strdup(hm_config_get_string(config, HM_CONFIG_HOTMIGD_SOCKET));
}

/* ---- the options they share, at file scope as GOption wants addresses -------------------- */

LocalCli local_cli;

GOptionEntry local_entries[] = {
    {"json", 0, 0, G_OPTION_ARG_NONE, &local_cli.json, "Print the answer (or report) as JSON",
     NULL},
    {"config", 0, 0, G_OPTION_ARG_FILENAME, &local_cli.config,
     "Configuration file (default $" HM_CONFIG_ENV ", else " HM_CONFIG_PATH_DEFAULT "): its [hotmigd] socket", "FILE"},
    {"socket", 0, 0, G_OPTION_ARG_FILENAME, &local_cli.socket,
     "hotmigd's local socket (default: [hotmigd] socket)", "PATH"},
    {NULL, 0, 0, 0, NULL, NULL, NULL}};

GOptionEntry local_schedule_entries[] = {
    {"reason", 0, 0, G_OPTION_ARG_STRING, &local_cli.reason, "Why, for hotmigd's log and status",
     "TEXT"},
    {"wait", 0, 0, G_OPTION_ARG_NONE, &local_cli.wait,
     "Wait until every move ended, showing each, then print the report", NULL},
    {"timeout", 0, 0, G_OPTION_ARG_INT, &local_cli.timeout,
     "With --wait: stop waiting after SEC seconds (the schedule goes on; default 86400)", "SEC"},
    {NULL, 0, 0, 0, NULL, NULL, NULL}};

void local_cli_reset(void)
{
    local_cli_clear();
    local_cli.timeout = CLI_WAIT_TIMEOUT_S;
}

void local_cli_clear(void)
{
    g_free(local_cli.config);
    g_free(local_cli.socket);
    g_free(local_cli.reason);
    local_cli = (LocalCli){0};
}

JsonNode *local_ask(const char *command, JsonNode *args, char **ret_socket, int *ret_status)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *socket = local_socket(local_cli.config, local_cli.socket, &error);
    JsonNode *result;

    if (!socket) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        *ret_status = EXIT_CONFIG;
        return NULL;
    }
    result = orch_local_call(socket, command, args, CLI_TIMEOUT_S, NULL, NULL, &error);
    if (!result) {
        fprintf(stderr, "migrate-vm %s: %s\n", command, error->message);
        *ret_status = local_exit_status(error);
        return NULL;
    }
    if (ret_socket)
        *ret_socket = g_steal_pointer(&socket);
    return result;
}

JsonObject *local_schedule_started(const char *command, JsonNode *result)
{
    JsonObject *r = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;

    if (!r || !local_member_str(r, "id")) {
        fprintf(stderr, "migrate-vm %s: hotmigd answered without a schedule id\n", command);
        return NULL;
    }
    return r;
}

int local_exit_status(const GError *error)
{
    if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) ||
        g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND))
        return EXIT_USAGE;
    if (error->domain == HM_COMMON_ERROR)
        return EXIT_CONFIG;
    return EXIT_FAILED;
}

const char *local_member_str(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_STRING
               ? json_node_get_string(n)
               : NULL;
}

gint64 local_member_int(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_VALUE(n) && json_node_get_value_type(n) == G_TYPE_INT64
               ? json_node_get_int(n)
               : 0;
}

JsonObject *local_member_obj(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

JsonArray *local_member_array(JsonObject *o, const char *name)
{
    JsonNode *n = o ? json_object_get_member(o, name) : NULL;

    return n && JSON_NODE_HOLDS_ARRAY(n) ? json_node_get_array(n) : NULL;
}

void local_print_json(JsonNode *node)
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
    JsonObject *report = local_member_obj(m, "report");
    JsonNode *total = report ? json_object_get_member(report, "total_ms") : NULL;
    double s =
        total && JSON_NODE_HOLDS_VALUE(total)
            ? json_node_get_double(total) / 1000.0
            : seconds_between(local_member_str(m, "started"), local_member_str(m, "finished"));

    return s >= 0 ? g_strdup_printf("%.1f s", s) : g_strdup("-");
}

/* A schedule as text: its summary line, then one line per move. */
void local_print_schedule(JsonObject *s, gboolean moves)
{
    JsonObject *p = local_member_obj(s, "progress");
    JsonArray *late = local_member_array(s, "late");
    JsonArray *list = local_member_array(s, "moves");
    const char *host = local_member_str(s, "host");
    const char *state = local_member_str(s, "state");
    JsonNode *ok = json_object_get_member(s, "ok");
    gboolean finished = g_strcmp0(state, "finished") == 0;

    printf("%s  %s%s%s  %s%s  %" G_GINT64_FORMAT " moves: %" G_GINT64_FORMAT
           " done, %" G_GINT64_FORMAT " running, %" G_GINT64_FORMAT " pending, %" G_GINT64_FORMAT
           " failed, %" G_GINT64_FORMAT " skipped\n",
           local_member_str(s, "id"),
           g_strcmp0(local_member_str(s, "kind"), "drain") == 0 ? "drain"
                                                                : local_member_str(s, "policy"),
           host ? " of " : "", host ? host : "", state ? state : "?",
           finished && ok && JSON_NODE_HOLDS_VALUE(ok)
               ? (json_node_get_boolean(ok) ? " ok" : " with failures")
               : "",
           local_member_int(p, "total"), local_member_int(p, "done"),
           local_member_int(p, "running"), local_member_int(p, "pending"),
           local_member_int(p, "failed"), local_member_int(p, "skipped"));
    if (local_member_str(s, "reason"))
        printf("  reason: %s\n", local_member_str(s, "reason"));
    if (local_member_str(s, "error"))
        printf("  error: %s\n", local_member_str(s, "error"));
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
        const char *by = local_member_str(m, "driven_by");
        const char *detail = local_member_str(m, "detail");
        const char *job = local_member_str(m, "job");
        g_autofree char *by_text =
            by && g_strcmp0(by, "here") != 0
                ? g_strdup_printf("%s[run by %s's hotmigd]", detail ? " " : "", by)
                : g_strdup("");
        g_autofree char *job_text =
            job ? g_strdup_printf("%s[job %s]", detail || *by_text ? " " : "", job) : g_strdup("");

        printf("  %-20s %-10s %-10s %-8s %8s  %s%s%s\n", local_member_str(m, "vm"),
               local_member_str(m, "from"), local_member_str(m, "to"), local_member_str(m, "state"),
               time, detail ? detail : "", by_text, job_text);
    }
}

static void print_event(JsonNode *event, gpointer data)
{
    JsonObject *e = JSON_NODE_HOLDS_OBJECT(event) ? json_node_get_object(event) : NULL;
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%H:%M:%S");
    const char *detail = local_member_str(e, "detail");
    const char *state = local_member_str(e, "state");
    const char *job = local_member_str(e, "job");

    if (!e)
        return;
    fprintf(stderr, "%s %s%s%s%s %s -> %s %s%s%s\n", stamp, local_member_str(e, "vm"),
            job ? " (job " : "", job ? job : "", job ? ")" : "", local_member_str(e, "from"),
            local_member_str(e, "to"), g_strcmp0(state, "running") == 0 ? "started" : state,
            detail ? ": " : "", detail ? detail : "");
}

/* Waits for schedule @id to end, printing each move's start and end on stderr; prints its
 * report; the exit status. */
int local_wait_schedule(const char *socket, const char *id, gboolean json, guint timeout_s)
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
        return local_exit_status(error);
    }
    if (json)
        local_print_json(result);
    else if (JSON_NODE_HOLDS_OBJECT(result))
        local_print_schedule(json_node_get_object(result), TRUE);
    s = JSON_NODE_HOLDS_OBJECT(result) ? json_node_get_object(result) : NULL;
    ok = s ? json_object_get_member(s, "ok") : NULL;
    return ok && JSON_NODE_HOLDS_VALUE(ok) && json_node_get_boolean(ok) ? EXIT_OK : EXIT_FAILED;
}

/* ---- plan (for cmd-plan.c) ----------------------------------------------------------------- */

int local_plan(const char *socket, JsonNode *args, gboolean json, gboolean pretty, gboolean timing)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) result =
        orch_local_call(socket, "plan", args, CLI_TIMEOUT_S, NULL, NULL, &error);
    g_autoptr(PolPlan) plan = NULL;
    g_autofree char *out = NULL;

    if (!result || !(plan = orch_plan_parse_node(result, "hotmigd's answer", &error))) {
        fprintf(stderr, "migrate-vm plan: %s\n", error->message);
        return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CONFLICT) ? EXIT_FAILED
                                                                       : local_exit_status(error);
    }
    out = json ? orch_plan_format_json(plan, pretty, timing) : orch_plan_format_table(plan);
    fputs(out, stdout);
    if (json)
        fputc('\n', stdout);
    return EXIT_OK;
}
