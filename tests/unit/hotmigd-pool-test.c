/* Unit tests for hotmigd's pool and API (hotmigd/pool.c, hotmigd/api.c) without TLS: requests
 * go straight to hotmigd_api_handle(); the host is a fake (pool-fake-host.c); leases are the real
 * lease store in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib/gstdio.h>
#include <gio/gunixsocketaddress.h>
#include <json-glib/json-glib.h>

#include "engine/virt.h"
#include "hotmigd/alerts.h"
#include "hotmigd/local-api.h"
#include "pool-fake-host.h"
#include "test-dir.h"

#define PF "0000:3b:00.0"
#define VF1 "0000:3b:01.0"
#define VF2 "0000:3b:01.1"
#define VF3 "0000:3b:01.2"
#define LONE "0000:5e:00.4" /* a [pool] vfs entry, another model */
#define GONE "0000:5e:00.5" /* a [pool] vfs entry that sysfs does not have */

typedef struct {
    char *dir;
    FakeHost *host; /* borrowed from the pool */
    HotmigdPool *pool;
} Fx;

static HotmigdPool *fx_pool(Fx *fx, GError **error)
{
    static const char *const pfs[] = {PF, NULL};
    static const char *const vfs[] = {LONE, "5e:00.5", NULL};
    static const char *const standins[] = {"hmlab0vf1", "hmlab0vf2", NULL};
    g_autofree char *leases = g_build_filename(fx->dir, "leases", NULL);
    HotmigdPoolConfig config = {
        .host_name = "test-host",
        .lease_dir = leases,
        .lease_ttl_s = 300,
        .pfs = pfs,
        .vfs = vfs,
        .standins = standins,
    };

    fx->host = fake_host_new();
    fake_host_add_pf(fx->host, PF, 3, 0x15b3, 0x101c);
    g_hash_table_insert(fx->host->vfs, g_strdup(LONE),
                        fake_vf(LONE, "0000:5e:00.0", 3, 0x15b3, 0x101e, "vfio-pci"));
    g_hash_table_add(fx->host->netdevs, g_strdup("hmlab0vf1"));
    return hotmigd_pool_new(&config, &fake_host_ops, fx->host, error);
}

static int fx_setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    g_autoptr(GError) error = NULL;

    fx->dir = g_dir_make_tmp("hm-hotmigd-pool-test-XXXXXX", NULL);
    assert_non_null(fx->dir);
    fx->pool = fx_pool(fx, &error);
    assert_null(error);
    assert_non_null(fx->pool);
    *state = fx;
    return 0;
}

static int fx_teardown(void **state)
{
    Fx *fx = *state;

    hotmigd_pool_free(fx->pool);
    test_dir_remove(fx->dir);
    g_free(fx->dir);
    g_free(fx);
    return 0;
}

/* Runs one request; returns the reply's JSON object (owned) and sets *ret_status. */
static JsonObject *call(Fx *fx, const char *method, const char *path, const char *body,
                        guint *ret_status)
{
    g_autoptr(HotmigdApiReply) reply =
        hotmigd_api_handle(fx->pool, method, path, body, body ? strlen(body) : 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    JsonNode *root;

    assert_non_null(reply);
    assert_true(json_parser_load_from_data(parser, reply->body, -1, &error));
    root = json_parser_get_root(parser);
    assert_true(JSON_NODE_HOLDS_OBJECT(root));
    *ret_status = reply->status;
    return json_object_ref(json_node_get_object(root));
}

/* The request must fail with @status and an error naming @needle. */
static void expect_error(Fx *fx, const char *method, const char *path, const char *body,
                         guint status, const char *needle)
{
    guint got = 0;
    g_autoptr(JsonObject) obj = call(fx, method, path, body, &got);
    const char *msg = json_object_get_string_member_with_default(obj, "error", NULL);

    if (g_getenv("HM_TEST_VERBOSE"))
        g_printerr("%s %s -> %u %s\n", method, path, got, msg ? msg : "");
    if (got != status || !msg || !strstr(msg, needle))
        fail_msg("%s %s %s: got %u '%s', expected %u with '%s'", method, path, body ? body : "",
                 got, msg ? msg : "(no error)", status, needle);
}

static const char *member(JsonObject *obj, const char *name)
{
    return json_object_get_string_member_with_default(obj, name, NULL);
}

/* The entry of @id in GET /v1/vfs (owned). */
static JsonObject *vf_entry(Fx *fx, const char *id)
{
    guint status = 0;
    g_autoptr(JsonObject) list = call(fx, "GET", "/v1/vfs", NULL, &status);
    JsonArray *vfs = json_object_get_array_member(list, "vfs");

    assert_int_equal(status, 200);
    for (guint i = 0; i < json_array_get_length(vfs); i++) {
        JsonObject *e = json_array_get_object_element(vfs, i);

        if (g_str_equal(member(e, "id"), id))
            return json_object_ref(e);
    }
    fail_msg("VF '%s' is not listed", id);
    return NULL;
}

#define LEASE_BODY(what)                                                                           \
    "{" what ", \"holder\": \"test\", \"reason\": \"unit test\", \"domain\": \"vm7\"}"

/* Leases @what (a JSON member list) and returns the lease id (owned). */
static char *lease(Fx *fx, const char *body)
{
    guint status = 0;
    g_autoptr(JsonObject) obj = call(fx, "POST", "/v1/leases", body, &status);

    if (status != 201)
        fail_msg("lease %s: %u %s", body, status, member(obj, "error"));
    assert_string_equal(member(obj, "state"), "leased");
    return g_strdup(member(obj, "id"));
}

/* ---- the pool's configuration and listing ------------------------------------------------- */

static void test_config_refused(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-hotmigd-pool-test-XXXXXX", NULL);
    g_autofree char *leases = g_build_filename(dir, "leases", NULL);
    static const char *const bad_pf[] = {"3b:00", NULL};
    static const char *const pci_as_standin[] = {"0000:3b:00.1", NULL};
    static const char *const slash[] = {"a/b", NULL};
    static const char *const twice[] = {"0000:3b:00.1", NULL};
    static const char *const twice2[] = {"3b:00.1", NULL};
    struct {
        HotmigdPoolConfig config;
        const char *needle;
    } cases[] = {
        {{.lease_dir = leases, .pfs = bad_pf}, "[pool] pfs"},
        {{.lease_dir = leases, .standins = pci_as_standin}, "a PCI address, not a net device"},
        {{.lease_dir = leases, .standins = slash}, "[pool] standins"},
        {{.lease_dir = leases, .pfs = twice, .vfs = twice2}, "in the pool twice"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(HotmigdPool) pool =
            hotmigd_pool_new(&cases[i].config, &fake_host_ops, fake_host_new(), &error);

        assert_null(pool);
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
        if (!strstr(error->message, cases[i].needle))
            fail_msg("case %u: '%s' lacks '%s'", i, error->message, cases[i].needle);
    }
    test_dir_remove(dir);
}

static void test_host_and_list(void **state)
{
    Fx *fx = *state;
    guint status = 0;
    g_autoptr(JsonObject) host = call(fx, "GET", "/v1/host", NULL, &status);
    JsonObject *pool;
    g_autoptr(JsonObject) vf1 = NULL;
    g_autoptr(JsonObject) lone = NULL;
    g_autoptr(JsonObject) gone = NULL;
    g_autoptr(JsonObject) s1 = NULL;
    g_autoptr(JsonObject) s2 = NULL;

    assert_int_equal(status, 200);
    assert_string_equal(member(host, "name"), "test-host");
    assert_string_equal(member(host, "version"), HOTMIG_VERSION);
    pool = json_object_get_object_member(host, "pool");
    assert_int_equal(json_object_get_int_member(pool, "size"), 7); /* 3 + 2 + 2 */
    assert_int_equal(json_object_get_int_member(pool, "free"), 5);
    assert_int_equal(json_object_get_int_member(pool, "missing"), 2);

    vf1 = vf_entry(fx, VF1);
    assert_string_equal(member(vf1, "kind"), "pci");
    assert_string_equal(member(vf1, "state"), "free");
    assert_string_equal(member(vf1, "vendor_id"), "0x15b3");
    assert_string_equal(member(vf1, "device_id"), "0x101c");
    assert_string_equal(member(vf1, "pf"), PF);
    assert_int_equal(json_object_get_int_member(vf1, "vf_index"), 0);
    assert_string_equal(member(vf1, "driver"), "mlx5_core");
    assert_true(json_object_get_null_member(vf1, "lease"));
    lone = vf_entry(fx, LONE);
    assert_string_equal(member(lone, "device_id"), "0x101e");
    gone = vf_entry(fx, GONE); /* configured as "5e:00.5": listed in the kernel's spelling */
    assert_string_equal(member(gone, "state"), "missing");
    assert_non_null(strstr(member(gone, "note"), "no PCI function"));
    s1 = vf_entry(fx, "hmlab0vf1");
    assert_string_equal(member(s1, "kind"), "standin");
    assert_string_equal(member(s1, "state"), "free");
    assert_true(json_object_get_null_member(s1, "vendor_id"));
    s2 = vf_entry(fx, "hmlab0vf2");
    assert_string_equal(member(s2, "state"), "missing");
    assert_non_null(strstr(member(s2, "note"), "no network device 'hmlab0vf2'"));
}

static void test_list_warnings(void **state)
{
    Fx *fx = *state;
    guint status = 0;
    g_autoptr(JsonObject) list = NULL;
    g_autoptr(JsonObject) vf1 = NULL;
    JsonArray *warnings;

    g_hash_table_remove(fx->host->pfs, PF);
    fx->host->domains_fail = TRUE;
    list = call(fx, "GET", "/v1/vfs", NULL, &status);
    assert_int_equal(status, 200);
    assert_int_equal(json_array_get_length(json_object_get_array_member(list, "vfs")), 4);
    warnings = json_object_get_array_member(list, "warnings");
    assert_int_equal(json_array_get_length(warnings), 2);
    assert_non_null(strstr(json_array_get_string_element(warnings, 0), "PF '" PF "'"));
    assert_non_null(strstr(json_array_get_string_element(warnings, 1), "does not answer"));
    /* A VF of that PF is unknown now, and the message says why. */
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"" VF1 "\""), 404,
                 "no PF '" PF "' in sysfs");
}

