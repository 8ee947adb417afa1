/* hotmigd's daemon object and its local API without hosts: a Hotmigd for a two-host cluster of
 * fakes (hypervisor adapters, the other host's hotmigd, the migrate function), its local socket
 * spoken to from a thread: bad lines, unknown commands, unknown hosts, oversized lines; a drain
 * followed to its end; a drain of one MPI job's guests (one at a time) and an evacuation of them
 * against a deadline (side by side); the evacuation entry point (merging, remote moves, the done
 * callback, stats); plans and runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "engine/hotmigd-client.h"
#include "engine/journal.h"
#include "engine/local-protocol.h"
#include "engine/virt.h"
#include "hotmigd/daemon.h"
#include "test-dir.h"

/* ---- the fake cluster: hosts A and B, domains that move when migrated --------------------------
 */

static GMutex world_lock;
static GHashTable *where; /* domain -> host ("A", "B") */
static GHashTable *fail;  /* domains whose migration fails */
static guint migrations_here, migrations_remote;
static GCond gate_cond;
static gboolean gate_closed; /* migrations wait until it opens */
static GHashTable *jobs;     /* domain -> its job id, in its XML's metadata */
static GHashTable *in_flight; /* domains whose migration runs now */
static guint in_flight_max, job_in_flight_max; /* most at once: all, of one job */

static gboolean gate_open(gpointer data)
{
    g_mutex_lock(&world_lock);
    gate_closed = FALSE;
    g_cond_broadcast(&gate_cond);
    g_mutex_unlock(&world_lock);
    return G_SOURCE_REMOVE;
}

static const char *host_of_uri(const char *uri)
{
    return g_str_has_prefix(uri, "test:///") ? uri + strlen("test:///") : "?";
}

typedef struct {
    OrchVirt parent;
    char *host;
} FakeVirt;

static gboolean fv_node_get_info(OrchVirt *v, OrchVirtNodeInfo *ret, GError **e)
{
    ret->cpus = 16;
    ret->memory_kib = 64 * 1024 * 1024;
    return TRUE;
}

static GPtrArray *fv_domain_list_info(OrchVirt *v, gboolean with_xml, GError **e)
{
    FakeVirt *fv = (FakeVirt *)v;
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)orch_virt_domain_info_free);
    GHashTableIter it;
    gpointer key, value;

    g_mutex_lock(&world_lock);
    g_hash_table_iter_init(&it, where);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        OrchVirtDomainInfo *info;

        if (!g_str_equal(value, fv->host))
            continue;
        info = g_new0(OrchVirtDomainInfo, 1);
        info->name = g_strdup(key);
        info->vcpus = 1;
        info->memory_kib = 1024 * 1024;
        info->sampled_us = g_get_monotonic_time();
        if (with_xml) {
            const char *job = g_hash_table_lookup(jobs, key);
            g_autofree char *meta =
                job ? g_strdup_printf("<metadata><hm:job xmlns:hm='urn:hotmig:1'>%s</hm:job>"
                                      "</metadata>",
                                      job)
                    : g_strdup("");

            info->xml = g_strdup_printf(
                "<domain type='kvm'><name>%s</name>%s<devices><interface type='ethernet'>"
                "<target dev='tap-%s' managed='no'/><alias name='ua-hmvf0'/></interface>"
                "</devices></domain>",
                (char *)key, meta, (char *)key);
        }
        g_ptr_array_add(out, info);
    }
    g_mutex_unlock(&world_lock);
    return out;
}

/* What recovery asks (issue 15, item 8): where a domain runs, its live XML (the stand-in VF
 * 'ua-hmvf0' unless it was unplugged), unplug and plug. */
static GHashTable *unplugged; /* domain -> TRUE: its VF is not plugged */
static GPtrArray *plugs;      /* char *: "DOMAIN@HOST" */

static gboolean fv_domain_state(OrchVirt *v, const char *domain, OrchVirtDomainState *ret,
                                GError **e)
{
    g_mutex_lock(&world_lock);
    *ret = g_strcmp0(g_hash_table_lookup(where, domain), ((FakeVirt *)v)->host) == 0
               ? ORCH_VIRT_DOMAIN_RUNNING
               : ORCH_VIRT_DOMAIN_MISSING;
    g_mutex_unlock(&world_lock);
    return TRUE;
}

static gboolean fv_true(OrchVirt *v, const char *domain, GError **e)
{
    return TRUE;
}

static gboolean fv_is_persistent(OrchVirt *v, const char *domain, gboolean *ret, GError **e)
{
    *ret = FALSE;
    return TRUE;
}

static char *fv_domain_get_xml(OrchVirt *v, const char *domain, GError **e)
{
    gboolean without;

    g_mutex_lock(&world_lock);
    without = g_hash_table_contains(unplugged, domain);
    g_mutex_unlock(&world_lock);
    return g_strdup_printf("<domain type='kvm'><name>%s</name><devices>%s%s%s</devices></domain>",
                           domain, without ? "" : "<interface type='ethernet'><target dev='tap-",
                           without ? "" : domain,
                           without ? "" : "' managed='no'/><alias name='ua-hmvf0'/></interface>");
}

static gboolean fv_device_detach(OrchVirt *v, const char *domain, const char *alias,
                                 gboolean config, guint timeout_ms, GError **e)
{
    g_mutex_lock(&world_lock);
    g_hash_table_add(unplugged, g_strdup(domain));
    g_mutex_unlock(&world_lock);
    return TRUE;
}

static gboolean fv_device_attach(OrchVirt *v, const char *domain, const char *xml,
                                 gboolean config, GError **e)
{
    g_mutex_lock(&world_lock);
    g_hash_table_remove(unplugged, domain);
    g_ptr_array_add(plugs, g_strdup_printf("%s@%s", domain, ((FakeVirt *)v)->host));
    g_mutex_unlock(&world_lock);
    return TRUE;
}

static void fv_free(OrchVirt *v)
{
    g_free(((FakeVirt *)v)->host);
    orch_virt_clear(v);
    g_free(v);
}

static const OrchVirtOps fake_virt_ops = {
    .domain_state = fv_domain_state,
    .domain_abort_job = fv_true,
    .domain_is_persistent = fv_is_persistent,
    .domain_get_xml = fv_domain_get_xml,
    .device_detach = fv_device_detach,
    .device_attach = fv_device_attach,
    .node_get_info = fv_node_get_info,
    .domain_list_info = fv_domain_list_info,
    .free = fv_free,
};

static OrchVirt *fake_virt_open(const char *uri, const char *label, gpointer opaque, GError **error)
{
    FakeVirt *v = g_new0(FakeVirt, 1);

    orch_virt_init(&v->parent, &fake_virt_ops, uri, label);
    v->host = g_strdup(host_of_uri(uri));
    return &v->parent;
}

