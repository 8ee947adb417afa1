/* libhotmig-verbs, peer link layer: the peers (HOTMIG_VERBS_PEERS), a call to another process's
 * layer through its guest's agent (ROUTE, then one request), the route records the agent reads
 * (RUN_DIR/qp-<vqpn>: the pid and the route's tag), and the reports to this guest's agent
 * (peers, refused calls). */
#include "hv.h"
#include "hv-auth.h"
#include "hv-proto.h"
#include "hotmig.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* HOTMIG_VERBS_PEERS (an override of the agents' directory): a 1,000-guest job fits */
#define HV_PEERS_MAX 1024
#define HV_PEERS_ENV_MAX 65536
#define HV_CONNECT_MS 3000
/* A peer guest whose vCPU is starved (a flood of processes in it) answers a SYN late: connects
 * that time out are tried again within this; a refusal is final (no agent listens there). */
#define HV_CONNECT_WINDOW_MS 9000
#define HV_CALL_MS 20000 /* a peer's drain may wait for its own traffic */

typedef struct {
    uint8_t gid[16];
    struct sockaddr_storage addr;
    socklen_t alen;
} HvPeer;

static HvPeer hv_peers[HV_PEERS_MAX];
static size_t hv_npeers;
static char hv_run_dir[108] = HV_RUN_DIR_DEFAULT;
static pthread_once_t hv_run_dir_once = PTHREAD_ONCE_INIT;
static int hv_run_dir_ok;
static atomic_int hv_routes_on; /* the agent link's server listens: QPs are registered */
static HotmigClient *hv_client; /* set once registered (hv_report_attach) */
static uint8_t hv_key[HV_AUTH_KEY_MAX]; /* the job's (hv_key_load; the channel below) */
static size_t hv_key_len;

/* HOTMIG_VERBS_PEERS: "GID=ADDR[,GID=ADDR...]"; GID an IPv4 address (the RoCE GID
 * ::ffff:a.b.c.d) or an IPv6 address / GID; ADDR the peer guest's control address, IPv4 or
 * IPv6, with the agent's peer port HOTMIG_VERBS_PEER_PORT (default 7475). */
void hv_peers_parse(void)
{
    const char *env = getenv("HOTMIG_VERBS_PEERS");
    const char *port_env = getenv("HOTMIG_VERBS_PEER_PORT");
    long port = HV_PEER_PORT_DEFAULT;
    char *copy, *save = NULL, *item;

    if (port_env && *port_env) {
        char *end;
        port = strtol(port_env, &end, 10);
        if (*end || port < 1 || port > 65535) {
            hv_log("HOTMIG_VERBS_PEER_PORT '%s' is not a port: using %d", port_env,
                   HV_PEER_PORT_DEFAULT);
            port = HV_PEER_PORT_DEFAULT;
        }
    }
    if (!env || !*env)
        return;
    if (strlen(env) > HV_PEERS_ENV_MAX) {
        hv_log("HOTMIG_VERBS_PEERS is longer than %d bytes: ignored (the agents' directory "
               "finds the peers)", HV_PEERS_ENV_MAX);
        return;
    }
    copy = strdup(env);
    if (!copy)
        return;
    for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        HvPeer p = {0};
        struct in_addr a4;
        struct in6_addr a6;

        if (!eq) {
            hv_log("HOTMIG_VERBS_PEERS entry '%s' is not GID=ADDR: ignored", item);
            continue;
        }
        if (hv_npeers == HV_PEERS_MAX) {
            hv_log("HOTMIG_VERBS_PEERS names more than %d peers: '%s' and the rest ignored (the "
                   "agents' directory finds them)", HV_PEERS_MAX, item);
            break;
        }
        *eq = '\0';
        if (inet_pton(AF_INET, item, &a4) == 1) {
            p.gid[10] = p.gid[11] = 0xff;
            memcpy(&p.gid[12], &a4, 4);
        } else if (inet_pton(AF_INET6, item, &a6) == 1) {
            memcpy(p.gid, &a6, 16);
        } else {
            hv_log("HOTMIG_VERBS_PEERS: '%s' is neither an IPv4 address nor a GID: ignored", item);
            continue;
        }
        if (inet_pton(AF_INET, eq + 1, &a4) == 1) {
            struct sockaddr_in *s = (struct sockaddr_in *)&p.addr;
            s->sin_family = AF_INET;
            s->sin_port = htons((uint16_t)port);
            s->sin_addr = a4;
            p.alen = sizeof(*s);
        } else if (inet_pton(AF_INET6, eq + 1, &a6) == 1) {
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)&p.addr;
            s->sin6_family = AF_INET6;
            s->sin6_port = htons((uint16_t)port);
            s->sin6_addr = a6;
            p.alen = sizeof(*s);
        } else {
            hv_log("HOTMIG_VERBS_PEERS: '%s' is not an IP address: ignored", eq + 1);
            continue;
        }
        hv_peers[hv_npeers++] = p;
    }
    free(copy);
}

