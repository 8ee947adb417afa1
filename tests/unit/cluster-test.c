/* The cluster side of hotmigd without hosts: the inventory over fake hypervisor adapters and a
 * fake hotmigd client (host states, CPU demand from two samples, VFs from the XML, a VM seen on
 * two hosts), its snapshot export read back by the offline planner's parser, and the scheduler
 * runner with a fake migrate function (limits never exceeded, failures and skips reported,
 * remote moves asked of their source host's hotmigd). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <json-glib/json-glib.h>

#include "engine/hotmigd-client.h"
#include "engine/plan-json.h"
#include "engine/snapshot.h"
#include "engine/virt.h"
#include "fake-agent-channel.h"
#include "hotmigd/inventory.h"
#include "hotmigd/run.h"

/* ---- a fake cluster ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    guint vcpus;
    guint64 memory_mib;
    double util; /* what its cpuTime grows by */
    guint hostdevs;
    guint standins;
    gboolean paused;
    const char *job; /* in its XML's metadata, or NULL */
    /* Its agent: NULL: no agent channel in its XML; "disconnected": the channel, no agent on
     * it; else the channel connected, and the "processes" (JSON) its agent's inventory lists. */
    const char *agent;
    gboolean agent_held; /* another client (a migration) holds the channel */
} FakeDom;

typedef struct {
    const char *name;
    gboolean libvirt_down;
    gboolean hotmigd_down;    /* connections to its hotmigd are refused */
    gboolean hotmigd_refuses; /* its hotmigd takes the connection, then fails (TLS, 503) */
    guint cpus;
    guint64 memory_mib;
    guint pool, free, missing;
    FakeDom doms[4];
} FakeHost;

typedef struct {
    FakeHost hosts[4];
    guint n_hosts;
    gint64 t0;
    guint list_calls;
    GPtrArray *channel_opens; /* "HOST/DOMAIN" of each channel opened (not forced) */
} FakeCluster;

static FakeCluster *cluster_now; /* the fakes' world (tests run one at a time) */

static FakeHost *find_host(const char *uri)
{
    for (guint i = 0; i < cluster_now->n_hosts; i++) {
        g_autofree char *want = g_strdup_printf("test:///%s", cluster_now->hosts[i].name);

        if (g_str_equal(want, uri))
            return &cluster_now->hosts[i];
    }
    return NULL;
}

typedef struct {
    OrchVirt parent;
    FakeHost *host;
} FakeVirt;

static char *dom_xml(const FakeDom *d)
{
    g_autoptr(GString) xml = g_string_new(NULL);

    g_string_append_printf(xml, "<domain type='kvm'><name>%s</name>", d->name);
    if (d->job)
        g_string_append_printf(
            xml, "<metadata><hm:job xmlns:hm='urn:hotmig:1'>%s</hm:job></metadata>", d->job);
    g_string_append(xml, "<devices>");
    for (guint i = 0; i < d->hostdevs; i++)
        g_string_append_printf(
            xml,
            "<hostdev mode='subsystem' type='pci' managed='yes'><source><address domain='0x0000' "
            "bus='0x3b' slot='0x02' function='0x%x'/></source><alias name='hostdev%u'/></hostdev>",
            i + 1, i);
    for (guint i = 0; i < d->standins; i++)
        g_string_append_printf(xml,
                               "<interface type='ethernet'><target dev='tap%u' managed='no'/>"
                               "<model type='virtio'/><alias name='ua-hmvf%u'/></interface>",
                               i, i);
    /* A NIC that is not a VF. */
    g_string_append(xml, "<interface type='network'><source network='default'/>"
                         "<alias name='net0'/></interface>");
    if (d->agent)
        g_string_append_printf(xml,
                               "<channel type='unix'><target type='virtio' "
                               "name='org.hotmig.agent.0' state='%s'/></channel>",
                               g_str_equal(d->agent, "disconnected") ? "disconnected"
                                                                     : "connected");
    g_string_append(xml, "</devices></domain>");
    return g_string_free(g_steal_pointer(&xml), FALSE);
}

static gboolean fv_node_get_info(OrchVirt *v, OrchVirtNodeInfo *ret, GError **e)
{
    FakeHost *h = ((FakeVirt *)v)->host;

    ret->cpus = h->cpus;
    ret->memory_kib = h->memory_mib * 1024;
    return TRUE;
}

static GPtrArray *fv_domain_list_info(OrchVirt *v, gboolean with_xml, GError **e)
{
    FakeHost *h = ((FakeVirt *)v)->host;
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)orch_virt_domain_info_free);
    gint64 now = g_get_monotonic_time();

    cluster_now->list_calls++;
    for (guint i = 0; i < G_N_ELEMENTS(h->doms) && h->doms[i].name; i++) {
        const FakeDom *d = &h->doms[i];
        OrchVirtDomainInfo *info = g_new0(OrchVirtDomainInfo, 1);

        info->name = g_strdup(d->name);
        info->vcpus = d->vcpus;
        info->memory_kib = d->memory_mib * 1024;
        info->cpu_time_ns =
            (guint64)((double)(now - cluster_now->t0) * 1000.0 * d->vcpus * d->util);
        info->sampled_us = now;
        info->paused = d->paused;
        info->xml = with_xml ? dom_xml(d) : NULL;
        g_ptr_array_add(out, info);
    }
    return out;
}

static void fv_free(OrchVirt *v)
{
    orch_virt_clear(v);
    g_free(v);
}

/* A guest's agent channel: the fake agent answers sync, info and inventory at once. */
typedef struct {
    FakeAgentChannel base;
    const FakeDom *dom;
} FakeChannel;

static OrchVirtChannel *fv_channel_open(OrchVirt *v, const char *d, const char *name,
                                        gboolean force, GError **e)
{
    FakeHost *h = ((FakeVirt *)v)->host;
    FakeChannel *c;

    assert_string_equal(name, "org.hotmig.agent.0");
    assert_false(force); /* the inventory never takes the channel from a migration */
    for (guint i = 0; i < G_N_ELEMENTS(h->doms) && h->doms[i].name; i++) {
        const FakeDom *dom = &h->doms[i];

        if (!g_str_equal(dom->name, d))
            continue;
        g_ptr_array_add(cluster_now->channel_opens, g_strdup_printf("%s/%s", h->name, d));
        if (dom->agent_held) {
            g_set_error(e, ORCH_ERROR, ORCH_ERROR_AGENT,
                        "Cannot open channel 'org.hotmig.agent.0' of '%s': in use (fake)", d);
            return NULL;
        }
        c = g_new0(FakeChannel, 1);
        fake_agent_channel_init(&c->base, v);
        c->dom = dom;
        return &c->base.parent;
    }
    fail_msg("channel of '%s', which is not on '%s'", d, h->name);
    return NULL;
}

