/* hm-policies: lower bounds on the number of hosts (docs/policies.md, "Lower bound"). */
#include "policies/policies-priv.h"

#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
    guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
    return x < y ? -1 : x > y;
}

/* Items in sorted[0..n) (ascending) that are > @x: n minus the first index with value > x. */
static gsize count_above(const guint64 *sorted, gsize n, guint64 x)
{
    gsize lo = 0, hi = n;

    while (lo < hi) {
        gsize mid = lo + (hi - lo) / 2;
        if (sorted[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return n - lo;
}

/* First index with value >= x. */
static gsize first_at_least(const guint64 *sorted, gsize n, guint64 x)
{
    gsize lo = 0, hi = n;

    while (lo < hi) {
        gsize mid = lo + (hi - lo) / 2;
        if (sorted[mid] >= x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Martello & Toth (1990), L2 = max over 0 <= a <= C/2 of
 *   |J1| + |J2| + max(0, ceil((sum(J3) - (|J2| C - sum(J2))) / C))
 * with J1 = {w > C - a}, J2 = {C - a >= w > C/2}, J3 = {C/2 >= w >= a}. The maximum is
 * reached at a = 0 or at an item size <= C/2, so those are the only values tried:
 * O(n log n) with the sizes sorted and prefix sums. */
guint pol_lower_bound_l2(const guint64 *sizes, gsize n, guint64 C)
{
    g_autofree guint64 *s = NULL;
    g_autofree guint64 *prefix = NULL; /* prefix[i] = s[0] + ... + s[i-1] */
    guint64 best = 0;

    g_return_val_if_fail(C > 0, 0);
    if (n == 0)
        return 0;
    s = g_new(guint64, n);
    prefix = g_new(guint64, n + 1);
    for (gsize i = 0; i < n; i++)
        s[i] = MIN(sizes[i], C);
    qsort(s, n, sizeof(*s), cmp_u64);
    prefix[0] = 0;
    for (gsize i = 0; i < n; i++)
        prefix[i + 1] = prefix[i] + s[i];

    for (gsize i = 0; i <= n; i++) {
        /* a = 0, then each distinct size <= C/2 */
        guint64 a = i == 0 ? 0 : s[i - 1];
        gsize j1_from, j2_from, j3_from;
        guint64 n12, sum2, sum3, room, l;

        if (i > 0 && (2 * a > C || (i > 1 && s[i - 2] == a)))
            continue;
        j1_from = n - count_above(s, n, C - a);  /* w > C - a */
        j2_from = n - count_above(s, n, C / 2);  /* w > C/2 */
        j3_from = first_at_least(s, n, a);       /* w >= a */
        if (j2_from > j1_from)
            j2_from = j1_from;
        n12 = n - j2_from;
        sum2 = prefix[j1_from] - prefix[j2_from];
        sum3 = j3_from < j2_from ? prefix[j2_from] - prefix[j3_from] : 0;
        room = (guint64)(j1_from - j2_from) * C - sum2;
        l = n12;
        if (sum3 > room)
            l += (sum3 - room + C - 1) / C;
        best = MAX(best, l);
    }
    return (guint)best;
}

static int cmp_i64_desc(const void *a, const void *b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
    return x > y ? -1 : x < y;
}

/* For each dimension: L2 with the largest capacity any usable host has (a valid bound for
 * unequal hosts too: enlarging every host to that size can only lower the optimum), and the
 * fewest hosts, largest first, whose capacities add up to the total demand. The hosts are
 * those that accept VMs or hold some now. The bound is the
 * maximum over dimensions, and at least the number of hosts holding VMs that may not move. */
guint pol_problem_lower_bound(const PolProblem *p)
{
    const guint D = p->dims;
    g_autofree guint64 *sizes = g_new(guint64, p->n_units + 1);
    g_autofree gint64 *caps = g_new(gint64, p->n_hosts + 1);
    g_autofree guint8 *anchor = g_new0(guint8, p->n_hosts + 1);
    g_autofree guint8 *holds = g_new0(guint8, p->n_hosts + 1);
    guint anchors = 0, bound = 0;

    for (guint u = 0; u < p->n_units; u++) {
        guint h = p->unit_host[u];
        holds[h] = TRUE;
        if (p->unit_fixed[u] && p->active[h] && !anchor[h]) {
            anchor[h] = TRUE;
            anchors++;
        }
    }
    for (guint d = 0; d < D; d++) {
        gsize n = 0, nc = 0;
        gint64 cmax = 0, total = 0, acc = 0;
        guint l1 = 0;

        for (guint h = 0; h < p->n_hosts; h++) {
            /* Hosts that may hold VMs after a plan: those accepting VMs, and those holding
             * some now (a VM that cannot leave an evacuating host stays there). */
            if (p->accepts[h] || (p->active[h] && holds[h])) {
                caps[nc++] = p->cap[(gsize)h * D + d];
                cmax = MAX(cmax, p->cap[(gsize)h * D + d]);
            }
        }
        for (guint u = 0; u < p->n_units; u++) {
            gint64 w = p->unit_dem[(gsize)u * D + d];
            if (!p->active[p->unit_host[u]] || w <= 0)
                continue;
            sizes[n++] = (guint64)w;
            total += w;
        }
        if (n == 0 || cmax <= 0)
            continue;
        bound = MAX(bound, pol_lower_bound_l2(sizes, n, (guint64)cmax));
        qsort(caps, nc, sizeof(*caps), cmp_i64_desc);
        for (gsize i = 0; i < nc && acc < total; i++) {
            acc += caps[i];
            l1++;
        }
        bound = MAX(bound, l1);
    }
    return MAX(bound, anchors);
}

/* ---- migrations at a given number of hosts ------------------------------------------------- */

/* One choice of optional hosts to empty, derived from its parent by moving the choice at
 * position @pos one step up the sorted list: only positions <= @pos may move further, so
 * every choice is reached once (docs/policies.md, "Migration lower bound"). */
typedef struct {
    guint64 sum; /* VMs on the emptied optional hosts */
    gint parent; /* index into the states, -1: the first choice */
    guint pos;
    guint value; /* the position's new place in the sorted list */
    guint seq; /* creation order: ties pop first-made first, so the search is deterministic */
} MigChoice;

typedef struct {
    const PolProblem *p;
    guint *opt;         /* optional hosts, fewest movable VMs first */
    guint n_opt;
    guint *n_vms;       /* per host: VMs of its movable units */
    guint *host_first;  /* per host + 1: offsets into host_units */
    guint *host_units;  /* units grouped by host */
    gint64 *room;       /* per host * dims: capacity minus what is on it */
    gint64 *fixed;      /* per host * dims: capacity minus the units that cannot move */
    guint8 *keep;       /* per host: in the choice's kept set */
    guint8 *must_keep;  /* per host: holds a unit that cannot move */
    guint8 *evacuate;   /* per host: active, accepts nothing, its movable units must leave */
    guint64 must_move;  /* VMs of movable units on hosts that accept nothing */
    guint *idx;         /* scratch: the choice's positions */
    guint *scratch;     /* scratch: hosts */
    gint64 *need;       /* scratch: dims */
    gint64 *small;      /* scratch: dims */
} MigBound;

static int cmp_guint(const void *a, const void *b)
{
    guint x = *(const guint *)a, y = *(const guint *)b;
    return x < y ? -1 : x > y;
}

/* Fewest of host @h's movable units whose removal leaves room for @item (dims values) in
 * every dimension: per dimension the largest first, the most over the dimensions; G_MAXUINT
 * when even removing them all is not enough. */
static guint mig_shed_count(MigBound *mb, guint h, const gint64 *item)
{
    const PolProblem *p = mb->p;
    const guint D = p->dims;
    guint most = 0;
    g_autofree gint64 *sizes = g_new(gint64, mb->host_first[h + 1] - mb->host_first[h] + 1);

    for (guint d = 0; d < D; d++) {
        gint64 deficit = item[d] - mb->room[(gsize)h * D + d];
        guint n = 0, count = 0;

        if (deficit <= 0)
            continue;
        for (guint i = mb->host_first[h]; i < mb->host_first[h + 1]; i++) {
            guint u = mb->host_units[i];
            if (!p->unit_fixed[u])
                sizes[n++] = p->unit_dem[(gsize)u * D + d];
        }
        qsort(sizes, n, sizeof(*sizes), cmp_i64_desc);
        while (count < n && deficit > 0)
            deficit -= sizes[count++];
        if (deficit > 0)
            return G_MAXUINT;
        most = MAX(most, count);
    }
    return MAX(most, 1);
}

static gint mig_room_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    const MigBound *mb = data;
    guint x = *(const guint *)a, y = *(const guint *)b;
    gint64 rx = mb->room[(gsize)x * mb->p->dims + POL_DIM_MEM];
    gint64 ry = mb->room[(gsize)y * mb->p->dims + POL_DIM_MEM];

    if (rx != ry)
        return rx > ry ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The hosts kept that accept VMs, into mb->scratch[0..return) by memory room, most first (a VM's
 * search stops at the first without room); their room in total per dimension into @total_room. */
static guint mig_kept_hosts(MigBound *mb, gint64 *total_room)
{
    const PolProblem *p = mb->p;
    const guint D = p->dims;
    guint n_kept = 0;

    for (guint h = 0; h < p->n_hosts; h++) {
        if (!mb->keep[h] || !p->accepts[h])
            continue;
        mb->scratch[n_kept++] = h;
        for (guint d = 0; d < D; d++)
            total_room[d] += MAX(mb->room[(gsize)h * D + d], 0);
    }
    g_qsort_with_data(mb->scratch, (gint)n_kept, sizeof(guint), mig_room_cmp, mb);
    return n_kept;
}

/* The VMs to place (those of the hosts not kept or evacuated): their demand in total into
 * @placed; how many fit in the room of no kept host (returned), their demand in total into
 * @bdem and the smallest per dimension into mb->small. */
static guint mig_unplaced(MigBound *mb, guint n_kept, gint64 *placed, gint64 *bdem)
{
    const PolProblem *p = mb->p;
    const guint D = p->dims;
    guint n_b = 0;

    for (guint d = 0; d < D; d++)
        mb->small[d] = G_MAXINT64;
    for (guint u = 0; u < p->n_units; u++) {
        guint h = p->unit_host[u];
        const gint64 *dem = p->unit_dem + (gsize)u * D;
        gboolean fits = FALSE;

        if (p->unit_fixed[u] || !p->active[h] || (mb->keep[h] && !mb->evacuate[h]))
            continue;
        for (guint d = 0; d < D; d++)
            placed[d] += dem[d];
        for (guint i = 0; i < n_kept && !fits; i++) {
            const gint64 *r = mb->room + (gsize)mb->scratch[i] * D;
            if (r[POL_DIM_MEM] < dem[POL_DIM_MEM])
                break;
            fits = TRUE;
            for (guint d = 0; d < D && fits; d++)
                fits = dem[d] <= r[d];
        }
        if (fits)
            continue;
        n_b++;
        for (guint d = 0; d < D; d++) {
            bdem[d] += dem[d];
            mb->small[d] = MIN(mb->small[d], dem[d]);
        }
    }
    return n_b;
}

/* Receivers of the VMs that fit nowhere (demand @bdem in total): each ends with room for its
 * share of those VMs only if it sheds. The fewest receivers: largest capacity left by the
 * immovable units first, per dimension; each sheds at least mig_shed_count() units for the
 * smallest of them. The units they shed in total, G_MAXUINT when the kept hosts cannot. */
static guint64 mig_receivers_shed(MigBound *mb, guint n_kept, const gint64 *bdem)
{
    const guint D = mb->p->dims;
    g_autofree guint *shed = g_new(guint, n_kept + 1);
    g_autofree gint64 *cap = g_new(gint64, n_kept + 1);
    guint receivers = 1, n_shed = 0;
    guint64 extra = 0;

    for (guint d = 0; d < D; d++) {
        gint64 acc = 0;
        guint r = 0;
        for (guint i = 0; i < n_kept; i++)
            cap[i] = mb->fixed[(gsize)mb->scratch[i] * D + d];
        qsort(cap, n_kept, sizeof(*cap), cmp_i64_desc);
        while (r < n_kept && acc < bdem[d])
            acc += cap[r++];
        if (acc < bdem[d])
            return G_MAXUINT;
        receivers = MAX(receivers, r);
    }
    for (guint i = 0; i < n_kept; i++) {
        guint s = mig_shed_count(mb, mb->scratch[i], mb->small);
        if (s != G_MAXUINT)
            shed[n_shed++] = s;
    }
    if (n_shed < receivers)
        return G_MAXUINT;
    qsort(shed, n_shed, sizeof(*shed), cmp_guint);
    for (guint i = 0; i < receivers; i++)
        extra += shed[i];
    return extra;
}

/* The extra migrations that keeping exactly the hosts marked in mb->keep forces beyond
 * emptying the others: G_MAXUINT when the kept hosts cannot take the VMs of the others even
 * in total; else, when some VM to place fits in the room of no kept host, enough kept hosts
 * must shed a VM to take those VMs. */
static guint64 mig_extra(MigBound *mb)
{
    const guint D = mb->p->dims;
    g_autofree gint64 *total_room = g_new0(gint64, D);
    g_autofree gint64 *placed = g_new0(gint64, D);
    g_autofree gint64 *bdem = g_new0(gint64, D);
    guint n_kept = mig_kept_hosts(mb, total_room);
    guint n_b = mig_unplaced(mb, n_kept, placed, bdem);

    for (guint d = 0; d < D; d++) {
        if (placed[d] > total_room[d])
            return G_MAXUINT;
    }
    if (n_b == 0)
        return 0;
    return mig_receivers_shed(mb, n_kept, bdem);
}

static gint mig_choice_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    const GArray *states = data;
    const MigChoice *x = &g_array_index(states, MigChoice, GPOINTER_TO_UINT(a));
    const MigChoice *y = &g_array_index(states, MigChoice, GPOINTER_TO_UINT(b));

    if (x->sum != y->sum)
        return x->sum < y->sum ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The positions (into mb->opt) of choice @s, into mb->idx[0..m): each step of the chain set
 * one position; the step nearest @s holds that position's value. */
static void mig_choice_positions(MigBound *mb, const GArray *states, guint s, guint m)
{
    g_autofree guint8 *set = g_new0(guint8, m + 1);

    for (guint j = 0; j < m; j++)
        mb->idx[j] = j;
    for (gint i = (gint)s; i >= 0; i = g_array_index(states, MigChoice, i).parent) {
        const MigChoice *c = &g_array_index(states, MigChoice, i);
        if (c->parent < 0)
            break;
        if (!set[c->pos]) {
            mb->idx[c->pos] = c->value;
            set[c->pos] = TRUE;
        }
    }
}

/* At most this many choices of hosts to empty are examined; then the bound is the cheapest
 * choice not examined, which no choice beats. */
#define MIG_BOUND_CHOICES 64

static void mig_bound_clear(MigBound *mb)
{
    g_free(mb->n_vms);
    g_free(mb->host_first);
    g_free(mb->host_units);
    g_free(mb->room);
    g_free(mb->fixed);
    g_free(mb->keep);
    g_free(mb->must_keep);
    g_free(mb->evacuate);
    g_free(mb->opt);
    g_free(mb->scratch);
    g_free(mb->small);
    g_free(mb->need);
    g_free(mb->idx);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(MigBound, mig_bound_clear)

/* Fills @mb for @p: the units by host, each host's room, its movable VMs, the hosts that must
 * be kept (returned: how many) and the optional ones. */
static guint mig_bound_init(MigBound *mb, const PolProblem *p)
{
    const guint D = p->dims;
    g_autofree guint *count = g_new0(guint, p->n_hosts + 1);
    guint n_must = 0;

    mb->p = p;
    mb->n_vms = g_new0(guint, p->n_hosts + 1);
    mb->host_first = g_new0(guint, p->n_hosts + 2);
    mb->host_units = g_new(guint, p->n_units + 1);
    mb->room = g_new(gint64, (gsize)p->n_hosts * D + 1);
    mb->fixed = g_new(gint64, (gsize)p->n_hosts * D + 1);
    mb->keep = g_new0(guint8, p->n_hosts + 1);
    mb->must_keep = g_new0(guint8, p->n_hosts + 1);
    mb->evacuate = g_new0(guint8, p->n_hosts + 1);
    mb->opt = g_new(guint, p->n_hosts + 1);
    mb->scratch = g_new(guint, p->n_hosts + 1);
    mb->small = g_new(gint64, D + 1);
    mb->need = g_new(gint64, D + 1);
    if (p->n_hosts) { /* no hosts: no capacities (p->cap may be NULL) */
        memcpy(mb->room, p->cap, sizeof(gint64) * p->n_hosts * D);
        memcpy(mb->fixed, p->cap, sizeof(gint64) * p->n_hosts * D);
    }
    for (guint u = 0; u < p->n_units; u++)
        count[p->unit_host[u]]++;
    for (guint h = 0; h < p->n_hosts; h++)
        mb->host_first[h + 1] = mb->host_first[h] + count[h];
    memset(count, 0, sizeof(guint) * p->n_hosts);
    for (guint u = 0; u < p->n_units; u++) {
        guint h = p->unit_host[u];
        mb->host_units[mb->host_first[h] + count[h]++] = u;
        for (guint d = 0; d < D; d++) {
            mb->room[(gsize)h * D + d] -= p->unit_dem[(gsize)u * D + d];
            if (p->unit_fixed[u])
                mb->fixed[(gsize)h * D + d] -= p->unit_dem[(gsize)u * D + d];
        }
        if (p->unit_fixed[u] && p->active[h])
            mb->must_keep[h] = TRUE;
        else if (!p->unit_fixed[u])
            mb->n_vms[h] += p->unit_first[u + 1] - p->unit_first[u];
    }
    for (guint h = 0; h < p->n_hosts; h++) {
        if (!p->active[h])
            continue;
        if (!p->accepts[h]) {
            mb->must_move += mb->n_vms[h];
            mb->evacuate[h] = mb->n_vms[h] > 0;
        }
        if (mb->must_keep[h]) {
            mb->keep[h] = TRUE;
            n_must++;
        } else if (p->accepts[h]) {
            mb->opt[mb->n_opt++] = h;
        }
    }
    return n_must;
}

/* Sorts the optional hosts, fewest VMs first (to be emptied first); their VM counts in that
 * order (owned). */
static guint *mig_bound_sort_optional(MigBound *mb)
{
    g_autofree guint64 *keys = g_new(guint64, mb->n_opt + 1);
    guint *n_sorted;

    for (guint i = 0; i < mb->n_opt; i++)
        keys[i] = ((guint64)mb->n_vms[mb->opt[i]] << 32) | mb->opt[i];
    qsort(keys, mb->n_opt, sizeof(*keys), cmp_u64);
    n_sorted = g_new(guint, mb->n_opt + 1);
    for (guint i = 0; i < mb->n_opt; i++) {
        mb->opt[i] = (guint)(keys[i] & 0xffffffffu);
        n_sorted[i] = mb->n_vms[mb->opt[i]];
    }
    return n_sorted;
}

/* The cheapest choice of @m optional hosts to empty (@n_sorted: their VM counts, fewest
 * first), cheapest choices first, at most MIG_BOUND_CHOICES of them. */
static guint64 mig_bound_search(MigBound *mb, guint m, const guint *n_sorted)
{
    g_autoptr(GArray) states = g_array_new(FALSE, FALSE, sizeof(MigChoice));
    g_autoptr(GSequence) heap = g_sequence_new(NULL);
    guint64 best = G_MAXUINT64;
    guint seq = 0;
    MigChoice first = {0, -1, m > 0 ? m - 1 : 0, 0, seq++};

    for (guint j = 0; j < m; j++)
        first.sum += n_sorted[j];
    g_array_append_val(states, first);
    g_sequence_insert_sorted(heap, GUINT_TO_POINTER(0), mig_choice_cmp, states);
    for (guint pops = 0; !g_sequence_is_empty(heap); pops++) {
        GSequenceIter *top = g_sequence_get_begin_iter(heap);
        guint s = GPOINTER_TO_UINT(g_sequence_get(top));
        MigChoice c = g_array_index(states, MigChoice, s);
        guint64 extra;

        if (c.sum + mb->must_move >= best)
            break;
        if (pops == MIG_BOUND_CHOICES) {
            best = c.sum + mb->must_move; /* no choice left beats this */
            break;
        }
        g_sequence_remove(top);
        mig_choice_positions(mb, states, s, m);
        for (guint i = 0; i < mb->n_opt; i++)
            mb->keep[mb->opt[i]] = TRUE;
        for (guint j = 0; j < m; j++)
            mb->keep[mb->opt[mb->idx[j]]] = FALSE;
        extra = mig_extra(mb);
        if (extra != G_MAXUINT)
            best = MIN(best, c.sum + mb->must_move + extra);
        /* Successors: move one position <= c.pos up by one, keeping the order. */
        for (guint j = 0; j < m && j <= c.pos; j++) {
            guint next = mb->idx[j] + 1;
            MigChoice child;
            if (next >= mb->n_opt || (j + 1 < m && next >= mb->idx[j + 1]))
                continue;
            child.sum = c.sum - n_sorted[mb->idx[j]] + n_sorted[next];
            child.parent = (gint)s;
            child.pos = j;
            child.value = next;
            child.seq = seq++;
            g_array_append_val(states, child);
            g_sequence_insert_sorted(heap, GUINT_TO_POINTER(states->len - 1), mig_choice_cmp,
                                     states);
        }
        if (m == 0)
            break;
    }
    return best;
}

guint pol_problem_migration_bound(const PolProblem *p, guint k)
{
    g_auto(MigBound) mb = {0};
    g_autofree guint *n_sorted = NULL;
    guint n_must, m;
    guint64 best;

    n_must = mig_bound_init(&mb, p);
    if (n_must > k)
        return G_MAXUINT;
    n_sorted = mig_bound_sort_optional(&mb);
    m = k - n_must < mb.n_opt ? mb.n_opt - (k - n_must) : 0; /* optional hosts to empty */
    mb.idx = g_new(guint, m + 1);
    best = mig_bound_search(&mb, m, n_sorted);
    return best >= G_MAXUINT ? G_MAXUINT : (guint)best;
}

gboolean pol_cluster_migration_bound(const PolCluster *cluster, const PolOptions *opts,
                                     guint hosts, guint *ret_bound, GError **error)
{
    PolOptions defaults;
    g_autoptr(PolProblem) p = NULL;
    guint bound;

    g_return_val_if_fail(cluster != NULL && ret_bound != NULL, FALSE);
    if (!opts) {
        pol_options_init(&defaults);
        opts = &defaults;
    }
    p = pol_problem_new(cluster, opts);
    bound = pol_problem_migration_bound(p, hosts);
    if (bound == G_MAXUINT) {
        g_set_error(error, POL_ERROR, POL_ERROR_NO_ROOM,
                    "no consolidation onto %u hosts can hold the VMs", hosts);
        return FALSE;
    }
    *ret_bound = bound;
    return TRUE;
}
