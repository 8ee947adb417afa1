/* hotmigd's HTTPS listener: libsoup's SoupServer with the host's certificate, client
 * certificates required and checked against the CA (mutual TLS). It only carries requests to
 * api.c (and /v1/alerts to alerts.c) and their replies back. Also the plain-HTTP listener of
 * the failure-prediction hook: the Alertmanager webhook and /metrics (at the end). One of the
 * two files that use libsoup (engine/hotmigd-client-soup.c is the other; docs/decisions.md). */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/server.h"
#include "hotmigd/server-priv.h"

#include <json-glib/json-glib.h>

#include <libsoup/soup.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

/* A listener's connections (issue 15, item 3; the alert listener's too, issue 28, finding 7):
 * at most max at once; one that has not sent its first request within handshake_s, or stays
 * idle idle_s, is closed by its socket's timeout. When full, the oldest connection still
 * without a request makes room. */
typedef struct {
    const char *what;  /* "HTTPS connections", for the log */
    GHashTable *table; /* GSocket (weak) -> ServerConn; NULL once the listener stops */
    guint max, handshake_s, idle_s;
    guint64 evicted;
} ServerConns;

struct HotmigdServer {
    SoupServer *soup;
    GTlsDatabase *ca;  /* client certificates must chain to it */
    HotmigdApi api;    /* what the API's methods are bound to (borrowed) */
    HotmigdApiWorker *worker; /* runs the pool's requests (api.worker) */
    const HotmigdAuthz *authz; /* who a client certificate is (borrowed); NULL: nobody */
    guint port;
    ServerConns conns;
    GSource *sweep; /* every second: closes silent connections */
};

/* Handshakes (connections without a request yet) at once; a newcomer closes the oldest. */
#define SERVER_HANDSHAKES_MAX 32
/* A connection that has not even sent its certificate after this long is a silent one: the
 * sweep closes it (its handshake holds a worker thread; see server_conn_track()). */
#define SERVER_SILENT_MAX_US (2 * G_TIME_SPAN_SECOND)

typedef struct {
    ServerConns *conns;
    GSocket *sock; /* weak */
    gint64 since;  /* monotonic, when first seen */
    gboolean served; /* a request was read: the handshake is done */
    gboolean spoke;  /* its certificate arrived: a client in its handshake, not a silent one */
} ServerConn;

static void server_conn_gone(gpointer data, GObject *where_the_socket_was)
{
    ServerConn *conn = data;

    g_hash_table_remove(conn->conns->table, where_the_socket_was);
}

static void server_conn_free(ServerConn *conn)
{
    g_free(conn);
}

/* @conn no longer counts (its socket stays as it is). */
static void server_conn_forget(ServerConns *conns, ServerConn *conn)
{
    g_object_weak_unref(G_OBJECT(conn->sock), server_conn_gone, conn);
    g_hash_table_remove(conns->table, conn->sock);
}

#define SERVER_SOCK_KEY "hotmigd-socket"

/* The connection of @msg ended: it no longer counts, whether or not its socket object goes
 * (libsoup 3.2.2 keeps the GSocket of a TLS connection after closing it). The socket was
 * noted on the message when it started (libsoup forgets it at the disconnection); the entry
 * is dropped only if it is still that socket's. */
static void server_conn_ended(SoupServerMessage *msg, gpointer data)
{
    ServerConns *conns = data;
    GSocket *sock = g_object_get_data(G_OBJECT(msg), SERVER_SOCK_KEY);
    ServerConn *conn = sock && conns->table ? g_hash_table_lookup(conns->table, sock) : NULL;

    if (conn)
        server_conn_forget(conns, conn);
}

/* The oldest connection that has not sent a request yet, or NULL; *ret_n: how many have not. */
static ServerConn *server_conn_oldest_unserved(ServerConns *conns, guint *ret_n)
{
    GHashTableIter it;
    gpointer value;
    ServerConn *oldest = NULL;
    guint n = 0;

    g_hash_table_iter_init(&it, conns->table);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        ServerConn *conn = value;

        if (conn->served)
            continue;
        n++;
        /* A client that sent its certificate is finishing its handshake: let it. */
        if (!conn->spoke && (!oldest || conn->since < oldest->since))
            oldest = conn;
    }
    *ret_n = n;
    return oldest;
}

/* Closes @victim's connection (its handshake or read ends at once) and forgets it. */
static void server_conn_evict(ServerConns *conns, ServerConn *victim, const char *why)
{
    conns->evicted++;
    if (conns->evicted == 1 || conns->evicted % 1000 == 0)
        g_message("%s: %s: closing one without a request (%" G_GUINT64_FORMAT " so far)",
                  conns->what, why, conns->evicted);
    g_socket_shutdown(victim->sock, TRUE, TRUE, NULL);
    server_conn_forget(conns, victim);
}

