/* hm-policies: ordering the moves of an evacuation to save the most VMs before a deadline
 * (docs/policies.md, "Evacuation before a deadline"). */
#include "policies/policies-priv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Finish times are compared with this slack so that 10.0 s fits a 10 s window whatever the
 * rounding of the sums. */
#define EVAC_EPSILON_S 1e-9

void pol_evac_options_init(PolEvacOptions *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->bandwidth_mib_s = POL_BANDWIDTH_MIB_S_DEFAULT;
    opts->overhead_s = POL_EVAC_OVERHEAD_S_DEFAULT;
    opts->concurrency = 1;
}

void pol_evacuation_free(PolEvacuation *evac)
{
    if (!evac)
        return;
    g_clear_pointer(&evac->late, g_ptr_array_unref);
    g_clear_pointer(&evac->moves, g_ptr_array_unref);
    pol_plan_free(evac->plan);
    g_free(evac);
}

static double predict(const PolVm *vm, const PolEvacOptions *opts)
{
    double bw = opts->bandwidth_mib_s > 0 ? opts->bandwidth_mib_s : POL_BANDWIDTH_MIB_S_DEFAULT;
    double dirty = vm->dirty_mib_s > 0
                       ? vm->dirty_mib_s
                       : opts->dirty_mib_s_per_vcpu * (double)vm->vcpus * vm->cpu_util;

    /* Pre-copy sends memory + what is dirtied meanwhile: memory / (bandwidth - dirty). A VM
     * that dirties as fast as the link is throttled (auto-converge): at most 10 x slower. */
    return (double)vm->memory_mib / MAX(bw - dirty, bw / 10.0) + opts->overhead_s;
}

double pol_evacuation_predict(const PolCluster *cluster, const char *vm, const PolEvacOptions *opts)
{
    gint v;

    g_return_val_if_fail(cluster != NULL && vm != NULL && opts != NULL, -1.0);
    v = GPOINTER_TO_INT(g_hash_table_lookup(cluster->vm_by_name, vm)) - 1;
    return v < 0 ? -1.0 : predict(g_ptr_array_index(cluster->vms, v), opts);
}

typedef struct {
    const PolMigration *m; /* in the drain plan */
    const PolVm *vm;
    double duration_s;
    /* Filled by simulate(): */
    guint slot;
    double start_s;
    double finish_s;
} Job;

/* Shortest first; equal: higher priority, then one job's VMs together, then by name. */
static int job_cmp(const void *pa, const void *pb)
{
    const Job *a = *(const Job *const *)pa, *b = *(const Job *const *)pb;
    int c;

    if (a->duration_s != b->duration_s)
        return a->duration_s < b->duration_s ? -1 : 1;
    if (a->vm->priority != b->vm->priority)
        return a->vm->priority > b->vm->priority ? -1 : 1;
    if ((a->vm->job == NULL) != (b->vm->job == NULL))
        return a->vm->job ? -1 : 1;
    if (a->vm->job && (c = strcmp(a->vm->job, b->vm->job)) != 0)
        return c;
    return strcmp(a->vm->name, b->vm->name);
}

/* List scheduling, as the scheduler runs a plan: each job in @order starts when a slot is
 * free, on the one free first (the lowest numbered among equals). Returns how many finish
 * within @window. */
static guint simulate(Job **order, guint n, guint k, double window, double *free_at)
{
    guint saved = 0;

    for (guint s = 0; s < k; s++)
        free_at[s] = 0.0;
    for (guint i = 0; i < n; i++) {
        guint best = 0;
        for (guint s = 1; s < k; s++) {
            if (free_at[s] < free_at[best])
                best = s;
        }
        order[i]->slot = best;
        order[i]->start_s = free_at[best];
        order[i]->finish_s = free_at[best] + order[i]->duration_s;
        free_at[best] = order[i]->finish_s;
        saved += order[i]->finish_s <= window + EVAC_EPSILON_S;
    }
    return saved;
}

typedef struct {
    Job *job;
    guint slot;
    double start_s;
} Planned;

