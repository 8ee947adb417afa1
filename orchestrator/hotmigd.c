/* hotmigd: each host's VF daemon. Serves this host's pool of VFs (leases, IB identity, vfio) to
 * the other hosts' migrate-vm over HTTPS with mutual TLS (docs/hotmigd.md).
 *
 *   hotmigd [--config FILE] [--foreground] [--verbose]
 *
 * It always runs in the foreground (a systemd Type=notify service: READY=1 once it listens);
 * SIGTERM and SIGINT stop it cleanly. Exit status: 0 stopped by a signal; 1 could not start
 * (certificates, address, lease store); 2 bad usage; 4 bad configuration file. */
#define G_LOG_DOMAIN "hotmigd"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>

#include "common/config.h"
#include "orchestrator/alerts-daemon-priv.h"
#include "orchestrator/vfd-server-priv.h"

enum {
    EXIT_STOPPED = 0,
    EXIT_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_CONFIG = 4,
};

/* How long binding a VF to vfio-pci may take (the kernel probes it synchronously). */
#define HOTMIGD_VFIO_TIMEOUT_MS 10000
/* How long libvirtd has to list its domains (which domain uses which VF) before a request that
 * needs it gets 503: the daemon serves one request at a time. */
#define HOTMIGD_LIBVIRT_TIMEOUT_MS 10000

/* sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET, when set. */
static void notify_systemd(const char *state)
{
    const char *path = g_getenv("NOTIFY_SOCKET");
    g_autoptr(GSocket) sock = NULL;
    g_autoptr(GSocketAddress) addr = NULL;
    g_autoptr(GError) error = NULL;

    if (!path || !*path)
        return;
    if (path[0] == '@')
        addr = g_unix_socket_address_new_with_type(path + 1, -1, G_UNIX_SOCKET_ADDRESS_ABSTRACT);
    else
        addr = g_unix_socket_address_new(path);
    sock = g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_DATAGRAM, G_SOCKET_PROTOCOL_DEFAULT,
                        &error);
    if (!sock || g_socket_send_to(sock, addr, state, strlen(state), NULL, &error) < 0)
        g_warning("Cannot tell systemd '%s' through NOTIFY_SOCKET '%s': %s", state, path,
                  error->message);
}

static gboolean on_signal(gpointer data)
{
    GMainLoop *loop = data;

    g_message("Stopping (signal)");
    notify_systemd("STOPPING=1");
    g_main_loop_quit(loop);
    return G_SOURCE_CONTINUE;
}

/* --config FILE, else /etc/hotmig/hotmig.conf when it exists, else the defaults. */
static HmConfig *config_open(const char *path, GError **error)
{
    if (path)
        return hm_config_load(path, error);
    if (g_file_test(HM_CONFIG_PATH_DEFAULT, G_FILE_TEST_EXISTS))
        return hm_config_load(HM_CONFIG_PATH_DEFAULT, error);
    return hm_config_new();
}

static const char help_description[] =
    "The pool: [pool] pfs (every VF of these PFs), vfs (single VFs) and standins (network\n"
    "devices standing in for VFs, the emulated lab). TLS: [hotmigd] server-cert, server-key\n"
    "and ca-cert (by default the host's libvirt PKI); clients must present a certificate\n"
    "signed by that CA. Leases live in [hotmigd] run-dir/leases and survive a restart.\n"
    "\n"
    "Exit status:\n"
    "  0   stopped by SIGTERM or SIGINT\n"
    "  1   could not start (certificates, listen address, lease store)\n"
    "  2   bad usage\n"
    "  4   the configuration file is unreadable or invalid\n"
    "\n"
    "See hotmigd(8) and docs/hotmigd.md.";

