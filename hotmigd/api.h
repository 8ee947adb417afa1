/* hotmigd's HTTP+JSON API over its VF pool (api.c, docs/hotmigd.md): requests (method, path,
 * body) -> replies (status, JSON): parsing, limits, errors as HTTP statuses; no transport, so
 * unit tests call it directly. Errors are ORCH_ERROR, mapped to statuses as pool.h says. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/hotmigd-client.h"
#include "hotmigd/authz.h"
#include "hotmigd/pool.h"

G_BEGIN_DECLS

#define HOTMIGD_API_MAX_BODY (16 * 1024) /* request bodies larger than this: 413 */
#define HOTMIGD_API_MAX_DEPTH 4          /* JSON nesting of a request body */
#define HOTMIGD_API_MAX_STRING 256       /* holder, reason, domain, ids */

typedef struct {
    guint status; /* HTTP status */
    char *body;   /* JSON text (owned); errors are {"error": "message"} */
    char *log;    /* what the daemon logs about it: the error, or what changed; NULL for reads */
} HotmigdApiReply;

void hotmigd_api_reply_free(HotmigdApiReply *reply);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdApiReply, hotmigd_api_reply_free)

/* A reply of @status whose body is @b's JSON, with @log (taken; may be NULL) (owned). */
HotmigdApiReply *hotmigd_api_reply_new(guint status, JsonBuilder *b, char *log);

/* A reply of @status whose body is {"error": MESSAGE}, logged as MESSAGE (owned); the message
 * is made valid UTF-8 (parts of a request are quoted in it). */
HotmigdApiReply *hotmigd_api_reply_error(guint status, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Handles one request: @method ("GET", ...), @path (percent-encoded as received, without the
 * query), @body (@len bytes, may be NULL when 0; not NUL-terminated). Never NULL. The pool's
 * requests only: the cluster's (below) answer 503 here. The caller has every role (tests and
 * fuzzing: the transport passes who the client is to hotmigd_api_dispatch()). */
HotmigdApiReply *hotmigd_api_handle(HotmigdPool *pool, const char *method, const char *path,
                                    const char *body, gsize len);

#define HOTMIGD_API_MAX_REASON 1024 /* bytes of a "reason" */

/* What the daemon does beyond the pool (hotmigd/daemon.h), for the cluster's requests:
 *   POST /v1/migrations      migration_start: run a migration of one of this host's domains
 *   GET  /v1/migrations/ID   migration_get
 *   GET  /v1/snapshot        snapshot: the live cluster in the snapshot format (asynchronous:
 *                            it reads every host; @done is called later, on the same context)
 * Each may be NULL (then 503). Errors are ORCH_ERROR, mapped to statuses as for the pool. */
typedef void (*HotmigdApiSnapshotDone)(char *json, GError *error, gpointer data); /* both taken */

typedef struct {
    gpointer data;
    char *(*migration_start)(gpointer data, const OrchHotmigdMigrationRequest *req, GError **error);
    OrchHotmigdMigration *(*migration_get)(gpointer data, const char *id, GError **error);
    void (*snapshot)(gpointer data, HotmigdApiSnapshotDone done, gpointer done_data);
} HotmigdApiServices;

typedef void (*HotmigdApiReplyFunc)(HotmigdApiReply *reply, gpointer data); /* @reply taken */

/* /v1/alerts: the failure-prediction hook's API (hotmigd_alerts_api_handle()): any method, from
 * @peer (for the log), who is @who (a POST must come from the host it names as 'from'). */
typedef HotmigdApiReply *(*HotmigdApiAlertsFunc)(gpointer data, const char *method,
                                                 const char *body, gsize len, const char *peer,
                                                 const HotmigdAuthzClient *who);

/* The thread the pool's requests run on (api.c): made on, and answering to, the thread-default
 * main context; at most @max_queued requests wait (0: HOTMIGD_API_WORKER_MAX_QUEUED), more are
 * answered 503 at once. Free it on that context, before the pool: it runs what is queued and
 * delivers the replies. */
