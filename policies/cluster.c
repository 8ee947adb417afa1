/* hm-policies: the cluster model (hosts, VFs per model, VMs) and the planning problem. */
#include "policies/policies-priv.h"

#include "common/config.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(hm-policies-error-quark, pol_error)

HM_ENUM_IMPL(pol_host_state, PolHostState, POL_HOST_STATE_LAST, "ok", "quarantined",
             "evacuating", "down")
HM_ENUM_IMPL(pol_policy, PolPolicy, POL_POLICY_LAST, "consolidate", "drain", "balance")

static void pol_host_free(PolHost *host)
{
    if (!host)
        return;
    g_free(host->name);
    g_array_unref(host->vfs);
    g_free(host);
}

static void pol_vm_free(PolVm *vm)
{
    if (!vm)
        return;
    g_free(vm->name);
    g_free(vm->job);
    g_free(vm);
}

PolCluster *pol_cluster_new(void)
{
    PolCluster *c = g_new0(PolCluster, 1);

    c->hosts = g_ptr_array_new_with_free_func((GDestroyNotify)pol_host_free);
    c->host_by_name = g_hash_table_new(g_str_hash, g_str_equal);
    c->vms = g_ptr_array_new_with_free_func((GDestroyNotify)pol_vm_free);
    c->vm_by_name = g_hash_table_new(g_str_hash, g_str_equal);
    c->models = g_ptr_array_new_with_free_func(g_free);
    c->model_by_name = g_hash_table_new(g_str_hash, g_str_equal);
    g_ptr_array_add(c->models, g_strdup(""));
    g_hash_table_insert(c->model_by_name, g_ptr_array_index(c->models, 0), GUINT_TO_POINTER(1));
    return c;
}

void pol_cluster_free(PolCluster *c)
{
    if (!c)
        return;
    /* The tables borrow their keys from the arrays. */
    g_hash_table_unref(c->host_by_name);
    g_hash_table_unref(c->vm_by_name);
    g_hash_table_unref(c->model_by_name);
    g_ptr_array_unref(c->hosts);
    g_ptr_array_unref(c->vms);
    g_ptr_array_unref(c->models);
    g_free(c);
}

guint pol_cluster_get_n_hosts(const PolCluster *c)
{
    return c->hosts->len;
}

guint pol_cluster_get_n_vms(const PolCluster *c)
{
    return c->vms->len;
}

static gboolean check_name(const char *what, const char *name, GError **error)
{
    if (!name || !*name) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "%s: the name is empty", what);
        return FALSE;
    }
    if (strlen(name) > POL_NAME_MAX || !g_utf8_validate(name, -1, NULL)) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "%s: the name is not UTF-8 of at most %d bytes", what, POL_NAME_MAX);
        return FALSE;
    }
    return TRUE;
}

static gint lookup(GHashTable *table, const char *name)
{
    return GPOINTER_TO_INT(g_hash_table_lookup(table, name)) - 1;
}

gboolean pol_cluster_add_host(PolCluster *c, const char *name, guint cpus, guint64 memory_mib,
                              PolHostState state, GError **error)
{
    PolHost *host;

    g_return_val_if_fail(c != NULL, FALSE);
    if (!check_name("host", name, error))
        return FALSE;
    if (lookup(c->host_by_name, name) >= 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "host '%s' is listed twice", name);
        return FALSE;
    }
    if (c->hosts->len >= POL_HOSTS_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "host '%s': more than %d hosts", name,
                    POL_HOSTS_MAX);
        return FALSE;
    }
    if (cpus > POL_CPUS_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "host '%s': cpus must be at most %d, not %u", name, POL_CPUS_MAX, cpus);
        return FALSE;
    }
    if (memory_mib > POL_MEMORY_MIB_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "host '%s': memory_mib must be at most %" G_GUINT64_FORMAT ", not %" G_GUINT64_FORMAT,
                    name, POL_MEMORY_MIB_MAX, memory_mib);
        return FALSE;
    }
    if ((int)state < 0 || state >= POL_HOST_STATE_LAST) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "host '%s': bad state %d", name,
                    (int)state);
        return FALSE;
    }
    host = g_new0(PolHost, 1);
    host->name = g_strdup(name);
    host->cpus = cpus;
    host->memory_mib = memory_mib;
    host->state = state;
    host->vfs = g_array_new(FALSE, TRUE, sizeof(PolHostVfs));
    g_ptr_array_add(c->hosts, host);
    g_hash_table_insert(c->host_by_name, host->name, GUINT_TO_POINTER(c->hosts->len));
    return TRUE;
}

