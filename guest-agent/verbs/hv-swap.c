/* libhotmig-verbs, swap layer: quiesce and resume (libhotmig threaded mode): the mover's side of a
 * swap, its UD peers held and told. */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* Per-QP swap bookkeeping beside HvQp (kept here: only the swap uses it). */
#define HV_DEVICE_WAIT_MS 15000 /* resume: the new device to appear */
#define HV_DEVICES_DIR "/dev/infiniband"
/* a device that appears without a new node (the watch cannot tell) is tried again after */
#define HV_DEVICE_RETRY_MS 100
#define HV_PULL_MS 1 /* a drain pulls the CQs that nobody else polls again after */

typedef struct {
    HvQp *qp;
    int managed; /* the peer's layer takes part */
    uint64_t peer_sent;
    HvQp *local; /* the peer is a QP of this process (loopback): reconnected here */
    int was_switched; /* it ran on the standby device during this move */
} HvSwapQp;

uint32_t hv_psn(void)
{
    uint32_t v = 0;

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
        v = (uint32_t)hv_now_ms() * 2654435761u;
    return v & 0xffffff;
}

/* @qp's own address on its current device: the GID at its RTR sgid_index, the port's LID. */
int hv_own_addr(HvQp *qp, union ibv_gid *gid, uint16_t *lid)
{
    HvContext *ctx = qp->pd->ctx;
    struct ibv_port_attr pa;
    int r;

    memset(gid, 0, sizeof(*gid));
    memset(&pa, 0, sizeof(pa));
    if (!ctx->phys)
        return -ENODEV;
    r = hv_real.r_ibv_query_gid(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                qp->a_rtr.ah_attr.is_global ? qp->a_rtr.ah_attr.grh.sgid_index : 0,
                                gid);
    if (!r)
        r = hv_real.r_ibv_query_port(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                     (struct _compat_ibv_port_attr *)&pa);
    *lid = pa.lid;
    return r ? -(r < 0 ? -r : r) : 0;
}

/* Marks @s local when its QP's peer is a QP of this process: no peer call for it, the swap
 * reconnects both ends here (their old physical QPNs are gone with the device). */
static int hv_swap_mark_local(HvSwapQp *s)
{
    HvQp *qp = s->qp, *peer;
    union ibv_gid gid;
    uint16_t lid = 0;

    if (!qp->m_rtr || (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS))
        return 0;
    peer = hv_find_vqpn(qp->peer_vqpn, NULL);
    if (!peer || hv_own_addr(qp, &gid, &lid) < 0)
        return 0;
    if (!hv_peer_is_local(qp, peer, &gid, lid))
        return 0;
    s->local = peer;
    hv_debug("QP %u: its peer QP %u is in this process", qp->pub.qp_num, qp->peer_vqpn);
    return 1;
}

/* A LID-routed QP whose peer the directory did not know at RTR: asked again (the agents'
 * directory converges within a refresh of the agents' start). */
static void hv_qp_peer_resolve(HvQp *qp)
{
    union ibv_gid gid;

    if (!hv_av_peer(qp->pd->ctx, &qp->a_rtr.ah_attr, &gid))
        return;
    pthread_mutex_lock(&qp->lock);
    qp->peer_gid = gid;
    qp->peer_known = 1;
    pthread_mutex_unlock(&qp->lock);
    hv_log("QP %u: its peer at LID %u is known now: the connection is migratable",
           qp->pub.qp_num, qp->a_rtr.ah_attr.dlid);
}

/* Waits until @qp's sends completed (and, when @want_recv, @want_recv receives did). */
int hv_qp_drain(HvQp *qp, uint64_t want_recv, int64_t deadline)
{
    for (;;) {
        uint64_t seen = hv_progress_gen();
        int done;

        pthread_mutex_lock(&qp->lock);
        if (qp->unsig_tail && !qp->fence_out)
            hv_qp_fence(qp);
        done = qp->sig_out == 0 && qp->fence_out == 0 && qp->recv_done >= want_recv;
        pthread_mutex_unlock(&qp->lock);
        if (done)
            return 0;
        if (qp->scq && hv_cq_pull(qp->scq) < 0)
            return -EIO;
        if (qp->rcq && qp->rcq != qp->scq && hv_cq_pull(qp->rcq) < 0)
            return -EIO;
        if (hv_now_ms() > deadline) {
            hv_log("QP %u did not drain: %llu sends outstanding, %llu of %llu receives",
                   qp->pub.qp_num, (unsigned long long)qp->sig_out,
                   (unsigned long long)qp->recv_done, (unsigned long long)want_recv);
            return -ETIMEDOUT;
        }
        /* woken by the program's own polls (hv_wc_fix); a CQ nobody else polls is pulled
         * again after HV_PULL_MS */
        hv_progress_wait(seen, hv_now_ms() + HV_PULL_MS);
    }
}

static void hv_ud_announce(void);
static void hv_ud_hold_peers(int64_t deadline);

static HvSwapQp *hv_swap_qps;
static size_t hv_swap_n;
static int64_t hv_paused_at; /* the mover's sends queued from then on (its blackout) */
static int hv_sb_lease_fd = -1; /* the mover on its standby device: the agent's lease */
HvSbReport hv_sb_report; /* the agent's report of the move (hv-agent.c) */
static int64_t hv_sb_left_at;   /* when the switched QPs were paused again (resume) */
static char hv_sb_name[72];
static void hv_standby_ahead(void);
static void hv_standby_enter(void);
static void hv_ahead_drop(void);
static void hv_standby_release(void);

/* The connection objects of @ctx go: its QPs (what their CQs hold pulled first), SRQs (their
 * receives stay recorded) and AHs; a make-before-break change keeps the rest (hv_sb_swap). */
static void hv_destroy_conns(HvContext *ctx)
{
    for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
        hv_qp_cqs_pull(qp);
        pthread_mutex_lock(&qp->lock);
        if (qp->phys) {
            pthread_mutex_lock(&ctx->lock);
            hv_map_del(qp->on_sb ? &ctx->sb_qpn : &ctx->qpn, qp->phys->qp_num);
            pthread_mutex_unlock(&ctx->lock);
            if (hv_real.r_ibv_destroy_qp(qp->phys))
                hv_log("QP %u: destroy failed", qp->pub.qp_num);
            qp->phys = NULL;
        }
        /* on the standby device for a moving peer and now moving too: made again with the
         * rest, on the device this process goes to */
        qp->on_sb = 0;
        qp->sb_loop = 0;
        pthread_mutex_unlock(&qp->lock);
    }
    if (!ctx->ahead)
        hv_sb_close_unused(ctx); /* the SRQs' twins' receives recorded for the rebuild */
    for (HvSrq *srq = ctx->srqs; srq; srq = srq->next) {
        pthread_mutex_lock(&srq->lock);
        if (srq->phys)
            hv_real.r_ibv_destroy_srq(srq->phys);
        srq->phys = NULL;
        pthread_mutex_unlock(&srq->lock);
    }
    for (HvAh *ah = ctx->ahs; ah; ah = ah->next) {
        if (ah->phys)
            hv_real.r_ibv_destroy_ah(ah->phys);
        if (ah->stale)
            hv_real.r_ibv_destroy_ah(ah->stale);
        ah->phys = ah->stale = NULL;
    }
}