static gboolean fv_channel_send(OrchVirtChannel *chan, const void *buf, gsize len,
                                HmDeadline deadline, GError **e)
{
    FakeChannel *c = (FakeChannel *)chan;
    g_autofree char *text = g_strndup(buf, len);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i]; i++) {
        const char *id = strstr(lines[i], "\"id\":");

        if (strstr(lines[i], "\"sync\"") && id)
            g_string_append_printf(c->base.out, "\xff{\"return\":%.*s}\n",
                                   (int)strspn(id + 5, "0123456789"), id + 5);
        else if (strstr(lines[i], "\"info\""))
            g_string_append(c->base.out, "{\"return\":{\"version\":\"test\",\"protocol\":2}}\n");
        else if (strstr(lines[i], "\"inventory\""))
            g_string_append_printf(c->base.out,
                                   "{\"return\":{\"state\":\"running\",\"processes\":%s,"
                                   "\"devices\":[]}}\n",
                                   c->dom->agent);
    }
    return TRUE;
}

static void fv_channel_close(OrchVirtChannel *chan)
{
    FakeChannel *c = (FakeChannel *)chan;

    fake_agent_channel_clear(&c->base);
    g_free(c);
}

static const OrchVirtOps fake_virt_ops = {
    .node_get_info = fv_node_get_info,
    .domain_list_info = fv_domain_list_info,
    .channel_open = fv_channel_open,
    .channel_send = fv_channel_send,
    .channel_recv = fake_agent_channel_recv,
    .channel_close = fv_channel_close,
    .free = fv_free,
};

static OrchVirt *fake_virt_open(const char *uri, const char *label, gpointer opaque, GError **error)
{
    FakeHost *h = find_host(uri);
    FakeVirt *v;

    if (!h || h->libvirt_down) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_HYPERVISOR, "Cannot connect to %s host '%s'",
                    label, uri);
        return NULL;
    }
    v = g_new0(FakeVirt, 1);
    orch_virt_init(&v->parent, &fake_virt_ops, uri, label);
    v->host = h;
    return &v->parent;
}

/* ---- a fake hotmigd client: /v1/host from the fake cluster; migrations recorded -----------------
 */

typedef struct {
    GMutex lock;
    GPtrArray *started; /* "URL DOMAIN DESTINATION" */
    GHashTable *fail;   /* domains whose remote migration fails */
    guint gets;
} FakeRemote;

static FakeRemote remote;

/* Counts a remote migration as running (+1) or ended (-1) in the limits' bookkeeping. */
static void remote_count(const char *url, const char *domain, const char *dest, int delta);

typedef struct {
    OrchHotmigdClient parent;
} FakeVfd;

static FakeHost *host_of_url(const char *url)
{
    for (guint i = 0; i < cluster_now->n_hosts; i++) {
        g_autofree char *want = g_strdup_printf("https://%s:1", cluster_now->hosts[i].name);

        if (g_str_equal(want, url))
            return &cluster_now->hosts[i];
    }
    return NULL;
}

static OrchHotmigdHostInfo *fvfd_host(OrchHotmigdClient *v, GError **e)
{
    FakeHost *h = host_of_url(v->url);
    OrchHotmigdHostInfo *info;

    if (!h || h->hotmigd_down) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                    "Cannot reach hotmigd at %s (GET /v1/host): Connection refused", v->url);
        return NULL;
    }
    info = g_new0(OrchHotmigdHostInfo, 1);
    info->name = g_strdup(h->name);
    info->version = g_strdup("test");
    info->pool_size = h->pool;
    info->counts[ORCH_VF_STATE_FREE] = h->free;
    info->counts[ORCH_VF_STATE_MISSING] = h->missing;
    info->counts[ORCH_VF_STATE_ASSIGNED] = h->pool - h->free - h->missing;
    info->warnings = g_new0(char *, 1);
    return info;
}

static char *fvfd_migration_start(OrchHotmigdClient *v, const OrchHotmigdMigrationRequest *req,
                                  GError **e)
{
    FakeHost *h = host_of_url(v->url);

    if (h && h->hotmigd_down) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_UNREACHABLE,
                    "Cannot reach hotmigd at %s (POST /v1/migrations): Connection refused", v->url);
        return NULL;
    }
    if (h && h->hotmigd_refuses) {
        g_set_error(e, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                    "hotmigd at %s refused POST /v1/migrations (503 Service Unavailable)", v->url);
        return NULL;
    }
    g_mutex_lock(&remote.lock);
    g_ptr_array_add(remote.started,
                    g_strdup_printf("%s %s %s", v->url, req->domain, req->destination));
    g_mutex_unlock(&remote.lock);
    remote_count(v->url, req->domain, req->destination, +1);
    return g_strdup_printf("m-%s", req->domain);
}

