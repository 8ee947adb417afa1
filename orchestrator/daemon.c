/* hotmigd's daemon object (hotmigd-priv.h): the VF pool and its HTTPS server, and the cluster
 * work: inventory, schedules, evacuations. */
#define G_LOG_DOMAIN "hotmigd"

#include "orchestrator/hotmigd-priv.h"

#include <errno.h>

#include "orchestrator/vfd-server-priv.h"

/* How long binding a VF to vfio-pci may take (the kernel probes it synchronously). */
#define HOTMIGD_VFIO_TIMEOUT_MS 10000
/* How long libvirtd has to list its domains (which domain uses which VF) before a request that
 * needs it gets 503: the daemon serves one request at a time. */
#define HOTMIGD_LIBVIRT_TIMEOUT_MS 10000

struct Hotmigd {
    HmConfig *config;
    HotmigdOptions opts;
    char *name;
    OrchVfdPool *pool;
    OrchVfdServer *server;
    HotmigdEvacuationDone evacuation_done;
    gpointer evacuation_done_data;
    HotmigdStats stats;
};

const char *hotmigd_get_name(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->name;
}

const HmConfig *hotmigd_get_config(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->config;
}

gboolean hotmigd_has_host(Hotmigd *daemon, const char *host)
{
    g_return_val_if_fail(daemon != NULL, FALSE);
    return host && hm_config_find_host(daemon->config, host) != NULL;
}

static gboolean check_host(Hotmigd *daemon, const char *host, GError **error)
{
    if (hotmigd_has_host(daemon, host))
        return TRUE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND,
                "unknown host '%s': not one of the [host NAME] groups of '%s'", host ? host : "",
                hm_config_get_path(daemon->config) ? hm_config_get_path(daemon->config)
                                                   : "the configuration");
    return FALSE;
}

gboolean hotmigd_set_host_state(Hotmigd *daemon, const char *host, PolHostState state,
                                const char *reason, GError **error)
{
    g_return_val_if_fail(daemon != NULL, FALSE);
    if (!check_host(daemon, host, error))
        return FALSE;
    if (state != POL_HOST_OK && state != POL_HOST_QUARANTINED) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "host '%s': only ok and quarantined can be set, not '%s'", host,
                    pol_host_state_to_string(state));
        return FALSE;
    }
    return TRUE;
}

gboolean hotmigd_evacuate(Hotmigd *daemon, const char *host, gint64 deadline, const char *reason,
                          char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error)
{
    g_return_val_if_fail(daemon && ret_id && ret_merged && ret_late, FALSE);
    if (!check_host(daemon, host, error))
        return FALSE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "evacuating '%s': not implemented yet",
                host);
    return FALSE;
}

void hotmigd_set_evacuation_done(Hotmigd *daemon, HotmigdEvacuationDone cb, gpointer data)
{
    g_return_if_fail(daemon != NULL);
    daemon->evacuation_done = cb;
    daemon->evacuation_done_data = data;
}

void hotmigd_get_stats(Hotmigd *daemon, HotmigdStats *ret_stats)
{
    g_return_if_fail(daemon && ret_stats);
    *ret_stats = daemon->stats;
}

guint hotmigd_get_port(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, 0);
    return daemon->server ? orch_vfd_server_get_port(daemon->server) : 0;
}

const char *hotmigd_get_socket_path(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return hm_config_get_string(daemon->config, HM_CONFIG_HOTMIGD_SOCKET);
}

/* For the alert wiring (hotmigd-alerts.c). */
OrchVfdPool *hotmigd_get_pool(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->pool;
}

OrchVfdServer *hotmigd_get_server(Hotmigd *daemon)
{
    g_return_val_if_fail(daemon != NULL, NULL);
    return daemon->server;
}

/* ---- creating ---------------------------------------------------------------------------- */

static gboolean daemon_open_pool(Hotmigd *daemon, GError **error)
{
    const HmConfig *config = daemon->config;
    const char *run_dir = hm_config_get_string(config, HM_CONFIG_HOTMIGD_RUN_DIR);
    g_autofree char *lease_dir = g_build_filename(run_dir, "leases", NULL);
    g_auto(GStrv) pfs = hm_config_get_list(config, HM_CONFIG_POOL_PFS);
    g_auto(GStrv) vfs = hm_config_get_list(config, HM_CONFIG_POOL_VFS);
    g_auto(GStrv) standins = hm_config_get_list(config, HM_CONFIG_POOL_STANDINS);
    OrchVfdPoolConfig pool_config = {
        .host_name = g_get_host_name(),
        .lease_dir = lease_dir,
        .lease_ttl_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_LEASE_TTL),
        .pfs = (const char *const *)pfs,
        .vfs = (const char *const *)vfs,
        .standins = (const char *const *)standins,
    };
    gpointer host;

    if (g_mkdir_with_parents(run_dir, 0755) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot create the run directory '%s': %s", run_dir, g_strerror(errsv));
        return FALSE;
    }
    host = orch_vfd_host_new(hm_config_get_string(config, HM_CONFIG_HOTMIGD_SYSFS_ROOT),
                             hm_config_get_string(config, HM_CONFIG_HOTMIGD_CONNECT),
                             HOTMIGD_VFIO_TIMEOUT_MS, HOTMIGD_LIBVIRT_TIMEOUT_MS);
    daemon->pool = orch_vfd_pool_new(&pool_config, &orch_vfd_host_ops, host, error);
    if (!daemon->pool)
        return FALSE;
    g_message("Pool of %s: %u PFs, %u VFs, %u stand-ins; leases in '%s'",
              orch_vfd_pool_host_name(daemon->pool), g_strv_length(pfs), g_strv_length(vfs),
              g_strv_length(standins), lease_dir);
    return TRUE;
}

static gboolean daemon_listen_https(Hotmigd *daemon, GError **error)
{
    const HmConfig *config = daemon->config;
    OrchVfdServerConfig server_config = {
        .listen = hm_config_get_string(config, HM_CONFIG_HOTMIGD_LISTEN),
        .port = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_PORT),
        .cert = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_CERT),
        .key = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_KEY),
        .ca = hm_config_get_string(config, HM_CONFIG_HOTMIGD_CA_CERT),
    };

    g_autoptr(GError) local = NULL;

    daemon->server = orch_vfd_server_new(&server_config, daemon->pool, &local);
    if (!daemon->server) {
        /* Certificates that do not load are not a bad configuration file (exit 1, not 4). */
        local->code = ORCH_ERROR_FAILED;
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    return TRUE;
}

Hotmigd *hotmigd_new(HmConfig *config, const HotmigdOptions *opts, GError **error)
{
    g_autoptr(Hotmigd) daemon = g_new0(Hotmigd, 1);
    const char *name;

    g_return_val_if_fail(config != NULL, NULL);
    daemon->config = config;
    if (opts)
        daemon->opts = *opts;
    name = hm_config_get_string(config, HM_CONFIG_HOTMIGD_NAME);
    daemon->name = g_strdup(*name ? name : g_get_host_name());
    if (!daemon->opts.no_pool && !daemon_open_pool(daemon, error))
        return NULL;
    if (!daemon->opts.no_https && !daemon_listen_https(daemon, error))
        return NULL;
    return g_steal_pointer(&daemon);
}

void hotmigd_free(Hotmigd *daemon)
{
    if (!daemon)
        return;
    g_clear_pointer(&daemon->server, orch_vfd_server_free);
    g_clear_pointer(&daemon->pool, orch_vfd_pool_free);
    g_clear_pointer(&daemon->config, hm_config_free);
    g_free(daemon->name);
    g_free(daemon);
}
