/* libhotmig-verbs, objects layer: the standby device's twins of a context's objects, for the QPs
 * whose peer moves (docs/design.md "Standby path"). The mover itself runs wholly on the
 * standby device (a device swap, hv-swap.c); a peer runs there only the QPs to the mover, so
 * its other connections stay on its VF: both devices are open in one context meanwhile. */
#include "hv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define HV_SB_OPEN_MS 5000 /* the agent's new device to be listed by libibverbs */

/* Device @name opened into ctx->sb, waiting up to HV_SB_OPEN_MS for a device the agent just
 * made to be listed (its uverbs node appears after the netlink answer). 0 or an errno. */
static int hv_sb_open_name(HvContext *ctx, const char *name)
{
    int64_t until = hv_now_ms() + HV_SB_OPEN_MS;

    while (!(ctx->sb = hv_open_phys(name)) && hv_now_ms() < until)
        usleep(20000);
    if (!ctx->sb) {
        int e = errno ? errno : ENODEV;

        hv_log("cannot open the standby device '%s': %s", name, strerror(e));
        return e;
    }
    hv_nonblock(ctx->sb->async_fd);
    return 0;
}

int hv_sb_open(HvContext *ctx)
{
    char name[72];
    int lease, r;

    if (ctx->sb)
        return 0;
    lease = hv_standby_lease(name, sizeof(name));
    if (lease < 0)
        return -lease;
    r = hv_sb_open_name(ctx, name);
    if (r) {
        close(lease);
        return r;
    }
    ctx->sb_lease = lease;
    hv_log("standby device '%s' opened", name);
    return 0;
}

static int hv_sb_cq(HvCq *cq)
{
    HvContext *ctx;

    if (!cq || cq->sb)
        return 0;
    ctx = cq->ctx;
    if (cq->chan && !cq->chan->sb) {
        cq->chan->sb = hv_real.r_ibv_create_comp_channel(ctx->sb);
        if (!cq->chan->sb)
            return errno ? errno : EIO;
        hv_nonblock(cq->chan->sb->fd);
        hv_evt_kick(); /* the event thread watches it too */
    }
    pthread_mutex_lock(&cq->lock);
    /* its vector where the device has it (the twin may become its own, hv_sb_swap) */
    cq->sb = hv_real.r_ibv_create_cq(ctx->sb, cq->cqe, cq, cq->chan ? cq->chan->sb : NULL,
                                     cq->comp_vector < ctx->sb->num_comp_vectors ? cq->comp_vector
                                                                                 : 0);
    if (cq->sb && cq->armed)
        ibv_req_notify_cq(cq->sb, cq->armed_solicited);
    pthread_mutex_unlock(&cq->lock);
    return cq->sb ? 0 : (errno ? errno : EIO);
}

static int hv_sb_mr(HvMr *mr)
{
    HvContext *ctx = mr->pd->ctx;

    if (mr->sb)
        return 0;
    mr->sb = mr->kind ? hv_real.r_ibv_reg_mr_iova2(mr->pd->sb, mr->pub.addr, mr->pub.length,
                                                    mr->iova, (unsigned)mr->access)
                      : hv_real.r_ibv_reg_mr(mr->pd->sb, mr->pub.addr, mr->pub.length, mr->access);
    if (!mr->sb)
        return errno ? errno : EIO;
    pthread_mutex_lock(&ctx->lock);
    hv_map_put(&ctx->sb_lkey, mr->pub.lkey, mr->sb->lkey);
    pthread_mutex_unlock(&ctx->lock);
    return 0;
}

/* @pd's twin and, double registration, every MR of it: those the program may name to a QP of
 * it, its peer or (an SRQ's PD) the receives of its SRQ. */
static int hv_sb_pd(HvPd *pd)
{
    HvContext *ctx = pd->ctx;
    int r = 0;

    if (!pd->sb) {
        pd->sb = hv_real.r_ibv_alloc_pd(ctx->sb);
        if (!pd->sb)
            return errno ? errno : EIO;
    }
    for (HvMr *mr = ctx->mrs; mr && !r; mr = mr->next)
        if (mr->pd == pd)
            r = hv_sb_mr(mr);
    return r;
}

/* @srq's twin, empty: its receives come as the program posts them, or all of them once every
 * QP of it runs there (hv_srq_gather). */
