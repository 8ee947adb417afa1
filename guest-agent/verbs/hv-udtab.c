/* libhotmig-verbs, translation layer: the UD translation table: the (GID, virtual QPN) -> physical
 * QPN pairs moved UD peers announced, and the UD targets this process sent to (pure). */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the growable sets (hv.h, HvUdSet) ------------------------------------------------------ */
static uint32_t hv_ud_hash(const uint8_t gid[16], uint32_t qpn)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (int i = 0; i < 16; i++)
        h = (h ^ gid[i]) * 16777619u;
    for (int i = 0; i < 4; i++)
        h = (h ^ ((qpn >> (8 * i)) & 0xff)) * 16777619u;
    return h;
}

static size_t hv_ud_set_max(const HvUdSet *s)
{
    return s->max ? s->max : HV_UD_SENT_MAX;
}

/* The index slot of (@gid, @qpn): the entry's, or the free one where it would go. */
static uint32_t *hv_ud_slot(const HvUdSet *s, const uint8_t gid[16], uint32_t qpn)
{
    size_t mask = s->nslot - 1, i = hv_ud_hash(gid, qpn) & mask;

    for (;; i = (i + 1) & mask) {
        uint32_t k = s->slot[i];

        if (!k || (s->v[k - 1].qpn == qpn && !memcmp(s->v[k - 1].gid, gid, 16)))
            return &s->slot[i];
    }
}

HvUdEntry *hv_ud_set_find(const HvUdSet *s, const uint8_t gid[16], uint32_t qpn)
{
    uint32_t k;

    if (!s->n)
        return NULL;
    k = *hv_ud_slot(s, gid, qpn);
    return k ? &s->v[k - 1] : NULL;
}

int hv_ud_set_reserve(HvUdSet *s, size_t n)
{
    size_t cap = s->cap ? s->cap : 16, nslot;
    HvUdEntry *v;
    uint32_t *slot;

    if (n > hv_ud_set_max(s))
        n = hv_ud_set_max(s);
    if (n <= s->cap)
        return 0;
    while (cap < n)
        cap *= 2;
    nslot = 2 * cap; /* a power of two: the index stays at most half full */
    v = realloc(s->v, cap * sizeof(*v));
    if (!v)
        return -ENOMEM;
    s->v = v;
    slot = calloc(nslot, sizeof(*slot));
    if (!slot)
        return -ENOMEM;
    free(s->slot);
    s->slot = slot;
    s->nslot = nslot;
    s->cap = cap;
    for (size_t i = 0; i < s->n; i++)
        *hv_ud_slot(s, s->v[i].gid, s->v[i].qpn) = (uint32_t)i + 1;
    return 0;
}

HvUdEntry *hv_ud_set_add(HvUdSet *s, const uint8_t gid[16], uint32_t qpn, int *added)
{
    HvUdEntry *e = hv_ud_set_find(s, gid, qpn);
    uint32_t *slot;

    *added = 0;
    if (e)
        return e;
    if (s->n == hv_ud_set_max(s)) {
        s->full = 1;
        return NULL;
    }
    if (s->n == s->cap && hv_ud_set_reserve(s, s->cap ? 2 * s->cap : 16) < 0)
        return NULL;
    slot = hv_ud_slot(s, gid, qpn);
    e = &s->v[s->n];
    memset(e, 0, sizeof(*e));
    memcpy(e->gid, gid, 16);
    e->qpn = qpn;
    *slot = (uint32_t)++s->n;
    *added = 1;
    return e;
}

void hv_ud_set_clear(HvUdSet *s)
{
    s->n = 0;
    if (s->slot)
        memset(s->slot, 0, s->nslot * sizeof(*s->slot));
}

void hv_ud_set_free(HvUdSet *s)
{
    free(s->v);
    free(s->slot);
    s->v = NULL;
    s->slot = NULL;
    s->n = s->cap = s->nslot = 0;
}

/* ---- the UD table ---------------------------------------------------------------------------- */
static HvUdPeer *hv_ud_peer(const HvUdTable *t, const uint8_t gid[16])
{
    HvUdEntry *e = hv_ud_set_find(&t->peer_ix, gid, 0);

    return e ? (HvUdPeer *)&t->peers[e->n] : NULL;
}

