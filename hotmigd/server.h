/* hotmigd's HTTP servers (server.c, the only file of the daemon that talks to libsoup): the
 * mutual-TLS listener that carries the API (api.h) and /v1/alerts, and the plain-HTTP listener
 * of the failure-prediction hook (alerts.h). */
#pragma once

#include <glib.h>

#include "hotmigd/alerts.h"
#include "hotmigd/api.h"
#include "hotmigd/pool.h"

G_BEGIN_DECLS

typedef struct {
    const char *listen; /* address to bind, "" or NULL: every address */
    guint port;         /* 0: any free port (tests; see orch_vfd_server_get_port) */
    const char *cert;   /* server certificate (PEM) */
    const char *key;    /* its private key (PEM) */
    const char *ca;     /* CA certificate(s) (PEM) client certificates must chain to */
} OrchVfdServerConfig;

typedef struct OrchVfdServer OrchVfdServer;

/* Loads the certificates and listens, serving @pool (borrowed; must outlive the server) from
 * the thread-default main context. Fails naming the file or the address. Owned result. */
OrchVfdServer *orch_vfd_server_new(const OrchVfdServerConfig *config, OrchVfdPool *pool,
                                   GError **error);
void orch_vfd_server_free(OrchVfdServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdServer, orch_vfd_server_free)

/* The port listened on. */
guint orch_vfd_server_get_port(const OrchVfdServer *server);

/* Serves the cluster's requests with @services (borrowed; must outlive the server; NULL: none). */
void orch_vfd_server_set_services(OrchVfdServer *server, const OrchVfdServices *services);

/* ---- the failure-prediction hook's listeners ------------------------------------------- */

/* The plain-HTTP listener (server.c): POST /v1/alerts/alertmanager (bearer token checked
 * before the body is read; no Content-Length 411, over 1 MiB 413) and GET /metrics, on
 * @listen (an IP address; "" every address) port @port (0: any free port, for tests). */
typedef struct OrchAlertListener OrchAlertListener;

OrchAlertListener *orch_alert_listener_new(const char *listen, guint port, OrchAlerts *alerts,
                                           GError **error);
void orch_alert_listener_free(OrchAlertListener *listener);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAlertListener, orch_alert_listener_free)
guint orch_alert_listener_get_port(const OrchAlertListener *listener);

/* The mutual-TLS server takes /v1/alerts to @alerts (borrowed; NULL: 404 again). */
void orch_vfd_server_set_alerts(OrchVfdServer *server, OrchAlerts *alerts);

G_END_DECLS
