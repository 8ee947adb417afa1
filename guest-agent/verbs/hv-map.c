/* libhotmig-verbs, base layer: the uint32 -> uint64 open-addressing map every table of the layer
 * uses. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t hv_map_slot(uint32_t key, size_t cap)
{
    return (size_t)((key * 2654435761u) & (cap - 1));
}

static int hv_map_grow(HvMap *m)
{
    HvMap n = {0};
    size_t cap = m->cap ? m->cap * 2 : 64;

    n.keys = calloc(cap, sizeof(*n.keys));
    n.vals = calloc(cap, sizeof(*n.vals));
    n.used = calloc(cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        free(n.keys);
        free(n.vals);
        free(n.used);
        return -ENOMEM;
    }
    n.cap = cap;
    for (size_t i = 0; i < m->cap; i++)
        if (m->used[i] == 1)
            hv_map_put(&n, m->keys[i], m->vals[i]);
    free(m->keys);
    free(m->vals);
    free(m->used);
    *m = n;
    return 0;
}

/* used[]: 0 empty, 1 full, 2 deleted */
int hv_map_put(HvMap *m, uint32_t key, uint64_t val)
{
    size_t i, tomb = (size_t)-1;

    size_t k;

    if ((m->n + 1) * 2 > m->cap && hv_map_grow(m) < 0)
        return -ENOMEM;
    for (i = hv_map_slot(key, m->cap), k = 0; k < m->cap; i = (i + 1) & (m->cap - 1), k++) {
        if (m->used[i] == 1 && m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
        if (m->used[i] == 2 && tomb == (size_t)-1)
            tomb = i;
        if (m->used[i] == 0)
            break;
    }
    if (tomb != (size_t)-1)
        i = tomb;
    else if (k == m->cap)
        return hv_map_grow(m) < 0 ? -ENOMEM : hv_map_put(m, key, val);
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

int hv_map_get(const HvMap *m, uint32_t key, uint64_t *val)
{
    if (!m->cap)
        return 0;
    for (size_t i = hv_map_slot(key, m->cap), k = 0; k < m->cap; i = (i + 1) & (m->cap - 1), k++) {
        if (m->used[i] == 0)
            return 0;
        if (m->used[i] == 1 && m->keys[i] == key) {
            if (val)
                *val = m->vals[i];
            return 1;
        }
    }
    return 0;
}

void hv_map_del(HvMap *m, uint32_t key)
{
    if (!m->cap)
        return;
    for (size_t i = hv_map_slot(key, m->cap), k = 0; k < m->cap; i = (i + 1) & (m->cap - 1), k++) {
        if (m->used[i] == 0)
            return;
        if (m->used[i] == 1 && m->keys[i] == key) {
            m->used[i] = 2;
            m->n--;
            return;
        }
    }
}

void hv_map_clear(HvMap *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof(*m));
}
