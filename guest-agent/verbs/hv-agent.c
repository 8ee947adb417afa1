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
#include <time.h>
#include <unistd.h>

static char hv_sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int hv_server_fd = -1;
static pthread_once_t hv_reg_once = PTHREAD_ONCE_INIT;

/* The server's bounds (issue 28, "bounded broker"; docs/security.md, "Resources"; the numbers in
 * hv.h): connections (each a thread) at once, and of one remote address (the agent's FROM line);
 * a newcomer past either closes the oldest connection (of that address) whose caller has not yet
 * proved the job's key and that has had HV_SERVER_GRACE_MS for it, so neither a flood of silent
 * connections nor a burst of new ones keeps a migration's requests out. The agent's FROM comes at
 * once; the caller's first frame within HV_AUTH_CHALLENGE_MS of the challenge, each further one
 * within HV_SERVER_IDLE_MS. */
#define HV_SERVER_FROM_MS 1000
#define HV_SERVER_IDLE_MS 30000
#define HV_SERVER_WAIT_MS 1000 /* a newcomer waits this long for a slot */

typedef struct {
    int fd;      /* -1: free */
    int authed;  /* its caller's first frame verified: kept while it has a request */
    int busy;    /* a request of it is being answered */
    int evicted; /* shut down for a newer one: its thread is ending */
    int64_t since;
    char from[HV_PROTO_TEXT_MAX + 1]; /* "" until the agent's FROM */
} HvServerConn;

static pthread_mutex_t hv_server_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hv_server_freed = PTHREAD_COND_INITIALIZER;
static HvServerConn hv_server_conns[HV_SERVER_CONNS_MAX] = {
    [0 ... HV_SERVER_CONNS_MAX - 1] = {.fd = -1}};

/* The oldest connection that may be closed for a newer one (of @from when not NULL; never
 * @self): unauthenticated after its grace, or authenticated and idle between requests (each
 * caller sends one request a connection: an idle one only waits for its close, and a peer's
 * burst of requests, both ends moving, must not find them all taken). NULL when none. Under
 * hv_server_lock. */
static HvServerConn *hv_server_victim(const char *from, const HvServerConn *self)
{
    int64_t young = hv_now_ms() - HV_SERVER_GRACE_MS;
    HvServerConn *v = NULL;

    for (int i = 0; i < HV_SERVER_CONNS_MAX; i++) {
        HvServerConn *c = &hv_server_conns[i];

        if (c->fd < 0 || c == self || c->evicted || (c->authed ? c->busy : c->since > young) ||
            (from && strcmp(c->from, from) != 0))
            continue;
        if (!v || c->since < v->since)
            v = c;
    }
    return v;
}

/* Closes @c for a newer connection (its thread ends and frees the slot). Under the lock. */
static void hv_server_evict(HvServerConn *c, const char *why)
{
    hv_log("a peer connection from %s closed: %s, a newer one came", c->from[0] ? c->from : "?",
           why);
    c->evicted = 1;
    shutdown(c->fd, SHUT_RDWR);
}

/* A slot for @fd: a free one, else the oldest evictable connection's once its thread ended.
 * NULL: none within HV_SERVER_WAIT_MS (every caller holds the key or is within its grace). */
static HvServerConn *hv_server_take(int fd)
{
    int64_t deadline = hv_now_ms() + HV_SERVER_WAIT_MS;
    HvServerConn *slot = NULL;
    int asked = 0;

    pthread_mutex_lock(&hv_server_lock);
    for (;;) {
        int64_t until = hv_now_ms() + 100;

        for (int i = 0; i < HV_SERVER_CONNS_MAX && !slot; i++)
            if (hv_server_conns[i].fd < 0)
                slot = &hv_server_conns[i];
        if (slot || hv_now_ms() >= deadline)
            break;
        if (!asked) { /* one eviction; until one is possible, look again every 100 ms */
            HvServerConn *v = hv_server_victim(NULL, NULL);

            if (v) {
                hv_server_evict(v, "too many connections");
                asked = 1;
                until = deadline;
            }
        }
        {
            struct timespec ts = {.tv_sec = (time_t)(until / 1000),
                                  .tv_nsec = (long)(until % 1000) * 1000000L};

            pthread_cond_clockwait(&hv_server_freed, &hv_server_lock, CLOCK_MONOTONIC, &ts);
        }
    }
    if (slot) {
        memset(slot, 0, sizeof(*slot));
        slot->fd = fd;
        slot->since = hv_now_ms();
    }
    pthread_mutex_unlock(&hv_server_lock);
    return slot;
}

static void hv_server_release(HvServerConn *c)
{
    pthread_mutex_lock(&hv_server_lock);
    close(c->fd);
    c->fd = -1;
    pthread_cond_broadcast(&hv_server_freed);
    pthread_mutex_unlock(&hv_server_lock);
}

/* The agent's first line: where the connection comes from. Counted by that address: a newcomer
 * past HV_SERVER_PER_PEER_MAX closes that address's oldest evictable one, or is refused.
 * 0, or -1 (logged). */