static void hv_destroy_phys(HvContext *ctx)
{
    ctx->ahead = 0; /* twins made ahead go too (hv_sb_close_unused) */
    hv_destroy_conns(ctx);
    for (HvMr *mr = ctx->mrs; mr; mr = mr->next) {
        if (mr->phys)
            hv_real.r_ibv_dereg_mr(mr->phys);
        mr->phys = NULL;
    }
    for (HvCq *cq = ctx->cqs; cq; cq = cq->next) {
        hv_cq_pull(cq);
        pthread_mutex_lock(&cq->lock);
        if (cq->phys)
            hv_real.r_ibv_destroy_cq(cq->phys);
        cq->phys = NULL;
        pthread_mutex_unlock(&cq->lock);
    }
    for (HvChan *ch = ctx->chans; ch; ch = ch->next) {
        if (ch->phys)
            hv_real.r_ibv_destroy_comp_channel(ch->phys);
        ch->phys = NULL;
    }
    for (HvPd *pd = ctx->pds; pd; pd = pd->next) {
        if (pd->phys)
            hv_real.r_ibv_dealloc_pd(pd->phys);
        pd->phys = NULL;
    }
    if (ctx->phys)
        hv_real.r_ibv_close_device(ctx->phys);
    ctx->phys = NULL;
}

static HvSwapQp *hv_swap_list(size_t *n)
{
    HvSwapQp *v = NULL;
    size_t cap = 0;

    *n = 0;
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
            if (*n == cap) {
                HvSwapQp *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));
                if (!nv) {
                    pthread_mutex_unlock(&hv.lock);
                    free(v);
                    *n = 0;
                    return NULL;
                }
                v = nv;
            }
            v[(*n)++] = (HvSwapQp){.qp = qp};
        }
    pthread_mutex_unlock(&hv.lock);
    return v;
}

/* @qp's sends are queued from now on (quiesce, the switch back); its peer's reconnect is ours */
static void hv_pause_qp(HvQp *qp)
{
    pthread_mutex_lock(&qp->lock);
    hv_qp_sendq_ready(qp);
    qp->paused = 1;
    qp->reconnected = 0;
    qp->await_peer = 0;
    qp->suspend_until = 0; /* our own swap reconnects it */
    pthread_mutex_unlock(&qp->lock);
}

/* SUSPEND to @s's peer: it stops sending, drains, and says how much it sent (s->peer_sent).
 * 0 or -errno (logged). */
static int hv_suspend_peer(HvSwapQp *s)
{
    HvQp *qp = s->qp;
    HvMsg m = {.type = HV_MSG_SUSPEND}, rep;
    char req[128], line[HV_PROTO_LINE_MAX + 2];
    int r, n;

    m.target = qp->peer_vqpn;
    m.sender = qp->pub.qp_num;
    pthread_mutex_lock(&qp->lock);
    m.sent = qp->sent_msgs;
    pthread_mutex_unlock(&qp->lock);
    n = hv_proto_format(&m, req, sizeof(req));
    r = n < 0 ? n : hv_peer_call(&qp->peer_gid, qp->peer_vqpn, req, line, sizeof(line));
    if (!r && (hv_proto_parse(line, strlen(line), &rep) < 0 || rep.type != HV_MSG_SUSPENDED)) {
        hv_log("QP %u: the peer refused to suspend: %s", qp->pub.qp_num, line);
        r = -EPROTO;
    }
    if (r) {
        hv_log("QP %u: suspending the peer (QP %u) failed: %s", qp->pub.qp_num, qp->peer_vqpn,
               strerror(-r));
        return r;
    }
    s->peer_sent = rep.sent;
    hv_debug("QP %u: peer QP %u suspended, it sent %llu", qp->pub.qp_num, qp->peer_vqpn,
             (unsigned long long)rep.sent);
    return 0;
}

/* quiesce, step 2: each connected peer in another process's layer suspended (s->managed) */
static int hv_suspend_peers(void)
{
    int r = 0;

    for (size_t i = 0; i < hv_swap_n && !r; i++) {
        HvSwapQp *s = &hv_swap_qps[i];
        HvQp *qp = s->qp;

        if (hv_swap_mark_local(s) || !hv_qp_connected(qp))
            continue;
        if (!qp->peer_known) /* LID-routed: the directory may know its LID by now */
            hv_qp_peer_resolve(qp);
        if (!hv_peer_known(&qp->peer_gid)) {
            hv_log("QP %u: neither HOTMIG_VERBS_PEERS nor the agents' directory knows its peer: "
                   "the connection will not survive the swap",
                   qp->pub.qp_num);
            continue;
        }
        r = hv_suspend_peer(s);
        if (!r)
            s->managed = 1;
    }
    return r;
}

