/* hotmigd's TLS server (hotmigd/server.c) and the client migrate-vm uses
 * (engine/hotmigd-client-soup.c), in one process: the server runs in a thread of its own over
 * the fake host, the client calls it on 127.0.0.1 with certificates made by
 * tests/unit/test-pki.sh. Checks the client's calls and what a refused handshake says, either
 * way.
 *
 *   hotmigd-tls-test TEST_PKI_SCRIPT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib/gstdio.h>

#include "hotmigd/server-priv.h"
#include "pool-fake-host.h"
#include "test-dir.h"

static const char *pki_script;

/* The server's [hotmigd] max-connections in these tests: test_many_connections() makes
 * three times as many, one after the other. */
#define TEST_MAX_CONNECTIONS 8

typedef struct {
    char *dir;
    char *pki;
    FakeHost *host;
    HotmigdPool *pool;
    GThread *thread;
    GMainContext *ctx;
    GMainLoop *loop;
    GMutex lock;
    GCond ready;
    guint port; /* 0 until the server listens */
    char *url;
    char *server_error;
    HmConfig *config; /* who is who: the test client and 'operator' are operators, 'peer2' host B */
    HotmigdAuthz *authz;
    char *files_root;
} Fx;

static char *pki(const Fx *fx, const char *name)
{
    return g_build_filename(fx->pki, name, NULL);
}

static gpointer server_thread(gpointer data)
{
    Fx *fx = data;
    g_autoptr(GError) error = NULL;
    g_autofree char *cert = pki(fx, "server.pem");
    g_autofree char *key = pki(fx, "server-key.pem");
    g_autofree char *ca = pki(fx, "ca.pem");
    const char *roots[] = {fx->files_root, NULL};
    HotmigdServerConfig config = {.listen = "127.0.0.1",
                                  .port = 0,
                                  .cert = cert,
                                  .key = key,
                                  .ca = ca,
                                  .authz = fx->authz,
                                  .file_roots = roots,
                                  .max_connections = TEST_MAX_CONNECTIONS};
    g_autoptr(HotmigdServer) server = NULL;

    g_main_context_push_thread_default(fx->ctx);
    server = hotmigd_server_new(&config, fx->pool, &error);
    g_mutex_lock(&fx->lock);
    if (server)
        fx->port = hotmigd_server_get_port(server);
    else
        fx->server_error = g_strdup(error->message);
    g_cond_signal(&fx->ready);
    g_mutex_unlock(&fx->lock);
    if (server)
        g_main_loop_run(fx->loop);
    g_clear_pointer(&server, hotmigd_server_free);
    g_main_context_pop_thread_default(fx->ctx);
    return NULL;
}

static int fx_setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    g_autoptr(GError) error = NULL;
    g_autofree char *leases = NULL;
    const char *argv[] = {"bash", pki_script, NULL, NULL};
    int status = 0;
    static const char *const standins[] = {"hmlab0vf1", "hmlab0vf2", NULL};
    static const char *const pfs[] = {"0000:3b:00.0", NULL};
    HotmigdPoolConfig config = {
        .host_name = "tls-host", .lease_ttl_s = 60, .standins = standins, .pfs = pfs};

    fx->dir = g_dir_make_tmp("hm-hotmigd-tls-XXXXXX", NULL);
    fx->pki = g_build_filename(fx->dir, "pki", NULL);
    argv[2] = fx->pki;
    assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL,
                             &status, &error));
    assert_true(g_spawn_check_wait_status(status, NULL));
    leases = g_build_filename(fx->dir, "leases", NULL);
    config.lease_dir = leases;
    fx->host = fake_host_new();
    fake_host_add_pf(fx->host, "0000:3b:00.0", 2, 0x15b3, 0x101c);
    g_hash_table_add(fx->host->netdevs, g_strdup("hmlab0vf1"));
    fx->pool = hotmigd_pool_new(&config, &fake_host_ops, fx->host, &error);
    assert_non_null(fx->pool);
    {
        static const char conf[] = "[hotmigd]\noperators = hotmig-test-client, hotmig-operator\n"
                                   "[host B]\nuri = test:///default\nidentity = node02.test\n";

        fx->config = hm_config_load_data(conf, sizeof(conf) - 1, "authz.conf", &error);
        assert_non_null(fx->config);
        fx->authz = hotmigd_authz_new(fx->config);
        fx->files_root = g_build_filename(fx->dir, "images", NULL);
    }
    fx->ctx = g_main_context_new();
    fx->loop = g_main_loop_new(fx->ctx, FALSE);
    g_mutex_init(&fx->lock);
    g_cond_init(&fx->ready);
    fx->thread = g_thread_new("server", server_thread, fx);
    g_mutex_lock(&fx->lock);
    while (!fx->port && !fx->server_error)
        g_cond_wait(&fx->ready, &fx->lock);
    g_mutex_unlock(&fx->lock);
    if (fx->server_error)
        fail_msg("server: %s", fx->server_error);
    fx->url = g_strdup_printf("https://127.0.0.1:%u", fx->port);
    *state = fx;
    return 0;
}