static int hv_server_from(HvServerConn *c, HvMsg *m, char *line)
{
    int n = hv_read_line(c->fd, line, HV_AUTH_LINE_MAX + 2, hv_now_ms() + HV_SERVER_FROM_MS);
    int count = 0, r = 0;

    if (n < 0 || hv_proto_parse(line, (size_t)n, m) < 0 || m->type != HV_MSG_FROM) {
        hv_log("a peer connection refused: it did not come through the agent (no FROM line)");
        return -1;
    }
    pthread_mutex_lock(&hv_server_lock);
    for (int i = 0; i < HV_SERVER_CONNS_MAX; i++) {
        const HvServerConn *o = &hv_server_conns[i];

        count += o != c && o->fd >= 0 && !o->evicted && strcmp(o->from, m->text) == 0;
    }
    if (count >= HV_SERVER_PER_PEER_MAX) {
        HvServerConn *v = hv_server_victim(m->text, c);

        if (v) {
            hv_server_evict(v, "that address has too many connections");
        } else {
            hv_log("a peer connection from %s refused: it has %d connections, each "
                   "answering a request or within its first %d ms",
                   m->text, count, HV_SERVER_GRACE_MS);
            r = -1;
        }
    }
    if (r == 0)
        memcpy(c->from, m->text, sizeof(c->from));
    pthread_mutex_unlock(&hv_server_lock);
    return r;
}

/* One routed connection: the agent's FROM, the challenge, then authenticated requests, each
 * answered. */
static void *hv_conn_thread(void *arg)
{
    HvServerConn *c = arg;
    char *line = malloc(HV_AUTH_LINE_MAX + 2);
    HvMsg *m = malloc(sizeof(*m)), *reply = malloc(sizeof(*reply));
    HvAuthSession s;
    int64_t deadline = hv_now_ms() + HV_AUTH_CHALLENGE_MS;
    uint8_t from[16];

    if (line && m && reply && hv_server_from(c, m, line) == 0 && hv_channel_accept(c->fd, &s) == 0)
        while (hv_channel_read(c->fd, &s, line, HV_AUTH_LINE_MAX + 2, m, from, deadline) == 0) {
            int sent;

            pthread_mutex_lock(&hv_server_lock);
            c->authed = c->busy = 1;
            pthread_mutex_unlock(&hv_server_lock);
            memset(reply, 0, sizeof(*reply));
            hv_peer_handle(m, from, reply);
            sent = hv_channel_reply(c->fd, &s, from, reply);
            pthread_mutex_lock(&hv_server_lock);
            c->busy = 0;
            pthread_mutex_unlock(&hv_server_lock);
            if (sent < 0)
                break;
            deadline = hv_now_ms() + HV_SERVER_IDLE_MS;
        }
    free(line);
    free(m);
    free(reply);
    hv_server_release(c);
    return NULL;
}

/* Only the agent (root) and this process's own user may connect (the socket's mode aside). */
static int hv_server_peer_ok(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return 0;
    if (cred.uid == 0 || cred.uid == geteuid())
        return 1;
    hv_log("a peer connection refused: uid %u (pid %ld) is neither the agent's nor this "
           "process's",
           (unsigned)cred.uid, (long)cred.pid);
    return 0;
}

static void *hv_server_thread(void *arg)
{
    int lfd = (int)(intptr_t)arg;

    for (;;) {
        pthread_t t;
        HvServerConn *c;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            hv_log("peer server stopped: %s", strerror(errno));
            return NULL;
        }
        if (!hv_server_peer_ok(fd)) {
            close(fd);
            continue;
        }
        c = hv_server_take(fd);
        if (!c) {
            hv_log("a peer connection refused: %d already, each answering a request or within "
                   "its first %d ms",
                   HV_SERVER_CONNS_MAX, HV_SERVER_GRACE_MS);
            close(fd);
            continue;
        }
        if (pthread_create(&t, NULL, hv_conn_thread, c) != 0) {
            hv_server_release(c);
            continue;
        }
        pthread_detach(t);
    }
}

int hv_server_listen(int fd)
{
    pthread_t t;
    sigset_t all, old;
    int r;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    r = pthread_create(&t, NULL, hv_server_thread, (void *)(intptr_t)fd);
    if (r == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -r;
}

/* Listens on RUN_DIR/<pid>.sock for the requests the agent routes to this process. */
static void hv_server_start(void)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    const char *dir = hv_routes_dir();
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
    if (hv_server_listen(fd) < 0)
        hv_log("cannot start the peer server: its QPs' peers cannot reach them");
}

/* libhotmig's callbacks: the swap's, and what the standby path did told to the agent before
 * each answer (hv_report_standby(), "STATS"); a resume reports only after a quiesce that moved
 * (one that failed stayed on the device: nothing to report, hv_sb_report is an older move's).
 * libhotmig calls them one at a time. */
static int hv_agent_moved;

static int hv_agent_quiesce(void *opaque)
{
    int r = hv_quiesce(opaque);

    if (!r)
        hv_report_standby(&hv_sb_report, 0);
    hv_agent_moved = !r;
    return r;
}

static int hv_agent_resume(const char *device, void *opaque)
{
    int r = hv_resume(device, opaque);

    if (hv_agent_moved)
        hv_report_standby(&hv_sb_report, 1);
    hv_agent_moved = 0;
    return r;
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
    client = hotmig_client_new(name, HOTMIG_MODE_THREADED, hv_agent_quiesce, hv_agent_resume, NULL);
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