/* ---- leases --------------------------------------------------------------------------------- */

static void test_lease_by_id(void **state)
{
    Fx *fx = *state;
    g_autofree char *id = lease(fx, LEASE_BODY("\"vf\": \"3B:01.0\""));
    g_autoptr(JsonObject) entry = vf_entry(fx, VF1);
    JsonObject *l = json_object_get_object_member(entry, "lease");

    assert_int_equal(strlen(id), 32);
    assert_string_equal(member(entry, "state"), "leased");
    assert_string_equal(member(l, "id"), id);
    assert_string_equal(member(l, "holder"), "test");
    assert_string_equal(member(l, "domain"), "vm7");
    assert_non_null(member(l, "expires"));
    /* Taken: the second asker is told by whom. */
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"" VF1 "\""), 409,
                 "VF '" VF1 "' is leased by 'test' (unit test) for domain 'vm7' until ");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"0000:3b:07.0\""), 404,
                 "VF '0000:3b:07.0' is not in the pool of test-host");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf9\""), 404,
                 "VF 'hmlab0vf9' is not in the pool");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf2\""), 409,
                 "VF 'hmlab0vf2' is missing: no network device 'hmlab0vf2'");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"a/b\""), 400, "a/b");
    /* A VF plugged by hand into a domain, without a lease. */
    g_hash_table_insert(fx->host->domains, g_strdup(VF2), g_strdup("vm9"));
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"" VF2 "\""), 409,
                 "VF '" VF2 "' is used by domain 'vm9' (plugged without a lease)");
    {
        g_autoptr(JsonObject) e2 = vf_entry(fx, VF2);

        assert_string_equal(member(e2, "state"), "in-use");
        assert_string_equal(member(e2, "assigned_to"), "vm9");
    }
    /* libvirt does not answer: PCI VFs cannot be leased, stand-ins can. */
    fx->host->domains_fail = TRUE;
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"" VF3 "\""), 503,
                 "Cannot tell whether a domain uses VF '" VF3 "': libvirt");
    g_free(lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\"")));
}

static void test_lease_by_model(void **state)
{
    Fx *fx = *state;
    g_autofree char *a = lease(fx, LEASE_BODY("\"vendor_id\": \"0x15b3\", \"device_id\": 4124"));
    g_autofree char *b = lease(fx, LEASE_BODY("\"vendor_id\": 5555, \"device_id\": \"101c\""));
    g_autofree char *c = NULL;
    g_autoptr(JsonObject) e1 = vf_entry(fx, VF1);
    g_autoptr(JsonObject) e2 = vf_entry(fx, VF2);

    /* The first free ones, in pool order. */
    assert_string_equal(member(json_object_get_object_member(e1, "lease"), "id"), a);
    assert_string_equal(member(json_object_get_object_member(e2, "lease"), "id"), b);
    g_hash_table_insert(fx->host->domains, g_strdup(VF3), g_strdup("vm9"));
    expect_error(
        fx, "POST", "/v1/leases", LEASE_BODY("\"vendor_id\": \"15b3\", \"device_id\": \"101c\""),
        409,
        "no free VF 15b3:101c on test-host: the pool has 3 of that model (2 leased, 1 in-use) and 7 VFs in all");
    expect_error(
        fx, "POST", "/v1/leases", LEASE_BODY("\"vendor_id\": \"8086\", \"device_id\": \"1515\""),
        409, "no free VF 8086:1515 on test-host: the pool has none of that model (7 VFs in all)");
    /* Released, it is the one the next model lease gets. */
    {
        guint status = 0;
        g_autofree char *path = g_strdup_printf("/v1/leases/" VF2 "/%s", b);
        g_autoptr(JsonObject) obj = call(fx, "DELETE", path, NULL, &status);

        assert_int_equal(status, 200);
        assert_true(json_object_get_boolean_member(obj, "released"));
    }
    c = lease(fx, LEASE_BODY("\"vendor_id\": \"15b3\", \"device_id\": \"101c\""));
    {
        g_autoptr(JsonObject) again = vf_entry(fx, VF2);

        assert_string_equal(member(json_object_get_object_member(again, "lease"), "id"), c);
    }
}

static void test_confirm_release(void **state)
{
    Fx *fx = *state;
    g_autofree char *id = lease(fx, LEASE_BODY("\"vf\": \"" VF1 "\""));
    g_autofree char *confirm = g_strdup_printf("/v1/leases/" VF1 "/%s/confirm", id);
    g_autofree char *release = g_strdup_printf("/v1/leases/" VF1 "/%s", id);
    g_autofree char *other = g_strdup_printf("/v1/leases/" VF2 "/%s/confirm", id);
    guint status = 0;

    expect_error(fx, "POST", "/v1/leases/" VF1 "/0123456789abcdef0123456789abcdef/confirm", NULL,
                 409, "");
    expect_error(fx, "POST", other, NULL, 409, "");
    expect_error(fx, "POST", "/v1/leases/0000:3b:09.0/x/confirm", NULL, 404, "not in the pool");
    expect_error(fx, "POST", confirm, "{\"force\": true}", 400,
                 "this request takes no body (member 'force')");
    {
        g_autoptr(JsonObject) obj = call(fx, "POST", confirm, NULL, &status);

        assert_int_equal(status, 200);
        assert_string_equal(member(obj, "state"), "assigned");
        assert_true(json_object_get_null_member(obj, "expires"));
    }
    {
        g_autoptr(JsonObject) entry = vf_entry(fx, VF1);

        assert_string_equal(member(entry, "state"), "assigned");
        assert_string_equal(member(entry, "assigned_to"), "vm7");
    }
    /* Confirming twice is harmless; releasing with another id is refused. */
    {
        g_autoptr(JsonObject) obj = call(fx, "POST", confirm, "{}", &status);

        assert_int_equal(status, 200);
    }
    expect_error(fx, "DELETE", "/v1/leases/" VF1 "/0123456789abcdef0123456789abcdef", NULL, 409,
                 "");
    {
        g_autoptr(JsonObject) obj = call(fx, "DELETE", release, NULL, &status);

        assert_int_equal(status, 200);
    }
    {
        g_autoptr(JsonObject) entry = vf_entry(fx, VF1);

        assert_string_equal(member(entry, "state"), "free");
    }
    /* Idempotent, for rollbacks; confirming a released lease is refused. */
    {
        g_autoptr(JsonObject) obj = call(fx, "DELETE", release, NULL, &status);

        assert_int_equal(status, 200);
    }
    expect_error(fx, "POST", confirm, NULL, 409, "");
    expect_error(fx, "DELETE", "/v1/leases/0000:3b:09.0/x", NULL, 404, "not in the pool");
}

/* A new pool on the same lease directory (hotmigd restarted) keeps the confirmed lease. */
static void test_restart_keeps_leases(void **state)
{
    Fx *fx = *state;
    g_autofree char *id = lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\""));
    g_autofree char *confirm = g_strdup_printf("/v1/leases/hmlab0vf1/%s/confirm", id);
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) entry = NULL;
    guint status = 0;

    g_autoptr(JsonObject) obj = call(fx, "POST", confirm, NULL, &status);
    assert_int_equal(status, 200);
    hotmigd_pool_free(fx->pool);
    fx->pool = fx_pool(fx, &error);
    assert_non_null(fx->pool);
    entry = vf_entry(fx, "hmlab0vf1");
    assert_string_equal(member(entry, "state"), "assigned");
    assert_string_equal(member(json_object_get_object_member(entry, "lease"), "id"), id);
    /* While vm7 holds the VF here, nobody else gets it. */
    g_hash_table_insert(fx->host->domains, g_strdup("hmlab0vf1"), g_strdup("vm7"));
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf1\""), 409,
                 "is assigned to domain 'vm7' (holder 'test', reason 'unit test')");
}

/* GET /v1/host's pool counts: "free", "assigned". */
static void host_counts(Fx *fx, gint64 *ret_free, gint64 *ret_assigned)
{
    guint status = 0;
    g_autoptr(JsonObject) host = call(fx, "GET", "/v1/host", NULL, &status);
    JsonObject *pool;

    assert_int_equal(status, 200);
    pool = json_object_get_object_member(host, "pool");
    *ret_free = json_object_get_int_member(pool, "free");
    *ret_assigned = json_object_get_int_member(pool, "assigned");
}

/* A confirmed lease whose domain no longer holds the VF here (destroyed, or migrated away
 * without telling) ends when someone asks for the VF; one whose domain holds it does not.
 * Until then GET /v1/host counts its VF as free (what a lease would get), so that plans made
 * on those counts do not miss it (the soak: a drain refused, "B: 1 VFs needed, 0 free"). */
static void test_stale_assigned_reclaimed(void **state)
{
    Fx *fx = *state;
    g_autofree char *id = lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\""));
    g_autofree char *confirm = g_strdup_printf("/v1/leases/hmlab0vf1/%s/confirm", id);
    g_autofree char *again = NULL;
    guint status = 0;
    g_autoptr(JsonObject) obj = call(fx, "POST", confirm, NULL, &status);
    gint64 free_held, assigned_held, free_stale, assigned_stale;

    assert_int_equal(status, 200);
    g_hash_table_insert(fx->host->domains, g_strdup("hmlab0vf1"), g_strdup("vm7"));
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf1\""), 409,
                 "is assigned to domain 'vm7'");
    host_counts(fx, &free_held, &assigned_held);
    assert_int_equal(assigned_held, 1);
    /* vm7 is gone from this host: its VF counts as free, the lease is still there. */
    g_hash_table_remove(fx->host->domains, "hmlab0vf1");
    host_counts(fx, &free_stale, &assigned_stale);
    assert_int_equal(free_stale, free_held + 1);
    assert_int_equal(assigned_stale, 0);
    {
        g_autoptr(JsonObject) entry = vf_entry(fx, "hmlab0vf1");

        assert_string_equal(member(entry, "state"), "assigned");
    }
    again = lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\""));
    assert_string_not_equal(again, id);
}