static gboolean quit_loop(gpointer data)
{
    g_main_loop_quit(data);
    return G_SOURCE_REMOVE;
}

static int fx_teardown(void **state)
{
    Fx *fx = *state;

    if (fx->thread) {
        g_main_context_invoke(fx->ctx, quit_loop, fx->loop);
        g_thread_join(fx->thread);
    }
    g_main_loop_unref(fx->loop);
    g_main_context_unref(fx->ctx);
    hotmigd_pool_free(fx->pool);
    hotmigd_authz_free(fx->authz);
    hm_config_free(fx->config);
    g_free(fx->files_root);
    test_dir_remove(fx->dir);
    g_free(fx->dir);
    g_free(fx->pki);
    g_free(fx->url);
    g_free(fx->server_error);
    g_mutex_clear(&fx->lock);
    g_cond_clear(&fx->ready);
    g_free(fx);
    return 0;
}

/* A client with certificate @cert (NULL: the test CA's client) trusting CA @ca (NULL: the test
 * CA), to @url (NULL: the server). */
static OrchHotmigdClient *client(Fx *fx, const char *cert, const char *ca, const char *url,
                                 guint timeout)
{
    g_autofree char *c = pki(fx, cert ? cert : "client");
    g_autofree char *cpem = g_strconcat(c, ".pem", NULL);
    g_autofree char *kpem = g_strconcat(c, "-key.pem", NULL);
    g_autofree char *a = pki(fx, ca ? ca : "ca.pem");
    g_autoptr(GError) error = NULL;
    OrchHotmigdClient *vfd =
        orch_hotmigd_client_new(url ? url : fx->url, cpem, kpem, a, timeout, &error);

    if (!vfd)
        fail_msg("orch_hotmigd_client_new: %s", error->message);
    return vfd;
}

static void expect(const GError *error, int code, const char *needle)
{
    if (g_getenv("HM_TEST_VERBOSE") && error)
        g_printerr("-> %s\n", error->message);
    if (!error || error->domain != ORCH_ERROR || error->code != code ||
        !strstr(error->message, needle))
        fail_msg("expected ORCH_ERROR %d with '%s', got %s", code, needle,
                 error ? error->message : "success");
}

