/* hm-policies: the planners (consolidate, drain, balance), move ordering and plan checking.
 * The algorithms are described in docs/policies.md. */
#include "policies/pack-priv.h"

#include <math.h>
#include <string.h>

/* ---- plans ------------------------------------------------------------------------------- */

void pol_migration_free(PolMigration *m)
{
    if (!m)
        return;
    g_free(m->vm);
    g_free(m->from);
    g_free(m->to);
    g_free(m);
}

PolMigration *pol_migration_copy(const PolMigration *m)
{
    PolMigration *copy = g_new(PolMigration, 1);

    *copy = *m;
    copy->vm = g_strdup(m->vm);
    copy->from = g_strdup(m->from);
    copy->to = g_strdup(m->to);
    return copy;
}

void pol_plan_free(PolPlan *plan)
{
    if (!plan)
        return;
    g_free(plan->drained);
    g_clear_pointer(&plan->migrations, g_ptr_array_unref);
    g_clear_pointer(&plan->hosts, g_ptr_array_unref);
    g_clear_pointer(&plan->front, g_array_unref);
    g_free(plan);
}

static PolMigration *migration_new(const PolProblem *p, guint v, guint from, guint to,
                                   gboolean extra, const PolOptions *opts)
{
    const PolCluster *c = p->cluster;
    const PolVm *vm = g_ptr_array_index(c->vms, v);
    PolMigration *m = g_new0(PolMigration, 1);
    double bw = opts->bandwidth_mib_s > 0 ? opts->bandwidth_mib_s : POL_BANDWIDTH_MIB_S_DEFAULT;

    m->vm = g_strdup(vm->name);
    m->from = g_strdup(((PolHost *)g_ptr_array_index(c->hosts, from))->name);
    m->to = g_strdup(((PolHost *)g_ptr_array_index(c->hosts, to))->name);
    m->memory_mib = vm->memory_mib;
    m->duration_s = (double)vm->memory_mib / bw;
    m->extra = extra;
    return m;
}

static double host_load(const PolProblem *p, const gint64 *used, guint h)
{
    const guint D = p->dims;
    double load = 0.0;

    for (guint d = 0; d < D; d++) {
        gint64 cap = p->cap[(gsize)h * D + d], u = used[(gsize)h * D + d];
        if (cap > 0)
            load = MAX(load, (double)u / (double)cap);
        else if (u > 0)
            load = MAX(load, 1e9);
    }
    return load;
}

/* Fills the summary fields of @plan from the VMs' hosts before (the cluster) and after. */
static void plan_summarize(PolPlan *plan, const PolProblem *p, const guint *vm_final,
                           guint lower_bound, gint64 start_us)
{
    const PolCluster *c = p->cluster;
    const guint D = p->dims;
    g_autofree gint64 *before = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    g_autofree gint64 *after = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    g_autofree guint *n_before = g_new0(guint, p->n_hosts + 1);
    g_autofree guint *n_after = g_new0(guint, p->n_hosts + 1);

    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        for (guint d = 0; d < D; d++) {
            before[(gsize)vm->host * D + d] += p->vm_dem[(gsize)v * D + d];
            after[(gsize)vm_final[v] * D + d] += p->vm_dem[(gsize)v * D + d];
        }
        n_before[vm->host]++;
        n_after[vm_final[v]]++;
    }
    plan->hosts = g_ptr_array_new_with_free_func(g_free);
    for (guint h = 0; h < p->n_hosts; h++) {
        if (!p->active[h])
            continue;
        if (n_before[h])
            plan->hosts_before++;
        if (n_after[h])
            g_ptr_array_add(plan->hosts,
                            g_strdup(((PolHost *)g_ptr_array_index(c->hosts, h))->name));
        plan->max_load_before = MAX(plan->max_load_before, host_load(p, before, h));
        plan->max_load_after = MAX(plan->max_load_after, host_load(p, after, h));
    }
    plan->hosts_used = plan->hosts->len;
    plan->lower_bound = lower_bound;
    for (guint i = 0; i < plan->migrations->len; i++) {
        PolMigration *m = g_ptr_array_index(plan->migrations, i);
        plan->duration_s += m->duration_s;
        plan->extra_moves += m->extra;
        plan->moved_mib += m->memory_mib;
    }
    plan->plan_ms = (double)(g_get_monotonic_time() - start_us) / 1000.0;
}

static PolPlan *plan_new(PolPolicy policy)
{
    PolPlan *plan = g_new0(PolPlan, 1);

    plan->policy = policy;
    plan->migrations = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    return plan;
}

static void opts_or_default(const PolOptions **opts, PolOptions *storage)
{
    if (!*opts) {
        pol_options_init(storage);
        *opts = storage;
    }
}

/* ---- ordering moves ---------------------------------------------------------------------- */

static gboolean vm_fits(const PolProblem *p, const gint64 *used, guint v, guint h)
{
    const guint D = p->dims;

    for (guint d = 0; d < D; d++) {
        if (used[(gsize)h * D + d] + p->vm_dem[(gsize)v * D + d] > p->cap[(gsize)h * D + d] &&
            p->vm_dem[(gsize)v * D + d] > 0)
            return FALSE;
    }
    return TRUE;
}

static void vm_shift(const PolProblem *p, gint64 *used, guint v, guint from, guint to)
{
    const guint D = p->dims;

    for (guint d = 0; d < D; d++) {
        used[(gsize)from * D + d] -= p->vm_dem[(gsize)v * D + d];
        used[(gsize)to * D + d] += p->vm_dem[(gsize)v * D + d];
    }
}

/* The moves being ordered: where each VM is, what each host holds, the moves that wait for
 * room on a host, and a queue of the moves to try. */
typedef struct {
    const PolProblem *p;
    const guint *vm_final;
    const PolOptions *opts;
    GPtrArray *out;      /* PolMigration, in order */
    gint64 *used;        /* per host * dims */
    guint *cur;          /* per VM: its host now */
    guint *mv;           /* move -> VM */
    guint n, n_done, scan;
    guint8 *done;        /* per move */
    guint8 *queued;      /* per move: in the queue */
    gint *wait_head;     /* per host: the first move waiting for room there, -1: none */
    gint *wait_next;     /* per move: the next one waiting for the same host */
    guint *queue;        /* a ring of qcap moves */
    gsize qhead, qtail, qcap;
} MoveOrder;

static void move_order_clear(MoveOrder *o)
{
    g_clear_pointer(&o->out, g_ptr_array_unref);
    g_free(o->used);
    g_free(o->cur);
    g_free(o->mv);
    g_free(o->done);
    g_free(o->queued);
    g_free(o->wait_head);
    g_free(o->wait_next);
    g_free(o->queue);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MoveOrder, move_order_clear)

/* Every VM where it is, the moves to make, each queued once. */
static void move_order_init(MoveOrder *o)
{
    const PolProblem *p = o->p;
    const guint D = p->dims;

    o->out = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    o->used = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    o->cur = g_new(guint, p->n_vms + 1);
    o->mv = g_new(guint, p->n_vms + 1);
    o->wait_head = g_new(gint, p->n_hosts + 1);
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(p->cluster->vms, v);
        o->cur[v] = vm->host;
        for (guint d = 0; d < D; d++)
            o->used[(gsize)vm->host * D + d] += p->vm_dem[(gsize)v * D + d];
        if (o->vm_final[v] != vm->host)
            o->mv[o->n++] = v;
    }
    o->done = g_new0(guint8, o->n + 1);
    o->queued = g_new0(guint8, o->n + 1);
    o->wait_next = g_new(gint, o->n + 1);
    for (guint h = 0; h < p->n_hosts; h++)
        o->wait_head[h] = -1;
    /* Each move enters the queue once at the start and once per wake-up of its destination;
     * a ring of n + 1 slots holds them since a move is queued at most once at a time. */
    o->qcap = o->n + 1;
    o->queue = g_new(guint, o->qcap);
    for (guint m = 0; m < o->n; m++) {
        o->queue[o->qtail++] = m;
        o->queued[m] = TRUE;
    }
    o->qtail %= o->qcap;
}