/* ---- IB identity, vfio ---------------------------------------------------------------------- */

static void test_ib_identity(void **state)
{
    Fx *fx = *state;
    const char *body =
        "{\"node_guid\": \"0x0002c90300a1b2c3\", \"port_guid\": \"00:02:c9:03:00:a1:b2:c4\"}";
    g_autofree char *id = NULL;
    guint status = 0;

    expect_error(
        fx, "POST", "/v1/vfs/" VF2 "/ib-identity", body, 409,
        "VF '" VF2
        "' is free, not leased: lease it (POST /v1/leases) before setting its IB identity");
    assert_int_equal(fx->host->ib_calls, 0);
    id = lease(fx, LEASE_BODY("\"vf\": \"" VF2 "\""));
    expect_error(fx, "POST", "/v1/vfs/" VF2 "/ib-identity",
                 "{\"node_guid\": \"xyz\", \"port_guid\": \"0x1\"}", 400, "member 'node_guid': ");
    expect_error(fx, "POST", "/v1/vfs/" VF2 "/ib-identity", "{\"node_guid\": \"0x1\"}", 400,
                 "member 'port_guid' is missing");
    expect_error(fx, "POST", "/v1/vfs/" VF2 "/ib-identity",
                 "{\"node_guid\": 1, \"port_guid\": \"0x1\"}", 400,
                 "member 'node_guid' must be a string");
    assert_int_equal(fx->host->ib_calls, 0);
    {
        g_autoptr(JsonObject) obj = call(fx, "POST", "/v1/vfs/" VF2 "/ib-identity", body, &status);

        assert_int_equal(status, 200);
        assert_true(json_object_get_boolean_member(obj, "applied"));
        assert_string_equal(member(obj, "node_guid"), "0002:c903:00a1:b2c3");
        assert_string_equal(member(obj, "port_guid"), "0002:c903:00a1:b2c4");
    }
    assert_int_equal(fx->host->ib_calls, 1);
    assert_string_equal(fx->host->ib_pf_netdev, "ib0");
    assert_int_equal(fx->host->ib_vf_index, 1);
    assert_true(fx->host->ib_node == 0x0002c90300a1b2c3ULL);
    assert_true(fx->host->ib_port == 0x0002c90300a1b2c4ULL);
    /* Not under a running domain. */
    g_hash_table_insert(fx->host->domains, g_strdup(VF2), g_strdup("vm9"));
    expect_error(fx, "POST", "/v1/vfs/" VF2 "/ib-identity", body, 409,
                 "VF '" VF2 "' is in use by domain 'vm9'");
    g_hash_table_remove(fx->host->domains, VF2);
    fx->host->ib_fail = TRUE;
    expect_error(fx, "POST", "/v1/vfs/" VF2 "/ib-identity", body, 500,
                 "Setting node GUID 0002:c903:00a1:b2c3, port GUID 0002:c903:00a1:b2c4 on VF '" VF2
                 "': injected");
    /* A stand-in: nothing to set, said so. */
    g_free(lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\"")));
    {
        g_autoptr(JsonObject) obj =
            call(fx, "POST", "/v1/vfs/hmlab0vf1/ib-identity", body, &status);

        assert_int_equal(status, 200);
        assert_false(json_object_get_boolean_member(obj, "applied"));
        assert_non_null(strstr(member(obj, "note"), "stand-in"));
    }
    assert_int_equal(fx->host->ib_calls, 2);
}

static void test_vfio(void **state)
{
    Fx *fx = *state;
    g_autofree char *id = NULL;
    guint status = 0;

    expect_error(fx, "POST", "/v1/vfs/" VF3 "/vfio", NULL, 409, "not leased");
    expect_error(fx, "POST", "/v1/vfs/0000:3b:0f.0/vfio", NULL, 404, "not in the pool");
    id = lease(fx, LEASE_BODY("\"vf\": \"" VF3 "\""));
    {
        g_autoptr(JsonObject) obj = call(fx, "POST", "/v1/vfs/" VF3 "/vfio", NULL, &status);

        assert_int_equal(status, 200);
        assert_true(json_object_get_boolean_member(obj, "changed"));
        assert_string_equal(member(obj, "driver"), "vfio-pci");
        assert_string_equal(member(obj, "note"), "bound to vfio-pci (was mlx5_core)");
    }
    assert_string_equal(fx->host->vfio_address, VF3);
    {
        g_autoptr(JsonObject) obj = call(fx, "POST", "/v1/vfs/" VF3 "/vfio", "{}", &status);

        assert_int_equal(status, 200);
        assert_false(json_object_get_boolean_member(obj, "changed"));
    }
    g_free(lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\"")));
    {
        g_autoptr(JsonObject) obj = call(fx, "POST", "/v1/vfs/hmlab0vf1/vfio", NULL, &status);

        assert_int_equal(status, 200);
        assert_false(json_object_get_boolean_member(obj, "changed"));
        assert_true(json_object_get_null_member(obj, "driver"));
    }
    assert_int_equal(fx->host->vfio_calls, 2);
}

/* ---- bad requests --------------------------------------------------------------------------- */

/* POST /v1/vfs/VF/left: a domain that migrated away ends its assigned lease, not another's. */
static void test_left(void **state)
{
    Fx *fx = *state;
    guint status = 0;
    g_autofree char *id = lease(fx, LEASE_BODY("\"vf\": \"hmlab0vf1\""));
    g_autofree char *confirm = g_strdup_printf("/v1/leases/hmlab0vf1/%s/confirm", id);
    g_autoptr(JsonObject) obj = NULL;

    /* Not confirmed yet: a migration in flight is left alone. */
    expect_error(fx, "POST", "/v1/vfs/hmlab0vf1/left", "{\"domain\": \"vm7\"}", 409, "leased");
    obj = call(fx, "POST", confirm, NULL, &status);
    assert_int_equal(status, 200);
    expect_error(fx, "POST", "/v1/vfs/hmlab0vf1/left", "{\"domain\": \"other\"}", 409,
                 "not assigned to 'other'");
    expect_error(fx, "POST", "/v1/vfs/hmlab0vf1/left", "{}", 400, "'domain' is missing");
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "POST", "/v1/vfs/hmlab0vf1/left", "{\"domain\": \"vm7\"}", &status);
    assert_int_equal(status, 200);
    /* Free again, and telling twice is harmless. */
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "POST", "/v1/vfs/hmlab0vf1/left", "{\"domain\": \"vm7\"}", &status);
    assert_int_equal(status, 200);
    g_clear_pointer(&obj, json_object_unref);
    obj = vf_entry(fx, "hmlab0vf1");
    assert_string_equal(member(obj, "state"), "free");
}

#define LEASE_FOR(vf, domain)                                                                      \
    "{\"vf\": \"" vf "\", \"holder\": \"test\", \"reason\": \"unit test\", \"domain\": \"" domain   \
    "\"}"
#define GUIDS_BODY "{\"node_guid\": \"0x0002c90300a1b2c3\", \"port_guid\": \"0x0002c90300a1b2c4\"}"

/* The fake host's VF was last given GUIDs of the host's own (not 0002:c903:00a1:b2c3). */
static void assert_home_guids(const FakeHost *host)
{
    assert_true(host->ib_node >> 56 == 0x02);
    assert_true(host->ib_port == (host->ib_node | 1));
    assert_true(host->ib_node != 0x0002c90300a1b2c3ULL);
}

static void leased_with_identity(Fx *fx, const char *vf, const char *domain, char **ret_id)
{
    g_autofree char *body = g_strdup_printf(
        "{\"vf\": \"%s\", \"holder\": \"test\", \"reason\": \"unit test\", \"domain\": \"%s\"}", vf,
        domain);
    g_autofree char *path = g_strdup_printf("/v1/vfs/%s/ib-identity", vf);
    guint status = 0;
    g_autoptr(JsonObject) obj = NULL;

    *ret_id = lease(fx, body);
    obj = call(fx, "POST", path, GUIDS_BODY, &status);
    assert_int_equal(status, 200);
    assert_true(fx->host->ib_node == 0x0002c90300a1b2c3ULL);
}

/* Issue 15 item 5: a VF whose domain left it (migrated away, or a migration in rolled back)
 * does not keep the domain's GUIDs, and a VF still carrying another domain's identity is never
 * leased (so never plugged) before it was reset. */
