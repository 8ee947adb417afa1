/* The cluster's inventory from each host's libvirt and hotmigd (hotmigd/inventory.h). */
#include "hotmigd/inventory.h"

#include <json-glib/json-glib.h>
#include <math.h>

#include "engine/agent-client.h"
#include "engine/hotmigd-client.h"
#include "engine/json.h"
#include "engine/virt.h"
#include "hotmigd/run.h"
#include "xml/xml.h"

#define KIB_PER_MIB 1024

static void inv_host_free(HotmigdInvHost *host)
{
    if (!host)
        return;
    g_free(host->name);
    g_free(host->uri);
    g_free(host->hotmigd);
    g_free(host->state_reason);
    g_free(host);
}

static void inv_vm_free(HotmigdInvVm *vm)
{
    if (!vm)
        return;
    g_free(vm->name);
    g_free(vm->host);
    g_free(vm->job);
    g_free(vm);
}

void hotmigd_inventory_free(HotmigdInventory *inv)
{
    if (!inv)
        return;
    g_ptr_array_unref(inv->hosts);
    g_ptr_array_unref(inv->vms);
    g_ptr_array_unref(inv->warnings);
    g_free(inv);
}

/* ---- reading the hosts --------------------------------------------------------------------- */

/* One host while it is read: its connection and first sample. */
typedef struct {
    HotmigdInvHost *host; /* borrowed from the inventory */
    OrchVirt *virt;
    GPtrArray *first; /* OrchVirtDomainInfo, with XML */
} Reading;

static void reading_clear(Reading *r)
{
    orch_virt_free(r->virt);
    if (r->first)
        g_ptr_array_unref(r->first);
}

static void host_down(HotmigdInvHost *host, const char *what, const GError *error)
{
    host->state = POL_HOST_DOWN;
    g_free(host->state_reason);
    host->state_reason = g_strdup_printf("%s: %s", what, error->message);
}

/* Connects, reads the node and the first sample; FALSE when the host is down. */
static gboolean read_libvirt(Reading *r, const HotmigdInventoryOptions *opts)
{
    g_autoptr(GError) error = NULL;
    OrchVirtNodeInfo node = {0};
    HotmigdInvHost *host = r->host;

    r->virt = orch_connector_open_virt(opts->migrate_opts, host->uri, host->name, &error);
    if (!r->virt) {
        host_down(host, "libvirt does not answer", error);
        return FALSE;
    }
    if (!orch_virt_node_get_info(r->virt, &node, &error) ||
        !(r->first = orch_virt_domain_list_info(r->virt, TRUE, &error))) {
        host_down(host, "libvirt", error);
        return FALSE;
    }
    host->cpus = MIN(node.cpus, (guint)POL_CPUS_MAX);
    host->memory_mib = MIN(node.memory_kib / KIB_PER_MIB, POL_MEMORY_MIB_MAX);
    return TRUE;
}

static void read_hotmigd(HotmigdInvHost *host, const HotmigdInventoryOptions *opts)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchHotmigdClient) vfd = NULL;
    g_autoptr(OrchHotmigdHostInfo) info = NULL;

    host->hotmigd_asked = TRUE;
    if (!host->hotmigd) {
        g_set_error(&error, ORCH_ERROR, ORCH_ERROR_INVALID, "no URL known");
    } else if ((vfd = orch_connector_open_hotmigd(opts->migrate_opts, host->hotmigd, &error))) {
        info = orch_hotmigd_client_host(vfd, &error);
    }
    if (!info) {
        host->state = POL_HOST_QUARANTINED;
        host->state_reason = g_strdup_printf(
            "its hotmigd (%s) does not answer, so no VF can be leased and no move started there: %s",
            host->hotmigd ? host->hotmigd : "?", error->message);
        return;
    }
    host->hotmigd_answered = TRUE;
    host->vfs_total = info->pool_size - MIN(info->pool_size, info->counts[ORCH_VF_STATE_MISSING]);
    host->vfs_free = MIN(info->counts[ORCH_VF_STATE_FREE], host->vfs_total);
    host->vfs_total = MIN(host->vfs_total, (guint)POL_VFS_MAX);
    host->vfs_free = MIN(host->vfs_free, host->vfs_total);
}

/* What @vm's live XML @xml says: its VFs (0 with a warning when it cannot be read) and its
 * job (none, with a warning, when its id is bad). TRUE when it has no job there and its agent
 * may answer on @channel (whose processes may name one: read_agent_job()). */