static gboolean server_conn_sweep(gpointer data)
{
    HotmigdServer *server = data;
    g_autoptr(GPtrArray) silent = g_ptr_array_new();
    gint64 now = g_get_monotonic_time();
    GHashTableIter it;
    gpointer value;

    g_hash_table_iter_init(&it, server->conns.table);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        ServerConn *conn = value;

        if (!conn->served && !conn->spoke && now - conn->since > SERVER_SILENT_MAX_US)
            g_ptr_array_add(silent, conn);
    }
    for (guint i = 0; i < silent->len; i++)
        server_conn_evict(&server->conns, g_ptr_array_index(silent, i), "silent for 2 s");
    return G_SOURCE_CONTINUE;
}

/* A connection's first message: count it, make room when full, start its handshake clock. */
static void server_conn_track(ServerConns *conns, GSocket *sock)
{
    ServerConn *conn;

    if (!sock || g_hash_table_contains(conns->table, sock))
        return;
    /* A TLS handshake holds one of GIO's worker threads until the client speaks (the TLS
     * backend runs handshakes in a thread pool): a handful of silent clients would keep every
     * other client waiting. Handshakes in progress are few and short for real clients. */
    {
        guint unserved = 0;
        ServerConn *victim = server_conn_oldest_unserved(conns, &unserved);

        if (victim && unserved >= SERVER_HANDSHAKES_MAX) {
            server_conn_evict(conns, victim, "too many handshakes at once");
        } else if (g_hash_table_size(conns->table) >= conns->max) {
            if (!victim) {
                /* Every one is serving a client: this newcomer waits for none of them. */
                g_socket_shutdown(sock, TRUE, TRUE, NULL);
                return;
            }
            server_conn_evict(conns, victim, "at [hotmigd] max-connections");
        }
    }
    conn = g_new0(ServerConn, 1);
    conn->conns = conns;
    conn->sock = sock;
    conn->since = g_get_monotonic_time();
    g_hash_table_insert(conns->table, sock, conn);
    g_object_weak_ref(G_OBJECT(sock), server_conn_gone, conn);
    g_socket_set_timeout(sock, conns->handshake_s);
}

/* A request was read: the client is who it said; from now on only idleness ends it. */
static void server_request_read(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    ServerConns *conns = data;
    GSocket *sock = soup_server_message_get_socket(msg);
    ServerConn *conn = sock ? g_hash_table_lookup(conns->table, sock) : NULL;

    if (conn && !conn->served) {
        conn->served = TRUE;
        g_socket_set_timeout(sock, conns->idle_s);
    }
}

/* Counts @conns' connections from @listener's messages on (0 in a limit: its default). */
static void server_conns_init(ServerConns *conns, const char *what, SoupServer *listener,
                              guint max, guint handshake_s, guint idle_s)
{
    conns->what = what;
    conns->table = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                         (GDestroyNotify)server_conn_free);
    conns->max = max ? max : 256;
    conns->handshake_s = handshake_s ? handshake_s : 10;
    conns->idle_s = idle_s ? idle_s : 60;
    g_signal_connect(listener, "request-read", G_CALLBACK(server_request_read), conns);
}

/* Before the listener disconnects its connections: the table goes (NULL: the disconnections
 * find none, server_conn_ended()), the sockets stay as they are. */
static void server_conns_clear(ServerConns *conns)
{
    GHashTableIter it;
    gpointer key, value;

    if (!conns->table)
        return;
    g_hash_table_iter_init(&it, conns->table);
    while (g_hash_table_iter_next(&it, &key, &value))
        g_object_weak_unref(G_OBJECT(key), server_conn_gone, value);
    g_clear_pointer(&conns->table, g_hash_table_unref);
}

/* ---- the clients' certificates ------------------------------------------------------------
 * A SoupServerMessage takes a reference to its connection's peer certificate at the handshake
 * (its "tls-peer-certificate") and its finalize never drops it: every libsoup 3 release up to
 * 3.6.6 and 3.7.1, and its master of July 2026 (soup-server-message.c). Each HTTPS request
 * kept its client's certificate, a GTlsCertificateGnutls with its gnutls_x509_crt_t (12-40 KiB
 * of ASN.1 nodes), for ever: the ~21 KiB per request of the soak (docs/reliability.md). On
 * those versions the message's reference is handed to the message's data, which GObject frees
 * after the message's finalize. A libsoup not known to leak it is left alone (should it still
 * leak, hotmigd-tls-test's test_certificates_freed fails: add it here). Nothing is kept on
 * the connection's socket either: libsoup 3.1.2 to 3.3 never free it (their listener keeps a
 * reference to every socket it accepted, ~0.4 KiB each; fixed in 3.4.0 by b545d5f0). */
#define SERVER_MSG_CERT_KEY "hotmigd-message-certificate"

static gboolean server_soup_keeps_certificates(void)
{
    guint minor = soup_get_minor_version(), micro = soup_get_micro_version();

    return soup_get_major_version() == 3 &&
           (minor < 6 || (minor == 6 && micro <= 6) || (minor == 7 && micro <= 1));
}