static void test_identity_reset(void **state)
{
    Fx *fx = *state;
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    g_autoptr(JsonObject) obj = NULL;
    guint status = 0;
    guint calls;

    /* vm7 migrated in onto VF2 (GUIDs given), then migrated away: 'left' resets VF2. */
    leased_with_identity(fx, VF2, "vm7", &id);
    path = g_strdup_printf("/v1/leases/" VF2 "/%s/confirm", id);
    obj = call(fx, "POST", path, NULL, &status);
    assert_int_equal(status, 200);
    calls = fx->host->ib_calls;
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "POST", "/v1/vfs/" VF2 "/left", "{\"domain\": \"vm7\"}", &status);
    assert_int_equal(status, 200);
    assert_int_equal(fx->host->ib_calls, calls + 1);
    assert_int_equal(fx->host->ib_vf_index, 1);
    assert_home_guids(fx->host);
    /* The record is gone with it: vm7's identity is no longer answered from it. */
    expect_error(fx, "GET", "/v1/vfs/" VF2 "/identity/vm7", NULL, 404, "unknown to this host");

    /* A migration in rolled back: the lease released after the GUIDs were set resets them. */
    g_clear_pointer(&id, g_free);
    g_clear_pointer(&path, g_free);
    leased_with_identity(fx, VF3, "vm8", &id);
    calls = fx->host->ib_calls;
    path = g_strdup_printf("/v1/leases/" VF3 "/%s", id);
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "DELETE", path, NULL, &status);
    assert_int_equal(status, 200);
    assert_int_equal(fx->host->ib_calls, calls + 1);
    assert_int_equal(fx->host->ib_vf_index, 2);
    assert_home_guids(fx->host);

    /* The reset fails (netlink says no): the VF is refused to any other domain, not to vm9. */
    g_clear_pointer(&id, g_free);
    g_clear_pointer(&path, g_free);
    leased_with_identity(fx, VF1, "vm9", &id);
    fx->host->ib_fail = TRUE;
    path = g_strdup_printf("/v1/leases/" VF1 "/%s", id);
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "DELETE", path, NULL, &status);
    assert_int_equal(status, 200);
    expect_error(fx, "POST", "/v1/leases", LEASE_FOR(VF1, "vm10"), 409,
                 "VF '" VF1 "' still carries the IB identity of domain 'vm9' and it could not be "
                 "reset: Resetting the IB identity of VF '" VF1 "': injected");
    /* By model: VF1 is passed over (VF2 and VF3 are free and reset). */
    {
        g_autofree char *other = lease(
            fx, "{\"vendor_id\": \"0x15b3\", \"device_id\": 4124, \"holder\": \"test\", "
                "\"reason\": \"unit test\", \"domain\": \"vm10\"}");
        g_autoptr(JsonObject) e = vf_entry(fx, VF1);

        assert_string_equal(member(e, "state"), "free");
    }
    g_free(lease(fx, LEASE_FOR(VF1, "vm9")));
    fx->host->ib_fail = FALSE;

    /* A domain that started here (no lease, no record) leaves LONE: reset too. */
    calls = fx->host->ib_calls;
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "POST", "/v1/vfs/" LONE "/left", "{\"domain\": \"vmL\"}", &status);
    assert_int_equal(status, 200);
    assert_int_equal(fx->host->ib_calls, calls + 1);
    assert_home_guids(fx->host);
    /* ... but never under a domain that uses the VF. */
    g_hash_table_insert(fx->host->domains, g_strdup(LONE), g_strdup("vmX"));
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "POST", "/v1/vfs/" LONE "/left", "{\"domain\": \"vmL\"}", &status);
    assert_int_equal(status, 200);
    assert_int_equal(fx->host->ib_calls, calls + 1);
    g_hash_table_remove(fx->host->domains, LONE);

    /* libvirt does not answer when vmL leaves: recorded, reset at the next lease. */
    fx->host->domains_fail = TRUE;
    g_clear_pointer(&obj, json_object_unref);
    obj = call(fx, "POST", "/v1/vfs/" LONE "/left", "{\"domain\": \"vmL\"}", &status);
    assert_int_equal(status, 200);
    assert_int_equal(fx->host->ib_calls, calls + 1);
    fx->host->domains_fail = FALSE;
    fx->host->ib_node = 0;
    g_free(lease(fx, LEASE_FOR(LONE, "vm11")));
    assert_int_equal(fx->host->ib_calls, calls + 2);
    assert_home_guids(fx->host);
}

/* POST /v1/files: which of the domain's files this host has (for --dry-run). */
static void test_files(void **state)
{
    Fx *fx = *state;
    guint status = 0;
    g_autofree char *body = g_strdup_printf("{\"paths\": [\"/\", \"%s\", \"/nonexistent/x\"]}",
                                            g_get_tmp_dir());
    g_autoptr(JsonObject) obj = call(fx, "POST", "/v1/files", body, &status);
    JsonArray *files;

    assert_int_equal(status, 200);
    files = json_object_get_array_member(obj, "files");
    assert_int_equal(json_array_get_length(files), 3);
    assert_true(json_object_get_boolean_member(json_array_get_object_element(files, 0), "exists"));
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(files, 0), "kind"), "dir");
    assert_false(json_object_get_boolean_member(json_array_get_object_element(files, 2), "exists"));
    expect_error(fx, "POST", "/v1/files", "{}", 400, "'paths' must be an array");
    expect_error(fx, "POST", "/v1/files", "{\"paths\": [\"relative\"]}", 400,
                 "paths[0] must be an absolute path");
    expect_error(fx, "POST", "/v1/files", "{\"paths\": [7]}", 400, "paths[0] must be a string");
    expect_error(fx, "GET", "/v1/files", NULL, 405, "POST");
}

/* POST /v1/files follows no symbolic link under its roots (issue 28, finding 8): a link to any
 * path would tell whether it exists. Before, both links were followed (200, "exists": true). */
static void test_files_no_links(void **state)
{
    Fx *fx = *state;
    guint status = 0;
    g_autofree char *real = g_build_filename(fx->dir, "real", NULL);
    g_autofree char *file = g_build_filename(real, "disk.img", NULL);
    g_autofree char *link = g_build_filename(fx->dir, "link.img", NULL);
    g_autofree char *dirlink = g_build_filename(fx->dir, "dirlink", NULL);
    g_autofree char *body = NULL;
    g_autofree char *via_link = NULL;
    g_autofree char *via_dirlink = NULL;
    g_autofree char *under_file = NULL;
    g_autoptr(JsonObject) obj = NULL;
    JsonArray *files;

    assert_int_equal(g_mkdir(real, 0700), 0);
    assert_true(g_file_set_contents(file, "x", 1, NULL));
    assert_int_equal(symlink(file, link), 0);
    assert_int_equal(symlink(real, dirlink), 0);

    body = g_strdup_printf("{\"paths\": [\"%s\", \"%s/x\"]}", file, file);
    obj = call(fx, "POST", "/v1/files", body, &status);
    assert_int_equal(status, 200);
    files = json_object_get_array_member(obj, "files");
    assert_string_equal(
        json_object_get_string_member(json_array_get_object_element(files, 0), "kind"), "file");
    assert_false(json_object_get_boolean_member(json_array_get_object_element(files, 1), "exists"));

    via_link = g_strdup_printf("{\"paths\": [\"%s\", \"%s\"]}", file, link);
    under_file = g_strdup_printf("paths[1]: '%s' is a symbolic link: hotmigd does not follow", link);
    expect_error(fx, "POST", "/v1/files", via_link, 403, under_file);
    via_dirlink = g_strdup_printf("{\"paths\": [\"%s/disk.img\"]}", dirlink);
    g_free(under_file);
    under_file = g_strdup_printf("paths[0]: '%s' is a symbolic link", dirlink);
    expect_error(fx, "POST", "/v1/files", via_dirlink, 403, under_file);
}

static void test_bad_requests(void **state)
{
    Fx *fx = *state;
    g_autofree char *big = g_strnfill(HOTMIGD_API_MAX_BODY + 1, ' ');
    g_autofree char *deep = g_strdup_printf("{\"vf\": %s1%s}", "[[[[[[", "]]]]]]");
    g_autofree char *long_holder = NULL;
    g_autoptr(GString) huge_holder = g_string_new(NULL);
    static const char bad_utf8[] = "{\"vf\": \"\xff\"}";

    for (guint i = 0; i < 300; i++)
        g_string_append_c(huge_holder, 'h');
    long_holder = g_strdup_printf(
        "{\"vf\": \"hmlab0vf1\", \"holder\": \"%s\", \"reason\": \"r\", \"domain\": \"d\"}",
        huge_holder->str);

    expect_error(fx, "POST", "/v1/leases", "", 400, "give 'vf'");
    expect_error(fx, "POST", "/v1/leases", "{", 400, "the request body is not JSON");
    expect_error(fx, "POST", "/v1/leases", "[1, 2]", 400, "not a JSON object");
    expect_error(fx, "POST", "/v1/leases", "\"vf\"", 400, "not a JSON object");
    expect_error(fx, "POST", "/v1/leases", bad_utf8, 400, "not UTF-8");
    expect_error(fx, "POST", "/v1/leases", big, 413, "more than the limit of 16384");
    expect_error(fx, "POST", "/v1/leases", deep, 400, "nests deeper than");
    expect_error(
        fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf1\", \"force\": 1"), 400,
        "unknown member 'force' (known: vf, vendor_id, device_id, holder, reason, domain, ttl)");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": 7"), 400,
                 "member 'vf' must be a string");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"\""), 400,
                 "member 'vf' must not be empty");
    expect_error(fx, "POST", "/v1/leases",
                 "{\"vf\": \"hmlab0vf1\", \"reason\": \"r\", \"domain\": \"d\"}", 400,
                 "member 'holder' is missing");
    expect_error(fx, "POST", "/v1/leases", long_holder, 400,
                 "member 'holder' is longer than 256 bytes");
    expect_error(
        fx, "POST", "/v1/leases",
        "{\"vf\": \"hmlab0vf1\", \"holder\": \"a\\nb\", \"reason\": \"r\", \"domain\": \"d\"}", 400,
        "member 'holder' contains a control character");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf1\", \"ttl\": 0"), 400,
                 "member 'ttl' must be from 1 to 1800, not 0");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vf\": \"hmlab0vf1\", \"ttl\": \"5\""), 400,
                 "member 'ttl' must be a whole number");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vendor_id\": \"0x15b3\""), 400,
                 "member 'device_id' is missing");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vendor_id\": \"0x1g\", \"device_id\": 1"),
                 400, "member 'vendor_id': '0x1g' is not a hex number from 0x0 to 0xffff");
    expect_error(fx, "POST", "/v1/leases", LEASE_BODY("\"vendor_id\": 70000, \"device_id\": 1"),
                 400, "member 'vendor_id' must be from 0 to 65535, not 70000");
    expect_error(fx, "POST", "/v1/leases",
                 LEASE_BODY("\"vf\": \"hmlab0vf1\", \"vendor_id\": 1, \"device_id\": 1"), 400,
                 "not both");
    expect_error(fx, "GET", "/v1/leases", NULL, 405,
                 "method GET is not allowed on /v1/leases (allowed: POST)");
    expect_error(fx, "DELETE", "/v1/host", NULL, 405, "allowed: GET");
    expect_error(fx, "GET", "/v2/host", NULL, 404, "no API path /v2/host");
    expect_error(fx, "GET", "/v1/vfs/x", NULL, 404, "no API path");
    expect_error(fx, "GET", "/v1//host", NULL, 404, "no API path");
    expect_error(fx, "POST", "/v1/vfs/..%2Fetc/vfio", NULL, 404, "no API path");
    expect_error(fx, "POST", "/v1/vfs/%ff/vfio", NULL, 404, "no API path");
    expect_error(fx, "POST", "/v1/vfs/a%00b/vfio", NULL, 404, "no API path");
    /* Percent-encoding is decoded in ids. */
    expect_error(fx, "POST", "/v1/vfs/0000%3A3b%3A01.0/vfio", NULL, 409,
                 "VF '" VF1 "' is free, not leased");
    /* Nothing was leased by any of these. */
    {
        guint status = 0;
        g_autoptr(JsonObject) host = call(fx, "GET", "/v1/host", NULL, &status);

        assert_int_equal(
            json_object_get_int_member(json_object_get_object_member(host, "pool"), "leased"), 0);
    }
}