static gboolean read_xml(HotmigdInvVm *vm, const char *xml, const char *alias_prefix,
                         const char *channel, const char *where, GPtrArray *warnings)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(XmlDomain) dom = xml ? xml_domain_parse(xml, &error) : NULL;
    g_autoptr(GPtrArray) vfs = dom ? xml_domain_find_vfs(dom, alias_prefix, &error) : NULL;

    g_clear_pointer(&vm->job, g_free);
    vm->vfs = vfs ? MIN(vfs->len, (guint)POL_VFS_MAX) : 0;
    if (!vfs)
        g_ptr_array_add(warnings, g_strdup_printf("%s: cannot count its VFs: %s", where,
                                                  error ? error->message : "no XML"));
    if (!dom)
        return FALSE;
    g_clear_error(&error);
    vm->job = xml_domain_get_job(dom, &error);
    if (error)
        g_ptr_array_add(warnings,
                        g_strdup_printf("%s: taken for a VM in no job: %s", where, error->message));
    return !vm->job && !error && xml_domain_channel_may_answer(dom, channel);
}

/* The job the processes @procs (OrchAgentProcess) name: the one every process that names a job
 * names (borrowed), or NULL when none names one, or when two name different ones: then
 * *ret_first and *ret_other get those two (borrowed; else NULL). */
static const char *guest_job_of(GPtrArray *procs, const char **ret_first, const char **ret_other)
{
    const char *job = NULL;

    *ret_first = *ret_other = NULL;
    for (guint i = 0; i < procs->len; i++) {
        const OrchAgentProcess *p = g_ptr_array_index(procs, i);

        if (!p->job || g_strcmp0(job, p->job) == 0)
            continue;
        if (job) {
            *ret_first = job;
            *ret_other = p->job;
            return NULL;
        }
        job = p->job;
    }
    return job;
}

/* A VM without a job in its metadata gets the job its agent reports for its registered
 * processes (the guest's view: HOTMIG_JOB, SLURM_JOB_ID, its Slurm cgroup; docs/hotmigd.md
 * "Jobs"). The channel is not taken from a client that holds it (a migration under way): the VM
 * is then in no job for this inventory, with a warning, as when the agent does not answer. */
static void read_agent_job(HotmigdInvVm *vm, OrchVirt *virt, const char *channel,
                           guint timeout_ms, const char *where, GPtrArray *warnings)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) procs =
        orch_agent_processes_unforced(virt, vm->name, channel, timeout_ms, &error);
    const char *first, *other;

    if (!procs) {
        g_ptr_array_add(warnings, g_strdup_printf("%s: no job from its agent: %s", where,
                                                  error->message));
        return;
    }
    vm->job = g_strdup(guest_job_of(procs, &first, &other));
    if (other)
        g_ptr_array_add(warnings, g_strdup_printf("%s: its processes name two jobs, '%s' and "
                                                  "'%s': taken for a VM in no job",
                                                  where, first, other));
}

static double cpu_util_of(const OrchVirtDomainInfo *a, const OrchVirtDomainInfo *b,
                          gboolean *ret_measured)
{
    gint64 wall_us = b ? b->sampled_us - a->sampled_us : 0;
    double util;

    *ret_measured = FALSE;
    if (!b || wall_us <= 0 || a->vcpus == 0 || b->cpu_time_ns < a->cpu_time_ns)
        return 1.0;
    util = (double)(b->cpu_time_ns - a->cpu_time_ns) / ((double)wall_us * 1000.0 * a->vcpus);
    if (!isfinite(util))
        return 1.0;
    *ret_measured = TRUE;
    return CLAMP(util, 0.0, 1.0);
}

/* Adds the VMs of @r (first sample, @second may be NULL) to @inv. A VM already listed (the
 * other side of a migration) replaces the earlier entry when that one is paused and this one
 * runs. */