/* The message's certificate changed: the reference it took to the new one is released with
 * the message's data; its previous one it released itself. */
static void server_msg_certificate_changed(SoupServerMessage *msg, GParamSpec *pspec, gpointer data)
{
    GTlsCertificate *cert = soup_server_message_get_tls_peer_certificate(msg);

    g_object_steal_data(G_OBJECT(msg), SERVER_MSG_CERT_KEY);
    if (cert)
        g_object_set_data_full(G_OBJECT(msg), SERVER_MSG_CERT_KEY, cert, g_object_unref);
}

#define SERVER_CERT_COUNTED_KEY "hotmigd-counted"

/* Client certificates accepted and not finalized yet, and accepted in all, of every server of
 * the process. */
static gint server_certs_alive;
static gint server_certs_seen;

static void server_cert_gone(gpointer data, GObject *where_the_certificate_was)
{
    g_atomic_int_dec_and_test(&server_certs_alive);
}

/* Counts @cert among the live client certificates until it is finalized. */
static void server_cert_count(GTlsCertificate *cert)
{
    if (g_object_get_data(G_OBJECT(cert), SERVER_CERT_COUNTED_KEY))
        return;
    g_object_set_data(G_OBJECT(cert), SERVER_CERT_COUNTED_KEY, GINT_TO_POINTER(1));
    g_atomic_int_inc(&server_certs_alive);
    g_atomic_int_inc(&server_certs_seen);
    g_object_weak_ref(G_OBJECT(cert), server_cert_gone, NULL);
}

guint hotmigd_server_certificates_alive(void)
{
    return (guint)g_atomic_int_get(&server_certs_alive);
}

guint hotmigd_server_certificates_seen(void)
{
    return (guint)g_atomic_int_get(&server_certs_seen);
}

/* The client certificate accepted at @msg's handshake (borrowed), or NULL. Every connection
 * carries one request (server_close_after()), the one started with the handshake: it has the
 * certificate. A later one would not, and would be nobody. */
static GTlsCertificate *server_peer_certificate(SoupServerMessage *msg)
{
    return soup_server_message_get_tls_peer_certificate(msg);
}

/* "ADDRESS (SUBJECT)" of @msg's peer, for the log (owned). */
static char *server_peer(SoupServerMessage *msg)
{
    GTlsCertificate *cert = server_peer_certificate(msg);
    g_autofree char *subject = NULL;
    const char *host = soup_server_message_get_remote_host(msg);

    if (cert)
        g_object_get(cert, "subject-name", &subject, NULL);
    return g_strdup_printf("%s (%s)", host ? host : "?", subject ? subject : "?");
}

static void server_reply(SoupServerMessage *msg, guint status, const char *json)
{
    soup_server_message_set_status(msg, status, NULL);
    soup_server_message_set_response(msg, "application/json", SOUP_MEMORY_COPY, json, strlen(json));
}

/* Every answer closes its connection. libsoup 3.2.2 (Debian 12) leaks a kept-alive connection
 * that its client closes while it is idle: the socket stays in CLOSE-WAIT with its descriptor
 * open, and the TLS server counted it against max-connections for ever (the lab's hotmigd
 * refused every client after its 255th connection). Fixed in libsoup 3.3.0 (its commit
 * d20c6601, "server: do not leak idle connections closed by the client"); a client pays a
 * TLS handshake per request instead (~6 ms on loopback). docs/decisions.md. */
static void server_close_after(SoupServerMessage *msg)
{
    soup_message_headers_replace(soup_server_message_get_response_headers(msg), "Connection",
                                 "close");
}

/* A refusal before the request was read: {"error": MESSAGE}, logged with who sent it (@peer),
 * the connection closed. */
static void server_refuse(SoupServerMessage *msg, guint status, const char *message,
                          const char *peer)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;
    g_autofree char *json = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_add_string_value(b, message);
    json_builder_end_object(b);
    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json = json_generator_to_data(gen, NULL);
    server_reply(msg, status, json);
    server_close_after(msg);
    g_message("%s %.200s from %s: %u %s", soup_server_message_get_method(msg),
              g_uri_get_path(soup_server_message_get_uri(msg)), peer, status, message);
}

/* A refusal before the API saw the request: {"error": MESSAGE}, logged. */
static void server_reply_error(SoupServerMessage *msg, guint status, const char *message)
{
    g_autofree char *peer = server_peer(msg);

    server_refuse(msg, status, message, peer);
}

/* GIO asks the server about every client certificate, valid or not, and accepts only what a
 * handler accepts: a certificate that chains to our CA (for client authentication), with no
 * error GIO found either. Refusals end the handshake; they are logged here, since the client
 * only sees the connection end. */