/* The index of @model, added when @add and new; -1 when unknown and !@add. */
static gint model_index(PolCluster *c, const char *model, gboolean add)
{
    gint i;

    if (!model)
        model = "";
    i = lookup(c->model_by_name, model);
    if (i >= 0 || !add)
        return i;
    g_ptr_array_add(c->models, g_strdup(model));
    g_hash_table_insert(c->model_by_name, g_ptr_array_index(c->models, c->models->len - 1),
                        GUINT_TO_POINTER(c->models->len));
    return (gint)c->models->len - 1;
}

gboolean pol_cluster_set_host_vfs(PolCluster *c, const char *host, const char *model,
                                  guint total, gint free, GError **error)
{
    gint h;
    PolHost *ph;
    PolHostVfs entry = {0};

    g_return_val_if_fail(c != NULL && host != NULL, FALSE);
    h = lookup(c->host_by_name, host);
    if (h < 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_NOT_FOUND, "unknown host '%s'", host);
        return FALSE;
    }
    if (model && *model && !check_name("VF model", model, error))
        return FALSE;
    if (total > POL_VFS_MAX || (free >= 0 && (guint)free > total)) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "host '%s': vfs must be at most %d and free VFs at most vfs (%u, %d)", host,
                    POL_VFS_MAX, total, free);
        return FALSE;
    }
    ph = g_ptr_array_index(c->hosts, h);
    entry.model = (guint)model_index(c, model, TRUE);
    entry.total = total;
    entry.free = free;
    for (guint i = 0; i < ph->vfs->len; i++) {
        PolHostVfs *e = &g_array_index(ph->vfs, PolHostVfs, i);
        if (e->model == entry.model) {
            *e = entry;
            return TRUE;
        }
    }
    g_array_append_val(ph->vfs, entry);
    return TRUE;
}

gboolean pol_cluster_add_vm(PolCluster *c, const PolVmSpec *spec, GError **error)
{
    PolVm *vm;
    gint h;

    g_return_val_if_fail(c != NULL && spec != NULL, FALSE);
    if (!check_name("VM", spec->name, error))
        return FALSE;
    if (lookup(c->vm_by_name, spec->name) >= 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "VM '%s' is listed twice", spec->name);
        return FALSE;
    }
    if (c->vms->len >= POL_VMS_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "VM '%s': more than %d VMs",
                    spec->name, POL_VMS_MAX);
        return FALSE;
    }
    h = spec->host ? lookup(c->host_by_name, spec->host) : -1;
    if (h < 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_NOT_FOUND, "VM '%s': unknown host '%s'",
                    spec->name, spec->host ? spec->host : "(none)");
        return FALSE;
    }
    if (spec->vcpus == 0 || spec->vcpus > POL_CPUS_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "VM '%s': vcpus must be between 1 and %d, not %u", spec->name, POL_CPUS_MAX,
                    spec->vcpus);
        return FALSE;
    }
    if (spec->memory_mib > POL_MEMORY_MIB_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "VM '%s': memory_mib must be at most %" G_GUINT64_FORMAT ", not %" G_GUINT64_FORMAT,
                    spec->name, POL_MEMORY_MIB_MAX, spec->memory_mib);
        return FALSE;
    }
    if (!isfinite(spec->cpu_util) || spec->cpu_util < 0.0 || spec->cpu_util > 1.0) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "VM '%s': cpu_util must be between 0 and 1, not %g", spec->name,
                    spec->cpu_util);
        return FALSE;
    }
    if (spec->vfs > POL_VFS_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "VM '%s': vfs must be at most %d, not %u",
                    spec->name, POL_VFS_MAX, spec->vfs);
        return FALSE;
    }
    if (!isfinite(spec->dirty_mib_s) || spec->dirty_mib_s < 0.0) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "VM '%s': dirty_mib_s must be a number >= 0, not %g", spec->name,
                    spec->dirty_mib_s);
        return FALSE;
    }
    if (spec->vf_model && *spec->vf_model && !check_name("VF model", spec->vf_model, error))
        return FALSE;
    if (spec->job && !check_name("job", spec->job, error))
        return FALSE;

    vm = g_new0(PolVm, 1);
    vm->name = g_strdup(spec->name);
    vm->host = (guint)h;
    vm->vcpus = spec->vcpus;
    vm->memory_mib = spec->memory_mib;
    vm->cpu_util = spec->cpu_util;
    vm->vfs = spec->vfs;
    vm->vf_model = (guint)model_index(c, spec->vf_model, TRUE);
    vm->job = g_strdup(spec->job);
    vm->pinned = spec->pinned;
    vm->moved_ago_s = spec->moved_ago_s;
    vm->priority = spec->priority;
    vm->dirty_mib_s = spec->dirty_mib_s;
    g_ptr_array_add(c->vms, vm);
    g_hash_table_insert(c->vm_by_name, vm->name, GUINT_TO_POINTER(c->vms->len));
    return TRUE;
}