static OrchHotmigdMigration *fvfd_migration_get(OrchHotmigdClient *v, const char *id, GError **e)
{
    OrchHotmigdMigration *mig = g_new0(OrchHotmigdMigration, 1);
    gboolean fail;

    g_mutex_lock(&remote.lock);
    remote.gets++;
    fail = g_hash_table_contains(remote.fail, id + 2);
    g_mutex_unlock(&remote.lock);
    mig->id = g_strdup(id);
    mig->domain = g_strdup(id + 2);
    mig->destination = g_strdup("?");
    mig->state = fail ? ORCH_HOTMIGD_MIGRATION_FAILED : ORCH_HOTMIGD_MIGRATION_DONE;
    mig->error = fail ? g_strdup("Phase 'prepare' failed: the agent did not answer") : NULL;
    mig->report = g_strdup_printf("{\"domain\":\"%s\",\"ok\":%s}", id + 2, fail ? "false" : "true");
    remote_count(v->url, id + 2, NULL, -1);
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

/* How the tests reach their hosts: the fakes above. */
static const OrchConnector fake_connector = {.open_virt = fake_virt_open,
                                             .open_hotmigd = fake_vfd_open};
static const OrchOptions fake_migrate_opts = {.connector = &fake_connector};

/* The config's hosts for the fake cluster: test:///NAME, https://NAME:1. */
static GPtrArray *config_hosts(void)
{
    GPtrArray *hosts = g_ptr_array_new();

    for (guint i = 0; i < cluster_now->n_hosts; i++) {
        HmConfigHost *h = g_new0(HmConfigHost, 1);

        h->name = g_strdup(cluster_now->hosts[i].name);
        h->uri = g_strdup_printf("test:///%s", h->name);
        h->hotmigd = g_strdup_printf("https://%s:1", h->name);
        g_ptr_array_add(hosts, h);
    }
    return hosts;
}

static void config_hosts_free(GPtrArray *hosts)
{
    for (guint i = 0; i < hosts->len; i++) {
        HmConfigHost *h = g_ptr_array_index(hosts, i);

        g_free(h->name);
        g_free(h->uri);
        g_free(h->hotmigd);
        g_free(h);
    }
    g_ptr_array_unref(hosts);
}

static FakeCluster three_hosts(void)
{
    FakeCluster c = {
        .hosts =
            {
                {.name = "A",
                 .cpus = 8,
                 .memory_mib = 32768,
                 .pool = 8,
                 .free = 5,
                 .missing = 1,
                 .doms = {{"a1", 2, 4096, 0.5, 1, 0, FALSE, "lu"},
                          {"a2", 4, 8192, 0.25, 0, 1, FALSE, "lu"},
                          {"moving", 1, 1024, 0.0, 0, 0, FALSE, NULL}}},
                {.name = "B",
                 .cpus = 8,
                 .memory_mib = 32768,
                 .hotmigd_down = TRUE,
                 .doms = {{"b1", 2, 2048, 0.1, 2, 0, FALSE, NULL},
                          {"moving", 1, 1024, 0.0, 0, 0, TRUE, NULL}}},
                {.name = "C", .cpus = 8, .memory_mib = 32768, .libvirt_down = TRUE},
            },
        .n_hosts = 3,
    };
    c.t0 = g_get_monotonic_time();
    return c;
}

static HotmigdInventory *collect(guint sample_ms)
{
    GPtrArray *hosts = config_hosts();
    HotmigdInventoryOptions opts = {
        .migrate_opts = &fake_migrate_opts,
        .cpu_sample_ms = sample_ms,
    };
    g_autoptr(GError) error = NULL;
    HotmigdInventory *inv = hotmigd_inventory_collect(hosts, &opts, &error);

    config_hosts_free(hosts);
    assert_null(error);
    assert_non_null(inv);
    return inv;
}

static const HotmigdInvVm *vm_named(const HotmigdInventory *inv, const char *name)
{
    for (guint i = 0; i < inv->vms->len; i++) {
        const HotmigdInvVm *vm = g_ptr_array_index(inv->vms, i);

        if (g_str_equal(vm->name, name))
            return vm;
    }
    fail_msg("no VM '%s' in the inventory", name);
    return NULL;
}

/* ---- inventory ------------------------------------------------------------------------------ */

static void test_inventory(void **state)
{
    FakeCluster c = three_hosts();
    g_autoptr(HotmigdInventory) inv = NULL;
    const HotmigdInvHost *a, *b, *hc;
    const HotmigdInvVm *vm;

    cluster_now = &c;
    inv = collect(100);
    assert_int_equal(inv->hosts->len, 3);
    a = g_ptr_array_index(inv->hosts, 0);
    b = g_ptr_array_index(inv->hosts, 1);
    hc = g_ptr_array_index(inv->hosts, 2);

    /* A: everything answers. Pool 8, one missing: 7 VFs, 5 free. */
    assert_int_equal(a->state, POL_HOST_OK);
    assert_null(a->state_reason);
    assert_int_equal(a->cpus, 8);
    assert_int_equal(a->memory_mib, 32768);
    assert_int_equal(a->vfs_total, 7);
    assert_int_equal(a->vfs_free, 5);
    assert_int_equal(a->vms, 3);
    /* B: libvirt answers, its hotmigd does not: quarantined, and it still holds its VMs' VFs. */
    assert_int_equal(b->state, POL_HOST_QUARANTINED);
    assert_non_null(strstr(b->state_reason, "hotmigd (https://B:1) does not answer"));
    assert_non_null(strstr(b->state_reason, "Connection refused"));
    assert_int_equal(b->vfs_total, 2);
    assert_int_equal(b->vfs_free, 0);
    assert_int_equal(b->vms, 1);
    /* C: libvirt does not answer: down, no VMs known. */
    assert_int_equal(hc->state, POL_HOST_DOWN);
    assert_non_null(strstr(hc->state_reason, "libvirt does not answer: Cannot connect to C host"));
    assert_int_equal(hc->vms, 0);

    /* VFs from the XML: hostdevs and stand-ins, not the other NIC. */
    assert_int_equal(vm_named(inv, "a1")->vfs, 1);
    assert_int_equal(vm_named(inv, "a2")->vfs, 1);
    assert_int_equal(vm_named(inv, "b1")->vfs, 2);
    /* The job from the XML's metadata. */
    assert_string_equal(vm_named(inv, "a1")->job, "lu");
    assert_string_equal(vm_named(inv, "a2")->job, "lu");
    assert_null(vm_named(inv, "b1")->job);
    /* CPU demand from two samples 100 ms apart (the fake's cpuTime grows at util x vcpus). */
    vm = vm_named(inv, "a1");
    assert_true(vm->cpu_measured);
    assert_true(vm->cpu_util > 0.45 && vm->cpu_util < 0.55);
    vm = vm_named(inv, "a2");
    assert_true(vm->cpu_util > 0.2 && vm->cpu_util < 0.3);
    assert_int_equal(vm->vcpus, 4);
    assert_int_equal(vm->memory_mib, 8192);
    /* Seen running on A and paused on B (the incoming side of a migration): counted on A. */
    assert_string_equal(vm_named(inv, "moving")->host, "A");
    assert_int_equal(inv->vms->len, 4);
    assert_int_equal(inv->warnings->len, 1);
    assert_non_null(strstr(g_ptr_array_index(inv->warnings, 0), "VM 'moving' runs on 'A' and 'B'"));
    /* Two samples per host that answers. */
    assert_int_equal(c.list_calls, 4);
}

static void test_inventory_unmeasured(void **state)
{
    FakeCluster c = three_hosts();
    g_autoptr(HotmigdInventory) inv = NULL;

    cluster_now = &c;
    inv = collect(0);
    /* No second sample: as busy as it may be. */
    assert_false(vm_named(inv, "a1")->cpu_measured);
    assert_true(vm_named(inv, "a1")->cpu_util == 1.0);
    assert_int_equal(c.list_calls, 2);
}

static void test_inventory_cancelled(void **state)
{
    FakeCluster c = three_hosts();
    g_autoptr(GCancellable) cancel = g_cancellable_new();
    GPtrArray *hosts;
    HotmigdInventoryOptions opts = {
        .migrate_opts = &fake_migrate_opts,
        .cpu_sample_ms = 60000,
        .cancellable = cancel,
    };
    g_autoptr(GError) error = NULL;
    gint64 start = g_get_monotonic_time();
    HotmigdInventory *inv;

    cluster_now = &c;
    hosts = config_hosts();
    g_cancellable_cancel(cancel);
    inv = hotmigd_inventory_collect(hosts, &opts, &error);
    config_hosts_free(hosts);
    assert_null(inv);
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_CANCELLED));
    assert_true(g_get_monotonic_time() - start < 5 * G_USEC_PER_SEC);
}