/* ---- the real host (hotmigd/host.c) on a fixture tree ---------------------------------- */

static void test_real_host(void **state)
{
    g_autofree char *root = g_build_filename(g_getenv("HM_FIXTURES"), "sysfs", "cx6-ib", NULL);
    gpointer host = hotmigd_host_new(root, "test:///default", 1000, 5000);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) vfs = hotmigd_host_ops.pf_vfs(host, "0001:af:00.1", &error);
    g_autoptr(HotmigdPoolPciVf) vf = NULL;
    g_autoptr(GHashTable) domains = NULL;
    HotmigdPoolPciVf *v;

    assert_non_null(vfs);
    assert_int_equal(vfs->len, 2);
    v = g_ptr_array_index(vfs, 0);
    assert_string_equal(v->address, "0001:af:02.2");
    assert_string_equal(v->pf_address, "0001:af:00.1");
    assert_int_equal(v->vendor_id, 0x15b3);
    assert_int_equal(v->device_id, 0x101c);
    assert_string_equal(v->pf_netdev, "ib1");
    assert_string_equal(v->driver, "mlx5_core");
    vf = hotmigd_host_ops.vf_read(host, "0001:AF:00.3", &error);
    assert_non_null(vf);
    assert_string_equal(vf->pf_netdev, "ib0");
    assert_int_equal(vf->vf_index, 1);
    assert_null(hotmigd_host_ops.pf_vfs(host, "0001:af:00.2", &error));
    assert_non_null(strstr(error->message, "is a VF (of PF '0001:af:00.0'), not a PF"));
    g_clear_error(&error);
    assert_null(hotmigd_host_ops.vf_read(host, "0001:af:00.0", &error));
    assert_non_null(strstr(error->message, "is a PF, not a VF"));
    g_clear_error(&error);
    assert_false(hotmigd_host_ops.netdev_exists(host, "hmt0"));
    domains = hotmigd_host_ops.domains_using(host, &error);
    assert_non_null(domains); /* the test driver's domain has no hostdev */
    assert_int_equal(g_hash_table_size(domains), 0);
    hotmigd_host_ops.free(host);
}

/* The GUID file @kind ("node", "port") of stand-in @netdev under @dir, its line (owned). */
static char *standin_guid_file(const char *dir, const char *netdev, const char *kind)
{
    g_autofree char *path = g_build_filename(dir, netdev, kind, NULL);
    char *text = NULL;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    return g_strchomp(text);
}

/* Issue 29: a stand-in's IB identity goes through the same pool, lease and host path as a PCI
 * VF's, its PF driver being the directory [pool] standin-guids (hotplug/netlink-standin.c):
 * set on a leased IB stand-in, read back for the migration's source, reset to the host's own
 * GUIDs when the domain leaves; a RoCE stand-in (no directory) is left alone and said so;
 * HOTMIG_FAULT_INJECT's netlink_vf_set_guid fails the set. */
static void test_real_host_standin_identity(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-hotmigd-pool-test-XXXXXX", NULL);
    g_autofree char *sys = g_build_filename(dir, "sys", NULL);
    g_autofree char *guids = g_build_filename(dir, "guids", NULL);
    g_autofree char *leases = g_build_filename(dir, "leases", NULL);
    g_autofree char *ib = g_build_filename(guids, "hmlab0vf1", NULL);
    static const char *const standins[] = {"hmlab0vf1", "hmlab0vf2", NULL};
    HotmigdPoolConfig config = {
        .host_name = "test-host", .lease_dir = leases, .lease_ttl_s = 300, .standins = standins};
    g_autoptr(GError) error = NULL;
    g_autofree char *id = NULL;
    g_autofree char *path = NULL;
    g_autofree char *text = NULL;
    gpointer host;
    guint status = 0;
    Fx fx = {0};

    for (guint i = 0; standins[i]; i++) {
        g_autofree char *net = g_build_filename(sys, "class", "net", standins[i], NULL);

        assert_int_equal(g_mkdir_with_parents(net, 0755), 0);
    }
    assert_int_equal(g_mkdir_with_parents(ib, 0755), 0); /* vf1 is IB, vf2 RoCE */
    host = hotmigd_host_new(sys, "test:///default", 1000, 5000);
    hotmigd_host_set_standin_guids(host, guids);
    fx.pool = hotmigd_pool_new(&config, &hotmigd_host_ops, host, &error);
    assert_non_null(fx.pool);

    /* Its driver knows no GUIDs yet: nothing to carry away. */
    expect_error(&fx, "GET", "/v1/vfs/hmlab0vf1/identity/vm7", NULL, 404,
                 "The GUIDs of stand-in 'hmlab0vf1' are unknown to this host: Stand-in "
                 "'hmlab0vf1' has no node GUID");
    id = lease(&fx, LEASE_FOR("hmlab0vf1", "vm7"));
    {
        g_autoptr(JsonObject) obj =
            call(&fx, "POST", "/v1/vfs/hmlab0vf1/ib-identity", GUIDS_BODY, &status);

        assert_int_equal(status, 200);
        assert_true(json_object_get_boolean_member(obj, "applied"));
    }
    text = standin_guid_file(guids, "hmlab0vf1", "node");
    assert_string_equal(text, "00:02:c9:03:00:a1:b2:c3");
    g_free(text);
    text = standin_guid_file(guids, "hmlab0vf1", "port");
    assert_string_equal(text, "00:02:c9:03:00:a1:b2:c4");
    g_clear_pointer(&text, g_free);
    {
        g_autoptr(JsonObject) obj =
            call(&fx, "GET", "/v1/vfs/hmlab0vf1/identity/vm7", NULL, &status);

        assert_int_equal(status, 200);
        assert_string_equal(member(obj, "node_guid"), "0002:c903:00a1:b2c3");
        assert_non_null(strstr(member(obj, "source"), "recorded by hotmigd"));
    }
    /* Another domain is told what the driver holds. */
    {
        g_autoptr(JsonObject) obj =
            call(&fx, "GET", "/v1/vfs/hmlab0vf1/identity/vm8", NULL, &status);

        assert_int_equal(status, 200);
        assert_string_equal(member(obj, "port_guid"), "0002:c903:00a1:b2c4");
        assert_non_null(strstr(member(obj, "source"), "stand-in's PF driver"));
    }
    /* The lease ends (a rolled-back migration in): the VF gets the host's own GUIDs back. */
    path = g_strdup_printf("/v1/leases/hmlab0vf1/%s", id);
    {
        g_autoptr(JsonObject) obj = call(&fx, "DELETE", path, NULL, &status);

        assert_int_equal(status, 200);
    }
    text = standin_guid_file(guids, "hmlab0vf1", "node");
    assert_non_null(text);
    assert_true(g_str_has_prefix(text, "02:"));
    assert_string_not_equal(text, "00:02:c9:03:00:a1:b2:c3");
    g_clear_pointer(&text, g_free);

    /* A RoCE stand-in: the skip rule, said to be a stand-in's; nothing written. */
    g_free(lease(&fx, LEASE_FOR("hmlab0vf2", "vm7")));
    {
        g_autoptr(JsonObject) obj =
            call(&fx, "POST", "/v1/vfs/hmlab0vf2/ib-identity", GUIDS_BODY, &status);

        assert_int_equal(status, 200);
        assert_false(json_object_get_boolean_member(obj, "applied"));
        assert_string_equal(member(obj, "note"),
                            "stand-in 'hmlab0vf2': PF 'hmlab0vf2' is not InfiniBand (link type 1, "
                            "Ethernet): the GUIDs of VF 0 were left as they are");
    }
    text = g_build_filename(guids, "hmlab0vf2", NULL);
    assert_false(g_file_test(text, G_FILE_TEST_EXISTS));
    g_clear_pointer(&text, g_free);
    hotmigd_pool_free(g_steal_pointer(&fx.pool));

    /* Fault injection (a driver that refuses): the set fails, the VF keeps what it had. */
    g_setenv("HOTMIG_FAULT_INJECT", "device_attach@destination,netlink_vf_set_guid", TRUE);
    host = hotmigd_host_new(sys, "test:///default", 1000, 5000);
    hotmigd_host_set_standin_guids(host, guids);
    fx.pool = hotmigd_pool_new(&config, &hotmigd_host_ops, host, &error);
    assert_non_null(fx.pool);
    g_free(lease(&fx, LEASE_FOR("hmlab0vf1", "vm9")));
    text = standin_guid_file(guids, "hmlab0vf1", "node");
    expect_error(&fx, "POST", "/v1/vfs/hmlab0vf1/ib-identity", GUIDS_BODY, 500,
                 "Setting node GUID 0002:c903:00a1:b2c3, port GUID 0002:c903:00a1:b2c4 on VF "
                 "'hmlab0vf1': Giving VF 0 of 'hmlab0vf1' node GUID 0002:c903:00a1:b2c3 and port "
                 "GUID 0002:c903:00a1:b2c4: injected fault: netlink_vf_set_guid on local host "
                 "(call 1)");
    {
        g_autofree char *after = standin_guid_file(guids, "hmlab0vf1", "node");

        assert_string_equal(after, text);
    }
    g_unsetenv("HOTMIG_FAULT_INJECT");
    hotmigd_pool_free(g_steal_pointer(&fx.pool));
    test_dir_remove(dir);
}

