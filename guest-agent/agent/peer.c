/* hotmig-agent: the verbs layer's broker on the control network (docs/verbs-layer.md).
 *
 * A libhotmig-verbs process in another guest connects here (TCP, the control network, never the
 * VF) and sends one line "ROUTE <vqpn> <tag>"; the agent looks up which local process registered
 * that QP (RUN_DIR/qp-<vqpn> holds its pid and the route's tag, which only a holder of the job's
 * key can compute: hv-proto.h), connects to its socket RUN_DIR/<pid>.sock, tells it where the
 * connection comes from ("FROM <address>"), answers "ROUTED" and splices the two connections. The
 * layers then talk their peer protocol (docs/protocol.md) through it. Everything the remote sends
 * before the splice is parsed by the layer's one parser (hv-proto.c) with its limits. */
#include "guest-agent/agent/agent-priv.h"
#include "hv-proto.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define PEER_LINE_MAX 64  /* "ROUTE <vqpn> <tag>" */
/* The broker's bounds (issue 28, finding 3; docs/security.md "The verbs peer protocol"): a
 * flood from some addresses must not keep a migration's SUSPEND/RECONNECT out. */
#define PEER_CONNS_MAX 64     /* unrouted connections at once: a newcomer closes the oldest */
#define PEER_ROUTED_MAX 128   /* routed connections at once (2 fds each, and a layer thread) */
#define PEER_PER_ADDR_MAX 16  /* connections of one remote address, unrouted and routed */
#define PEER_ROUTE_TIMEOUT_MS 5000   /* to send the ROUTE line */
#define PEER_ROUTED_TIMEOUT_MS 60000 /* a routed connection's life (a layer's call: <= 20 s) */

struct AgentPeer {
    GSocketService *service;
    char *run_dir;
    guint n_pending, n_routed;
    GQueue pending;         /* PeerConn, oldest first */
    GList *splices;         /* PeerSplice */
    GHashTable *per_addr;   /* remote address -> connections (GUINT_TO_POINTER) */
    guint route_timeout_ms, routed_timeout_ms;
};

typedef struct {
    AgentPeer *peer;
    GSocketConnection *conn;
    GCancellable *cancel;
    guint timeout_id;
    GList *link; /* in peer->pending */
    char *addr;  /* the remote address, counted in peer->per_addr */
    char buf[PEER_LINE_MAX + 1];
    gsize len;
    guint8 byte;
} PeerConn;

/* A routed connection: the splice, ended at its deadline. */
typedef struct {
    AgentPeer *peer;
    GIOStream *local;
    GCancellable *cancel;
    guint timeout_id;
    char *addr;
} PeerSplice;

static void peer_addr_unref(AgentPeer *peer, const char *addr)
{
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(peer->per_addr, addr));

    if (n <= 1)
        g_hash_table_remove(peer->per_addr, addr);
    else
        g_hash_table_replace(peer->per_addr, g_strdup(addr), GUINT_TO_POINTER(n - 1));
}

static void peer_conn_free(PeerConn *pc)
{
    if (pc->timeout_id)
        g_source_remove(pc->timeout_id);
    if (pc->peer) { /* NULL: the broker went first (agent_peer_free) */
        if (pc->link)
            g_queue_delete_link(&pc->peer->pending, pc->link);
        if (pc->addr) /* still counted: not handed to a splice */
            peer_addr_unref(pc->peer, pc->addr);
        pc->peer->n_pending--;
    }
    g_free(pc->addr);
    g_clear_object(&pc->cancel);
    g_clear_object(&pc->conn);
    g_free(pc);
}

static void peer_reply(PeerConn *pc, const char *line)
{
    GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(pc->conn));

    /* a few bytes into a fresh TCP connection: does not block */
    g_output_stream_write_all(out, line, strlen(line), NULL, NULL, NULL);
}

static void peer_refuse(PeerConn *pc, const char *why)
{
    HvMsg m = {.type = HV_MSG_NOROUTE};
    char line[HV_PROTO_TEXT_MAX + 16];

    g_message("peer connection from %s refused: %s", pc->addr ? pc->addr : "?", why);
    g_strlcpy(m.text, why, sizeof(m.text));
    if (hv_proto_format(&m, line, sizeof(line)) > 0)
        peer_reply(pc, line);
    g_io_stream_close(G_IO_STREAM(pc->conn), NULL, NULL);
    peer_conn_free(pc);
}