/* @host has more room now: queue the moves waiting for it. */
static void move_order_wake(MoveOrder *o, guint host)
{
    for (gint w = o->wait_head[host]; w >= 0; w = o->wait_next[w]) {
        if (!o->done[w] && !o->queued[w]) {
            o->queue[o->qtail] = (guint)w;
            o->qtail = (o->qtail + 1) % o->qcap;
            o->queued[w] = TRUE;
        }
    }
    o->wait_head[host] = -1;
}

/* Makes the queued moves that fit; the others wait for room on their destination. */
static void move_order_run_queue(MoveOrder *o)
{
    const PolProblem *p = o->p;

    while (o->qhead != o->qtail) {
        guint m = o->queue[o->qhead], v = o->mv[m], from = o->cur[v], to = o->vm_final[v];
        o->qhead = (o->qhead + 1) % o->qcap;
        o->queued[m] = FALSE;
        if (o->done[m])
            continue;
        if (!vm_fits(p, o->used, v, to)) {
            o->wait_next[m] = o->wait_head[to];
            o->wait_head[to] = (gint)m;
            continue;
        }
        vm_shift(p, o->used, v, from, to);
        o->cur[v] = to;
        o->done[m] = TRUE;
        o->n_done++;
        g_ptr_array_add(o->out, migration_new(p, v, from, to, FALSE, o->opts));
        move_order_wake(o, from);
    }
}

/* Every move left waits for another: a cycle. Detours the first one left whose VM has not
 * detoured yet (one detour per VM) through a host that has room now. FALSE with @error when
 * there is none. */
static gboolean move_order_detour(MoveOrder *o, GError **error)
{
    const PolProblem *p = o->p;
    const PolCluster *c = p->cluster;
    guint m, v = 0, from = 0, t = p->n_hosts;

    while (o->scan < o->n &&
           (o->done[o->scan] ||
            o->cur[o->mv[o->scan]] != ((PolVm *)g_ptr_array_index(c->vms, o->mv[o->scan]))->host))
        o->scan++;
    m = o->scan;
    if (m < o->n) {
        v = o->mv[m];
        from = o->cur[v];
        for (t = 0; t < p->n_hosts; t++) {
            if (t != from && t != o->vm_final[v] && p->accepts[t] && vm_fits(p, o->used, v, t))
                break;
        }
    }
    if (t == p->n_hosts) {
        for (m = 0; o->done[m]; m++)
            ;
        v = o->mv[m];
        g_set_error(error, POL_ERROR, POL_ERROR_NO_ROOM,
                    "cannot order the moves without overcommitting a host: VM '%s' waits for room on '%s' and no other host can take it meanwhile",
                    ((PolVm *)g_ptr_array_index(c->vms, v))->name,
                    ((PolHost *)g_ptr_array_index(c->hosts, o->vm_final[v]))->name);
        return FALSE;
    }
    vm_shift(p, o->used, v, from, t);
    o->cur[v] = t;
    g_ptr_array_add(o->out, migration_new(p, v, from, t, TRUE, o->opts));
    move_order_wake(o, from);
    return TRUE;
}

GPtrArray *pol_moves_order(const PolProblem *p, const guint *vm_final, const PolOptions *opts,
                           GError **error)
{
    g_auto(MoveOrder) o = {.p = p, .vm_final = vm_final, .opts = opts};

    move_order_init(&o);
    while (o.n_done < o.n) {
        move_order_run_queue(&o);
        if (o.n_done == o.n)
            break;
        if (!move_order_detour(&o, error))
            return NULL;
    }
    return g_steal_pointer(&o.out);
}

/* ---- shared set-up ----------------------------------------------------------------------- */

typedef struct {
    guint dom;
    double *weight; /* dims: tightness of each dimension */
    gint64 *ref;    /* dims: the largest capacity of an accepting host */
} PolShape;