/* A libvirtd that accepts and never answers: hotmigd gives up after its deadline. */
static void test_real_host_libvirt_silent(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-hotmigd-pool-test-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "libvirt-sock", NULL);
    g_autofree char *uri = g_strdup_printf("qemu+unix:///system?socket=%s", path);
    g_autoptr(GSocket) sock =
        g_socket_new(G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, NULL);
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
    g_autoptr(GError) error = NULL;
    gpointer host = hotmigd_host_new(dir, uri, 1000, 300);
    gint64 t0 = g_get_monotonic_time();

    assert_true(g_socket_bind(sock, addr, TRUE, NULL));
    assert_true(g_socket_listen(sock, NULL));
    assert_null(hotmigd_host_ops.domains_using(host, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE));
    assert_non_null(strstr(error->message, "did not list its domains within 300 ms"));
    assert_true(g_get_monotonic_time() - t0 < 5 * G_TIME_SPAN_SECOND);
    hotmigd_host_ops.free(host);
    g_unlink(path);
    g_rmdir(dir);
}

/* ---- a libvirt that hangs (issue 15, item 7) ------------------------------------------------ */

/* A hypervisor adapter whose domain listing blocks until the test lets it go. */
static struct {
    GMutex lock;
    GCond cond;
    gboolean hang;
    gint opens;
    gint lists;
    GThread *thread;    /* the last thread that listed the domains */
    GMainContext *wake; /* woken at each listing (NULL: none) */
} hang;

static GPtrArray *hang_domain_list_xml(OrchVirt *virt, GError **error)
{
    g_mutex_lock(&hang.lock);
    g_atomic_int_inc(&hang.lists);
    hang.thread = g_thread_self();
    g_cond_broadcast(&hang.cond);
    if (hang.wake)
        g_main_context_wakeup(hang.wake);
    while (hang.hang)
        g_cond_wait(&hang.cond, &hang.lock);
    g_mutex_unlock(&hang.lock);
    return g_ptr_array_new_with_free_func(g_free);
}

/* Waits (10 s at most) until the domains were listed @n times. */
static gboolean hang_wait_lists(gint n)
{
    gint64 deadline = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;
    gboolean ok;

    g_mutex_lock(&hang.lock);
    while (g_atomic_int_get(&hang.lists) < n && g_cond_wait_until(&hang.cond, &hang.lock, deadline))
        ;
    ok = g_atomic_int_get(&hang.lists) >= n;
    g_mutex_unlock(&hang.lock);
    return ok;
}

static gboolean hang_held(void)
{
    gboolean held;

    g_mutex_lock(&hang.lock);
    held = hang.hang;
    g_mutex_unlock(&hang.lock);
    return held;
}

static void hang_free(OrchVirt *virt)
{
    orch_virt_clear(virt);
    g_free(virt);
}

static const OrchVirtOps hang_ops = {
    .domain_list_xml = hang_domain_list_xml,
    .free = hang_free,
};

static OrchVirt *hang_open(const char *uri, const char *label, gpointer opaque, GError **error)
{
    OrchVirt *virt = g_new0(OrchVirt, 1);

    g_atomic_int_inc(&hang.opens);
    orch_virt_init(virt, &hang_ops, uri, label);
    return virt;
}

static void hang_release(void)
{
    g_mutex_lock(&hang.lock);
    hang.hang = FALSE;
    g_cond_broadcast(&hang.cond);
    g_mutex_unlock(&hang.lock);
}

static guint thread_count(void)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/self/task", 0, NULL);
    guint n = 0;

    assert_non_null(dir);
    while (g_dir_read_name(dir))
        n++;
    return n;
}

typedef struct {
    guint replies;
    guint status[600];
    guint busy; /* 503s for a full queue */
} Replies;

static void replies_keep(HotmigdApiReply *reply, gpointer data)
{
    Replies *r = data;

    r->status[reply->status]++;
    if (reply->status == 503 && strstr(reply->body, "pool requests waiting"))
        r->busy++;
    r->replies++;
    hotmigd_api_reply_free(reply);
}

static JsonNode *local_status(gpointer owner, const char *id, GError **error)
{
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);

    json_node_take_object(node, json_object_new());
    return node;
}

typedef struct {
    const char *path;
    gboolean done;
    JsonNode *answer;
    char *error;
    gint64 took_us;
} LocalCall;

static gpointer local_call_thread(gpointer data)
{
    LocalCall *call = data;
    g_autoptr(GError) error = NULL;
    gint64 t0 = g_get_monotonic_time();

    /* The 1 s timeout is the test's bound: the main loop must serve the local API meanwhile. */
    call->answer = orch_local_call(call->path, "status", NULL, 1, NULL, NULL, &error);
    call->took_us = g_get_monotonic_time() - t0;
    if (error)
        call->error = g_strdup(error->message);
    g_atomic_int_set(&call->done, TRUE);
    g_main_context_wakeup(NULL);
    return NULL;
}

/* libvirt accepts the question and never answers: 50 pool requests while it hangs. The pool's
 * requests wait on one worker thread, libvirt is asked by one thread over one connection, the
 * main loop (here: the local API) answers at once, and a queue longer than its bound is refused. */
static void test_libvirt_hangs(void **state)
{
    static const char *const pfs[] = {"0001:af:00.1", NULL};
    static const HotmigdLocalApiOps local_ops = {.status = local_status};
    g_autofree char *root = g_build_filename(g_getenv("HM_FIXTURES"), "sysfs", "cx6-ib", NULL);
    g_autofree char *dir = g_dir_make_tmp("hm-hotmigd-pool-test-XXXXXX", NULL);
    g_autofree char *leases = g_build_filename(dir, "leases", NULL);
    g_autofree char *sock = g_build_filename(dir, "hotmigd.sock", NULL);
    HotmigdPoolConfig config = {.host_name = "test-host", .lease_dir = leases, .pfs = pfs};
    gpointer host = hotmigd_host_new(root, "test:///hangs", 1000, 200);
    g_autoptr(GError) error = NULL;
    g_autoptr(HotmigdPool) pool = NULL;
    g_autoptr(HotmigdLocalApi) local = NULL;
    g_autoptr(HotmigdAuthzClient) who =
        hotmigd_authz_client_new("test", "test", HOTMIGD_ROLE_HOST | HOTMIGD_ROLE_OPERATOR);
    HotmigdApi api = {0};
    Replies r = {0};
    LocalCall call = {0};
    GThread *caller;
    guint before, during;
    /* A context of the test's own, not the global default: an earlier test's real libvirt
     * adapter left libvirt's event thread iterating the default context, which would dispatch
     * the replies there while this thread sleeps in its own iteration. */
    GMainContext *ctx = g_main_context_new();

    g_main_context_push_thread_default(ctx);
    hang.hang = TRUE;
    hang.opens = hang.lists = 0;
    hotmigd_host_set_virt_open(host, hang_open);
    pool = hotmigd_pool_new(&config, &hotmigd_host_ops, host, &error);
    assert_non_null(pool);
    local = hotmigd_local_api_new(&local_ops, NULL, sock, &error);
    assert_non_null(local);
    api.pool = pool;
    api.worker = hotmigd_api_worker_new(40);
    before = thread_count();

    for (guint i = 0; i < 50; i++) {
        static const char lease_body[] =
            "{\"vendor_id\": \"0x15b3\", \"device_id\": \"0x101c\", \"holder\": \"test\", "
            "\"reason\": \"unit test\", \"domain\": \"vm7\"}";
        gboolean get = i % 2 == 0;
        HotmigdApiRequest req = {.method = get ? "GET" : "POST",
                                 .path = get ? "/v1/vfs" : "/v1/leases",
                                 .body = get ? NULL : lease_body,
                                 .len = get ? 0 : strlen(lease_body),
                                 .who = who};

        hotmigd_api_dispatch(&api, &req, replies_keep, &r);
    }
    /* Beyond the queue's bound: refused at once, not queued. */
    assert_int_equal(r.replies, 10);
    assert_int_equal(r.busy, 10);

    /* The local API answers while 40 requests wait for libvirt. */
    call.path = sock;
    caller = g_thread_new("local-call", local_call_thread, &call);
    while (!g_atomic_int_get(&call.done))
        g_main_context_iteration(ctx, TRUE);
    g_thread_join(caller);
    if (!call.answer)
        fail_msg("the local API did not answer while libvirt hangs: %s", call.error);
    json_node_unref(call.answer);
    g_printerr("# local API answered in %" G_GINT64_FORMAT " ms with %u pool requests waiting\n",
               call.took_us / 1000, hotmigd_api_worker_queued(api.worker));

    /* Every request is answered: the first waits libvirt's 200 ms, the others are told at once
     * that libvirt has not answered; one thread and one connection to libvirt in all. */
    while (r.replies < 50)
        g_main_context_iteration(ctx, TRUE);
    during = thread_count();
    if (during > before + 1)
        fail_msg("%u threads after 50 pool requests, %u before", during, before);
    assert_int_equal(g_atomic_int_get(&hang.opens), 1);
    assert_int_equal(g_atomic_int_get(&hang.lists), 1);
    assert_int_equal(r.status[200], 20); /* GET /v1/vfs: listed, with a warning */
    assert_int_equal(r.status[503], 30); /* leases: which VF a domain uses is unknown */

    /* libvirt answers again: the same connection serves the next question. */
    hang_release();
    {
        HotmigdApiRequest req = {.method = "GET", .path = "/v1/vfs", .who = who};

        r.replies = 0;
        memset(r.status, 0, sizeof r.status);
        hotmigd_api_dispatch(&api, &req, replies_keep, &r);
        while (r.replies < 1)
            g_main_context_iteration(ctx, TRUE);
        assert_int_equal(r.status[200], 1);
    }
    assert_int_equal(g_atomic_int_get(&hang.opens), 1);
    hotmigd_api_worker_free(api.worker);
    g_clear_pointer(&local, hotmigd_local_api_free);
    g_clear_pointer(&pool, hotmigd_pool_free);
    test_dir_remove(dir);
    g_main_context_pop_thread_default(ctx);
    g_main_context_unref(ctx);
}

/* ---- /metrics: the VF counts on the pool's worker thread --------------------------------- */

/* The daemon's /metrics as hotmigd/alerts-hook.c wires it: the alert listener, the alert book,
 * the VF counts from the pool's worker (hotmigd_api_worker_count_vfs()). */