int hv_quiesce(void *opaque)
{
    int64_t t0 = hv_now_ms(), deadline = t0 + HV_DRAIN_MS, t_ahead, t_susp, t_drain;
    int r = 0;

    (void)opaque;
    memset(&hv_sb_report, 0, sizeof(hv_sb_report));
    pthread_mutex_lock(&hv.lock);
    hv.swapping = 1;
    pthread_mutex_unlock(&hv.lock);
    free(hv_swap_qps);
    hv_swap_qps = hv_swap_list(&hv_swap_n);
    /* 0. the standby device's objects made while the program's traffic still runs on the VF
     * (make before break): after the drain only the connections are made there */
    if (!getenv("HOTMIG_VERBS_NO_STANDBY"))
        hv_standby_ahead();
    t_ahead = hv_now_ms();
    hv_paused_at = t_ahead;
    /* 1. no new sends from here on: they are queued */
    for (size_t i = 0; i < hv_swap_n; i++) {
        hv_pause_qp(hv_swap_qps[i].qp);
        /* who it is while away from the VF (the peers check requests against it) */
        if (hv_swap_qps[i].qp->m_rtr) {
            uint16_t lid;

            hv_swap_qps[i].qp->own_known =
                hv_own_addr(hv_swap_qps[i].qp, &hv_swap_qps[i].qp->own_gid, &lid) == 0;
        }
    }
    /* 2. each connected peer stops sending, drains and says how much it sent */
    r = hv_suspend_peers();
    t_susp = hv_now_ms();
    /* 2b. UD peers hold their sends to us; what they sent before arrives */
    if (!r)
        hv_ud_hold_peers(deadline);
    /* 3. drain: our sends completed, the peer's sends received */
    for (size_t i = 0; i < hv_swap_n && !r; i++)
        r = hv_qp_drain(hv_swap_qps[i].qp, hv_swap_qps[i].managed ? hv_swap_qps[i].peer_sent : 0,
                        deadline);
    t_drain = hv_now_ms();
    if (r) {
        /* stay on the device: let traffic go on (the agent reports the failure) */
        for (size_t i = 0; i < hv_swap_n; i++)
            hv_qp_unpause(hv_swap_qps[i].qp);
        hv_ud_announce(); /* UD peers: same QPNs, their holds end */
        hv_ahead_drop();
        hv_standby_release();
        pthread_mutex_lock(&hv.lock);
        hv.swapping = 0;
        pthread_mutex_unlock(&hv.lock);
        hv_swap_ended();
        return r;
    }
    /* 4. the physical objects go (only the connections where the rest was made ahead: that
     * goes once they run on the standby device); the shadows stay */
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next) {
        if (ctx->ahead)
            hv_destroy_conns(ctx);
        else
            hv_destroy_phys(ctx);
    }
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    hv_log("quiesced in %lld ms (%zu QPs; objects made ahead in %lld ms, peers suspended in %lld "
           "ms, drained in %lld ms, objects destroyed in %lld ms)",
           (long long)(hv_now_ms() - t0), hv_swap_n, (long long)(t_ahead - t0),
           (long long)(t_susp - t_ahead), (long long)(t_drain - t_susp),
           (long long)(hv_now_ms() - t_drain));
    hv_standby_enter();
    for (size_t i = 0; i < hv_swap_n; i++)
        if (hv_swap_qps[i].qp->m_rtr && !hv_swap_qps[i].qp->switched)
            hv_sb_report.paused++;
    return 0;
}

int hv_repost(HvRecvFifo *f, HvQp *qp, HvSrq *srq)
{
    for (size_t i = 0; i < f->n; i++) {
        HvRecv *rv = &f->v[(f->head + i) % f->cap];
        struct ibv_sge sge[32];
        struct ibv_recv_wr wr = {0}, *bad = NULL;
        HvContext *ctx = qp ? qp->pd->ctx : srq->pd->ctx;
        int r;

        if (rv->num_sge > 32)
            return -EINVAL;
        for (int k = 0; k < rv->num_sge; k++) {
            uint64_t p;
            sge[k] = rv->sge[k];
            if (hv_map_get(qp && qp->on_sb ? &ctx->sb_lkey : &ctx->lkey, sge[k].lkey, &p))
                sge[k].lkey = (uint32_t)p;
        }
        wr.wr_id = rv->wr_id;
        wr.sg_list = sge;
        wr.num_sge = rv->num_sge;
        r = qp ? ibv_post_recv(qp->phys, &wr, &bad) : ibv_post_srq_recv(srq->phys, &wr, &bad);
        if (r)
            return -r;
    }
    return 0;
}

/* hv_rebuild's step for @ctx's AHs, on the new device. An AH to a peer that is away (moving
 * too: RoCE cannot resolve its address) is made later, at the peer's UDMAP or at the next send
 * through it (hv_ah_phys): failing the whole rebuild for it would leave this process half on
 * the new device. */
static void hv_ahs_rebuild(HvContext *ctx)
{
    union ibv_gid own;
    uint16_t own_lid = 0;
    uint8_t own_port = 0; /* the port @own and @own_lid are of: asked once, not per AH */
    int own_ok = 0;

    for (HvAh *ah = ctx->ahs; ah; ah = ah->next) {
        uint8_t port = ah->attr.port_num ? ah->attr.port_num : 1;

        if (ah->peer_known && port != own_port) {
            own_port = port;
            own_ok = hv_real.r_ibv_query_gid(ctx->phys, port, 0, &own) == 0;
            own_lid = own_ok ? hv_port_lid(ctx, port) : 0;
        }
        /* an AH to this port itself: to its new LID (on IB the old one is the old host's) */
        if (ah->peer_known && own_ok && hv_ah_local_fix(&ah->attr, &ah->peer, &own, own_lid))
            hv_debug("UD: an address handle to this port itself, now at LID %u", ah->attr.dlid);
        if (!hv_ah_phys(ah))
            hv_log("UD: an address handle cannot be made yet (%s): its peer is away? It is made "
                   "at the peer's UDMAP or at the next send through it",
                   strerror(errno));
    }
}

/* Creates every physical object of @ctx again on device @name; those made ahead (its context,
 * PDs, MRs, channels and CQs after hv_sb_swap) are kept. The AHs only with @ahs: none on the
 * standby device, where the UD QPs stay paused, and where an AH to a peer's VF address cannot
 * be resolved (rxe's lookup of it on the control NIC took about a second). hv.lock held. */
