/* hotmigd's local API: JSON lines on the Unix socket [hotmigd] socket (mode 0600: root only),
 * what `migrate-vm plan|drain|status|run` speak (docs/hotmigd.md, "The local API"). One request
 * per line, answered in order; a line is at most ORCH_LOCAL_API_MAX_LINE bytes:
 *
 *   {"execute": "plan",   "arguments": {"policy": "consolidate|drain|balance", "host": H, ...}}
 *   {"execute": "run",    "arguments": {"plan": PLAN, "reason": R}}
 *   {"execute": "drain",  "arguments": {"host": H, "deadline": UNIX_S, "reason": R}}
 *   {"execute": "status", "arguments": {"id": ID}}                  (arguments optional)
 *   {"execute": "wait",   "arguments": {"id": ID}}
 *   {"execute": "snapshot"}
 *
 * Replies: {"return": VALUE} or {"error": {"class": C, "desc": TEXT}}; `wait` sends
 * {"event": MOVE} lines while the schedule runs, then its {"return": STATUS}. Classes:
 * InvalidJSON, InvalidParameter, CommandNotFound, TooLarge (the connection is closed after it),
 * NotFound (unknown host or id), Conflict (no plan exists, a plan runs already), Failed.
 *
 * local-api.c is the transport and the parsing; the daemon (daemon.c) does the work through the
 * calls below, on the daemon's main context. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include "orchestrator/hotmigd-priv.h"
#include "policies/policies.h"

G_BEGIN_DECLS

#define ORCH_LOCAL_API_MAX_LINE (1024 * 1024) /* bytes of a request, newline included */
#define ORCH_LOCAL_API_MAX_CLIENTS 64

/* Error classes of the local API (the "class" of an error reply). */
typedef enum {
    ORCH_LOCAL_ERROR_INVALID_JSON,
    ORCH_LOCAL_ERROR_INVALID_PARAMETER,
    ORCH_LOCAL_ERROR_COMMAND_NOT_FOUND,
    ORCH_LOCAL_ERROR_TOO_LARGE,
    ORCH_LOCAL_ERROR_NOT_FOUND,
    ORCH_LOCAL_ERROR_CONFLICT,
    ORCH_LOCAL_ERROR_FAILED,
    ORCH_LOCAL_ERROR_LAST,
} OrchLocalErrorClass;

HM_ENUM_DECL(orch_local_error_class, OrchLocalErrorClass)

/* The class for an ORCH_ERROR. */
OrchLocalErrorClass orch_local_error_class_of(const GError *error);

/* Reads one request line (@len bytes without its newline; a final '\r' is dropped): UTF-8, one
 * JSON object nested at most 16 deep with "execute" (a string) and "arguments" (an object, may
 * be absent) only. Sets *@ret_command (owned) and *@ret_arguments (owned, NULL when absent);
 * on failure ORCH_ERROR_INVALID with *@ret_class the error class to answer. Pure: the fuzz
 * target local-request-fuzz feeds it. */
gboolean orch_local_request_parse(const char *line, gsize len, char **ret_command,
                                  JsonObject **ret_arguments, OrchLocalErrorClass *ret_class,
                                  GError **error);

/* ---- the listener (local-api.c) ------------------------------------------------------------ */

typedef struct OrchLocalApi OrchLocalApi;

/* Listens on @path (a stale socket file is replaced; a path holding something else is an
 * error), mode 0600, and serves @daemon's local API on the thread-default main context. */
OrchLocalApi *orch_local_api_new(Hotmigd *daemon, const char *path, GError **error);
void orch_local_api_free(OrchLocalApi *api);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchLocalApi, orch_local_api_free)

/* ---- the client (migrate-vm; local-api.c) -----------------------------------------------------
 */

/* Sends @command with @arguments (a JSON object, or NULL) to the hotmigd at @path and returns
 * its "return" value (owned). @event (may be NULL) gets each "event" line first. Waits at most
 * @timeout_s for the whole exchange (ORCH_ERROR_TIMEOUT). An error reply is ORCH_ERROR with its
 * class in the message's front ("NotFound: unknown host 'x'") and the code: INVALID
 * (InvalidParameter, InvalidJSON, TooLarge, CommandNotFound), NOT_FOUND, CONFLICT, FAILED;
 * an unreachable daemon is ORCH_ERROR_UNAVAILABLE naming the socket. */
JsonNode *orch_local_call(const char *path, const char *command, JsonNode *arguments,
                          guint timeout_s, void (*event)(JsonNode *event, gpointer data),
                          gpointer data, GError **error);

/* ---- the daemon's side (daemon.c) ---------------------------------------------------------- */

/* The result of an asynchronous call: @result (a JSON value) or @error, both taken. */
typedef void (*HotmigdDone)(JsonNode *result, GError *error, gpointer data);

typedef struct {
    PolPolicy policy;
    const char *host; /* drain: the host */
    gint min_stay_s;  /* < 0: [scheduler] min-stay (consolidate, balance) */
    double bandwidth; /* <= 0: [scheduler] bandwidth */
    gboolean pack_vcpus;
    gboolean keep_jobs;
    double tolerance; /* < 0: the default */
    gint max_moves;   /* < 0: none */
    gint host_value;  /* consolidate; < 0: [scheduler] host-value */
    gint max_migrations; /* consolidate; < 0: none */
} HotmigdPlanRequest;

/* A plan on a fresh inventory: the plan's JSON (orch_plan_format_json()). NOT_FOUND for an
 * unknown host, CONFLICT when no plan exists. */
void hotmigd_plan_async(Hotmigd *daemon, const HotmigdPlanRequest *req, HotmigdDone done,
                        gpointer data);

/* Runs @plan (taken) on a fresh inventory: {"id": ID}. INVALID when it does not replay on the
 * cluster as it is now (naming the step), CONFLICT when a plan runs already. */
void hotmigd_run_async(Hotmigd *daemon, PolPlan *plan, const char *reason, HotmigdDone done,
                       gpointer data);

/* hotmigd_evacuate() on a fresh inventory: {"id", "merged", "late": [VM...]}. */
void hotmigd_drain_async(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                         HotmigdDone done, gpointer data);

/* The live cluster in the snapshot format, from a fresh inventory (a JSON object). */
void hotmigd_snapshot_async(Hotmigd *daemon, HotmigdDone done, gpointer data);

/* Hosts by state, schedules (running and the last finished ones) and the migrations run here
 * for other hosts; with @id, that schedule alone with each move's report. NOT_FOUND for an
 * unknown id. Owned. */
JsonNode *hotmigd_status(Hotmigd *daemon, const char *id, GError **error);

/* Follows schedule @id: @fn gets each move's start and end ({"schedule", "vm", "from", "to",
 * "state", "detail"}), then, once, NULL when it has ended. Returns a watch id (> 0) for
 * hotmigd_unwatch(), 0 with NOT_FOUND. A schedule that has ended already gets the NULL at once
 * (from the main loop). */
typedef void (*HotmigdWatchFunc)(JsonNode *event, gpointer data); /* @event borrowed */
guint hotmigd_watch(Hotmigd *daemon, const char *id, HotmigdWatchFunc fn, gpointer data,
                    GError **error);
void hotmigd_unwatch(Hotmigd *daemon, guint watch);

G_END_DECLS