static void add_vms(HotmigdInventory *inv, Reading *r, GPtrArray *second, GHashTable *seen,
                    const HotmigdInventoryOptions *opts)
{
    const char *channel = opts->migrate_opts->agent_channel ? opts->migrate_opts->agent_channel
                                                            : ORCH_AGENT_CHANNEL_DEFAULT;

    for (guint i = 0; i < r->first->len; i++) {
        const OrchVirtDomainInfo *a = g_ptr_array_index(r->first, i);
        const OrchVirtDomainInfo *b = NULL;
        g_autofree char *where = g_strdup_printf("VM '%s' on '%s'", a->name, r->host->name);
        HotmigdInvVm *vm;
        gpointer prev;

        for (guint j = 0; second && j < second->len && !b; j++) {
            const OrchVirtDomainInfo *c = g_ptr_array_index(second, j);

            if (g_str_equal(c->name, a->name))
                b = c;
        }
        if (g_hash_table_lookup_extended(seen, a->name, NULL, &prev)) {
            HotmigdInvVm *other = g_ptr_array_index(inv->vms, GPOINTER_TO_UINT(prev));

            g_ptr_array_add(
                inv->warnings,
                g_strdup_printf(
                    "VM '%s' runs on '%s' and '%s' (a migration under way?): counted on '%s'",
                    a->name, other->host, r->host->name, a->paused ? other->host : r->host->name));
            if (a->paused)
                continue;
            vm = other;
            g_free(vm->host);
        } else {
            vm = g_new0(HotmigdInvVm, 1);
            vm->name = g_strdup(a->name);
            g_hash_table_insert(seen, vm->name, GUINT_TO_POINTER(inv->vms->len));
            g_ptr_array_add(inv->vms, vm);
        }
        vm->host = g_strdup(r->host->name);
        vm->vcpus = CLAMP(a->vcpus, 1, (guint)POL_CPUS_MAX);
        vm->memory_mib = MIN((a->memory_kib + KIB_PER_MIB - 1) / KIB_PER_MIB, POL_MEMORY_MIB_MAX);
        vm->cpu_util = cpu_util_of(a, b, &vm->cpu_measured);
        /* A paused VM's agent cannot answer (the incoming side of a migration, one stopped). */
        if (read_xml(vm, a->xml, opts->migrate_opts->alias_prefix, channel, where,
                     inv->warnings) &&
            !a->paused)
            read_agent_job(vm, r->virt, channel, opts->migrate_opts->agent_timeout_ms, where,
                           inv->warnings);
    }
}

HotmigdInventory *hotmigd_inventory_collect(GPtrArray *hosts, const HotmigdInventoryOptions *opts,
                                            GError **error)
{
    g_autoptr(HotmigdInventory) inv = g_new0(HotmigdInventory, 1);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree Reading *readings = NULL;
    gint64 start = g_get_monotonic_time();
    gboolean cancelled = FALSE;

    g_return_val_if_fail(hosts && opts && opts->migrate_opts, NULL);
    inv->hosts = g_ptr_array_new_with_free_func((GDestroyNotify)inv_host_free);
    inv->vms = g_ptr_array_new_with_free_func((GDestroyNotify)inv_vm_free);
    inv->warnings = g_ptr_array_new_with_free_func(g_free);
    readings = g_new0(Reading, hosts->len + 1);

    for (guint i = 0; i < hosts->len; i++) {
        const HmConfigHost *spec = g_ptr_array_index(hosts, i);
        HotmigdInvHost *host = g_new0(HotmigdInvHost, 1);

        host->name = g_strdup(spec->name);
        host->uri = g_strdup(spec->uri);
        host->hotmigd = g_strdup(spec->hotmigd);
        host->state = POL_HOST_OK;
        g_ptr_array_add(inv->hosts, host);
        readings[i].host = host;
        if (read_libvirt(&readings[i], opts))
            read_hotmigd(host, opts);
    }
    if (opts->cpu_sample_ms > 0)
        cancelled = !hotmigd_run_wait_ms(opts->cpu_sample_ms, opts->cancellable);
    for (guint i = 0; i < hosts->len && !cancelled; i++) {
        Reading *r = &readings[i];
        g_autoptr(GPtrArray) second = NULL;
        g_autoptr(GError) local = NULL;
        guint used = 0;

        if (!r->first)
            continue;
        if (opts->cpu_sample_ms > 0) {
            second = orch_virt_domain_list_info(r->virt, FALSE, &local);
            if (!second)
                g_ptr_array_add(
                    inv->warnings,
                    g_strdup_printf(
                        "host '%s': the second CPU sample failed, cpu_util 1.0 for its VMs: %s",
                        r->host->name, local->message));
        }
        add_vms(inv, r, second, seen, opts);
        for (guint v = 0; v < inv->vms->len; v++) {
            HotmigdInvVm *vm = g_ptr_array_index(inv->vms, v);

            if (g_str_equal(vm->host, r->host->name))
                used += vm->vfs;
        }
        /* A host whose pool could not be read still holds its VMs' VFs. */
        if (r->host->state == POL_HOST_QUARANTINED && r->host->vfs_total < used)
            r->host->vfs_total = MIN(used, (guint)POL_VFS_MAX);
    }
    for (guint i = 0; i < hosts->len; i++)
        reading_clear(&readings[i]);
    if (cancelled) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_CANCELLED, "The inventory was cancelled");
        return NULL;
    }
    for (guint v = 0; v < inv->vms->len; v++) {
        HotmigdInvVm *vm = g_ptr_array_index(inv->vms, v);

        for (guint h = 0; h < inv->hosts->len; h++) {
            HotmigdInvHost *host = g_ptr_array_index(inv->hosts, h);

            if (g_str_equal(host->name, vm->host))
                host->vms++;
        }
    }
    inv->taken = g_get_real_time() / G_USEC_PER_SEC;
    inv->took_ms = (g_get_monotonic_time() - start) / 1000.0;
    return g_steal_pointer(&inv);
}