static void shape_clear(PolShape *s)
{
    g_free(s->weight);
    g_free(s->ref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(PolShape, shape_clear)

/* The tightest dimension (total demand / total capacity of the accepting hosts) and the
 * weights of the weighted sort key. */
static void shape_init(PolShape *s, const PolProblem *p)
{
    const guint D = p->dims;
    double best = -1.0;

    s->weight = g_new0(double, D);
    s->ref = g_new0(gint64, D);
    for (guint d = 0; d < D; d++) {
        gint64 cap = 0, dem = 0;
        for (guint h = 0; h < p->n_hosts; h++) {
            if (p->accepts[h]) {
                cap += p->cap[(gsize)h * D + d];
                s->ref[d] = MAX(s->ref[d], p->cap[(gsize)h * D + d]);
            }
        }
        for (guint u = 0; u < p->n_units; u++)
            dem += p->unit_dem[(gsize)u * D + d];
        s->weight[d] = cap > 0 ? (double)dem / (double)cap : (dem > 0 ? 1.0 : 0.0);
        if (s->weight[d] > best) {
            best = s->weight[d];
            s->dom = d;
        }
    }
}

static PolPlan *plan_finish(PolPlan *plan_in, const PolProblem *p, const guint *vm_final,
                            const PolOptions *opts, gint64 start_us, GError **error)
{
    g_autoptr(PolPlan) plan = plan_in;
    g_autoptr(GPtrArray) moves = pol_moves_order(p, vm_final, opts, error);

    if (!moves)
        return NULL;
    g_ptr_array_extend_and_steal(plan->migrations, g_steal_pointer(&moves));
    plan_summarize(plan, p, vm_final, pol_problem_lower_bound(p), start_us);
    return g_steal_pointer(&plan);
}

/* ---- consolidate ------------------------------------------------------------------------- */

typedef struct {
    const PolProblem *p;
    const PolShape *shape;
    guint *cand;   /* accepting hosts, in the order they are kept */
    guint n_cand;
    guint *units;  /* scratch */
} Consolidation;

/* Tries to place every movable unit on the first @k candidate hosts. Units already on the
 * first @k - @unpin of them stay (when they fit); the others are packed best-fit decreasing
 * by @key, and a unit that fits nowhere gets room by one ejection. On success returns the
 * packer holding the placement. */
static PolPacker *consolidate_try(Consolidation *cs, guint k, guint unpin, PolKey key)
{
    const PolProblem *p = cs->p;
    g_autoptr(PolPacker) pk = pol_packer_new(p, cs->shape->dom);
    g_autofree gint *rank = g_new(gint, p->n_hosts + 1);
    guint n = 0, left = 0;

    for (guint h = 0; h < p->n_hosts; h++)
        rank[h] = -1;
    for (guint i = 0; i < k; i++) {
        rank[cs->cand[i]] = (gint)i;
        pol_packer_open(pk, cs->cand[i]);
    }
    /* Fixed units first: they are where they are. */
    for (guint u = 0; u < p->n_units; u++) {
        if (p->unit_fixed[u] && rank[p->unit_host[u]] >= 0)
            pol_packer_put(pk, u, p->unit_host[u], TRUE);
    }
    for (guint u = 0; u < p->n_units; u++) {
        gint r = rank[p->unit_host[u]];
        if (p->unit_fixed[u])
            continue;
        if (r >= 0 && (guint)r < k - unpin && pol_packer_fits(pk, u, p->unit_host[u]))
            pol_packer_put(pk, u, p->unit_host[u], FALSE);
        else
            cs->units[n++] = u;
    }
    pol_units_sort(p, cs->units, n, key, cs->shape->dom, cs->shape->weight, cs->shape->ref);
    for (guint i = 0; i < n; i++) {
        guint u = cs->units[i];
        gint h = pol_packer_find(pk, u, -1);
        if (h >= 0)
            pol_packer_put(pk, u, (guint)h, FALSE);
        else
            cs->units[left++] = u; /* i >= left: safe to reuse the front */
    }
    /* A few leftovers: make room by moving one unit each; many: @k is too small. */
    if (left > 32)
        return NULL;
    for (guint i = 0; i < left; i++) {
        if (!pol_packer_eject(pk, cs->units[i]))
            return NULL;
    }
    return g_steal_pointer(&pk);
}

static PolPacker *consolidate_k(Consolidation *cs, guint k, gboolean thorough)
{
    /* From keeping every VM on the kept hosts to repacking them all. */
    const guint unpin[] = {0, k / 8, k / 4, k / 2, k};
    PolPacker *pk;

    for (guint i = 0; i < G_N_ELEMENTS(unpin); i++) {
        if (i > 0 && unpin[i] == unpin[i - 1])
            continue;
        for (PolKey key = 0; key < POL_KEY_LAST; key++) {
            if (!thorough && key > 0)
                break;
            if ((pk = consolidate_try(cs, k, unpin[i], key)))
                return pk;
        }
        if (!thorough && i == 0)
            i = G_N_ELEMENTS(unpin) - 2; /* quick: all kept, then all repacked */
    }
    return NULL;
}

typedef struct {
    guint host;
    double capacity; /* weighted, relative to the largest host */
    guint vms;
    guint64 memory; /* of its VMs */
    guint8 anchor;
} CandKey;

/* Orders of the hosts to keep: holding VMs that cannot move first; then, by capacity
 * (@data NULL: repacking onto the largest), larger first, then more VMs; or by VMs held
 * (@data non-NULL: keeping VMs in place), more VMs first (fewer to move), then more memory
 * (less moved), then larger. Then index. */
static gint cand_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    const CandKey *x = a, *y = b;
    gboolean by_count = data != NULL;

    if (x->anchor != y->anchor)
        return x->anchor ? -1 : 1;
    if (!by_count && x->capacity != y->capacity)
        return x->capacity > y->capacity ? -1 : 1;
    if (x->vms != y->vms)
        return x->vms > y->vms ? -1 : 1;
    if (by_count && x->memory != y->memory)
        return x->memory > y->memory ? -1 : 1;
    if (by_count && x->capacity != y->capacity)
        return x->capacity > y->capacity ? -1 : 1;
    return x->host < y->host ? -1 : x->host > y->host;
}

/* The placement on the fewest hosts, at least @kmin: @kmin and just above tried thoroughly,
 * then a binary search up to all the candidates. NULL when even all do not hold the VMs. */
static PolPacker *consolidate_search(Consolidation *cs, guint kmin)
{
    g_autoptr(PolPacker) best = NULL;
    guint lo, hi;

    for (guint k = kmin; k <= MIN(kmin + 2, cs->n_cand); k++) {
        PolPacker *pk = consolidate_k(cs, k, TRUE);
        if (pk)
            return pk;
    }
    if (kmin + 3 > cs->n_cand)
        return NULL;
    lo = kmin + 3;
    hi = cs->n_cand;
    best = consolidate_k(cs, hi, FALSE);
    while (best && lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        PolPacker *got = consolidate_k(cs, mid, FALSE);
        if (got) {
            pol_packer_free(best);
            best = got;
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return g_steal_pointer(&best);
}

/* Fewer migrations: a unit sent away from a host that stays in use goes back when it still
 * fits there. */
static void consolidate_send_back(const PolProblem *p, PolPacker *pk)
{
    for (guint u = 0; u < p->n_units; u++) {
        guint h = p->unit_host[u];
        if (p->unit_fixed[u] || pk->assign[u] == (gint)h || pk->assign[u] < 0 || !pk->open[h])
            continue;
        if (pk->head[h] >= 0 && pol_packer_fits(pk, u, h)) {
            pol_packer_take(pk, u);
            pol_packer_put(pk, u, h, FALSE);
        }
    }
}

/* Variant @variant (< CONSOLIDATE_VARIANTS) of a placement on @k hosts: the hosts kept in
 * count order (@cs) or capacity order (@cc), the last 0, k/8, k/4, k/2 or k of them unpinned,
 * each sort key. */
#define CONSOLIDATE_VARIANTS (2 * 5 * POL_KEY_LAST)
static PolPacker *consolidate_variant(Consolidation *cs, Consolidation *cc, guint k,
                                      guint variant)
{
    const guint unpin[] = {0, k / 8, k / 4, k / 2, k};
    guint order = variant / (5 * POL_KEY_LAST), rest = variant % (5 * POL_KEY_LAST);

    return consolidate_try(order ? cc : cs, k, unpin[rest / POL_KEY_LAST],
                           (PolKey)(rest % POL_KEY_LAST));
}

/* Front points x units up to which every point gets its migration bound. */
#define CONSOLIDATE_BOUND_BUDGET G_GUINT64_CONSTANT(20000000)

/* A placement found for some number of hosts. */
typedef struct {
    guint hosts;      /* hosts holding VMs after it */
    guint migrations; /* VMs moved (detours not counted) */
    guint64 moved_mib;
    PolPacker *pk;    /* owned; NULL: derived from the first incremental placement */
    guint keep;       /* derived: the first @keep hosts of the count order keep their VMs */
    gboolean unusable; /* its moves could not be ordered */
    gboolean base;     /* the incremental placement the derived points start from */
} ConsPoint;

static void cons_point_clear(gpointer data)
{
    ConsPoint *pt = data;
    g_clear_pointer(&pt->pk, pol_packer_free);
}

/* The final host of each VM of @pk's placement. */
static void consolidate_final(const PolProblem *p, const PolPacker *pk, guint *vm_final)
{
    for (guint v = 0; v < p->n_vms; v++) {
        guint u = p->vm_unit[v];
        vm_final[v] = p->unit_fixed[u] || pk->assign[u] < 0 ? p->unit_host[u]
                                                             : (guint)pk->assign[u];
    }
}

/* Counts what the placement @vm_final moves, and the hosts holding VMs after it. */
static void consolidate_count(const PolProblem *p, const guint *vm_final, ConsPoint *pt)
{
    const PolCluster *c = p->cluster;
    g_autofree guint8 *used = g_new0(guint8, p->n_hosts + 1);

    pt->hosts = pt->migrations = 0;
    pt->moved_mib = 0;
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        if (vm_final[v] != vm->host) {
            pt->migrations++;
            pt->moved_mib += vm->memory_mib;
        }
        if (p->active[vm_final[v]] && !used[vm_final[v]]) {
            used[vm_final[v]] = TRUE;
            pt->hosts++;
        }
    }
}

/* Every active host fits what it holds now; else POL_ERROR_INVALID naming the hosts. */
static gboolean consolidate_check_capacity(const PolProblem *p, GError **error)
{
    static const char *const dim_names[] = {"CPU (millicores)", "memory (MiB)"};
    const PolCluster *c = p->cluster;
    const guint D = p->dims;
    g_autofree gint64 *used = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    g_autoptr(GString) msg = g_string_new(NULL);
    guint bad = 0;

    for (guint u = 0; u < p->n_units; u++) {
        for (guint d = 0; d < D; d++)
            used[(gsize)p->unit_host[u] * D + d] += p->unit_dem[(gsize)u * D + d];
    }
    for (guint h = 0; h < p->n_hosts; h++) {
        const PolHost *host = g_ptr_array_index(c->hosts, h);
        for (guint d = 0; d < D && p->active[h]; d++) {
            gint64 x = used[(gsize)h * D + d], cap = p->cap[(gsize)h * D + d];
            if (x <= cap)
                continue;
            if (++bad <= 5) {
                g_autofree char *dim =
                    d < POL_DIM_VF0
                        ? g_strdup(dim_names[d])
                        : g_strdup_printf("VFs of model '%s'",
                                          (char *)g_ptr_array_index(c->models, d - POL_DIM_VF0));
                g_string_append_printf(msg, "%shost '%s' %s %" G_GINT64_FORMAT " > %" G_GINT64_FORMAT,
                                       bad > 1 ? "; " : "", host->name, dim, x, cap);
            }
            break;
        }
    }
    if (bad == 0)
        return TRUE;
    g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                "%u host%s already over capacity, nothing planned: %s%s", bad,
                bad > 1 ? "s are" : " is", msg->str, bad > 5 ? "; ..." : "");
    return FALSE;
}

/* The error when no point is within the cap: the VMs that must move whatever the plan. */
static void consolidate_over_cap(const PolProblem *p, const GArray *points, guint cap,
                                 GError **error)
{
    const PolCluster *c = p->cluster;
    g_autoptr(GString) names = g_string_new(NULL);
    guint must = 0, fewest = G_MAXUINT;

    for (guint i = 0; i < points->len; i++) {
        const ConsPoint *pt = &g_array_index(points, ConsPoint, i);
        fewest = MIN(fewest, pt->migrations);
    }
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(c->vms, v);
        if (!p->active[vm->host] || p->accepts[vm->host] || p->unit_fixed[p->vm_unit[v]])
            continue;
        if (++must <= 8)
            g_string_append_printf(names, "%s'%s' on '%s'", must > 1 ? ", " : "", vm->name,
                                   ((PolHost *)g_ptr_array_index(c->hosts, vm->host))->name);
    }
    if (must > cap)
        g_set_error(error, POL_ERROR, POL_ERROR_OVER_CAP,
                    "no consolidation within %u migrations: %u VMs must leave evacuating hosts: %s%s",
                    cap, must, names->str, must > 8 ? ", ..." : "");
    else
        g_set_error(error, POL_ERROR, POL_ERROR_OVER_CAP,
                    "no consolidation within %u migrations: the fewest found moves %u VMs", cap,
                    fewest);
}

