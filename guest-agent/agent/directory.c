/* The peer directory's service (docs/design.md "Peer directory"): this guest's identity (the
 * GID and LID of each active RDMA port, its agent's control address and peer port), announced
 * over UDP to the group (and the seeds) at start, at once on every change and every refresh;
 * the announcements of the others taken into the table (dir-table.c), which is written to
 * RUN_DIR/directory for the verbs layers of this guest. A seed (an agent others name in
 * --directory-seeds) relays what it hears to the agents that use it. */
#include "guest-agent/agent/directory.h"

#include <arpa/inet.h>
#include <errno.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DIR_EXPIRE_CHECK_MS 1000
#define DIR_WATCH_MAX_S 120   /* a port watch kept open for a port to come up, at most */
#define DIR_RETRY_MS 1000     /* meanwhile the ports are read again this often */
#define DIR_RCVBUF (4 << 20)  /* a seed's table reply, a burst of changes */
#define DIR_RECV_BATCH 256    /* datagrams read per wake-up */
#define DIR_WELCOME_PER_S 100 /* answers to newcomers a second (a burst as large) */

struct AgentDir {
    char *run_dir;
    guint refresh_s;
    const AgentVerbsOps *verbs;
    gpointer verbs_data;
    AgentDirTable *table;
    int fd;
    guint io_id;
    gboolean multicast;
    struct sockaddr_in group; /* where to announce (multicast), or the bound address */
    struct in_addr ifaddr;    /* the interface of the group (INADDR_ANY: the kernel's choice) */
    struct sockaddr_in seeds[AGENT_DIR_SEEDS_MAX];
    guint n_seeds;
    char *listen_host;      /* --peer-listen's address; NULL when a wildcard */
    AgentDirMsg own;        /* what this agent announces (via group) */
    gboolean have_identity; /* an active port was seen once: own.ports holds it */
    guint refresh_id, expire_id, repeat_id, identity_id, write_id, first_write_id, retry_id;
    gboolean retrying; /* the read is the retry's: the watch is kept as it is */
    gint64 last_write_us;
    gboolean first_write_held; /* a file of an earlier run exists: wait one refresh */
    GString *written;          /* what the file holds */
    gboolean write_failed;     /* logged once */
    AgentPortWatch *watch;
    guint watch_io_id;
    gint64 watch_since_us;
    guint16 local_port;
    gboolean no_addr_logged;
    double welcome_tokens; /* the newcomers' answers' budget */
    gint64 welcome_us;     /* when it was last filled */
};

/* ---- options ------------------------------------------------------------------------------- */

/* "A.B.C.D[:PORT]" (IPv4: the directory's transport). */
static gboolean dir_parse_ipv4(const char *text, guint16 default_port, struct sockaddr_in *ret,
                               GError **error)
{
    g_autofree char *host = g_strdup(text);
    char *colon = strchr(host, ':');
    guint64 port = default_port;
    struct sockaddr_in sa = {.sin_family = AF_INET};

    if (colon) {
        *colon = '\0';
        if (!g_ascii_string_to_unsigned(colon + 1, 10, default_port ? 1 : 0, 65535, &port, NULL))
            goto bad;
    } else if (!default_port) {
        goto bad;
    }
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        goto bad;
    sa.sin_port = htons((guint16)port);
    *ret = sa;
    return TRUE;
bad:
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                "directory address '%s' is not an IPv4 ADDR%s", text,
                default_port ? "[:PORT]" : ":PORT");
    return FALSE;
}

static gboolean dir_parse_seeds(AgentDir *dir, const char *seeds, GError **error)
{
    g_auto(GStrv) list = seeds ? g_strsplit(seeds, ",", -1) : NULL;

    for (guint i = 0; list && list[i]; i++) {
        if (dir->n_seeds == AGENT_DIR_SEEDS_MAX) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "more than %d directory seeds", AGENT_DIR_SEEDS_MAX);
            return FALSE;
        }
        if (!dir_parse_ipv4(list[i], ntohs(dir->group.sin_port), &dir->seeds[dir->n_seeds++],
                            error)) {
            g_prefix_error(error, "--directory-seeds: ");
            return FALSE;
        }
    }
    return TRUE;
}