static int hv_sb_srq(HvSrq *srq)
{
    struct ibv_srq_init_attr a = srq->init;
    int r = hv_sb_pd(srq->pd);

    if (r)
        return r;
    a.srq_context = srq;
    pthread_mutex_lock(&srq->lock);
    if (!srq->sb) {
        srq->sb = hv_real.r_ibv_create_srq(srq->pd->sb, &a);
        r = srq->sb ? 0 : (errno ? errno : EIO);
        if (!r && !srq->sb_recvs.cap &&
            hv_fifo_reserve(&srq->sb_recvs, srq->recvs.cap, srq->recvs.sge_per))
            hv_log("SRQ: no memory to record its receives on the standby device ahead: its "
                   "posts allocate");
    }
    pthread_mutex_unlock(&srq->lock);
    return r;
}

int hv_sb_prepare(HvQp *qp)
{
    int r;

    if (!qp->pd->ctx->sb)
        return ENODEV;
    r = hv_sb_pd(qp->pd);
    if (!r)
        r = hv_sb_cq(qp->scq);
    if (!r && qp->rcq != qp->scq)
        r = hv_sb_cq(qp->rcq);
    if (!r && qp->srq)
        r = hv_sb_srq(qp->srq);
    return r;
}

void hv_sb_mr_reg(HvMr *mr)
{
    int r;

    if (!mr->pd->sb)
        return;
    r = hv_sb_mr(mr);
    if (r)
        hv_log("a memory region registered while a QP runs on the standby device cannot be "
               "registered there too: %s (that QP's work requests naming it fail)",
               strerror(r));
}

void hv_sb_mr_dereg(HvMr *mr)
{
    HvContext *ctx = mr->pd->ctx;

    if (!mr->sb)
        return;
    hv_real.r_ibv_dereg_mr(mr->sb);
    mr->sb = NULL;
    pthread_mutex_lock(&ctx->lock);
    hv_map_del(&ctx->sb_lkey, mr->pub.lkey);
    pthread_mutex_unlock(&ctx->lock);
}

/* A QP made from @qp's attributes with the objects of one device. */
static struct ibv_qp *hv_sb_qp_make(HvQp *qp, int sb)
{
    struct ibv_qp_init_attr a = qp->init;

    a.qp_context = qp;
    a.send_cq = qp->scq ? (sb ? qp->scq->sb : qp->scq->phys) : NULL;
    a.recv_cq = qp->rcq ? (sb ? qp->rcq->sb : qp->rcq->phys) : NULL;
    a.srq = qp->srq ? (sb ? qp->srq->sb : qp->srq->phys) : NULL;
    return hv_real.r_ibv_create_qp(sb ? qp->pd->sb : qp->pd->phys, &a);
}

int hv_sb_qp_move(HvQp *qp, int to_sb)
{
    HvContext *ctx = qp->pd->ctx;
    struct ibv_qp *nq;
    struct ibv_qp_attr a;
    int r = 0;

    /* the first QP of an SRQ back: the SRQ on the own device again (its receives follow when
     * the last one is, hv_srq_gather) */
    if (qp->srq && !to_sb) {
        pthread_mutex_lock(&qp->srq->lock);
        if (!qp->srq->phys)
            r = hv_srq_make(qp->srq);
        pthread_mutex_unlock(&qp->srq->lock);
        if (r)
            return r;
    }
    nq = hv_sb_qp_make(qp, to_sb);
    if (!nq)
        return errno ? errno : EIO;
    pthread_mutex_lock(&ctx->lock);
    if (qp->phys) {
        hv_map_del(qp->on_sb ? &ctx->sb_qpn : &ctx->qpn, qp->phys->qp_num);
        /* completions it still makes (flushes of its receives, re-posted on @nq) are dropped */
        hv_map_put(qp->on_sb ? &ctx->sb_retired : &ctx->retired, qp->phys->qp_num, 1);
    }
    hv_map_put(to_sb ? &ctx->sb_qpn : &ctx->qpn, nq->qp_num, (uintptr_t)qp);
    pthread_mutex_unlock(&ctx->lock);
    if (qp->phys && hv_real.r_ibv_destroy_qp(qp->phys))
        hv_log("QP %u: destroying its physical QP on the %s device failed", qp->pub.qp_num,
               qp->on_sb ? "standby" : "own");
    qp->phys = nq;
    qp->on_sb = to_sb;
    qp->sig_out = 0;
    qp->fence_out = 0;
    qp->unsig_tail = 0;
    qp->state = IBV_QPS_RESET;
    if (!qp->m_init)
        return 0;
    a = qp->a_init;
    if (to_sb)
        a.port_num = 1;
    r = hv_qp_modify(qp, &a, qp->m_init);
    if (!r)
        qp->state = IBV_QPS_INIT;
    return r;
}

/* @srq's QPs on the own device (@own) and on the standby device (@sb). */
static void hv_srq_sides(HvContext *ctx, const HvSrq *srq, int *own, int *sb)
{
    *own = *sb = 0;
    for (HvQp *qp = ctx->qps; qp; qp = qp->next)
        if (qp->srq == srq)
            (*(qp->on_sb ? sb : own))++;
}

