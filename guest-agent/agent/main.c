/* hotmig-agent: the in-guest agent. Talks JSON to the host over a virtio-serial port and
 * text lines to the registered processes over a Unix socket (docs/design.md). */
#include "guest-agent/agent/agent-priv.h"
#include "guest-agent/agent/directory.h"
#include "guest-agent/agent/standby.h"
#include "guest-agent/libhotmig/hotmig.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AGENT_PORT_DEFAULT "org.hotmig.agent.0"
#define AGENT_PORT_RETRY_MS 200

typedef struct {
    GMainLoop *loop;
    int exit_code;
} AgentMain;

/* --daemonize: forks before anything else runs (GLib starts threads later). The parent waits
 * until the child says it is ready (socket listening, channel open) and exits 0, or exits 1
 * when the child failed. So "hotmig-agent --daemonize && start-workload" has no race. */
static int agent_daemonize(void)
{
    int fds[2];
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) < 0) {
        g_printerr("hotmig-agent: pipe: %s\n", g_strerror(errno));
        exit(1);
    }
    pid = fork();
    if (pid < 0) {
        g_printerr("hotmig-agent: fork: %s\n", g_strerror(errno));
        exit(1);
    }
    if (pid > 0) {
        char c;
        ssize_t n;

        close(fds[1]);
        do {
            n = read(fds[0], &c, 1);
        } while (n < 0 && errno == EINTR);
        _exit(n == 1 ? 0 : 1);
    }
    close(fds[0]);
    setsid();
    return fds[1];
}

static void agent_notify_ready(int *ready_fd)
{
    if (*ready_fd < 0)
        return;
    if (write(*ready_fd, "R", 1) != 1)
        g_warning("cannot notify the parent: %s", g_strerror(errno));
    close(*ready_fd);
    *ready_fd = -1;
}

/* --self-test: what an installation check needs to know, without starting. Exit 0 when the
 * binary and its libraries load, the socket directory can be created and the virtio port is
 * there; 1 when the installation is broken (socket directory); 3 when only the virtio port is
 * missing (a guest without the hotmig channel, or a build machine): the agent could not start. */
#define AGENT_SELF_TEST_NO_PORT 3

static int agent_self_test(const char *socket_path, const char *sysfs_root, const char *dev_root,
                           const char *port)
{
    g_autofree char *dir = g_path_get_dirname(socket_path);
    g_autofree char *path = NULL;
    g_autoptr(GError) error = NULL;

    g_print("hotmig-agent %s (protocol %d): self-test\n", HOTMIG_VERSION, AGENT_PROTOCOL_VERSION);
    if (g_mkdir_with_parents(dir, 0755) < 0 || access(dir, W_OK) < 0) {
        g_print("socket directory '%s': cannot create or write: %s\n", dir, g_strerror(errno));
        return 1;
    }
    g_print("socket directory '%s': ok\n", dir);
    path = agent_channel_find_port(sysfs_root, dev_root, port, &error);
    if (!path) {
        g_print("virtio port '%s': not found: %s\n", port, error->message);
        g_print("FAIL: no host channel; add the virtio-serial channel '%s' to the domain "
                "(docs/operations.md)\n",
                port);
        return AGENT_SELF_TEST_NO_PORT;
    }
    g_print("virtio port '%s': %s\n", port, path);
    g_print("ok\n");
    return 0;
}

static gboolean agent_main_quit(gpointer user_data)
{
    AgentMain *m = user_data;

    g_message("exiting");
    g_main_loop_quit(m->loop);
    return G_SOURCE_CONTINUE;
}

/* The command line, filled by the option table below (at file scope, as GOption wants
 * addresses). */
static struct {
    char *port;
    char *device;
    char *socket_path;
    char *sysfs_root;
    char *dev_root;
    char *socket_group;
    char *socket_mode;
    char *peer_listen;
    char *verbs_run_dir;
    char *directory;
    char *directory_seeds;
    gint directory_refresh;
    char *standby;
    char *standby_device;
    gboolean verbose;
    gboolean version;
    gboolean self_test;
    gboolean daemonize;
} cli;