/* RUN_DIR/directory, when the run dir exists. */
static const char *hv_dir_path(char *buf, size_t size)
{
    const char *dir = hv_routes_dir();

    if (!dir || (size_t)snprintf(buf, size, "%s/" HV_DIR_FILE, dir) >= size)
        return NULL;
    return buf;
}

/* Where @gid's agent answers: HOTMIG_VERBS_PEERS first, then the directory. 1 or 0. */
static int hv_peer_find(const union ibv_gid *gid, HvPeer *out)
{
    char path[sizeof(hv_run_dir) + sizeof(HV_DIR_FILE) + 1];
    const char *dir;
    HvDirEntry e;

    for (size_t i = 0; i < hv_npeers; i++)
        if (memcmp(hv_peers[i].gid, gid->raw, 16) == 0) {
            *out = hv_peers[i];
            return 1;
        }
    dir = hv_dir_path(path, sizeof(path));
    if (!dir || hv_dir_lookup_gid(dir, gid->raw, &e) != 1)
        return 0;
    memcpy(out->gid, e.gid, 16);
    out->addr = e.addr;
    out->alen = e.alen;
    return 1;
}

int hv_peer_gid_of_lid(uint16_t lid, union ibv_gid *gid)
{
    char path[sizeof(hv_run_dir) + sizeof(HV_DIR_FILE) + 1];
    const char *dir = hv_dir_path(path, sizeof(path));
    HvDirEntry e;

    if (!dir || hv_dir_lookup_lid(dir, lid, &e) != 1)
        return 0;
    memcpy(gid->raw, e.gid, 16);
    return 1;
}

size_t hv_peer_count(void)
{
    return hv_npeers;
}

int hv_peer_known(const union ibv_gid *gid)
{
    HvPeer p;

    return hv_peer_find(gid, &p);
}

int hv_write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one line (without its newline) of at most @max - 1 bytes before @deadline. Reads byte
 * by byte: the connection changes hands after a line (agent -> layer). */
int hv_read_line(int fd, char *buf, size_t max, int64_t deadline)
{
    size_t n = 0;

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - hv_now_ms();
        char c;
        ssize_t r;

        if (left <= 0)
            return -ETIMEDOUT;
        r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        r = recv(fd, &c, 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ECONNRESET;
        if (c == '\n') {
            buf[n] = '\0';
            return (int)n;
        }
        if (n + 1 >= max)
            return -EMSGSIZE;
        buf[n++] = c;
    }
}