/* A VM without a job in its metadata is in the job its agent names for its processes (issue 32
 * item 7); the metadata wins, and the agent is asked only when its channel is connected,
 * never taking the channel from a migration that holds it. The plans' schedules carry it. */
static void test_inventory_agent_jobs(void **state)
{
    static const char procs_4711[] =
        "[{\"pid\":10,\"name\":\"xdlu\",\"state\":\"running\",\"job\":\"4711\"},"
        "{\"pid\":11,\"name\":\"helper\",\"state\":\"running\"}]";
    static const char procs_two[] =
        "[{\"pid\":10,\"name\":\"xdlu\",\"state\":\"running\",\"job\":\"4711\"},"
        "{\"pid\":12,\"name\":\"other\",\"state\":\"running\",\"job\":\"4712\"}]";
    FakeCluster c = {
        .hosts =
            {
                {.name = "A",
                 .cpus = 8,
                 .memory_mib = 32768,
                 .pool = 8,
                 .free = 8,
                 .doms = {{"meta", 1, 1024, 0.1, 0, 1, FALSE, "lu", procs_4711},
                          {"guest", 1, 1024, 0.1, 0, 1, FALSE, NULL, procs_4711},
                          {"noagent", 1, 1024, 0.1, 0, 1, FALSE, NULL, "disconnected"},
                          {"held", 1, 1024, 0.1, 0, 1, FALSE, NULL, procs_4711, TRUE}}},
                {.name = "B",
                 .cpus = 8,
                 .memory_mib = 32768,
                 .pool = 8,
                 .free = 8,
                 .doms = {{"two", 1, 1024, 0.1, 0, 1, FALSE, NULL, procs_two},
                          {"nochannel", 1, 1024, 0.1, 0, 1, FALSE, NULL, NULL},
                          {"other", 1, 1024, 0.1, 0, 1, FALSE, NULL, procs_4711}}},
            },
        .n_hosts = 2,
    };
    g_autoptr(HotmigdInventory) inv = NULL;
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(PolSchedule) sched = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *warnings = NULL;
    g_autofree char *opens = NULL;
    HotmigdInventoryView view = {.now = 1700000000};
    const GPtrArray *moves;
    PolOptions opts;

    c.t0 = g_get_monotonic_time();
    c.channel_opens = g_ptr_array_new_with_free_func(g_free);
    cluster_now = &c;
    inv = collect(0);
    g_ptr_array_add(c.channel_opens, NULL);
    opens = g_strjoinv(",", (char **)c.channel_opens->pdata);
    g_ptr_array_unref(c.channel_opens);
    /* Asked: the VMs without metadata whose channel is connected, each once. */
    assert_string_equal(opens, "A/guest,A/held,B/two,B/other");
    assert_string_equal(vm_named(inv, "meta")->job, "lu"); /* the metadata wins */
    assert_string_equal(vm_named(inv, "guest")->job, "4711");
    assert_string_equal(vm_named(inv, "other")->job, "4711");
    assert_null(vm_named(inv, "noagent")->job);
    assert_null(vm_named(inv, "nochannel")->job);
    assert_null(vm_named(inv, "held")->job);
    assert_null(vm_named(inv, "two")->job);
    g_ptr_array_add(inv->warnings, NULL);
    warnings = g_strjoinv("\n", (char **)inv->warnings->pdata);
    g_ptr_array_remove_index(inv->warnings, inv->warnings->len - 1);
    assert_int_equal(inv->warnings->len, 2);
    assert_non_null(strstr(warnings, "VM 'held' on 'A': no job from its agent: Cannot open "
                                     "channel 'org.hotmig.agent.0' of 'held': in use (fake)"));
    assert_non_null(strstr(warnings, "VM 'two' on 'B': its processes name two jobs, '4711' and "
                                     "'4712': taken for a VM in no job"));

    /* A drain of A: the schedule's moves carry the guest's job, so 'guest' and 'other' (B) are
     * one job; the metadata's 'lu' for 'meta'. */
    cluster = hotmigd_inventory_to_cluster(inv, &view, &error);
    assert_null(error);
    pol_options_init(&opts);
    plan = pol_plan_drain(cluster, "A", &opts, &error);
    assert_null(error);
    sched = pol_schedule_new(cluster, plan->migrations, NULL, &opts, &error);
    assert_null(error);
    moves = pol_schedule_get_moves(sched);
    assert_int_equal(moves->len, 4);
    for (guint i = 0; i < moves->len; i++) {
        const PolScheduleMove *m = g_ptr_array_index(moves, i);

        if (g_str_equal(m->vm, "guest"))
            assert_string_equal(m->job, "4711");
        else if (g_str_equal(m->vm, "meta"))
            assert_string_equal(m->job, "lu");
        else
            assert_null(m->job);
    }
}

