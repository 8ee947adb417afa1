/* libhotmig-verbs: quiesce and resume (libhotmig threaded mode), and the peer's side of a
 * swap (docs/verbs-layer.md, "A swap step by step"). */
#include "hv.h"
#include "hv-proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define HV_DRAIN_MS 15000
#define HV_DEVICE_WAIT_MS 15000


/* Per-QP swap bookkeeping beside HvQp (kept here: only the swap uses it). */
typedef struct {
    HvQp *qp;
    int managed;      /* the peer's layer takes part */
    uint64_t peer_sent;
    HvQp *local;      /* the peer is a QP of this process (loopback): reconnected here */
} HvSwapQp;

static int64_t hv_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void hv_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};

    nanosleep(&ts, NULL);
}

/* Guards the making of a physical AH (hv_ah_phys(), the rebuild, a UDMAP): a leaf lock, taken
 * under hv.lock or a QP's lock, never the other way. */
static pthread_mutex_t hv_ah_lock = PTHREAD_MUTEX_INITIALIZER;

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

static uint32_t hv_psn(void)
{
    uint32_t v = 0;

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
        v = (uint32_t)hv_ms() * 2654435761u;
    return v & 0xffffff;
}

HvQp *hv_find_vqpn(uint32_t vqpn, HvContext **ret)
{
    HvQp *qp = NULL;

    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx && !qp; ctx = ctx->next) {
        uint64_t v;

        pthread_mutex_lock(&ctx->lock);
        if (hv_map_get(&ctx->vqpn, vqpn, &v)) {
            qp = (HvQp *)(uintptr_t)v;
            if (ret)
                *ret = ctx;
        }
        pthread_mutex_unlock(&ctx->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    return qp;
}

/* @qp's own address on its current device: the GID at its RTR sgid_index, the port's LID. */
static int hv_own_addr(HvQp *qp, union ibv_gid *gid, uint16_t *lid)
{
    HvContext *ctx = qp->pd->ctx;
    struct ibv_port_attr pa;
    int r;

    memset(gid, 0, sizeof(*gid));
    memset(&pa, 0, sizeof(pa));
    if (!ctx->phys)
        return -ENODEV;
    r = hv_real.r_ibv_query_gid(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                qp->a_rtr.ah_attr.grh.sgid_index, gid);
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

static int hv_qp_connected(const HvQp *qp)
{
    return (qp->init.qp_type == IBV_QPT_RC || qp->init.qp_type == IBV_QPT_UC) && qp->m_rtr &&
           (qp->state == IBV_QPS_RTR || qp->state == IBV_QPS_RTS) && qp->a_rtr.ah_attr.is_global;
}

/* Posts a signaled zero-length RDMA WRITE after an unsignaled tail: its completion says every
 * earlier send completed. QP lock held. */
int hv_qp_fence(HvQp *qp)
{
    struct ibv_send_wr wr = {0}, *bad = NULL;
    int r;

    if (!qp->phys || qp->init.qp_type == IBV_QPT_UD) {
        qp->unsig_tail = 0;
        return 0;
    }
    wr.wr_id = HV_FENCE_WRID;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    r = ibv_post_send(qp->phys, &wr, &bad);
    if (r) {
        hv_log("cannot post the drain fence on QP %u: %s", qp->pub.qp_num, strerror(r));
        qp->unsig_tail = 0; /* wait for the signaled ones only */
        return r;
    }
    qp->fence_out++;
    qp->sig_out++;
    qp->unsig_tail = 0;
    return 0;
}

/* Waits until @qp's sends completed (and, when @want_recv, @want_recv receives did). */
static int hv_qp_drain(HvQp *qp, uint64_t want_recv, int64_t deadline)
{
    for (;;) {
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
        if (hv_ms() > deadline) {
            hv_log("QP %u did not drain: %llu sends outstanding, %llu of %llu receives",
                   qp->pub.qp_num, (unsigned long long)qp->sig_out,
                   (unsigned long long)qp->recv_done, (unsigned long long)want_recv);
            return -ETIMEDOUT;
        }
        hv_sleep_ms(1);
    }
}

static int hv_modify(HvQp *qp, struct ibv_qp_attr *a, int mask);

int hv_qp_await_expired(HvQp *qp)
{
    struct ibv_qp_attr a;

    if (!qp->await_peer || hv_ms() < qp->await_until)
        return 0;
    hv_log("QP %u: its peer QP %u, moving too, did not reconnect within %d s: the QP is put in "
           "the error state",
           qp->pub.qp_num, qp->peer_vqpn, HV_AWAIT_PEER_MS / 1000);
    qp->await_peer = 0;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_ERR;
    if (qp->phys && hv_modify(qp, &a, IBV_QP_STATE) == 0)
        qp->state = IBV_QPS_ERR;
    qp->paused = 0;
    if (qp->phys)
        hv_qp_flush_queued(qp); /* they complete with IBV_WC_WR_FLUSH_ERR */
    return 1;
}

static void hv_qp_unpause(HvQp *qp)
{
    pthread_mutex_lock(&qp->lock);
    if (qp->await_peer) { /* its peer, moving too, reconnects it (hv_on_reconnect unpauses) */
        pthread_mutex_unlock(&qp->lock);
        return;
    }
    qp->paused = 0;
    if (qp->phys)
        hv_qp_flush_queued(qp);
    pthread_mutex_unlock(&qp->lock);
}

/* Before a QP is paused or held: its queue of paused sends exists, so that the program's
 * posts meanwhile do not allocate (hv.h). QP lock held. */
static void hv_qp_sendq_ready(HvQp *qp)
{
    if (hv_sendq_reserve(qp))
        hv_log("QP %u: no memory for the sends it queues while paused (%u)", qp->pub.qp_num,
               qp->init.cap.max_send_wr);
}

/* Posts what the program posted while the QP was paused. QP lock held. */
void hv_qp_flush_queued(HvQp *qp)
{
    HvSendQueue *q = &qp->queued;

    while (q->n) {
        HvSendWr *e = &q->v[q->head];
        struct ibv_send_wr *bad = NULL;
        int r;

        q->head = (q->head + 1) % q->cap;
        q->n--;
        r = hv_qp_post_send_phys(qp, &e->wr, &bad);
        if (r)
            hv_log("a send queued during the swap could not be posted on QP %u: %s",
                   qp->pub.qp_num, strerror(r));
    }
}

/* Wakes the program's armed CQs: their completions may sit in the layer's buffer. */
static void hv_wake_cqs(HvContext *ctx, int all_armed)
{
    for (HvCq *cq = ctx->cqs; cq; cq = cq->next) {
        int fire = 0;

        pthread_mutex_lock(&cq->lock);
        if (cq->armed && cq->chan && (all_armed || cq->n)) {
            fire = 1;
            cq->armed = 0;
        }
        pthread_mutex_unlock(&cq->lock);
        if (fire)
            hv_chan_signal(cq->chan, cq);
    }
}

static int hv_modify(HvQp *qp, struct ibv_qp_attr *a, int mask)
{
    int r = hv_real.r_ibv_modify_qp(qp->phys, a, mask);

    if (r)
        hv_log("QP %u: modify to state %d failed: %s", qp->pub.qp_num, a->qp_state, strerror(r));
    return r;
}

/* ---- quiesce ------------------------------------------------------------------------------ */

static void hv_destroy_phys(HvContext *ctx)
{
    for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
        if (qp->scq)
            hv_cq_pull(qp->scq);
        if (qp->rcq)
            hv_cq_pull(qp->rcq);
        pthread_mutex_lock(&qp->lock);
        if (qp->phys) {
            pthread_mutex_lock(&ctx->lock);
            hv_map_del(&ctx->qpn, qp->phys->qp_num);
            pthread_mutex_unlock(&ctx->lock);
            if (hv_real.r_ibv_destroy_qp(qp->phys))
                hv_log("QP %u: destroy failed", qp->pub.qp_num);
            qp->phys = NULL;
        }
        pthread_mutex_unlock(&qp->lock);
    }
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

static void hv_ud_announce(void);
static void hv_ud_hold_peers(int64_t deadline);

static HvSwapQp *hv_swap_qps;
static size_t hv_swap_n;
static int64_t hv_paused_at; /* the mover's sends queued from then on (its blackout) */

int hv_quiesce(void *opaque)
{
    int64_t t0 = hv_ms(), deadline = t0 + HV_DRAIN_MS;
    int r = 0;

    (void)opaque;
    pthread_mutex_lock(&hv.lock);
    hv.swapping = 1;
    pthread_mutex_unlock(&hv.lock);
    free(hv_swap_qps);
    hv_swap_qps = hv_swap_list(&hv_swap_n);
    hv_paused_at = t0;
    /* 1. no new sends from here on: they are queued */
    for (size_t i = 0; i < hv_swap_n; i++) {
        pthread_mutex_lock(&hv_swap_qps[i].qp->lock);
        hv_qp_sendq_ready(hv_swap_qps[i].qp);
        hv_swap_qps[i].qp->paused = 1;
        hv_swap_qps[i].qp->reconnected = 0;
        hv_swap_qps[i].qp->await_peer = 0;
        pthread_mutex_unlock(&hv_swap_qps[i].qp->lock);
    }
    /* 2. each connected peer stops sending, drains and says how much it sent */
    for (size_t i = 0; i < hv_swap_n && !r; i++) {
        HvSwapQp *s = &hv_swap_qps[i];
        HvQp *qp = s->qp;
        HvMsg m = {.type = HV_MSG_SUSPEND}, rep;
        char req[128], line[HV_PROTO_LINE_MAX + 2];
        int n;

        if (hv_swap_mark_local(s) || !hv_qp_connected(qp))
            continue;
        if (!hv_peer_known(&qp->a_rtr.ah_attr.grh.dgid)) {
            hv_log("QP %u: its peer's GID is not in HOTMIG_VERBS_PEERS: the connection will not "
                   "survive the swap", qp->pub.qp_num);
            continue;
        }
        m.target = qp->peer_vqpn;
        m.sender = qp->pub.qp_num;
        pthread_mutex_lock(&qp->lock);
        m.sent = qp->sent_msgs;
        pthread_mutex_unlock(&qp->lock);
        n = hv_proto_format(&m, req, sizeof(req));
        r = n < 0 ? n : hv_peer_call(&qp->a_rtr.ah_attr.grh.dgid, qp->peer_vqpn, req, line, sizeof(line));
        if (!r && (hv_proto_parse(line, strlen(line), &rep) < 0 || rep.type != HV_MSG_SUSPENDED)) {
            hv_log("QP %u: the peer refused to suspend: %s", qp->pub.qp_num, line);
            r = -EPROTO;
        }
        if (r) {
            hv_log("QP %u: suspending the peer (QP %u) failed: %s", qp->pub.qp_num, qp->peer_vqpn,
                   strerror(-r));
            break;
        }
        s->managed = 1;
        s->peer_sent = rep.sent;
        hv_debug("QP %u: peer QP %u suspended, it sent %llu", qp->pub.qp_num, qp->peer_vqpn,
                 (unsigned long long)rep.sent);
    }
    /* 2b. UD peers hold their sends to us; what they sent before arrives */
    if (!r)
        hv_ud_hold_peers(deadline);
    /* 3. drain: our sends completed, the peer's sends received */
    for (size_t i = 0; i < hv_swap_n && !r; i++)
        r = hv_qp_drain(hv_swap_qps[i].qp, hv_swap_qps[i].managed ? hv_swap_qps[i].peer_sent : 0,
                        deadline);
    if (r) {
        /* stay on the device: let traffic go on (the agent reports the failure) */
        for (size_t i = 0; i < hv_swap_n; i++)
            hv_qp_unpause(hv_swap_qps[i].qp);
        hv_ud_announce(); /* UD peers: same QPNs, their holds end */
        pthread_mutex_lock(&hv.lock);
        hv.swapping = 0;
        pthread_mutex_unlock(&hv.lock);
        hv_swap_ended();
        return r;
    }
    /* 4. the physical objects go; the shadows stay */
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        hv_destroy_phys(ctx);
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
    hv_log("quiesced in %lld ms (%zu QPs)", (long long)(hv_ms() - t0), hv_swap_n);
    return 0;
}

/* ---- resume ------------------------------------------------------------------------------- */

static int hv_repost(HvRecvFifo *f, HvQp *qp, HvSrq *srq)
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
            if (hv_map_get(&ctx->lkey, sge[k].lkey, &p))
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

/* Creates every physical object of @ctx again on device @name. hv.lock held. */
static int hv_rebuild(HvContext *ctx, const char *name)
{
    int r;

    r = hv_ctx_attach(ctx, name);
    if (r)
        return -r;
    pthread_mutex_lock(&ctx->lock);
    ctx->swapped = 1;
    hv_map_clear(&ctx->lkey);
    hv_map_clear(&ctx->qpn);
    pthread_mutex_unlock(&ctx->lock);
    for (HvChan *ch = ctx->chans; ch; ch = ch->next) {
        ch->phys = hv_real.r_ibv_create_comp_channel(ctx->phys);
        if (!ch->phys)
            return -errno;
        {
            int fl = fcntl(ch->phys->fd, F_GETFL);
            fcntl(ch->phys->fd, F_SETFL, fl | O_NONBLOCK);
        }
    }
    for (HvPd *pd = ctx->pds; pd; pd = pd->next) {
        pd->phys = hv_real.r_ibv_alloc_pd(ctx->phys);
        if (!pd->phys)
            return -errno;
    }
    for (HvMr *mr = ctx->mrs; mr; mr = mr->next) {
        mr->phys = mr->kind ? hv_real.r_ibv_reg_mr_iova2(mr->pd->phys, mr->pub.addr, mr->pub.length,
                                                         mr->iova, (unsigned)mr->access)
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
        r = hv_cq_make(cq);
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
    /* An AH to a peer that is away (moving too: RoCE cannot resolve its address) is made
     * later, at the peer's UDMAP or at the next send through it (hv_ah_phys): failing the
     * whole rebuild for it would leave this process half on the new device. */
    for (HvAh *ah = ctx->ahs; ah; ah = ah->next) {
        pthread_mutex_lock(&hv_ah_lock);
        ah->phys = hv_real.r_ibv_create_ah(ah->pd->phys, &ah->attr);
        pthread_mutex_unlock(&hv_ah_lock);
        if (!ah->phys)
            hv_log("UD: an address handle cannot be made yet (%s): its peer is away? It is made "
                   "at the peer's UDMAP or at the next send through it",
                   strerror(errno));
    }
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
                r = hv_modify(qp, &qp->a_init, qp->m_init);
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
    r = hv_modify(qp, &a, qp->m_rtr);
    if (!r && qp->m_rts)
        r = hv_modify(qp, &qp->a_rts, qp->m_rts);
    if (r)
        return -r;
    pthread_mutex_lock(&qp->lock);
    qp->peer_pqpn = peer->phys->qp_num;
    qp->a_rtr.ah_attr = a.ah_attr;
    qp->state = qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR;
    hv_map_clear(&qp->peer_rkeys);
    pthread_mutex_lock(&pctx->lock);
    for (HvMr *mr = pctx->mrs; mr; mr = mr->next)
        if (mr->phys && mr->pub.rkey != mr->phys->rkey)
            hv_map_put(&qp->peer_rkeys, mr->pub.rkey, mr->phys->rkey);
    pthread_mutex_unlock(&pctx->lock);
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
            qp->await_until = hv_ms() + HV_AWAIT_PEER_MS;
            hv_log("QP %u: its peer QP %u is moving too: it reconnects when it is back "
                   "(sends stay queued, at most %d s)",
                   qp->pub.qp_num, qp->peer_vqpn, HV_AWAIT_PEER_MS / 1000);
        }
    } else if (!r) {
        qp->peer_pqpn = rep->target;
        a = qp->a_rtr;
        a.dest_qp_num = rep->target;
        a.rq_psn = p_psn;
        r = -hv_modify(qp, &a, qp->m_rtr);
        if (!r && qp->m_rts) {
            a = qp->a_rts;
            a.sq_psn = m_psn;
            r = -hv_modify(qp, &a, qp->m_rts);
        }
        if (!r) {
            qp->state = qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR;
            qp->reconnected = 1;
        }
    }
    pthread_mutex_unlock(&qp->lock);
    return r;
}

/* Into @m's keys: @ctx's memory regions whose physical rkey differs from the virtual one the
 * program was given (re-registered after a swap, or synthetic): what a peer translates. */
static void hv_ctx_keys(HvContext *ctx, HvMsg *m)
{
    m->nkeys = 0;
    pthread_mutex_lock(&ctx->lock);
    for (HvMr *mr = ctx->mrs; mr && m->nkeys < HV_PROTO_KEYS_MAX; mr = mr->next)
        if (mr->phys && mr->pub.rkey != mr->phys->rkey)
            m->keys[m->nkeys++] = (HvKeyPair){mr->pub.rkey, mr->phys->rkey};
    pthread_mutex_unlock(&ctx->lock);
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
    if (!r && hv_real.r_ibv_query_gid(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                      qp->a_rtr.ah_attr.grh.sgid_index, &gid) == 0)
        memcpy(m->gid, gid.raw, 16);
    memset(&pa, 0, sizeof(pa));
    if (!r && hv_real.r_ibv_query_port(ctx->phys, qp->a_rtr.ah_attr.port_num,
                                       (struct _compat_ibv_port_attr *)&pa) == 0)
        m->lid = pa.lid;
    hv_ctx_keys(ctx, m);
    n = r ? -r : hv_proto_format(m, req, HV_PROTO_LINE_MAX + 2);
    r = n < 0 ? n : hv_peer_call(&qp->a_rtr.ah_attr.grh.dgid, qp->peer_vqpn, req, line, sizeof(line));
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
    r = hv_modify(qp, &a, qp->m_rtr);
    if (!r && qp->m_rts)
        r = hv_modify(qp, &qp->a_rts, qp->m_rts);
    qp->state = r ? qp->state : (qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR);
    return r ? -r : 0;
}

int hv_resume(const char *device, void *opaque)
{
    int64_t t0 = hv_ms();
    int r = 0, r_rebuild;

    (void)opaque;
    pthread_mutex_lock(&hv.lock);
    if (!hv.swapping) {
        /* not quiesced by us (a resume after an aborted quiesce): nothing moved */
        pthread_mutex_unlock(&hv.lock);
        return 0;
    }
    for (HvContext *ctx = hv.ctxs; ctx && !r; ctx = ctx->next) {
        const char *name = device ? device : ctx->dev->dev.name;
        int64_t until = hv_ms() + HV_DEVICE_WAIT_MS;

        do {
            r = hv_rebuild(ctx, name);
            if (r == -ENODEV && !ctx->phys) {
                pthread_mutex_unlock(&hv.lock);
                hv_sleep_ms(100);
                pthread_mutex_lock(&hv.lock);
            }
        } while (r == -ENODEV && !ctx->phys && hv_ms() < until);
        if (r)
            hv_log("rebuilding on '%s' failed: %s", name, strerror(-r));
    }
    r_rebuild = r;
    pthread_mutex_unlock(&hv.lock);
    hv_evt_kick();
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
    for (size_t i = 0; i < hv_swap_n; i++)
        hv_qp_unpause(hv_swap_qps[i].qp);
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        hv_wake_cqs(ctx, 1);
    hv.swapping = 0;
    pthread_mutex_unlock(&hv.lock);
    hv_swap_ended();
    if (!r_rebuild)
        hv_ud_announce();
    hv_log("resumed on %s in %lld ms (%zu QPs)%s; sends were paused for %lld ms",
           device ? device : "the same device", (long long)(hv_ms() - t0), hv_swap_n,
           r ? ": with errors" : "", (long long)(hv_ms() - hv_paused_at));
    return r;
}

/* ---- UD peers ------------------------------------------------------------------------------ */

static HvUdTable hv_ud_tab;
static pthread_mutex_t hv_ud_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int hv_ud_known; /* peers in hv_ud_tab: receives skip the lock while 0 */

uint32_t hv_ud_send_qpn(const struct ibv_ah_attr *ah, uint32_t remote_qpn)
{
    uint32_t p = remote_qpn;

    if (!ah->is_global)
        return remote_qpn;
    pthread_mutex_lock(&hv_ud_lock);
    hv_ud_target_note(&hv_ud_tab, ah->grh.dgid.raw, remote_qpn, ah->port_num, ah->grh.sgid_index);
    if (!hv_ud_out(&hv_ud_tab, ah->grh.dgid.raw, remote_qpn, &p))
        p = remote_qpn;
    pthread_mutex_unlock(&hv_ud_lock);
    return p;
}

/* UD receives per sender's physical QPN (hv_ud_lock): a moving process waits until it has
 * what its held peers say they sent (UDHELD). The first HV_UD_RECV_MAX senders are counted. */
#define HV_UD_RECV_MAX 256
static struct {
    uint32_t pqpn, n;
} hv_ud_recv[HV_UD_RECV_MAX];
static size_t hv_ud_nrecv;

static uint32_t *hv_ud_recv_slot(uint32_t pqpn) /* hv_ud_lock held; NULL when full */
{
    for (size_t i = 0; i < hv_ud_nrecv; i++)
        if (hv_ud_recv[i].pqpn == pqpn)
            return &hv_ud_recv[i].n;
    if (hv_ud_nrecv == HV_UD_RECV_MAX)
        return NULL;
    hv_ud_recv[hv_ud_nrecv].pqpn = pqpn;
    hv_ud_recv[hv_ud_nrecv].n = 0;
    return &hv_ud_recv[hv_ud_nrecv++].n;
}

uint32_t hv_ud_recv_qpn(uint32_t src_qp)
{
    uint32_t v = src_qp, *n;

    pthread_mutex_lock(&hv_ud_lock);
    n = hv_ud_recv_slot(src_qp);
    if (n)
        (*n)++;
    if (!atomic_load(&hv_ud_known) || !hv_ud_in(&hv_ud_tab, src_qp, &v))
        v = src_qp;
    pthread_mutex_unlock(&hv_ud_lock);
    return v;
}

void hv_ud_count_send(HvQp *qp, const struct ibv_ah_attr *ah)
{
    size_t i;

    if (!ah->is_global)
        return;
    for (i = 0; i < qp->n_ud_sent; i++)
        if (!memcmp(qp->ud_sent[i].gid, ah->grh.dgid.raw, 16))
            break;
    if (i == qp->n_ud_sent) {
        if (i == HV_UD_SENT_MAX)
            return;
        memcpy(qp->ud_sent[i].gid, ah->grh.dgid.raw, 16);
        qp->ud_sent[i].n = 0;
        qp->n_ud_sent++;
    }
    qp->ud_sent[i].n++;
}

int hv_ud_held(HvQp *qp)
{
    if (!qp->ud_held_until)
        return 0;
    if (hv_ms() < qp->ud_held_until)
        return 1;
    hv_log("UD QP %u: a moving peer did not say where it went within %d s: its held sends go to "
           "its old address",
           qp->pub.qp_num, HV_UD_HOLD_MS / 1000);
    qp->ud_held_until = 0;
    if (!qp->paused && qp->phys)
        hv_qp_flush_queued(qp);
    return 0;
}

/* Ends the holds a UD peer at @gid asked for (its UDMAP came): the held sends go, translated. */
static void hv_ud_release(const uint8_t gid[16]) /* hv.lock held */
{
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
            pthread_mutex_lock(&qp->lock);
            if (qp->ud_held_until && !memcmp(qp->ud_held_gid, gid, 16)) {
                qp->ud_held_until = 0;
                if (!qp->paused && qp->phys)
                    hv_qp_flush_queued(qp);
            }
            pthread_mutex_unlock(&qp->lock);
        }
}