static int hv_rebuild(HvContext *ctx, const char *name, int ahs)
{
    int r;

    if (!ctx->phys) {
        r = hv_ctx_attach(ctx, name);
        if (r)
            return -r;
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->swapped = 1;
    hv_map_clear(&ctx->lkey);
    hv_map_clear(&ctx->qpn);
    pthread_mutex_unlock(&ctx->lock);
    for (HvChan *ch = ctx->chans; ch; ch = ch->next) {
        if (ch->phys)
            continue;
        ch->phys = hv_real.r_ibv_create_comp_channel(ctx->phys);
        if (!ch->phys)
            return -errno;
        hv_nonblock(ch->phys->fd);
    }
    for (HvPd *pd = ctx->pds; pd; pd = pd->next) {
        if (!pd->phys)
            pd->phys = hv_real.r_ibv_alloc_pd(ctx->phys);
        if (!pd->phys)
            return -errno;
    }
    for (HvMr *mr = ctx->mrs; mr; mr = mr->next) {
        if (!mr->phys)
            mr->phys = mr->kind ? hv_real.r_ibv_reg_mr_iova2(mr->pd->phys, mr->pub.addr,
                                                             mr->pub.length, mr->iova,
                                                             (unsigned)mr->access)
                                : hv_real.r_ibv_reg_mr(mr->pd->phys, mr->pub.addr, mr->pub.length,
                                                       mr->access);
        if (!mr->phys)
            return -errno;
        pthread_mutex_lock(&ctx->lock);
        hv_map_put(&ctx->lkey, mr->pub.lkey, mr->phys->lkey);
        pthread_mutex_unlock(&ctx->lock);
    }
    for (HvCq *cq = ctx->cqs; cq; cq = cq->next) {
        pthread_mutex_lock(&cq->lock);
        r = cq->phys ? 0 : hv_cq_make(cq);
        if (!r && cq->armed)
            ibv_req_notify_cq(cq->phys, cq->armed_solicited);
        pthread_mutex_unlock(&cq->lock);
        if (r)
            return -r;
    }
    for (HvSrq *srq = ctx->srqs; srq; srq = srq->next) {
        pthread_mutex_lock(&srq->lock);
        r = hv_srq_make(srq);
        if (!r)
            r = -hv_repost(&srq->recvs, NULL, srq);
        pthread_mutex_unlock(&srq->lock);
        if (r)
            return r < 0 ? r : -r;
    }
    if (ahs)
        hv_ahs_rebuild(ctx);
    for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
        pthread_mutex_lock(&qp->lock);
        r = hv_qp_make(qp, NULL);
        if (!r) {
            pthread_mutex_lock(&ctx->lock);
            hv_map_put(&ctx->qpn, qp->phys->qp_num, (uintptr_t)qp);
            pthread_mutex_unlock(&ctx->lock);
            qp->sig_out = 0;
            qp->fence_out = 0;
            qp->unsig_tail = 0;
            if (qp->m_init) {
                r = hv_qp_modify(qp, &qp->a_init, qp->m_init);
                if (!r)
                    r = -hv_repost(&qp->recvs, qp, NULL);
            }
            qp->state = qp->m_init ? IBV_QPS_INIT : IBV_QPS_RESET;
        }
        pthread_mutex_unlock(&qp->lock);
        if (r)
            return r < 0 ? r : -r;
    }
    return 0;
}

void hv_local_rkeys(HvQp *qp, HvContext *pctx, int sb)
{
    hv_map_clear(&qp->peer_rkeys);
    pthread_mutex_lock(&pctx->lock);
    for (HvMr *mr = pctx->mrs; mr; mr = mr->next) {
        struct ibv_mr *on = sb ? mr->sb : mr->phys;

        if (on && mr->pub.rkey != on->rkey)
            hv_map_put(&qp->peer_rkeys, mr->pub.rkey, on->rkey);
    }
    pthread_mutex_unlock(&pctx->lock);
}

/* A peer QP in this process (s->local): straight to it, both ends replaying their PSNs. */
static int hv_reconnect_local(HvSwapQp *s)
{
    HvQp *qp = s->qp;
    HvQp *peer = s->local;
    HvContext *pctx = peer->pd->ctx;
    struct ibv_qp_attr a;
    union ibv_gid gid;
    uint16_t lid = 0;
    int r;

    if (!qp->phys || !peer->phys)
        return -ENODEV;
    r = hv_own_addr(peer, &gid, &lid);
    if (r)
        return r;
    /* both ends replay their own PSNs: they matched before the swap, they match now */
    hv_local_rtr(qp, peer->phys->qp_num, &gid, lid, &a);
    hv_debug("QP %u: to its local peer QP %u at LID %u%s", qp->pub.qp_num, peer->pub.qp_num,
             a.ah_attr.dlid, a.ah_attr.is_global ? " (GRH)" : "");
    r = hv_qp_modify(qp, &a, qp->m_rtr);
    if (!r && qp->m_rts)
        r = hv_qp_modify(qp, &qp->a_rts, qp->m_rts);
    if (r)
        return -r;
    pthread_mutex_lock(&qp->lock);
    qp->peer_pqpn = peer->phys->qp_num;
    qp->a_rtr.ah_attr = a.ah_attr;
    qp->state = qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR;
    hv_local_rkeys(qp, pctx, 0);
    pthread_mutex_unlock(&qp->lock);
    hv_debug("QP %u reconnected to its local peer QP %u (physical %u)", qp->pub.qp_num,
             peer->pub.qp_num, peer->phys->qp_num);
    return 0;
}

/* The peer's answer to our RECONNECT (qp lock taken here): RECONNECTED, RTR to the QPN it
 * gives (its PSN @p_psn), RTS with ours (@m_psn); DEFER (both ends moving), the peer
 * reconnects this QP when it is back, or did already. */
static int hv_reconnect_answer(HvQp *qp, int r, const HvMsg *rep, uint32_t m_psn, uint32_t p_psn)
{
    struct ibv_qp_attr a;

    pthread_mutex_lock(&qp->lock);
    qp->calling = 0;
    if (!r && rep->type == HV_MSG_DEFER) {
        if (rep->defer == HV_DEFER_MOVING && !qp->reconnected) {
            qp->await_peer = 1;
            qp->await_until = hv_now_ms() + HV_AWAIT_PEER_MS;
            hv_log("QP %u: its peer QP %u is moving too: it reconnects when it is back "
                   "(sends stay queued, at most %d s)",
                   qp->pub.qp_num, qp->peer_vqpn, HV_AWAIT_PEER_MS / 1000);
        }
    } else if (!r) {
        qp->peer_pqpn = rep->target;
        if (rep->lid) /* IB: the peer's LID now (it may have moved in the same event) */
            qp->a_rtr.ah_attr.dlid = rep->lid;
        a = qp->a_rtr;
        a.dest_qp_num = rep->target;
        a.rq_psn = p_psn;
        r = -hv_qp_connect(qp, &a, m_psn);
        if (!r) {
            qp->reconnected = 1;
        }
    }
    pthread_mutex_unlock(&qp->lock);
    hv_progress_signal(); /* a peer's RECONNECT may wait for this answer */
    return r;
}

/* A peer in another process's layer: a RECONNECT message with our new address, PSNs and
 * keys, its RECONNECTED answer with its new QP number (or DEFER: both ends moving). */