/* Which point to take: the lowest host_value x hosts + migrations within the cap, then less
 * memory moved, then fewer hosts. -1: none. */
static gint consolidate_choose(const GArray *points, const PolOptions *opts)
{
    gint best = -1;
    guint64 best_cost = 0;

    for (guint i = 0; i < points->len; i++) {
        const ConsPoint *pt = &g_array_index(points, ConsPoint, i);
        guint64 cost = (guint64)opts->host_value * pt->hosts + pt->migrations;
        const ConsPoint *b = best >= 0 ? &g_array_index(points, ConsPoint, best) : NULL;

        if (pt->unusable || (opts->max_migrations && pt->migrations > opts->max_migrations))
            continue;
        if (!b || cost < best_cost ||
            (cost == best_cost && (pt->moved_mib < b->moved_mib ||
                                   (pt->moved_mib == b->moved_mib && pt->hosts < b->hosts)))) {
            best = (gint)i;
            best_cost = cost;
        }
    }
    return best;
}

/* Adds @pt unless a point with as many hosts is as good; keeps one point per host count
 * (@by_hosts: hosts -> index + 1 of that point, n_hosts + 1 entries). */
static void consolidate_add_point(GArray *points, guint *by_hosts, ConsPoint *pt)
{
    guint i = by_hosts[pt->hosts];

    if (i > 0) {
        ConsPoint *q = &g_array_index(points, ConsPoint, i - 1);
        if (q->migrations < pt->migrations ||
            (q->migrations == pt->migrations && q->moved_mib <= pt->moved_mib)) {
            cons_point_clear(pt);
            return;
        }
        if (!q->base) {
            cons_point_clear(q);
            *q = *pt;
            return;
        }
        /* the derived points need the base placement: keep both */
    }
    g_array_append_val(points, *pt);
    by_hosts[pt->hosts] = points->len;
}

/* Records placement @pk (taken) as a point: its units sent back home where they fit, counted
 * (@vm_final: scratch). @base: the incremental placement the derived points start from.
 * @keep_all: append even when a point with as many hosts exists (the fallback's tries). */
static void consolidate_record(const PolProblem *p, PolPacker *pk, gboolean base,
                               gboolean keep_all, guint *vm_final, GArray *points,
                               guint *by_hosts)
{
    ConsPoint pt = {.pk = pk, .base = base};

    consolidate_send_back(p, pk);
    consolidate_final(p, pk, vm_final);
    consolidate_count(p, vm_final, &pt);
    if (keep_all)
        g_array_append_val(points, pt);
    else
        consolidate_add_point(points, by_hosts, &pt);
}

static gint cons_point_cmp(gconstpointer a, gconstpointer b)
{
    const ConsPoint *x = *(ConsPoint *const *)a, *y = *(ConsPoint *const *)b;

    if (x->hosts != y->hosts)
        return x->hosts < y->hosts ? -1 : 1;
    if (x->migrations != y->migrations)
        return x->migrations < y->migrations ? -1 : 1;
    return x->moved_mib < y->moved_mib ? -1 : x->moved_mib > y->moved_mib;
}

/* The front: fewest hosts first, each point with fewer migrations than every point with
 * fewer hosts (as many: less memory moved), and the chosen one; *@ret_chosen: where
 * @chosen is among them. O(points log points). */
static GArray *consolidate_front(const GArray *points, guint chosen, guint *ret_chosen)
{
    GArray *front = g_array_new(FALSE, FALSE, sizeof(PolFrontPoint));
    g_autoptr(GPtrArray) sorted = g_ptr_array_sized_new(points->len);
    const ConsPoint *ch = &g_array_index(points, ConsPoint, chosen);
    const ConsPoint *last = NULL;

    for (guint i = 0; i < points->len; i++) {
        const ConsPoint *pt = &g_array_index(points, ConsPoint, i);
        if (!pt->unusable || i == chosen)
            g_ptr_array_add(sorted, (gpointer)pt);
    }
    g_ptr_array_sort(sorted, cons_point_cmp);
    for (guint i = 0; i < sorted->len; i++) {
        const ConsPoint *pt = g_ptr_array_index(sorted, i);
        gboolean better = !last || pt->migrations < last->migrations ||
                          (pt->migrations == last->migrations && pt->moved_mib < last->moved_mib);
        if (better || pt == ch) {
            PolFrontPoint f = {pt->hosts, pt->migrations, pt->moved_mib, G_MAXUINT};
            if (pt == ch)
                *ret_chosen = front->len;
            g_array_append_val(front, f);
        }
        if (better)
            last = pt;
    }
    return front;
}

/* One consolidation under way: the problem, the hosts it may keep in two orders, the points
 * (placements) found so far. */
typedef struct {
    const PolCluster *cluster;
    const PolOptions *opts;
    gint64 start;
    PolProblem *p;
    PolShape shape;
    guint *cand;       /* the accepting hosts by capacity (repacking onto the largest) */
    guint *cand_count; /* ... and by VMs held (keeping VMs in place) */
    guint n_cand;
    guint *units;      /* scratch */
    guint *vm_count;   /* per host: the VMs it holds */
    guint *vm_final;   /* per VM: its host in the placement at hand */
    GArray *points;    /* ConsPoint */
    guint *by_hosts;   /* consolidate_add_point()'s index */
    Consolidation cs;  /* incremental tries, in cand_count order */
    Consolidation cc;  /* repacking tries, in cand order */
    guint lb, kmin, kmax;
    gint k0;           /* the fewest hosts an incremental try kept, -1: none succeeded */
} ConsRun;

