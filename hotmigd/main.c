/* hotmigd: each host's VF daemon. Serves this host's pool of VFs (leases, IB identity, vfio) to
 * the other hosts' migrate-vm over HTTPS with mutual TLS (docs/hotmigd.md).
 *
 *   hotmigd [--config FILE] [--foreground] [--verbose]
 *   hotmigd [--config FILE] --check-config
 *
 * It always runs in the foreground (a systemd Type=notify service: READY=1 once it listens);
 * SIGTERM and SIGINT stop it cleanly; SIGHUP reloads the configuration (hotmigd_reload()). Exit status: 0 stopped by a signal; 1 could not start
 * (certificates, address, lease store); 2 bad usage; 4 bad configuration file. The daemon
 * itself (pool, server, cluster work) is hotmigd/daemon.c (hotmigd/daemon.h). */
#define G_LOG_DOMAIN "hotmigd"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib-unix.h>

#include "common/config.h"
#include "hotmigd/alerts-hook.h"
#include "hotmigd/daemon.h"
#include "xml/xml.h"

enum {
    EXIT_STOPPED = 0,
    EXIT_FAILED = 1,
    EXIT_USAGE = 2,
    EXIT_CONFIG = 4,
};

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

/* A stop finishes within the unit's TimeoutStopSec (90 s): the migrations running here are
 * undone (their journals end) for at most this long; what is not undone by then is handed
 * over to the next start, which recovers the journals left (issue 15, item 8). */
#define HOTMIGD_STOP_TIMEOUT_S 75

static gpointer stop_watchdog(gpointer data)
{
    g_usleep(HOTMIGD_STOP_TIMEOUT_S * G_USEC_PER_SEC);
    g_warning("Stopping took %u s: the migrations still being undone are left to the next start "
              "of hotmigd, which recovers their journals",
              HOTMIGD_STOP_TIMEOUT_S);
    _exit(EXIT_STOPPED);
    return NULL;
}

static gboolean on_signal(gpointer data)
{
    GMainLoop *loop = data;

    g_message("Stopping (signal)");
    notify_systemd("STOPPING=1");
    g_main_loop_quit(loop);
    return G_SOURCE_CONTINUE;
}

typedef struct {
    Hotmigd *daemon;
    HotmigdAlertsHook *alerts;
    const char *config_path; /* --config, or NULL */
} Reload;

/* SIGHUP (systemctl reload): the file is read and checked again; a file that does not load or
 * check is refused, naming every problem, and the running configuration stays. */
static gboolean on_sighup(gpointer data)
{
    Reload *r = data;
    g_autoptr(HmConfig) config = NULL;
    g_autoptr(GError) error = NULL;

    notify_systemd("RELOADING=1");
    config = hm_config_open(r->config_path, &error);
    if (!config || !hm_config_check(config, HM_CONFIG_CHECK_DEFAULT, &error)) {
        g_warning("Reload refused, the running configuration stays: %s", error->message);
    } else {
        g_auto(GStrv) warnings = hm_config_warnings(config, HM_CONFIG_CHECK_DEFAULT);

        for (char **w = warnings; *w; w++)
            g_warning("%s", *w);
        if (r->alerts)
            hotmigd_alerts_hook_reload(r->alerts, config);
        hotmigd_reload(r->daemon, g_steal_pointer(&config));
    }
    notify_systemd("READY=1");
    return G_SOURCE_CONTINUE;
}

/* --check-config: what `migrate-vm config check` says about the file hotmigd would read, every
 * problem and warning on stderr, one a line; exit 0 or 4. */
static int check_config(const char *path)
{
    g_autoptr(HmConfigReport) report = hm_config_report_open(path, HM_CONFIG_CHECK_DEFAULT);

    for (char **e = report->errors; *e; e++)
        fprintf(stderr, "hotmigd: %s\n", *e);
    for (char **w = report->warnings; *w; w++)
        fprintf(stderr, "hotmigd: warning: %s\n", *w);
    if (!report->loaded || report->errors[0])
        return EXIT_CONFIG;
    fprintf(stderr, "hotmigd: '%s' is valid\n",
            hm_config_get_path(report->config) ? hm_config_get_path(report->config)
                                               : "the defaults");
    return EXIT_STOPPED;
}

static const char help_description[] =
    "The pool: [pool] pfs (every VF of these PFs), vfs (single VFs) and standins (network\n"
    "devices standing in for VFs, the emulated lab). TLS: [hotmigd] server-cert, server-key\n"
    "and ca-cert (by default the host's libvirt PKI); clients must present a certificate\n"
    "signed by that CA. Leases live in [hotmigd] run-dir/leases and survive a restart.\n"
    "\n"
    "SIGHUP (systemctl reload hotmigd) reads the file again: [migrate] and [scheduler] apply to\n"
    "what starts next, the alert token is read again, other changes are logged as waiting for\n"
    "a restart (which would end the migrations running here); a bad file is refused.\n"
    "\n"
    "Exit status:\n"
    "  0   stopped by SIGTERM or SIGINT; --check-config: the file is valid\n"
    "  1   could not start (certificates, listen address, lease store)\n"
    "  2   bad usage\n"
    "  4   the configuration file is unreadable or invalid (--check-config: every problem)\n"
    "\n"
    "See hotmigd(8) and docs/hotmigd.md.";

/* The command line. */
typedef struct {
    char *config_path; /* --config, or NULL */
    gboolean foreground, verbose, version, check;
} Cli;