static int hv_reconnect_managed(HvSwapQp *s)
{
    HvQp *qp = s->qp;
    HvContext *ctx = qp->pd->ctx;
    uint32_t m_psn = hv_psn(), p_psn = hv_psn();
    HvMsg *m = calloc(1, sizeof(*m)), rep;
    char *req = malloc(HV_PROTO_LINE_MAX + 2), line[256];
    struct ibv_port_attr pa;
    union ibv_gid gid;
    int r, n;

    if (!m || !req) {
        free(m);
        free(req);
        return -ENOMEM;
    }
    pthread_mutex_lock(&qp->lock);
    if (qp->reconnected) { /* the peer, moving too, reconnected it already */
        pthread_mutex_unlock(&qp->lock);
        free(m);
        free(req);
        hv_debug("QP %u: already reconnected by its peer QP %u", qp->pub.qp_num, qp->peer_vqpn);
        return 0;
    }
    /* The QP stays in INIT until the answer: the peer's QPN is known only then (a peer moving
     * in the same event has a new one), and what the peer sends meanwhile is dropped here and
     * retransmitted by its RC QP once we are at RTR (no receive taken twice). */
    r = 0;
    qp->calling = 1;
    pthread_mutex_unlock(&qp->lock);
    m->type = HV_MSG_RECONNECT;
    m->target = qp->peer_vqpn;
    m->sender = qp->pub.qp_num;
    m->sender_pqpn = qp->phys->qp_num;
    m->sender_psn = m_psn;
    m->target_psn = p_psn;
    if (!r && hv_real.r_ibv_query_gid(
                  ctx->phys, qp->a_rtr.ah_attr.port_num,
                  qp->a_rtr.ah_attr.is_global ? qp->a_rtr.ah_attr.grh.sgid_index : 0, &gid) == 0)
        memcpy(m->gid, gid.raw, 16);
    memset(&pa, 0, sizeof(pa));
    if (!r && hv_real.r_ibv_query_port(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                       (struct _compat_ibv_port_attr *)&pa) == 0)
        m->lid = pa.lid;
    hv_ctx_keys(ctx, m);
    n = r ? -r : hv_proto_format(m, req, HV_PROTO_LINE_MAX + 2);
    r = n < 0 ? n : hv_peer_call(&qp->peer_gid, qp->peer_vqpn, req, line, sizeof(line));
    if (!r && (hv_proto_parse(line, strlen(line), &rep) < 0 ||
               (rep.type != HV_MSG_RECONNECTED && rep.type != HV_MSG_DEFER))) {
        hv_log("QP %u: the peer refused to reconnect: %s", qp->pub.qp_num, line);
        r = -EPROTO;
    }
    r = hv_reconnect_answer(qp, r, &rep, m_psn, p_psn);
    free(m);
    free(req);
    return r;
}

/* Brings @s's QP to RTR/RTS with its peer: through the peer's layer when it takes part, by
 * replaying the program's transitions otherwise (UD, or a peer outside the layer). */
static int hv_reconnect(HvSwapQp *s)
{
    HvQp *qp = s->qp;
    struct ibv_qp_attr a;
    int r;

    if (!qp->m_rtr)
        return 0;
    if (s->local)
        return hv_reconnect_local(s);
    if (s->managed)
        return hv_reconnect_managed(s);
    a = qp->a_rtr;
    a.dest_qp_num = qp->peer_pqpn;
    r = hv_qp_modify(qp, &a, qp->m_rtr);
    if (!r && qp->m_rts)
        r = hv_qp_modify(qp, &qp->a_rts, qp->m_rts);
    qp->state = r ? qp->state : (qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR);
    return r ? -r : 0;
}

/* ---- the standby path (docs/design.md "Standby path") ------------------------------------
 * The mover runs wholly on the standby device while its VF is away: at quiesce, once the VF's
 * objects are gone, everything is made again there (hv_rebuild) and each connection whose
 * peer's layer follows (SWITCH) runs on; the others stay paused as without it. At resume the
 * switched ones are paused and drained again, the standby objects go and the swap onto the
 * new VF goes on as always (RECONNECT brings the peers' ends back onto their VFs). */

/* SWITCH to @s's peer: our standby QP's number, PSNs, standby GID and keys; its answer's
 * standby QP is where ours goes (RTR, RTS). 0 or -errno (the QP stays paused). */
static int hv_switch_managed(HvSwapQp *s, HvContext *ctx)
{
    HvQp *qp = s->qp;
    uint32_t m_psn = hv_psn(), p_psn = hv_psn();
    HvMsg *m = calloc(1, sizeof(*m)), *rep = calloc(1, sizeof(*rep));
    char *req = malloc(HV_PROTO_LINE_MAX + 2), *line = malloc(HV_PROTO_LINE_MAX + 2);
    struct ibv_qp_attr a;
    union ibv_gid sgid;
    uint8_t sidx = 0;
    int r = m && rep && req && line ? 0 : -ENOMEM, n;

    if (!r)
        r = -hv_sb_gid(ctx->phys, &sgid, &sidx);
    if (!r) {
        m->type = HV_MSG_SWITCH;
        m->target = qp->peer_vqpn;
        m->sender = qp->pub.qp_num;
        m->sender_pqpn = qp->phys->qp_num;
        m->sender_psn = m_psn;
        m->target_psn = p_psn;
        memcpy(m->gid, sgid.raw, 16);
        hv_ctx_keys(ctx, m);
        n = hv_proto_format(m, req, HV_PROTO_LINE_MAX + 2);
        r = n < 0 ? n
                  : hv_peer_call(&qp->peer_gid, qp->peer_vqpn, req, line, HV_PROTO_LINE_MAX + 2);
    }
    if (!r && (hv_proto_parse(line, strlen(line), rep) < 0 || rep->type != HV_MSG_SWITCHED)) {
        hv_log("QP %u: its peer does not switch: %.200s", qp->pub.qp_num, line);
        r = -EPROTO;
    }
    if (!r) {
        pthread_mutex_lock(&qp->lock);
        hv_sb_rtr_attr(ctx->phys, &qp->a_rtr, rep->gid, sidx, rep->target, p_psn, &a);
        r = -hv_qp_connect(qp, &a, m_psn);
        if (!r) {
            /* the peer's keys there; its own device's are back after the move */
            qp->peer_rkeys_vf = qp->peer_rkeys;
            memset(&qp->peer_rkeys, 0, sizeof(qp->peer_rkeys));
            for (uint32_t i = 0; i < rep->nkeys; i++)
                hv_map_put(&qp->peer_rkeys, rep->keys[i].v, rep->keys[i].p);
            qp->peer_pqpn = rep->target;
            qp->switched = 1;
            qp->sb_sends = qp->sb_recvs = 0;
        }
        pthread_mutex_unlock(&qp->lock);
    }
    free(m);
    free(rep);
    free(req);
    free(line);
    return r;
}

/* Each context's twins on device @name (NULL: each its own device) made ahead of a device
 * change; a context that cannot have them is made there after the drain, as without. */