static void peer_splice_done(GObject *src, GAsyncResult *res, gpointer data)
{
    g_autoptr(GError) error = NULL;
    PeerSplice *sp = data;

    if (!g_io_stream_splice_finish(res, &error) &&
        !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug("peer connection ended: %s", error->message);
    (void)src;
    if (sp->timeout_id)
        g_source_remove(sp->timeout_id);
    if (sp->peer) {
        sp->peer->n_routed--;
        peer_addr_unref(sp->peer, sp->addr);
        sp->peer->splices = g_list_remove(sp->peer->splices, sp);
    }
    g_free(sp->addr);
    g_object_unref(sp->cancel);
    g_object_unref(sp->local);
    g_free(sp);
}

static gboolean peer_splice_timeout(gpointer data)
{
    PeerSplice *sp = data;

    sp->timeout_id = 0;
    g_message("peer connection from %s closed: it was routed %u ms ago", sp->addr,
              sp->peer ? sp->peer->routed_timeout_ms : 0);
    g_cancellable_cancel(sp->cancel); /* the splice ends and frees */
    return G_SOURCE_REMOVE;
}

/* Reads RUN_DIR/qp-<vqpn>: the pid of the process owning that QP, and the record's owner, when
 * the record holds @tag (a caller with the job's key). A record is a regular file, opened
 * without following a link (nor blocking on a FIFO). */
static gboolean peer_owner(AgentPeer *peer, guint32 vqpn, const guint8 *tag, guint64 *pid,
                           uid_t *uid, GError **error)
{
    g_autofree char *path = g_strdup_printf("%s/" HV_ROUTE_FILE_FMT, peer->run_dir, vqpn);
    char data[HV_ROUTE_FILE_MAX + 1] = {0}, want[2 * HV_ROUTE_TAG_LEN + 1];
    const char *have;
    struct stat st;
    ssize_t n;
    guint diff = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO, "'%s': %s", path,
                    g_strerror(errno));
        return FALSE;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > HV_ROUTE_FILE_MAX) {
        close(fd);
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO,
                    "'%s' is not a route record (a regular file of at most %d bytes)", path,
                    HV_ROUTE_FILE_MAX);
        return FALSE;
    }
    n = read(fd, data, sizeof(data) - 1);
    close(fd);
    data[n > 0 ? n : 0] = '\0';
    g_strchomp(data);
    have = strchr(data, ' ');
    if (!have || strlen(have + 1) != sizeof(want) - 1) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO, "'%s' is not '<pid> <tag>'",
                    path);
        return FALSE;
    }
    for (int i = 0; i < HV_ROUTE_TAG_LEN; i++)
        g_snprintf(want + 2 * i, 3, "%02x", tag[i]);
    for (size_t i = 0; i < sizeof(want) - 1; i++) /* in constant time */
        diff |= (guint)(have[1 + i] ^ want[i]);
    if (diff) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO,
                    "the ROUTE's tag is not the one of '%s' (the caller lacks the job's key)",
                    path);
        return FALSE;
    }
    data[have - data] = '\0';
    if (!g_ascii_string_to_unsigned(data, 10, 1, G_MAXINT32, pid, NULL)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO, "'%s' does not hold a pid",
                    path);
        return FALSE;
    }
    *uid = st.st_uid;
    return TRUE;
}

/* The process on the other end of @conn is the one the route record names: its pid, and the
 * record's owner its uid (SO_PEERCRED: the kernel's word, not the record's). */
static gboolean peer_owner_check(GSocketConnection *conn, guint64 pid, uid_t uid)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    int fd = g_socket_get_fd(g_socket_connection_get_socket(conn));

    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
           (guint64)cred.pid == pid && cred.uid == uid;
}

/* The layer's first line: where the connection comes from ("FROM <address>"), which its server
 * counts connections by (docs/security.md, "Resources"). A few bytes into a fresh Unix socket:
 * does not block. */