void pol_options_init(PolOptions *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->bandwidth_mib_s = POL_BANDWIDTH_MIB_S_DEFAULT;
    opts->balance_tolerance = POL_BALANCE_TOLERANCE_DEFAULT;
    {
        /* The default is written once, in the configuration schema. */
        g_autoptr(HmConfig) defaults = hm_config_new();
        opts->host_value = (guint)hm_config_get_uint(defaults, HM_CONFIG_SCHEDULER_HOST_VALUE);
        opts->cpu_allocation =
            (guint)hm_config_get_uint(defaults, HM_CONFIG_SCHEDULER_CPU_ALLOCATION);
    }
}

char *pol_vm_blocked_reason(const PolCluster *c, guint v, const PolOptions *opts)
{
    const PolVm *vm = g_ptr_array_index(c->vms, v);
    const PolHost *host = g_ptr_array_index(c->hosts, vm->host);

    if (vm->pinned)
        return g_strdup_printf("VM '%s' is pinned to '%s'", vm->name, host->name);
    if (host->state == POL_HOST_DOWN)
        return g_strdup_printf("VM '%s' is on '%s', which is down", vm->name, host->name);
    if (opts->min_stay_s > 0 && vm->moved_ago_s >= 0 && vm->moved_ago_s < (gint64)opts->min_stay_s)
        return g_strdup_printf("VM '%s' moved %" G_GINT64_FORMAT " s ago, less than the minimum stay of %u s",
                               vm->name, vm->moved_ago_s, opts->min_stay_s);
    return NULL;
}

/* ---- the planning problem ---------------------------------------------------------------- */

static gint64 vm_cpu_demand(const PolVm *vm, const PolOptions *opts)
{
    if (opts->pack_by_vcpus)
        return (gint64)vm->vcpus * 1000;
    /* Millicores, rounded up so that a set that fits here fits in real numbers too. */
    return (gint64)ceil((double)vm->vcpus * vm->cpu_util * 1000.0 - 1e-6);
}

void pol_problem_free(PolProblem *p)
{
    if (!p)
        return;
    g_free(p->cap);
    g_free(p->vm_dem);
    g_free(p->unit_dem);
    g_free(p->vm_unit);
    g_free(p->unit_host);
    g_free(p->unit_first);
    g_free(p->unit_vms);
    g_free(p->unit_fixed);
    g_free(p->accepts);
    g_free(p->active);
    g_free(p);
}

/* Each VM's demand and each host's capacity (the VFs free or held by our VMs), whether it
 * accepts VMs and is up. */
static void problem_demands(PolProblem *p, const PolCluster *c, const PolOptions *opts)
{
    const guint D = p->dims;
    g_autofree gint64 *used_vfs = g_new0(gint64, (gsize)p->n_hosts * D);
    /* Percent of a host's CPUs its VMs may demand; the configuration bounds it to 10..1600. */
    const gint64 allocation = opts->cpu_allocation ? MIN(opts->cpu_allocation, POL_CPU_ALLOCATION_MAX) : 100;

    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        gint64 *d = p->vm_dem + (gsize)v * D;

        d[POL_DIM_CPU] = vm_cpu_demand(vm, opts);
        d[POL_DIM_MEM] = (gint64)vm->memory_mib;
        d[POL_DIM_VF0 + vm->vf_model] = vm->vfs;
        used_vfs[(gsize)vm->host * D + POL_DIM_VF0 + vm->vf_model] += vm->vfs;
    }
    for (guint h = 0; h < p->n_hosts; h++) {
        const PolHost *host = g_ptr_array_index(c->hosts, h);
        gint64 *cap = p->cap + (gsize)h * D;

        cap[POL_DIM_CPU] = (gint64)host->cpus * 10 * allocation;
        cap[POL_DIM_MEM] = (gint64)host->memory_mib;
        for (guint i = 0; i < host->vfs->len; i++) {
            const PolHostVfs *e = &g_array_index(host->vfs, PolHostVfs, i);
            gint64 used = used_vfs[(gsize)h * D + POL_DIM_VF0 + e->model];
            gint64 avail = e->total;

            /* VFs neither free nor held by our VMs are reserved for something else. */
            if (e->free >= 0)
                avail = MIN((gint64)e->total, (gint64)e->free + used);
            cap[POL_DIM_VF0 + e->model] = avail;
        }
        p->accepts[h] = host->state == POL_HOST_OK;
        p->active[h] = host->state != POL_HOST_DOWN;
    }
}

