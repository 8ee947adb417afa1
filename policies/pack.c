/* hm-policies: the indexed best-fit packer. */
#include "policies/pack-priv.h"

#include <stdlib.h>
#include <string.h>

static gint bin_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    const PolPacker *pk = data;
    const guint D = pk->p->dims;
    guint ia = GPOINTER_TO_UINT(a), ib = GPOINTER_TO_UINT(b); /* host + 1, 0 = the probe */
    gint64 ka = ia ? pk->res[(gsize)(ia - 1) * D + pk->dom] : pk->probe;
    gint64 kb = ib ? pk->res[(gsize)(ib - 1) * D + pk->dom] : pk->probe;

    if (ka != kb)
        return ka < kb ? -1 : 1;
    return ia < ib ? -1 : ia > ib; /* the probe sorts before equal keys */
}

PolPacker *pol_packer_new(const PolProblem *p, guint dom)
{
    PolPacker *pk = g_new0(PolPacker, 1);

    pk->p = p;
    pk->dom = dom;
    pk->res = g_new0(gint64, (gsize)p->n_hosts * p->dims + 1);
    pk->open = g_new0(guint8, p->n_hosts + 1);
    pk->seq = g_sequence_new(NULL);
    pk->iter = g_new0(GSequenceIter *, p->n_hosts + 1);
    pk->assign = g_new(gint, p->n_units + 1);
    pk->locked = g_new0(guint8, p->n_units + 1);
    pk->head = g_new(gint, p->n_hosts + 1);
    pk->next = g_new(gint, p->n_units + 1);
    pk->prev = g_new(gint, p->n_units + 1);
    for (guint u = 0; u < p->n_units; u++)
        pk->assign[u] = -1;
    for (guint h = 0; h < p->n_hosts; h++)
        pk->head[h] = -1;
    return pk;
}

void pol_packer_free(PolPacker *pk)
{
    if (!pk)
        return;
    g_free(pk->res);
    g_free(pk->open);
    g_sequence_free(pk->seq);
    g_free(pk->iter);
    g_free(pk->assign);
    g_free(pk->locked);
    g_free(pk->head);
    g_free(pk->next);
    g_free(pk->prev);
    g_free(pk);
}

void pol_packer_open(PolPacker *pk, guint h)
{
    const guint D = pk->p->dims;

    g_assert(!pk->open[h]);
    memcpy(pk->res + (gsize)h * D, pk->p->cap + (gsize)h * D, sizeof(gint64) * D);
    pk->open[h] = TRUE;
    pk->iter[h] = g_sequence_insert_sorted(pk->seq, GUINT_TO_POINTER(h + 1), bin_cmp, pk);
}

gboolean pol_packer_fits(const PolPacker *pk, guint u, guint h)
{
    const guint D = pk->p->dims;
    const gint64 *dem = pk->p->unit_dem + (gsize)u * D;
    const gint64 *res = pk->res + (gsize)h * D;

    for (guint d = 0; d < D; d++) {
        if (dem[d] > res[d])
            return FALSE;
    }
    return TRUE;
}

static void bin_add(PolPacker *pk, guint u, guint h, gint sign)
{
    const guint D = pk->p->dims;
    const gint64 *dem = pk->p->unit_dem + (gsize)u * D;
    gint64 *res = pk->res + (gsize)h * D;

    for (guint d = 0; d < D; d++)
        res[d] -= sign * dem[d];
    g_sequence_sort_changed(pk->iter[h], bin_cmp, pk);
}

void pol_packer_put(PolPacker *pk, guint u, guint h, gboolean locked)
{
    g_assert(pk->open[h] && pk->assign[u] < 0);
    bin_add(pk, u, h, 1);
    pk->assign[u] = (gint)h;
    pk->locked[u] = locked;
    pk->prev[u] = -1;
    pk->next[u] = pk->head[h];
    if (pk->head[h] >= 0)
        pk->prev[pk->head[h]] = (gint)u;
    pk->head[h] = (gint)u;
}

void pol_packer_take(PolPacker *pk, guint u)
{
    gint h = pk->assign[u];

    g_assert(h >= 0);
    bin_add(pk, u, (guint)h, -1);
    if (pk->prev[u] >= 0)
        pk->next[pk->prev[u]] = pk->next[u];
    else
        pk->head[h] = pk->next[u];
    if (pk->next[u] >= 0)
        pk->prev[pk->next[u]] = pk->prev[u];
    pk->assign[u] = -1;
    pk->locked[u] = FALSE;
}

gint pol_packer_find(PolPacker *pk, guint u, gint skip)
{
    GSequenceIter *it;

    pk->probe = pk->p->unit_dem[(gsize)u * pk->p->dims + pk->dom];
    it = g_sequence_search(pk->seq, NULL, bin_cmp, pk);
    for (; !g_sequence_iter_is_end(it); it = g_sequence_iter_next(it)) {
        guint h = GPOINTER_TO_UINT(g_sequence_get(it)) - 1;
        if ((gint)h != skip && pol_packer_fits(pk, u, h))
            return (gint)h;
    }
    return -1;
}