/* The index of the peers, made again (a peer was replaced: the index cannot delete). */
static int hv_ud_peer_index(HvUdTable *t)
{
    int added;

    t->peer_ix.max = HV_UD_PEERS_MAX;
    hv_ud_set_clear(&t->peer_ix);
    for (size_t i = 0; i < t->npeers; i++) {
        HvUdEntry *e = hv_ud_set_add(&t->peer_ix, t->peers[i].gid, 0, &added);

        if (!e)
            return -ENOMEM;
        e->n = (uint32_t)i;
    }
    return 0;
}

int hv_ud_learn(HvUdTable *t, const uint8_t gid[16], const uint32_t *v, const uint32_t *p,
                uint32_t n)
{
    HvUdPeer *peer = hv_ud_peer(t, gid);

    if (!peer && t->npeers == HV_UD_PEERS_MAX) {
        /* full: the peer learned longest ago makes room (its posts go untranslated) */
        peer = &t->peers[t->evict];
        t->evict = (t->evict + 1) % HV_UD_PEERS_MAX;
        t->evicted++;
        hv_map_clear(&peer->v2p);
        hv_map_clear(&peer->p2v);
        memcpy(peer->gid, gid, 16);
        if (hv_ud_peer_index(t) < 0)
            return -ENOMEM;
    } else if (!peer) {
        HvUdEntry *e;
        int added;

        t->peer_ix.max = HV_UD_PEERS_MAX;
        e = hv_ud_set_add(&t->peer_ix, gid, 0, &added);
        if (!e)
            return -ENOMEM;
        e->n = (uint32_t)t->npeers;
        peer = &t->peers[t->npeers++];
        memset(peer, 0, sizeof(*peer));
        memcpy(peer->gid, gid, 16);
    }
    hv_map_clear(&peer->v2p);
    hv_map_clear(&peer->p2v);
    for (uint32_t i = 0; i < n; i++) {
        if (hv_map_put(&peer->v2p, v[i], p[i]) || hv_map_put(&peer->p2v, p[i], v[i]))
            return -ENOMEM;
    }
    return 0;
}

int hv_ud_out(const HvUdTable *t, const uint8_t gid[16], uint32_t vqpn, uint32_t *pqpn)
{
    HvUdPeer *peer = hv_ud_peer(t, gid);
    uint64_t v;

    if (!peer || !hv_map_get(&peer->v2p, vqpn, &v))
        return 0;
    *pqpn = (uint32_t)v;
    return 1;
}

int hv_ud_in(const HvUdTable *t, uint32_t pqpn, uint32_t *vqpn)
{
    int found = 0;
    uint64_t v, first = 0;

    for (size_t i = 0; i < t->npeers; i++)
        if (hv_map_get(&t->peers[i].p2v, pqpn, &v)) {
            if (found && v != first)
                return 0; /* two peers use that number: the sender is unknown */
            first = v;
            found = 1;
        }
    if (found)
        *vqpn = (uint32_t)first;
    return found;
}

int hv_ud_target_note(HvUdTable *t, const uint8_t gid[16], uint32_t qpn, uint8_t port,
                      uint8_t sgid_index)
{
    HvUdEntry *e;
    int added;

    t->targets.max = HV_UD_TARGETS_MAX;
    e = hv_ud_set_add(&t->targets, gid, qpn, &added);
    if (!e)
        return t->targets.n == HV_UD_TARGETS_MAX ? -ENOSPC : -ENOMEM;
    if (added) {
        e->port = port;
        e->sgid_index = sgid_index;
    }
    return added;
}

void hv_ud_clear(HvUdTable *t)
{
    for (size_t i = 0; i < t->npeers; i++) {
        hv_map_clear(&t->peers[i].v2p);
        hv_map_clear(&t->peers[i].p2v);
    }
    t->npeers = 0;
    hv_ud_set_clear(&t->peer_ix);
    hv_ud_set_clear(&t->targets);
}
