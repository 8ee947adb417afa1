/* hotmig-agent: the verbs layer's broker on the control network (docs/verbs-layer.md).
 *
 * A libhotmig-verbs process in another guest connects here (TCP, the control network, never the
 * VF) and sends one line "ROUTE <vqpn>"; the agent looks up which local process registered that
 * QP (RUN_DIR/qp-<vqpn> holds its pid), connects to its socket RUN_DIR/<pid>.sock, answers
 * "ROUTED" and splices the two connections. The layers then talk their peer protocol
 * (docs/protocol.md) through it. Everything the remote sends before the splice is parsed by the
 * layer's one parser (hv-proto.c) with its limits. */
#include "guest-agent/agent/agent-priv.h"
#include "hv-proto.h"

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <string.h>

#define PEER_LINE_MAX 64       /* "ROUTE <vqpn>" */
#define PEER_CONNS_MAX 64      /* unrouted connections at once */
#define PEER_ROUTE_TIMEOUT_S 5 /* to send the ROUTE line */

struct AgentPeer {
    GSocketService *service;
    char *run_dir;
    guint n_pending;
};

typedef struct {
    AgentPeer *peer;
    GSocketConnection *conn;
    GCancellable *cancel;
    guint timeout_id;
    char buf[PEER_LINE_MAX + 1];
    gsize len;
    guint8 byte;
} PeerConn;

static void peer_conn_free(PeerConn *pc)
{
    if (pc->timeout_id)
        g_source_remove(pc->timeout_id);
    if (pc->peer)
        pc->peer->n_pending--;
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

    g_message("peer connection refused: %s", why);
    g_strlcpy(m.text, why, sizeof(m.text));
    if (hv_proto_format(&m, line, sizeof(line)) > 0)
        peer_reply(pc, line);
    g_io_stream_close(G_IO_STREAM(pc->conn), NULL, NULL);
    peer_conn_free(pc);
}

static void peer_splice_done(GObject *src, GAsyncResult *res, gpointer data)
{
    g_autoptr(GError) error = NULL;
    GIOStream *other = data;

    if (!g_io_stream_splice_finish(res, &error) &&
        !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        g_debug("peer connection ended: %s", error->message);
    (void)src;
    g_object_unref(other);
}

/* Reads RUN_DIR/qp-<vqpn>: the pid of the process owning that QP. */
static gboolean peer_owner(AgentPeer *peer, guint32 vqpn, guint64 *pid, GError **error)
{
    g_autofree char *path = g_strdup_printf("%s/" HV_ROUTE_FILE_FMT, peer->run_dir, vqpn);
    g_autofree char *data = NULL;
    gsize len = 0;

    if (!g_file_get_contents(path, &data, &len, error))
        return FALSE;
    g_strchomp(data);
    if (len > 24 || !g_ascii_string_to_unsigned(data, 10, 1, G_MAXINT32, pid, NULL)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO, "'%s' does not hold a pid",
                    path);
        return FALSE;
    }
    return TRUE;
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
    guint64 pid = 0;

    if (hv_proto_parse(pc->buf, pc->len, m) < 0 || m->type != HV_MSG_ROUTE) {
        g_free(m);
        peer_refuse(pc, "expected ROUTE <vqpn>");
        return;
    }
    if (!peer_owner(pc->peer, m->target, &pid, &error)) {
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
    g_debug("peer connection routed to QP %u (pid %" G_GUINT64_FORMAT ")", m->target, pid);
    g_free(m);
    peer_reply(pc, "ROUTED\n");
    g_source_remove(pc->timeout_id);
    pc->timeout_id = 0;
    g_io_stream_splice_async(G_IO_STREAM(pc->conn), G_IO_STREAM(local),
                             G_IO_STREAM_SPLICE_CLOSE_STREAM1 | G_IO_STREAM_SPLICE_CLOSE_STREAM2 |
                                 G_IO_STREAM_SPLICE_WAIT_FOR_BOTH,
                             G_PRIORITY_DEFAULT, NULL, peer_splice_done, g_object_ref(local));
    /* the splice holds both streams now */
    peer_conn_free(pc);
}

static void peer_read_byte(PeerConn *pc);

static void peer_byte_done(GObject *src, GAsyncResult *res, gpointer data)
{
    PeerConn *pc = data;
    g_autoptr(GError) error = NULL;
    gssize n = g_input_stream_read_finish(G_INPUT_STREAM(src), res, &error);

    if (n <= 0) {
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
    g_cancellable_cancel(pc->cancel); /* the pending read ends and frees */
    return G_SOURCE_REMOVE;
}

static gboolean peer_incoming(GSocketService *service, GSocketConnection *conn, GObject *source,
                              gpointer data)
{
    AgentPeer *peer = data;
    PeerConn *pc;

    (void)service;
    (void)source;
    if (peer->n_pending >= PEER_CONNS_MAX) {
        g_message("peer connection refused: %u unrouted connections already", peer->n_pending);
        return TRUE; /* closed when the service drops its reference */
    }
    pc = g_new0(PeerConn, 1);
    pc->peer = peer;
    peer->n_pending++;
    pc->conn = g_object_ref(conn);
    pc->cancel = g_cancellable_new();
    pc->timeout_id = g_timeout_add_seconds(PEER_ROUTE_TIMEOUT_S, peer_timeout, pc);
    peer_read_byte(pc);
    return TRUE;
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
    g_free(peer->run_dir);
    g_free(peer);
}