/* Moves @domain to @dest unless it is to fail; the report as orch_migrate makes it. */
static gboolean world_migrate(const char *domain, const char *src, const char *dest,
                              char **ret_error)
{
    gboolean ok;

    gint64 until = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    const char *job;
    guint same_job = 0;
    GHashTableIter it;
    gpointer other;

    g_mutex_lock(&world_lock);
    /* What runs at once: all migrations, and those of this domain's job. */
    g_hash_table_add(in_flight, g_strdup(domain));
    in_flight_max = MAX(in_flight_max, g_hash_table_size(in_flight));
    job = g_hash_table_lookup(jobs, domain);
    g_hash_table_iter_init(&it, in_flight);
    while (job && g_hash_table_iter_next(&it, &other, NULL))
        same_job += g_strcmp0(g_hash_table_lookup(jobs, other), job) == 0;
    job_in_flight_max = MAX(job_in_flight_max, same_job);
    g_mutex_unlock(&world_lock);
    g_usleep(20 * 1000);
    g_mutex_lock(&world_lock);
    while (gate_closed && g_cond_wait_until(&gate_cond, &world_lock, until))
        ;
    ok = !g_hash_table_contains(fail, domain) &&
         g_strcmp0(g_hash_table_lookup(where, domain), src) == 0;
    if (ok)
        g_hash_table_insert(where, g_strdup(domain), g_strdup(dest));
    g_hash_table_remove(in_flight, domain);
    g_mutex_unlock(&world_lock);
    if (!ok)
        *ret_error = g_strdup_printf("Phase 'prepare' failed: injected for '%s'", domain);
    return ok;
}

static OrchReport *report_for(const char *domain, gboolean ok)
{
    OrchReport *report = g_new0(OrchReport, 1);

    report->domain = g_strdup(domain);
    report->rollback = g_ptr_array_new();
    report->final_host = g_strdup(ok ? "destination" : "source");
    report->ok = ok;
    for (guint i = 0; i < ORCH_PHASE_LAST; i++) {
        report->phases[i].phase = i;
        report->phases[i].status = ORCH_STATUS_OK;
        report->phases[i].duration_us = 2000;
    }
    return report;
}

static OrchJournal *journal_left(const char *dir, const char *domain, gboolean keep_locked);

/* Domains whose migration fails as one whose undo failed too: its journal kept (unplug asked,
 * the VF not back), ORCH_ERROR_ROLLBACK (migrate-vm's exit 3). */
static GHashTable *keep_journal;

static gboolean fake_migrate(const OrchOptions *opts, OrchReport **ret_report, GError **error)
{
    g_autofree char *msg = NULL;

    g_mutex_lock(&world_lock);
    if (keep_journal && g_hash_table_contains(keep_journal, opts->domain)) {
        g_mutex_unlock(&world_lock);
        journal_left(opts->state_dir, opts->domain, FALSE);
        g_atomic_int_inc(&migrations_here);
        *ret_report = report_for(opts->domain, FALSE);
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK,
                    "Phase 'resume' failed: injected for '%s'; then undoing it failed too",
                    opts->domain);
        return FALSE;
    }
    g_mutex_unlock(&world_lock);
    gboolean ok = world_migrate(opts->domain, host_of_uri(opts->source_uri),
                                host_of_uri(opts->dest_uri), &msg);

    g_atomic_int_inc(&migrations_here);
    *ret_report = report_for(opts->domain, ok);
    if (!ok)
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT, "%s", msg);
    return ok;
}

/* ---- the fake hotmigd of each host --------------------------------------------------------------
 */

typedef struct {
    OrchHotmigdClient parent;
} FakeVfd;

static gint peer_b_silent; /* B's hotmigd does not answer GET /v1/host */
static gboolean b_read_gate_closed; /* a read of B's hotmigd waits (world_lock, gate_cond) */
static guint b_reads_waiting;       /* reads waiting at that gate */

static gboolean b_read_gate_open(gpointer data)
{
    g_mutex_lock(&world_lock);
    b_read_gate_closed = FALSE;
    g_cond_broadcast(&gate_cond);
    g_mutex_unlock(&world_lock);
    return G_SOURCE_REMOVE;
}

static OrchHotmigdHostInfo *fvfd_host(OrchHotmigdClient *v, GError **e)
{
    OrchHotmigdHostInfo *info;
    /* Whether B answers is decided when it is asked, before any wait at the gate. */
    gboolean silent = g_atomic_int_get(&peer_b_silent) && g_str_equal(v->url, "https://B:1");

    if (g_str_equal(v->url, "https://B:1")) {
        gint64 until = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;

        g_mutex_lock(&world_lock);
        b_reads_waiting++;
        while (b_read_gate_closed && g_cond_wait_until(&gate_cond, &world_lock, until))
            ;
        b_reads_waiting--;
        g_mutex_unlock(&world_lock);
    }
    if (silent) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_UNREACHABLE, "Could not connect to B: refused");
        return NULL;
    }
    info = g_new0(OrchHotmigdHostInfo, 1);

    info->name = g_strdup(v->url);
    info->version = g_strdup("test");
    info->pool_size = 8;
    info->counts[ORCH_VF_STATE_FREE] = 8;
    info->warnings = g_new0(char *, 1);
    return info;
}

static GHashTable *remote_results; /* migration id -> error text or "" */

static char *fvfd_migration_start(OrchHotmigdClient *v, const OrchHotmigdMigrationRequest *req,
                                  GError **e)
{
    /* "https://B:1": the source is B. */
    g_autofree char *src = g_strndup(v->url + strlen("https://"), 1);
    g_autofree char *msg = NULL;
    gboolean ok = world_migrate(req->domain, src, req->destination, &msg);
    char *id = g_strdup_printf("m-%s", req->domain);

    g_atomic_int_inc(&migrations_remote);
    g_mutex_lock(&world_lock);
    g_hash_table_insert(remote_results, g_strdup(id), g_strdup(ok ? "" : msg));
    g_mutex_unlock(&world_lock);
    return id;
}

static OrchHotmigdMigration *fvfd_migration_get(OrchHotmigdClient *v, const char *id, GError **e)
{
    OrchHotmigdMigration *mig = g_new0(OrchHotmigdMigration, 1);
    g_autoptr(OrchReport) report = NULL;
    const char *err;

    g_mutex_lock(&world_lock);
    err = g_hash_table_lookup(remote_results, id);
    mig->error = err && *err ? g_strdup(err) : NULL;
    g_mutex_unlock(&world_lock);
    mig->id = g_strdup(id);
    mig->domain = g_strdup(id + 2);
    mig->destination = g_strdup("?");
    mig->state = mig->error ? ORCH_HOTMIGD_MIGRATION_FAILED : ORCH_HOTMIGD_MIGRATION_DONE;
    report = report_for(mig->domain, !mig->error);
    mig->report = orch_report_format_json(report, FALSE);
    return mig;
}

static void fvfd_free(OrchHotmigdClient *v)
{
    orch_hotmigd_client_clear(v);
    g_free(v);
}

static const OrchHotmigdClientOps fake_vfd_ops = {
    .host = fvfd_host,
    .migration_start = fvfd_migration_start,
    .migration_get = fvfd_migration_get,
    .free = fvfd_free,
};

static OrchHotmigdClient *fake_vfd_open(const char *url, gpointer opaque, GError **error)
{
    FakeVfd *v = g_new0(FakeVfd, 1);

    orch_hotmigd_client_init(&v->parent, &fake_vfd_ops, url);
    return &v->parent;
}