typedef struct {
    char *dir;
    GMainContext *ctx; /* the test's own: see test_libvirt_hangs() */
    HotmigdPool *pool;
    HotmigdApiWorker *worker;
    HotmigdAlerts *alerts;
    OrchAlertListener *listener;
} Mx;

static void mx_vfs(gpointer data, HotmigdApiCountsFunc done, gpointer done_data)
{
    Mx *mx = data;

    hotmigd_api_worker_count_vfs(mx->worker, mx->pool, done, done_data);
}

static const HotmigdAlertsOps mx_alerts_ops = {.vfs = mx_vfs};

static gboolean mx_authorized(gpointer owner, const char *authorization, char **ret_why)
{
    *ret_why = g_strdup("no token in this test");
    return FALSE;
}

static void mx_webhook(gpointer owner, const char *body, gsize len, const char *peer,
                       HotmigdApiReplyFunc done, gpointer data)
{
    fail_msg("no webhook body gets past the token");
}

static void mx_metrics(gpointer owner, HotmigdMetricsDone done, gpointer data)
{
    hotmigd_alerts_metrics(owner, done, data);
}

static const OrchAlertListenerOps mx_listener_ops = {
    .authorized = mx_authorized,
    .webhook = mx_webhook,
    .metrics = mx_metrics,
    .metrics_content_type = HOTMIGD_METRICS_CONTENT_TYPE,
    .webhook_max_bytes = 1024,
};

/* A pool over @host (taken) and @ops, its worker (@max_queued), the alert book and listener,
 * on a context of the test's own. */
static Mx *mx_new(const HotmigdHostOps *ops, gpointer host, const char *const *pfs,
                  guint max_queued)
{
    static const char conf[] = "[alerts]\nport = 0\n";
    Mx *mx = g_new0(Mx, 1);
    g_autofree char *leases = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = hm_config_load_data(conf, strlen(conf), "test.conf", &error);
    HotmigdPoolConfig config_pool = {.host_name = "test-host", .pfs = pfs};

    assert_non_null(config);
    mx->ctx = g_main_context_new();
    g_main_context_push_thread_default(mx->ctx);
    mx->dir = g_dir_make_tmp("hm-hotmigd-pool-test-XXXXXX", NULL);
    leases = g_build_filename(mx->dir, "leases", NULL);
    config_pool.lease_dir = leases;
    mx->pool = hotmigd_pool_new(&config_pool, ops, host, &error);
    assert_non_null(mx->pool);
    mx->worker = hotmigd_api_worker_new(max_queued);
    mx->alerts = hotmigd_alerts_new(config, "test-host", &mx_alerts_ops, mx, &error);
    assert_non_null(mx->alerts);
    mx->listener =
        orch_alert_listener_new("127.0.0.1", 0, NULL, &mx_listener_ops, mx->alerts, &error);
    assert_non_null(mx->listener);
    return mx;
}

/* In hotmigd's order: the hook (listener, book) first, then the server's worker (it delivers
 * what is left), then the pool. */
static void mx_free(Mx *mx)
{
    g_clear_pointer(&mx->listener, orch_alert_listener_free);
    g_clear_pointer(&mx->alerts, hotmigd_alerts_unref);
    g_clear_pointer(&mx->worker, hotmigd_api_worker_free);
    g_clear_pointer(&mx->pool, hotmigd_pool_free);
    test_dir_remove(mx->dir);
    g_free(mx->dir);
    g_main_context_pop_thread_default(mx->ctx);
    g_main_context_unref(mx->ctx);
    g_free(mx);
}

/* One plain-HTTP request from a thread of its own (the test's thread runs the main loop). */
typedef struct {
    guint port;
    const char *path;
    gint wait_lists;  /* first wait until libvirt was asked this many times (0: do not) */
    gboolean hangup;  /* close after sending the request, read nothing */
    gboolean release; /* at the end, let libvirt answer */
    GMainContext *wake;
    /* what happened */
    gint done;
    guint status;  /* 0: no answer */
    char *answer;  /* headers and body */
    gboolean held; /* libvirt still hung when the answer came */
    char *error;
} Http;

static gpointer http_thread(gpointer data)
{
    Http *h = data;
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketConnection) conn = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) answer = g_string_new(NULL);
    g_autofree char *request =
        g_strdup_printf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", h->path);
    char buf[4096];
    gssize n = 0;

    if (h->wait_lists && !hang_wait_lists(h->wait_lists))
        g_set_error(&error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT, "libvirt was not asked");
    /* The test's bound: the main loop must serve the listener meanwhile. */
    g_socket_client_set_timeout(client, 5);
    if (!error)
        conn = g_socket_client_connect_to_host(client, "127.0.0.1", h->port, NULL, &error);
    if (conn &&
        g_output_stream_write_all(g_io_stream_get_output_stream(G_IO_STREAM(conn)), request,
                                  strlen(request), NULL, NULL, &error) &&
        !h->hangup) {
        while ((n = g_input_stream_read(g_io_stream_get_input_stream(G_IO_STREAM(conn)), buf,
                                        sizeof buf, NULL, &error)) > 0)
            g_string_append_len(answer, buf, n);
    }
    h->held = hang_held();
    if (conn)
        g_io_stream_close(G_IO_STREAM(conn), NULL, NULL);
    if (error)
        h->error = g_strdup(error->message);
    if (sscanf(answer->str, "HTTP/1.1 %u ", &h->status) != 1)
        h->status = 0;
    h->answer = g_string_free(g_steal_pointer(&answer), FALSE);
    if (h->release)
        hang_release();
    g_atomic_int_set(&h->done, TRUE);
    g_main_context_wakeup(h->wake);
    return NULL;
}

static GThread *http_start(Http *h, Mx *mx, const char *path)
{
    h->port = orch_alert_listener_get_port(mx->listener);
    h->path = path;
    h->wake = mx->ctx;
    return g_thread_new("http", http_thread, h);
}

static void http_clear(Http *h)
{
    g_free(h->answer);
    g_free(h->error);
}

/* /metrics answers with the pool's VF counts, counted on the worker's thread: the host is
 * never called from the main loop's. */
static void test_metrics_vf_counts(void **state)
{
    static const char *const pfs[] = {PF, NULL};
    FakeHost *host = fake_host_new();
    Mx *mx;
    Http h = {0};
    GThread *t;

    fake_host_add_pf(host, PF, 3, 0x15b3, 0x101c);
    g_hash_table_insert(host->domains, g_strdup(VF2), g_strdup("vm7"));
    mx = mx_new(&fake_host_ops, host, pfs, 0);
    host->main_thread = g_thread_self();
    g_atomic_int_set(&host->calls, 0);

    t = http_start(&h, mx, "/metrics");
    while (!g_atomic_int_get(&h.done))
        g_main_context_iteration(mx->ctx, TRUE);
    g_thread_join(t);
    if (h.status != 200)
        fail_msg("GET /metrics: %s %s", h.error ? h.error : "", h.answer);
    assert_non_null(strstr(h.answer, "\r\nContent-Type: " HOTMIGD_METRICS_CONTENT_TYPE "\r\n"));
    assert_non_null(strstr(h.answer, "\nhotmig_vf_leases{state=\"free\"} 2\n"));
    assert_non_null(strstr(h.answer, "\nhotmig_vf_leases{state=\"in-use\"} 1\n"));
    assert_non_null(strstr(h.answer, "\nhotmig_alerts_total{action=\"evacuate\"} 0\n"));
    assert_null(strstr(h.answer, "left out"));
    assert_true(g_atomic_int_get(&host->calls) > 0);
    assert_int_equal(g_atomic_int_get(&host->main_thread_calls), 0);
    assert_int_equal(hotmigd_api_worker_queued(mx->worker), 0);
    http_clear(&h);
    mx_free(mx);
}

/* A pool over the real host adapter whose libvirt hangs until the test lets it go (the host's
 * own timeout, 60 s, is out of reach). */
static Mx *mx_new_hanging(guint max_queued)
{
    static const char *const pfs[] = {"0001:af:00.1", NULL};
    g_autofree char *root = g_build_filename(g_getenv("HM_FIXTURES"), "sysfs", "cx6-ib", NULL);
    gpointer host = hotmigd_host_new(root, "test:///hangs", 1000, 60000);
    Mx *mx;

    hang.hang = TRUE;
    g_atomic_int_set(&hang.opens, 0);
    g_atomic_int_set(&hang.lists, 0);
    hang.thread = NULL;
    hotmigd_host_set_virt_open(host, hang_open);
    mx = mx_new(&hotmigd_host_ops, host, pfs, max_queued);
    hang.wake = mx->ctx;
    return mx;
}

static void mx_free_hanging(Mx *mx)
{
    hang_release();
    hang.wake = NULL;
    mx_free(mx);
}

/* libvirt hangs while /metrics counts the VFs: the listener still answers (another request),
 * /metrics waits for the count without holding the main loop, and libvirt is asked from the
 * worker's thread. On the main loop, the count would hold the loop until libvirt's timeout:
 * the other request's answer would come only after libvirt was let go. */
static void test_metrics_host_hangs(void **state)
{
    Mx *mx = mx_new_hanging(0);
    Http metrics = {0};
    Http other = {.wait_lists = 1, .release = TRUE};
    GThread *t1, *t2;

    t1 = http_start(&metrics, mx, "/metrics");
    t2 = http_start(&other, mx, "/nothing-here");
    while (!g_atomic_int_get(&metrics.done) || !g_atomic_int_get(&other.done))
        g_main_context_iteration(mx->ctx, TRUE);
    g_thread_join(t1);
    g_thread_join(t2);
    if (other.status != 404 || !other.held)
        fail_msg("the alert listener did not answer while libvirt hung (%u, %s): %s", other.status,
                 other.held ? "still hung" : "after libvirt was let go",
                 other.error ? other.error : other.answer);
    assert_true(hang.thread != NULL);
    if (hang.thread == g_thread_self())
        fail_msg("libvirt was asked from the main loop's thread");
    if (metrics.status != 200)
        fail_msg("GET /metrics: %s %s", metrics.error ? metrics.error : "", metrics.answer);
    assert_false(metrics.held); /* it waited for the count */
    assert_non_null(strstr(metrics.answer, "\nhotmig_vf_leases{state=\"free\"} "));
    assert_int_equal(g_atomic_int_get(&hang.lists), 1);
    http_clear(&metrics);
    http_clear(&other);
    mx_free_hanging(mx);
}