static int planned_cmp(const void *pa, const void *pb)
{
    const Planned *a = pa, *b = pb;

    if (a->start_s != b->start_s)
        return a->start_s < b->start_s ? -1 : 1;
    return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* Packs the @m shortest jobs of @sorted into @k slots of @window seconds, first fit
 * decreasing; each slot runs its jobs shortest first. On success writes into @order the @m
 * jobs by planned start: list scheduling in that order starts every job no later than
 * planned (a slot is free at each planned start), so all @m finish in time. */
static gboolean pack(Job **sorted, guint m, guint k, double window, double *load, Job **order)
{
    g_autofree guint *bin = g_new(guint, m + 1);
    g_autofree Planned *planned = g_new(Planned, m + 1);
    guint n = 0;

    for (guint s = 0; s < k; s++)
        load[s] = 0.0;
    for (guint i = m; i-- > 0;) {
        guint s;
        for (s = 0; s < k; s++) {
            if (load[s] + sorted[i]->duration_s <= window + EVAC_EPSILON_S)
                break;
        }
        if (s == k)
            return FALSE;
        load[s] += sorted[i]->duration_s;
        bin[i] = s;
    }
    /* Per slot, shortest first: walk the jobs in increasing order. */
    for (guint s = 0; s < k; s++)
        load[s] = 0.0;
    for (guint i = 0; i < m; i++) {
        planned[n++] = (Planned){sorted[i], bin[i], load[bin[i]]};
        load[bin[i]] += sorted[i]->duration_s;
    }
    qsort(planned, n, sizeof(Planned), planned_cmp);
    for (guint i = 0; i < n; i++)
        order[i] = planned[i].job;
    return TRUE;
}

static gboolean check_options(const PolEvacOptions *o, gint64 now, gint64 deadline, GError **error)
{
    if (o->concurrency < 1 || o->concurrency > POL_EVAC_CONCURRENCY_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "evacuation: concurrency must be between 1 and %d, not %u",
                    POL_EVAC_CONCURRENCY_MAX, o->concurrency);
        return FALSE;
    }
    if (!isfinite(o->bandwidth_mib_s) || !isfinite(o->overhead_s) || o->overhead_s < 0.0 ||
        !isfinite(o->dirty_mib_s_per_vcpu) || o->dirty_mib_s_per_vcpu < 0.0) {
        g_set_error(
            error, POL_ERROR, POL_ERROR_INVALID,
            "evacuation: bandwidth, overhead and dirty rate must be finite numbers >= 0 (%g, %g, %g)",
            o->bandwidth_mib_s, o->overhead_s, o->dirty_mib_s_per_vcpu);
        return FALSE;
    }
    if (now < 0 || deadline < 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "evacuation: now and deadline must be unix times >= 0, not %" G_GINT64_FORMAT
                    " and %" G_GINT64_FORMAT,
                    now, deadline);
        return FALSE;
    }
    return TRUE;
}

/* The jobs of @drain, or NULL with POL_ERROR_INVALID when it is not a drain plan of
 * @cluster: every move takes a VM of the drained host, once, to another host. */
static GPtrArray *drain_jobs(const PolCluster *c, const PolPlan *drain, const PolEvacOptions *o,
                             GError **error)
{
    g_autoptr(GPtrArray) jobs = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    gint src;

    if (drain->policy != POL_POLICY_DRAIN || !drain->drained) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "evacuation: the plan is a %s plan, not a drain plan",
                    pol_policy_to_string(drain->policy));
        return NULL;
    }
    src = GPOINTER_TO_INT(g_hash_table_lookup(c->host_by_name, drain->drained)) - 1;
    for (guint i = 0; i < drain->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(drain->migrations, i);
        gint v = GPOINTER_TO_INT(g_hash_table_lookup(c->vm_by_name, m->vm)) - 1;
        gint to = GPOINTER_TO_INT(g_hash_table_lookup(c->host_by_name, m->to)) - 1;
        const PolVm *vm = v >= 0 ? g_ptr_array_index(c->vms, v) : NULL;
        Job *job;

        if (src < 0 || !vm || to < 0 || to == src || (gint)vm->host != src || m->extra ||
            !g_str_equal(m->from, drain->drained) || g_hash_table_contains(seen, m->vm)) {
            g_set_error(
                error, POL_ERROR, POL_ERROR_INVALID,
                "evacuation: step %u (VM '%s' from '%s' to '%s') is not a move of a VM of '%s' to another host of the cluster, once",
                i + 1, m->vm, m->from, m->to, drain->drained);
            return NULL;
        }
        g_hash_table_add(seen, m->vm);
        job = g_new0(Job, 1);
        job->m = m;
        job->vm = vm;
        job->duration_s = predict(vm, o);
        g_ptr_array_add(jobs, job);
    }
    return g_steal_pointer(&jobs);
}