static const OrchConnector fake_connector = {.open_virt = fake_virt_open,
                                             .open_hotmigd = fake_vfd_open};

/* Recoveries that fail before one runs (a host's libvirtd restarting), and those asked. */
static guint recover_down, recover_calls;

static gboolean fake_recover(const OrchOptions *opts, GPtrArray **ret_results, GError **error)
{
    gboolean down;

    g_mutex_lock(&world_lock);
    recover_calls++;
    down = recover_down > 0;
    if (down)
        recover_down--;
    g_mutex_unlock(&world_lock);
    if (!down)
        return orch_recover(opts, ret_results, error);
    *ret_results = g_ptr_array_new_with_free_func((GDestroyNotify)orch_recovery_free);
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR,
                "Cannot connect to destination host 'test:///B': libvirtd restarting");
    return FALSE;
}

/* ---- the daemon under test
 * ------------------------------------------------------------------------ */

typedef struct {
    char *dir;
    char *socket;
    Hotmigd *daemon;
    guint done_calls;
    char *done_host;
    gboolean done_ok;
    guint inventories;     /* taken, with record_inventory */
    PolHostState b_state;  /* B's in the last one */
} Fx;

static void on_evacuation_done(Hotmigd *daemon, const char *host, gboolean ok, gpointer data)
{
    Fx *fx = data;

    fx->done_calls++;
    g_free(fx->done_host);
    fx->done_host = g_strdup(host);
    fx->done_ok = ok;
}

static guint setup_interval_s = G_MAXUINT; /* fx_setup_with's background inventory */

/* The daemon with [scheduler] limits @limits. */
static int fx_setup_with(void **state, const char *limits)
{
    Fx *fx = g_new0(Fx, 1);
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;
    HmConfig *config;
    HotmigdOptions opts = {
        .connector = &fake_connector,
        .migrate = fake_migrate,
        .recover = fake_recover,
        .recover_retry_ms = 10,
        .no_https = TRUE,
        .no_pool = TRUE,
        .cpu_sample_ms = 5,
        .inventory_interval_s = setup_interval_s,
        .remote_poll_ms = 10,
    };

    g_mutex_lock(&world_lock);
    where = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    fail = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    remote_results = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    jobs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    in_flight = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in_flight_max = job_in_flight_max = 0;
    for (const char *const *d = (const char *const[]){"a1", "a2", "a3", NULL}; *d; d++)
        g_hash_table_insert(where, g_strdup(*d), g_strdup("A"));
    for (const char *const *d = (const char *const[]){"b1", "b2", NULL}; *d; d++)
        g_hash_table_insert(where, g_strdup(*d), g_strdup("B"));
    g_mutex_unlock(&world_lock);
    migrations_here = migrations_remote = 0;
    gate_closed = FALSE;

    fx->dir = g_dir_make_tmp("hm-daemon-test-XXXXXX", NULL);
    fx->socket = g_build_filename(fx->dir, "hotmigd.sock", NULL);
    text = g_strdup_printf("[hotmigd]\nname = A\nsocket = %s\nrun-dir = %s\nstate-dir = %s\n"
                           "[scheduler]\n%s"
                           "[host A]\nuri = test:///A\nhotmigd = https://A:1\n"
                           "[host B]\nuri = test:///B\nhotmigd = https://B:1\n",
                           fx->socket, fx->dir, fx->dir, limits);
    config = hm_config_load_data(text, strlen(text), "test.conf", &error);
    assert_null(error);
    fx->daemon = hotmigd_new(config, &opts, &error);
    if (error)
        fail_msg("%s", error->message);
    hotmigd_set_evacuation_done(fx->daemon, on_evacuation_done, fx);
    *state = fx;
    return 0;
}

static int fx_setup(void **state)
{
    return fx_setup_with(state, "per-host-out = 1\nper-host-in = 2\ntotal = 2\n");
}

/* B's hotmigd does not answer at first; background inventories every 60 s. */
static int fx_setup_b_silent(void **state)
{
    int rc;

    g_atomic_int_set(&peer_b_silent, 1);
    setup_interval_s = 60;
    rc = fx_setup(state);
    setup_interval_s = G_MAXUINT;
    return rc;
}

/* As fx_setup_b_silent(), and the first read of B's hotmigd waits at a gate. */
static int fx_setup_b_silent_gated(void **state)
{
    g_mutex_lock(&world_lock);
    b_read_gate_closed = TRUE;
    g_mutex_unlock(&world_lock);
    return fx_setup_b_silent(state);
}

/* Two moves out of a host at once. */
static int fx_setup_two_out(void **state)
{
    return fx_setup_with(state, "per-host-out = 2\nper-host-in = 2\ntotal = 2\n");
}

static int fx_teardown(void **state)
{
    Fx *fx = *state;

    hotmigd_free(fx->daemon);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    /* The socket is gone with the daemon. */
    assert_false(g_file_test(fx->socket, G_FILE_TEST_EXISTS));
    test_dir_remove(fx->dir);
    g_free(fx->dir);
    g_free(fx->socket);
    g_free(fx->done_host);
    g_free(fx);
    g_hash_table_unref(where);
    g_hash_table_unref(fail);
    g_hash_table_unref(remote_results);
    g_hash_table_unref(jobs);
    g_hash_table_unref(in_flight);
    return 0;
}

/* Runs @fn(@data) in a thread while the daemon's main loop runs here; @fn sets *@finished and
 * wakes the main context when it is done. */
static void run_beside(GThreadFunc fn, gint *finished, gpointer data)
{
    GThread *t = g_thread_new("client", fn, data);

    while (!g_atomic_int_get(finished))
        g_main_context_iteration(NULL, TRUE);
    g_thread_join(t);
}

static void finish(gint *finished)
{
    g_atomic_int_set(finished, 1);
    g_main_context_wakeup(NULL);
}

/* A client exchange: raw bytes in, the reply lines out (until @lines lines or end of file). */
typedef struct {
    gint finished;
    const char *socket;
    const char *send;
    gsize send_len;
    guint lines;
    GString *reply;
    gboolean eof;
} Raw;

static gpointer raw_thread(gpointer data)
{
    Raw *r = data;
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(r->socket);
    g_autoptr(GSocketConnection) conn =
        g_socket_client_connect(client, G_SOCKET_CONNECTABLE(addr), NULL, NULL);
    GSocket *sock = conn ? g_socket_connection_get_socket(conn) : NULL;
    gsize sent = 0;
    guint got = 0;

    r->reply = g_string_new(NULL);
    if (sock) {
        g_socket_set_timeout(sock, 10);
        while (sent < r->send_len) {
            gssize n = g_socket_send(sock, r->send + sent, r->send_len - sent, NULL, NULL);

            if (n <= 0)
                break;
            sent += n;
        }
        while (got < r->lines) {
            char buf[4096];
            g_autoptr(GError) error = NULL;
            gssize n = g_socket_receive(sock, buf, sizeof(buf), NULL, &error);

            if (n <= 0) {
                /* A server that closes with our bytes still unread makes the kernel report a
                 * reset (ECONNRESET) after the data it sent: closed all the same. */
                r->eof = n == 0 || g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
                break;
            }
            g_string_append_len(r->reply, buf, n);
            got = 0;
            for (const char *p = r->reply->str; (p = strchr(p, '\n')); p++)
                got++;
        }
    }
    finish(&r->finished);
    return NULL;
}