void hv_srq_gather(HvContext *ctx)
{
    for (HvSrq *srq = ctx->srqs; srq; srq = srq->next) {
        int own, sb, r = 0;

        if (!srq->sb)
            continue;
        hv_srq_sides(ctx, srq, &own, &sb);
        pthread_mutex_lock(&srq->lock);
        if (!own && sb && srq->phys) {
            /* no QP of it left on the own device: its SRQ goes, its receives to the twin */
            r = hv_real.r_ibv_destroy_srq(srq->phys);
            if (!r) {
                srq->phys = NULL;
                r = hv_recvs_move(&ctx->sb_lkey, &srq->recvs, &srq->sb_recvs, srq->sb);
            }
        } else if (!sb) {
            /* none on the standby device: the twin goes, its receives back (posted now, or
             * at the rebuild of a move that destroyed the own SRQ) */
            r = hv_recvs_move(&ctx->lkey, &srq->sb_recvs, &srq->recvs, srq->phys);
            if (!r && !hv_real.r_ibv_destroy_srq(srq->sb))
                srq->sb = NULL;
        }
        pthread_mutex_unlock(&srq->lock);
        if (r)
            hv_log("SRQ: its receives cannot move to the device its QPs run on: %s (%u left "
                   "behind; those QPs wait for new ones)",
                   strerror(r), (unsigned)(srq->phys ? srq->sb_recvs.n : srq->recvs.n));
    }
}

/* ---- make before break (the mover: docs/design.md "Standby path") ------------------------ */

int hv_sb_ahead(HvContext *ctx, const char *name)
{
    int r;

    pthread_mutex_lock(&hv.lock);
    r = ctx->sb ? EBUSY : 0;
    if (!r)
        ctx->ahead = 1; /* the peer handlers leave its twins alone (hv_sb_close_unused) */
    pthread_mutex_unlock(&hv.lock);
    if (r)
        return r;
    /* the registrations (the long part) without hv.lock: the event thread takes it, and the
     * program's control calls, which could change these lists, wait for the swap's end */
    r = hv_sb_open_name(ctx, name);
    for (HvPd *pd = ctx->pds; pd && !r; pd = pd->next)
        r = hv_sb_pd(pd);
    pthread_mutex_lock(&hv.lock);
    for (HvCq *cq = ctx->cqs; cq && !r; cq = cq->next)
        r = hv_sb_cq(cq); /* a channel's twin is watched by the event thread */
    if (r) {
        hv_sb_close(ctx);
        ctx->ahead = 0;
    }
    pthread_mutex_unlock(&hv.lock);
    return r;
}

#define HV_SWAP(a, b)                                                                              \
    do {                                                                                           \
        __typeof__(a) t_ = (a);                                                                    \
        (a) = (b);                                                                                 \
        (b) = t_;                                                                                  \
    } while (0)

void hv_sb_swap(HvContext *ctx)
{
    for (HvChan *ch = ctx->chans; ch; ch = ch->next)
        HV_SWAP(ch->phys, ch->sb);
    for (HvPd *pd = ctx->pds; pd; pd = pd->next)
        HV_SWAP(pd->phys, pd->sb);
    for (HvMr *mr = ctx->mrs; mr; mr = mr->next)
        HV_SWAP(mr->phys, mr->sb);
    for (HvCq *cq = ctx->cqs; cq; cq = cq->next) {
        pthread_mutex_lock(&cq->lock);
        HV_SWAP(cq->phys, cq->sb);
        pthread_mutex_unlock(&cq->lock);
    }
    pthread_mutex_lock(&ctx->lock);
    HV_SWAP(ctx->phys, ctx->sb);
    HV_SWAP(ctx->lkey, ctx->sb_lkey);
    /* no QP is made on either side yet */
    hv_map_clear(&ctx->qpn);
    hv_map_clear(&ctx->sb_qpn);
    hv_map_clear(&ctx->retired);
    hv_map_clear(&ctx->sb_retired);
    ctx->vctx.context.num_comp_vectors = ctx->phys->num_comp_vectors;
    pthread_mutex_unlock(&ctx->lock);
    hv_evt_kick(); /* the event thread watches the channels of both sides */
}