static gboolean server_accept_certificate(SoupServerMessage *msg, GTlsCertificate *cert,
                                          GTlsCertificateFlags errors, gpointer data)
{
    HotmigdServer *server = data;
    const char *host = soup_server_message_get_remote_host(msg);
    g_autofree char *subject = NULL;
    g_autoptr(GError) local = NULL;
    GTlsCertificateFlags ours = G_TLS_CERTIFICATE_GENERIC_ERROR;

    if (cert) {
        g_object_get(cert, "subject-name", &subject, NULL);
        ours = g_tls_database_verify_chain(server->ca, cert,
                                           G_TLS_DATABASE_PURPOSE_AUTHENTICATE_CLIENT, NULL, NULL,
                                           G_TLS_DATABASE_VERIFY_NONE, NULL, &local);
    }
    g_autoptr(GString) why = g_string_new(NULL);

    if (cert && errors == 0 && ours == 0 && !local) {
        GSocket *sock = soup_server_message_get_socket(msg);
        ServerConn *conn = sock ? g_hash_table_lookup(server->conns.table, sock) : NULL;

        if (conn)
            conn->spoke = TRUE;
        server_cert_count(cert);
        return TRUE;
    }
    errors |= ours;
    if (errors & G_TLS_CERTIFICATE_UNKNOWN_CA)
        g_string_append(why, ", not signed by the CA");
    if (errors & G_TLS_CERTIFICATE_EXPIRED)
        g_string_append(why, ", expired");
    if (errors & G_TLS_CERTIFICATE_NOT_ACTIVATED)
        g_string_append(why, ", not valid yet");
    if (errors & G_TLS_CERTIFICATE_REVOKED)
        g_string_append(why, ", revoked");
    if (errors & G_TLS_CERTIFICATE_INSECURE)
        g_string_append(why, ", insecure");
    if (local)
        g_string_append_printf(why, ", %s", local->message);
    if (!why->len)
        g_string_append_printf(why, ", verification flags 0x%x", errors);
    g_message("Refused the client certificate '%s' of %s: %s", subject ? subject : "none",
              host ? host : "?", why->str + 2);
    return FALSE;
}

/* @msg starts: it closes its connection when answered, which counts in @conns until the
 * message's "disconnected". */
static void server_conns_start(ServerConns *conns, SoupServerMessage *msg)
{
    GSocket *sock = soup_server_message_get_socket(msg);

    server_close_after(msg);
    server_conn_track(conns, sock);
    g_object_set_data(G_OBJECT(msg), SERVER_SOCK_KEY, sock);
    g_signal_connect(msg, "disconnected", G_CALLBACK(server_conn_ended), conns);
}

static void server_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    HotmigdServer *server = data;

    server_conns_start(&server->conns, msg);
    g_signal_connect(msg, "accept-certificate", G_CALLBACK(server_accept_certificate), data);
    if (server_soup_keeps_certificates())
        g_signal_connect(msg, "notify::tls-peer-certificate",
                         G_CALLBACK(server_msg_certificate_changed), NULL);
}

/* After the request headers, before the body: refuse bodies over the limit (413) and bodies
 * of unknown length (411), so that no large body is read at all. */
static void server_early(SoupServer *soup, SoupServerMessage *msg, const char *path,
                         GHashTable *query, gpointer data)
{
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    SoupEncoding encoding = soup_message_headers_get_encoding(headers);
    goffset length;

    if (encoding == SOUP_ENCODING_CONTENT_LENGTH) {
        length = soup_message_headers_get_content_length(headers);
        if (length > HOTMIGD_API_MAX_BODY) {
            g_autofree char *text = g_strdup_printf("the request body has %" G_GOFFSET_FORMAT
                                                    " bytes, more than the limit of %d",
                                                    length, HOTMIGD_API_MAX_BODY);

            server_reply_error(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, text);
            soup_message_headers_append(soup_server_message_get_response_headers(msg), "Connection",
                                        "close");
        }
    } else if (encoding != SOUP_ENCODING_NONE) {
        server_reply_error(msg, SOUP_STATUS_LENGTH_REQUIRED,
                           "a request body needs a Content-Length header");
    }
}

/* A request the API answers later (GET /v1/snapshot): the message is paused until then. */
typedef struct {
    SoupServerMessage *msg;
    char *method;
    char *path;
    char *peer;
    HotmigdAuthzClient *who;
    gboolean in_handler; /* the answer came before the handler returned: nothing to unpause */
    gboolean answered;
} Pending;

static void pending_free(Pending *p)
{
    g_object_unref(p->msg);
    g_free(p->method);
    g_free(p->path);
    g_free(p->peer);
    hotmigd_authz_client_free(p->who);
    g_free(p);
}

/* Who the client of @msg is, from the certificate accepted at the handshake. Owned, never
 * NULL. */
static HotmigdAuthzClient *server_who(HotmigdServer *server, SoupServerMessage *msg)
{
    GTlsCertificate *cert = server_peer_certificate(msg);

    if (!server->authz) {
        g_autoptr(GPtrArray) ids = hotmigd_authz_cert_identities(cert);

        return hotmigd_authz_client_new(ids->len ? g_ptr_array_index(ids, 0) : NULL, NULL, 0);
    }
    return hotmigd_authz_identify(server->authz, cert);
}