int main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = NULL;
    g_autoptr(OrchVfdPool) pool = NULL;
    g_autoptr(OrchVfdServer) server = NULL;
    g_autoptr(HotmigdAlerts) alerts = NULL;
    g_autoptr(GMainLoop) loop = NULL;
    g_autofree char *config_path = NULL;
    g_autofree char *lease_dir = NULL;
    g_auto(GStrv) pfs = NULL;
    g_auto(GStrv) vfs = NULL;
    g_auto(GStrv) standins = NULL;
    gboolean foreground = FALSE, verbose = FALSE, version = FALSE;
    const char *run_dir, *listen;
    guint sigterm, sigint;
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config_path,
         "Configuration file (default " HM_CONFIG_PATH_DEFAULT " when it exists)", "FILE"},
        {"foreground", 'f', 0, G_OPTION_ARG_NONE, &foreground,
         "Run in the foreground (the only mode: hotmigd never forks; for systemd and scripts)",
         NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Log every request, not only changes",
         NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &version, "Print the version and exit", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    ctx = g_option_context_new("- serve this host's SR-IOV VFs to hotmig over mutual TLS");
    g_option_context_set_summary(
        ctx, "Leases this host's VFs to migrate-vm on other hosts, sets their InfiniBand GUIDs\n"
             "and binds them to vfio-pci, over HTTPS with client certificates.");
    g_option_context_set_description(ctx, help_description);
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "hotmigd: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (argc > 1) {
        fprintf(stderr, "hotmigd: unexpected argument '%s' (see --help)\n", argv[1]);
        return EXIT_USAGE;
    }
    if (version) {
        printf("hotmigd %s\n", HOTMIG_VERSION);
        return EXIT_STOPPED;
    }
    hm_log_setup("hotmigd", verbose);
    config = config_open(config_path, &error);
    if (!config) {
        g_critical("%s", error->message);
        return EXIT_CONFIG;
    }

    run_dir = hm_config_get_string(config, HM_CONFIG_HOTMIGD_RUN_DIR);
    if (g_mkdir_with_parents(run_dir, 0755) < 0) {
        int errsv = errno;

        g_critical("Cannot create the run directory '%s': %s", run_dir, g_strerror(errsv));
        return EXIT_FAILED;
    }
    lease_dir = g_build_filename(run_dir, "leases", NULL);
    pfs = hm_config_get_list(config, HM_CONFIG_POOL_PFS);
    vfs = hm_config_get_list(config, HM_CONFIG_POOL_VFS);
    standins = hm_config_get_list(config, HM_CONFIG_POOL_STANDINS);
    {
        OrchVfdPoolConfig pool_config = {
            .host_name = g_get_host_name(),
            .lease_dir = lease_dir,
            .lease_ttl_s = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_LEASE_TTL),
            .pfs = (const char *const *)pfs,
            .vfs = (const char *const *)vfs,
            .standins = (const char *const *)standins,
        };
        gpointer host =
            orch_vfd_host_new(hm_config_get_string(config, HM_CONFIG_HOTMIGD_SYSFS_ROOT),
                              hm_config_get_string(config, HM_CONFIG_HOTMIGD_CONNECT),
                              HOTMIGD_VFIO_TIMEOUT_MS, HOTMIGD_LIBVIRT_TIMEOUT_MS);

        pool = orch_vfd_pool_new(&pool_config, &orch_vfd_host_ops, host, &error);
        if (!pool) {
            g_critical("%s", error->message);
            return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) ? EXIT_CONFIG
                                                                          : EXIT_FAILED;
        }
    }

    loop = g_main_loop_new(NULL, FALSE);
    listen = hm_config_get_string(config, HM_CONFIG_HOTMIGD_LISTEN);
    {
        OrchVfdServerConfig server_config = {
            .listen = listen,
            .port = hm_config_get_uint(config, HM_CONFIG_HOTMIGD_PORT),
            .cert = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_CERT),
            .key = hm_config_get_string(config, HM_CONFIG_HOTMIGD_SERVER_KEY),
            .ca = hm_config_get_string(config, HM_CONFIG_HOTMIGD_CA_CERT),
        };

        server = orch_vfd_server_new(&server_config, pool, &error);
        if (!server) {
            g_critical("%s", error->message);
            return EXIT_FAILED;
        }
    }
    /* The failure-prediction hook (hotmigd-alerts.c; docs/alerts.md). */
    {
        const char *name = hm_config_get_string(config, HM_CONFIG_HOTMIGD_NAME);
        g_autofree char *described = NULL;

        alerts =
            hotmigd_alerts_start(config, *name ? name : g_get_host_name(), pool, server, &error);
        if (!alerts) {
            g_critical("%s", error->message);
            return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) ? EXIT_CONFIG
                                                                          : EXIT_FAILED;
        }
        described = hotmigd_alerts_describe(alerts);
        g_message("%s", described);
    }
    sigterm = g_unix_signal_add(SIGTERM, on_signal, loop);
    sigint = g_unix_signal_add(SIGINT, on_signal, loop);
    g_message(
        "hotmigd %s on %s listening on https://%s:%u (client certificates from CA '%s'); pool: %u PFs, %u VFs, %u stand-ins; leases in '%s'",
        HOTMIG_VERSION, orch_vfd_pool_host_name(pool), *listen ? listen : "*",
        orch_vfd_server_get_port(server), hm_config_get_string(config, HM_CONFIG_HOTMIGD_CA_CERT),
        g_strv_length(pfs), g_strv_length(vfs), g_strv_length(standins), lease_dir);
    notify_systemd("READY=1");
    g_main_loop_run(loop);

    g_source_remove(sigterm);
    g_source_remove(sigint);
    g_clear_pointer(&alerts, hotmigd_alerts_stop);
    g_clear_pointer(&server, orch_vfd_server_free);
    g_message("Stopped");
    return EXIT_STOPPED;
}