static void test_calls(void **state)
{
    Fx *fx = *state;
    g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, NULL, 10);
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchHotmigdHostInfo) info = orch_hotmigd_client_host(vfd, &error);
    g_autoptr(GPtrArray) vfs = NULL;

    if (!info)
        fail_msg("GET /v1/host: %s", error->message);
    g_autoptr(HotplugLease) lease = NULL;
    g_autoptr(HotplugLease) confirmed = NULL;
    g_autoptr(HotplugLease) model = NULL;
    g_autofree char *note = NULL;
    OrchHotmigdLeaseRequest req = {
        .vf = "hmlab0vf1", .holder = "hotmigd-tls-test", .reason = "a test", .domain = "vm7"};

    assert_non_null(info);
    assert_string_equal(info->name, "tls-host");
    assert_string_equal(info->version, HOTMIG_VERSION);
    assert_int_equal(info->pool_size, 4);
    assert_int_equal(info->counts[ORCH_VF_STATE_FREE], 3);
    assert_int_equal(info->counts[ORCH_VF_STATE_MISSING], 1);

    lease = orch_hotmigd_client_lease(vfd, &req, &error);
    assert_non_null(lease);
    assert_string_equal(lease->vf, "hmlab0vf1");
    assert_int_equal(lease->state, HOTPLUG_LEASE_LEASED);
    assert_true(lease->expires > lease->created);
    assert_null(orch_hotmigd_client_lease(vfd, &req, &error));
    expect(error, ORCH_ERROR_CONFLICT, "hotmigd at https://127.0.0.1:");
    assert_non_null(strstr(
        error->message,
        "refused POST /v1/leases (409 Conflict): VF 'hmlab0vf1' is leased by 'hotmigd-tls-test'"));
    g_clear_error(&error);

    assert_true(orch_hotmigd_client_ib_identity(vfd, "hmlab0vf1", 1, 2, &note, &error));
    assert_non_null(strstr(note, "stand-in"));
    g_clear_pointer(&note, g_free);
    assert_true(orch_hotmigd_client_vfio(vfd, "hmlab0vf1", &note, &error));
    confirmed = orch_hotmigd_client_confirm(vfd, "hmlab0vf1", lease->id, &error);
    assert_non_null(confirmed);
    assert_int_equal(confirmed->state, HOTPLUG_LEASE_ASSIGNED);
    assert_int_equal(confirmed->expires, 0);

    req.vf = NULL;
    req.vendor_id = 0x15b3;
    req.device_id = 0x101c;
    req.ttl_s = 30;
    model = orch_hotmigd_client_lease(vfd, &req, &error);
    assert_non_null(model);
    assert_string_equal(model->vf, "0000:3b:01.0");
    assert_true(orch_hotmigd_client_ib_identity(vfd, model->vf, 0x0002c90300a1b2c3ULL,
                                                0x0002c90300a1b2c4ULL, NULL, &error));
    assert_true(fx->host->ib_port == 0x0002c90300a1b2c4ULL);

    vfs = orch_hotmigd_client_list(vfd, &error);
    assert_non_null(vfs);
    assert_int_equal(vfs->len, 4);
    {
        OrchHotmigdVfInfo *v0 = g_ptr_array_index(vfs, 0);
        OrchHotmigdVfInfo *s1 = g_ptr_array_index(vfs, 2);

        assert_string_equal(v0->id, "0000:3b:01.0");
        assert_int_equal(v0->kind, ORCH_VF_KIND_PCI);
        assert_int_equal(v0->state, ORCH_VF_STATE_LEASED);
        assert_int_equal(v0->vendor_id, 0x15b3);
        assert_int_equal(v0->vf_index, 0);
        assert_string_equal(v0->lease->id, model->id);
        assert_string_equal(s1->id, "hmlab0vf1");
        assert_int_equal(s1->kind, ORCH_VF_KIND_STANDIN);
        assert_int_equal(s1->state, ORCH_VF_STATE_ASSIGNED);
        assert_string_equal(s1->assigned_to, "vm7");
        assert_int_equal(s1->vf_index, -1);
    }
    assert_true(orch_hotmigd_client_release(vfd, "hmlab0vf1", lease->id, &error));
    assert_true(orch_hotmigd_client_release(vfd, "hmlab0vf1", lease->id, &error)); /* idempotent */
    assert_null(orch_hotmigd_client_confirm(vfd, "hmlab0vf9", lease->id, &error));
    expect(error, ORCH_ERROR_NOT_FOUND, "(404 Not Found): VF 'hmlab0vf9' is not in the pool");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_release(vfd, "a/b", "x", &error));
    expect(error, ORCH_ERROR_NOT_FOUND, "no API path"); /* the '/' is escaped, not a separator */
}

/* Clients without a certificate the daemon accepts are refused, and say so. */
static void test_refused_client(void **state)
{
    Fx *fx = *state;
    static const char *const certs[] = {"self", "other-client", "expired"};

    for (guint i = 0; i < G_N_ELEMENTS(certs); i++) {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, certs[i], NULL, NULL, 10);
        g_autoptr(GError) error = NULL;
        g_autoptr(OrchHotmigdHostInfo) info = orch_hotmigd_client_host(vfd, &error);

        assert_null(info);
        expect(error, ORCH_ERROR_UNAVAILABLE, "refused our certificate");
        assert_non_null(strstr(error->message, certs[i]));
    }
    assert_int_equal(fx->host->ib_calls, 0);
}