static void server_answer(HotmigdApiReply *reply, gpointer data)
{
    Pending *p = data;
    g_autoptr(HotmigdApiReply) owned = reply;

    server_reply(p->msg, reply->status, reply->body);
    /* Changes and refusals are logged (who did what); reads only when debugging. */
    if (reply->log)
        g_message("%s %.200s from %s: %u %s", p->method, p->path, p->peer, reply->status,
                  reply->log);
    else
        g_debug("%s %.200s from %s: %u", p->method, p->path, p->peer, reply->status);
    p->answered = TRUE;
    if (p->in_handler)
        return;
    soup_server_message_unpause(p->msg);
    pending_free(p);
}

static void server_handle(SoupServer *soup, SoupServerMessage *msg, const char *path,
                          GHashTable *query, gpointer data)
{
    HotmigdServer *server = data;
    SoupMessageBody *body = soup_server_message_get_request_body(msg);
    g_autoptr(GBytes) bytes = soup_message_body_flatten(body);
    Pending *p = g_new0(Pending, 1);
    gsize len = 0;
    const char *data_ptr = g_bytes_get_data(bytes, &len);

    p->msg = g_object_ref(msg);
    p->method = g_strdup(soup_server_message_get_method(msg));
    p->path = g_strdup(g_uri_get_path(soup_server_message_get_uri(msg)));
    p->peer = server_peer(msg);
    p->who = server_who(server, msg);
    p->in_handler = TRUE;
    hotmigd_api_dispatch(&server->api,
                         &(HotmigdApiRequest){.method = p->method,
                                              .path = p->path,
                                              .body = data_ptr,
                                              .len = len,
                                              .peer = p->peer,
                                              .who = p->who},
                         server_answer, p);
    p->in_handler = FALSE;
    if (!p->answered) {
        soup_server_message_pause(msg);
        return;
    }
    pending_free(p);
}

void hotmigd_server_set_services(HotmigdServer *server, const HotmigdApiServices *services)
{
    g_return_if_fail(server != NULL);
    server->api.services = services;
}

HotmigdApiWorker *hotmigd_server_get_worker(HotmigdServer *server)
{
    g_return_val_if_fail(server != NULL, NULL);
    return server->worker;
}

void hotmigd_server_free(HotmigdServer *server)
{
    if (!server)
        return;
    /* The pool's requests still queued are answered before the connections go. */
    g_clear_pointer(&server->worker, hotmigd_api_worker_free);
    if (server->sweep) {
        g_source_destroy(server->sweep);
        g_source_unref(server->sweep);
    }
    server_conns_clear(&server->conns);
    if (server->soup) {
        soup_server_disconnect(server->soup);
        g_object_unref(server->soup);
    }
    g_clear_object(&server->ca);
    g_free(server);
}

/* Listens on @addr with a backlog that holds a burst of clients (GIO's default is 10: a flood
 * of idle connections would keep a real client waiting in the kernel's queue). */
static gboolean server_listen_address(HotmigdServer *server, GSocketAddress *addr, GError **error)
{
    g_autoptr(GSocket) sock =
        g_socket_new(g_socket_address_get_family(addr), G_SOCKET_TYPE_STREAM,
                     G_SOCKET_PROTOCOL_TCP, error);

    if (!sock)
        return FALSE;
    g_socket_set_listen_backlog(sock, 4096);
    /* A client that connects and says nothing is not handed to us before it speaks (or the
     * handshake timeout passed): idle connections cost the kernel a queue entry, not a thread. */
    if (!g_socket_set_option(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT,
                             (gint)server->conns.handshake_s, error))
        return FALSE;
    return g_socket_bind(sock, addr, TRUE, error) && g_socket_listen(sock, error) &&
           soup_server_listen_socket(server->soup, sock, SOUP_SERVER_LISTEN_HTTPS, error);
}

/* The port of the first listener. */
static guint server_listen_port(SoupServer *soup)
{
    GSList *listeners = soup_server_get_listeners(soup);
    guint port = 0;

    for (GSList *l = listeners; l && !port; l = l->next) {
        g_autoptr(GSocketAddress) addr = g_socket_get_local_address(l->data, NULL);

        if (addr && G_IS_INET_SOCKET_ADDRESS(addr))
            port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(addr));
    }
    g_slist_free(listeners);
    return port;
}