/* The peer's side of UDHOLD: every UD QP of this process that sent to the mover's GID (and the
 * QP named) queues its sends until the mover's UDMAP (or HV_UD_HOLD_MS); the reply counts what
 * each sent to that GID so far, which the mover waits to have received before it goes. */
static int hv_on_udhold(const HvMsg *m, HvMsg *rep)
{
    HvQp *target = hv_find_vqpn(m->target, NULL);
    int64_t until = hv_ms() + HV_UD_HOLD_MS;

    if (!target || target->init.qp_type != IBV_QPT_UD) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u is not a UD QP", m->target);
        return -ENOENT;
    }
    rep->type = HV_MSG_UDHELD;
    rep->nkeys = 0;
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvQp *qp = ctx->qps; qp; qp = qp->next) {
            size_t i;

            if (qp->init.qp_type != IBV_QPT_UD)
                continue;
            pthread_mutex_lock(&qp->lock);
            for (i = 0; i < qp->n_ud_sent; i++)
                if (!memcmp(qp->ud_sent[i].gid, m->gid, 16))
                    break;
            if (qp == target || i < qp->n_ud_sent) {
                hv_qp_sendq_ready(qp);
                qp->ud_held_until = until;
                memcpy(qp->ud_held_gid, m->gid, 16);
            }
            if (i < qp->n_ud_sent && qp->phys && rep->nkeys < HV_PROTO_UDQPS_MAX)
                rep->keys[rep->nkeys++] = (HvKeyPair){qp->phys->qp_num, qp->ud_sent[i].n};
            pthread_mutex_unlock(&qp->lock);
        }
    pthread_mutex_unlock(&hv.lock);
    hv_debug("UD: a peer moves: sends to it held, %u of our UD QPs sent to it", rep->nkeys);
    return 0;
}