static gboolean peer_tell_from(GSocketConnection *local, const char *addr)
{
    GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(local));
    HvMsg *m = g_new0(HvMsg, 1);
    char line[HV_PROTO_TEXT_MAX + 16];
    int n;

    m->type = HV_MSG_FROM;
    g_strlcpy(m->text, addr && *addr ? addr : "?", sizeof(m->text));
    n = hv_proto_format(m, line, sizeof(line));
    g_free(m);
    return n > 0 && g_output_stream_write_all(out, line, (gsize)n, NULL, NULL, NULL);
}

static void peer_route(PeerConn *pc)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GSocketClient) client = NULL;
    g_autoptr(GSocketAddress) addr = NULL;
    g_autoptr(GSocketConnection) local = NULL;
    g_autofree char *sock = NULL;
    g_autofree char *why = NULL;
    HvMsg *m = g_new0(HvMsg, 1);
    PeerSplice *sp;
    guint64 pid = 0;
    uid_t uid = 0;

    if (hv_proto_parse(pc->buf, pc->len, m) < 0 || m->type != HV_MSG_ROUTE) {
        g_free(m);
        peer_refuse(pc, "expected ROUTE <vqpn> <tag>");
        return;
    }
    if (pc->peer->n_routed >= PEER_ROUTED_MAX) {
        why = g_strdup_printf("%u routed connections already", pc->peer->n_routed);
        g_free(m);
        peer_refuse(pc, why);
        return;
    }
    if (!peer_owner(pc->peer, m->target, m->tag, &pid, &uid, &error)) {
        /* the same answer with or without a record: a scan learns nothing */
        g_debug("route to QP %u from %s: %s", m->target, pc->addr ? pc->addr : "?",
                error->message);
        why = g_strdup_printf("no process owns QP %u", m->target);
        g_free(m);
        peer_refuse(pc, why);
        return;
    }
    sock = g_strdup_printf("%s/" HV_SOCKET_FILE_FMT, pc->peer->run_dir, (long)pid);
    addr = g_unix_socket_address_new(sock);
    client = g_socket_client_new();
    local = g_socket_client_connect(client, G_SOCKET_CONNECTABLE(addr), NULL, &error);
    if (!local) {
        why = g_strdup_printf("the owner of QP %u does not answer", m->target);
        g_free(m);
        peer_refuse(pc, why);
        return;
    }
    if (!peer_owner_check(local, pid, uid)) {
        g_message("route to QP %u refused: the process behind '%s' is not pid %" G_GUINT64_FORMAT
                  " of uid %u, as its route record says",
                  m->target, sock, pid, (unsigned)uid);
        why = g_strdup_printf("the owner of QP %u does not answer", m->target);
        g_free(m);
        peer_refuse(pc, why);
        return;
    }
    if (!peer_tell_from(local, pc->addr)) {
        why = g_strdup_printf("the owner of QP %u does not answer", m->target);
        g_free(m);
        peer_refuse(pc, why);
        return;
    }
    g_debug("peer connection routed to QP %u (pid %" G_GUINT64_FORMAT ")", m->target, pid);
    g_free(m);
    peer_reply(pc, "ROUTED\n");
    sp = g_new0(PeerSplice, 1);
    sp->peer = pc->peer;
    sp->local = G_IO_STREAM(g_object_ref(local));
    sp->cancel = g_cancellable_new();
    sp->addr = g_steal_pointer(&pc->addr); /* its count goes with it */
    sp->timeout_id = g_timeout_add(pc->peer->routed_timeout_ms, peer_splice_timeout, sp);
    pc->peer->n_routed++;
    pc->peer->splices = g_list_prepend(pc->peer->splices, sp);
    g_io_stream_splice_async(G_IO_STREAM(pc->conn), G_IO_STREAM(local),
                             G_IO_STREAM_SPLICE_CLOSE_STREAM1 | G_IO_STREAM_SPLICE_CLOSE_STREAM2 |
                                 G_IO_STREAM_SPLICE_WAIT_FOR_BOTH,
                             G_PRIORITY_DEFAULT, sp->cancel, peer_splice_done, sp);
    /* the splice holds both streams now */
    peer_conn_free(pc);
}

static void peer_read_byte(PeerConn *pc);