/* ---- the daemon's view ------------------------------------------------------------------------
 */

/* ok < quarantined < evacuating < down */
static int state_rank(PolHostState state)
{
    switch (state) {
    case POL_HOST_QUARANTINED:
        return 1;
    case POL_HOST_EVACUATING:
        return 2;
    case POL_HOST_DOWN:
        return 3;
    default:
        return 0;
    }
}

PolHostState hotmigd_inventory_host_state(const HotmigdInventory *inv, const HotmigdInvHost *host,
                                          const HotmigdInventoryView *view)
{
    gpointer value;

    if (view && view->states &&
        g_hash_table_lookup_extended(view->states, host->name, NULL, &value) &&
        state_rank(GPOINTER_TO_INT(value)) > state_rank(host->state))
        return GPOINTER_TO_INT(value);
    return host->state;
}

/* Seconds since @vm last moved, -1 when not known. */
static gint64 moved_ago(const HotmigdInvVm *vm, const HotmigdInventoryView *view)
{
    const gint64 *when = view && view->moved ? g_hash_table_lookup(view->moved, vm->name) : NULL;

    return when ? MAX(view->now - *when, 0) : -1;
}

/* The moves under way that the view names, into @arriving (HotmigdInvVm, borrowed) and, parallel
 * to it, @arriving_at (their destinations, borrowed): a VM's first arrival, when the VM is not
 * there yet. */
static void cluster_arrivals(const HotmigdInventory *inv, const HotmigdInventoryView *view,
                             GPtrArray *arriving, GPtrArray *arriving_at)
{
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);

    for (guint i = 0; view && view->arriving && i < view->arriving->len; i++) {
        const HotmigdInvArrival *a = &g_array_index(view->arriving, HotmigdInvArrival, i);

        /* The first arrival of a VM holds the room (a VM has one move under way at a time). */
        if (!g_hash_table_add(seen, (gpointer)a->vm))
            continue;
        for (guint k = 0; k < inv->vms->len; k++) {
            const HotmigdInvVm *vm = g_ptr_array_index(inv->vms, k);

            /* Not there yet (a VM already on its destination needs no stand-in). */
            if (g_str_equal(vm->name, a->vm) && g_strcmp0(vm->host, a->host) != 0) {
                g_ptr_array_add(arriving, (gpointer)vm);
                g_ptr_array_add(arriving_at, (gpointer)a->host);
            }
        }
    }
}

/* The inventory's hosts into @cluster, each in its state in @view, less the VFs the arrivals
 * will take there. */
static gboolean cluster_add_hosts(PolCluster *cluster, const HotmigdInventory *inv,
                                  const HotmigdInventoryView *view, GPtrArray *arriving,
                                  GPtrArray *arriving_at, GError **error)
{
    g_autoptr(GError) local = NULL;

    for (guint i = 0; i < inv->hosts->len; i++) {
        const HotmigdInvHost *host = g_ptr_array_index(inv->hosts, i);
        guint held = 0; /* VFs the arrivals will take there */

        for (guint k = 0; k < arriving->len; k++)
            if (g_str_equal(g_ptr_array_index(arriving_at, k), host->name))
                held += ((const HotmigdInvVm *)g_ptr_array_index(arriving, k))->vfs;
        if (!pol_cluster_add_host(cluster, host->name, host->cpus, host->memory_mib,
                                  hotmigd_inventory_host_state(inv, host, view), &local) ||
            !pol_cluster_set_host_vfs(cluster, host->name, NULL, host->vfs_total,
                                      (gint)(host->vfs_free - MIN(held, host->vfs_free)), &local)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "inventory: host '%s': %s",
                        host->name, local->message);
            return FALSE;
        }
    }
    return TRUE;
}