/* The mover's side, in quiesce: asks each UD peer it sent to (and HOTMIG_VERBS_PEERS names) to
 * hold its sends, then waits, bounded by HV_UD_DRAIN_MS, until what they sent before has
 * arrived (UD drops what arrives once the QP is gone). A peer that does not answer or a count
 * not reached (a datagram lost earlier) is logged; the move goes on. */
#define HV_UD_DRAIN_MS 3000
/* The UD peers this process sent to, copied out of hv_ud_tab (at most HV_UD_TARGETS_MAX). */
static size_t hv_ud_targets_copy(HvUdTarget *tg)
{
    size_t n;

    pthread_mutex_lock(&hv_ud_lock);
    n = hv_ud_tab.ntargets;
    memcpy(tg, hv_ud_tab.targets, n * sizeof(tg[0]));
    pthread_mutex_unlock(&hv_ud_lock);
    return n;
}

static void hv_ud_hold_peers(int64_t deadline)
{
    HvMsg *m = calloc(1, sizeof(*m)), *rep = calloc(1, sizeof(*rep));
    HvKeyPair *want = calloc(HV_UD_TARGETS_MAX * HV_PROTO_UDQPS_MAX, sizeof(*want));
    char req[128], line[HV_PROTO_LINE_MAX + 2];
    HvUdTarget tg[HV_UD_TARGETS_MAX];
    HvContext *qctx = NULL;
    size_t ntg, nwant = 0, held = 0;
    int64_t until = hv_ms() + HV_UD_DRAIN_MS;

    if (!m || !rep || !want)
        goto out;
    ntg = hv_ud_targets_copy(tg);
    if (!ntg)
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
        held++;
        for (uint32_t k = 0; k < rep->nkeys; k++)
            want[nwant++] = rep->keys[k];
    }
    if (until > deadline)
        until = deadline;
    for (;;) {
        size_t missing = 0;

        pthread_mutex_lock(&hv.lock);
        for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
            for (HvQp *qp = ctx->qps; qp; qp = qp->next)
                if (qp->init.qp_type == IBV_QPT_UD && qp->rcq)
                    hv_cq_pull(qp->rcq);
        pthread_mutex_unlock(&hv.lock);
        pthread_mutex_lock(&hv_ud_lock);
        for (size_t k = 0; k < nwant; k++) {
            uint32_t *got = hv_ud_recv_slot(want[k].v);

            if (!got || (int32_t)(*got - want[k].p) < 0)
                missing++;
        }
        pthread_mutex_unlock(&hv_ud_lock);
        if (!missing)
            break;
        if (hv_ms() > until) {
            hv_log("UD: %zu peer QPs' sends did not all arrive within %d ms (lost earlier?): "
                   "moving on",
                   missing, HV_UD_DRAIN_MS);
            break;
        }
        hv_sleep_ms(1);
    }
    hv_debug("UD: %zu of %zu UD peers hold their sends, %zu sending QPs drained", held, ntg, nwant);