/* One connect to @p's agent within HV_CONNECT_MS: a socket, or -errno. */
static int hv_peer_connect_once(const HvPeer *p)
{
    int fd = socket(p->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int r;

    if (fd < 0)
        return -errno;
    r = connect(fd, (const struct sockaddr *)&p->addr, p->alen);
    if (r < 0 && errno == EINPROGRESS) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof(err);
        int pr = poll(&pf, 1, HV_CONNECT_MS);

        if (pr == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) {
            r = 0;
        } else {
            r = -1;
            errno = pr == 0 ? ETIMEDOUT : (err ? err : ECONNREFUSED);
        }
    }
    if (r < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

/* A connection to @p's agent, connects that time out tried again until @until. */
static int hv_peer_connect(const HvPeer *p, int64_t until)
{
    for (;;) {
        int fd = hv_peer_connect_once(p);

        if (fd >= 0 || (fd != -ETIMEDOUT && fd != -EAGAIN) || hv_now_ms() + HV_CONNECT_MS > until)
            return fd;
        hv_debug("the agent at the peer's address did not answer within %d ms: trying again",
                 HV_CONNECT_MS);
    }
}

int hv_peer_call(const union ibv_gid *gid, uint32_t vqpn, const char *req, char *reply,
                 size_t reply_max)
{
    HvPeer peer, *p = &peer;
    char line[96];
    HvMsg m;
    int fd, r;
    int64_t deadline;

    if (!hv_peer_find(gid, &peer))
        return -EHOSTUNREACH;
    if (!hv_key_len) {
        hv_log("QP %u: no HOTMIG_VERBS_KEY: its peer cannot be asked", vqpn);
        return -ENOKEY;
    }
    fd = hv_peer_connect(p, hv_now_ms() + HV_CONNECT_WINDOW_MS);
    if (fd < 0)
        return fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    memset(&m, 0, sizeof(m));
    m.type = HV_MSG_ROUTE;
    m.target = vqpn;
    hv_route_tag(vqpn, m.tag);
    deadline = hv_now_ms() + HV_CALL_MS;
    r = hv_proto_format(&m, line, sizeof(line));
    if (r > 0)
        r = hv_write_all(fd, line, (size_t)r);
    if (r == 0)
        r = hv_read_line(fd, reply, reply_max, deadline);
    if (r >= 0 && (hv_proto_parse(reply, (size_t)r, &m) < 0 || m.type != HV_MSG_ROUTED)) {
        hv_log("the peer agent did not route QP %u: %s (no such QP, or its process holds another "
               "HOTMIG_VERBS_KEY or none)",
               vqpn, reply);
        r = -EHOSTUNREACH;
    }
    if (r >= 0)
        r = hv_channel_call(fd, vqpn, req, reply, reply_max, deadline);
    close(fd);
    return r < 0 ? r : 0;
}

static int hv_mkdirs(const char *path)
{
    char tmp[sizeof(hv_run_dir)];

    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(tmp, 0755);
            *s = '/';
        }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

/* HOTMIG_VERBS_RUN_DIR (default HV_RUN_DIR_DEFAULT), made once. */
static void hv_run_dir_make(void)
{
    const char *dir = getenv("HOTMIG_VERBS_RUN_DIR");

    if (dir && *dir) {
        if (strlen(dir) >= sizeof(hv_run_dir) - 1 || dir[0] != '/') {
            hv_log("HOTMIG_VERBS_RUN_DIR '%s' is not an absolute path of < %zu bytes: using %s",
                   dir, sizeof(hv_run_dir) - 1, hv_run_dir);
        } else {
            snprintf(hv_run_dir, sizeof(hv_run_dir), "%s", dir);
        }
    }
    if (hv_mkdirs(hv_run_dir) < 0)
        hv_log("cannot create '%s': peers cannot reach this process", hv_run_dir);
    else
        hv_run_dir_ok = 1;
}

const char *hv_routes_dir(void)
{
    pthread_once(&hv_run_dir_once, hv_run_dir_make);
    return hv_run_dir_ok ? hv_run_dir : NULL;
}

void hv_routes_enable(void)
{
    atomic_store(&hv_routes_on, 1);
}

int hv_qp_route_add(HvQp *qp)
{
    char path[sizeof(hv_run_dir) + 32], data[HV_ROUTE_FILE_MAX];
    int fd, n;

    if (!atomic_load(&hv_routes_on) || !hv_key_len) /* without a key nobody could route */
        return 0;
    snprintf(path, sizeof(path), "%s/" HV_ROUTE_FILE_FMT, hv_run_dir, qp->pub.qp_num);
    /* a new file, never through a link: a record left by a dead process of this user is
     * replaced; another user's (the run dir is sticky) or a live one's is not. Readable by
     * this user (and the agent, root) only: it holds the route's tag */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && !hv_route_taken(qp->pub.qp_num) && unlink(path) == 0)
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;

        hv_log("cannot register QP %u in '%s': %s: peers cannot reach it, its connection will "
               "not survive a migration",
               qp->pub.qp_num, path, strerror(e));
        return -e;
    }
    n = hv_route_record(data, sizeof(data), qp->pub.qp_num);
    if (n < 0 || write(fd, data, (size_t)n) != n)
        hv_log("cannot write '%s'", path);
    close(fd);
    qp->routed_vqpn = qp->pub.qp_num;
    return 0;
}