static void hv_ahead_all(const char *name)
{
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next) {
        const char *nm = name ? name : ctx->dev->dev.name;
        int r;

        pthread_mutex_unlock(&hv.lock);
        r = hv_sb_ahead(ctx, nm); /* the registrations without hv.lock: traffic runs on */
        if (r)
            hv_log("the objects cannot be made on '%s' ahead of the switch (%s): they are made "
                   "there after the drain",
                   nm, strerror(r));
        pthread_mutex_lock(&hv.lock);
    }
    pthread_mutex_unlock(&hv.lock);
}

/* The side a make-before-break change left (the VF's objects at quiesce, the standby
 * device's at resume) goes, or the twins made ahead of a change that did not happen. */
static void hv_ahead_drop(void)
{
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        if (ctx->ahead) {
            ctx->ahead = 0;
            hv_sb_close(ctx);
        }
    pthread_mutex_unlock(&hv.lock);
}

/* quiesce, step 0: the standby device's lease and, ahead, every object but the connections
 * there */
static void hv_standby_ahead(void)
{
    int lease = hv_standby_lease(hv_sb_name, sizeof(hv_sb_name));

    if (lease < 0) {
        hv_log("no standby device for this move: every connection pauses until the resume");
        return;
    }
    hv_sb_lease_fd = lease;
    hv_ahead_all(hv_sb_name);
}

/* Releases the standby lease (the agent removes the device once no lease is left). */
static void hv_standby_release(void)
{
    if (hv_sb_lease_fd >= 0)
        close(hv_sb_lease_fd);
    hv_sb_lease_fd = -1;
}

/* quiesce, step 5: the connections onto the standby device (the lease taken at step 0) */
static void hv_standby_enter(void)
{
    int64_t t0 = hv_now_ms(), t_objs, t_sw;
    size_t switched = 0;
    int r = 0;

    if (hv_sb_lease_fd < 0) {
        hv_ahead_drop();
        return;
    }
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx && !r; ctx = ctx->next) {
        if (ctx->ahead)
            hv_sb_swap(ctx); /* the twins are its own now, the VF's the side that goes */
        r = hv_rebuild(ctx, hv_sb_name, 0);
    }
    if (r) {
        hv_log("the standby device '%s' cannot take this process's objects (%s): every "
               "connection pauses until the resume",
               hv_sb_name, strerror(-r));
        for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
            hv_destroy_phys(ctx);
        pthread_mutex_unlock(&hv.lock);
        hv_standby_release();
        return;
    }
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    t_objs = hv_now_ms();
    for (size_t i = 0; i < hv_swap_n; i++) {
        HvSwapQp *s = &hv_swap_qps[i];
        HvQp *qp = s->qp;

        if (!qp->m_rtr || qp->init.qp_type == IBV_QPT_UD)
            continue; /* UD: held (its peers hold theirs) until the resume */
        if (s->local)
            r = hv_reconnect_local(s);
        else if (s->managed)
            r = hv_switch_managed(s, qp->pd->ctx);
        else
            continue;
        if (r) {
            hv_log("QP %u stays paused until the resume: %s", qp->pub.qp_num, strerror(-r));
            continue;
        }
        pthread_mutex_lock(&qp->lock);
        qp->switched = 1;
        pthread_mutex_unlock(&qp->lock);
        hv_qp_unpause(qp);
        switched++;
    }
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        hv_wake_cqs(ctx, 1);
    pthread_mutex_unlock(&hv.lock);
    t_sw = hv_now_ms();
    hv_sb_report.used = 1;
    hv_sb_report.switched = (uint32_t)switched;
    hv_sb_report.switch_ms = switched ? t_sw - hv_paused_at : 0; /* none: no pause */
    hv_ahead_drop(); /* the VF's objects, while the traffic runs on the standby device */
    hv_log("switched %zu of %zu QPs to the standby device '%s' in %lld ms (objects %lld ms, "
           "switches %lld ms; the VF's objects went after, in %lld ms); sends were paused for %lld "
           "ms",
           switched, hv_swap_n, hv_sb_name, (long long)(t_sw - t0), (long long)(t_objs - t0),
           (long long)(t_sw - t_objs), (long long)(hv_now_ms() - t_sw),
           (long long)(t_sw - hv_paused_at));
}

/* resume: the new device's objects made ahead (@device; NULL: each context's own), then the
 * switched connections paused and drained on the standby device and its connections gone
 * (the rest goes once they run on the new device, hv_resume); the swap onto the new VF
 * follows. */
static void hv_standby_leave(const char *device, int64_t deadline)
{
    uint64_t sends = 0, recvs = 0;
    size_t n = 0;

    if (hv_sb_lease_fd < 0)
        return;
    hv_ahead_all(device);
    hv_sb_left_at = hv_now_ms();
    for (size_t i = 0; i < hv_swap_n; i++)
        hv_pause_qp(hv_swap_qps[i].qp);
    /* the peers drain their standby QPs (a failure is logged: the drain below then ends on
     * its deadline) */
    for (size_t i = 0; i < hv_swap_n; i++)
        if (hv_swap_qps[i].qp->switched && hv_swap_qps[i].managed)
            hv_suspend_peer(&hv_swap_qps[i]);
    for (size_t i = 0; i < hv_swap_n; i++) {
        HvSwapQp *s = &hv_swap_qps[i];
        HvQp *qp = s->qp;

        if (!qp->switched)
            continue;
        if (hv_qp_drain(qp, s->managed ? s->peer_sent : 0, deadline))
            hv_log("QP %u did not drain on the standby path", qp->pub.qp_num);
        pthread_mutex_lock(&qp->lock);
        if (!s->local) {
            hv_map_clear(&qp->peer_rkeys);
            qp->peer_rkeys = qp->peer_rkeys_vf;
            memset(&qp->peer_rkeys_vf, 0, sizeof(qp->peer_rkeys_vf));
        }
        sends += qp->sb_sends;
        recvs += qp->sb_recvs;
        if (qp->sb_sends || qp->sb_recvs)
            hv_log("QP %u: the standby path carried %llu sends and %llu receives", qp->pub.qp_num,
                   (unsigned long long)qp->sb_sends, (unsigned long long)qp->sb_recvs);
        qp->switched = 0;
        qp->sb_sends = qp->sb_recvs = 0;
        pthread_mutex_unlock(&qp->lock);
        s->was_switched = 1;
        n++;
    }
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next) {
        if (ctx->ahead) {
            hv_destroy_conns(ctx);
            hv_sb_swap(ctx); /* the new device's twins are its own now */
        } else {
            hv_destroy_phys(ctx);
        }
    }
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    hv_sb_report.sends = sends;
    hv_sb_report.recvs = recvs;
    hv_log("left the standby device '%s': %zu QPs, %llu sends and %llu receives carried there",
           hv_sb_name, n, (unsigned long long)sends, (unsigned long long)recvs);
}