static void peer_byte_done(GObject *src, GAsyncResult *res, gpointer data)
{
    PeerConn *pc = data;
    g_autoptr(GError) error = NULL;
    gssize n = g_input_stream_read_finish(G_INPUT_STREAM(src), res, &error);

    if (n <= 0 || !pc->peer || !pc->link) { /* ended, the broker gone, or evicted */
        peer_conn_free(pc);
        return;
    }
    if (pc->byte == '\n') {
        pc->buf[pc->len] = '\0';
        peer_route(pc);
        return;
    }
    if (pc->len >= PEER_LINE_MAX) {
        peer_refuse(pc, "line too long");
        return;
    }
    pc->buf[pc->len++] = (char)pc->byte;
    peer_read_byte(pc);
}

/* One byte at a time: nothing after the ROUTE line may be taken from the layer's stream. */
static void peer_read_byte(PeerConn *pc)
{
    GInputStream *in = g_io_stream_get_input_stream(G_IO_STREAM(pc->conn));

    g_input_stream_read_async(in, &pc->byte, 1, G_PRIORITY_DEFAULT, pc->cancel, peer_byte_done,
                              pc);
}

static gboolean peer_timeout(gpointer data)
{
    PeerConn *pc = data;

    pc->timeout_id = 0;
    g_message("peer connection from %s closed: no ROUTE line within %u ms",
              pc->addr ? pc->addr : "?", pc->peer ? pc->peer->route_timeout_ms : 0);
    g_cancellable_cancel(pc->cancel); /* the pending read ends and frees */
    return G_SOURCE_REMOVE;
}

/* The oldest unrouted connection (of @addr, when not NULL). */
static PeerConn *peer_oldest_pending(AgentPeer *peer, const char *addr)
{
    for (GList *l = peer->pending.head; l; l = l->next) {
        PeerConn *pc = l->data;

        if (!addr || g_strcmp0(pc->addr, addr) == 0)
            return pc;
    }
    return NULL;
}

/* Closes the unrouted connection @pc to make room for a newer one. */
static void peer_evict(PeerConn *pc, const char *why)
{
    g_message("peer connection from %s closed: %s, a newer one came", pc->addr ? pc->addr : "?",
              why);
    g_queue_delete_link(&pc->peer->pending, pc->link);
    pc->link = NULL;
    g_cancellable_cancel(pc->cancel); /* its read ends and frees it */
}

/* The remote's IP address as text ("?" when it has none). Owned. */
static char *peer_remote_addr(GSocketConnection *conn)
{
    g_autoptr(GSocketAddress) a = g_socket_connection_get_remote_address(conn, NULL);

    if (!a || !G_IS_INET_SOCKET_ADDRESS(a))
        return g_strdup("?");
    return g_inet_address_to_string(g_inet_socket_address_get_address(G_INET_SOCKET_ADDRESS(a)));
}

static gboolean peer_incoming(GSocketService *service, GSocketConnection *conn, GObject *source,
                              gpointer data)
{
    AgentPeer *peer = data;
    g_autofree char *addr = peer_remote_addr(conn);
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(peer->per_addr, addr));
    PeerConn *pc;

    (void)service;
    (void)source;
    if (n >= PEER_PER_ADDR_MAX) {
        /* that address's oldest unrouted one makes room (a user flooding from a peer guest must
         * not keep that guest's real requests out); when all of them are routed, refused */
        PeerConn *old = peer_oldest_pending(peer, addr);

        if (!old) {
            g_message("peer connection from %s refused: it has %u routed connections", addr, n);
            return TRUE; /* closed when the service drops its reference */
        }
        peer_evict(old, "that address has too many connections");
    } else if (peer->n_pending >= PEER_CONNS_MAX && !g_queue_is_empty(&peer->pending)) {
        /* the oldest unrouted one goes: silent ones cannot keep a migration's requests out */
        peer_evict(g_queue_peek_head(&peer->pending), "too many unrouted connections");
    }
    pc = g_new0(PeerConn, 1);
    pc->peer = peer;
    peer->n_pending++;
    pc->addr = g_strdup(addr);
    g_hash_table_replace(peer->per_addr, g_steal_pointer(&addr), GUINT_TO_POINTER(n + 1));
    pc->conn = g_object_ref(conn);
    pc->cancel = g_cancellable_new();
    pc->timeout_id = g_timeout_add(peer->route_timeout_ms, peer_timeout, pc);
    g_queue_push_tail(&peer->pending, pc);
    pc->link = g_queue_peek_tail_link(&peer->pending);
    peer_read_byte(pc);
    return TRUE;
}