out:
    free(m);
    free(rep);
    free(want);
}

/* After a move: tells every UD peer this process sent to (and that HOTMIG_VERBS_PEERS names)
 * its UD QPs' new physical QPNs. Best effort: UD is unreliable, a peer not told keeps sending
 * to the old number (logged). */
static void hv_ud_announce(void)
{
    HvMsg *m = calloc(1, sizeof(*m)), rep;
    char *req = malloc(HV_PROTO_LINE_MAX + 2), line[256];
    HvUdTarget tg[HV_UD_TARGETS_MAX];
    HvContext *qctx = NULL;
    size_t ntg, told = 0;

    if (!m || !req)
        goto out;
    ntg = hv_ud_targets_copy(tg);
    if (!ntg)
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
        m->target = tg[i].qpn;
        n = hv_proto_format(m, req, HV_PROTO_LINE_MAX + 2);
        r = n < 0 ? n : hv_peer_call((const union ibv_gid *)tg[i].gid, tg[i].qpn, req, line,
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
}

static int hv_on_udmap(const HvMsg *m, HvMsg *rep)
{
    HvQp *qp = hv_find_vqpn(m->target, NULL);
    uint32_t v[HV_PROTO_UDQPS_MAX], p[HV_PROTO_UDQPS_MAX];
    int r, refreshed = 0;

    if (!qp || qp->init.qp_type != IBV_QPT_UD || m->nkeys > HV_PROTO_UDQPS_MAX) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u is not a UD QP", m->target);
        return -ENOENT;
    }
    for (uint32_t i = 0; i < m->nkeys; i++) {
        v[i] = m->keys[i].v;
        p[i] = m->keys[i].p;
    }
    pthread_mutex_lock(&hv_ud_lock);
    r = hv_ud_learn(&hv_ud_tab, m->gid, v, p, m->nkeys);
    atomic_store(&hv_ud_known, (int)hv_ud_tab.npeers);
    pthread_mutex_unlock(&hv_ud_lock);
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "cannot keep the UD QPNs: %s", strerror(-r));
        return r;
    }
    /* the AHs to the mover: created with its old link-layer address (RoCE: the MAC of the
     * VF it left); a new AH resolves the new one */
    pthread_mutex_lock(&hv.lock);
    for (HvContext *ctx = hv.ctxs; ctx; ctx = ctx->next)
        for (HvAh *ah = ctx->ahs; ah; ah = ah->next) {
            struct ibv_ah *n;

            if (!ah->pd->phys || !ah->attr.is_global ||
                memcmp(ah->attr.grh.dgid.raw, m->gid, 16))
                continue;
            n = hv_real.r_ibv_create_ah(ah->pd->phys, &ah->attr);
            if (!n) {
                hv_log("UD: cannot re-create the address handle to a moved peer: %s",
                       strerror(errno));
                continue;
            }
            pthread_mutex_lock(&hv_ah_lock);
            if (ah->phys) {
                if (ah->stale)
                    hv_real.r_ibv_destroy_ah(ah->stale);
                ah->stale = ah->phys;
            }
            ah->phys = n;
            pthread_mutex_unlock(&hv_ah_lock);
            refreshed++;
        }
    hv_ud_release(m->gid);
    pthread_mutex_unlock(&hv.lock);
    rep->type = HV_MSG_UDMAPPED;
    hv_debug("UD: a peer's %u UD QPs moved (QP %u now %u...), %d address handles re-created",
             m->nkeys, v[0], p[0], refreshed);
    return 0;
}

