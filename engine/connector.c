/* The one place that opens a connection to a host: its libvirt (the libvirt adapter, fault
 * injection included) and its hotmigd (the HTTPS client with the options' certificate files),
 * or what the options' connector opens instead (tests' fakes). migrate-vm (a migration,
 * --dry-run, --recover) and hotmigd (its inventory, its moves, its pool's host) all connect
 * here. */
#include "engine/engine.h"

#include "engine/hotmigd-client.h"
#include "engine/virt.h"

OrchVirt *orch_connector_open_virt(const OrchOptions *opts, const char *uri, const char *label,
                                   GError **error)
{
    const OrchConnector *conn = opts ? opts->connector : NULL;
    const char *spec;
    OrchVirt *virt;

    if (conn && conn->open_virt)
        return conn->open_virt(uri, label, conn->data, error);
    virt = orch_virt_libvirt_open(uri, label, NULL, error);
    spec = g_getenv(ORCH_FAULT_ENV);
    if (!virt || !spec || !*spec)
        return virt;
    g_warning("Fault injection active on %s host: %s=%s", label, ORCH_FAULT_ENV, spec);
    return orch_virt_fault_wrap(virt, spec, error);
}

OrchHotmigdClient *orch_connector_open_hotmigd(const OrchOptions *opts, const char *url,
                                               GError **error)
{
    const OrchConnector *conn = opts->connector;

    if (conn && conn->open_hotmigd)
        return conn->open_hotmigd(url, conn->data, error);
    return orch_hotmigd_client_new(url, opts->tls_cert, opts->tls_key, opts->tls_ca,
                                   MAX(opts->hotmigd_timeout_ms / 1000, 1), error);
}
