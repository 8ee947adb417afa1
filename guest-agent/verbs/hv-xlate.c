/* libhotmig-verbs, translation layer: what the data path reads after a swap: the layer's UD table
 * and its receive counts, address handles made again, the changed rkeys of a context, KEYMAP of a
 * key registered after a swap, and the lookup of a peer a QP connects to after a swap (LOOKUP). */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Guards the making of a physical AH (hv_ah_phys(), the rebuild, a UDMAP): a leaf lock, taken
 * under hv.lock or a QP's lock, never the other way. */
static pthread_mutex_t hv_ah_lock = PTHREAD_MUTEX_INITIALIZER;

int hv_ah_renew(HvAh *ah)
{
    struct ibv_ah *n = hv_real.r_ibv_create_ah(ah->pd->phys, &ah->attr);

    if (!n)
        return -1;
    pthread_mutex_lock(&hv_ah_lock);
    if (ah->phys) {
        if (ah->stale)
            hv_real.r_ibv_destroy_ah(ah->stale);
        ah->stale = ah->phys;
    }
    ah->phys = n;
    pthread_mutex_unlock(&hv_ah_lock);
    return 0;
}

struct ibv_ah *hv_ah_phys(HvAh *ah)
{
    struct ibv_ah *p;

    pthread_mutex_lock(&hv_ah_lock);
    errno = 0;
    if (!ah->phys && ah->pd->phys)
        ah->phys = hv_real.r_ibv_create_ah(ah->pd->phys, &ah->attr);
    p = ah->phys;
    pthread_mutex_unlock(&hv_ah_lock);
    if (!p && !errno)
        errno = ENODEV;
    return p;
}

int hv_qp_connected(const HvQp *qp)
{
    return (qp->init.qp_type == IBV_QPT_RC || qp->init.qp_type == IBV_QPT_UC) && qp->m_rtr &&
           (qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS);
}

uint16_t hv_port_lid(HvContext *ctx, uint8_t port)
{
    struct ibv_port_attr pa;

    memset(&pa, 0, sizeof(pa));
    if (!ctx || !ctx->phys ||
        hv_real.r_ibv_query_port(ctx->phys, port ? port : 1, (struct _compat_ibv_port_attr *)&pa))
        return 0;
    return pa.lid;
}

int hv_av_peer(HvContext *ctx, const struct ibv_ah_attr *ah, union ibv_gid *gid)
{
    uint8_t port = ah->port_num ? ah->port_num : 1;
    uint16_t own;

    if (ah->is_global) {
        *gid = ah->grh.dgid;
        return 1;
    }
    memset(gid, 0, sizeof(*gid));
    own = hv_port_lid(ctx, port);
    if (own && own == ah->dlid)
        return hv_real.r_ibv_query_gid(ctx->phys, port, 0, gid) == 0;
    return hv_peer_gid_of_lid(ah->dlid, gid);
}

static HvUdTable hv_ud_tab;
static pthread_mutex_t hv_ud_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int hv_ud_known; /* peers in hv_ud_tab: receives skip the lock while 0 */

uint32_t hv_ud_send_qpn(const HvAh *ah, uint32_t remote_qpn)
{
    uint32_t p = remote_qpn;
    int r;

    if (!ah->peer_known)
        return remote_qpn;
    pthread_mutex_lock(&hv_ud_lock);
    r = hv_ud_target_note(&hv_ud_tab, ah->peer.raw, remote_qpn, ah->attr.port_num,
                          ah->attr.is_global ? ah->attr.grh.sgid_index : 0);
    if (!hv_ud_out(&hv_ud_tab, ah->peer.raw, remote_qpn, &p))
        p = remote_qpn;
    pthread_mutex_unlock(&hv_ud_lock);
    if (r < 0) /* a target not noted is not held or told at a move: never silently */
        hv_not_migratable(r == -ENOSPC ? "UD sends to over 65536 (GID, QPN) targets"
                                       : "UD send targets not noted (out of memory)");
    return p;
}

/* UD receives per sender's physical QPN (hv_ud_lock; qpn = the sender's, GID zero): a moving
 * process waits until it has what its held peers say they sent (UDHELD). Any sender on the
 * fabric makes an entry: bounded at HV_UD_RECV_MAX, the rest not counted (reported). */
