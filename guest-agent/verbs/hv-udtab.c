/* libhotmig-verbs, translation layer: the UD translation table: the (GID, virtual QPN) -> physical
 * QPN pairs moved UD peers announced, and the UD targets this process sent to (pure). */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static HvUdPeer *hv_ud_peer(const HvUdTable *t, const uint8_t gid[16])
{
    for (size_t i = 0; i < t->npeers; i++)
        if (memcmp(t->peers[i].gid, gid, 16) == 0)
            return (HvUdPeer *)&t->peers[i];
    return NULL;
}

int hv_ud_learn(HvUdTable *t, const uint8_t gid[16], const uint32_t *v, const uint32_t *p,
                uint32_t n)
{
    HvUdPeer *peer = hv_ud_peer(t, gid);

    if (!peer && t->npeers == HV_UD_PEERS_MAX) {
        /* full: the peer learned longest ago makes room (its posts go untranslated) */
        peer = &t->peers[t->evict];
        t->evict = (t->evict + 1) % HV_UD_PEERS_MAX;
        hv_map_clear(&peer->v2p);
        hv_map_clear(&peer->p2v);
        memcpy(peer->gid, gid, 16);
    } else if (!peer) {
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
    for (size_t i = 0; i < t->ntargets; i++)
        if (t->targets[i].qpn == qpn && memcmp(t->targets[i].gid, gid, 16) == 0)
            return 0;
    if (t->ntargets == HV_UD_TARGETS_MAX)
        return 0;
    memcpy(t->targets[t->ntargets].gid, gid, 16);
    t->targets[t->ntargets].qpn = qpn;
    t->targets[t->ntargets].port = port;
    t->targets[t->ntargets].sgid_index = sgid_index;
    t->ntargets++;
    return 1;
}

void hv_ud_clear(HvUdTable *t)
{
    for (size_t i = 0; i < t->npeers; i++) {
        hv_map_clear(&t->peers[i].v2p);
        hv_map_clear(&t->peers[i].p2v);
    }
    t->npeers = 0;
    t->ntargets = 0;
}