/* --peer-listen "ADDR:PORT" or "[ADDR]:PORT": the announced address (NULL for a wildcard,
 * found from the route to the group) and the peer port. */
static gboolean dir_parse_listen(AgentDir *dir, const char *listen, GError **error)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    g_autofree char *host = NULL;
    guint64 port = 0;
    guint8 addr[16];

    if (!colon || colon == listen ||
        !g_ascii_string_to_unsigned(colon + 1, 10, 1, 65535, &port, NULL))
        goto bad;
    host = g_strndup(listen, (gsize)(colon - listen));
    if (host[0] == '[' && strlen(host) > 2 && host[strlen(host) - 1] == ']') {
        char *inner = g_strndup(host + 1, strlen(host) - 2);

        g_free(host);
        host = inner;
    }
    dir->own.port = (guint16)port;
    if (inet_pton(AF_INET, host, addr) == 1) {
        if (memcmp(addr, "\0\0\0\0", 4) == 0)
            return TRUE;
        inet_ntop(AF_INET, addr, dir->own.addr, sizeof(dir->own.addr));
        dir->listen_host = g_strdup(dir->own.addr);
        dir->ifaddr = *(struct in_addr *)addr;
        return TRUE;
    }
    if (inet_pton(AF_INET6, host, addr) == 1) {
        if (IN6_IS_ADDR_UNSPECIFIED((struct in6_addr *)addr))
            return TRUE;
        inet_ntop(AF_INET6, addr, dir->own.addr, sizeof(dir->own.addr));
        dir->listen_host = g_strdup(dir->own.addr);
        return TRUE;
    }
bad:
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                "peer listen address '%s' is not ADDR:PORT", listen ? listen : "");
    return FALSE;
}

/* ---- the socket ---------------------------------------------------------------------------- */

static gboolean dir_socket_multicast(AgentDir *dir, GError **error)
{
    struct ip_mreq mreq = {.imr_multiaddr = dir->group.sin_addr, .imr_interface = dir->ifaddr};
    guchar ttl = 1, loop = 1; /* loop: other agents of this host (tests) hear it */

    if (setsockopt(dir->fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) < 0) {
        hm_set_error_errno(error, errno, "Cannot join the directory group %s",
                           inet_ntoa(dir->group.sin_addr));
        return FALSE;
    }
    if (setsockopt(dir->fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) < 0 ||
        setsockopt(dir->fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop)) < 0 ||
        setsockopt(dir->fd, IPPROTO_IP, IP_MULTICAST_IF, &dir->ifaddr, sizeof(dir->ifaddr)) < 0) {
        hm_set_error_errno(error, errno, "Cannot set up multicast on the directory socket");
        return FALSE;
    }
    return TRUE;
}

static gboolean dir_socket_open(AgentDir *dir, GError **error)
{
    struct sockaddr_in bind_to = dir->group;
    socklen_t len = sizeof(bind_to);
    int one = 1, size = DIR_RCVBUF;

    dir->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (dir->fd < 0) {
        hm_set_error_errno(error, errno, "Cannot open the directory socket");
        return FALSE;
    }
    /* every agent of a host (tests) binds the group's port */
    setsockopt(dir->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (setsockopt(dir->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0 ||
        setsockopt(dir->fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) < 0)
        g_debug("directory socket: buffers of %d bytes: %s", size, g_strerror(errno));
    if (dir->multicast)
        bind_to.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(dir->fd, (struct sockaddr *)&bind_to, sizeof(bind_to)) < 0) {
        hm_set_error_errno(error, errno, "Cannot bind the directory socket to %s:%u",
                           inet_ntoa(bind_to.sin_addr), ntohs(bind_to.sin_port));
        return FALSE;
    }
    if (getsockname(dir->fd, (struct sockaddr *)&bind_to, &len) == 0)
        dir->local_port = ntohs(bind_to.sin_port);
    if (!dir->multicast && !dir->group.sin_port)
        dir->group.sin_port = htons(dir->local_port);
    return !dir->multicast || dir_socket_multicast(dir, error);
}

static void dir_send(AgentDir *dir, const char *buf, gsize len, const struct sockaddr_in *to)
{
    if (sendto(dir->fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to)) < 0)
        g_debug("directory: cannot send to %s:%u: %s", inet_ntoa(to->sin_addr), ntohs(to->sin_port),
                g_strerror(errno));
}