/* A daemon whose certificate is not signed by our CA, or does not name the host we asked. */
static void test_refused_server(void **state)
{
    Fx *fx = *state;
    g_autofree char *localhost = g_strdup_printf("https://localhost:%u", fx->port);
    g_autoptr(GError) error = NULL;

    {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, "other-ca.pem", NULL, 10);

        assert_null(orch_hotmigd_client_host(vfd, &error));
        expect(error, ORCH_ERROR_UNAVAILABLE, "certificate of hotmigd at https://127.0.0.1:");
        assert_non_null(strstr(error->message, "not signed by CA '"));
        assert_non_null(strstr(error->message, "other-ca.pem'"));
        g_clear_error(&error);
    }
    {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, localhost, 10);
        g_autoptr(OrchHotmigdHostInfo) info = orch_hotmigd_client_host(vfd, &error);

        assert_non_null(info); /* the certificate names localhost too */
    }
}

static void test_unreachable(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *cert = pki(fx, "client.pem");
    g_autofree char *key = pki(fx, "client-key.pem");
    g_autofree char *ca = pki(fx, "ca.pem");
    g_autoptr(GSocket) sock = NULL;
    g_autoptr(GSocketAddress) addr = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autofree char *silent = NULL;
    guint port;

    /* A port nobody listens on. */
    {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, "https://127.0.0.1:1", 5);

        assert_null(orch_hotmigd_client_host(vfd, &error));
        expect(error, ORCH_ERROR_UNREACHABLE, "Cannot reach hotmigd at https://127.0.0.1:1");
        g_clear_error(&error);
    }
    /* A port that accepts and never answers: the deadline. */
    sock = g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, NULL);
    addr = g_inet_socket_address_new(lo, 0);
    assert_true(g_socket_bind(sock, addr, TRUE, NULL));
    assert_true(g_socket_listen(sock, NULL));
    g_clear_object(&addr);
    addr = g_socket_get_local_address(sock, NULL);
    port = g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(addr));
    silent = g_strdup_printf("https://127.0.0.1:%u", port);
    {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, silent, 1);

        assert_null(orch_hotmigd_client_host(vfd, &error));
        expect(error, ORCH_ERROR_TIMEOUT, "did not answer GET /v1/host within 1 s");
        g_clear_error(&error);
    }
    /* Bad arguments. */
    assert_null(orch_hotmigd_client_new("http://127.0.0.1:1", cert, key, ca, 5, &error));
    expect(error, ORCH_ERROR_INVALID, "is not of the form https://HOST[:PORT]");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_new("https://127.0.0.1:1/v1", cert, key, ca, 5, &error));
    expect(error, ORCH_ERROR_INVALID, "is not of the form");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_new("https://127.0.0.1:1", key, key, ca, 5, &error));
    expect(error, ORCH_ERROR_INVALID, "Cannot load the client certificate");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_new("https://127.0.0.1:1", cert, key, ca, 0, &error));
    expect(error, ORCH_ERROR_INVALID, "timeout 0 s is not from 1 to 3600 s");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_new("https://127.0.0.1:1", cert, key, key, 5, &error));
    expect(error, ORCH_ERROR_INVALID, "Cannot load the CA certificate");
}

/* Issue 15, item 2: a certificate of the same CA that no configuration names is refused
 * everything; a host acts only on its own leases; TTLs and file paths are bounded. Before the
 * authorization every call below succeeded. */