static void replies_count(HotmigdApiReply *reply, gpointer data)
{
    (*(guint *)data)++;
    hotmigd_api_reply_free(reply);
}

/* The worker's queue is full (its one place taken by a request waiting for libvirt): /metrics
 * answers at once with everything but the VF gauges, and says why in a comment. */
static void test_metrics_worker_full(void **state)
{
    Mx *mx = mx_new_hanging(1);
    g_autoptr(HotmigdAuthzClient) who = hotmigd_authz_client_new("test", "test", HOTMIGD_ROLE_HOST);
    HotmigdApi api = {.pool = mx->pool, .worker = mx->worker};
    HotmigdApiRequest req = {.method = "GET", .path = "/v1/vfs", .who = who};
    Http h = {0};
    guint replies = 0;
    GThread *t;

    hotmigd_api_dispatch(&api, &req, replies_count, &replies);
    assert_int_equal(hotmigd_api_worker_queued(mx->worker), 1);
    t = http_start(&h, mx, "/metrics");
    while (!g_atomic_int_get(&h.done))
        g_main_context_iteration(mx->ctx, TRUE);
    g_thread_join(t);
    if (h.status != 200)
        fail_msg("GET /metrics: %s %s", h.error ? h.error : "", h.answer);
    assert_true(h.held);
    assert_non_null(strstr(
        h.answer,
        "\n# TYPE hotmig_vf_leases gauge\n# hotmig_vf_leases left out: not counted: 1 pool requests are waiting (the host is slow to answer, libvirt maybe)\n# HELP hotmig_hosts "));
    assert_null(strstr(h.answer, "hotmig_vf_leases{"));
    assert_non_null(strstr(h.answer, "\nhotmig_migrations_total{result=\"ok\"} 0\n"));
    hang_release();
    while (replies < 1)
        g_main_context_iteration(mx->ctx, TRUE);
    http_clear(&h);
    mx_free_hanging(mx);
}

/* Clients that go before their answer: one closes its connection while the count waits for
 * libvirt, another is cut off when the listener stops (hotmigd's stop: the hook goes before
 * the worker delivers its last count). Nothing is answered into freed memory (ASan). */
static void test_metrics_client_gone(void **state)
{
    Mx *mx = mx_new_hanging(0);
    Http gone = {.hangup = TRUE};
    Http again = {0};
    Http cut = {0};
    GThread *t;
    gint lists;

    t = http_start(&gone, mx, "/metrics");
    while (g_atomic_int_get(&hang.lists) < 1 || !g_atomic_int_get(&gone.done))
        g_main_context_iteration(mx->ctx, TRUE);
    g_thread_join(t);
    /* libvirt answers: the count comes back for a client that is gone. */
    hang_release();
    while (hotmigd_api_worker_queued(mx->worker) > 0)
        g_main_context_iteration(mx->ctx, TRUE);
    t = http_start(&again, mx, "/metrics");
    while (!g_atomic_int_get(&again.done))
        g_main_context_iteration(mx->ctx, TRUE);
    g_thread_join(t);
    assert_int_equal(again.status, 200);
    assert_non_null(strstr(again.answer, "\nhotmig_vf_leases{state=\"free\"} "));

    /* libvirt hangs again; the listener and the book stop while a count waits. */
    g_mutex_lock(&hang.lock);
    hang.hang = TRUE;
    g_mutex_unlock(&hang.lock);
    lists = g_atomic_int_get(&hang.lists);
    t = http_start(&cut, mx, "/metrics");
    while (g_atomic_int_get(&hang.lists) <= lists)
        g_main_context_iteration(mx->ctx, TRUE);
    g_clear_pointer(&mx->listener, orch_alert_listener_free);
    g_clear_pointer(&mx->alerts, hotmigd_alerts_unref);
    g_thread_join(t);
    assert_int_equal(cut.status, 0);
    http_clear(&gone);
    http_clear(&again);
    http_clear(&cut);
    mx_free_hanging(mx); /* the worker delivers the count into the void */
}

/* A client of @port that sent the first lines of a request's headers and nothing more. */
static GSocket *slow_client(guint port)
{
    static const char start[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    g_autoptr(GInetAddress) lo = g_inet_address_new_loopback(G_SOCKET_FAMILY_IPV4);
    g_autoptr(GSocketAddress) addr = g_inet_socket_address_new(lo, port);
    g_autoptr(GError) error = NULL;
    GSocket *sock =
        g_socket_new(G_SOCKET_FAMILY_IPV4, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_TCP, &error);

    assert_non_null(sock);
    if (!g_socket_connect(sock, addr, NULL, &error) ||
        g_socket_send(sock, start, strlen(start), NULL, &error) != (gssize)strlen(start))
        fail_msg("a slow client: %s", error ? error->message : "short write");
    g_socket_set_blocking(sock, FALSE);
    return sock;
}

/* Did the listener close @sock (end of file or reset)? */
static gboolean slow_client_closed(GSocket *sock)
{
    g_autoptr(GError) error = NULL;
    char buf[512];
    gssize n;

    while ((n = g_socket_receive(sock, buf, sizeof buf, NULL, &error)) > 0)
        ;
    return n == 0 || !g_error_matches(error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK);
}

static gboolean spin_tick(gpointer data)
{
    return G_SOURCE_CONTINUE;
}

/* Runs @ctx for @ms milliseconds. */
static void spin(GMainContext *ctx, guint ms)
{
    gint64 end = g_get_monotonic_time() + ms * G_TIME_SPAN_MILLISECOND;
    GSource *tick = g_timeout_source_new(10);

    g_source_set_callback(tick, spin_tick, NULL, NULL);
    g_source_attach(tick, ctx);
    while (g_get_monotonic_time() < end)
        g_main_context_iteration(ctx, TRUE);
    g_source_destroy(tick);
    g_source_unref(tick);
}

/* The alert listener (plain HTTP, /metrics too; off loopback anyone may connect) has the HTTPS
 * server's limits (issue 28, finding 7): at most max-connections at once, a newcomer closing
 * the oldest that has not sent a request, and a client that does not finish its request within
 * the handshake timeout is closed. Before, the seven slow clients stayed open for ever. */
static void test_listener_limits(void **state)
{
    static const char *const pfs[] = {PF, NULL};
    static const OrchServerLimits limits = {.max_connections = 4, .handshake_timeout_s = 3};
    FakeHost *host = fake_host_new();
    g_autoptr(GError) error = NULL;
    GSocket *slow[7];
    gint64 opened;
    guint closed = 0;
    Http h = {0};
    GThread *t;
    Mx *mx;

    fake_host_add_pf(host, PF, 3, 0x15b3, 0x101c);
    mx = mx_new(&fake_host_ops, host, pfs, 0);
    g_clear_pointer(&mx->listener, orch_alert_listener_free);
    mx->listener =
        orch_alert_listener_new("127.0.0.1", 0, &limits, &mx_listener_ops, mx->alerts, &error);
    assert_non_null(mx->listener);

    for (guint i = 0; i < G_N_ELEMENTS(slow); i++) {
        slow[i] = slow_client(orch_alert_listener_get_port(mx->listener));
        spin(mx->ctx, 50); /* the listener sees them in this order */
    }
    opened = g_get_monotonic_time();
    spin(mx->ctx, 200);
    for (guint i = 0; i < G_N_ELEMENTS(slow); i++)
        closed += slow_client_closed(slow[i]);
    if (closed != G_N_ELEMENTS(slow) - limits.max_connections)
        fail_msg("%u of 7 slow clients closed at a limit of 4 connections", closed);
    for (guint i = 0; i < 3; i++)
        assert_true(slow_client_closed(slow[i])); /* the oldest made room */

    /* A real client still gets its answer (the oldest slow one left makes room). */
    t = http_start(&h, mx, "/metrics");
    while (!g_atomic_int_get(&h.done))
        g_main_context_iteration(mx->ctx, TRUE);
    g_thread_join(t);
    if (h.status != 200)
        fail_msg("GET /metrics beside slow clients: %s %s", h.error ? h.error : "", h.answer);
    assert_true(slow_client_closed(slow[3]));

    /* The others are closed by the handshake timeout (3 s), not before. */
    assert_false(slow_client_closed(slow[6]));
    while ((!slow_client_closed(slow[4]) || !slow_client_closed(slow[5]) ||
            !slow_client_closed(slow[6])) &&
           g_get_monotonic_time() - opened < 10 * G_TIME_SPAN_SECOND)
        spin(mx->ctx, 100);
    for (guint i = 4; i < G_N_ELEMENTS(slow); i++)
        if (!slow_client_closed(slow[i]))
            fail_msg("slow client %u still open 10 s later (handshake timeout 3 s)", i + 1);
    assert_true(g_get_monotonic_time() - opened > 2 * G_TIME_SPAN_SECOND);

    for (guint i = 0; i < G_N_ELEMENTS(slow); i++)
        g_object_unref(slow[i]);
    http_clear(&h);
    mx_free(mx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test_setup_teardown(test_host_and_list, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_list_warnings, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_lease_by_id, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_lease_by_model, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_confirm_release, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_restart_keeps_leases, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_ib_identity, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_vfio, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_files, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_files_no_links, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_left, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_identity_reset, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_stale_assigned_reclaimed, fx_setup, fx_teardown),
        cmocka_unit_test(test_real_host),
        cmocka_unit_test(test_real_host_standin_identity),
        cmocka_unit_test(test_real_host_libvirt_silent),
        cmocka_unit_test(test_libvirt_hangs),
        cmocka_unit_test(test_metrics_vf_counts),
        cmocka_unit_test(test_metrics_host_hangs),
        cmocka_unit_test(test_metrics_worker_full),
        cmocka_unit_test(test_metrics_client_gone),
        cmocka_unit_test(test_listener_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