static char *raw(Fx *fx, const char *send, gsize len, guint lines, gboolean *ret_eof)
{
    Raw r = {.socket = fx->socket, .send = send, .send_len = len, .lines = lines};

    run_beside(raw_thread, &r.finished, &r);
    if (ret_eof)
        *ret_eof = r.eof;
    return g_string_free(r.reply, FALSE);
}

/* A call through the client migrate-vm uses. */
typedef struct {
    gint finished;
    const char *socket;
    const char *command;
    JsonNode *args;
    JsonNode *result;
    GError *error;
    guint events;
} Call;

static void call_event(JsonNode *event, gpointer data)
{
    ((Call *)data)->events++;
}

static gpointer call_thread(gpointer data)
{
    Call *c = data;

    c->result = orch_local_call(c->socket, c->command, c->args, 30, call_event, c, &c->error);
    finish(&c->finished);
    return NULL;
}

static JsonNode *call(Fx *fx, const char *command, const char *args_json, guint *ret_events,
                      GError **error)
{
    g_autoptr(JsonNode) args = args_json ? json_from_string(args_json, NULL) : NULL;
    Call c = {.socket = fx->socket, .command = command, .args = args};

    run_beside(call_thread, &c.finished, &c);
    if (ret_events)
        *ret_events = c.events;
    if (c.error)
        g_propagate_error(error, c.error);
    return c.result;
}

static const char *str_member(JsonNode *node, const char *name)
{
    return json_object_get_string_member_with_default(json_node_get_object(node), name, NULL);
}

static void expect_error(const char *reply, const char *cls, const char *desc_part)
{
    g_autoptr(JsonNode) node = json_from_string(reply, NULL);
    JsonObject *e;

    if (!node || !JSON_NODE_HOLDS_OBJECT(node) ||
        !json_object_has_member(json_node_get_object(node), "error"))
        fail_msg("expected an error, got: %s", reply);
    e = json_object_get_object_member(json_node_get_object(node), "error");
    assert_string_equal(json_object_get_string_member(e, "class"), cls);
    if (!strstr(json_object_get_string_member(e, "desc"), desc_part))
        fail_msg("'%s' does not say '%s'", json_object_get_string_member(e, "desc"), desc_part);
}

static gboolean tick(gpointer data)
{
    return G_SOURCE_CONTINUE;
}

/* Runs the main loop until @cond holds (at most 20 s; it looks at least every 50 ms). */
#define LOOP_UNTIL(cond)                                                                           \
    do {                                                                                           \
        gint64 until_ = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;                              \
        guint tick_ = g_timeout_add(50, tick, NULL);                                               \
        while (!(cond) && g_get_monotonic_time() < until_)                                         \
            g_main_context_iteration(NULL, TRUE);                                                  \
        g_source_remove(tick_);                                                                    \
        assert_true(cond);                                                                         \
    } while (0)

/* ---- the tests --------------------------------------------------------------------------------
 */