void hv_qp_route_del(HvQp *qp)
{
    char path[sizeof(hv_run_dir) + 32];

    if (!qp->routed_vqpn)
        return;
    snprintf(path, sizeof(path), "%s/" HV_ROUTE_FILE_FMT, hv_run_dir, qp->routed_vqpn);
    unlink(path);
    qp->routed_vqpn = 0;
}

/* Another live process registered @vqpn (the numbering is per device, the routes per guest). */
int hv_route_taken(uint32_t vqpn)
{
    char path[sizeof(hv_run_dir) + 32], data[HV_ROUTE_FILE_MAX] = {0};
    int fd;
    long pid;

    snprintf(path, sizeof(path), "%s/" HV_ROUTE_FILE_FMT, hv_run_dir, vqpn);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    if (read(fd, data, sizeof(data) - 1) <= 0)
        data[0] = '\0';
    close(fd);
    pid = strtol(data, NULL, 10);
    return pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) == 0;
}

/* ---- job inventory (branch jobs, issue 18 item 3) ----------------------------------------
 * Refused calls are kept (at most 16) and reported to the agent once registered; peers are
 * reported as their QPs reach RTR. The agent keeps them distinct and bounded. */
#define HV_REFUSED_MAX 16
static pthread_mutex_t hv_report_lock = PTHREAD_MUTEX_INITIALIZER;
static char hv_refused[HV_REFUSED_MAX][65];
static size_t hv_nrefused;

static HotmigClient *hv_client_get(void)
{
    return __atomic_load_n(&hv_client, __ATOMIC_ACQUIRE);
}

/* "ibv_create_qp of this QP type" -> "ibv_create_qp_of_this_QP_type" (a token of <= 64 bytes) */
static void hv_refused_token(char *out, size_t size, const char *call)
{
    size_t i = 0;

    for (; call[i] && i + 1 < size && i < 64; i++)
        out[i] = ((unsigned char)call[i] <= 0x20 || (unsigned char)call[i] >= 0x7f) ? '_' : call[i];
    out[i] = '\0';
}

static void hv_report_refused(const char *call)
{
    HotmigClient *c = hv_client_get();
    char tok[65];

    hv_refused_token(tok, sizeof(tok), call);
    pthread_mutex_lock(&hv_report_lock);
    if (hv_nrefused < HV_REFUSED_MAX)
        memcpy(hv_refused[hv_nrefused++], tok, sizeof(tok));
    pthread_mutex_unlock(&hv_report_lock);
    if (c && hotmig_client_report_refused(c, tok) < 0)
        hv_log("could not tell the agent that %s was refused", tok);
}

void hv_report_attach(HotmigClient *c)
{
    __atomic_store_n(&hv_client, c, __ATOMIC_RELEASE);
    pthread_mutex_lock(&hv_report_lock); /* calls refused before the registration */
    for (size_t i = 0; i < hv_nrefused; i++)
        hotmig_client_report_refused(c, hv_refused[i]);
    pthread_mutex_unlock(&hv_report_lock);
}

void hv_report_peer(const uint8_t gid[16], uint32_t qpn)
{
    HotmigClient *c = hv_client_get();
    char hex[33];

    if (!c)
        return;
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", gid[i]);
    hotmig_client_report_peer(c, hex, qpn & 0xffffff);
}

static unsigned long long hv_report_clamp(uint64_t v, unsigned long long max)
{
    return v > max ? max : v;
}