/* The points (their packers) go before the problem and the shape. */
static void cons_run_clear(ConsRun *r)
{
    g_clear_pointer(&r->points, g_array_unref);
    g_free(r->by_hosts);
    g_free(r->vm_final);
    g_free(r->units);
    g_free(r->vm_count);
    g_free(r->cand);
    g_free(r->cand_count);
    shape_clear(&r->shape);
    g_clear_pointer(&r->p, pol_problem_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ConsRun, cons_run_clear)

/* The hosts that may be kept, in both orders, and how many to keep at the least and most. */
static void cons_candidates(ConsRun *r)
{
    const PolProblem *p = r->p;
    g_autofree guint8 *anchor = g_new0(guint8, p->n_hosts + 1);
    g_autofree CandKey *keys = g_new0(CandKey, p->n_hosts + 1);
    g_autofree guint64 *vm_memory = g_new0(guint64, p->n_hosts + 1);
    guint n_cand = 0, accepting_anchors = 0, other_anchors = 0, movers = 0, kmin, kmax = 0;

    r->vm_count = g_new0(guint, p->n_hosts + 1);
    for (guint u = 0; u < p->n_units; u++) {
        guint h = p->unit_host[u];
        if (p->unit_fixed[u] && p->active[h])
            anchor[h] = TRUE;
        else if (!p->unit_fixed[u])
            movers++;
        r->vm_count[h] += p->unit_first[u + 1] - p->unit_first[u];
        vm_memory[h] += (guint64)p->unit_dem[(gsize)u * p->dims + POL_DIM_MEM];
    }
    for (guint h = 0; h < p->n_hosts; h++) {
        if (!p->accepts[h]) {
            other_anchors += anchor[h];
            continue;
        }
        accepting_anchors += anchor[h];
        kmax += r->vm_count[h] > 0 || anchor[h];
        keys[n_cand].host = h;
        keys[n_cand].anchor = anchor[h];
        keys[n_cand].vms = r->vm_count[h];
        keys[n_cand].memory = vm_memory[h];
        for (guint d = 0; d < p->dims; d++) {
            if (r->shape.ref[d] > 0)
                keys[n_cand].capacity +=
                    r->shape.weight[d] * (double)p->cap[(gsize)h * p->dims + d] / r->shape.ref[d];
        }
        n_cand++;
    }
    r->units = g_new(guint, p->n_units + 1);
    /* Two orders of the hosts to keep: by VMs held (keeping VMs in place) and by capacity
     * (repacking onto the largest). */
    g_qsort_with_data(keys, (gint)n_cand, sizeof(*keys), cand_cmp, GINT_TO_POINTER(1));
    r->cand_count = g_new(guint, n_cand + 1);
    for (guint i = 0; i < n_cand; i++)
        r->cand_count[i] = keys[i].host;
    g_qsort_with_data(keys, (gint)n_cand, sizeof(*keys), cand_cmp, NULL);
    r->cand = g_new(guint, n_cand + 1);
    for (guint i = 0; i < n_cand; i++)
        r->cand[i] = keys[i].host;
    r->n_cand = n_cand;
    r->cs = (Consolidation){p, &r->shape, r->cand_count, n_cand, r->units};
    r->cc = (Consolidation){p, &r->shape, r->cand, n_cand, r->units};

    kmin = r->lb > other_anchors ? r->lb - other_anchors : 0;
    kmin = MAX(kmin, accepting_anchors);
    if (movers > 0)
        kmin = MAX(kmin, 1);
    r->kmin = MIN(kmin, n_cand);
    r->kmax = MAX(kmax, r->kmin);
}

/* 1. Keep the hosts with the most VMs and their VMs, place the others' VMs in the room left
 * (a few ejections when needed): from the bound up until a try succeeds; a binary search
 * beyond bound + 2. Sets k0. */
static void cons_incremental(ConsRun *r)
{
    guint kmin = r->kmin, kmax = r->kmax;
    guint lo = kmin, hi = kmax;
    g_autoptr(PolPacker) best = NULL;
    guint kbest = 0;

    for (guint k = kmin; k <= MIN(kmin + 2, kmax) && r->k0 < 0; k++) {
        for (PolKey key = 0; key < POL_KEY_LAST && r->k0 < 0; key++) {
            PolPacker *pk = consolidate_try(&r->cs, k, 0, key);
            if (pk) {
                consolidate_record(r->p, pk, TRUE, FALSE, r->vm_final, r->points, r->by_hosts);
                r->k0 = (gint)k;
            }
        }
    }
    if (r->k0 >= 0 || kmin + 3 > kmax)
        return;
    lo = kmin + 3;
    while (lo <= hi) {
        guint mid = lo + (hi - lo) / 2;
        PolPacker *got = consolidate_try(&r->cs, mid, 0, POL_KEY_WEIGHTED);
        if (got) {
            g_clear_pointer(&best, pol_packer_free);
            best = got;
            kbest = mid;
            if (mid == lo)
                break;
            hi = mid - 1;
        } else {
            lo = mid + 1;
        }
    }
    if (best) {
        consolidate_record(r->p, g_steal_pointer(&best), TRUE, FALSE, r->vm_final, r->points,
                           r->by_hosts);
        r->k0 = (gint)kbest;
    }
}

/* The incremental placement the derived points start from (borrowed), NULL when none. */
static const ConsPoint *cons_base(const ConsRun *r)
{
    const ConsPoint *base = NULL;

    for (guint i = 0; i < r->points->len; i++) {
        if (g_array_index(r->points, ConsPoint, i).base)
            base = &g_array_index(r->points, ConsPoint, i);
    }
    return base;
}

/* 2. More hosts kept than k0: the same placement, the VMs of the hosts kept in addition
 * staying home. Hosts kept in count order hold VMs, so each adds one host. */
static void cons_derived(ConsRun *r)
{
    const PolProblem *p = r->p;
    const ConsPoint *base = cons_base(r);
    g_autofree guint *moved_vms = g_new0(guint, p->n_hosts + 1);
    g_autofree guint64 *moved_mem = g_new0(guint64, p->n_hosts + 1);
    guint mig, hosts;
    guint64 mem;

    consolidate_final(p, base->pk, r->vm_final);
    for (guint v = 0; v < p->n_vms; v++) {
        const PolVm *vm = g_ptr_array_index(r->cluster->vms, v);
        if (r->vm_final[v] != vm->host) {
            moved_vms[vm->host]++;
            moved_mem[vm->host] += vm->memory_mib;
        }
    }
    mig = base->migrations;
    mem = base->moved_mib;
    hosts = base->hosts;
    for (guint k = (guint)r->k0; k < r->kmax; k++) {
        guint h = r->cand_count[k];
        ConsPoint pt = {0};
        if (!moved_vms[h] || moved_vms[h] != r->vm_count[h])
            continue; /* not emptied by the base placement */
        mig -= moved_vms[h];
        mem -= moved_mem[h];
        hosts++;
        pt = (ConsPoint){hosts, mig, mem, NULL, k + 1, FALSE, FALSE};
        consolidate_add_point(r->points, r->by_hosts, &pt);
    }
}

/* 3. Fewer hosts than the incremental tries reached: repack (some or all VMs of the kept
 * hosts move too), near the bound only. The cost decides whether such a plan is worth it. */
static void cons_repack(ConsRun *r)
{
    guint top = r->k0 < 0 ? r->kmax : (guint)r->k0 - 1;

    for (guint k = r->kmin; k <= MIN(top, r->kmin + 2); k++) {
        PolPacker *pk = consolidate_k(&r->cc, k, TRUE);
        if (pk) {
            consolidate_record(r->p, pk, FALSE, FALSE, r->vm_final, r->points, r->by_hosts);
            break;
        }
    }
    if (r->points->len == 0) {
        PolPacker *pk = consolidate_search(&r->cc, r->kmin);
        if (pk)
            consolidate_record(r->p, pk, FALSE, FALSE, r->vm_final, r->points, r->by_hosts);
    }
}

/* No point left to choose: every point is over the cap, or none could be ordered. Then every
 * way of packing onto the bound, one host more, ... as long as there are hosts: records the
 * next one found (*@repack_k, *@variant: where the search is). FALSE with @error when none is
 * left. */
static gboolean cons_fallback(ConsRun *r, guint *repack_k, guint *variant, GError **error)
{
    gboolean capped = FALSE;
    PolPacker *pk = NULL;

    for (guint i = 0; i < r->points->len; i++) {
        const ConsPoint *q = &g_array_index(r->points, ConsPoint, i);
        capped |= !q->unusable;
    }
    if (*repack_k == 0)
        *repack_k = MAX(r->kmin, 1);
    /* Every variant up to bound + 2; beyond, the two incremental ones only (as many tries per
     * host count as before this fallback existed, so a large cluster whose moves never order
     * costs O(hosts) tries, not 30 times that). */
    while (!capped && !pk && *repack_k <= r->n_cand) {
        pk = consolidate_variant(&r->cs, &r->cc, *repack_k, *variant);
        *variant = *repack_k <= r->kmin + 2 ? *variant + 1 : *variant + CONSOLIDATE_VARIANTS / 2;
        if (*variant >= CONSOLIDATE_VARIANTS) {
            *variant = 0;
            (*repack_k)++;
        }
    }
    if (!pk && capped) {
        consolidate_over_cap(r->p, r->points, r->opts->max_migrations, error);
        return FALSE;
    }
    if (!pk) {
        g_set_error(error, POL_ERROR, POL_ERROR_NO_ROOM,
                    "cannot order the moves of any consolidation without overcommitting a host");
        return FALSE;
    }
    consolidate_record(r->p, pk, FALSE, TRUE, r->vm_final, r->points, r->by_hosts);
    return TRUE;
}

/* vm_final for point @pt: its placement, or (a derived point) the base's with the VMs of the
 * hosts it keeps in addition at home. */
static void cons_place(ConsRun *r, const ConsPoint *pt)
{
    const PolProblem *p = r->p;
    g_autofree guint8 *stay = NULL;

    if (pt->pk) {
        consolidate_final(p, pt->pk, r->vm_final);
        return;
    }
    stay = g_new0(guint8, p->n_hosts + 1);
    for (guint i = 0; i < pt->keep; i++)
        stay[r->cand_count[i]] = TRUE;
    consolidate_final(p, cons_base(r)->pk, r->vm_final);
    for (guint v = 0; v < p->n_vms; v++) {
        guint home = ((PolVm *)g_ptr_array_index(r->cluster->vms, v))->host;
        if (stay[home])
            r->vm_final[v] = home;
    }
}

/* The plan of point @chosen with its ordered @moves (taken), the front and the bounds. */
static PolPlan *cons_plan(ConsRun *r, gint chosen, GPtrArray *moves)
{
    const PolOptions *opts = r->opts;
    const PolProblem *p = r->p;
    g_autoptr(PolPlan) plan = plan_new(POL_POLICY_CONSOLIDATE);

    g_ptr_array_extend_and_steal(plan->migrations, moves);
    plan->host_value = opts->host_value;
    plan->max_migrations = opts->max_migrations;
    plan->front = consolidate_front(r->points, (guint)chosen, &plan->front_chosen);
    plan_summarize(plan, p, r->vm_final, r->lb, r->start);
    plan->migration_bound = pol_problem_migration_bound(p, plan->hosts_used);
    /* The bound beside every point, while that stays cheap (each is about one pass over the
     * VMs); else beside the chosen one only. */
    for (guint i = 0; i < plan->front->len; i++) {
        PolFrontPoint *f = &g_array_index(plan->front, PolFrontPoint, i);
        if (f->hosts == plan->hosts_used)
            f->migration_bound = plan->migration_bound;
        else if ((guint64)plan->front->len * p->n_units <= CONSOLIDATE_BOUND_BUDGET)
            f->migration_bound = pol_problem_migration_bound(p, f->hosts);
    }
    plan->plan_ms = (double)(g_get_monotonic_time() - r->start) / 1000.0;
    return g_steal_pointer(&plan);
}

/* 4. The cheapest point whose moves can be ordered. */
static PolPlan *cons_choose(ConsRun *r, GError **error)
{
    for (guint repack_k = 0, variant = 0;;) {
        gint chosen = consolidate_choose(r->points, r->opts);
        ConsPoint *pt;
        g_autoptr(GPtrArray) moves = NULL;
        g_autoptr(GError) local = NULL;

        if (chosen < 0) {
            if (!cons_fallback(r, &repack_k, &variant, error))
                return NULL;
            continue;
        }
        pt = &g_array_index(r->points, ConsPoint, chosen);
        cons_place(r, pt);
        moves = pol_moves_order(r->p, r->vm_final, r->opts, &local);
        if (moves && (!r->opts->max_migrations || moves->len <= r->opts->max_migrations))
            return cons_plan(r, chosen, g_steal_pointer(&moves));
        g_debug("consolidate: %u hosts: %s; trying another point", pt->hosts,
                local ? local->message : "over the cap with detours");
        pt->unusable = TRUE;
    }
}

PolPlan *pol_plan_consolidate(const PolCluster *cluster, const PolOptions *opts, GError **error)
{
    g_auto(ConsRun) r = {.cluster = cluster, .start = g_get_monotonic_time(), .k0 = -1};
    PolOptions defaults;

    g_return_val_if_fail(cluster != NULL, NULL);
    opts_or_default(&opts, &defaults);
    r.opts = opts;
    if (opts->host_value > POL_HOST_VALUE_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "host_value must be at most %u, not %u",
                    POL_HOST_VALUE_MAX, opts->host_value);
        return NULL;
    }
    r.points = g_array_new(FALSE, TRUE, sizeof(ConsPoint));
    g_array_set_clear_func(r.points, cons_point_clear);
    r.p = pol_problem_new(cluster, opts);
    r.by_hosts = g_new0(guint, r.p->n_hosts + 1);
    if (!consolidate_check_capacity(r.p, error))
        return NULL;
    shape_init(&r.shape, r.p);
    r.lb = pol_problem_lower_bound(r.p);
    cons_candidates(&r);
    r.vm_final = g_new(guint, r.p->n_vms + 1);
    cons_incremental(&r);
    if (r.k0 >= 0)
        cons_derived(&r);
    if (r.k0 < 0 || (guint)r.k0 > r.kmin)
        cons_repack(&r);
    if (r.points->len == 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_NO_ROOM,
                    "the VMs do not fit on the %u hosts that accept VMs", r.n_cand);
        return NULL;
    }
    return cons_choose(&r, error);
}