/* ---- the file ------------------------------------------------------------------------------ */

static gboolean dir_write_now(gpointer data)
{
    AgentDir *dir = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) text = agent_dir_table_format(dir->table);

    dir->write_id = 0;
    if (dir->written && g_string_equal(dir->written, text))
        return G_SOURCE_REMOVE;
    dir->last_write_us = g_get_monotonic_time();
    if (!agent_dir_file_write(dir->run_dir, text, &error)) {
        if (!dir->write_failed)
            g_warning("directory: %s", error->message);
        dir->write_failed = TRUE;
        return G_SOURCE_REMOVE;
    }
    dir->write_failed = FALSE;
    if (dir->written)
        g_string_free(dir->written, TRUE);
    dir->written = g_steal_pointer(&text);
    return G_SOURCE_REMOVE;
}

/* The table changed: written at once, or AGENT_DIR_WRITE_MIN_MS after the last write. */
static void dir_changed(AgentDir *dir)
{
    gint64 next = dir->last_write_us + AGENT_DIR_WRITE_MIN_MS * G_TIME_SPAN_MILLISECOND;
    gint64 now = g_get_monotonic_time();

    if (dir->write_id || dir->first_write_held)
        return;
    if (next <= now)
        dir->write_id = g_idle_add(dir_write_now, dir);
    else
        dir->write_id = g_timeout_add((guint)((next - now + 999) / 1000), dir_write_now, dir);
}

static gboolean dir_first_write(gpointer data)
{
    AgentDir *dir = data;

    dir->first_write_id = 0;
    dir->first_write_held = FALSE;
    dir_changed(dir);
    return G_SOURCE_REMOVE;
}

/* ---- receiving ----------------------------------------------------------------------------- */

typedef struct {
    AgentDir *dir;
    const struct sockaddr_in *to;
} DirTableReply;

static void dir_send_relay(AgentDir *dir, const AgentDirMsg *msg, const struct sockaddr_in *to)
{
    AgentDirMsg relay;
    char buf[AGENT_DIR_MSG_MAX + 1];
    gsize len;

    /* a table's message holds only its own ports: not copied whole */
    memcpy(&relay, msg, G_STRUCT_OFFSET(AgentDirMsg, ports) + msg->n_ports * sizeof(AgentDirPort));
    relay.via = AGENT_DIR_VIA_RELAY;
    len = agent_dir_msg_format(&relay, buf, sizeof(buf));
    if (len)
        dir_send(dir, buf, len, to);
}

static void dir_reply_one(const AgentDirMsg *msg, gpointer data)
{
    DirTableReply *r = data;

    dir_send_relay(r->dir, msg, r->to);
}

typedef struct {
    AgentDir *dir;
    const AgentDirMsg *msg;
} DirRelay;

static void dir_relay_one(const struct sockaddr_in *to, gpointer data)
{
    DirRelay *r = data;

    dir_send_relay(r->dir, r->msg, to);
}

/* A seed's part: what it heard goes on to the agents that use it (and what they sent to the
 * group); a new one of them gets the whole table. Relayed announcements are not relayed. */