#define HV_UD_RECV_MAX 65536
static HvUdSet hv_ud_recv = {.max = HV_UD_RECV_MAX};
static const uint8_t hv_ud_no_gid[16];

size_t hv_ud_missing(const HvKeyPair *want, size_t n, uint64_t *ret_got)
{
    size_t missing = 0;
    uint64_t sum = 0;

    pthread_mutex_lock(&hv_ud_lock);
    for (size_t k = 0; k < n; k++) {
        HvUdEntry *got = hv_ud_set_find(&hv_ud_recv, hv_ud_no_gid, want[k].v);

        if (!got || (int32_t)(got->n - want[k].p) < 0)
            missing++;
        sum += got ? got->n : 0;
    }
    *ret_got = sum;
    pthread_mutex_unlock(&hv_ud_lock);
    return missing;
}

int hv_ud_peer_moved(const uint8_t gid[16], const uint32_t *v, const uint32_t *p, uint32_t n)
{
    size_t evicted;
    int r;

    pthread_mutex_lock(&hv_ud_lock);
    evicted = hv_ud_tab.evicted;
    r = hv_ud_learn(&hv_ud_tab, gid, v, p, n);
    evicted = hv_ud_tab.evicted - evicted;
    atomic_store(&hv_ud_known, (int)hv_ud_tab.npeers);
    pthread_mutex_unlock(&hv_ud_lock);
    if (evicted) /* the oldest moved peer's translation went: its posts reach its old QPNs */
        hv_not_migratable("UD translations of over 4096 moved peers");
    return r;
}

uint32_t hv_ud_recv_qpn(uint32_t src_qp)
{
    uint32_t v = src_qp;
    HvUdEntry *e;
    int added;

    pthread_mutex_lock(&hv_ud_lock);
    e = hv_ud_set_add(&hv_ud_recv, hv_ud_no_gid, src_qp, &added);
    if (e)
        e->n++;
    if (!atomic_load(&hv_ud_known) || !hv_ud_in(&hv_ud_tab, src_qp, &v))
        v = src_qp;
    pthread_mutex_unlock(&hv_ud_lock);
    if (!e) /* a held peer's sends from this QPN cannot be counted: its drain is not waited for */
        hv_not_migratable("UD receives from over 65536 sending QPs");
    return v;
}

void hv_ud_count_send(HvQp *qp, const HvAh *ah)
{
    HvUdEntry *e;
    int added;

    if (!ah->peer_known)
        return;
    e = hv_ud_set_add(&qp->ud_sent, ah->peer.raw, 0, &added);
    if (!e) { /* that peer, moving, would not be held: reported, not dropped silently */
        hv_not_migratable(qp->ud_sent.full ? "UD sends of one QP to over 4096 GIDs"
                                           : "UD send counts not kept (out of memory)");
        return;
    }
    e->n++;
}

HvUdTarget *hv_ud_targets_copy(size_t *n)
{
    HvUdTarget *tg = NULL;

    pthread_mutex_lock(&hv_ud_lock);
    *n = hv_ud_tab.targets.n;
    if (*n && (tg = malloc(*n * sizeof(*tg))))
        memcpy(tg, hv_ud_tab.targets.v, *n * sizeof(*tg));
    pthread_mutex_unlock(&hv_ud_lock);
    if (!tg)
        *n = 0;
    return tg;
}

/* Into @m's keys: @ctx's memory regions whose physical rkey differs from the virtual one the
 * program was given (re-registered after a swap, or synthetic): what a peer translates. */
void hv_ctx_keys(HvContext *ctx, HvMsg *m)
{
    m->nkeys = 0;
    pthread_mutex_lock(&ctx->lock);
    for (HvMr *mr = ctx->mrs; mr && m->nkeys < HV_PROTO_KEYS_MAX; mr = mr->next)
        if (mr->phys && mr->pub.rkey != mr->phys->rkey)
            m->keys[m->nkeys++] = (HvKeyPair){mr->pub.rkey, mr->phys->rkey};
    pthread_mutex_unlock(&ctx->lock);
}