void hv_report_standby(const HvSbReport *r, int back)
{
    HotmigClient *c = hv_client_get();
    HotmigStandbyStats st = {
        .used = r->used ? 1 : 0,
        .switched = (unsigned)hv_report_clamp(r->switched, HOTMIG_STANDBY_QPS_MAX),
        .paused = (unsigned)hv_report_clamp(r->paused, HOTMIG_STANDBY_QPS_MAX),
        .sends = back ? hv_report_clamp(r->sends, HOTMIG_STANDBY_COUNT_MAX) : 0,
        .recvs = back ? hv_report_clamp(r->recvs, HOTMIG_STANDBY_COUNT_MAX) : 0,
    };
    int64_t ms = back ? r->back_ms : r->switch_ms;

    st.ms = (unsigned)hv_report_clamp(ms < 0 ? 0 : (uint64_t)ms, HOTMIG_STANDBY_MS_MAX);

    if (c && hotmig_client_report_standby(c, &st) < 0)
        hv_log("could not tell the agent what the standby path did");
}
__attribute__((constructor)) static void hv_report_init(void)
{
    hv_refused_hook = hv_report_refused; /* from the load on: refused calls reach the agent */
}
/* ---- end job inventory ------------------------------------------------------------------ */

/* ---- the authenticated channel (issue 28; docs/security.md, "The verbs peer protocol") -----
 * Every request and reply between two layers travels in a frame sealed with the job's key
 * (hv-auth.h): the called layer's CHALLENGE, the caller's nonce and the request's number bind
 * it to its connection, once. The key: HOTMIG_VERBS_KEY_FILE (a file only its owner may read)
 * or HOTMIG_VERBS_KEY, handed to the ranks at launch (mpirun -x) like HOTMIG_VERBS_PEERS. */