static void test_socket_mode(void **state)
{
    Fx *fx = *state;
    GStatBuf st;

    assert_int_equal(g_stat(fx->socket, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

static void test_bad_lines(void **state)
{
    Fx *fx = *state;
    static const char lines[] =
        "not json\n"
        "[1]\n"
        "{\"execute\":\"nope\"}\n"
        "{\"execute\":\"drain\",\"arguments\":{\"host\":\"Z\"}}\n"
        "{\"execute\":\"drain\",\"arguments\":{\"host\":5}}\n"
        "{\"execute\":\"drain\",\"arguments\":{\"host\":\"A\",\"when\":1}}\n"
        "{\"execute\":\"status\",\"extra\":1}\n"
        "{\"arguments\":{}}\n"
        "{\"execute\":\"plan\",\"arguments\":{\"policy\":\"pack\"}}\n"
        "{\"execute\":\"plan\",\"arguments\":{\"policy\":\"drain\"}}\n"
        "{\"execute\":\"drain\",\"arguments\":{\"host\":\"A\",\"deadline\":-4}}\n"
        "{\"execute\":\"status\",\"arguments\":{\"id\":\"drain-none\"}}\n"
        "[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]\n"
        "{\"execute\":\"status\"}\n";
    g_autofree char *reply = raw(fx, lines, strlen(lines), 14, NULL);
    g_auto(GStrv) got = g_strsplit(reply, "\n", -1);

    assert_int_equal(g_strv_length(got), 15); /* 14 lines and the empty rest */
    expect_error(got[0], "InvalidJSON", "not JSON");
    expect_error(got[1], "InvalidJSON", "not a JSON object");
    expect_error(got[2], "CommandNotFound", "no command 'nope'");
    expect_error(got[3], "NotFound",
                 "unknown host 'Z' (the [host NAME] groups of the configuration: A, B)");
    expect_error(got[4], "InvalidParameter", "argument 'host' must be a string");
    expect_error(got[5], "InvalidParameter", "unknown argument 'when'");
    expect_error(got[6], "InvalidParameter", "unknown member 'extra'");
    expect_error(got[7], "InvalidParameter", "member 'execute'");
    expect_error(got[8], "InvalidParameter", "must be consolidate, drain or balance, not 'pack'");
    expect_error(got[9], "InvalidParameter", "argument 'host' is missing");
    expect_error(got[10], "InvalidParameter", "argument 'deadline' must be from 0");
    expect_error(got[11], "NotFound", "no schedule 'drain-none'");
    expect_error(got[12], "InvalidJSON", "nests deeper than 16");
    /* The connection still serves after all that; nothing was started. */
    assert_non_null(strstr(got[13], "\"return\""));
    assert_non_null(strstr(got[13], "\"schedules\":[]"));
    assert_int_equal(migrations_here + migrations_remote, 0);
}

static void test_oversized(void **state)
{
    Fx *fx = *state;
    gsize len = ORCH_LOCAL_API_MAX_LINE + 10;
    g_autofree char *big = g_malloc(len);
    g_autofree char *reply = NULL;
    gboolean eof = FALSE;

    memset(big, 'x', len);
    reply = raw(fx, big, len, 2, &eof);
    expect_error(reply, "TooLarge", "longer than 1048576 bytes");
    assert_true(eof); /* closed after the answer */
    /* A line of exactly the limit (newline included) is read: blanks, so no JSON object. */
    memset(big, ' ', ORCH_LOCAL_API_MAX_LINE - 1);
    big[ORCH_LOCAL_API_MAX_LINE - 1] = '\n';
    g_free(reply);
    reply = raw(fx, big, ORCH_LOCAL_API_MAX_LINE, 1, NULL);
    expect_error(reply, "InvalidJSON", "the request is not a JSON object");
}

static JsonObject *schedule_in_status(JsonNode *status, const char *id)
{
    JsonArray *list = json_object_get_array_member(json_node_get_object(status), "schedules");

    for (guint i = 0; i < json_array_get_length(list); i++) {
        JsonObject *s = json_array_get_object_element(list, i);

        if (g_str_equal(json_object_get_string_member(s, "id"), id))
            return s;
    }
    return NULL;
}

static void test_drain_and_wait(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) started = NULL;
    g_autoptr(JsonNode) again = NULL;
    g_autoptr(JsonNode) final = NULL;
    g_autoptr(JsonNode) status = NULL;
    g_autofree char *args = NULL;
    const char *id;
    JsonObject *s;
    JsonArray *moves;
    guint events = 0;
    HotmigdStats stats;

    gate_closed = TRUE; /* the moves wait until the test follows them */
    started = call(fx, "drain", "{\"host\":\"A\",\"reason\":\"test\"}", NULL, &error);
    assert_null(error);
    id = str_member(started, "id");
    assert_true(g_str_has_prefix(id, "drain-"));
    assert_false(json_object_get_boolean_member(json_node_get_object(started), "merged"));
    /* Asked again while it runs: the same schedule. */
    again = call(fx, "drain", "{\"host\":\"A\"}", NULL, &error);
    assert_null(error);
    assert_string_equal(str_member(again, "id"), id);
    assert_true(json_object_get_boolean_member(json_node_get_object(again), "merged"));

    args = g_strdup_printf("{\"id\":\"%s\"}", id);
    g_timeout_add(200, gate_open, NULL);
    final = call(fx, "wait", args, &events, &error);
    assert_null(error);
    s = json_node_get_object(final);
    assert_string_equal(json_object_get_string_member(s, "state"), "finished");
    assert_true(json_object_get_boolean_member(s, "ok"));
    moves = json_object_get_array_member(s, "moves");
    assert_int_equal(json_array_get_length(moves), 3);
    for (guint i = 0; i < 3; i++) {
        JsonObject *m = json_array_get_object_element(moves, i);

        assert_string_equal(json_object_get_string_member(m, "state"), "done");
        assert_string_equal(json_object_get_string_member(m, "from"), "A");
        assert_string_equal(json_object_get_string_member(m, "to"), "B");
        assert_string_equal(json_object_get_string_member(m, "driven_by"), "here");
        assert_true(
            json_object_get_boolean_member(json_object_get_object_member(m, "report"), "ok"));
    }
    /* Each move's end, and the starts but the first's (it started before the wait). */
    assert_true(events >= 5);
    assert_int_equal(migrations_here, 3);
    assert_int_equal(migrations_remote, 0);
    assert_int_equal(g_hash_table_size(where), 5);
    assert_string_equal(g_hash_table_lookup(where, "a1"), "B");

    /* status: A is empty and ok again; the schedule is listed finished. */
    status = call(fx, "status", NULL, NULL, &error);
    assert_null(error);
    s = schedule_in_status(status, id);
    assert_non_null(s);
    assert_string_equal(json_object_get_string_member(s, "state"), "finished");
    assert_int_equal(
        json_object_get_int_member(json_object_get_object_member(s, "progress"), "done"), 3);
    assert_int_equal(fx->done_calls, 1);
    assert_string_equal(fx->done_host, "A");
    assert_true(fx->done_ok);
    hotmigd_get_stats(fx->daemon, &stats);
    assert_int_equal(stats.migrations_ok, 3);
    assert_int_equal(stats.phase_count[ORCH_PHASE_MIGRATE], 3);
    assert_true(stats.phase_seconds_sum[ORCH_PHASE_MIGRATE] > 0.005);
}

static void record_inventory(Hotmigd *daemon, const HotmigdInventory *inv, gpointer data)
{
    Fx *fx = data;

    fx->inventories++;
    for (guint i = 0; i < inv->hosts->len; i++) {
        const HotmigdInvHost *host = g_ptr_array_index(inv->hosts, i);

        if (g_str_equal(host->name, "B"))
            fx->b_state = host->state;
    }
}

/* A peer whose hotmigd does not answer at the start (a cluster's daemons come up in any order)
 * is read again within seconds, not at the next background inventory a minute later. */
static void test_peer_read_again(void **state)
{
    Fx *fx = *state;
    gint64 start;

    hotmigd_set_inventory_taken(fx->daemon, record_inventory, fx);
    LOOP_UNTIL(fx->inventories >= 1);
    assert_int_equal(fx->b_state, POL_HOST_QUARANTINED);
    g_atomic_int_set(&peer_b_silent, 0);
    start = g_get_monotonic_time();
    LOOP_UNTIL(fx->b_state == POL_HOST_OK);
    assert_true(g_get_monotonic_time() - start < 10 * G_USEC_PER_SEC);
    hotmigd_set_inventory_taken(fx->daemon, NULL, NULL);
}

/* A plan asked while an inventory runs is made on the next one: the running one may have read
 * a host before the plan was asked (here B, whose hotmigd did not answer then and answers by
 * the time the plan is asked). */
static void test_plan_waits_for_next_inventory(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) plan = NULL;
    gboolean waiting = FALSE;

    hotmigd_set_inventory_taken(fx->daemon, record_inventory, fx);
    /* The first inventory has asked B (silent then) and waits at the gate. */
    for (guint i = 0; i < 2000 && !waiting; i++) {
        g_mutex_lock(&world_lock);
        waiting = b_reads_waiting > 0;
        g_mutex_unlock(&world_lock);
        if (!waiting)
            g_usleep(10 * 1000);
    }
    assert_true(waiting);
    assert_int_equal(fx->inventories, 0);
    g_atomic_int_set(&peer_b_silent, 0);
    /* The plan's request lands while that inventory runs; the gate opens a second later. */
    g_timeout_add(1000, b_read_gate_open, NULL);
    plan = call(fx, "plan", "{\"policy\":\"consolidate\"}", NULL, &error);
    assert_null(error);
    assert_non_null(plan);
    /* Answered after an inventory that saw B answer, not with the one that ran when asked. */
    assert_true(fx->inventories >= 2);
    assert_int_equal(fx->b_state, POL_HOST_OK);
    hotmigd_set_inventory_taken(fx->daemon, NULL, NULL);
}

/* A drain of A, whose a1 and a2 are two guests of one MPI job (the job id in their XML's
 * metadata) and a3 is in none, two moves at a time: the job's guests never move at once (a3
 * takes the other place), and every move is done. */
static void test_drain_jobs_one_at_a_time(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) started = NULL;
    g_autoptr(JsonNode) final = NULL;
    g_autofree char *args = NULL;
    JsonObject *s;
    JsonArray *moves;

    g_mutex_lock(&world_lock);
    g_hash_table_insert(jobs, g_strdup("a1"), g_strdup("mpi-7"));
    g_hash_table_insert(jobs, g_strdup("a2"), g_strdup("mpi-7"));
    gate_closed = TRUE; /* the moves wait until the test follows them */
    g_mutex_unlock(&world_lock);
    started = call(fx, "drain", "{\"host\":\"A\",\"reason\":\"test\"}", NULL, &error);
    assert_null(error);
    args = g_strdup_printf("{\"id\":\"%s\"}", str_member(started, "id"));
    g_timeout_add(300, gate_open, NULL);
    final = call(fx, "wait", args, NULL, &error);
    assert_null(error);
    /* The moves have ended: the world is the test's alone (no assertion under its lock). */
    assert_int_equal(in_flight_max, 2); /* two places were used at once... */
    assert_int_equal(job_in_flight_max, 1); /* ...never by both of the job's guests */
    assert_string_equal(g_hash_table_lookup(where, "a1"), "B");
    assert_string_equal(g_hash_table_lookup(where, "a2"), "B");
    assert_string_equal(g_hash_table_lookup(where, "a3"), "B");
    assert_int_equal(migrations_here, 3);
    s = json_node_get_object(final);
    assert_string_equal(json_object_get_string_member(s, "state"), "finished");
    assert_true(json_object_get_boolean_member(s, "ok"));
    moves = json_object_get_array_member(s, "moves");
    assert_int_equal(json_array_get_length(moves), 3);
    for (guint i = 0; i < 3; i++) {
        JsonObject *m = json_array_get_object_element(moves, i);
        const char *vm = json_object_get_string_member(m, "vm");

        assert_string_equal(json_object_get_string_member(m, "state"), "done");
        /* The job id came through the inventory to the schedule. */
        assert_true(json_object_has_member(m, "job"));
        assert_string_equal(json_object_get_string_member_with_default(m, "job", "(none)"),
                            g_str_equal(vm, "a3") ? "(none)" : "mpi-7");
    }
}