static void dir_relay(AgentDir *dir, const AgentDirMsg *msg, gboolean is_new,
                      const struct sockaddr_in *from)
{
    DirRelay r = {dir, msg};

    if (msg->via == AGENT_DIR_VIA_RELAY)
        return;
    agent_dir_table_foreach_client(dir->table, msg->boot_id, dir_relay_one, &r);
    if (msg->via != AGENT_DIR_VIA_SEED)
        return;
    if (dir->multicast)
        dir_send_relay(dir, msg, &dir->group);
    if (is_new) {
        DirTableReply reply = {dir, from};

        agent_dir_table_foreach(dir->table, dir_reply_one, &reply);
    }
}

/* An agent that just started hears the others only at their refresh: the first announcements
 * of a newcomer to the group are answered with ours, unicast (marked relay: not passed on), at
 * most DIR_WELCOME_PER_S a second (when many agents start at once, the rest wait for the
 * refresh). */
static void dir_welcome(AgentDir *dir, const struct sockaddr_in *to)
{
    gint64 now = g_get_monotonic_time();

    dir->welcome_tokens = MIN((double)DIR_WELCOME_PER_S,
                              dir->welcome_tokens + (double)(now - dir->welcome_us) *
                                                        DIR_WELCOME_PER_S / G_USEC_PER_SEC);
    dir->welcome_us = now;
    if (dir->welcome_tokens < 1 || !dir->own.addr[0] || !dir->own.seq)
        return;
    dir->welcome_tokens -= 1;
    dir_send_relay(dir, &dir->own, to);
}

static void dir_receive_one(AgentDir *dir, const char *buf, gsize len,
                            const struct sockaddr_in *from)
{
    g_autoptr(GError) error = NULL;
    g_autofree AgentDirMsg *msg = g_new(AgentDirMsg, 1);
    AgentDirUpdate up;
    gboolean is_new;

    if (!agent_dir_msg_parse(buf, len, msg, &error)) {
        g_debug("directory: from %s:%u: %s", inet_ntoa(from->sin_addr), ntohs(from->sin_port),
                error->message);
        return;
    }
    if (memcmp(msg->boot_id, dir->own.boot_id, 16) == 0)
        return;                                                /* our own, looped back or relayed */
    is_new = !agent_dir_table_knows(dir->table, msg->boot_id); /* or a new run of it */
    up = agent_dir_table_update(dir->table, msg, g_get_monotonic_time(), from);
    if (up == AGENT_DIR_UPDATE_STALE)
        return;
    if (up == AGENT_DIR_UPDATE_CHANGED)
        dir_changed(dir);
    if (is_new && msg->via == AGENT_DIR_VIA_GROUP && msg->seq <= 2)
        dir_welcome(dir, from);
    dir_relay(dir, msg, is_new, from);
}

static gboolean dir_io(int fd, GIOCondition condition, gpointer data)
{
    AgentDir *dir = data;

    for (guint i = 0; i < DIR_RECV_BATCH; i++) {
        char buf[AGENT_DIR_MSG_MAX + 1];
        struct sockaddr_in from;
        socklen_t from_len = sizeof(from);
        ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_TRUNC, (struct sockaddr *)&from, &from_len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break; /* EAGAIN; an ICMP error of an earlier send */
        if (from_len != sizeof(from) || from.sin_family != AF_INET)
            continue;
        if ((gsize)n > AGENT_DIR_MSG_MAX) {
            g_debug("directory: from %s: a datagram of %zd bytes", inet_ntoa(from.sin_addr), n);
            continue;
        }
        dir_receive_one(dir, buf, (gsize)n, &from);
    }
    return G_SOURCE_CONTINUE;
}

/* ---- this guest's identity ----------------------------------------------------------------- */

static void dir_add_gid(AgentDirMsg *m, const char *text, guint16 lid)
{
    AgentDirPort p = {.lid = lid};

    if (m->n_ports >= AGENT_DIR_PORTS_MAX || inet_pton(AF_INET6, text, p.gid) != 1)
        return;
    for (guint i = 0; i < m->n_ports; i++)
        if (memcmp(m->ports[i].gid, p.gid, 16) == 0)
            return;
    m->ports[m->n_ports++] = p;
}