static void cli_clear(Cli *cli)
{
    g_clear_pointer(&cli->config_path, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Cli, cli_clear)

/* Parses the command line into @cli: -1 to go on, else the exit status (the error printed). */
static int cli_parse(int *argc, char ***argv, Cli *cli)
{
    g_autoptr(GOptionContext) ctx = NULL;
    g_autoptr(GError) error = NULL;
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &cli->config_path,
         "Configuration file (default $" HM_CONFIG_ENV ", else " HM_CONFIG_PATH_DEFAULT
         " when it exists)",
         "FILE"},
        {"check-config", 0, 0, G_OPTION_ARG_NONE, &cli->check,
         "Check the configuration file, what it means too (certificate files, URIs, addresses), "
         "report every problem and exit (0 valid, 4 not)",
         NULL},
        {"foreground", 'f', 0, G_OPTION_ARG_NONE, &cli->foreground,
         "Run in the foreground (the only mode: hotmigd never forks; for systemd and scripts)",
         NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &cli->verbose, "Log every request, not only changes",
         NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &cli->version, "Print the version and exit", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };

    ctx = g_option_context_new("- serve this host's SR-IOV VFs to hotmig over mutual TLS");
    g_option_context_set_summary(
        ctx, "Leases this host's VFs to migrate-vm on other hosts, sets their InfiniBand GUIDs\n"
             "and binds them to vfio-pci, over HTTPS with client certificates; plans and runs\n"
             "the cluster's migrations (drain, consolidate, balance) from the local socket.");
    g_option_context_set_description(ctx, help_description);
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, argc, argv, &error)) {
        fprintf(stderr, "hotmigd: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (*argc > 1) {
        fprintf(stderr, "hotmigd: unexpected argument '%s' (see --help)\n", (*argv)[1]);
        return EXIT_USAGE;
    }
    return -1;
}

/* Loads the configuration and starts the daemon and its failure-prediction hook
 * (hotmigd/alerts-hook.c; docs/alerts.md): -1 when both run (*ret_daemon and *ret_alerts set,
 * owned), else the exit status (the error logged). */
static int start(const Cli *cli, Hotmigd **ret_daemon, HotmigdAlertsHook **ret_alerts)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = NULL;
    g_autoptr(Hotmigd) daemon = NULL;
    g_auto(GStrv) warnings = NULL;

    config = hm_config_open(cli->config_path, &error);
    if (!config) {
        g_critical("%s", error->message);
        return EXIT_CONFIG;
    }
    warnings = hm_config_warnings(config, HM_CONFIG_CHECK_DEFAULT);
    for (char **w = warnings; *w; w++)
        g_warning("%s", *w);
    daemon = hotmigd_new(g_steal_pointer(&config), NULL, &error);
    if (!daemon) {
        g_critical("%s", error->message);
        return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) ? EXIT_CONFIG : EXIT_FAILED;
    }
    *ret_alerts = hotmigd_alerts_hook_start(daemon, &error);
    if (!*ret_alerts) {
        g_critical("%s", error->message);
        return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) ? EXIT_CONFIG : EXIT_FAILED;
    }
    *ret_daemon = g_steal_pointer(&daemon);
    return -1;
}

/* The start message: where the daemon listens, whom it trusts. */
static void announce(Hotmigd *daemon)
{
    g_autofree char *listen = hm_config_listen_address(hotmigd_get_config(daemon));

    g_message(
        "hotmigd %s on %s listening on https://%s%s%s:%u (client certificates from CA '%s'); local API on '%s'",
        HOTMIG_VERSION, hotmigd_get_name(daemon), strchr(listen, ':') ? "[" : "",
        *listen ? listen : "*", strchr(listen, ':') ? "]" : "",
        hotmigd_get_port(daemon),
        hm_config_get_string(hotmigd_get_config(daemon), HM_CONFIG_HOTMIGD_CA_CERT),
        hotmigd_get_socket_path(daemon));
}

int main(int argc, char **argv)
{
    g_auto(Cli) cli = {0};
    g_autoptr(Hotmigd) daemon = NULL;
    g_autoptr(HotmigdAlertsHook) alerts = NULL;
    g_autoptr(GMainLoop) loop = NULL;
    guint sigterm, sigint, sighup;
    Reload reload = {0};
    int rc;

    xml_init(); /* before any thread */
    rc = cli_parse(&argc, &argv, &cli);
    if (rc >= 0)
        return rc;
    if (cli.version) {
        printf("hotmigd %s\n", HOTMIG_VERSION);
        return EXIT_STOPPED;
    }
    if (cli.check)
        return check_config(cli.config_path);
    hm_log_setup("hotmigd", cli.verbose);
    loop = g_main_loop_new(NULL, FALSE);
    rc = start(&cli, &daemon, &alerts);
    if (rc >= 0)
        return rc;
    sigterm = g_unix_signal_add(SIGTERM, on_signal, loop);
    sigint = g_unix_signal_add(SIGINT, on_signal, loop);
    reload = (Reload){.daemon = daemon, .alerts = alerts, .config_path = cli.config_path};
    sighup = g_unix_signal_add(SIGHUP, on_sighup, &reload);
    announce(daemon);
    notify_systemd("READY=1");
    g_main_loop_run(loop);

    g_source_remove(sigterm);
    g_source_remove(sigint);
    g_source_remove(sighup);
    g_thread_unref(g_thread_new("stop-watchdog", stop_watchdog, NULL));
    g_clear_pointer(&alerts, hotmigd_alerts_hook_stop);
    g_clear_pointer(&daemon, hotmigd_free);
    g_message("Stopped");
    return EXIT_STOPPED;
}