/* The entry point the alert wiring calls: B's VMs move from B, asked of B's hotmigd. */
static void test_evacuate(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *id = NULL;
    g_autofree char *id2 = NULL;
    g_auto(GStrv) late = NULL;
    g_auto(GStrv) late2 = NULL;
    gboolean merged = TRUE;
    HotmigdStats stats;

    /* Planned on the daemon's last inventory (the tests turn the background one off): take
     * one through a snapshot. */
    json_node_unref(call(fx, "snapshot", NULL, NULL, &error));
    assert_null(error);
    assert_false(hotmigd_evacuate(fx->daemon, "Q", 0, "smart", &id, &merged, &late, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND));
    assert_null(id);
    g_clear_error(&error);

    g_mutex_lock(&world_lock);
    g_hash_table_add(fail, g_strdup("b2"));
    g_mutex_unlock(&world_lock);
    /* A deadline in the past: every VM is late, and still moved. */
    assert_true(
        hotmigd_evacuate(fx->daemon, "B", 1, "smart: sda failing", &id, &merged, &late, &error));
    assert_null(error);
    assert_false(merged);
    assert_int_equal(g_strv_length(late), 2);
    assert_true(hotmigd_evacuate(fx->daemon, "B", 0, "again", &id2, &merged, &late2, &error));
    assert_true(merged);
    assert_string_equal(id, id2);
    assert_int_equal(g_strv_length(late2), 2);
    assert_int_equal(fx->done_calls, 0); /* never before the call returned */

    LOOP_UNTIL(fx->done_calls == 1);
    assert_string_equal(fx->done_host, "B");
    assert_false(fx->done_ok); /* b2 failed: it is still on B */
    assert_int_equal(migrations_remote, 2);
    assert_int_equal(migrations_here, 0);
    assert_string_equal(g_hash_table_lookup(where, "b1"), "A");
    assert_string_equal(g_hash_table_lookup(where, "b2"), "B");
    hotmigd_get_stats(fx->daemon, &stats);
    assert_int_equal(stats.migrations_ok, 1);
    assert_int_equal(stats.migrations_failed, 1);
    {
        g_autoptr(JsonNode) status = hotmigd_status(fx->daemon, id, &error);
        JsonObject *s = json_node_get_object(status);
        JsonArray *moves = json_object_get_array_member(s, "moves");
        JsonArray *late_list = json_object_get_array_member(s, "late");

        assert_false(json_object_get_boolean_member(s, "ok"));
        assert_non_null(strstr(json_object_get_string_member(s, "error"), "1 VM(s) still on 'B'"));
        assert_int_equal(json_array_get_length(late_list), g_strv_length(late));
        for (guint i = 0; i < json_array_get_length(moves); i++) {
            JsonObject *m = json_array_get_object_element(moves, i);
            const char *vm = json_object_get_string_member(m, "vm");

            assert_string_equal(json_object_get_string_member(m, "driven_by"), "B");
            assert_non_null(json_object_get_string_member(m, "migration"));
            if (g_str_equal(vm, "b2"))
                assert_non_null(
                    strstr(json_object_get_string_member(m, "detail"), "injected for 'b2'"));
        }
    }
    /* Once it ended, a new evacuation may start (here: with nothing new to move, it ends). */
    g_clear_pointer(&id2, g_free);
    g_clear_pointer(&late2, g_strfreev);
    assert_true(hotmigd_evacuate(fx->daemon, "B", 0, "later", &id2, &merged, &late2, &error));
    assert_false(merged);
    assert_string_not_equal(id, id2);
    LOOP_UNTIL(fx->done_calls == 2);
}

/* How many moves of schedule @id are in @state, and the first one's detail. */
static guint moves_in(Fx *fx, const char *id, const char *state, char **ret_detail)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) status = hotmigd_status(fx->daemon, id, &error);
    JsonArray *moves = json_object_get_array_member(json_node_get_object(status), "moves");
    guint n = 0;

    for (guint i = 0; i < json_array_get_length(moves); i++) {
        JsonObject *m = json_array_get_object_element(moves, i);

        if (!g_str_equal(json_object_get_string_member(m, "state"), state))
            continue;
        if (!n++ && ret_detail)
            *ret_detail = g_strdup(json_object_get_string_member(m, "detail"));
    }
    return n;
}

/* The same host evacuated against a deadline: the evacuation's order stands, and the job's
 * two guests (first in it: equal durations, one job's VMs together) move side by side. */
static void test_evacuate_jobs_side_by_side(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *id = NULL;
    g_auto(GStrv) late = NULL;
    gboolean merged = TRUE;
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;

    g_mutex_lock(&world_lock);
    g_hash_table_insert(jobs, g_strdup("a1"), g_strdup("mpi-7"));
    g_hash_table_insert(jobs, g_strdup("a2"), g_strdup("mpi-7"));
    g_mutex_unlock(&world_lock);
    json_node_unref(call(fx, "snapshot", NULL, NULL, &error));
    assert_null(error);
    g_mutex_lock(&world_lock);
    gate_closed = TRUE;
    g_mutex_unlock(&world_lock);
    assert_true(hotmigd_evacuate(fx->daemon, "A", now + 3600, "disk", &id, &merged, &late, &error));
    assert_int_equal(g_strv_length(late), 0);
    g_timeout_add(300, gate_open, NULL);
    LOOP_UNTIL(fx->done_calls == 1);
    assert_true(fx->done_ok);
    assert_int_equal(moves_in(fx, id, "done", NULL), 3);
    assert_int_equal(job_in_flight_max, 2);
}

/* An evacuation asked again with an earlier deadline: the move not started yet is ordered
 * again for it (skipped in the round under way, moved in the next one); both VMs leave. */