/* The snapshot export, read back by `migrate-vm plan --snapshot`'s parser, plans the same. */
static void test_snapshot_round_trip(void **state)
{
    FakeCluster c = three_hosts();
    g_autoptr(HotmigdInventory) inv = NULL;
    g_autoptr(GHashTable) states = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) moved = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free);
    g_autoptr(PolCluster) direct = NULL;
    g_autoptr(PolCluster) parsed = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *json = NULL;
    gint64 *when = g_new(gint64, 1);
    HotmigdInventoryView view = {.states = states, .moved = moved, .now = 1700000100};
    PolOptions opts;

    cluster_now = &c;
    c.hosts[1].hotmigd_down = FALSE;
    c.hosts[1].pool = 4;
    c.hosts[1].free = 2;
    c.hosts[2].libvirt_down = FALSE;
    c.hosts[2].pool = 4;
    c.hosts[2].free = 4;
    inv = collect(20);
    *when = 1700000000;
    g_hash_table_insert(moved, (gpointer) "a2", when);
    g_hash_table_insert(states, (gpointer) "C", GINT_TO_POINTER(POL_HOST_QUARANTINED));

    json = hotmigd_inventory_format_snapshot(inv, &view, TRUE);
    parsed = orch_snapshot_parse(json, strlen(json), "live", &error);
    assert_null(error);
    direct = hotmigd_inventory_to_cluster(inv, &view, &error);
    assert_null(error);
    assert_non_null(strstr(json, "\"moved_ago_s\" : 100"));
    assert_non_null(strstr(json, "\"state\" : \"quarantined\""));
    assert_non_null(strstr(json, "\"job\" : \"lu\""));

    pol_options_init(&opts);
    opts.min_stay_s = 600; /* a2 moved 100 s ago: it stays in both */
    for (int policy = 0; policy < POL_POLICY_LAST; policy++) {
        g_autoptr(PolPlan) p1 = NULL;
        g_autoptr(PolPlan) p2 = NULL;
        g_autoptr(GError) e1 = NULL;
        g_autoptr(GError) e2 = NULL;

        if (policy == POL_POLICY_DRAIN) {
            p1 = pol_plan_drain(direct, "A", &opts, &e1);
            p2 = pol_plan_drain(parsed, "A", &opts, &e2);
        } else if (policy == POL_POLICY_CONSOLIDATE) {
            p1 = pol_plan_consolidate(direct, &opts, &e1);
            p2 = pol_plan_consolidate(parsed, &opts, &e2);
        } else {
            p1 = pol_plan_balance(direct, &opts, &e1);
            p2 = pol_plan_balance(parsed, &opts, &e2);
        }
        if (!p1) {
            /* The same refusal from both. */
            assert_non_null(e2);
            assert_string_equal(e1->message, e2->message);
            continue;
        }
        assert_non_null(p2);
        {
            g_autofree char *j1 = orch_plan_format_json(p1, FALSE, FALSE);
            g_autofree char *j2 = orch_plan_format_json(p2, FALSE, FALSE);

            assert_string_equal(j1, j2);
        }
    }
}

/* ---- the scheduler runner ----------------------------------------------------------------------
 */

typedef struct {
    GMutex lock;
    GHashTable *out, *in; /* host -> running count */
    guint total, max_total;
    GHashTable *max_out, *max_in;
    GHashTable *fail; /* domains whose migration fails here */
    GPtrArray *ran;   /* "DOMAIN SRC DST" */
} FakeMigrate;

static FakeMigrate fm;

static void count(GHashTable *now, GHashTable *max, const char *host, int delta)
{
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(now, host)) + delta;

    g_hash_table_insert(now, g_strdup(host), GUINT_TO_POINTER(n));
    if (n > GPOINTER_TO_UINT(g_hash_table_lookup(max, host)))
        g_hash_table_insert(max, g_strdup(host), GUINT_TO_POINTER(n));
}

/* "test:///A" -> "A" */
static const char *host_of(const char *uri)
{
    return uri + strlen("test:///");
}

static gboolean fake_migrate(const OrchOptions *opts, OrchReport **ret_report, GError **error)
{
    OrchReport *report = g_new0(OrchReport, 1);
    gboolean fail;

    g_mutex_lock(&fm.lock);
    count(fm.out, fm.max_out, host_of(opts->source_uri), +1);
    count(fm.in, fm.max_in, host_of(opts->dest_uri), +1);
    fm.total++;
    fm.max_total = MAX(fm.max_total, fm.total);
    g_ptr_array_add(fm.ran, g_strdup_printf("%s %s %s %s", opts->domain, host_of(opts->source_uri),
                                            host_of(opts->dest_uri), opts->hotmigd_url));
    fail = g_hash_table_contains(fm.fail, opts->domain);
    g_mutex_unlock(&fm.lock);

    /* Long enough for the others to start alongside if the limits allowed it. */
    hotmigd_run_wait_ms(30, opts->cancellable);

    g_mutex_lock(&fm.lock);
    count(fm.out, fm.max_out, host_of(opts->source_uri), -1);
    count(fm.in, fm.max_in, host_of(opts->dest_uri), -1);
    fm.total--;
    g_mutex_unlock(&fm.lock);

    report->domain = g_strdup(opts->domain);
    report->rollback = g_ptr_array_new();
    report->final_host = g_strdup(fail ? "source" : "destination");
    report->ok = !fail;
    for (guint i = 0; i < ORCH_PHASE_LAST; i++) {
        report->phases[i].phase = i;
        report->phases[i].status = ORCH_STATUS_OK;
        report->phases[i].duration_us = 1000;
    }
    if (fail) {
        report->failed_phase = ORCH_PHASE_PREPARE;
        report->error = g_strdup("Phase 'prepare' failed: processes did not quiesce");
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_AGENT, "%s", report->error);
    }
    *ret_report = report;
    return !fail;
}

static GHashTable *remote_dest; /* domain -> destination, while it runs */

static void remote_count(const char *url, const char *domain, const char *dest, int delta)
{
    g_autofree char *source = g_strndup(url + strlen("https://"), 1);

    g_mutex_lock(&fm.lock);
    if (delta > 0)
        g_hash_table_insert(remote_dest, g_strdup(domain), g_strdup(dest));
    dest = g_hash_table_lookup(remote_dest, domain);
    count(fm.out, fm.max_out, source, delta);
    count(fm.in, fm.max_in, dest, delta);
    fm.total += delta;
    fm.max_total = MAX(fm.max_total, fm.total);
    if (delta < 0)
        g_hash_table_remove(remote_dest, domain);
    g_mutex_unlock(&fm.lock);
}

static void fm_reset(void)
{
    g_mutex_init(&fm.lock);
    fm.out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    fm.in = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    fm.max_out = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    fm.max_in = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    fm.fail = g_hash_table_new(g_str_hash, g_str_equal);
    fm.ran = g_ptr_array_new_with_free_func(g_free);
    fm.total = fm.max_total = 0;
    remote_dest = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_mutex_init(&remote.lock);
    remote.started = g_ptr_array_new_with_free_func(g_free);
    remote.fail = g_hash_table_new(g_str_hash, g_str_equal);
    remote.gets = 0;
}