HotmigdServer *hotmigd_server_new(const HotmigdServerConfig *config, HotmigdPool *pool,
                                  GError **error)
{
    g_autoptr(HotmigdServer) server = g_new0(HotmigdServer, 1);
    g_autoptr(GTlsCertificate) cert = NULL;
    g_autoptr(GTlsDatabase) ca = NULL;
    g_autoptr(GError) local = NULL;
    gboolean ok;

    g_return_val_if_fail(config && config->cert && config->key && config->ca && pool, NULL);

    if (!g_tls_backend_supports_tls(g_tls_backend_get_default())) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "GIO has no TLS backend (install glib-networking)");
        return NULL;
    }
    cert = g_tls_certificate_new_from_files(config->cert, config->key, &local);
    if (!cert) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Cannot load the server certificate '%s' with key '%s': %s", config->cert,
                    config->key, local->message);
        return NULL;
    }
    ca = g_tls_file_database_new(config->ca, &local);
    if (!ca) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Cannot load the CA certificate '%s': %s", config->ca, local->message);
        return NULL;
    }
    server->api.pool = pool;
    server->worker = hotmigd_api_worker_new(0);
    server->api.worker = server->worker;
    server->sweep = g_timeout_source_new_seconds(1);
    g_source_set_callback(server->sweep, server_conn_sweep, server, NULL);
    g_source_attach(server->sweep, g_main_context_get_thread_default());
    server->api.file_roots = config->file_roots;
    server->authz = config->authz;
    server->ca = g_object_ref(ca);
    server->soup = soup_server_new("tls-certificate", cert, "tls-database", ca, "tls-auth-mode",
                                   G_TLS_AUTHENTICATION_REQUIRED, "server-header",
                                   "hotmigd/" HOTMIG_VERSION, NULL);
    server_conns_init(&server->conns, "HTTPS connections", server->soup, config->max_connections,
                      config->handshake_timeout_s, config->idle_timeout_s);
    g_signal_connect(server->soup, "request-started", G_CALLBACK(server_request_started), server);
    soup_server_add_early_handler(server->soup, NULL, server_early, server, NULL);
    soup_server_add_handler(server->soup, NULL, server_handle, server, NULL);

    if (config->listen && *config->listen) {
        g_autoptr(GInetAddress) inet = g_inet_address_new_from_string(config->listen);
        g_autoptr(GSocketAddress) addr = NULL;

        if (!inet) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                        "listen address '%s' is not an IP address", config->listen);
            return NULL;
        }
        addr = g_inet_socket_address_new(inet, config->port);
        ok = server_listen_address(server, addr, &local);
    } else {
        ok = soup_server_listen_all(server->soup, config->port, SOUP_SERVER_LISTEN_HTTPS, &local);
    }
    if (!ok) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot listen on %s%s%s port %u: %s",
                    config->listen && *config->listen ? "'" : "",
                    config->listen && *config->listen ? config->listen : "every address",
                    config->listen && *config->listen ? "'" : "", config->port, local->message);
        return NULL;
    }
    server->port = server_listen_port(server->soup);
    return g_steal_pointer(&server);
}

guint hotmigd_server_get_port(const HotmigdServer *server)
{
    g_return_val_if_fail(server != NULL, 0);
    return server->port;
}

void hotmigd_server_set_alerts(HotmigdServer *server, HotmigdApiAlertsFunc alerts, gpointer data)
{
    g_return_if_fail(server != NULL);
    server->api.alerts = alerts;
    server->api.alerts_data = data;
}

/* ---- the alert listener: the Alertmanager webhook and /metrics, plain HTTP ------------------ */

#define ALERT_WEBHOOK_PATH "/v1/alerts/alertmanager"
#define ALERT_METRICS_PATH "/metrics"

struct OrchAlertListener {
    SoupServer *soup;
    const OrchAlertListenerOps *ops; /* borrowed */
    gpointer owner;                  /* borrowed */
    guint port;
    ServerConns conns; /* the HTTPS server's limits (issue 28, finding 7) */
    GList *waiting; /* SoupServerMessage: paused until their events are handled */
};

static void alert_reply(SoupServerMessage *msg, HotmigdApiReply *reply)
{
    server_reply(msg, reply->status, reply->body);
}

/* A refusal before the body is read: {"error": MESSAGE}, logged, the connection closed. */
static void alert_refuse(SoupServerMessage *msg, guint status, const char *message)
{
    const char *host = soup_server_message_get_remote_host(msg);

    server_refuse(msg, status, message, host ? host : "?");
}

/* The alert listener's answers close their connections too (server_close_after()): an
 * Alertmanager keeps its webhook connections alive and closes them when idle. Its connections
 * count as the HTTPS server's do: off loopback anyone may open them. */
static void alert_request_started(SoupServer *soup, SoupServerMessage *msg, gpointer data)
{
    OrchAlertListener *listener = data;

    server_conns_start(&listener->conns, msg);
}

/* After the headers: the path and method, the bearer token, then the body's size: nothing
 * unauthorized or too large is read. */
