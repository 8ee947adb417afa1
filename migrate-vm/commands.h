/* migrate-vm's subcommands beside one migration (main.c dispatches to them): plan (plan.c), and
 * those that ask this host's hotmigd over its local socket (local.c): drain, status, run, and
 * plan without --snapshot (docs/operations.md). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* `migrate-vm plan ...` (plan.c): argv[0] is "plan". Returns the exit status. */
int orch_plan_cli_main(int argc, char **argv);

/* `migrate-vm drain|status|run ...`: argv[0] is the subcommand. Returns the exit status. */
int orch_daemon_cli_main(int argc, char **argv);

/* `migrate-vm plan ...` without --snapshot: asks hotmigd at @socket for the plan described by
 * @args (the local API's "plan" arguments) and prints it as plan-cli does. Exit status. */
int orch_daemon_plan(const char *socket, JsonNode *args, gboolean json, gboolean pretty,
                     gboolean timing);

/* The local socket: @socket, else [hotmigd] socket of the configuration @config_path (NULL: the
 * default file when it exists, else the default). Owned; NULL with the configuration's error. */
char *orch_daemon_socket(const char *config_path, const char *socket, GError **error);

/* The exit status for an error of the local API: 2 for a request refused as bad (INVALID,
 * NOT_FOUND), 4 for a bad configuration file, else 1. */
int orch_daemon_exit_status(const GError *error);

G_END_DECLS