/* ---- the peer's side ---------------------------------------------------------------------- */

static int hv_on_suspend(const HvMsg *m, HvMsg *rep)
{
    HvQp *qp = hv_find_vqpn(m->target, NULL);
    int r;

    if (!qp || !hv_qp_connected(qp) || qp->peer_vqpn != m->sender) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u is not connected to QP %u", m->target,
                 m->sender);
        return -ENOENT;
    }
    pthread_mutex_lock(&qp->lock);
    hv_qp_sendq_ready(qp);
    qp->paused = 1;
    qp->paused_at = hv_ms();
    qp->reconnected = 0; /* a new event: the peer's next RECONNECT counts */
    pthread_mutex_unlock(&qp->lock);
    r = hv_qp_drain(qp, 0, hv_ms() + HV_DRAIN_MS);
    if (r) {
        hv_qp_unpause(qp);
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u did not drain: %s", m->target, strerror(-r));
        return r;
    }
    pthread_mutex_lock(&qp->lock);
    rep->type = HV_MSG_SUSPENDED;
    rep->sent = qp->sent_msgs;
    pthread_mutex_unlock(&qp->lock);
    hv_debug("QP %u suspended for its peer QP %u (sent %llu)", m->target, m->sender,
             (unsigned long long)rep->sent);
    return 0;
}