/* The new device is not there yet (its driver is still binding): a watch on the directory of
 * uverbs nodes, made before the try so that a node created meanwhile is not missed. -1 when
 * it cannot be watched (then hv_devices_wait waits HV_DEVICE_RETRY_MS). */
static int hv_devices_watch(void)
{
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);

    if (fd >= 0 && inotify_add_watch(fd, HV_DEVICES_DIR, IN_CREATE | IN_ATTRIB) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Until a node appears in HV_DEVICES_DIR (@w), HV_DEVICE_RETRY_MS passed or @until. */
static void hv_devices_wait(int w, int64_t until)
{
    struct pollfd p = {.fd = w, .events = POLLIN};
    int64_t left = until - hv_now_ms();

    if (w < 0 || left > HV_DEVICE_RETRY_MS)
        left = HV_DEVICE_RETRY_MS;
    if (left > 0)
        poll(w >= 0 ? &p : NULL, w >= 0 ? 1 : 0, (int)left);
}

/* resume, step 1: every context's objects made again on @device (NULL: each its own), waiting
 * at most HV_DEVICE_WAIT_MS for a device that is not there yet. 0 or the first -errno. */
static int hv_rebuild_all(const char *device)
{
    int r = 0;

    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx && !r; ctx = ctx->next) {
        const char *name = device ? device : ctx->dev->dev.name;
        int64_t until = hv_now_ms() + HV_DEVICE_WAIT_MS;

        for (;;) {
            int w = hv_devices_watch();

            r = hv_rebuild(ctx, name, 1);
            if (r != -ENODEV || ctx->phys || hv_now_ms() >= until) {
                if (w >= 0)
                    close(w);
                break;
            }
            pthread_mutex_unlock(&hv.lock);
            hv_devices_wait(w, until);
            pthread_mutex_lock(&hv.lock);
        }
        if (r)
            hv_log("rebuilding on '%s' failed: %s", name, strerror(-r));
    }
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    return r;
}

/* The resume's line: how long the connections were paused (those on the standby path since
 * the switch back, the others since the quiesce). */
static void hv_resume_log(const char *device, int64_t t0, int r)
{
    size_t nsw = 0;

    for (size_t i = 0; i < hv_swap_n; i++)
        nsw += hv_swap_qps[i].was_switched;
    if (nsw)
        hv_log("resumed on %s in %lld ms (%zu QPs)%s; sends were paused for %lld ms since the "
               "switch back (%zu QPs on the standby path), %lld ms since the quiesce (the other "
               "%zu)",
               device ? device : "the same device", (long long)(hv_now_ms() - t0), hv_swap_n,
               r ? ": with errors" : "", (long long)(hv_now_ms() - hv_sb_left_at), nsw,
               (long long)(hv_now_ms() - hv_paused_at), hv_swap_n - nsw);
    else
        hv_log("resumed on %s in %lld ms (%zu QPs)%s; sends were paused for %lld ms",
               device ? device : "the same device", (long long)(hv_now_ms() - t0), hv_swap_n,
               r ? ": with errors" : "", (long long)(hv_now_ms() - hv_paused_at));
}

int hv_resume(const char *device, void *opaque)
{
    int64_t t0 = hv_now_ms();
    int r = 0, r_rebuild;

    (void)opaque;
    pthread_mutex_lock(&hv.lock);
    if (!hv.swapping) {
        /* not quiesced by us (a resume after an aborted quiesce): nothing moved */
        pthread_mutex_unlock(&hv.lock);
        return 0;
    }
    pthread_mutex_unlock(&hv.lock);
    hv_standby_leave(device, t0 + HV_DRAIN_MS);
    r = r_rebuild = hv_rebuild_all(device);
    /* every QP is brought back even when one fails (one bad connection must not leave the
     * others, a UD QP say, in INIT); the first error is the one reported */
    for (size_t i = 0; i < hv_swap_n && !r_rebuild; i++) {
        int rq = hv_reconnect(&hv_swap_qps[i]);

        if (rq) {
            hv_log("QP %u: reconnecting failed: %s", hv_swap_qps[i].qp->pub.qp_num, strerror(-rq));
            if (!r)
                r = rq;
        }
    }
    for (size_t i = 0; i < hv_swap_n; i++) {
        hv_swap_qps[i].qp->own_known = 0;
        hv_qp_unpause(hv_swap_qps[i].qp);
    }
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        hv_wake_cqs(ctx, 1);
    pthread_mutex_unlock(&hv.lock);
    if (hv_sb_report.switched) /* the switch back's pause; none without a switch */
        hv_sb_report.back_ms = hv_now_ms() - hv_sb_left_at;
    hv_resume_log(device, t0, r);
    /* the standby device's objects, while the traffic runs on the new device; then its lease */
    hv_ahead_drop();
    hv_standby_release();
    pthread_mutex_lock(&hv.lock);
    hv.swapping = 0;
    pthread_mutex_unlock(&hv.lock);
    hv_swap_ended();
    if (!r_rebuild)
        hv_ud_announce();
    return r;
}

/* The UD drain (quiesce): waits until every (sending physical QPN, count) of @want arrived, or
 * until nothing of it arrived for @quiet_ms (what is still missing was lost: UD does not
 * retransmit, and a held peer posts nothing new), or @until. Returns how many are missing. */
size_t hv_ud_drain_wait(const HvKeyPair *want, size_t nwant, int64_t quiet_ms, int64_t until)
{
    int64_t last = hv_now_ms();
    uint64_t got_before = 0;
    size_t missing;

    hv_ud_missing(want, nwant, &got_before);
    for (;;) {
        uint64_t seen = hv_progress_gen(), got = 0;
        int64_t now;

        pthread_mutex_lock(&hv.lock);
        for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
            for (HvQp *qp = ctx->qps; qp; qp = qp->next)
                if (qp->init.qp_type == IBV_QPT_UD && qp->rcq)
                    hv_cq_pull(qp->rcq);
        pthread_mutex_unlock(&hv.lock);
        missing = hv_ud_missing(want, nwant, &got);
        now = hv_now_ms();
        if (!missing)
            break;
        if (got != got_before) { /* still arriving: what is in flight is not lost */
            got_before = got;
            last = now;
        }
        if (now - last >= quiet_ms) {
            hv_log("UD: %zu peer QPs' sends did not all arrive, none for %lld ms: lost before "
                   "the quiesce, not waited for",
                   missing, (long long)quiet_ms);
            break;
        }
        if (now > until) {
            hv_log("UD: %zu peer QPs' sends did not all arrive within %d ms: moving on", missing,
                   HV_UD_DRAIN_MS);
            break;
        }
        hv_progress_wait(seen, now + HV_PULL_MS); /* hv_wc_fix signals receives */
    }
    return missing;
}