/* The run directory, where any user's ranks register their QPs: the agent's (root's), 01733:
 * anyone may add a record, nobody may list, replace or remove another's (sticky). Made when
 * missing; an existing one of root's gets that mode; one of another user is logged, as its
 * records cannot be trusted to name their owners (the route check, SO_PEERCRED, still holds). */
static void peer_run_dir_make(const char *run_dir)
{
    struct stat st;

    if (g_mkdir_with_parents(run_dir, 01733) < 0 || lstat(run_dir, &st) < 0 ||
        !S_ISDIR(st.st_mode)) {
        g_message("verbs run directory '%s' cannot be made: %s", run_dir, g_strerror(errno));
        return;
    }
    if (st.st_uid != geteuid())
        g_message("verbs run directory '%s' belongs to uid %u, not to the agent", run_dir,
                  (unsigned)st.st_uid);
    else if ((st.st_mode & 07777) != 01733 && chmod(run_dir, 01733) < 0)
        g_message("verbs run directory '%s': cannot make it 01733: %s", run_dir,
                  g_strerror(errno));
}

AgentPeer *agent_peer_new(const char *listen, const char *run_dir, GError **error)
{
    g_autoptr(GSocketAddress) want = NULL;
    g_autoptr(GInetAddress) ip = NULL;
    g_autofree char *host = NULL;
    AgentPeer *peer;
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    guint64 port = 0;

    if (!colon || colon == listen ||
        !g_ascii_string_to_unsigned(colon + 1, 10, 1, 65535, &port, NULL)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "peer listen address '%s' is not ADDR:PORT", listen ? listen : "");
        return NULL;
    }
    host = g_strndup(listen, (gsize)(colon - listen));
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        char *inner = g_strndup(host + 1, strlen(host) - 2);
        g_free(host);
        host = inner;
    }
    ip = g_inet_address_new_from_string(host);
    if (!ip) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "peer listen address '%s' is not an IP address", host);
        return NULL;
    }
    if (!run_dir || run_dir[0] != '/') {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "verbs run directory '%s' is not absolute", run_dir ? run_dir : "");
        return NULL;
    }
    want = g_inet_socket_address_new(ip, (guint16)port);
    peer = g_new0(AgentPeer, 1);
    peer->run_dir = g_strdup(run_dir);
    peer->per_addr = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    peer->route_timeout_ms = PEER_ROUTE_TIMEOUT_MS;
    peer->routed_timeout_ms = PEER_ROUTED_TIMEOUT_MS;
    g_queue_init(&peer->pending);
    peer_run_dir_make(run_dir);
    peer->service = g_socket_service_new();
    if (!g_socket_listener_add_address(G_SOCKET_LISTENER(peer->service), want,
                                       G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL, NULL,
                                       error)) {
        g_prefix_error(error, "Cannot listen for verbs peers on %s: ", listen);
        agent_peer_free(peer);
        return NULL;
    }
    g_signal_connect(peer->service, "incoming", G_CALLBACK(peer_incoming), peer);
    g_socket_service_start(peer->service);
    g_message("listening for verbs peers on %s (run directory %s)", listen, run_dir);
    return peer;
}

void agent_peer_free(AgentPeer *peer)
{
    if (!peer)
        return;
    if (peer->service) {
        g_socket_service_stop(peer->service);
        g_socket_listener_close(G_SOCKET_LISTENER(peer->service));
        g_object_unref(peer->service);
    }
    /* connections still open end on their own; they no longer count in @peer */
    for (GList *l = peer->pending.head; l; l = l->next) {
        PeerConn *pc = l->data;

        pc->peer = NULL;
        pc->link = NULL;
        g_cancellable_cancel(pc->cancel);
    }
    g_queue_clear(&peer->pending);
    for (GList *l = peer->splices; l; l = l->next) {
        PeerSplice *sp = l->data;

        sp->peer = NULL;
        g_cancellable_cancel(sp->cancel);
    }
    g_list_free(peer->splices);
    g_free(peer->run_dir);
    g_clear_pointer(&peer->per_addr, g_hash_table_unref);
    g_free(peer);
}

void agent_peer_set_timeouts(AgentPeer *peer, guint route_ms, guint routed_ms)
{
    peer->route_timeout_ms = route_ms;
    peer->routed_timeout_ms = routed_ms;
}