/* Takes @qp's lock and decides what a peer's RECONNECT does (hv_reconnect_verdict): while
 * both ends resume and ours is out, its answer (from the peer, which never waits) decides, so
 * this waits for it, bounded. 0 with the lock held, or -ETIMEDOUT without it. */
static int hv_reconnect_verdict_locked(HvQp *qp, int swapping, int drives, HvVerdict *verdict)
{
    int64_t until = hv_ms() + HV_DRAIN_MS;

    pthread_mutex_lock(&qp->lock);
    for (;;) {
        *verdict = hv_reconnect_verdict(qp->reconnected, qp->phys != NULL, swapping, drives,
                                        qp->await_peer, qp->calling);
        if (*verdict != HV_VERDICT_WAIT)
            return 0;
        pthread_mutex_unlock(&qp->lock);
        if (hv_ms() > until)
            return -ETIMEDOUT;
        hv_sleep_ms(1);
        pthread_mutex_lock(&hv.lock);
        swapping = hv.swapping;
        pthread_mutex_unlock(&hv.lock);
        pthread_mutex_lock(&qp->lock);
    }
}

static int hv_on_reconnect(const HvMsg *m, HvMsg *rep)
{
    HvContext *ctx = NULL;
    HvQp *qp = hv_find_vqpn(m->target, &ctx);
    struct ibv_qp_attr a;
    union ibv_gid own;
    uint16_t own_lid = 0;
    int r, swapping, drives;
    HvVerdict verdict;

    if (!qp || !qp->m_rtr || !qp->m_init || qp->peer_vqpn != m->sender) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u cannot reconnect to QP %u", m->target,
                 m->sender);
        return -ENOENT;
    }
    /* both ends may be moving: who drives (hv_reconnect_verdict) */
    pthread_mutex_lock(&hv.lock);
    swapping = hv.swapping;
    pthread_mutex_unlock(&hv.lock);
    drives = qp->phys && hv_own_addr(qp, &own, &own_lid) == 0 &&
             hv_drives(own.raw, qp->pub.qp_num, m->gid, m->sender);
    /* completions still in the CQs account for their receives before the queue is reset */
    if (qp->scq)
        hv_cq_pull(qp->scq);
    if (qp->rcq)
        hv_cq_pull(qp->rcq);
    r = hv_reconnect_verdict_locked(qp, swapping, drives, &verdict);
    if (r) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u: our own RECONNECT got no answer",
                 m->target);
        return r;
    }
    if (verdict != HV_VERDICT_ACCEPT) {
        pthread_mutex_unlock(&qp->lock);
        rep->type = HV_MSG_DEFER;
        rep->defer = verdict == HV_VERDICT_MOVING ? HV_DEFER_MOVING : HV_DEFER_RECONNECTED;
        hv_debug("QP %u: RECONNECT from its peer QP %u deferred (%s): both ends are moving",
                 m->target, m->sender, verdict == HV_VERDICT_MOVING ? "we reconnect it" : "done");
        return 0;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RESET;
    r = hv_modify(qp, &a, IBV_QP_STATE);
    if (!r)
        r = hv_modify(qp, &qp->a_init, qp->m_init);
    if (!r)
        r = -hv_repost(&qp->recvs, qp, NULL);
    if (!r) {
        a = qp->a_rtr;
        a.dest_qp_num = m->sender_pqpn;
        a.rq_psn = m->sender_psn;
        memcpy(a.ah_attr.grh.dgid.raw, m->gid, 16);
        if (!a.ah_attr.is_global)
            a.ah_attr.dlid = m->lid;
        r = hv_modify(qp, &a, qp->m_rtr);
    }
    if (!r && qp->m_rts) {
        a = qp->a_rts;
        a.sq_psn = m->target_psn;
        r = hv_modify(qp, &a, qp->m_rts);
    }
    if (!r) {
        qp->peer_pqpn = m->sender_pqpn;
        hv_map_clear(&qp->peer_rkeys);
        for (uint32_t i = 0; i < m->nkeys; i++)
            hv_map_put(&qp->peer_rkeys, m->keys[i].v, m->keys[i].p);
        qp->sig_out = 0;
        qp->fence_out = 0;
        qp->unsig_tail = 0;
        qp->state = qp->m_rts ? IBV_QPS_RTS : IBV_QPS_RTR;
        qp->paused = 0;
        qp->reconnected = 1;
        qp->await_peer = 0;
        hv_qp_flush_queued(qp);
        rep->type = HV_MSG_RECONNECTED;
        rep->target = qp->phys->qp_num;
    } else {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u: reconnecting failed: %s", m->target,
                 strerror(r < 0 ? -r : r));
    }
    pthread_mutex_unlock(&qp->lock);
    if (ctx) {
        pthread_mutex_lock(&hv.lock);
        hv_wake_cqs(ctx, 0);
        pthread_mutex_unlock(&hv.lock);
    }
    /* One line per reconnected QP (a rank that stayed logs its pause as the mover does). */
    hv_log("QP %u reconnected to its peer's new QP %u; its sends were paused for %lld ms",
           m->target, m->sender_pqpn, (long long)(hv_ms() - qp->paused_at));
    return r;
}