/* Whether a port that is not usable yet is coming up: its link is up and it waits for the
 * subnet manager (INIT, ARMED; ACTIVE without a LID on InfiniBand). A port DOWN (no link) is
 * not watched: the refresh sees it come up. */
static gboolean dir_port_coming_up(const AgentRdmaPort *p, gboolean ib)
{
    return g_strcmp0(p->state, "INIT") == 0 || g_strcmp0(p->state, "ARMED") == 0 ||
           (ib && g_strcmp0(p->state, "ACTIVE") == 0 && !p->lid);
}

/* The active ports into @m: on InfiniBand GID index 0 (subnet prefix + port GUID) and the LID,
 * on RoCE every GID listed. Whether some port is coming up. */
static gboolean dir_read_ports(AgentDir *dir, AgentDirMsg *m)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) devices = dir->verbs->list_devices(dir->verbs_data, &error);
    gboolean coming_up = FALSE;

    if (!devices) {
        g_debug("directory: no RDMA devices: %s", error->message);
        return FALSE;
    }
    for (guint d = 0; d < devices->len; d++) {
        AgentRdmaDevice *dev = devices->pdata[d];

        for (guint i = 0; i < dev->ports->len; i++) {
            AgentRdmaPort *p = dev->ports->pdata[i];
            gboolean ib = g_strcmp0(p->link_layer, "InfiniBand") == 0;

            if (g_strcmp0(p->state, "ACTIVE") != 0 || !p->gids->len || (ib && !p->lid)) {
                coming_up = coming_up || dir_port_coming_up(p, ib);
                continue;
            }
            for (guint k = 0; k < (ib ? 1 : p->gids->len); k++)
                dir_add_gid(m, p->gids->pdata[k], p->lid);
        }
    }
    return coming_up;
}

/* The address of the interface the kernel sends to the group (or the first seed) from. */
static gboolean dir_source_address(AgentDir *dir, char out[AGENT_DIR_ADDR_MAX])
{
    const struct sockaddr_in *to = dir->multicast ? &dir->group
                                   : dir->n_seeds ? &dir->seeds[0]
                                                  : NULL;
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    int fd;
    gboolean ok;

    if (!to)
        return FALSE;
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return FALSE;
    ok = connect(fd, (const struct sockaddr *)to, sizeof(*to)) == 0 &&
         getsockname(fd, (struct sockaddr *)&me, &len) == 0 && me.sin_addr.s_addr != 0 &&
         inet_ntop(AF_INET, &me.sin_addr, out, AGENT_DIR_ADDR_MAX) != NULL;
    close(fd);
    return ok;
}

static void dir_watch_close(AgentDir *dir)
{
    if (dir->watch_io_id)
        g_source_remove(dir->watch_io_id);
    dir->watch_io_id = 0;
    if (dir->watch)
        dir->verbs->port_watch_free(dir->watch);
    dir->watch = NULL;
}

static void dir_identity_soon(AgentDir *dir);
static gboolean dir_retry(gpointer data);

static gboolean dir_watch_event(int fd, GIOCondition condition, gpointer data)
{
    AgentDir *dir = data;

    g_debug("directory: %u RDMA port event(s)", dir->verbs->port_watch_drain(dir->watch));
    if (condition & (G_IO_HUP | G_IO_ERR | G_IO_NVAL)) {
        dir->watch_io_id = 0;
        dir_watch_close(dir);
        dir_identity_soon(dir);
        return G_SOURCE_REMOVE;
    }
    dir_identity_soon(dir);
    return G_SOURCE_CONTINUE;
}