static void test_evacuate_sooner(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *id = NULL, *id2 = NULL, *detail = NULL;
    g_auto(GStrv) late = NULL;
    g_auto(GStrv) late2 = NULL;
    gboolean merged = TRUE;
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;

    json_node_unref(call(fx, "snapshot", NULL, NULL, &error));
    assert_null(error);
    g_mutex_lock(&world_lock);
    gate_closed = TRUE; /* the moves wait */
    g_mutex_unlock(&world_lock);
    assert_true(hotmigd_evacuate(fx->daemon, "B", now + 3600, "disk", &id, &merged, &late, &error));
    assert_false(merged);
    LOOP_UNTIL(moves_in(fx, id, "running", NULL) == 1); /* per-host-out = 1 */
    assert_int_equal(moves_in(fx, id, "pending", NULL), 1);

    assert_true(hotmigd_evacuate(fx->daemon, "B", now + 60, "urgent", &id2, &merged, &late2, &error));
    assert_true(merged);
    assert_string_equal(id, id2);
    assert_int_equal(moves_in(fx, id, "skipped", &detail), 1);
    assert_string_equal(detail, "ordered again for an earlier deadline");
    assert_int_equal(moves_in(fx, id, "pending", NULL), 0);

    gate_open(NULL);
    LOOP_UNTIL(fx->done_calls == 1);
    assert_true(fx->done_ok);
    assert_string_equal(g_hash_table_lookup(where, "b1"), "A");
    assert_string_equal(g_hash_table_lookup(where, "b2"), "A");
    assert_int_equal(moves_in(fx, id, "done", NULL), 2);
    {
        g_autoptr(JsonNode) status = hotmigd_status(fx->daemon, id, &error);

        assert_int_equal(json_object_get_int_member(json_node_get_object(status), "rounds"), 2);
    }
}

static void test_plan_and_run(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) plan = NULL;
    g_autoptr(JsonNode) bad = NULL;
    g_autoptr(JsonNode) run = NULL;
    g_autoptr(JsonNode) final = NULL;
    g_autofree char *args = NULL;
    g_autofree char *plan_text = NULL;

    /* Unknown host in a drain plan. */
    assert_null(call(fx, "plan", "{\"policy\":\"drain\",\"host\":\"Z\"}", NULL, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_NOT_FOUND));
    assert_non_null(strstr(error->message, "NotFound: unknown host 'Z'"));
    g_clear_error(&error);

    /* host_value and max_migrations reach the planner: freeing B (two migrations) is not worth
     * it at a host value of 1, nor allowed under a cap of 1; out of range is refused. */
    {
        g_autoptr(JsonNode) keep = call(fx, "plan", "{\"policy\":\"consolidate\",\"host_value\":1}",
                                        NULL, &error);
        g_autoptr(JsonNode) capped = NULL;
        assert_null(error);
        assert_int_equal(json_object_get_int_member(json_node_get_object(keep), "host_value"), 1);
        assert_int_equal(json_array_get_length(json_object_get_array_member(
                             json_node_get_object(keep), "migrations")),
                         0);
        capped = call(fx, "plan", "{\"policy\":\"consolidate\",\"max_migrations\":1}", NULL,
                      &error);
        assert_null(error);
        assert_int_equal(json_object_get_int_member(json_node_get_object(capped), "max_migrations"),
                         1);
        assert_int_equal(json_array_get_length(json_object_get_array_member(
                             json_node_get_object(capped), "migrations")),
                         0);
        assert_null(call(fx, "plan", "{\"policy\":\"consolidate\",\"max_migrations\":0}",
                         NULL, &error));
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
        g_clear_error(&error);
    }

    plan = call(fx, "plan", "{\"policy\":\"consolidate\"}", NULL, &error);
    assert_null(error);
    assert_string_equal(str_member(plan, "policy"), "consolidate");
    /* Five 1-GiB VMs fit on one host of 64 GiB: B's two go to A (more VMs stay put). */
    assert_int_equal(json_array_get_length(
                         json_object_get_array_member(json_node_get_object(plan), "migrations")),
                     2);

    /* A plan that does not replay (a VM that is not where it says) is refused, nothing runs. */
    bad = call(fx, "run",
               "{\"plan\":{\"policy\":\"balance\",\"migrations\":[{\"vm\":\"a1\",\"from\":\"B\","
               "\"to\":\"A\"}]}}",
               NULL, &error);
    assert_null(bad);
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
    assert_non_null(strstr(error->message, "does not fit the cluster as it is now"));
    g_clear_error(&error);

    plan_text = json_to_string(plan, FALSE);
    args = g_strdup_printf("{\"plan\":%s,\"reason\":\"test run\"}", plan_text);
    run = call(fx, "run", args, NULL, &error);
    assert_null(error);
    g_free(args);
    args = g_strdup_printf("{\"id\":\"%s\"}", str_member(run, "id"));
    final = call(fx, "wait", args, NULL, &error);
    assert_null(error);
    assert_true(json_object_get_boolean_member(json_node_get_object(final), "ok"));
    assert_int_equal(migrations_remote, 2); /* both from B */
    assert_string_equal(g_hash_table_lookup(where, "b1"), "A");
    assert_int_equal(fx->done_calls, 0); /* not an evacuation */
}

static void test_snapshot(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) snap = call(fx, "snapshot", NULL, NULL, &error);
    JsonArray *hosts, *vms;

    assert_null(error);
    hosts = json_object_get_array_member(json_node_get_object(snap), "hosts");
    vms = json_object_get_array_member(json_node_get_object(snap), "vms");
    assert_int_equal(json_array_get_length(hosts), 2);
    assert_int_equal(json_array_get_length(vms), 5);
    assert_int_equal(json_object_get_int_member(json_array_get_object_element(vms, 0), "vfs"), 1);
}

/* ---- recovery at the start (issue 15, item 8) ----------------------------------------------- */

/* A journal as a migration killed after its unplug leaves it (@domain from A to B, its VF
 * 'ua-hmvf0' asked out). Returns the journal, still open (locked) when @keep_locked. */
static OrchJournal *journal_left(const char *dir, const char *domain, gboolean keep_locked)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchJournal) journal = orch_journal_open(dir, domain, TRUE, &error);
    g_autoptr(OrchJournalRecord) rec = g_new0(OrchJournalRecord, 1);
    OrchJournalVf *vf = g_new0(OrchJournalVf, 1);

    assert_non_null(journal);
    rec->migration = g_strdup_printf("m-%s", domain);
    rec->domain = g_strdup(domain);
    rec->source = g_strdup("test:///A");
    rec->destination = g_strdup("test:///B");
    rec->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)orch_journal_vf_free);
    vf->alias = g_strdup("ua-hmvf0");
    vf->kind = g_strdup("standin");
    vf->source_xml = g_strdup_printf("<interface type='ethernet'><target dev='tap-%s' "
                                     "managed='no'/><alias name='ua-hmvf0'/></interface>",
                                     domain);
    vf->destination_xml = g_strdup(vf->source_xml);
    g_ptr_array_add(rec->vfs, vf);
    assert_true(orch_journal_begin(journal, rec, TRUE, &error));
    assert_true(orch_journal_step(journal, rec->migration, "unplug", "ua-hmvf0", NULL, &error));
    g_mutex_lock(&world_lock);
    g_hash_table_add(unplugged, g_strdup(domain));
    g_mutex_unlock(&world_lock);
    return keep_locked ? g_steal_pointer(&journal) : NULL;
}