/* ---- drain ------------------------------------------------------------------------------- */

/* Puts the moves of each job's VMs one after the other, where the job's first move is; the
 * others keep their order. Any order of a drain is safe (its destinations only receive), and
 * the scheduler then moves a job's guests back to back (docs/policies.md, "Running a plan"). */
static void drain_group_jobs(const PolCluster *cluster, PolPlan *plan)
{
    GPtrArray *moves = plan->migrations;
    /* job id -> GArray of the indices of its moves, in order */
    g_autoptr(GHashTable) of_job =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_array_unref);
    g_autofree gpointer *old = g_memdup2(moves->pdata, sizeof(gpointer) * moves->len);
    g_autofree const char **job = g_new0(const char *, moves->len + 1);
    guint k = 0;

    for (guint i = 0; i < moves->len; i++) {
        const PolMigration *m = old[i];
        gint v = GPOINTER_TO_INT(g_hash_table_lookup(cluster->vm_by_name, m->vm)) - 1;
        GArray *list;

        job[i] = v >= 0 ? ((const PolVm *)g_ptr_array_index(cluster->vms, v))->job : NULL;
        if (!job[i])
            continue;
        if (!(list = g_hash_table_lookup(of_job, job[i]))) {
            list = g_array_new(FALSE, FALSE, sizeof(guint));
            g_hash_table_insert(of_job, (gpointer)job[i], list);
        }
        g_array_append_val(list, i);
    }
    for (guint i = 0; i < moves->len; i++) {
        GArray *list = job[i] ? g_hash_table_lookup(of_job, job[i]) : NULL;

        if (!job[i])
            moves->pdata[k++] = old[i];
        else if (g_array_index(list, guint, 0) == i) /* the job's first: all of them here */
            for (guint j = 0; j < list->len; j++)
                moves->pdata[k++] = old[g_array_index(list, guint, j)];
    }
    g_assert(k == moves->len);
}