/* A port is coming up (a VF just plugged, the subnet manager has not swept): its events are
 * heard, and the ports read again every DIR_RETRY_MS, until none is, at most DIR_WATCH_MAX_S
 * (then only the refresh reads them). Open devices are closed again as soon as no
 * port is coming up: an RDMA device held open can delay its unplug (soft-RoCE). */
static void dir_watch_update(AgentDir *dir, gboolean coming_up)
{
    g_autoptr(GError) error = NULL;
    gint64 now = g_get_monotonic_time();
    int fd = -1;

    if (coming_up && !dir->watch_since_us)
        dir->watch_since_us = now;
    if (!coming_up || now - dir->watch_since_us > DIR_WATCH_MAX_S * G_USEC_PER_SEC) {
        dir_watch_close(dir);
        if (dir->retry_id)
            g_source_remove(dir->retry_id);
        dir->retry_id = 0;
        if (!coming_up)
            dir->watch_since_us = 0;
        return;
    }
    /* A port can come up without an event the watch hears (a subnet manager's sweep that only
     * the provider reports: the lab's IB fabric): read again shortly too. */
    if (!dir->retry_id)
        dir->retry_id = g_timeout_add(DIR_RETRY_MS, dir_retry, dir);
    if (!dir->verbs->port_watch_new || (dir->retrying && dir->watch))
        return;
    dir_watch_close(dir); /* reopened on the devices present now */
    dir->watch = dir->verbs->port_watch_new(dir->verbs_data, &fd, &error);
    if (!dir->watch) {
        g_debug("directory: no port events: %s", error->message);
        return;
    }
    dir->watch_io_id = g_unix_fd_add(fd, G_IO_IN | G_IO_HUP | G_IO_ERR, dir_watch_event, dir);
}

/* Reads the identity; TRUE when it changed (own.since_ms is then now). A guest whose ports are
 * all away (its VF unplugged for a move) keeps announcing the last ones it had. */
static gboolean dir_identity_read(AgentDir *dir)
{
    g_autofree AgentDirMsg *m = g_new0(AgentDirMsg, 1);
    gboolean coming_up = dir_read_ports(dir, m);
    gboolean changed;

    dir_watch_update(dir, coming_up);
    if (!m->n_ports && dir->have_identity) {
        m->n_ports = dir->own.n_ports;
        memcpy(m->ports, dir->own.ports, sizeof(m->ports));
    }
    if (dir->listen_host)
        g_strlcpy(m->addr, dir->listen_host, sizeof(m->addr));
    else if (!dir_source_address(dir, m->addr))
        g_strlcpy(m->addr, dir->own.addr, sizeof(m->addr));
    changed = m->n_ports != dir->own.n_ports || !g_str_equal(m->addr, dir->own.addr) ||
              memcmp(m->ports, dir->own.ports, m->n_ports * sizeof(AgentDirPort)) != 0;
    dir->have_identity = dir->have_identity || m->n_ports > 0;
    if (!changed)
        return FALSE;
    g_message("directory: this guest is %u GID(s) at %s port %u", m->n_ports,
              m->addr[0] ? m->addr : "(no address)", dir->own.port);
    dir->own.n_ports = m->n_ports;
    memcpy(dir->own.ports, m->ports, sizeof(m->ports));
    g_strlcpy(dir->own.addr, m->addr, sizeof(dir->own.addr));
    dir->own.since_ms = (guint64)(g_get_real_time() / 1000);
    return TRUE;
}

/* ---- announcing ---------------------------------------------------------------------------- */