/* hotmigd was killed while a1's migration had unplugged its VF (a1 still on A, quiesced): the
 * next hotmigd recovers it at the start (the VF back on A, the journal gone); a2's journal,
 * locked by another process (a migrate-vm running), is left to it. */
static void test_recover_at_start(void **state)
{
    Fx fx = {0};
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;
    g_autoptr(OrchJournal) busy = NULL;
    g_autoptr(GPtrArray) left = NULL;
    HmConfig *config;
    HotmigdOptions opts = {
        .connector = &fake_connector,
        .migrate = fake_migrate,
        .no_https = TRUE,
        .no_pool = TRUE,
        .inventory_interval_s = G_MAXUINT,
    };
    gint64 until = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;

    g_mutex_lock(&world_lock);
    where = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    fail = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    remote_results = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    jobs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    in_flight = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    in_flight_max = job_in_flight_max = 0;
    unplugged = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    plugs = g_ptr_array_new_with_free_func(g_free);
    g_hash_table_insert(where, g_strdup("a1"), g_strdup("A"));
    g_hash_table_insert(where, g_strdup("a2"), g_strdup("A"));
    g_mutex_unlock(&world_lock);

    fx.dir = g_dir_make_tmp("hm-daemon-test-XXXXXX", NULL);
    fx.socket = g_build_filename(fx.dir, "hotmigd.sock", NULL);
    journal_left(fx.dir, "a1", FALSE);
    busy = journal_left(fx.dir, "a2", TRUE);
    text = g_strdup_printf("[hotmigd]\nname = A\nsocket = %s\nrun-dir = %s\nstate-dir = %s\n"
                           "[host A]\nuri = test:///A\nhotmigd = https://A:1\n"
                           "[host B]\nuri = test:///B\nhotmigd = https://B:1\n",
                           fx.socket, fx.dir, fx.dir);
    config = hm_config_load_data(text, strlen(text), "test.conf", &error);
    assert_non_null(config);
    fx.daemon = hotmigd_new(config, &opts, &error);
    assert_non_null(fx.daemon);
    assert_true(hotmigd_recovering(fx.daemon));
    while (hotmigd_recovering(fx.daemon) && g_get_monotonic_time() < until)
        g_main_context_iteration(NULL, TRUE);
    assert_false(hotmigd_recovering(fx.daemon));

    g_mutex_lock(&world_lock);
    assert_int_equal(plugs->len, 1);
    assert_string_equal(g_ptr_array_index(plugs, 0), "a1@A");
    assert_false(g_hash_table_contains(unplugged, "a1"));
    assert_true(g_hash_table_contains(unplugged, "a2"));
    g_mutex_unlock(&world_lock);
    left = orch_journal_list(fx.dir, &error);
    assert_non_null(left);
    assert_int_equal(left->len, 1);
    assert_string_equal(g_ptr_array_index(left, 0), "a2");

    g_clear_pointer(&busy, orch_journal_close);
    g_clear_pointer(&fx.daemon, hotmigd_free);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    test_dir_remove(fx.dir);
    g_free(fx.dir);
    g_free(fx.socket);
    g_hash_table_unref(where);
    g_hash_table_unref(fail);
    g_hash_table_unref(remote_results);
    g_hash_table_unref(jobs);
    g_hash_table_unref(in_flight);
    g_clear_pointer(&unplugged, g_hash_table_unref);
    g_clear_pointer(&plugs, g_ptr_array_unref);
}

/* The soak's finding (docs/reliability.md): a move hotmigd drives fails after its undo failed
 * too (the destination's libvirtd restarted under it) and keeps its journal, which nothing
 * recovered short of a restart of hotmigd. Now the move recovers it before it ends, as
 * 'migrate-vm --recover' would, trying again while the recovery fails (twice here: that
 * libvirtd still restarting): a1's VF plugged back on A, its journal gone, the move's detail
 * saying both. The drain's other moves are done as ever. */
static void test_failed_move_recovers_its_journal(void **state)
{
    Fx *fx = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) started = NULL;
    g_autoptr(JsonNode) final = NULL;
    g_autoptr(GPtrArray) left = NULL;
    g_autofree char *args = NULL;
    JsonArray *moves;
    const char *detail = NULL;

    g_mutex_lock(&world_lock);
    keep_journal = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_hash_table_add(keep_journal, g_strdup("a1"));
    unplugged = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    plugs = g_ptr_array_new_with_free_func(g_free);
    recover_down = 2;
    recover_calls = 0;
    g_mutex_unlock(&world_lock);

    started = call(fx, "drain", "{\"host\":\"A\",\"reason\":\"test\"}", NULL, &error);
    assert_null(error);
    args = g_strdup_printf("{\"id\":\"%s\"}", str_member(started, "id"));
    final = call(fx, "wait", args, NULL, &error);
    assert_null(error);
    assert_false(json_object_get_boolean_member(json_node_get_object(final), "ok"));
    moves = json_object_get_array_member(json_node_get_object(final), "moves");
    for (guint i = 0; i < json_array_get_length(moves); i++) {
        JsonObject *m = json_array_get_object_element(moves, i);

        if (g_str_equal(json_object_get_string_member(m, "vm"), "a1")) {
            assert_string_equal(json_object_get_string_member(m, "state"), "failed");
            detail = json_object_get_string_member(m, "detail");
        } else {
            assert_string_equal(json_object_get_string_member(m, "state"), "done");
        }
    }
    assert_non_null(detail);
    if (!strstr(detail, "undoing it failed too; its journal recovered: ") ||
        !strstr(detail, "on the source host with 1 of 1 VF(s)"))
        fail_msg("the failed move's detail: %s", detail);

    g_mutex_lock(&world_lock);
    assert_int_equal(recover_calls, 3);
    assert_int_equal(plugs->len, 1);
    assert_string_equal(g_ptr_array_index(plugs, 0), "a1@A");
    assert_false(g_hash_table_contains(unplugged, "a1"));
    assert_string_equal(g_hash_table_lookup(where, "a1"), "A");
    g_mutex_unlock(&world_lock);
    left = orch_journal_list(fx->dir, &error);
    assert_non_null(left);
    assert_int_equal(left->len, 0);

    g_mutex_lock(&world_lock);
    g_clear_pointer(&keep_journal, g_hash_table_unref);
    g_clear_pointer(&unplugged, g_hash_table_unref);
    g_clear_pointer(&plugs, g_ptr_array_unref);
    g_mutex_unlock(&world_lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_socket_mode, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_peer_read_again, fx_setup_b_silent, fx_teardown),
        cmocka_unit_test_setup_teardown(test_plan_waits_for_next_inventory,
                                        fx_setup_b_silent_gated, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_lines, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_oversized, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_drain_and_wait, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_drain_jobs_one_at_a_time, fx_setup_two_out,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_evacuate, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_evacuate_jobs_side_by_side, fx_setup_two_out,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_evacuate_sooner, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_plan_and_run, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_snapshot, fx_setup, fx_teardown),
        cmocka_unit_test(test_recover_at_start),
        cmocka_unit_test_setup_teardown(test_failed_move_recovers_its_journal, fx_setup,
                                        fx_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
