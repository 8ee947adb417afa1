/* hotmigd's HTTP+JSON API over its VF pool (api.c, docs/hotmigd.md): requests (method, path,
 * body) -> replies (status, JSON): parsing, limits, errors as HTTP statuses; no transport, so
 * unit tests call it directly. Errors are ORCH_ERROR, mapped to statuses as pool.h says. */
#pragma once

#include <glib.h>

#include "engine/hotmigd-client.h"
#include "hotmigd/pool.h"

G_BEGIN_DECLS

#define ORCH_VFD_API_MAX_BODY (16 * 1024) /* request bodies larger than this: 413 */
#define ORCH_VFD_API_MAX_DEPTH 4          /* JSON nesting of a request body */
#define ORCH_VFD_API_MAX_STRING 256       /* holder, reason, domain, ids */

typedef struct {
    guint status; /* HTTP status */
    char *body;   /* JSON text (owned); errors are {"error": "message"} */
    char *log;    /* what the daemon logs about it: the error, or what changed; NULL for reads */
} OrchVfdReply;

void orch_vfd_reply_free(OrchVfdReply *reply);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdReply, orch_vfd_reply_free)

/* Handles one request: @method ("GET", ...), @path (percent-encoded as received, without the
 * query), @body (@len bytes, may be NULL when 0; not NUL-terminated). Never NULL. The pool's
 * requests only: the cluster's (below) answer 503 here. */
OrchVfdReply *orch_vfd_api_handle(OrchVfdPool *pool, const char *method, const char *path,
                                  const char *body, gsize len);

#define ORCH_VFD_API_MAX_REASON 1024 /* bytes of a "reason" */

/* What the daemon does beyond the pool (hotmigd/daemon.h), for the cluster's requests:
 *   POST /v1/migrations      migration_start: run a migration of one of this host's domains
 *   GET  /v1/migrations/ID   migration_get
 *   GET  /v1/snapshot        snapshot: the live cluster in the snapshot format (asynchronous:
 *                            it reads every host; @done is called later, on the same context)
 * Each may be NULL (then 503). Errors are ORCH_ERROR, mapped to statuses as for the pool. */
typedef void (*OrchVfdSnapshotDone)(char *json, GError *error, gpointer data); /* both taken */

typedef struct {
    gpointer data;
    char *(*migration_start)(gpointer data, const OrchVfdMigrationRequest *req, GError **error);
    OrchVfdMigration *(*migration_get)(gpointer data, const char *id, GError **error);
    void (*snapshot)(gpointer data, OrchVfdSnapshotDone done, gpointer done_data);
} OrchVfdServices;

typedef void (*OrchVfdReplyFunc)(OrchVfdReply *reply, gpointer data); /* @reply taken */

/* orch_vfd_api_handle() with the cluster's requests too: @cb gets the reply, at once (before
 * this returns) or later from @services' asynchronous calls, on the caller's context. @pool may
 * be NULL (its requests then answer 503). */
void orch_vfd_api_handle_async(OrchVfdPool *pool, const OrchVfdServices *services,
                               const char *method, const char *path, const char *body, gsize len,
                               OrchVfdReplyFunc cb, gpointer data);

/* The JSON of a migration as GET /v1/migrations/ID answers it (owned). */
char *orch_vfd_migration_format_json(const OrchVfdMigration *mig);

G_END_DECLS