static void dir_announce(AgentDir *dir)
{
    char buf[AGENT_DIR_MSG_MAX + 1];
    gsize len;

    if (!dir->own.addr[0]) {
        if (!dir->no_addr_logged)
            g_message("directory: no route to %s from a control address: not announcing (give "
                      "--peer-listen the control address)",
                      inet_ntoa(dir->multicast || !dir->n_seeds ? dir->group.sin_addr
                                                                : dir->seeds[0].sin_addr));
        dir->no_addr_logged = TRUE;
        return;
    }
    dir->no_addr_logged = FALSE;
    dir->own.seq++;
    dir->own.via = AGENT_DIR_VIA_GROUP;
    if (agent_dir_table_update(dir->table, &dir->own, g_get_monotonic_time(), NULL) ==
        AGENT_DIR_UPDATE_CHANGED)
        dir_changed(dir);
    len = agent_dir_msg_format(&dir->own, buf, sizeof(buf));
    g_return_if_fail(len > 0);
    if (dir->multicast)
        dir_send(dir, buf, len, &dir->group);
    {
        DirRelay r = {dir, &dir->own};

        /* as a seed, to the agents that use it (relayed: they do not pass it on) */
        agent_dir_table_foreach_client(dir->table, NULL, dir_relay_one, &r);
    }
    if (!dir->n_seeds)
        return;
    dir->own.via = AGENT_DIR_VIA_SEED;
    len = agent_dir_msg_format(&dir->own, buf, sizeof(buf));
    dir->own.via = AGENT_DIR_VIA_GROUP;
    for (guint i = 0; i < dir->n_seeds; i++)
        dir_send(dir, buf, len, &dir->seeds[i]);
}

static gboolean dir_repeat(gpointer data)
{
    AgentDir *dir = data;

    dir->repeat_id = 0;
    dir_announce(dir);
    return G_SOURCE_REMOVE;
}

/* A change is announced at once, and once more a little later (a datagram may be lost). */
static void dir_announce_change(AgentDir *dir)
{
    dir_announce(dir);
    if (dir->repeat_id)
        g_source_remove(dir->repeat_id);
    dir->repeat_id = g_timeout_add(AGENT_DIR_REPEAT_MS, dir_repeat, dir);
}

static gboolean dir_identity_now(gpointer data)
{
    AgentDir *dir = data;

    dir->identity_id = 0;
    if (dir_identity_read(dir))
        dir_announce_change(dir);
    return G_SOURCE_REMOVE;
}

static gboolean dir_retry(gpointer data)
{
    AgentDir *dir = data;

    dir->retry_id = 0;
    dir->retrying = TRUE;
    if (dir_identity_read(dir))
        dir_announce_change(dir);
    dir->retrying = FALSE;
    return G_SOURCE_REMOVE;
}

static void dir_identity_soon(AgentDir *dir)
{
    if (!dir->identity_id)
        dir->identity_id = g_idle_add(dir_identity_now, dir);
}

void agent_dir_identity_changed(AgentDir *dir)
{
    g_return_if_fail(dir != NULL);
    dir_identity_soon(dir);
}

static gboolean dir_refresh(gpointer data)
{
    AgentDir *dir = data;

    if (dir_identity_read(dir))
        dir_announce_change(dir);
    else
        dir_announce(dir);
    return G_SOURCE_CONTINUE;
}

static gboolean dir_expire(gpointer data)
{
    AgentDir *dir = data;

    if (agent_dir_table_expire(dir->table, g_get_monotonic_time()))
        dir_changed(dir);
    return G_SOURCE_CONTINUE;
}

/* ---- life ---------------------------------------------------------------------------------- */

static void dir_boot_id(guint8 out[16])
{
    for (guint i = 0; i < 16; i += 4) {
        guint32 r = g_random_int();

        memcpy(out + i, &r, 4);
    }
}

