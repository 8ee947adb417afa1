/* migrate-vm's subcommands (main.c dispatches to them from its table), one file each:
 * cmd-migrate.c (one migration, --recover, --dry-run: what runs without a subcommand),
 * cmd-config.c, cmd-plan.c, cmd-drain.c, cmd-run.c, cmd-status.c; local.c holds what those
 * asking this host's hotmigd over its local socket share (docs/operations.md). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "common/config.h"

G_BEGIN_DECLS

/* Exit statuses every subcommand shares; cmd-migrate.c adds the migration's own. */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_CONFIG = 4,
};

/* ---- the subcommands: argv[0] is the subcommand's name (the program's, for migrate); each
 * returns the exit status ----------------------------------------------------------------- */

int cmd_migrate_main(int argc, char **argv);
int cmd_config_main(int argc, char **argv);
int cmd_plan_main(int argc, char **argv);
int cmd_drain_main(int argc, char **argv);
int cmd_run_main(int argc, char **argv);
int cmd_status_main(int argc, char **argv);

/* Whether @config's migration settings go together, as a migration would find them (the
 * message names the clashing keys with their FILE:LINE). cmd-migrate.c. */
gboolean cmd_migrate_check_config(const HmConfig *config, GError **error);

/* Prints @text on stderr, each of its lines after "@prefix: " (a configuration's problems are
 * one per line: each line names the program). */
void cmd_print_lines(const char *prefix, const char *text);

/* ---- asking this host's hotmigd (local.c) -------------------------------------------------- */

#define CLI_TIMEOUT_S 60         /* an answer to a request */
#define CLI_WAIT_TIMEOUT_S 86400 /* --wait: how long the schedule may take (--timeout) */

/* The options of the subcommands that ask hotmigd, filled by two tables at file scope:
 * local_entries (--json, --config, --socket) and local_schedule_entries (--reason, --wait,
 * --timeout: drain and run). local_cli_reset() before parsing, local_cli_clear() after. */
typedef struct {
    char *config;
    char *socket;
    char *reason;
    gboolean json;
    gboolean wait;
    gint timeout; /* seconds, CLI_WAIT_TIMEOUT_S unless given */
} LocalCli;

extern LocalCli local_cli;
extern GOptionEntry local_entries[];
extern GOptionEntry local_schedule_entries[];
void local_cli_reset(void);
void local_cli_clear(void);

/* Asks hotmigd at local_cli's socket for @command with @args (may be NULL): its answer (owned),
 * *@ret_socket the socket (owned; may be NULL); or NULL with the error printed and
 * *@ret_status its exit status. */
JsonNode *local_ask(const char *command, JsonNode *args, char **ret_socket, int *ret_status);

/* The schedule that @command's answer @result started (borrowed from it), or NULL with "hotmigd
 * answered without a schedule id" printed. */
JsonObject *local_schedule_started(const char *command, JsonNode *result);

/* The local socket: @socket, else [hotmigd] socket of the configuration @config_path (NULL: the
 * default file when it exists, else the default). Owned; NULL with the configuration's error. */
char *local_socket(const char *config_path, const char *socket, GError **error);

/* The exit status for an error of the local API: 2 for a request refused as bad (INVALID,
 * NOT_FOUND), 4 for a bad configuration file, else 1. */
int local_exit_status(const GError *error);

/* `migrate-vm plan ...` without --snapshot: asks hotmigd at @socket for the plan described by
 * @args (the local API's "plan" arguments) and prints it as cmd-plan.c does. Exit status. */
int local_plan(const char *socket, JsonNode *args, gboolean json, gboolean pretty, gboolean timing);

/* Members of an answer, NULL or 0 when absent or of another type (borrowed). */
const char *local_member_str(JsonObject *o, const char *name);
gint64 local_member_int(JsonObject *o, const char *name);
JsonObject *local_member_obj(JsonObject *o, const char *name);
JsonArray *local_member_array(JsonObject *o, const char *name);

/* Prints an answer as JSON; a schedule (with each move when @moves) for people. */
void local_print_json(JsonNode *node);
void local_print_schedule(JsonObject *s, gboolean moves);

/* Follows schedule @id until it ends (at most @timeout_s), showing each move on stderr, then
 * prints its report (as JSON with @json). 0 when every move is done, else 1 (or the error's). */
int local_wait_schedule(const char *socket, const char *id, gboolean json, guint timeout_s);

G_END_DECLS