static GOptionEntry cli_entries[] = {
    {"port", 'p', 0, G_OPTION_ARG_STRING, &cli.port,
     "virtio-serial port name (default " AGENT_PORT_DEFAULT ")", "NAME"},
    {"device", 'd', 0, G_OPTION_ARG_FILENAME, &cli.device,
     "talk to the host over PATH instead (a tty, fifo, unix socket, or fd:N)", "PATH"},
    {"socket", 's', 0, G_OPTION_ARG_FILENAME, &cli.socket_path,
     "process socket (default $" HOTMIG_AGENT_SOCKET_ENV " or " HOTMIG_AGENT_SOCKET_DEFAULT ")",
     "PATH"},
    {"socket-group", 'g', 0, G_OPTION_ARG_STRING, &cli.socket_group,
     "group of the process socket, so that its members' processes (MPI ranks run as the user) "
     "can register; with --socket-mode 0660 (default: root's group)",
     "GROUP"},
    {"socket-mode", 'm', 0, G_OPTION_ARG_STRING, &cli.socket_mode,
     "permissions of the process socket, octal (default 0600: root's processes only)", "MODE"},
    {"peer-listen", 0, 0, G_OPTION_ARG_STRING, &cli.peer_listen,
     "route libhotmig-verbs peers of other guests from ADDR:PORT (the control network)",
     "ADDR:PORT"},
    {"verbs-run-dir", 0, 0, G_OPTION_ARG_FILENAME, &cli.verbs_run_dir,
     "where libhotmig-verbs processes register (default " AGENT_VERBS_RUN_DIR_DEFAULT ")", "DIR"},
    {"directory", 0, 0, G_OPTION_ARG_STRING, &cli.directory,
     "with --peer-listen: announce this guest's RDMA ports to the other agents and keep their "
     "directory in the verbs run directory, on the multicast GROUP:PORT (default " AGENT_DIR_GROUP_DEFAULT
     "), on seeds only when ADDR:PORT is a unicast address to bind, or "
     "'off'",
     "GROUP:PORT|ADDR:PORT|off"},
    {"directory-seeds", 0, 0, G_OPTION_ARG_STRING, &cli.directory_seeds,
     "also announce to these agents (IPv4, port default the directory's), which relay what they "
     "hear: for control networks without multicast",
     "ADDR[:PORT],..."},
    {"directory-refresh", 0, 0, G_OPTION_ARG_INT, &cli.directory_refresh,
     "announce at least every SECONDS (default 10, at most 3600); an agent not heard for three "
     "times its period is forgotten",
     "SECONDS"},
    {"standby", 0, 0, G_OPTION_ARG_STRING, &cli.standby,
     "make a standby RDMA device (soft-RoCE, rdma_rxe) on the network interface IFACE (the "
     "control NIC, which migrates with the VM) for each move, from prepare to resume",
     "IFACE"},
    {"standby-device", 0, 0, G_OPTION_ARG_STRING, &cli.standby_device,
     "the standby RDMA device's name (default " AGENT_STANDBY_DEVICE_DEFAULT ")", "NAME"},
    {"sysfs-root", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_FILENAME, &cli.sysfs_root, NULL, NULL},
    {"dev-root", 0, G_OPTION_FLAG_HIDDEN, G_OPTION_ARG_FILENAME, &cli.dev_root, NULL, NULL},
    {"daemonize", 'D', 0, G_OPTION_ARG_NONE, &cli.daemonize,
     "go to the background once the socket listens and the channel is open", NULL},
    {"verbose", 'v', 0, G_OPTION_ARG_NONE, &cli.verbose, "log debug messages", NULL},
    {"version", 'V', 0, G_OPTION_ARG_NONE, &cli.version, "print the version and exit", NULL},
    {"self-test", 0, 0, G_OPTION_ARG_NONE, &cli.self_test,
     "check the installation (socket directory, virtio port), print what was found, exit 0 "
     "when all is there, 1 when the installation is broken, 3 without the virtio port",
     NULL},
    {NULL},
};

static void cli_clear(void)
{
    g_free(cli.port);
    g_free(cli.device);
    g_free(cli.socket_path);
    g_free(cli.sysfs_root);
    g_free(cli.dev_root);
    g_free(cli.socket_group);
    g_free(cli.socket_mode);
    g_free(cli.peer_listen);
    g_free(cli.verbs_run_dir);
    g_free(cli.directory);
    g_free(cli.directory_seeds);
    g_free(cli.standby);
    g_free(cli.standby_device);
    memset(&cli, 0, sizeof(cli));
}

/* The process socket: --socket, else $HOTMIG_AGENT_SOCKET, else the default (borrowed). */
static const char *cli_socket_path(void)
{
    const char *env = g_getenv(HOTMIG_AGENT_SOCKET_ENV);

    return cli.socket_path ? cli.socket_path : env && *env ? env : HOTMIG_AGENT_SOCKET_DEFAULT;
}