#define HOTMIGD_API_WORKER_MAX_QUEUED 64
typedef struct HotmigdApiWorker HotmigdApiWorker;
HotmigdApiWorker *hotmigd_api_worker_new(guint max_queued);
void hotmigd_api_worker_free(HotmigdApiWorker *worker);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdApiWorker, hotmigd_api_worker_free)
/* Requests queued or running, not answered yet. */
guint hotmigd_api_worker_queued(const HotmigdApiWorker *worker);

/* The pool's VFs by state (@counts: ORCH_VF_STATE_LAST numbers, borrowed), or NULL with @why
 * (borrowed) when they were not counted. */
typedef void (*HotmigdApiCountsFunc)(const guint *counts, const char *why, gpointer data);

/* Counts @pool's VFs by state on @worker's thread, in turn with the pool's requests (the pool
 * and its host are used by that thread only; /metrics' VF gauges), and calls @done later, on
 * the worker's context; the caller never waits for the host. A count asked for while one is
 * queued or running joins it: counts take one place in the queue at most. When the queue is
 * full (max_queued requests wait), @done is called at once without counts. */
void hotmigd_api_worker_count_vfs(HotmigdApiWorker *worker, HotmigdPool *pool,
                                  HotmigdApiCountsFunc done, gpointer data);

/* What the API's methods are bound to. Each part may be NULL: the pool's requests and the
 * cluster's then answer 503, /v1/alerts 404. All borrowed. */
typedef struct {
    HotmigdPool *pool;
    /* Runs the pool's requests (NULL: on the caller's thread, at once: tests, fuzzing). */
    HotmigdApiWorker *worker;
    const HotmigdApiServices *services;
    HotmigdApiAlertsFunc alerts;
    gpointer alerts_data;
    /* Directories under which POST /v1/files may look ([hotmigd] file-roots; NULL-terminated;
     * NULL or empty: none, every path is refused). */
    const char *const *file_roots;
} HotmigdApi;

/* One request as the transport received it (all borrowed). */
typedef struct {
    const char *method; /* "GET", ... */
    const char *path;   /* percent-encoded as received, without the query */
    const char *body;   /* @len bytes, may be NULL when 0; not NUL-terminated */
    gsize len;
    const char *peer; /* "ADDRESS (SUBJECT)" of the client, for the log; NULL: unknown */
    const HotmigdAuthzClient
        *who; /* who the client is (its certificate's roles); NULL: nobody (403) */
} HotmigdApiRequest;

/* Routes @req to its method in the API's table (api.c): @cb gets the reply, at once (before
 * this returns) or later from @api's asynchronous services, on the caller's context. 404 for
 * a path that is no method's, 405 naming the allowed methods, 403 when @req->who has none of
 * the roles the method needs or acts on a lease another client holds (docs/security.md), 503
 * when what the method needs is not bound. */
void hotmigd_api_dispatch(const HotmigdApi *api, const HotmigdApiRequest *req,
                          HotmigdApiReplyFunc cb, gpointer data);

/* A request body as a JSON object (owned; an empty object for an empty body), checked before
 * json-glib sees it: at most HOTMIGD_API_MAX_BODY bytes (413), UTF-8 without NUL, nested at
 * most @max_depth levels, an object whose members are all in @known (NULL-terminated; NULL:
 * none); NULL with the 4xx reply in *ret_reply otherwise. The API's bodies and /v1/alerts'. */
JsonObject *hotmigd_api_body_object(const char *body, gsize len, const char *const *known,
                                    guint max_depth, HotmigdApiReply **ret_reply);

/* The JSON of a migration as GET /v1/migrations/ID answers it (owned). */
char *hotmigd_api_migration_format_json(const OrchHotmigdMigration *mig);

G_END_DECLS