/* A memory region registered after a swap whose physical rkey collides with a live virtual one
 * got a synthetic virtual rkey (hv_mr_keys): every peer QP connected to a QP of @ctx learns the
 * pair before ibv_reg_mr returns (KEYMAP; a QP of this process directly). A peer that cannot
 * be told is logged: its RDMA with that key would fail with a remote access error. */
void hv_keymap_push(HvContext *ctx, uint32_t vkey, uint32_t pkey)
{
    struct {
        union ibv_gid gid;
        uint32_t target, sender;
    } *to = NULL;
    size_t n = 0, cap = 0, told = 0;
    HvMsg *m = calloc(1, sizeof(*m)), rep;
    char req[160], line[256];

    if (!m)
        return;
    pthread_mutex_lock(&hv.lock);
    for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
        pthread_mutex_lock(&qp->lock);
        if (hv_qp_connected(qp) && n == cap) {
            void *nt = realloc(to, (cap = cap ? cap * 2 : 8) * sizeof(*to));
            if (!nt) {
                pthread_mutex_unlock(&qp->lock);
                break;
            }
            to = nt;
        }
        if (hv_qp_connected(qp)) {
            to[n].gid = qp->peer_gid;
            to[n].target = qp->peer_vqpn;
            to[n].sender = qp->pub.qp_num;
            n++;
        }
        pthread_mutex_unlock(&qp->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    m->type = HV_MSG_KEYMAP;
    m->nkeys = 1;
    m->keys[0] = (HvKeyPair){vkey, pkey};
    for (size_t i = 0; i < n; i++) {
        HvContext *lctx = NULL;
        HvQp *local = hv_find_vqpn(to[i].target, &lctx);
        int k, r;

        if (local && lctx == ctx && local->peer_vqpn == to[i].sender) {
            /* the peer QP is in this process (loopback) */
            pthread_mutex_lock(&local->lock);
            hv_map_put(&local->peer_rkeys, vkey, pkey);
            pthread_mutex_unlock(&local->lock);
            told++;
            continue;
        }

        if (!hv_peer_known(&to[i].gid)) {
            hv_log("QP %u: neither HOTMIG_VERBS_PEERS nor the agents' directory knows its peer: "
                   "it cannot learn the synthetic rkey 0x%x",
                   to[i].sender, vkey);
            continue;
        }
        m->target = to[i].target;
        m->sender = to[i].sender;
        k = hv_proto_format(m, req, sizeof(req));
        r = k < 0 ? k : hv_peer_call(&to[i].gid, to[i].target, req, line, sizeof(line));
        if (!r && (hv_proto_parse(line, strlen(line), &rep) < 0 || rep.type != HV_MSG_KEYMAPPED))
            r = -EPROTO;
        if (r)
            hv_log("QP %u: telling its peer QP %u the synthetic rkey 0x%x failed: %s", to[i].sender,
                   to[i].target, vkey, strerror(-r));
        else
            told++;
    }
    hv_debug("synthetic rkey 0x%x (physical 0x%x): %zu peer QPs told", vkey, pkey, told);
    free(to);
    free(m);
}

/* ---- lookups: a connection made after a swap ------------------------------------------------
 * The program connects a QP with the numbers its peer program handed it, virtual ones; after a
 * swap of either end they differ from the physical ones, and no RECONNECT told this QP. */

/* The peer is a QP of this process (UCX connects QPs to each other): its numbers are here. */
static uint32_t hv_lookup_here(uint32_t vqpn, HvMap *keys)
{
    HvContext *pctx = NULL;
    HvQp *peer = hv_find_vqpn(vqpn, &pctx);
    HvMsg *k = peer ? calloc(1, sizeof(*k)) : NULL;
    uint32_t pqpn = vqpn;

    if (!k)
        return vqpn;
    pthread_mutex_lock(&peer->lock);
    if (peer->phys)
        pqpn = peer->phys->qp_num;
    pthread_mutex_unlock(&peer->lock);
    hv_ctx_keys(pctx, k);
    for (uint32_t i = 0; i < k->nkeys; i++)
        hv_map_put(keys, k->keys[i].v, k->keys[i].p);
    free(k);
    return pqpn;
}

/* Asks the peer's layer; -errno when it does not answer or refuses, 1 while it is moving. */
static int hv_lookup_call(HvQp *qp, const struct ibv_qp_attr *attr, const union ibv_gid *peer,
                          HvMsg *m, uint32_t *pqpn)
{
    char req[96], *line = malloc(HV_PROTO_LINE_MAX + 2);
    union ibv_gid own;
    int r;

    if (!line)
        return -ENOMEM;
    m->type = HV_MSG_LOOKUP;
    m->target = attr->dest_qp_num;
    m->sender = qp->pub.qp_num;
    /* who asks: the source GID this QP connects from (the peer checks it, docs/security.md) */
    memset(m->gid, 0, sizeof(m->gid));
    if (hv_real.r_ibv_query_gid(qp->pd->ctx->phys, attr->ah_attr.port_num,
                                attr->ah_attr.is_global ? attr->ah_attr.grh.sgid_index : 0,
                                &own) == 0)
        memcpy(m->gid, own.raw, sizeof(m->gid));
    r = hv_proto_format(m, req, sizeof(req));
    if (r >= 0)
        r = hv_peer_call(peer, attr->dest_qp_num, req, line, HV_PROTO_LINE_MAX + 2);
    if (r == 0 && hv_proto_parse(line, strlen(line), m) < 0)
        r = -EPROTO;
    if (r == 0 && m->type == HV_MSG_DEFER)
        r = 1;
    else if (r == 0 && m->type != HV_MSG_LOOKEDUP)
        r = -EPROTO;
    if (r == -EPROTO)
        hv_log("QP %u: its peer QP %u refused the lookup: %.200s", qp->pub.qp_num,
               attr->dest_qp_num, line);
    if (r == 0)
        *pqpn = m->target;
    free(line);
    return r;
}

#define HV_LOOKUP_RETRY_MS 200 /* a LOOKUP answered DEFER moving is asked again after */

uint32_t hv_lookup_peer(HvQp *qp, const struct ibv_qp_attr *attr, const union ibv_gid *peer,
                        HvMap *keys, uint16_t *lid)
{
    HvContext *ctx = qp->pd->ctx;
    union ibv_gid own;
    uint32_t pqpn = attr->dest_qp_num;
    int64_t until = hv_now_ms() + HV_LOOKUP_WAIT_MS;
    HvMsg *m;
    int r, said = 0;

    *lid = 0;
    if (hv_real.r_ibv_query_gid(ctx->phys, attr->ah_attr.port_num,
                                attr->ah_attr.is_global ? attr->ah_attr.grh.sgid_index : 0,
                                &own) == 0 &&
        memcmp(own.raw, peer->raw, 16) == 0 && hv_find_vqpn(attr->dest_qp_num, NULL))
        return hv_lookup_here(attr->dest_qp_num, keys);
    if (!hv_peer_known(peer) || !(m = calloc(1, sizeof(*m))))
        return pqpn; /* a peer outside the layer keeps its numbers */
    while ((r = hv_lookup_call(qp, attr, peer, m, &pqpn)) == 1 && hv_now_ms() < until) {
        if (!said++)
            hv_log("QP %u: its peer QP %u is moving: connecting once it is back", qp->pub.qp_num,
                   attr->dest_qp_num);
        /* the peer is remote: no event tells its return, it is asked again */
        hv_progress_wait(hv_progress_gen(), hv_now_ms() + HV_LOOKUP_RETRY_MS);
    }
    if (r == 0) {
        *lid = m->lid;
        for (uint32_t i = 0; i < m->nkeys; i++)
            hv_map_put(keys, m->keys[i].v, m->keys[i].p);
        if (pqpn != attr->dest_qp_num || m->nkeys)
            hv_log("QP %u: its peer QP %u is physical QPN %u (%u rkeys translated)", qp->pub.qp_num,
                   attr->dest_qp_num, pqpn, m->nkeys);
    } else {
        hv_log("QP %u: no lookup of its peer QP %u (%s): its numbers are taken as they are",
               qp->pub.qp_num, attr->dest_qp_num, r == 1 ? "still moving" : strerror(-r));
        pqpn = attr->dest_qp_num;
    }
    free(m);
    return pqpn;
}
