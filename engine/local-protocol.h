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
 * This file is the wire format both ends share (local-protocol.c): the error classes, the
 * request parser, the client. The listener is hotmigd/local-api.c; the daemon (hotmigd/daemon.c)
 * binds the commands' work to it from a table. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/engine.h"

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

/* The JSON built by @b as one line of the protocol, its newline included (owned): requests and
 * answers alike. */
char *orch_local_line(JsonBuilder *b);

/* Reads one request line (@len bytes without its newline; a final '\r' is dropped): UTF-8, one
 * JSON object nested at most 16 deep with "execute" (a string) and "arguments" (an object, may
 * be absent) only. Sets *@ret_command (owned) and *@ret_arguments (owned, NULL when absent);
 * on failure ORCH_ERROR_INVALID with *@ret_class the error class to answer. Pure: the fuzz
 * target local-request-fuzz feeds it. */
gboolean orch_local_request_parse(const char *line, gsize len, char **ret_command,
                                  JsonObject **ret_arguments, OrchLocalErrorClass *ret_class,
                                  GError **error);

/* ---- the client (migrate-vm) ----------------------------------------------------------------- */

/* Sends @command with @arguments (a JSON object, or NULL) to the hotmigd at @path and returns
 * its "return" value (owned). @event (may be NULL) gets each "event" line first. Waits at most
 * @timeout_s for the whole exchange (ORCH_ERROR_TIMEOUT). An error reply is ORCH_ERROR with its
 * class in the message's front ("NotFound: unknown host 'x'") and the code: INVALID
 * (InvalidParameter, InvalidJSON, TooLarge, CommandNotFound), NOT_FOUND, CONFLICT, FAILED;
 * an unreachable daemon is ORCH_ERROR_UNAVAILABLE naming the socket. */
JsonNode *orch_local_call(const char *path, const char *command, JsonNode *arguments,
                          guint timeout_s, void (*event)(JsonNode *event, gpointer data),
                          gpointer data, GError **error);

G_END_DECLS