static gboolean dir_configure(AgentDir *dir, const AgentDirConfig *config, GError **error)
{
    if (!config->run_dir || config->run_dir[0] != '/') {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "verbs run directory '%s' is not absolute",
                    config->run_dir ? config->run_dir : "");
        return FALSE;
    }
    if (config->refresh_s > AGENT_DIR_REFRESH_S_MAX) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "directory refresh %u s is out of range [1, %d]", config->refresh_s,
                    AGENT_DIR_REFRESH_S_MAX);
        return FALSE;
    }
    if (!dir_parse_ipv4(config->group ? config->group : AGENT_DIR_GROUP_DEFAULT, 0, &dir->group,
                        error)) {
        g_prefix_error(error, "--directory: ");
        return FALSE;
    }
    dir->multicast = IN_MULTICAST(ntohl(dir->group.sin_addr.s_addr));
    if (dir->multicast && !dir->group.sin_port) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "--directory: the group %s needs a port", config->group);
        return FALSE;
    }
    if (!dir_parse_listen(dir, config->peer_listen, error) ||
        !dir_parse_seeds(dir, config->seeds, error))
        return FALSE;
    if (!dir->multicast && !dir->n_seeds)
        g_message("directory: %s is not a multicast group and no seed is given: only agents "
                  "that name this one as their seed are heard",
                  config->group);
    return TRUE;
}

AgentDir *agent_dir_new(const AgentDirConfig *config, GError **error)
{
    g_autoptr(AgentDir) dir = g_new0(AgentDir, 1);
    g_autofree char *path = NULL;

    g_return_val_if_fail(config != NULL && config->verbs && config->verbs->list_devices, NULL);
    dir->fd = -1;
    if (!dir_configure(dir, config, error))
        return NULL;
    dir->run_dir = g_strdup(config->run_dir);
    dir->refresh_s = config->refresh_s ? config->refresh_s : AGENT_DIR_REFRESH_S_DEFAULT;
    dir->verbs = config->verbs;
    dir->verbs_data = config->verbs_data;
    dir->table = agent_dir_table_new(config->max_entries);
    dir_boot_id(dir->own.boot_id);
    dir->own.refresh_s = dir->refresh_s;
    dir->own.since_ms = (guint64)(g_get_real_time() / 1000);
    agent_dir_table_set_own(dir->table, dir->own.boot_id);
    if (!dir_socket_open(dir, error))
        return NULL;
    dir->io_id = g_unix_fd_add(dir->fd, G_IO_IN, dir_io, dir);
    /* A restarted agent: the file of its last run stays until the others have been heard. */
    path = g_build_filename(dir->run_dir, AGENT_DIR_FILE, NULL);
    if (g_file_test(path, G_FILE_TEST_EXISTS)) {
        dir->first_write_held = TRUE;
        dir->first_write_id = g_timeout_add_seconds(dir->refresh_s + 1, dir_first_write, dir);
    }
    dir_identity_read(dir);
    dir_announce_change(dir);
    dir->refresh_id = g_timeout_add_seconds(dir->refresh_s, dir_refresh, dir);
    dir->expire_id = g_timeout_add(DIR_EXPIRE_CHECK_MS, dir_expire, dir);
    g_message("directory: announcing to %s:%u%s%s, every %u s, file %s",
              inet_ntoa(dir->group.sin_addr), ntohs(dir->group.sin_port),
              dir->multicast ? " (multicast)" : "", dir->n_seeds ? " and the seeds" : "",
              dir->refresh_s, path);
    return g_steal_pointer(&dir);
}

void agent_dir_free(AgentDir *dir)
{
    if (!dir)
        return;
    {
        guint *ids[] = {&dir->io_id,       &dir->refresh_id, &dir->expire_id,      &dir->repeat_id,
                        &dir->identity_id, &dir->write_id,   &dir->first_write_id, &dir->retry_id};

        for (guint i = 0; i < G_N_ELEMENTS(ids); i++)
            if (*ids[i])
                g_source_remove(*ids[i]);
    }
    dir_watch_close(dir);
    if (dir->fd >= 0)
        close(dir->fd);
    agent_dir_table_free(dir->table);
    if (dir->written)
        g_string_free(dir->written, TRUE);
    g_free(dir->listen_host);
    g_free(dir->run_dir);
    g_free(dir);
}

AgentDirTable *agent_dir_get_table(AgentDir *dir)
{
    return dir->table;
}

guint16 agent_dir_get_port(const AgentDir *dir)
{
    return dir->local_port;
}