static void test_authorization(void **state)
{
    Fx *fx = *state;
    g_autoptr(OrchHotmigdClient) op = client(fx, NULL, NULL, NULL, 10);
    g_autoptr(OrchHotmigdClient) stranger = client(fx, "stranger", NULL, NULL, 10);
    g_autoptr(OrchHotmigdClient) peer = client(fx, "peer2", NULL, NULL, 10);
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugLease) lease = NULL;
    g_autoptr(HotplugLease) own = NULL;
    g_autofree char *note = NULL;
    g_autofree char *inside = g_build_filename(fx->files_root, "vm7.qcow2", NULL);
    const char *outside[] = {"/etc/shadow", NULL};
    const char *dotdot[] = {NULL, NULL};
    const char *ok_paths[] = {inside, NULL};
    g_autofree char *escape = g_strconcat(fx->files_root, "/../../etc/shadow", NULL);
    OrchHotmigdLeaseRequest req = {
        .vf = "hmlab0vf1", .holder = "operator", .reason = "a test", .domain = "vm7"};
    OrchHotmigdMigrationRequest mig = {.domain = "vm7", .destination = "B", .reason = "a test"};
    HotplugLease *got;

    lease = orch_hotmigd_client_lease(op, &req, &error);
    assert_non_null(lease);

    /* The stranger: 403 on each. */
    assert_null(orch_hotmigd_client_host(stranger, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "'hotmig-stranger' may not GET /v1/host");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_list(stranger, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not GET /v1/vfs");
    g_clear_error(&error);
    req.vf = "hmlab0vf2";
    assert_null(orch_hotmigd_client_lease(stranger, &req, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST /v1/leases");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_release(stranger, "hmlab0vf1", lease->id, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not DELETE /v1/leases/VF/ID");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_confirm(stranger, "hmlab0vf1", lease->id, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_ib_identity(stranger, "hmlab0vf1", 1, 2, &note, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST /v1/vfs/VF/ib-identity");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_vfio(stranger, "hmlab0vf1", &note, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST /v1/vfs/VF/vfio");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_left(stranger, "hmlab0vf1", "vm7", &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST /v1/vfs/VF/left");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_files_missing(stranger, ok_paths, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST /v1/files");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_migration_start(stranger, &mig, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "may not POST /v1/migrations");
    g_clear_error(&error);

    /* Host B may not release, confirm or program the operator's lease... */
    assert_false(orch_hotmigd_client_release(peer, "hmlab0vf1", lease->id, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "VF 'hmlab0vf1' is held by 'hotmig-test-client'");
    g_clear_error(&error);
    assert_null(orch_hotmigd_client_confirm(peer, "hmlab0vf1", lease->id, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "is held by");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_ib_identity(peer, "hmlab0vf1", 1, 2, &note, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "is held by");
    g_clear_error(&error);
    assert_false(orch_hotmigd_client_vfio(peer, "hmlab0vf1", &note, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "is held by");
    g_clear_error(&error);
    /* ... but acts on its own. */
    req.vf = "0000:3b:01.0";
    req.holder = "host B";
    own = orch_hotmigd_client_lease(peer, &req, &error);
    if (!own)
        fail_msg("host B's own lease: %s", error->message);
    assert_true(orch_hotmigd_client_ib_identity(peer, "0000:3b:01.0", 1, 2, NULL, &error));
    assert_true(orch_hotmigd_client_release(peer, "0000:3b:01.0", own->id, &error));
    assert_null(error);

    /* Lease TTLs are bounded ([hotmigd] lease-ttl-max, 1800 by default). */
    req.ttl_s = 7 * 24 * 3600;
    assert_null(orch_hotmigd_client_lease(op, &req, &error));
    expect(error, ORCH_ERROR_INVALID, "member 'ttl' must be from 1 to 1800");
    g_clear_error(&error);

    /* Files: only under [hotmigd] file-roots, no '..'. */
    {
        g_autoptr(GPtrArray) missing = orch_hotmigd_client_files_missing(op, ok_paths, &error);

        assert_non_null(missing);
        assert_int_equal(missing->len, 1);
    }
    assert_null(orch_hotmigd_client_files_missing(op, outside, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "is not under a directory of [hotmigd] file-roots");
    g_clear_error(&error);
    dotdot[0] = escape;
    assert_null(orch_hotmigd_client_files_missing(op, dotdot, &error));
    expect(error, ORCH_ERROR_FORBIDDEN, "file-roots");
    g_clear_error(&error);

    /* The operator's lease is intact. */
    got = orch_hotmigd_client_confirm(op, "hmlab0vf1", lease->id, &error);
    assert_non_null(got);
    hotplug_lease_free(got);
}

/* A hostile peer: an HTTPS server (the test CA's server certificate, GIO only) that answers
 * one request with 76 000 nested brackets, well within the client's 4 MiB reply limit. */
typedef struct {
    GSocketListener *listener;
    GTlsCertificate *cert;
} DeepPeer;

static gpointer deep_peer_thread(gpointer data)
{
    DeepPeer *peer = data;
    g_autoptr(GSocketConnection) conn = g_socket_listener_accept(peer->listener, NULL, NULL, NULL);
    g_autoptr(GIOStream) tls = NULL;
    g_autoptr(GString) head = g_string_new(NULL);
    g_autofree char *body = g_strnfill(76000, '[');
    g_autofree char *reply = NULL;
    char c;

    if (!conn)
        return NULL;
    tls = g_tls_server_connection_new(G_IO_STREAM(conn), peer->cert, NULL);
    if (!tls || !g_tls_connection_handshake(G_TLS_CONNECTION(tls), NULL, NULL))
        return NULL;
    /* The request's head, up to the blank line (GET: no body). */
    while (!g_str_has_suffix(head->str, "\r\n\r\n") && head->len < 65536 &&
           g_input_stream_read(g_io_stream_get_input_stream(tls), &c, 1, NULL, NULL) == 1)
        g_string_append_c(head, c);
    reply = g_strdup_printf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                            strlen(body), body);
    g_output_stream_write_all(g_io_stream_get_output_stream(tls), reply, strlen(reply), NULL, NULL,
                              NULL);
    g_io_stream_close(tls, NULL, NULL);
    return NULL;
}

/* json-glib recurses per level: before the nesting limit this crashed the client (SIGSEGV on
 * an 8 MiB stack); now it is an error naming the peer (issue 15, item 6). */
static void test_deep_peer(void **state)
{
    Fx *fx = *state;
    g_autofree char *cert = pki(fx, "server.pem");
    g_autofree char *key = pki(fx, "server-key.pem");
    g_autoptr(GError) error = NULL;
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) any = g_inet_socket_address_new(lo, 0);
    g_autoptr(GSocketAddress) bound = NULL;
    g_autofree char *url = NULL;
    DeepPeer peer = {g_socket_listener_new(), g_tls_certificate_new_from_files(cert, key, &error)};
    GThread *thread;

    assert_non_null(peer.cert);
    assert_true(g_socket_listener_add_address(peer.listener, any, G_SOCKET_TYPE_STREAM,
                                              G_SOCKET_PROTOCOL_TCP, NULL, &bound, &error));
    url = g_strdup_printf("https://127.0.0.1:%u",
                          g_inet_socket_address_get_port(G_INET_SOCKET_ADDRESS(bound)));
    thread = g_thread_new("deep-peer", deep_peer_thread, &peer);
    {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, url, 10);

        assert_null(orch_hotmigd_client_host(vfd, &error));
        expect(error, ORCH_ERROR_INVALID, "JSON nests deeper than 32 levels");
    }
    g_thread_join(thread);
    g_object_unref(peer.listener);
    g_object_unref(peer.cert);
}

/* Connections that ended are gone from the server: more of them, one after the other, than
 * max-connections, each closed by its client after one answer. libsoup 3.2.2 kept every
 * kept-alive connection its client closed while idle (descriptor open, counted against the
 * limit): the server refused every client from the (max-connections + 1)th on. */
static void test_many_connections(void **state)
{
    Fx *fx = *state;

    for (int i = 0; i < 3 * TEST_MAX_CONNECTIONS; i++) {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, NULL, 10);
        g_autoptr(GError) error = NULL;
        g_autoptr(OrchHotmigdHostInfo) info = orch_hotmigd_client_host(vfd, &error);

        if (!info)
            fail_msg("connection %d: GET /v1/host: %s", i + 1, error->message);
        assert_string_equal(info->name, "tls-host");
    }
}

/* The clients' certificates go with their connections: after more requests than
 * max-connections, once the server stopped, none is left. libsoup's SoupServerMessage keeps a
 * reference to its client's certificate that it never drops (hotmigd/server.c): every HTTPS
 * request kept one, 12-40 KiB, for ever (the soak's RSS growth, docs/reliability.md). */
static void test_certificates_freed(void **state)
{
    Fx *fx = *state;
    guint seen = hotmigd_server_certificates_seen();

    for (int i = 0; i < 3 * TEST_MAX_CONNECTIONS; i++) {
        g_autoptr(OrchHotmigdClient) vfd = client(fx, NULL, NULL, NULL, 10);
        g_autoptr(GError) error = NULL;
        g_autoptr(OrchHotmigdHostInfo) info = orch_hotmigd_client_host(vfd, &error);

        if (!info)
            fail_msg("connection %d: GET /v1/host: %s", i + 1, error->message);
    }
    assert_int_equal(hotmigd_server_certificates_seen() - seen, 3 * TEST_MAX_CONNECTIONS);
    g_main_context_invoke(fx->ctx, quit_loop, fx->loop);
    g_clear_pointer(&fx->thread, g_thread_join);
    assert_int_equal(hotmigd_server_certificates_alive(), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_calls, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_refused_client, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_refused_server, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_unreachable, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_deep_peer, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_authorization, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_many_connections, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_certificates_freed, fx_setup, fx_teardown),
    };

    if (argc != 2) {
        g_printerr("usage: %s TEST_PKI_SCRIPT\n", argv[0]);
        return 2;
    }
    pki_script = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
