/* hm-policies: lower bounds on the number of hosts (docs/policies.md, "Lower bound"). */
#include "policies/policies-priv.h"

#include <stdlib.h>

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