static void fm_clear(void)
{
    g_hash_table_unref(fm.out);
    g_hash_table_unref(fm.in);
    g_hash_table_unref(fm.max_out);
    g_hash_table_unref(fm.max_in);
    g_hash_table_unref(fm.fail);
    g_hash_table_unref(remote_dest);
    g_ptr_array_unref(fm.ran);
    g_ptr_array_unref(remote.started);
    g_hash_table_unref(remote.fail);
}

static guint max_of(GHashTable *max)
{
    GHashTableIter it;
    gpointer value;
    guint m = 0;

    g_hash_table_iter_init(&it, max);
    while (g_hash_table_iter_next(&it, NULL, &value))
        m = MAX(m, GPOINTER_TO_UINT(value));
    return m;
}

typedef struct {
    GMainLoop *loop;
    guint started, ended, finished;
    GPtrArray *events; /* "started vm", "ended vm state" */
} RunWatch;

static void on_run(HotmigdRun *run, HotmigdRunEvent event, const HotmigdRunMove *move,
                   gpointer data)
{
    RunWatch *w = data;

    switch (event) {
    case HOTMIGD_RUN_EVENT_STARTED:
        w->started++;
        g_ptr_array_add(w->events, g_strdup_printf("started %s", move->move->vm));
        break;
    case HOTMIGD_RUN_EVENT_ENDED:
        w->ended++;
        g_ptr_array_add(w->events, g_strdup_printf("ended %s %s", move->move->vm,
                                                   pol_move_state_to_string(move->move->state)));
        break;
    default:
        w->finished++;
        g_main_loop_quit(w->loop);
        break;
    }
}

static void add_move(GPtrArray *moves, const char *vm, const char *from, const char *to)
{
    PolMigration *m = g_new0(PolMigration, 1);

    /* A VM's first move of two is a detour. */
    for (guint i = 0; i < moves->len; i++) {
        PolMigration *earlier = g_ptr_array_index(moves, i);

        if (g_str_equal(earlier->vm, vm))
            earlier->extra = TRUE;
    }

    m->vm = g_strdup(vm);
    m->from = g_strdup(from);
    m->to = g_strdup(to);
    m->memory_mib = 1024;
    m->duration_s = 1;
    g_ptr_array_add(moves, m);
}

static void add_host(PolCluster *c, const char *name)
{
    assert_true(pol_cluster_add_host(c, name, 64, 65536, POL_HOST_OK, NULL));
    assert_true(pol_cluster_set_host_vfs(c, name, NULL, 16, -1, NULL));
}

static void add_vm(PolCluster *c, const char *name, const char *host)
{
    PolVmSpec spec = {.name = name,
                      .host = host,
                      .vcpus = 1,
                      .memory_mib = 1024,
                      .cpu_util = 0.1,
                      .vfs = 1,
                      .moved_ago_s = -1};

    assert_true(pol_cluster_add_vm(c, &spec, NULL));
}

/* Where the runs of these tests move VMs: from host A, with the fakes, followed every 10 ms. */
static HotmigdMoveEnv env_for(GPtrArray *hosts, OrchOptions *template)
{
    template->connector = &fake_connector;
    return (HotmigdMoveEnv){.self = "A",
                            .hosts = hosts,
                            .migrate_opts = template,
                            .migrate = fake_migrate,
                            .poll_ms = 10};
}

static void test_run(void **state)
{
    FakeCluster fc = {.hosts = {{.name = "A"}, {.name = "B"}, {.name = "C"}, {.name = "D"}},
                      .n_hosts = 4};
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    g_autoptr(HotmigdRun) run = NULL;
    GPtrArray *hosts;
    OrchOptions template;
    HotmigdMoveEnv env;
    PolScheduleLimits limits = {.per_host_out = 1, .per_host_in = 1, .total = 2};
    RunWatch w = {.loop = loop, .events = g_ptr_array_new_with_free_func(g_free)};
    PolScheduleProgress progress;
    const GPtrArray *rm;

    cluster_now = &fc;
    fm_reset();
    hosts = config_hosts();
    orch_options_init(&template);
    env = env_for(hosts, &template);
    for (const char *const *h = (const char *const[]){"A", "B", "C", "D", NULL}; *h; h++)
        add_host(c, *h);
    /* Four VMs leave A (run here), two leave B (asked of B's hotmigd). a2 fails here; so its
     * second move (C -> D) is skipped. b2 fails at B. */
    add_vm(c, "a1", "A");
    add_vm(c, "a2", "A");
    add_vm(c, "a3", "A");
    add_vm(c, "a4", "A");
    add_vm(c, "b1", "B");
    add_vm(c, "b2", "B");
    add_move(moves, "a1", "A", "C");
    add_move(moves, "a2", "A", "C");
    add_move(moves, "b1", "B", "D");
    add_move(moves, "a3", "A", "D");
    add_move(moves, "b2", "B", "C");
    add_move(moves, "a4", "A", "D");
    add_move(moves, "a2", "C", "D");
    g_hash_table_add(fm.fail, (gpointer) "a2");
    g_hash_table_add(remote.fail, (gpointer) "b2");

    run = hotmigd_run_new(&env, "s1", "test", c, moves, &limits, NULL, &error);
    if (error)
        fail_msg("%s", error->message);
    assert_non_null(run);
    hotmigd_run_start(run, on_run, &w);
    assert_int_equal(w.started, 0); /* nothing before the main loop runs */
    g_main_loop_run(loop);

    assert_int_equal(w.finished, 1);
    assert_true(hotmigd_run_is_finished(run));
    /* Limits never exceeded, counting the moves here and those at B's hotmigd. */
    assert_true(max_of(fm.max_out) <= 1);
    assert_true(max_of(fm.max_in) <= 1);
    assert_true(fm.max_total <= 2);
    /* The moves from A ran here (with the destination's hotmigd), those from B at B's hotmigd. */
    assert_int_equal(fm.ran->len, 4);
    for (guint i = 0; i < fm.ran->len; i++) {
        const char *line = g_ptr_array_index(fm.ran, i);

        assert_true(g_str_has_prefix(line, "a"));
        assert_non_null(strstr(line, " A "));
    }
    assert_true(g_ptr_array_find_with_equal_func(fm.ran, "a1 A C https://C:1", g_str_equal, NULL));
    assert_int_equal(remote.started->len, 2);
    assert_true(
        g_ptr_array_find_with_equal_func(remote.started, "https://B:1 b1 D", g_str_equal, NULL));
    assert_true(
        g_ptr_array_find_with_equal_func(remote.started, "https://B:1 b2 C", g_str_equal, NULL));
    assert_true(remote.gets >= 2);

    /* The report: each move's end and why. */
    hotmigd_run_get_progress(run, &progress);
    assert_int_equal(progress.total, 7);
    assert_int_equal(progress.done, 4);
    assert_int_equal(progress.failed, 2);
    assert_int_equal(progress.skipped, 1);
    assert_int_equal(w.ended, 7);
    assert_int_equal(w.started, 6);
    rm = hotmigd_run_get_moves(run);
    for (guint i = 0; i < rm->len; i++) {
        const HotmigdRunMove *m = g_ptr_array_index(rm, i);
        const PolScheduleMove *pm = m->move;

        if (g_str_equal(pm->vm, "a2") && g_str_equal(pm->from, "A")) {
            assert_int_equal(pm->state, POL_MOVE_FAILED);
            assert_string_equal(pm->detail, "Phase 'prepare' failed: processes did not quiesce");
            assert_string_equal(m->driven_by, "here");
            assert_non_null(strstr(m->report, "\"ok\":false"));
        } else if (g_str_equal(pm->vm, "a2")) {
            assert_int_equal(pm->state, POL_MOVE_SKIPPED);
            assert_non_null(strstr(pm->detail, "VM 'a2' will not be on 'C'"));
            assert_null(m->driven_by);
        } else if (g_str_equal(pm->vm, "b2")) {
            assert_int_equal(pm->state, POL_MOVE_FAILED);
            assert_string_equal(pm->detail, "Phase 'prepare' failed: the agent did not answer");
            assert_string_equal(m->driven_by, "B");
            assert_string_equal(m->remote_id, "m-b2");
        } else {
            assert_int_equal(pm->state, POL_MOVE_DONE);
            assert_non_null(m->report);
            assert_string_equal(m->driven_by, g_str_has_prefix(pm->vm, "b") ? "B" : "here");
        }
    }
    g_ptr_array_unref(w.events);
    config_hosts_free(hosts);
    fm_clear();
}