PolPlan *pol_plan_drain(const PolCluster *cluster, const char *host, const PolOptions *opts,
                        GError **error)
{
    gint64 start = g_get_monotonic_time();
    PolOptions defaults;
    g_autoptr(PolProblem) p = NULL;
    g_auto(PolShape) shape = {0};
    g_autoptr(PolPacker) pk = NULL;
    g_autoptr(PolPlan) plan = NULL;
    g_autofree guint *units = NULL;
    g_autofree guint *vm_final = NULL;
    guint n = 0;
    gint src;

    g_return_val_if_fail(cluster != NULL && host != NULL, NULL);
    opts_or_default(&opts, &defaults);
    src = GPOINTER_TO_INT(g_hash_table_lookup(cluster->host_by_name, host)) - 1;
    if (src < 0) {
        g_set_error(error, POL_ERROR, POL_ERROR_NOT_FOUND, "unknown host '%s'", host);
        return NULL;
    }
    p = pol_problem_new(cluster, opts);
    if (!p->active[src]) {
        g_set_error(error, POL_ERROR, POL_ERROR_BLOCKED,
                    "host '%s' is down: its VMs cannot be live-migrated", host);
        return NULL;
    }
    for (guint v = 0; v < p->n_vms; v++) {
        g_autofree char *why = NULL;
        if (((PolVm *)g_ptr_array_index(cluster->vms, v))->host != (guint)src)
            continue;
        if ((why = pol_vm_blocked_reason(cluster, v, opts))) {
            g_set_error(error, POL_ERROR, POL_ERROR_BLOCKED, "cannot drain '%s': %s", host, why);
            return NULL;
        }
    }
    shape_init(&shape, p);
    pk = pol_packer_new(p, shape.dom);
    units = g_new(guint, p->n_units + 1);
    for (guint h = 0; h < p->n_hosts; h++) {
        if (p->accepts[h] && h != (guint)src)
            pol_packer_open(pk, h);
    }
    for (guint u = 0; u < p->n_units; u++) {
        if (p->unit_host[u] == (guint)src)
            units[n++] = u;
        else if (pk->open[p->unit_host[u]])
            pol_packer_put(pk, u, p->unit_host[u], TRUE);
    }
    pol_units_sort(p, units, n, POL_KEY_WEIGHTED, shape.dom, shape.weight, shape.ref);
    for (guint i = 0; i < n; i++) {
        gint h = pol_packer_find(pk, units[i], -1);
        if (h < 0) {
            const PolVm *vm =
                g_ptr_array_index(cluster->vms, p->unit_vms[p->unit_first[units[i]]]);
            g_autofree char *why = pol_packer_why_no_room(pk, units[i], src);

            g_set_error(error, POL_ERROR, POL_ERROR_NO_ROOM,
                        "cannot drain '%s': no host has room for VM '%s' (%u vCPUs, %" G_GUINT64_FORMAT " MiB, %u VFs): %s",
                        host, vm->name, vm->vcpus, vm->memory_mib, vm->vfs,
                        why[0] ? why : "no other host");
            return NULL;
        }
        pol_packer_put(pk, units[i], (guint)h, TRUE);
    }
    vm_final = g_new(guint, p->n_vms + 1);
    for (guint v = 0; v < p->n_vms; v++) {
        gint a = pk->assign[p->vm_unit[v]];
        vm_final[v] = a >= 0 ? (guint)a : ((PolVm *)g_ptr_array_index(cluster->vms, v))->host;
    }
    plan = plan_new(POL_POLICY_DRAIN);
    plan->drained = g_strdup(host);
    plan = plan_finish(g_steal_pointer(&plan), p, vm_final, opts, start, error);
    if (plan)
        drain_group_jobs(cluster, plan);
    return g_steal_pointer(&plan);
}

/* ---- balance ----------------------------------------------------------------------------- */

#define BALANCE_CANDIDATES 8

/* The state of a balance: each host's use and load, the units on it (a linked list through
 * head/next), what moved, the hosts nothing more can leave, and the moves in order. */
typedef struct {
    const PolCluster *cluster;
    PolProblem *p; /* borrowed */
    guint D;
    gint64 *used;
    double *load;
    guint8 *moved;
    guint8 *stuck;
    guint *vm_final;
    gint *head;
    gint *next;
    GArray *order; /* units, as moved */
} Balance;

static void balance_clear(Balance *b)
{
    g_free(b->used);
    g_free(b->load);
    g_free(b->moved);
    g_free(b->stuck);
    g_free(b->vm_final);
    g_free(b->head);
    g_free(b->next);
    if (b->order)
        g_array_unref(b->order);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Balance, balance_clear)

static void balance_init(Balance *b, const PolCluster *cluster, PolProblem *p)
{
    guint D = p->dims;

    b->cluster = cluster;
    b->p = p;
    b->D = D;
    b->used = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    b->load = g_new0(double, p->n_hosts + 1);
    b->moved = g_new0(guint8, p->n_units + 1);
    b->stuck = g_new0(guint8, p->n_hosts + 1);
    b->vm_final = g_new(guint, p->n_vms + 1);
    b->head = g_new(gint, p->n_hosts + 1);
    b->next = g_new(gint, p->n_units + 1);
    b->order = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint h = 0; h < p->n_hosts; h++)
        b->head[h] = -1;
    for (gint u = (gint)p->n_units - 1; u >= 0; u--) {
        guint h = p->unit_host[u];
        for (guint d = 0; d < D; d++)
            b->used[(gsize)h * D + d] += p->unit_dem[(gsize)u * D + d];
        b->next[u] = b->head[h];
        b->head[h] = u;
    }
    for (guint h = 0; h < p->n_hosts; h++)
        b->load[h] = host_load(p, b->used, h);
    for (guint v = 0; v < p->n_vms; v++)
        b->vm_final[v] = ((PolVm *)g_ptr_array_index(cluster->vms, v))->host;
}

/* The source: an evacuating host with a movable VM, else the most loaded host; -1 when none
 * or when the loads are within the tolerance. */
static gint balance_source(const Balance *b, const PolOptions *opts, gboolean *ret_evacuate)
{
    const PolProblem *p = b->p;
    double lmin = G_MAXDOUBLE;
    gboolean evacuate = FALSE;
    gint src = -1;

    for (guint h = 0; h < p->n_hosts; h++) {
        const PolHost *ph = g_ptr_array_index(b->cluster->hosts, h);
        gboolean ev = ph->state == POL_HOST_EVACUATING;
        if (p->accepts[h])
            lmin = MIN(lmin, b->load[h]);
        if (!p->active[h] || b->stuck[h] || b->head[h] < 0)
            continue;
        if (src < 0 || (ev && !evacuate) || (ev == evacuate && b->load[h] > b->load[src])) {
            src = (gint)h;
            evacuate = ev;
        }
    }
    if (src < 0 || (!evacuate && b->load[src] - lmin <= opts->balance_tolerance))
        return -1;
    *ret_evacuate = evacuate;
    return src;
}

/* The least loaded accepting hosts but @src, into @cands (at most BALANCE_CANDIDATES, the
 * least loaded first); their count. */
static guint balance_candidates(const Balance *b, gint src, gint *cands)
{
    const PolProblem *p = b->p;
    guint n_cands = 0;

    for (guint h = 0; h < p->n_hosts; h++) {
        guint i;
        if (!p->accepts[h] || (gint)h == src)
            continue;
        if (n_cands == BALANCE_CANDIDATES && b->load[h] >= b->load[cands[n_cands - 1]])
            continue;
        i = n_cands < BALANCE_CANDIDATES ? n_cands++ : n_cands - 1;
        while (i > 0 && b->load[cands[i - 1]] > b->load[h]) {
            cands[i] = cands[i - 1];
            i--;
        }
        cands[i] = (gint)h;
    }
    return n_cands;
}

/* The move of a unit of @src to one of @cands that leaves the lowest peak load of the two
 * hosts; FALSE when none fits. */