/* With keep_jobs_together: each VM's unit, the VMs of a job in one when they all run on one
 * host and none is blocked (a job spread over hosts is not gathered). */
static void problem_job_units(PolProblem *p, const PolCluster *c, const PolOptions *opts)
{
    g_autoptr(GHashTable) job_ok = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) job_unit = g_hash_table_new(g_str_hash, g_str_equal);

    /* A job may form one unit when its VMs share a host and none is blocked. */
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        g_autofree char *why = NULL;
        gpointer prev;

        if (!vm->job)
            continue;
        why = pol_vm_blocked_reason(c, v, opts);
        if (!g_hash_table_lookup_extended(job_ok, vm->job, NULL, &prev))
            g_hash_table_insert(job_ok, vm->job, GUINT_TO_POINTER(why ? 0 : vm->host + 1));
        else if (GPOINTER_TO_UINT(prev) != vm->host + 1 || why)
            g_hash_table_insert(job_ok, vm->job, GUINT_TO_POINTER(0));
    }
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        gpointer u;

        if (vm->job && g_hash_table_lookup(job_ok, vm->job)) {
            if (g_hash_table_lookup_extended(job_unit, vm->job, NULL, &u)) {
                p->vm_unit[v] = GPOINTER_TO_UINT(u);
                continue;
            }
            g_hash_table_insert(job_unit, vm->job, GUINT_TO_POINTER(p->n_units));
        }
        p->vm_unit[v] = p->n_units++;
    }
}

/* The units' VMs, hosts, demands and whether they may move. */
static void problem_units(PolProblem *p, const PolCluster *c, const PolOptions *opts)
{
    const guint D = p->dims;
    g_autofree guint *count = g_new0(guint, p->n_vms + 1);

    p->unit_host = g_new0(guint, p->n_vms + 1);
    p->unit_fixed = g_new0(guint8, p->n_vms + 1);
    if (opts->keep_jobs_together) {
        problem_job_units(p, c, opts);
    } else {
        for (guint v = 0; v < p->n_vms; v++)
            p->vm_unit[v] = p->n_units++;
    }
    p->unit_dem = g_new0(gint64, (gsize)p->n_units * D + 1);
    p->unit_first = g_new0(guint, p->n_units + 1);
    p->unit_vms = g_new0(guint, p->n_vms + 1);
    for (guint v = 0; v < p->n_vms; v++)
        count[p->vm_unit[v]]++;
    for (guint u = 0; u < p->n_units; u++)
        p->unit_first[u + 1] = p->unit_first[u] + count[u];
    memset(count, 0, sizeof(guint) * p->n_units);
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        guint u = p->vm_unit[v];
        g_autofree char *why = pol_vm_blocked_reason(c, v, opts);

        p->unit_vms[p->unit_first[u] + count[u]++] = v;
        p->unit_host[u] = vm->host;
        /* A quarantined host keeps its VMs (only drain moves them: it ignores this flag). */
        if (why || ((PolHost *)g_ptr_array_index(c->hosts, vm->host))->state == POL_HOST_QUARANTINED)
            p->unit_fixed[u] = TRUE;
        for (guint d = 0; d < D; d++)
            p->unit_dem[(gsize)u * D + d] += p->vm_dem[(gsize)v * D + d];
    }
}

PolProblem *pol_problem_new(const PolCluster *c, const PolOptions *opts)
{
    g_autoptr(PolProblem) p = g_new0(PolProblem, 1);
    guint D;

    p->cluster = c;
    p->dims = D = POL_DIM_VF0 + c->models->len;
    p->n_hosts = c->hosts->len;
    p->n_vms = c->vms->len;
    p->cap = g_new0(gint64, (gsize)p->n_hosts * D);
    p->vm_dem = g_new0(gint64, (gsize)p->n_vms * D);
    p->vm_unit = g_new0(guint, p->n_vms + 1);
    p->accepts = g_new0(guint8, p->n_hosts + 1);
    p->active = g_new0(guint8, p->n_hosts + 1);
    problem_demands(p, c, opts);
    /* Units: a VM on its own, or with keep_jobs_together every VM of a job when they all run
     * on one host and all may move (a job spread over hosts is not gathered). */
    problem_units(p, c, opts);
    return g_steal_pointer(&p);
}