/* A plan that does not replay on the cluster is refused naming the step; nothing runs. */
static void test_run_refused(void **state)
{
    FakeCluster fc = {.hosts = {{.name = "A"}, {.name = "B"}}, .n_hosts = 2};
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    g_autoptr(GError) error = NULL;
    GPtrArray *hosts;
    OrchOptions template;
    HotmigdMoveEnv env;

    cluster_now = &fc;
    hosts = config_hosts();
    orch_options_init(&template);
    env = env_for(hosts, &template);
    add_host(c, "A");
    add_host(c, "B");
    add_vm(c, "a1", "A");
    add_move(moves, "a1", "B", "A"); /* a1 is not on B */
    assert_null(hotmigd_run_new(&env, "s2", "test", c, moves, NULL, NULL, &error));
    assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
    assert_non_null(strstr(error->message, "a1"));
    config_hosts_free(hosts);
}

/* Freeing a run while its moves run cancels them (the fake sees the cancellable) and waits. */
static void test_run_given_up(void **state)
{
    FakeCluster fc = {.hosts = {{.name = "A"}, {.name = "B"}}, .n_hosts = 2};
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    g_autoptr(GError) error = NULL;
    GPtrArray *hosts;
    OrchOptions template;
    HotmigdMoveEnv env;
    HotmigdRun *run;
    RunWatch w = {.events = g_ptr_array_new_with_free_func(g_free)};

    cluster_now = &fc;
    fm_reset();
    hosts = config_hosts();
    orch_options_init(&template);
    env = env_for(hosts, &template);
    add_host(c, "A");
    add_host(c, "B");
    add_vm(c, "a1", "A");
    add_move(moves, "a1", "A", "B");
    run = hotmigd_run_new(&env, "s3", "test", c, moves, NULL, NULL, &error);
    assert_non_null(run);
    hotmigd_run_start(run, on_run, &w);
    g_main_context_iteration(NULL, FALSE); /* the first pump: a1 starts */
    assert_int_equal(w.started, 1);
    hotmigd_run_free(run);
    assert_int_equal(w.ended, 0); /* given up: not told */
    assert_int_equal(fm.total, 0);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    g_ptr_array_unref(w.events);
    config_hosts_free(hosts);
    fm_clear();
}

/* ---- arrivals: room held for the moves under way ------------------------------------------ */

static void test_host_free(HotmigdInvHost *h)
{
    g_free(h->name);
    g_free(h);
}

static void test_vm_free(HotmigdInvVm *vm)
{
    g_free(vm->name);
    g_free(vm->host);
    g_free(vm->job);
    g_free(vm);
}

/* Hosts A, B (1500 MiB, 1 free VF of 1), C; a1 (800 MiB, 1 VF) runs on A, c1 (600 MiB, @vfs
 * VFs) on C. */
static HotmigdInventory *arrivals_inventory(guint c1_vfs)
{
    HotmigdInventory *inv = g_new0(HotmigdInventory, 1);
    const struct {
        const char *name;
        guint64 mem;
        guint vfs;
    } hosts[] = {{"A", 4000, 4}, {"B", 1500, 1}, {"C", 4000, 4}};
    const struct {
        const char *name, *host;
        guint64 mem;
        guint vfs;
    } vms[] = {{"a1", "A", 800, 1}, {"c1", "C", 600, c1_vfs}};

    inv->hosts = g_ptr_array_new_with_free_func((GDestroyNotify)test_host_free);
    inv->vms = g_ptr_array_new_with_free_func((GDestroyNotify)test_vm_free);
    inv->warnings = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < G_N_ELEMENTS(hosts); i++) {
        HotmigdInvHost *h = g_new0(HotmigdInvHost, 1);

        h->name = g_strdup(hosts[i].name);
        h->cpus = 64;
        h->memory_mib = hosts[i].mem;
        h->vfs_total = hosts[i].vfs;
        h->vfs_free = hosts[i].vfs - (i == 0) - (i == 2 && c1_vfs);
        h->hotmigd_answered = TRUE;
        g_ptr_array_add(inv->hosts, h);
    }
    for (guint i = 0; i < G_N_ELEMENTS(vms); i++) {
        HotmigdInvVm *vm = g_new0(HotmigdInvVm, 1);

        vm->name = g_strdup(vms[i].name);
        vm->host = g_strdup(vms[i].host);
        vm->vcpus = 1;
        vm->memory_mib = vms[i].mem;
        vm->cpu_util = 0.1;
        vm->cpu_measured = TRUE;
        vm->vfs = vms[i].vfs;
        g_ptr_array_add(inv->vms, vm);
    }
    return inv;
}