gboolean pol_packer_eject(PolPacker *pk, guint u)
{
    const PolProblem *p = pk->p;
    const guint D = p->dims;
    const gint64 *need = p->unit_dem + (gsize)u * D;

    /* First a unit that moves anyway (not on its own host: moving it elsewhere costs no
     * migration), then one that would otherwise stay. */
    for (guint pass = 0; pass < 2; pass++) {
        for (guint b = 0; b < p->n_hosts; b++) {
            const gint64 *res = pk->res + (gsize)b * D;

            if (!pk->open[b])
                continue;
            for (gint x = pk->head[b]; x >= 0; x = pk->next[x]) {
                const gint64 *dx = p->unit_dem + (gsize)x * D;
                gboolean room = TRUE;
                gint c;

                if (pk->locked[x] || (pass == 0 && p->unit_host[x] == b))
                    continue;
                for (guint d = 0; d < D && room; d++)
                    room = res[d] + dx[d] >= need[d];
                if (!room)
                    continue;
                c = pol_packer_find(pk, (guint)x, (gint)b);
                if (c < 0)
                    continue;
                pol_packer_take(pk, (guint)x);
                pol_packer_put(pk, (guint)x, (guint)c, FALSE);
                pol_packer_put(pk, u, b, FALSE);
                return TRUE;
            }
        }
    }
    return FALSE;
}

typedef struct {
    guint unit;
    double key;
} SortItem;

static int sort_item_cmp(const void *a, const void *b)
{
    const SortItem *x = a, *y = b;

    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return x->unit < y->unit ? -1 : x->unit > y->unit;
}

void pol_units_sort(const PolProblem *p, guint *units, guint n, PolKey key, guint dom,
                    const double *weight, const gint64 *ref)
{
    const guint D = p->dims;
    g_autofree SortItem *items = g_new(SortItem, n + 1);

    for (guint i = 0; i < n; i++) {
        const gint64 *dem = p->unit_dem + (gsize)units[i] * D;
        double k = 0.0;

        for (guint d = 0; d < D; d++) {
            double x = ref[d] > 0 ? (double)dem[d] / (double)ref[d] : 0.0;
            if (key == POL_KEY_WEIGHTED)
                k += weight[d] * x;
            else if (key == POL_KEY_MAX)
                k = MAX(k, x);
            else if (d == dom)
                k = x;
        }
        items[i].unit = units[i];
        items[i].key = k;
    }
    qsort(items, n, sizeof(*items), sort_item_cmp);
    for (guint i = 0; i < n; i++)
        units[i] = items[i].unit;
}

/* "CPU 0.62 needed, 0.41 free" for dimension @d of @p. */
static void append_short(GString *out, const PolProblem *p, guint d, gint64 need, gint64 left)
{
    const PolCluster *c = p->cluster;

    if (d == POL_DIM_CPU)
        g_string_append_printf(out, "CPU %.2f needed, %.2f free", need / 1000.0,
                               MAX(left, 0) / 1000.0);
    else if (d == POL_DIM_MEM)
        g_string_append_printf(out, "%" G_GINT64_FORMAT " MiB needed, %" G_GINT64_FORMAT " free",
                               need, MAX(left, 0));
    else
        g_string_append_printf(out, "%" G_GINT64_FORMAT " VFs%s%s needed, %" G_GINT64_FORMAT " free",
                               need, d == POL_DIM_VF0 ? "" : " of model ",
                               d == POL_DIM_VF0 ? "" : (const char *)g_ptr_array_index(c->models, d - POL_DIM_VF0),
                               MAX(left, 0));
}

char *pol_packer_why_no_room(const PolPacker *pk, guint u, gint skip)
{
    const PolProblem *p = pk->p;
    const guint D = p->dims;
    const gint64 *dem = p->unit_dem + (gsize)u * D;
    GString *out = g_string_new(NULL);

    for (guint h = 0; h < p->n_hosts; h++) {
        const PolHost *host = g_ptr_array_index(p->cluster->hosts, h);
        const gint64 *left = pk->open[h] ? pk->res + (gsize)h * D : p->cap + (gsize)h * D;

        if ((gint)h == skip)
            continue;
        g_string_append_printf(out, "%s%s: ", out->len ? "; " : "", host->name);
        if (!p->accepts[h]) {
            g_string_append(out, pol_host_state_to_string(host->state));
            continue;
        }
        for (guint d = 0, shorts = 0; d < D; d++) {
            if (dem[d] <= left[d])
                continue;
            if (shorts++)
                g_string_append(out, ", ");
            append_short(out, p, d, dem[d], left[d]);
        }
    }
    return g_string_free(out, FALSE);
}