static int hv_key_file(const char *path)
{
    struct stat st;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (fd < 0) {
        hv_log("HOTMIG_VERBS_KEY_FILE '%s' cannot be opened: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0007) ||
        st.st_uid != geteuid()) {
        hv_log("HOTMIG_VERBS_KEY_FILE '%s' is not a regular file of this user that others cannot "
               "read: not used",
               path);
        close(fd);
        return -1;
    }
    n = read(fd, hv_key, sizeof(hv_key));
    close(fd);
    while (n > 0 && (hv_key[n - 1] == '\n' || hv_key[n - 1] == '\r'))
        n--;
    if (n < HV_AUTH_KEY_MIN || (size_t)n >= sizeof(hv_key)) {
        hv_log("HOTMIG_VERBS_KEY_FILE '%s' holds %zd bytes, not %d to %d: not used", path, n,
               HV_AUTH_KEY_MIN, HV_AUTH_KEY_MAX - 1);
        return -1;
    }
    hv_key_len = (size_t)n;
    return 0;
}

void hv_key_load(void)
{
    const char *file = getenv("HOTMIG_VERBS_KEY_FILE"), *key = getenv("HOTMIG_VERBS_KEY");

    hv_key_len = 0;
    if (file && *file) {
        hv_key_file(file);
    } else if (key && *key) {
        size_t n = strlen(key);

        if (n < HV_AUTH_KEY_MIN || n >= sizeof(hv_key))
            hv_log("HOTMIG_VERBS_KEY holds %zu bytes, not %d to %d: not used", n, HV_AUTH_KEY_MIN,
                   HV_AUTH_KEY_MAX - 1);
        else
            memcpy(hv_key, key, (hv_key_len = n));
    }
    if (!hv_key_len)
        hv_log("no usable HOTMIG_VERBS_KEY or HOTMIG_VERBS_KEY_FILE: peers' requests are refused "
               "and this process's connections will not survive a migration");
}

int hv_key_set(const void *key, size_t len)
{
    if (len && (len < HV_AUTH_KEY_MIN || len >= sizeof(hv_key)))
        return -EINVAL;
    if (len)
        memcpy(hv_key, key, len);
    hv_key_len = len;
    return 0;
}

void hv_route_tag(uint32_t vqpn, uint8_t tag[HV_ROUTE_TAG_LEN])
{
    hv_auth_route_tag(hv_key, hv_key_len, vqpn, tag);
}

int hv_route_record(char *buf, size_t size, uint32_t vqpn)
{
    uint8_t tag[HV_ROUTE_TAG_LEN];
    char hex[2 * HV_ROUTE_TAG_LEN + 1];
    int n;

    hv_route_tag(vqpn, tag);
    for (int i = 0; i < HV_ROUTE_TAG_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", tag[i]);
    n = snprintf(buf, size, "%ld %s\n", (long)getpid(), hex);
    return n < 0 || (size_t)n >= size ? -ENOSPC : n;
}

/* A nonce: the kernel's randomness (getrandom blocks only before the pool is first seeded). */
static void hv_random(uint8_t *v, size_t n)
{
    while (n) {
        ssize_t r = getrandom(v, n, 0);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            abort(); /* no randomness: a nonce that repeats would let frames be replayed */
        v += r;
        n -= (size_t)r;
    }
}

/* The GID a request speaks for (its frame's): the message's own (RECONNECT, UDHOLD, UDMAP,
 * LOOKUP carry it), else the sending QP's source GID (its RTR's; GID 0 without a GRH). */
static void hv_channel_own_gid(const HvMsg *m, uint8_t gid[16])
{
    HvContext *ctx = NULL;
    HvQp *qp;
    union ibv_gid g;

    memset(gid, 0, 16);
    if (m->type == HV_MSG_RECONNECT || m->type == HV_MSG_UDHOLD || m->type == HV_MSG_UDMAP ||
        m->type == HV_MSG_LOOKUP) {
        memcpy(gid, m->gid, 16);
        return;
    }
    qp = hv_find_vqpn(m->sender, &ctx);
    if (qp && qp->own_known) { /* a mover away from its VF (hv-swap.c): its identity there */
        memcpy(gid, qp->own_gid.raw, 16);
        return;
    }
    if (!qp || !qp->m_rtr || !ctx || !ctx->phys)
        return;
    if (hv_real.r_ibv_query_gid(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                qp->a_rtr.ah_attr.is_global ? qp->a_rtr.ah_attr.grh.sgid_index : 0,
                                &g) == 0)
        memcpy(gid, g.raw, 16);
}

static const char *hv_channel_why(int r)
{
    switch (r) {
    case -EACCES:
        return "its MAC does not verify (another HOTMIG_VERBS_KEY, or a frame of another "
               "connection)";
    case -EPROTO:
        return "replayed or out of order";
    case -EINVAL:
        return "not an authenticated frame";
    default:
        return strerror(-r);
    }
}

int hv_channel_call(int fd, uint32_t vqpn, const char *req, char *reply, size_t reply_max,
                    int64_t deadline)
{
    HvAuthSession s = {0};
    HvAuthFrame f;
    HvMsg *m = malloc(sizeof(*m));
    char *line = malloc(HV_AUTH_LINE_MAX + 2);
    uint8_t own[16];
    size_t len = strlen(req);
    int r;

    if (!m || !line) {
        r = -ENOMEM;
        goto out;
    }
    if (!hv_key_len) {
        hv_log("QP %u: no HOTMIG_VERBS_KEY: its peer cannot be asked", vqpn);
        r = -ENOKEY;
        goto out;
    }
    if (len && req[len - 1] == '\n')
        len--;
    if (hv_proto_parse(req, len, m) < 0) {
        r = -EINVAL;
        goto out;
    }
    hv_channel_own_gid(m, own);
    r = hv_read_line(fd, line, HV_AUTH_LINE_MAX + 2, deadline);
    if (r >= 0 && hv_auth_challenge_parse(line, (size_t)r, s.nonce_s) < 0) {
        /* a layer without the key (or an older one) says why in a plain ERROR */
        if (hv_proto_parse(line, (size_t)r, m) == 0 && m->type == HV_MSG_ERROR)
            hv_log("the owner of QP %u refused the connection: %s", vqpn, m->text);
        else
            hv_log("the owner of QP %u sent no challenge: not a layer of this release?", vqpn);
        r = -EACCES;
        goto out;
    }
    if (r < 0)
        goto out;
    hv_random(s.nonce_c, sizeof(s.nonce_c));
    s.seq = 1;
    r = hv_auth_seal(hv_key, hv_key_len, &s, HV_AUTH_REQUEST, s.seq, own, req, len, line,
                     HV_AUTH_LINE_MAX + 2);
    if (r > 0)
        r = hv_write_all(fd, line, (size_t)r);
    if (r == 0)
        r = hv_read_line(fd, line, HV_AUTH_LINE_MAX + 2, deadline);
    if (r < 0)
        goto out;
    if (hv_proto_parse(line, (size_t)r, m) == 0 && m->type == HV_MSG_ERROR) {
        hv_log("the owner of QP %u refused the request: %s", vqpn, m->text);
        r = -EACCES;
        goto out;
    }
    r = hv_auth_open(hv_key, hv_key_len, &s, HV_AUTH_REPLY, line, (size_t)r, &f);
    if (r < 0) {
        hv_log("the reply of the owner of QP %u is refused: %s", vqpn, hv_channel_why(r));
        goto out;
    }
    if (f.msg_len >= reply_max) {
        r = -EMSGSIZE;
        goto out;
    }
    memcpy(reply, f.msg, f.msg_len);
    reply[f.msg_len] = '\0';
    r = 0;
out:
    free(m);
    free(line);
    return r;
}

int hv_channel_accept(int fd, HvAuthSession *s)
{
    HvMsg m = {.type = HV_MSG_ERROR};
    char line[HV_PROTO_TEXT_MAX + 16];
    int n;

    memset(s, 0, sizeof(*s));
    if (!hv_key_len) {
        hv_log("a peer's request refused: this process has no HOTMIG_VERBS_KEY");
        snprintf(m.text, sizeof(m.text), "no HOTMIG_VERBS_KEY here");
        n = hv_proto_format(&m, line, sizeof(line));
        if (n > 0)
            hv_write_all(fd, line, (size_t)n);
        return -ENOKEY;
    }
    hv_random(s->nonce_s, sizeof(s->nonce_s));
    n = hv_auth_challenge_format(s->nonce_s, line, sizeof(line));
    return n < 0 ? n : hv_write_all(fd, line, (size_t)n);
}

int hv_channel_read(int fd, HvAuthSession *s, char *line, size_t max, HvMsg *m,
                    uint8_t from[16], int64_t deadline)
{
    HvAuthFrame f;
    int r = hv_read_line(fd, line, max, deadline);

    if (r < 0)
        return r;
    r = hv_auth_open(hv_key, hv_key_len, s, HV_AUTH_REQUEST, line, (size_t)r, &f);
    if (r == 0 && hv_proto_parse(f.msg, f.msg_len, m) < 0)
        r = -EBADMSG;
    if (r < 0) {
        HvMsg e = {.type = HV_MSG_ERROR};
        char out[HV_PROTO_TEXT_MAX + 16];
        int n;

        hv_log("a peer's request refused: %s",
               r == -EBADMSG ? "a malformed message" : hv_channel_why(r));
        snprintf(e.text, sizeof(e.text), "%s",
                 r == -EBADMSG ? "malformed request" : "authentication failed");
        n = hv_proto_format(&e, out, sizeof(out));
        if (n > 0)
            hv_write_all(fd, out, (size_t)n);
        return r;
    }
    memcpy(from, f.gid, 16);
    return 0;
}

int hv_channel_reply(int fd, const HvAuthSession *s, const uint8_t from[16], const HvMsg *rep)
{
    char *msg = malloc(HV_PROTO_LINE_MAX + 2), *frame = malloc(HV_AUTH_LINE_MAX + 2);
    int n = msg && frame ? hv_proto_format(rep, msg, HV_PROTO_LINE_MAX + 2) : -ENOMEM;

    if (n > 1)
        n = hv_auth_seal(hv_key, hv_key_len, s, HV_AUTH_REPLY, s->seq, from, msg, (size_t)n - 1,
                         frame, HV_AUTH_LINE_MAX + 2);
    else if (n >= 0)
        n = -EINVAL;
    if (n > 0)
        n = hv_write_all(fd, frame, (size_t)n);
    free(msg);
    free(frame);
    return n;
}

/* The standby device for this process (docs/design.md "Standby path"): the agent's lease
 * (hotmig_standby_acquire), its name in @name. The lease's fd, or -errno. */
int hv_standby_lease(char *name, size_t size)
{
    int fd = hotmig_standby_acquire(name, size, HV_STANDBY_LEASE_MS);

    if (fd < 0)
        hv_log("no standby device from the agent: %s", strerror(-fd));
    return fd;
}