/* ---- keys registered after a swap ---------------------------------------------------------- */

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
            to[n].gid = qp->a_rtr.ah_attr.grh.dgid;
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
            hv_log("QP %u: its peer is not in HOTMIG_VERBS_PEERS: it cannot learn the synthetic "
                   "rkey 0x%x",
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

static int hv_on_keymap(const HvMsg *m, HvMsg *rep)
{
    HvQp *qp = hv_find_vqpn(m->target, NULL);

    if (!qp || qp->peer_vqpn != m->sender || m->nkeys > HV_PROTO_KEYS_MAX) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "QP %u is not connected to QP %u", m->target,
                 m->sender);
        return -ENOENT;
    }
    pthread_mutex_lock(&qp->lock);
    for (uint32_t i = 0; i < m->nkeys; i++)
        hv_map_put(&qp->peer_rkeys, m->keys[i].v, m->keys[i].p);
    pthread_mutex_unlock(&qp->lock);
    rep->type = HV_MSG_KEYMAPPED;
    hv_debug("QP %u: its peer QP %u registered %u keys after its swap", m->target, m->sender,
             m->nkeys);
    return 0;
}

/* ---- lookups: a connection made after a swap ------------------------------------------------
 * The program connects a QP with the numbers its peer program handed it, virtual ones; after a
 * swap of either end they differ from the physical ones, and no RECONNECT told this QP. */

