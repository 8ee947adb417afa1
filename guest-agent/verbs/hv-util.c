/* libhotmig-verbs: logging and the small integer map. */
#include "hv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hv_debug_on = -1;

static void hv_vlog(const char *fmt, va_list ap)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "hotmig-verbs[%ld]: ", (long)getpid());

    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    /* One write, so lines of several threads do not interleave. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

void hv_log(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    hv_vlog(fmt, ap);
    va_end(ap);
}

void hv_debug(const char *fmt, ...)
{
    va_list ap;

    if (hv_debug_on < 0) {
        const char *e = getenv("HOTMIG_VERBS_DEBUG");

        hv_debug_on = e && *e && strcmp(e, "0") != 0;
    }
    if (!hv_debug_on)
        return;
    va_start(ap, fmt);
    hv_vlog(fmt, ap);
    va_end(ap);
}

void (*hv_refused_hook)(const char *call); /* jobs: see hv.h */

int hv_unsupported(const char *call)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static const char *seen[64];
    static size_t n_seen;
    int first = 1;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_seen; i++)
        if (strcmp(seen[i], call) == 0)
            first = 0;
    if (first && n_seen < 64)
        seen[n_seen++] = call;
    pthread_mutex_unlock(&lock);
    if (first)
        hv_log("%s is not supported by the hotmig verbs layer (EOPNOTSUPP)", call);
    if (first && hv_refused_hook)
        hv_refused_hook(call);
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

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

/* ---- loopback connections ------------------------------------------------------------------ */

int hv_peer_is_local(const HvQp *qp, const HvQp *peer, const union ibv_gid *own_gid,
                     uint16_t own_lid)
{
    if (!qp || !peer || !qp->m_rtr || !(qp->m_rtr & IBV_QP_DEST_QPN))
        return 0;
    if (qp->init.qp_type != IBV_QPT_RC && qp->init.qp_type != IBV_QPT_UC)
        return 0;
    if (peer->init.qp_type != qp->init.qp_type || peer->pub.qp_num != qp->peer_vqpn ||
        peer->peer_vqpn != qp->pub.qp_num)
        return 0;
    /* virtual QPNs of two guests may be equal: the address must be this QP's own too */
    if (qp->a_rtr.ah_attr.is_global)
        return own_gid && memcmp(qp->a_rtr.ah_attr.grh.dgid.raw, own_gid->raw, 16) == 0;
    return qp->a_rtr.ah_attr.dlid == own_lid;
}

void hv_local_rtr(const HvQp *qp, uint32_t peer_pqpn, const union ibv_gid *gid, uint16_t lid,
                  struct ibv_qp_attr *a)
{
    *a = qp->a_rtr;
    a->dest_qp_num = peer_pqpn;
    if (a->ah_attr.is_global) {
        if (gid)
            a->ah_attr.grh.dgid = *gid;
    } else {
        a->ah_attr.dlid = lid;
    }
}

/* ---- UD peers that moved ------------------------------------------------------------------- */

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

    if (!peer) {
        if (t->npeers == HV_UD_PEERS_MAX)
            return -ENOSPC;
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

/* ---- both ends moving ------------------------------------------------------------------- */

HvVerdict hv_reconnect_verdict(int reconnected, int have_phys, int swapping, int drives,
                               int awaiting, int calling)
{
    if (reconnected)
        return HV_VERDICT_RECONNECTED; /* the caller's RECONNECT came second */
    if (!have_phys)
        return HV_VERDICT_MOVING; /* our device is not back: we reconnect when it is */
    if (swapping && drives && calling)
        return HV_VERDICT_WAIT; /* our own RECONNECT is out: its answer decides */
    if (swapping && drives && !awaiting)
        return HV_VERDICT_MOVING; /* both back, we drive: our resume sends ours */
    return HV_VERDICT_ACCEPT;
}

int hv_drives(const uint8_t own_gid[16], uint32_t own_vqpn, const uint8_t peer_gid[16],
              uint32_t peer_vqpn)
{
    int c = memcmp(own_gid, peer_gid, 16);

    return c < 0 || (c == 0 && own_vqpn < peer_vqpn);
}