static void alert_early(SoupServer *soup, SoupServerMessage *msg, const char *path,
                        GHashTable *query, gpointer data)
{
    OrchAlertListener *listener = data;
    SoupMessageHeaders *headers = soup_server_message_get_request_headers(msg);
    const char *method = soup_server_message_get_method(msg);
    g_autofree char *why = NULL;
    g_autofree char *text = NULL;
    goffset length;

    if (g_strcmp0(path, ALERT_METRICS_PATH) == 0) {
        if (!g_str_equal(method, "GET") && !g_str_equal(method, "HEAD"))
            alert_refuse(msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
                         "only GET is allowed on " ALERT_METRICS_PATH);
        else if (soup_message_headers_get_encoding(headers) != SOUP_ENCODING_NONE)
            alert_refuse(msg, SOUP_STATUS_BAD_REQUEST, "GET " ALERT_METRICS_PATH " takes no body");
        return;
    }
    if (g_strcmp0(path, ALERT_WEBHOOK_PATH) != 0) {
        text = g_strdup_printf(
            "no path %.200s here (POST " ALERT_WEBHOOK_PATH ", GET " ALERT_METRICS_PATH ")", path);
        alert_refuse(msg, SOUP_STATUS_NOT_FOUND, text);
        return;
    }
    if (!g_str_equal(method, "POST")) {
        alert_refuse(msg, SOUP_STATUS_METHOD_NOT_ALLOWED,
                     "only POST is allowed on " ALERT_WEBHOOK_PATH);
        return;
    }
    if (!listener->ops->authorized(listener->owner,
                                   soup_message_headers_get_one(headers, "Authorization"), &why)) {
        soup_message_headers_append(soup_server_message_get_response_headers(msg),
                                    "WWW-Authenticate", "Bearer");
        text = g_strdup_printf("not authorized: %s", why);
        alert_refuse(msg, SOUP_STATUS_UNAUTHORIZED, text);
        return;
    }
    if (soup_message_headers_get_encoding(headers) != SOUP_ENCODING_CONTENT_LENGTH) {
        alert_refuse(msg, SOUP_STATUS_LENGTH_REQUIRED,
                     "the webhook body needs a Content-Length header");
        return;
    }
    length = soup_message_headers_get_content_length(headers);
    if (length > (goffset)listener->ops->webhook_max_bytes) {
        text = g_strdup_printf("the webhook body has %" G_GOFFSET_FORMAT
                               " bytes, more than the limit of %" G_GSIZE_FORMAT,
                               length, listener->ops->webhook_max_bytes);
        alert_refuse(msg, SOUP_STATUS_REQUEST_ENTITY_TOO_LARGE, text);
    }
}

/* A request paused until its answer comes (a webhook body's events, /metrics' VF counts). The
 * client may close its connection meanwhile, and the listener may be freed: the message is
 * then left alone (libsoup cleared its I/O), only our reference is dropped. */
typedef struct {
    OrchAlertListener *listener; /* NULL once the listener is gone */
    SoupServerMessage *msg;      /* a reference */
    gulong disconnected;         /* handler id */
    gboolean gone;               /* the client's connection closed */
    char *peer;
} AlertWait;

static void alert_wait_disconnected(SoupServerMessage *msg, gpointer data)
{
    ((AlertWait *)data)->gone = TRUE;
}

/* Pauses @msg until alert_wait_end(). */
static AlertWait *alert_wait_new(OrchAlertListener *listener, SoupServerMessage *msg)
{
    const char *host = soup_server_message_get_remote_host(msg);
    AlertWait *wait = g_new0(AlertWait, 1);

    wait->listener = listener;
    wait->msg = g_object_ref(msg);
    wait->peer = g_strdup(host ? host : "?");
    wait->disconnected =
        g_signal_connect(msg, "disconnected", G_CALLBACK(alert_wait_disconnected), wait);
    listener->waiting = g_list_prepend(listener->waiting, wait);
    soup_server_message_pause(msg);
    return wait;
}

/* May @wait's message still be answered? */
static gboolean alert_wait_open(const AlertWait *wait)
{
    return wait->listener && !wait->gone;
}

/* Sends what was set on the message, if it still may be, and frees @wait. */
static void alert_wait_end(AlertWait *wait)
{
    if (wait->listener)
        wait->listener->waiting = g_list_remove(wait->listener->waiting, wait);
    if (alert_wait_open(wait))
        soup_server_message_unpause(wait->msg);
    g_signal_handler_disconnect(wait->msg, wait->disconnected);
    g_object_unref(wait->msg);
    g_free(wait->peer);
    g_free(wait);
}

static void alert_webhook_done(HotmigdApiReply *reply, gpointer data)
{
    AlertWait *wait = data;
    g_autoptr(HotmigdApiReply) owned = reply;

    if (alert_wait_open(wait))
        alert_reply(wait->msg, reply);
    if (wait->listener && reply->log)
        g_message("POST " ALERT_WEBHOOK_PATH " from %s: %u %s", wait->peer, reply->status,
                  reply->log);
    alert_wait_end(wait);
}

static void alert_metrics_done(char *text, gpointer data)
{
    AlertWait *wait = data;
    g_autofree char *owned = text;
    gsize len = strlen(text);

    if (alert_wait_open(wait)) {
        soup_server_message_set_status(wait->msg, SOUP_STATUS_OK, NULL);
        soup_server_message_set_response(wait->msg, wait->listener->ops->metrics_content_type,
                                         SOUP_MEMORY_TAKE, g_steal_pointer(&owned), len);
    }
    alert_wait_end(wait);
}