/* Opens the channel to the host: --device, else the virtio port. Owned; NULL with @error. */
static AgentChannel *agent_main_channel(Agent *agent, AgentMain *m, GError **error)
{
    g_autofree char *path = NULL;

    if (cli.device)
        return agent_channel_new_device(agent, cli.device, agent_main_quit, m, error);
    path = agent_channel_find_port(cli.sysfs_root ? cli.sysfs_root : "/sys",
                                   cli.dev_root ? cli.dev_root : "/dev",
                                   cli.port ? cli.port : AGENT_PORT_DEFAULT, error);
    return path ? agent_channel_new_port(agent, path, AGENT_PORT_RETRY_MS, error) : NULL;
}

static void agent_main_devices_changed(gpointer data)
{
    agent_dir_identity_changed(data);
}

/* The peer directory, on by default with --peer-listen: owned; NULL when off, when it cannot
 * have its socket (logged) and with @error for a bad option. */
static AgentDir *agent_main_directory(AgentUevent *uevent, GError **error)
{
    AgentDirConfig config = {
        .group = cli.directory,
        .seeds = cli.directory_seeds,
        .peer_listen = cli.peer_listen,
        .run_dir = cli.verbs_run_dir ? cli.verbs_run_dir : AGENT_VERBS_RUN_DIR_DEFAULT,
        .refresh_s = (guint)cli.directory_refresh,
        .verbs = &agent_ibverbs_ops,
    };
    AgentDir *dir;

    if (!cli.peer_listen || g_strcmp0(cli.directory, "off") == 0)
        return NULL;
    dir = agent_dir_new(&config, error);
    if (!dir && !g_error_matches(*error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID)) {
        /* the network, not the options: the agent's own work goes on without the directory */
        g_warning("peer directory off: %s", (*error)->message);
        g_clear_error(error);
    }
    if (dir && uevent)
        agent_uevent_set_func(uevent, agent_main_devices_changed, dir);
    return dir;
}

/* --standby: the agent makes the standby device at each prepare. A kernel or NIC without what
 * it needs is said once here (and in the inventory); the agent runs without it. */
static gboolean agent_main_standby(Agent *agent, GError **error)
{
    g_autoptr(AgentStandby) sb = NULL;
    g_autoptr(GError) local = NULL;

    if (!cli.standby)
        return TRUE;
    sb = agent_standby_new(cli.standby, cli.standby_device, &agent_rdma_link_ops, NULL, error);
    if (!sb)
        return FALSE;
    agent_standby_set_roots(sb, cli.sysfs_root, NULL);
    if (!agent_standby_check(sb, &local))
        g_warning("no standby RDMA device: %s", local->message);
    else
        g_message("standby RDMA device '%s' on '%s': made at each prepare",
                  agent_standby_get_device(sb), agent_standby_get_netdev(sb));
    agent_set_standby(agent, g_steal_pointer(&sb));
    return TRUE;
}

/* --peer-listen: the peer server (it routes other guests' verbs layers to the local process
 * owning a QP) into @ret_peer and the peer directory into @ret_directory, both owned; both NULL
 * without --peer-listen, the directory NULL when it is off or could not be had. */
static gboolean agent_main_peer(AgentUevent *uevent, AgentPeer **ret_peer,
                                AgentDir **ret_directory, GError **error)
{
    g_autoptr(AgentPeer) peer = NULL;
    g_autoptr(AgentDir) directory = NULL;

    if (!cli.peer_listen)
        return TRUE;
    peer = agent_peer_new(cli.peer_listen,
                          cli.verbs_run_dir ? cli.verbs_run_dir : AGENT_VERBS_RUN_DIR_DEFAULT,
                          error);
    if (!peer)
        return FALSE;
    directory = agent_main_directory(uevent, error);
    if (!directory && *error)
        return FALSE;
    *ret_peer = g_steal_pointer(&peer);
    *ret_directory = g_steal_pointer(&directory);
    return TRUE;
}