/* The mover's side, in quiesce: asks each UD peer it sent to (and that HOTMIG_VERBS_PEERS or the
 * directory knows) to hold its sends, then waits until what they sent before has arrived (UD
 * drops what arrives once the QP is gone): hv_ud_drain_wait(), quiet after HV_UD_QUIET_RTTS
 * times the slowest peer's UDHOLD round trip (at least HV_UD_QUIET_MIN_MS), at most
 * HV_UD_DRAIN_MS. A peer that does not answer is logged; the move goes on. */
static void hv_ud_hold_peers(int64_t deadline)
{
    HvMsg *m = calloc(1, sizeof(*m)), *rep = calloc(1, sizeof(*rep));
    HvKeyPair *want = NULL;
    char req[128], line[HV_PROTO_LINE_MAX + 2];
    HvUdTarget *tg = NULL;
    HvContext *qctx = NULL;
    size_t ntg, nwant = 0, held = 0, missing;
    int64_t until = hv_now_ms() + HV_UD_DRAIN_MS, rtt_max = 0, quiet;

    if (!m || !rep)
        goto out;
    tg = hv_ud_targets_copy(&ntg);
    want = tg ? calloc(ntg * HV_PROTO_UDQPS_MAX, sizeof(*want)) : NULL;
    if (!want)
        goto out;
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx && !qctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp; qp = qp->next)
            if (qp->init.qp_type == IBV_QPT_UD && qp->phys && ctx->phys) {
                qctx = ctx;
                break;
            }
    pthread_mutex_unlock(&hv.lock);
    if (!qctx)
        goto out;
    for (size_t i = 0; i < ntg; i++) {
        union ibv_gid own;
        int64_t t;
        int n, r;

        if (!hv_peer_known((const union ibv_gid *)tg[i].gid))
            continue;
        if (hv_real.r_ibv_query_gid(qctx->phys, tg[i].port, tg[i].sgid_index, &own))
            continue;
        memset(m, 0, sizeof(*m));
        m->type = HV_MSG_UDHOLD;
        m->target = tg[i].qpn;
        memcpy(m->gid, own.raw, 16);
        n = hv_proto_format(m, req, sizeof(req));
        t = hv_now_ms();
        r = n < 0 ? n
                  : hv_peer_call((const union ibv_gid *)tg[i].gid, tg[i].qpn, req, line,
                                 sizeof(line));
        if (!r && (hv_proto_parse(line, strlen(line), rep) < 0 || rep->type != HV_MSG_UDHELD))
            r = -EPROTO;
        if (r) {
            hv_log("UD: asking the owner of QP %u to hold its sends failed: %s", tg[i].qpn,
                   strerror(-r));
            continue;
        }
        if (hv_now_ms() - t > rtt_max)
            rtt_max = hv_now_ms() - t;
        held++;
        for (uint32_t k = 0; k < rep->nkeys; k++)
            want[nwant++] = rep->keys[k];
    }
    if (until > deadline)
        until = deadline;
    quiet = HV_UD_QUIET_RTTS * rtt_max;
    if (quiet < HV_UD_QUIET_MIN_MS)
        quiet = HV_UD_QUIET_MIN_MS;
    missing = hv_ud_drain_wait(want, nwant, quiet, until);
    hv_debug("UD: %zu of %zu UD peers hold their sends, %zu of %zu sending QPs drained", held, ntg,
             nwant - missing, nwant);
out:
    free(m);
    free(rep);
    free(want);
    free(tg);
}

/* After a move: tells every UD peer this process sent to (and that HOTMIG_VERBS_PEERS or the
 * directory knows) its UD QPs' new physical QPNs. Best effort: UD is unreliable, a peer not told
 * keeps sending to the old number (logged). */
static void hv_ud_announce(void)
{
    HvMsg *m = calloc(1, sizeof(*m)), rep;
    char *req = malloc(HV_PROTO_LINE_MAX + 2), line[256];
    HvUdTarget *tg = NULL;
    HvContext *qctx = NULL;
    size_t ntg, told = 0;

    if (!m || !req)
        goto out;
    tg = hv_ud_targets_copy(&ntg);
    if (!tg)
        goto out;
    m->type = HV_MSG_UDMAP;
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp && m->nkeys < HV_PROTO_UDQPS_MAX; qp = qp->next)
            if (qp->init.qp_type == IBV_QPT_UD && qp->phys) {
                m->keys[m->nkeys++] = (HvKeyPair){qp->pub.qp_num, qp->phys->qp_num};
                if (!qctx)
                    qctx = ctx;
            }
    pthread_mutex_unlock(&hv.lock);
    if (!m->nkeys || !qctx || !qctx->phys)
        goto out;
    for (size_t i = 0; i < ntg; i++) {
        union ibv_gid own;
        int n, r;

        if (!hv_peer_known((const union ibv_gid *)tg[i].gid))
            continue;
        if (hv_real.r_ibv_query_gid(qctx->phys, tg[i].port, tg[i].sgid_index, &own)) {
            hv_log("UD: no GID %u on port %u: UD peers are not told the new QPNs", tg[i].sgid_index,
                   tg[i].port);
            continue;
        }
        memcpy(m->gid, own.raw, 16);
        m->lid = hv_port_lid(qctx, tg[i].port); /* IB: where the peers' AHs must point now */
        m->target = tg[i].qpn;
        n = hv_proto_format(m, req, HV_PROTO_LINE_MAX + 2);
        r = n < 0 ? n
                  : hv_peer_call((const union ibv_gid *)tg[i].gid, tg[i].qpn, req, line,
                                 sizeof(line));
        if (!r && (hv_proto_parse(line, strlen(line), &rep) < 0 || rep.type != HV_MSG_UDMAPPED))
            r = -EPROTO;
        if (r)
            hv_log("UD: telling the owner of QP %u our new UD QPNs failed: %s", tg[i].qpn,
                   strerror(-r));
        else
            told++;
    }
    hv_debug("UD: told %zu of %zu UD peers the new QPNs of %u UD QPs", told, ntg, m->nkeys);
out:
    free(m);
    free(req);
    free(tg);
}