static gboolean balance_best_move(const Balance *b, gint src, const gint *cands, guint n_cands,
                                  guint *ret_unit, guint *ret_dst, double *ret_peak)
{
    const PolProblem *p = b->p;
    guint D = b->D;
    double best_peak = G_MAXDOUBLE;
    gboolean found = FALSE;

    for (gint u = b->head[src]; u >= 0; u = b->next[u]) {
        if (p->unit_fixed[u] || b->moved[u])
            continue;
        for (guint i = 0; i < n_cands; i++) {
            guint dst = (guint)cands[i];
            gboolean fits = TRUE;
            double after_src = 0.0, after_dst = 0.0, peak;
            for (guint d = 0; d < D && fits; d++) {
                gint64 w = p->unit_dem[(gsize)u * D + d];
                gint64 cs = p->cap[(gsize)src * D + d], cd = p->cap[(gsize)dst * D + d];
                gint64 ud = b->used[(gsize)dst * D + d] + w;
                fits = w == 0 || ud <= cd;
                if (cs > 0)
                    after_src = MAX(after_src, (double)(b->used[(gsize)src * D + d] - w) / cs);
                if (cd > 0)
                    after_dst = MAX(after_dst, (double)ud / cd);
            }
            if (!fits)
                continue;
            peak = MAX(after_src, after_dst);
            if (peak < best_peak) {
                best_peak = peak;
                *ret_unit = (guint)u;
                *ret_dst = dst;
                found = TRUE;
            }
        }
    }
    *ret_peak = best_peak;
    return found;
}

/* Moves @unit from @src to @dst: unlinked from the source, accounted on the destination. */
static void balance_apply(Balance *b, gint src, guint unit, guint dst)
{
    const PolProblem *p = b->p;
    guint D = b->D;

    for (gint *link = &b->head[src]; *link >= 0; link = &b->next[*link]) {
        if (*link == (gint)unit) {
            *link = b->next[unit];
            break;
        }
    }
    for (guint d = 0; d < D; d++) {
        b->used[(gsize)src * D + d] -= p->unit_dem[(gsize)unit * D + d];
        b->used[(gsize)dst * D + d] += p->unit_dem[(gsize)unit * D + d];
    }
    b->load[src] = host_load(p, b->used, (guint)src);
    b->load[dst] = host_load(p, b->used, dst);
    b->moved[unit] = TRUE;
    b->stuck[dst] = FALSE;
    for (guint i = p->unit_first[unit]; i < p->unit_first[unit + 1]; i++)
        b->vm_final[p->unit_vms[i]] = dst;
    g_array_append_val(b->order, unit);
}

PolPlan *pol_plan_balance(const PolCluster *cluster, const PolOptions *opts, GError **error)
{
    gint64 start = g_get_monotonic_time();
    PolOptions defaults;
    g_autoptr(PolProblem) p = NULL;
    g_auto(Balance) b = {0};
    g_autoptr(PolPlan) plan = NULL;
    guint max_moves;

    g_return_val_if_fail(cluster != NULL, NULL);
    opts_or_default(&opts, &defaults);
    p = pol_problem_new(cluster, opts);
    balance_init(&b, cluster, p);
    max_moves = opts->max_moves ? opts->max_moves : p->n_units;

    while (b.order->len < max_moves) {
        gint cands[BALANCE_CANDIDATES];
        gboolean evacuate = FALSE;
        guint n_cands, unit = 0, dst = 0;
        double peak;
        gint src = balance_source(&b, opts, &evacuate);

        if (src < 0)
            break;
        n_cands = balance_candidates(&b, src, cands);
        if (!balance_best_move(&b, src, cands, n_cands, &unit, &dst, &peak) ||
            (!evacuate && peak >= b.load[src] - 1e-9)) {
            b.stuck[src] = TRUE;
            continue;
        }
        balance_apply(&b, src, unit, dst);
    }
    /* The moves were chosen one after the other on the loads as they were: run them in that
     * order and no step overcommits. */
    plan = plan_new(POL_POLICY_BALANCE);
    for (guint i = 0; i < b.order->len; i++) {
        guint u = g_array_index(b.order, guint, i);
        for (guint j = p->unit_first[u]; j < p->unit_first[u + 1]; j++) {
            guint v = p->unit_vms[j];
            g_ptr_array_add(plan->migrations,
                            migration_new(p, v, p->unit_host[u], b.vm_final[v], FALSE, opts));
        }
    }
    plan_summarize(plan, p, b.vm_final, pol_problem_lower_bound(p), start);
    return g_steal_pointer(&plan);
}

/* ---- verify ------------------------------------------------------------------------------ */

gboolean pol_plan_verify(const PolCluster *cluster, const PolPlan *plan, const PolOptions *opts,
                         GError **error)
{
    PolOptions defaults;
    g_autoptr(PolProblem) p = NULL;
    g_autofree gint64 *used = NULL;
    g_autofree guint *cur = NULL;
    g_autofree guint8 *moves = NULL;
    g_autofree guint8 *last_extra = NULL;
    guint D;

    g_return_val_if_fail(cluster != NULL && plan != NULL, FALSE);
    opts_or_default(&opts, &defaults);
    p = pol_problem_new(cluster, opts);
    D = p->dims;
    used = g_new0(gint64, (gsize)p->n_hosts * D + 1);
    cur = g_new(guint, p->n_vms + 1);
    moves = g_new0(guint8, p->n_vms + 1);
    last_extra = g_new0(guint8, p->n_vms + 1);
    for (guint v = 0; v < p->n_vms; v++) {
        cur[v] = ((PolVm *)g_ptr_array_index(cluster->vms, v))->host;
        for (guint d = 0; d < D; d++)
            used[(gsize)cur[v] * D + d] += p->vm_dem[(gsize)v * D + d];
    }
    for (guint i = 0; i < plan->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(plan->migrations, i);
        gint v = GPOINTER_TO_INT(g_hash_table_lookup(cluster->vm_by_name, m->vm)) - 1;
        gint from = GPOINTER_TO_INT(g_hash_table_lookup(cluster->host_by_name, m->from)) - 1;
        gint to = GPOINTER_TO_INT(g_hash_table_lookup(cluster->host_by_name, m->to)) - 1;
        g_autofree char *why = NULL;

        if (v < 0 || from < 0 || to < 0) {
            g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                        "step %u: unknown VM or host in '%s' from '%s' to '%s'", i + 1, m->vm,
                        m->from, m->to);
            return FALSE;
        }
        if (cur[v] != (guint)from || from == to) {
            g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                        "step %u: VM '%s' is on '%s', not '%s', or stays", i + 1, m->vm,
                        ((PolHost *)g_ptr_array_index(cluster->hosts, cur[v]))->name, m->from);
            return FALSE;
        }
        if (!p->accepts[to]) {
            g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                        "step %u: VM '%s' goes to '%s', which accepts no VMs", i + 1, m->vm,
                        m->to);
            return FALSE;
        }
        if ((why = pol_vm_blocked_reason(cluster, (guint)v, opts))) {
            g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "step %u: %s", i + 1, why);
            return FALSE;
        }
        /* A VM moves once, or detours once and then moves. */
        if (moves[v] >= 2 || (moves[v] == 1 && !last_extra[v])) {
            g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "step %u: VM '%s' moves again (only a detour may precede its move)",
                        i + 1, m->vm);
            return FALSE;
        }
        moves[v]++;
        last_extra[v] = m->extra;
        for (guint d = 0; d < D; d++) {
            gint64 w = p->vm_dem[(gsize)v * D + d];
            if (w > 0 && used[(gsize)to * D + d] + w > p->cap[(gsize)to * D + d]) {
                g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                            "step %u: VM '%s' overcommits '%s' (dimension %u: %" G_GINT64_FORMAT " + %" G_GINT64_FORMAT " > %" G_GINT64_FORMAT ")",
                            i + 1, m->vm, m->to, d, used[(gsize)to * D + d], w,
                            p->cap[(gsize)to * D + d]);
                return FALSE;
            }
        }
        vm_shift(p, used, (guint)v, (guint)from, (guint)to);
        cur[v] = (guint)to;
    }
    return TRUE;
}