/* Can C be drained to B (A accepts nothing: it is being drained) with @arriving in the view? */
static gboolean drain_c_fits(HotmigdInventory *inv, GArray *arriving)
{
    g_autoptr(GHashTable) states = g_hash_table_new(g_str_hash, g_str_equal);
    HotmigdInventoryView view = {.states = states, .arriving = arriving, .now = 1};
    g_autoptr(PolCluster) cluster = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autoptr(GError) error = NULL;

    g_hash_table_insert(states, "A", GINT_TO_POINTER(POL_HOST_EVACUATING));
    cluster = hotmigd_inventory_to_cluster(inv, &view, &error);
    if (!cluster)
        fail_msg("%s", error->message);
    plan = pol_plan_drain(cluster, "C", NULL, &error);
    if (plan) {
        assert_int_equal(plan->migrations->len, 1);
        assert_string_equal(((PolMigration *)g_ptr_array_index(plan->migrations, 0))->to, "B");
    }
    return plan != NULL;
}

/* a1 on its way from A to B holds 800 MiB and its VF there: c1 no longer fits on B, neither by
 * memory (800 + 600 of 1500 fit, 800 + 800 would not: c1 is made 800 MiB below) nor by VF. */
static void test_arrivals_hold_room(void **state)
{
    g_autoptr(GArray) arriving = g_array_new(FALSE, FALSE, sizeof(HotmigdInvArrival));
    HotmigdInvArrival a1 = {.vm = "a1", .host = "B"};
    HotmigdInventory *inv = arrivals_inventory(0);

    assert_true(drain_c_fits(inv, NULL));
    g_array_append_val(arriving, a1);
    assert_true(drain_c_fits(inv, arriving)); /* 800 + 600 <= 1500, no VF asked */
    ((HotmigdInvVm *)g_ptr_array_index(inv->vms, 1))->memory_mib = 800;
    assert_false(drain_c_fits(inv, arriving)); /* 800 + 800 > 1500 */
    assert_true(drain_c_fits(inv, NULL));
    hotmigd_inventory_free(inv);

    inv = arrivals_inventory(1); /* c1 holds a VF: B's only free one goes to a1 */
    assert_true(drain_c_fits(inv, NULL));
    assert_false(drain_c_fits(inv, arriving));
    /* Arrived already (the inventory has a1 on B): nothing more is held. */
    g_free(((HotmigdInvVm *)g_ptr_array_index(inv->vms, 0))->host);
    ((HotmigdInvVm *)g_ptr_array_index(inv->vms, 0))->host = g_strdup("B");
    ((HotmigdInvHost *)g_ptr_array_index(inv->hosts, 1))->vfs_free = 0;
    assert_false(drain_c_fits(inv, arriving)); /* B's VF is a1's now */
    ((HotmigdInvHost *)g_ptr_array_index(inv->hosts, 1))->vfs_total = 2;
    ((HotmigdInvHost *)g_ptr_array_index(inv->hosts, 1))->vfs_free = 1;
    assert_true(drain_c_fits(inv, arriving));
    hotmigd_inventory_free(inv);
}

/* A source host whose hotmigd cannot be reached has its moves run here, over libvirt (this host
 * acts for it); one whose hotmigd takes the request and fails has them fail: it may have started
 * them. */
static void test_run_deputy(void **state)
{
    FakeCluster fc = {.hosts = {{.name = "A"}, {.name = "B", .hotmigd_down = TRUE},
                                {.name = "C", .hotmigd_refuses = TRUE}},
                      .n_hosts = 3};
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GPtrArray) moves = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(GMainLoop) loop = g_main_loop_new(NULL, FALSE);
    g_autoptr(HotmigdRun) run = NULL;
    GPtrArray *hosts;
    OrchOptions template;
    HotmigdMoveEnv env;
    RunWatch w = {.loop = loop, .events = g_ptr_array_new_with_free_func(g_free)};
    const GPtrArray *rm;

    cluster_now = &fc;
    fm_reset();
    hosts = config_hosts();
    orch_options_init(&template);
    env = env_for(hosts, &template);
    for (const char *const *h = (const char *const[]){"A", "B", "C", NULL}; *h; h++)
        add_host(c, *h);
    add_vm(c, "b1", "B");
    add_vm(c, "b2", "B");
    add_vm(c, "c1", "C");
    add_move(moves, "b1", "B", "A");
    add_move(moves, "b2", "B", "C");
    add_move(moves, "c1", "C", "A");
    run = hotmigd_run_new(&env, "s4", "test", c, moves, NULL, NULL, &error);
    assert_non_null(run);
    hotmigd_run_start(run, on_run, &w);
    g_main_loop_run(loop);

    /* B's moves ran here, from B's libvirt, with the destination's hotmigd; nothing was asked of
     * a hotmigd at B. */
    assert_int_equal(fm.ran->len, 2);
    assert_true(g_ptr_array_find_with_equal_func(fm.ran, "b1 B A https://A:1", g_str_equal, NULL));
    assert_true(g_ptr_array_find_with_equal_func(fm.ran, "b2 B C https://C:1", g_str_equal, NULL));
    assert_int_equal(remote.started->len, 0);
    rm = hotmigd_run_get_moves(run);
    for (guint i = 0; i < rm->len; i++) {
        const HotmigdRunMove *m = g_ptr_array_index(rm, i);

        if (g_str_equal(m->move->vm, "c1")) {
            assert_int_equal(m->move->state, POL_MOVE_FAILED);
            assert_non_null(strstr(m->move->detail, "hotmigd of source host 'C' did not start"));
            assert_string_equal(m->driven_by, "C");
        } else {
            assert_int_equal(m->move->state, POL_MOVE_DONE);
            assert_string_equal(m->driven_by, "here");
        }
    }
    g_ptr_array_unref(w.events);
    config_hosts_free(hosts);
    fm_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inventory),
        cmocka_unit_test(test_inventory_unmeasured),
        cmocka_unit_test(test_inventory_cancelled),
        cmocka_unit_test(test_inventory_agent_jobs),
        cmocka_unit_test(test_snapshot_round_trip),
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_run_refused),
        cmocka_unit_test(test_run_given_up),
        cmocka_unit_test(test_run_deputy),
        cmocka_unit_test(test_arrivals_hold_room),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