void hv_sb_close(HvContext *ctx)
{
    if (!ctx->sb)
        return;
    hv_srq_gather(ctx);
    for (HvMr *mr = ctx->mrs; mr; mr = mr->next)
        hv_sb_mr_dereg(mr);
    for (HvCq *cq = ctx->cqs; cq; cq = cq->next) {
        hv_cq_pull(cq); /* what the standby's CQ still holds is the program's */
        pthread_mutex_lock(&cq->lock);
        if (cq->sb)
            hv_real.r_ibv_destroy_cq(cq->sb);
        cq->sb = NULL;
        pthread_mutex_unlock(&cq->lock);
    }
    for (HvChan *ch = ctx->chans; ch; ch = ch->next) {
        if (ch->sb)
            hv_real.r_ibv_destroy_comp_channel(ch->sb);
        ch->sb = NULL;
    }
    for (HvPd *pd = ctx->pds; pd; pd = pd->next) {
        if (pd->sb)
            hv_real.r_ibv_dealloc_pd(pd->sb);
        pd->sb = NULL;
    }
    hv_real.r_ibv_close_device(ctx->sb);
    ctx->sb = NULL;
    pthread_mutex_lock(&ctx->lock);
    hv_map_clear(&ctx->sb_lkey);
    hv_map_clear(&ctx->sb_qpn);
    hv_map_clear(&ctx->sb_retired);
    /* the QPs' old physical QPs on the own device went at the switch; their last completions
     * were polled since (hv_cq_pull above): one entry per move and QP no longer piles up */
    hv_map_clear(&ctx->retired);
    pthread_mutex_unlock(&ctx->lock);
    if (ctx->sb_lease >= 0)
        close(ctx->sb_lease); /* the agent removes the device once no lease is left */
    ctx->sb_lease = -1;
    hv_evt_kick();
}

void hv_sb_close_unused(HvContext *ctx)
{
    if (!ctx->sb || ctx->ahead)
        return;
    for (HvQp *qp = ctx->qps; qp; qp = qp->next)
        if (qp->on_sb)
            return;
    hv_sb_close(ctx);
    hv_log("standby device closed: no connection runs there any more");
}

/* "RoCE v2" in sysfs for GID @index of @dev's port 1 */
static int hv_sb_gid_v2(struct ibv_context *dev, int index)
{
    char path[256], buf[32] = "";
    FILE *f;

    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/types/%d",
             dev->device->name, index);
    f = fopen(path, "re");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return strncmp(buf, "RoCE v2", 7) == 0;
}

static int hv_sb_gid_find(struct ibv_context *dev, union ibv_gid *gid, uint8_t *index)
{
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct ibv_port_attr pa;

    memset(&pa, 0, sizeof(pa));
    if (hv_real.r_ibv_query_port(dev, 1, (struct _compat_ibv_port_attr *)&pa))
        return ENOENT;
    for (int i = 0; i < pa.gid_tbl_len && i < 256; i++) {
        if (hv_real.r_ibv_query_gid(dev, 1, i, gid))
            continue;
        if (memcmp(gid->raw, v4, sizeof(v4)) == 0 && hv_sb_gid_v2(dev, i)) {
            *index = (uint8_t)i;
            return 0;
        }
    }
    return ENOENT;
}

int hv_sb_gid(struct ibv_context *dev, union ibv_gid *gid, uint8_t *index)
{
    int64_t until = hv_now_ms() + HV_SB_OPEN_MS;
    int r;

    /* a device just made gets the GIDs of its NIC's addresses a moment later */
    while ((r = hv_sb_gid_find(dev, gid, index)) && hv_now_ms() < until)
        usleep(20000);
    if (r)
        hv_log("the standby device '%s' has no RoCE v2 GID of an IPv4 address",
               dev->device->name);
    return r;
}

void hv_sb_rtr_attr(struct ibv_context *dev, const struct ibv_qp_attr *rtr, const uint8_t dgid[16],
                    uint8_t sgid_index, uint32_t dest_qpn, uint32_t rq_psn, struct ibv_qp_attr *out)
{
    struct ibv_port_attr pa;

    *out = *rtr;
    memset(&out->ah_attr, 0, sizeof(out->ah_attr));
    out->ah_attr.is_global = 1;
    memcpy(out->ah_attr.grh.dgid.raw, dgid, 16);
    out->ah_attr.grh.sgid_index = sgid_index;
    out->ah_attr.grh.hop_limit = 64;
    out->ah_attr.port_num = 1;
    out->dest_qp_num = dest_qpn;
    out->rq_psn = rq_psn;
    memset(&pa, 0, sizeof(pa));
    /* the control NIC's MTU may be below the VF's: both ends take the smaller */
    if (hv_real.r_ibv_query_port(dev, 1, (struct _compat_ibv_port_attr *)&pa) == 0 &&
        pa.active_mtu && pa.active_mtu < out->path_mtu)
        out->path_mtu = pa.active_mtu;
}