static void alert_handle(SoupServer *soup, SoupServerMessage *msg, const char *path,
                         GHashTable *query, gpointer data)
{
    OrchAlertListener *listener = data;
    SoupMessageBody *body;
    g_autoptr(GBytes) bytes = NULL;
    AlertWait *wait;
    gsize len = 0;
    const char *ptr;

    if (g_strcmp0(path, ALERT_METRICS_PATH) == 0) {
        /* The VF counts come from the pool's worker thread: the answer comes later. */
        wait = alert_wait_new(listener, msg);
        listener->ops->metrics(listener->owner, alert_metrics_done, wait);
        return;
    }
    /* Only the webhook gets here (alert_early() answered the rest). */
    body = soup_server_message_get_request_body(msg);
    bytes = soup_message_body_flatten(body);
    ptr = g_bytes_get_data(bytes, &len);
    /* Events about other hosts wait for their daemons: the reply comes later. */
    wait = alert_wait_new(listener, msg);
    listener->ops->webhook(listener->owner, ptr ? ptr : "", len, wait->peer, alert_webhook_done,
                           wait);
}

/* Listens on @addr with a backlog that holds a burst of webhook requests (GIO's default, 10,
 * left a burst of 200 waiting for SYN retries longer than Alertmanager's timeout); a client
 * that says nothing is not accepted before the handshake timeout, as on the HTTPS port. */
static gboolean alert_listen_address(OrchAlertListener *listener, GSocketAddress *addr,
                                     GError **error)
{
    g_autoptr(GSocket) sock =
        g_socket_new(g_socket_address_get_family(addr), G_SOCKET_TYPE_STREAM,
                     G_SOCKET_PROTOCOL_TCP, error);

    if (!sock)
        return FALSE;
    g_socket_set_listen_backlog(sock, 1024);
    if (!g_socket_set_option(sock, IPPROTO_TCP, TCP_DEFER_ACCEPT,
                             (gint)listener->conns.handshake_s, error))
        return FALSE;
    return g_socket_bind(sock, addr, TRUE, error) && g_socket_listen(sock, error) &&
           soup_server_listen_socket(listener->soup, sock, 0, error);
}

OrchAlertListener *orch_alert_listener_new(const char *listen, guint port,
                                           const OrchServerLimits *limits,
                                           const OrchAlertListenerOps *ops, gpointer owner,
                                           GError **error)
{
    static const OrchServerLimits defaults = {0};
    g_autoptr(OrchAlertListener) listener = g_new0(OrchAlertListener, 1);
    g_autoptr(GError) local = NULL;
    gboolean ok;

    g_return_val_if_fail(ops != NULL, NULL);

    listener->ops = ops;
    listener->owner = owner;
    listener->soup = soup_server_new("server-header", "hotmigd/" HOTMIG_VERSION, NULL);
    limits = limits ? limits : &defaults;
    server_conns_init(&listener->conns, "Alert listener connections", listener->soup,
                      limits->max_connections, limits->handshake_timeout_s, limits->idle_timeout_s);
    g_signal_connect(listener->soup, "request-started", G_CALLBACK(alert_request_started),
                     listener);
    soup_server_add_early_handler(listener->soup, NULL, alert_early, listener, NULL);
    soup_server_add_handler(listener->soup, NULL, alert_handle, listener, NULL);
    if (listen && *listen) {
        g_autoptr(GInetAddress) inet = g_inet_address_new_from_string(listen);
        g_autoptr(GSocketAddress) addr = NULL;

        if (!inet) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                        "[alerts] listen address '%s' is not an IP address", listen);
            return NULL;
        }
        addr = g_inet_socket_address_new(inet, port);
        ok = alert_listen_address(listener, addr, &local);
    } else {
        ok = soup_server_listen_all(listener->soup, port, 0, &local);
    }
    if (!ok) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot listen for alerts on %s%s%s port %u: %s", listen && *listen ? "'" : "",
                    listen && *listen ? listen : "every address", listen && *listen ? "'" : "",
                    port, local->message);
        return NULL;
    }
    listener->port = server_listen_port(listener->soup);
    return g_steal_pointer(&listener);
}

void orch_alert_listener_free(OrchAlertListener *listener)
{
    if (!listener)
        return;
    /* Requests still waiting are answered into the void. */
    for (GList *l = listener->waiting; l; l = l->next)
        ((AlertWait *)l->data)->listener = NULL;
    g_list_free(listener->waiting);
    server_conns_clear(&listener->conns);
    if (listener->soup) {
        soup_server_disconnect(listener->soup);
        g_object_unref(listener->soup);
    }
    g_free(listener);
}

guint orch_alert_listener_get_port(const OrchAlertListener *listener)
{
    g_return_val_if_fail(listener != NULL, 0);
    return listener->port;
}
