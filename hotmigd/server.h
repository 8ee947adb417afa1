/* hotmigd's HTTP servers (server.c, the only file of the daemon that talks to libsoup): the
 * mutual-TLS listener that carries the API (api.h), and the plain-HTTP listener of the
 * failure-prediction hook. Both are transports only: what a request does is bound to them from
 * a table (HotmigdApi, OrchAlertListenerOps). */
#pragma once

#include <glib.h>

#include "hotmigd/api.h"
#include "hotmigd/metrics.h"
#include "hotmigd/pool.h"

G_BEGIN_DECLS

typedef struct {
    const char *listen; /* address to bind, "" or NULL: every address */
    guint port;         /* 0: any free port (tests; see hotmigd_server_get_port) */
    const char *cert;   /* server certificate (PEM) */
    const char *key;    /* its private key (PEM) */
    const char *ca;     /* CA certificate(s) (PEM) client certificates must chain to */
    const HotmigdAuthz *authz;     /* who may do what (borrowed; NULL: no client has a role) */
    const char *const *file_roots; /* [hotmigd] file-roots (borrowed; NULL: none) */
    guint max_connections;         /* 0: 256 */
    guint handshake_timeout_s;     /* to the first request; 0: 10 */
    guint idle_timeout_s;          /* 0: 60 */
} HotmigdServerConfig;

typedef struct HotmigdServer HotmigdServer;

/* Loads the certificates and listens, serving @pool (borrowed; must outlive the server) from
 * the thread-default main context. Fails naming the file or the address. Owned result. */
HotmigdServer *hotmigd_server_new(const HotmigdServerConfig *config, HotmigdPool *pool,
                                  GError **error);
void hotmigd_server_free(HotmigdServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdServer, hotmigd_server_free)

/* The port listened on. */
guint hotmigd_server_get_port(const HotmigdServer *server);

/* Serves the cluster's requests with @services (borrowed; must outlive the server; NULL: none). */
void hotmigd_server_set_services(HotmigdServer *server, const HotmigdApiServices *services);

/* The thread that runs the pool's requests (borrowed; lives as long as the server): whatever
 * else reads the pool goes through it (/metrics' VF counts). */
HotmigdApiWorker *hotmigd_server_get_worker(HotmigdServer *server);

/* ---- the failure-prediction hook's listeners ---------------------------------------------- */

/* What the plain-HTTP listener asks of its owner (the alert book, alerts.h). */
typedef struct {
    /* Does the Authorization header (NULL: none) carry the bearer token? FALSE with *ret_why
     * (owned) for the log when not. */
    gboolean (*authorized)(gpointer owner, const char *authorization, char **ret_why);
    /* POST /v1/alerts/alertmanager: an authorized body; @done gets the reply (taken) once. */
    void (*webhook)(gpointer owner, const char *body, gsize len, const char *peer,
                    HotmigdApiReplyFunc done, gpointer data);
    /* GET /metrics: @done gets the text once, maybe later (the request waits, paused; the
     * main loop goes on). */
    void (*metrics)(gpointer owner, HotmigdMetricsDone done, gpointer data);
    const char *metrics_content_type;
    gsize webhook_max_bytes; /* a larger Content-Length is refused (413) before it is read */
} OrchAlertListenerOps;

/* A plain-HTTP listener's connection limits, as the HTTPS server's (HotmigdServerConfig):
 * hotmigd gives both [hotmigd] max-connections, handshake-timeout and idle-timeout. */
typedef struct {
    guint max_connections;     /* 0: 256 */
    guint handshake_timeout_s; /* to the first request; 0: 10 */
    guint idle_timeout_s;      /* 0: 60 */
} OrchServerLimits;

/* The plain-HTTP listener: POST /v1/alerts/alertmanager (bearer token checked before the body
 * is read; no Content-Length 411, over @ops->webhook_max_bytes 413) and GET /metrics, on
 * @listen (an IP address; "" every address) port @port (0: any free port, for tests), each
 * request's work done by @ops on @owner (both borrowed: they outlive the listener). Its
 * connections are bounded as the HTTPS server's are, by @limits (NULL: the defaults): at most
 * max_connections (a newcomer closes the oldest that has not sent a request yet), each closed
 * when it has not sent its request within handshake_timeout_s or stays idle idle_timeout_s. */
typedef struct OrchAlertListener OrchAlertListener;

OrchAlertListener *orch_alert_listener_new(const char *listen, guint port,
                                           const OrchServerLimits *limits,
                                           const OrchAlertListenerOps *ops, gpointer owner,
                                           GError **error);
void orch_alert_listener_free(OrchAlertListener *listener);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAlertListener, orch_alert_listener_free)
guint orch_alert_listener_get_port(const OrchAlertListener *listener);

/* The mutual-TLS server takes /v1/alerts to @alerts with @data (borrowed; NULL: 404 again). */
void hotmigd_server_set_alerts(HotmigdServer *server, HotmigdApiAlertsFunc alerts, gpointer data);

G_END_DECLS