/* A copy of @drain (owned) with the migrations of @order, their durations and @priority. */
static PolPlan *plan_reordered(const PolPlan *drain, Job **order, guint n, gint priority)
{
    PolPlan *plan = g_new(PolPlan, 1);

    *plan = *drain;
    plan->drained = g_strdup(drain->drained);
    plan->hosts = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < drain->hosts->len; i++)
        g_ptr_array_add(plan->hosts, g_strdup(g_ptr_array_index(drain->hosts, i)));
    plan->migrations = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    plan->duration_s = 0.0;
    for (guint i = 0; i < n; i++) {
        PolMigration *m = pol_migration_copy(order[i]->m);
        m->duration_s = order[i]->duration_s;
        m->priority = priority;
        plan->duration_s += m->duration_s;
        g_ptr_array_add(plan->migrations, m);
    }
    return plan;
}

PolEvacuation *pol_evacuation_order(const PolCluster *cluster, const PolPlan *drain,
                                    const PolEvacOptions *opts, gint64 now, gint64 deadline,
                                    GError **error)
{
    g_autoptr(GPtrArray) jobs = NULL;
    g_autofree Job **sorted = NULL;
    g_autofree Job **order = NULL;
    g_autofree double *scratch = NULL;
    PolEvacuation *evac;
    double window;
    guint n, k, saved;

    g_return_val_if_fail(cluster != NULL && drain != NULL && opts != NULL, NULL);
    if (!check_options(opts, now, deadline, error))
        return NULL;
    if (!(jobs = drain_jobs(cluster, drain, opts, error)))
        return NULL;
    n = jobs->len;
    k = opts->concurrency;
    window = deadline > 0 ? (double)(deadline - now) : INFINITY;
    sorted = g_new(Job *, n + 1);
    order = g_new(Job *, n + 1);
    scratch = g_new(double, k);
    for (guint i = 0; i < n; i++)
        sorted[i] = g_ptr_array_index(jobs, i);
    qsort(sorted, n, sizeof(Job *), job_cmp);

    /* Shortest first: optimal with one slot, and the reference with several. */
    memcpy(order, sorted, sizeof(Job *) * n);
    saved = simulate(order, n, k, window, scratch);
    /* With several slots list scheduling can lose VMs a packing saves (2 3 4 5 6 s on two
     * slots in 10 s: 4 saved, but {2,3,5} {4,6} saves all). The most VMs are the m shortest
     * for the largest m that packs; first fit decreasing tries each m down from all. */
    if (deadline > 0 && saved < n && k > 1) {
        g_autofree Job **packed = g_new(Job *, n + 1);
        double sum = 0.0;
        guint m_max = 0;

        for (guint i = 0; i < n && sum + sorted[i]->duration_s <= window * k + EVAC_EPSILON_S;
             i++) {
            sum += sorted[i]->duration_s;
            m_max = i + 1;
        }
        for (guint m = m_max; m > saved; m--) {
            if (!pack(sorted, m, k, window, scratch, packed))
                continue;
            memcpy(packed + m, sorted + m, sizeof(Job *) * (n - m));
            if (simulate(packed, n, k, window, scratch) > saved)
                memcpy(order, packed, sizeof(Job *) * n);
            break;
        }
        saved = simulate(order, n, k, window, scratch);
    }

    evac = g_new0(PolEvacuation, 1);
    evac->plan = plan_reordered(drain, order, n, opts->priority);
    evac->moves = g_ptr_array_new_with_free_func(g_free);
    evac->late = g_ptr_array_new();
    evac->concurrency = k;
    evac->now = now;
    evac->deadline = deadline;
    for (guint i = 0; i < n; i++) {
        PolEvacMove *mv = g_new0(PolEvacMove, 1);
        mv->migration = g_ptr_array_index(evac->plan->migrations, i);
        mv->slot = order[i]->slot;
        mv->start_s = order[i]->start_s;
        mv->finish_s = order[i]->finish_s;
        mv->late = mv->finish_s > window + EVAC_EPSILON_S;
        evac->makespan_s = MAX(evac->makespan_s, mv->finish_s);
        g_ptr_array_add(evac->moves, mv);
        if (mv->late)
            g_ptr_array_add(evac->late, mv);
    }
    g_assert(n - evac->late->len == saved);
    return evac;
}