/* LOOKUP from a peer connecting to our QP @target: its physical number and our changed rkeys;
 * DEFER moving while our device is away (the peer asks again). */
static int hv_on_lookup(const HvMsg *m, HvMsg *rep)
{
    HvContext *ctx = NULL;
    HvQp *qp = hv_find_vqpn(m->target, &ctx);
    int swapping;

    if (!qp || qp->init.qp_type == IBV_QPT_UD) {
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "no connected QP %u here", m->target);
        return -ENOENT;
    }
    pthread_mutex_lock(&hv.lock);
    swapping = hv.swapping;
    pthread_mutex_unlock(&hv.lock);
    pthread_mutex_lock(&qp->lock);
    if (swapping || !qp->phys) {
        pthread_mutex_unlock(&qp->lock);
        rep->type = HV_MSG_DEFER;
        rep->defer = HV_DEFER_MOVING;
        return 0;
    }
    rep->target = qp->phys->qp_num;
    pthread_mutex_unlock(&qp->lock);
    rep->type = HV_MSG_LOOKEDUP;
    hv_ctx_keys(ctx, rep);
    hv_debug("QP %u (physical %u): looked up by QP %u connecting to it (%u keys)", m->target,
             rep->target, m->sender, rep->nkeys);
    return 0;
}

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
static int hv_lookup_call(HvQp *qp, const struct ibv_qp_attr *attr, HvMsg *m, uint32_t *pqpn)
{
    char req[64], *line = malloc(HV_PROTO_LINE_MAX + 2);
    int r;

    if (!line)
        return -ENOMEM;
    m->type = HV_MSG_LOOKUP;
    m->target = attr->dest_qp_num;
    m->sender = qp->pub.qp_num;
    r = hv_proto_format(m, req, sizeof(req));
    if (r >= 0)
        r = hv_peer_call(&attr->ah_attr.grh.dgid, attr->dest_qp_num, req, line,
                         HV_PROTO_LINE_MAX + 2);
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

uint32_t hv_lookup_peer(HvQp *qp, const struct ibv_qp_attr *attr, HvMap *keys)
{
    HvContext *ctx = qp->pd->ctx;
    union ibv_gid own;
    uint32_t pqpn = attr->dest_qp_num;
    int64_t until = hv_ms() + HV_LOOKUP_WAIT_MS;
    HvMsg *m;
    int r, said = 0;

    if (hv_real.r_ibv_query_gid(ctx->phys, attr->ah_attr.port_num, attr->ah_attr.grh.sgid_index,
                                &own) == 0 &&
        memcmp(own.raw, attr->ah_attr.grh.dgid.raw, 16) == 0 &&
        hv_find_vqpn(attr->dest_qp_num, NULL))
        return hv_lookup_here(attr->dest_qp_num, keys);
    if (!hv_peer_known(&attr->ah_attr.grh.dgid) || !(m = calloc(1, sizeof(*m))))
        return pqpn; /* a peer outside the layer keeps its numbers */
    while ((r = hv_lookup_call(qp, attr, m, &pqpn)) == 1 && hv_ms() < until) {
        if (!said++)
            hv_log("QP %u: its peer QP %u is moving: connecting once it is back",
                   qp->pub.qp_num, attr->dest_qp_num);
        hv_sleep_ms(200);
    }
    if (r == 0) {
        for (uint32_t i = 0; i < m->nkeys; i++)
            hv_map_put(keys, m->keys[i].v, m->keys[i].p);
        if (pqpn != attr->dest_qp_num || m->nkeys)
            hv_log("QP %u: its peer QP %u is physical QPN %u (%u rkeys translated)",
                   qp->pub.qp_num, attr->dest_qp_num, pqpn, m->nkeys);
    } else {
        hv_log("QP %u: no lookup of its peer QP %u (%s): its numbers are taken as they are",
               qp->pub.qp_num, attr->dest_qp_num, r == 1 ? "still moving" : strerror(-r));
        pqpn = attr->dest_qp_num;
    }
    free(m);
    return pqpn;
}

int hv_peer_handle(const HvMsg *m, HvMsg *rep)
{
    switch (m->type) {
    case HV_MSG_SUSPEND:
        return hv_on_suspend(m, rep);
    case HV_MSG_RECONNECT:
        return hv_on_reconnect(m, rep);
    case HV_MSG_UDMAP:
        return hv_on_udmap(m, rep);
    case HV_MSG_UDHOLD:
        return hv_on_udhold(m, rep);
    case HV_MSG_KEYMAP:
        return hv_on_keymap(m, rep);
    case HV_MSG_LOOKUP:
        return hv_on_lookup(m, rep);
    default:
        rep->type = HV_MSG_ERROR;
        snprintf(rep->text, sizeof(rep->text), "unexpected message");
        return -EPROTO;
    }
}