/* Runs the agent until SIGTERM or SIGINT (or the channel's end): the exit status. */
static int agent_main_run(const AgentSocketAccess *socket_access)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(Agent) agent = NULL;
    g_autoptr(AgentChannel) channel = NULL;
    g_autoptr(AgentUevent) uevent = NULL;
    g_autoptr(AgentPeer) peer = NULL;
    g_autoptr(AgentDir) directory = NULL;
    g_autoptr(GMainLoop) loop = NULL;
    g_autofree char *socket_path = g_strdup(cli_socket_path());
    AgentMain m = {0};
    int ready_fd = -1;
    guint sigterm_id;
    guint sigint_id;

    if (cli.daemonize)
        ready_fd = agent_daemonize();
    hm_log_setup("hotmig-agent", cli.verbose);
    signal(SIGPIPE, SIG_IGN);
    loop = g_main_loop_new(NULL, FALSE);
    m.loop = loop;
    agent = agent_new(&agent_ibverbs_ops, NULL);
    if (!agent_main_standby(agent, &error)) {
        g_warning("cannot start: --standby: %s", error->message);
        return 1;
    }
    /* RDMA devices coming and going wake a resume at once; without uevents it polls. */
    uevent = agent_uevent_new(agent, &error);
    if (!uevent) {
        g_message("no kernel uevents, a resume polls for the RDMA device: %s", error->message);
        g_clear_error(&error);
    }
    /* The socket first: processes may start as soon as the agent does. */
    if (!agent_listen(agent, socket_path, socket_access, &error)) {
        g_warning("cannot start: %s", error->message);
        return 1;
    }
    if (!agent_main_peer(uevent, &peer, &directory, &error)) {
        g_warning("cannot start: %s", error->message);
        return 1;
    }
    channel = agent_main_channel(agent, &m, &error);
    if (!channel) {
        g_warning("cannot start: %s", error->message);
        return 1;
    }
    sigterm_id = g_unix_signal_add(SIGTERM, agent_main_quit, &m);
    sigint_id = g_unix_signal_add(SIGINT, agent_main_quit, &m);
    g_message("started: version=%s pid=%d", HOTMIG_VERSION, (int)getpid());
    agent_notify_ready(&ready_fd);
    g_main_loop_run(loop);
    g_source_remove(sigterm_id);
    g_source_remove(sigint_id);
    return m.exit_code;
}

/* Parses and checks the command line: -1 to run, else the exit status (done, or bad usage). */
static int agent_main_parse(int argc, char **argv, AgentSocketAccess *socket_access)
{
    g_autoptr(GOptionContext) ctx = g_option_context_new("- hotmig in-guest agent");
    g_autoptr(GError) error = NULL;

    g_option_context_add_main_entries(ctx, cli_entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        g_printerr("hotmig-agent: %s\n", error->message);
        return 2;
    }
    if (cli.version) {
        g_print("hotmig-agent %s (protocol %d)\n", HOTMIG_VERSION, AGENT_PROTOCOL_VERSION);
        return 0;
    }
    if (argc > 1) {
        g_printerr("hotmig-agent: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    if (cli.port && cli.device) {
        g_printerr("hotmig-agent: --port and --device exclude each other\n");
        return 2;
    }
    if ((cli.directory || cli.directory_seeds || cli.directory_refresh) && !cli.peer_listen) {
        g_printerr("hotmig-agent: --directory, --directory-seeds and --directory-refresh need "
                   "--peer-listen (the peer port the directory announces)\n");
        return 2;
    }
    if (cli.directory_refresh < 0 || cli.directory_refresh > AGENT_DIR_REFRESH_S_MAX) {
        g_printerr("hotmig-agent: --directory-refresh %d is out of range [1, %d]\n",
                   cli.directory_refresh, AGENT_DIR_REFRESH_S_MAX);
        return 2;
    }
    if (cli.standby_device && !cli.standby) {
        g_printerr("hotmig-agent: --standby-device needs --standby (the network interface)\n");
        return 2;
    }
    if (cli.directory_seeds && g_strcmp0(cli.directory, "off") == 0) {
        g_printerr("hotmig-agent: --directory-seeds with --directory off\n");
        return 2;
    }
    if (!agent_socket_access_parse(cli.socket_group, cli.socket_mode, socket_access, &error)) {
        g_printerr("hotmig-agent: %s\n", error->message);
        return 2;
    }
    if (cli.self_test)
        return agent_self_test(cli_socket_path(), cli.sysfs_root ? cli.sysfs_root : "/sys",
                               cli.dev_root ? cli.dev_root : "/dev",
                               cli.port ? cli.port : AGENT_PORT_DEFAULT);
    return -1;
}

int main(int argc, char **argv)
{
    AgentSocketAccess socket_access = AGENT_SOCKET_ACCESS_DEFAULT;
    int status = agent_main_parse(argc, argv, &socket_access);

    if (status < 0)
        status = agent_main_run(&socket_access);
    cli_clear();
    return status;
}