/* The inventory's VMs into @cluster, each with the time since it last moved. */
static gboolean cluster_add_vms(PolCluster *cluster, const HotmigdInventory *inv,
                                const HotmigdInventoryView *view, GError **error)
{
    g_autoptr(GError) local = NULL;

    for (guint i = 0; i < inv->vms->len; i++) {
        const HotmigdInvVm *vm = g_ptr_array_index(inv->vms, i);
        PolVmSpec spec = {
            .name = vm->name,
            .host = vm->host,
            .vcpus = vm->vcpus,
            .memory_mib = vm->memory_mib,
            .cpu_util = vm->cpu_util,
            .vfs = vm->vfs,
            .job = vm->job,
            .moved_ago_s = moved_ago(vm, view),
        };

        if (!pol_cluster_add_vm(cluster, &spec, &local)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "inventory: %s", local->message);
            return FALSE;
        }
    }
    return TRUE;
}

/* A stand-in of each arriving VM (@arriving, at @arriving_at) into @cluster, pinned to its
 * destination: the room its move holds there. */
static gboolean cluster_add_arrivals(PolCluster *cluster, GPtrArray *arriving,
                                     GPtrArray *arriving_at, GError **error)
{
    g_autoptr(GError) local = NULL;

    for (guint k = 0; k < arriving->len; k++) {
        const HotmigdInvVm *vm = g_ptr_array_index(arriving, k);
        g_autofree char *name = g_strdup_printf("%.200s/arriving/%u", vm->name, k);
        PolVmSpec spec = {
            .name = name,
            .host = g_ptr_array_index(arriving_at, k),
            .vcpus = vm->vcpus,
            .memory_mib = vm->memory_mib,
            .cpu_util = vm->cpu_util,
            .vfs = vm->vfs,
            .pinned = TRUE,
            .moved_ago_s = -1,
        };

        if (!pol_cluster_add_vm(cluster, &spec, &local)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "inventory: %s", local->message);
            return FALSE;
        }
    }
    return TRUE;
}

PolCluster *hotmigd_inventory_to_cluster(const HotmigdInventory *inv,
                                         const HotmigdInventoryView *view, GError **error)
{
    g_autoptr(PolCluster) cluster = pol_cluster_new();
    g_autoptr(GPtrArray) arriving = g_ptr_array_new();    /* HotmigdInvVm, parallel to: */
    g_autoptr(GPtrArray) arriving_at = g_ptr_array_new(); /* const char *: their hosts */

    cluster_arrivals(inv, view, arriving, arriving_at);
    if (!cluster_add_hosts(cluster, inv, view, arriving, arriving_at, error) ||
        !cluster_add_vms(cluster, inv, view, error) ||
        !cluster_add_arrivals(cluster, arriving, arriving_at, error))
        return NULL;
    return g_steal_pointer(&cluster);
}

char *hotmigd_inventory_format_snapshot(const HotmigdInventory *inv,
                                        const HotmigdInventoryView *view, gboolean pretty)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (guint i = 0; i < inv->hosts->len; i++) {
        const HotmigdInvHost *host = g_ptr_array_index(inv->hosts, i);
        PolHostState state = hotmigd_inventory_host_state(inv, host, view);

        json_builder_begin_object(b);
        orch_json_member_string(b, "name", host->name);
        orch_json_member_int(b, "cpus", host->cpus);
        orch_json_member_int(b, "memory_mib", (gint64)host->memory_mib);
        orch_json_member_int(b, "vfs", host->vfs_total);
        orch_json_member_int(b, "vfs_free", host->vfs_free);
        orch_json_member_string(b, "state", pol_host_state_to_string(state));
        if (host->state_reason)
            orch_json_member_string(b, "state_reason", host->state_reason);
        orch_json_member_int(b, "running_vms", host->vms);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "vms");
    json_builder_begin_array(b);
    for (guint i = 0; i < inv->vms->len; i++) {
        const HotmigdInvVm *vm = g_ptr_array_index(inv->vms, i);
        gint64 ago = moved_ago(vm, view);

        json_builder_begin_object(b);
        orch_json_member_string(b, "name", vm->name);
        orch_json_member_string(b, "host", vm->host);
        orch_json_member_int(b, "vcpus", vm->vcpus);
        orch_json_member_int(b, "memory_mib", (gint64)vm->memory_mib);
        orch_json_member_double(b, "cpu_util", vm->cpu_util);
        orch_json_member_bool(b, "cpu_measured", vm->cpu_measured);
        orch_json_member_int(b, "vfs", vm->vfs);
        if (vm->job)
            orch_json_member_string(b, "job", vm->job);
        if (ago >= 0)
            orch_json_member_int(b, "moved_ago_s", ago);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    orch_json_member_time(b, "taken", inv->taken);
    orch_json_member_double(b, "took_ms", round(inv->took_ms * 10.0) / 10.0);
    json_builder_set_member_name(b, "warnings");
    json_builder_begin_array(b);
    for (guint i = 0; i < inv->warnings->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(inv->warnings, i));
    json_builder_end_array(b);
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}
