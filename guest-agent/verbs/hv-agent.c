/* libhotmig-verbs, agent link layer: the registration with this guest's agent (libhotmig: quiesce
 * and resume), the server that peers' requests reach, and the hooks lower layers call up through.
 */
#include "hv.h"
#include "hv-auth.h"
#include "hv-proto.h"
#include "hotmig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char hv_sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int hv_server_fd = -1;
static pthread_once_t hv_reg_once = PTHREAD_ONCE_INIT;

/* The server's bounds: connections (each a thread) at once; a caller sends its first frame
 * within HV_AUTH_CHALLENGE_MS of the challenge, each further one within HV_SERVER_IDLE_MS. */
#define HV_SERVER_CONNS_MAX 16
#define HV_SERVER_IDLE_MS 30000
static atomic_int hv_server_conns;

/* One routed connection: the challenge, then authenticated requests, each answered. */
static void *hv_conn_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char *line = malloc(HV_AUTH_LINE_MAX + 2);
    HvMsg *m = malloc(sizeof(*m)), *reply = malloc(sizeof(*reply));
    HvAuthSession s;
    int64_t deadline = hv_now_ms() + HV_AUTH_CHALLENGE_MS;
    uint8_t from[16];

    if (line && m && reply && hv_channel_accept(fd, &s) == 0)
        while (hv_channel_read(fd, &s, line, HV_AUTH_LINE_MAX + 2, m, from, deadline) == 0) {
            memset(reply, 0, sizeof(*reply));
            hv_peer_handle(m, from, reply);
            if (hv_channel_reply(fd, &s, from, reply) < 0)
                break;
            deadline = hv_now_ms() + HV_SERVER_IDLE_MS;
        }
    free(line);
    free(m);
    free(reply);
    close(fd);
    atomic_fetch_sub(&hv_server_conns, 1);
    return NULL;
}

static void *hv_server_thread(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_t t;
        int fd = accept4(hv_server_fd, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            hv_log("peer server stopped: %s", strerror(errno));
            return NULL;
        }
        if (atomic_fetch_add(&hv_server_conns, 1) >= HV_SERVER_CONNS_MAX) {
            atomic_fetch_sub(&hv_server_conns, 1);
            hv_log("a peer connection refused: %d already (a flood?)", HV_SERVER_CONNS_MAX);
            close(fd);
            continue;
        }
        if (pthread_create(&t, NULL, hv_conn_thread, (void *)(intptr_t)fd) != 0) {
            atomic_fetch_sub(&hv_server_conns, 1);
            close(fd);
            continue;
        }
        pthread_detach(t);
    }
}

/* Listens on RUN_DIR/<pid>.sock for the requests the agent routes to this process. */
static void hv_server_start(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    const char *dir = hv_routes_dir();
    pthread_t t;
    sigset_t all, old;
    int fd;

    if (!dir)
        return;
    if ((size_t)snprintf(hv_sock_path, sizeof(hv_sock_path), "%s/" HV_SOCKET_FILE_FMT, dir,
                         (long)getpid()) >= sizeof(hv_sock_path))
        return;
    memcpy(a.sun_path, hv_sock_path, sizeof(hv_sock_path));
    unlink(hv_sock_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
        hv_log("cannot listen on '%s': %s", hv_sock_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    hv_server_fd = fd;
    hv_routes_enable();
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, hv_server_thread, NULL) == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void hv_register_once(void)
{
    char name[64];
    extern char *program_invocation_short_name;
    const char *off = getenv("HOTMIG_VERBS_DISABLE");
    HotmigClient *client;

    if (off && *off && strcmp(off, "0") != 0) {
        hv_log("HOTMIG_VERBS_DISABLE is set: pass-through only, not migratable");
        return;
    }
    hv_peers_parse();
    hv_key_load();
    hv_server_start();
    snprintf(name, sizeof(name), "verbs:%.50s", program_invocation_short_name);
    for (char *s = name; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            *s = '_';
    client = hotmig_client_new(name, HOTMIG_MODE_THREADED, hv_quiesce, hv_resume, NULL);
    if (!client) {
        hv_log("no hotmig-agent (%s): this process is not migratable", strerror(errno));
        return;
    }
    hv_report_attach(client);
    hv_debug("registered with the agent as %s, peers: %zu", name, hv_peer_count());
}

/* The first ibv_open_device of a shadow device registers this process (hv_open_hook). */
static void hv_register_start(void)
{
    pthread_once(&hv_reg_once, hv_register_once);
}

__attribute__((constructor)) static void hv_agent_hooks(void)
{
    hv_open_hook = hv_register_start;
}
