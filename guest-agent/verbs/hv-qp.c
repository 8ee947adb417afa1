/* libhotmig-verbs, objects layer: queue pairs: creation (virtual QPNs), the program's transitions
 * recorded for a replay, queries, destruction. */
#include "hv.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Creates @qp's physical QP from its recorded attributes. */
int hv_qp_make(HvQp *qp, struct ibv_qp_init_attr *report)
{
    struct ibv_qp_init_attr a = qp->init;

    a.qp_context = qp;
    a.send_cq = qp->scq ? qp->scq->phys : NULL;
    a.recv_cq = qp->rcq ? qp->rcq->phys : NULL;
    a.srq = qp->srq ? qp->srq->phys : NULL;
    qp->phys = hv_real.r_ibv_create_qp(qp->pd->phys, &a);
    if (!qp->phys)
        return errno ? errno : EIO;
    if (report)
        report->cap = a.cap;
    return 0;
}

/* A virtual QPN for @phys: the same number unless another live QP of the process has it. */
uint32_t hv_qpn_pick(HvContext *ctx, uint32_t phys)
{
    (void)ctx;
    static uint32_t next_synth = 0xff0000u;
    uint32_t v = phys;

    for (;;) {
        int clash = 0;

        for (HvContext *c = hv.ctxs; c; c = c->next)
            if (hv_map_get(&c->vqpn, v, NULL))
                clash = 1;
        if (!clash && hv_route_taken(v))
            clash = 1;
        if (!clash)
            return v;
        v = next_synth++ & 0xffffff;
    }
}

HV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *attr)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvQp *qp;
    int r;

    if (!ctx)
        return hv_real.r_ibv_create_qp(ibpd, attr);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC && attr->qp_type != IBV_QPT_UD) {
        hv_unsupported("ibv_create_qp of this QP type");
        errno = EOPNOTSUPP;
        return NULL;
    }
    qp = calloc(1, sizeof(*qp));
    if (!qp)
        return NULL;
    qp->pd = (HvPd *)ibpd;
    qp->scq = (HvCq *)attr->send_cq;
    qp->rcq = (HvCq *)attr->recv_cq;
    qp->srq = (HvSrq *)attr->srq;
    qp->init = *attr;
    r = hv_qp_make(qp, attr);
    if (r) {
        free(qp);
        errno = r;
        return NULL;
    }
    qp->init.cap = attr->cap;
    if ((!qp->srq &&
         hv_recvs_reserve(&qp->recvs, &qp->xr, attr->cap.max_recv_wr, attr->cap.max_recv_sge)) ||
        hv_scratch_reserve(&qp->xs, attr->cap.max_send_wr, sizeof(struct ibv_send_wr),
                           (size_t)attr->cap.max_send_wr * attr->cap.max_send_sge))
        hv_log("QP: no memory to record and translate its work requests ahead: its posts allocate");
    pthread_mutex_init(&qp->lock, NULL);
    qp->pub.context = &ctx->vctx.context;
    qp->pub.qp_context = attr->qp_context;
    qp->pub.pd = ibpd;
    qp->pub.send_cq = attr->send_cq;
    qp->pub.recv_cq = attr->recv_cq;
    qp->pub.srq = attr->srq;
    qp->pub.handle = qp->phys->handle;
    qp->pub.state = IBV_QPS_RESET;
    qp->pub.qp_type = attr->qp_type;
    pthread_mutex_init(&qp->pub.mutex, NULL);
    pthread_cond_init(&qp->pub.cond, NULL);
    pthread_mutex_lock(&hv.lock);
    pthread_mutex_lock(&ctx->lock);
    qp->pub.qp_num = hv_qpn_pick(ctx, qp->phys->qp_num);
    hv_map_put(&ctx->qpn, qp->phys->qp_num, (uintptr_t)qp);
    hv_map_put(&ctx->vqpn, qp->pub.qp_num, (uintptr_t)qp);
    HV_LINK(ctx->qps, qp);
    pthread_mutex_unlock(&ctx->lock);
    pthread_mutex_unlock(&hv.lock);
    if (qp->pub.qp_num != qp->phys->qp_num)
        hv_log("QP got the synthetic number %u (physical %u)", qp->pub.qp_num, qp->phys->qp_num);
    hv_qp_route_add(qp);
    return &qp->pub;
}

/* ibv_modify_qp's step after the real call succeeded: the transition recorded for a replay
 * on a new device (@a: what went to the device, its DLID where the peer is now), and at RTR who
 * the peer is (@peer, @known). qp lock held. */
static void hv_qp_record(HvQp *qp, const struct ibv_qp_attr *attr, int mask,
                         const struct ibv_qp_attr *a, const union ibv_gid *peer, int known)
{
    qp->state = attr->qp_state;
    qp->pub.state = attr->qp_state;
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        qp->a_init = *attr;
        qp->m_init = mask;
        break;
    case IBV_QPS_RTR:
        qp->a_rtr = *attr;
        qp->a_rtr.ah_attr.dlid = a->ah_attr.dlid; /* where the peer is now */
        qp->m_rtr = mask;
        if (mask & IBV_QP_AV) {
            qp->peer_gid = *peer;
            qp->peer_known = known;
        }
        /* jobs (issue 18): the agent's inventory lists whom this process talks to; not a
         * loopback connection to its own GID (UCX connects RC QPs to themselves): that
         * pauses no other guest (--dry-run listed it as a peer). */
        if ((mask & IBV_QP_AV) && (mask & IBV_QP_DEST_QPN) && known) {
            union ibv_gid own;
            int sgid = attr->ah_attr.is_global ? attr->ah_attr.grh.sgid_index : 0;

            if (hv_real.r_ibv_query_gid(qp->pd->ctx->phys, attr->ah_attr.port_num, sgid,
                                        &own) != 0 ||
                memcmp(own.raw, peer->raw, sizeof(own.raw)) != 0)
                hv_report_peer(peer->raw, attr->dest_qp_num);
        }
        break;
    case IBV_QPS_RTS:
        qp->a_rts = *attr;
        qp->m_rts = mask;
        if (qp->init.qp_type != IBV_QPT_UD)
            hv_debug("QP %u connected to QP %u", qp->pub.qp_num, qp->peer_vqpn);
        break;
    case IBV_QPS_RESET:
        qp->m_init = qp->m_rtr = qp->m_rts = 0;
        break;
    default:
        break;
    }
}

HV_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
    HvContext *ctx = HV_CTX(ibqp);
    HvQp *qp = (HvQp *)ibqp;
    struct ibv_qp_attr a;
    HvMap keys = {0};
    union ibv_gid peer;
    uint32_t pqpn = 0;
    uint16_t lid = 0;
    int looked = 0, known = 0, r;

    if (!ctx)
        return hv_real.r_ibv_modify_qp(ibqp, attr, mask);
    if (hv_wait_phys(ctx))
        return ENODEV;
    a = *attr;
    /* who the peer is (its port GID: a GRH's, or the directory's for a LID) and, for a new
     * peer of a connected QP, its physical numbers and LID now (either end may have swapped
     * since the program learnt them), asked before the QP lock is taken: network calls */
    if ((mask & IBV_QP_AV) && qp->init.qp_type != IBV_QPT_UD)
        known = hv_av_peer(ctx, &attr->ah_attr, &peer);
    if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR && (mask & IBV_QP_DEST_QPN) &&
        known && qp->peer_vqpn != attr->dest_qp_num) {
        pqpn = hv_lookup_peer(qp, attr, &peer, &keys, &lid);
        looked = 1;
        if (lid && lid != a.ah_attr.dlid) {
            hv_log("QP %u: its peer QP %u moved from LID %u to LID %u: connecting there",
                   qp->pub.qp_num, attr->dest_qp_num, a.ah_attr.dlid, lid);
            a.ah_attr.dlid = lid;
        }
    } else if ((mask & IBV_QP_AV) && !known && qp->init.qp_type != IBV_QPT_UD) {
        hv_log("QP %u: its peer at LID %u is a port the agents' directory does not know: the "
               "connection will not survive a move",
               qp->pub.qp_num, attr->ah_attr.dlid);
        /* the agent's inventory lists it: --dry-run FAILs and the move refuses unless forced */
        hv_unsupported("a connection to a LID the agents' directory does not know");
    }
    pthread_mutex_lock(&qp->lock);
    if (mask & IBV_QP_DEST_QPN) {
        if (qp->peer_vqpn != attr->dest_qp_num) {
            /* a new peer: what the lookup found, else no translation */
            qp->peer_vqpn = attr->dest_qp_num;
            qp->peer_pqpn = looked ? pqpn : attr->dest_qp_num;
            hv_map_clear(&qp->peer_rkeys);
            if (looked) {
                qp->peer_rkeys = keys;
                memset(&keys, 0, sizeof(keys));
            }
        }
        a.dest_qp_num = qp->peer_pqpn;
    }
    r = hv_real.r_ibv_modify_qp(qp->phys, &a, mask);
    if (!r && (mask & IBV_QP_STATE))
        hv_qp_record(qp, attr, mask, &a, &peer, known);
    pthread_mutex_unlock(&qp->lock);
    hv_map_clear(&keys);
    return r;
}

HV_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
                           struct ibv_qp_init_attr *init)
{
    HvContext *ctx = HV_CTX(ibqp);
    HvQp *qp = (HvQp *)ibqp;
    int r;

    if (!ctx)
        return hv_real.r_ibv_query_qp(ibqp, a, mask, init);
    if (hv_wait_phys(ctx))
        return ENODEV;
    r = hv_real.r_ibv_query_qp(qp->phys, a, mask, init);
    if (r)
        return r;
    a->dest_qp_num = qp->peer_vqpn;
    init->qp_context = qp->pub.qp_context;
    init->send_cq = qp->pub.send_cq;
    init->recv_cq = qp->pub.recv_cq;
    init->srq = qp->pub.srq;
    return 0;
}

HV_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
    HvContext *ctx = HV_CTX(ibqp);
    HvQp *qp = (HvQp *)ibqp;
    int r = 0;

    if (!ctx)
        return hv_real.r_ibv_destroy_qp(ibqp);
    hv_wait_phys(ctx);
    hv_qp_route_del(qp);
    /* no new peer request finds it; those that hold it finish first (hv_qp_hold) */
    pthread_mutex_lock(&hv.lock);
    pthread_mutex_lock(&ctx->lock);
    hv_map_del(&ctx->vqpn, qp->pub.qp_num);
    pthread_mutex_unlock(&ctx->lock);
    pthread_mutex_unlock(&hv.lock);
    hv_qp_wait_unheld(qp);
    pthread_mutex_lock(&hv.lock);
    if (qp->phys) {
        uint32_t pqpn = qp->phys->qp_num;

        r = hv_real.r_ibv_destroy_qp(qp->phys);
        if (!r) {
            pthread_mutex_lock(&ctx->lock);
            hv_map_del(qp->on_sb ? &ctx->sb_qpn : &ctx->qpn, pqpn);
            pthread_mutex_unlock(&ctx->lock);
        }
    }
    if (!r) {
        pthread_mutex_lock(&ctx->lock);
        hv_map_del(&ctx->vqpn, qp->pub.qp_num);
        HV_UNLINK(ctx->qps, qp);
        pthread_mutex_unlock(&ctx->lock);
        if (qp->on_sb) /* the last QP on the standby device: it goes with its lease */
            hv_sb_close_unused(ctx);
    }
    if (r) { /* the QP stays: peers find it again */
        pthread_mutex_lock(&ctx->lock);
        hv_map_put(&ctx->vqpn, qp->pub.qp_num, (uintptr_t)qp);
        pthread_mutex_unlock(&ctx->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    if (r)
        return r;
    hv_sendq_free(&qp->queued);
    hv_scratch_free(&qp->xs);
    hv_scratch_free(&qp->xr);
    hv_fifo_free(&qp->recvs);
    hv_map_clear(&qp->peer_rkeys);
    hv_map_clear(&qp->peer_rkeys_vf);
    hv_ud_set_free(&qp->ud_sent);
    hv_wx_free(qp);
    free(qp);
    return 0;
}

HV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *ibqp, enum ibv_wr_opcode op, uint32_t f)
{
    HvContext *ctx = HV_CTX(ibqp);

    if (!ctx)
        return hv_real.r_ibv_query_qp_data_in_order(ibqp, op, f);
    if (hv_wait_phys(ctx))
        return 0;
    return hv_real.r_ibv_query_qp_data_in_order(((HvQp *)ibqp)->phys, op, f);
}

HV_EXPORT int ibv_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
    HvContext *ctx = HV_CTX(ibqp);

    if (!ctx)
        return hv_real.r_ibv_query_ece(ibqp, ece);
    if (hv_wait_phys(ctx))
        return ENODEV;
    return hv_real.r_ibv_query_ece(((HvQp *)ibqp)->phys, ece);
}

HV_EXPORT int ibv_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
    HvContext *ctx = HV_CTX(ibqp);

    if (!ctx)
        return hv_real.r_ibv_set_ece(ibqp, ece);
    if (hv_wait_phys(ctx))
        return ENODEV;
    return hv_real.r_ibv_set_ece(((HvQp *)ibqp)->phys, ece);
}

HV_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *g, uint16_t lid)
{
    if (!HV_CTX(ibqp))
        return hv_real.r_ibv_attach_mcast(ibqp, g, lid);
    return hv_unsupported("ibv_attach_mcast");
}

HV_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *g, uint16_t lid)
{
    if (!HV_CTX(ibqp))
        return hv_real.r_ibv_detach_mcast(ibqp, g, lid);
    return hv_unsupported("ibv_detach_mcast");
}

HV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
    struct ibv_qp_ex *(*real)(struct ibv_qp *) = (struct ibv_qp_ex * (*)(struct ibv_qp *))
        dlvsym(hv_real_lib, "ibv_qp_to_qp_ex", "IBVERBS_1.6");

    if (!HV_CTX(ibqp))
        return real ? real(ibqp) : NULL;
    /* as rdma-core: only a QP created by ibv_create_qp_ex with send_ops_flags has one */
    return ((HvQp *)ibqp)->ex ? &((HvQp *)ibqp)->pubx : NULL;
}

/* verbs_context.create_qp_ex: rdma-core's ibv_create_qp_ex calls it for any comp_mask other
 * than the PD alone. The PD with send_ops_flags the layer implements is served; anything else
 * is refused with EOPNOTSUPP, as without the op. */
struct ibv_qp *hv_op_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
    struct ibv_qp *ibqp;

    (void)c;
    if ((a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) ||
        !(a->comp_mask & IBV_QP_INIT_ATTR_PD) ||
        ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~HV_WX_OPS))) {
        hv_unsupported("ibv_create_qp_ex with these attributes");
        errno = EOPNOTSUPP;
        return NULL;
    }
    ibqp = ibv_create_qp(a->pd, (struct ibv_qp_init_attr *)a);
    if (ibqp && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && hv_qp_ex_init((HvQp *)ibqp)) {
        ibv_destroy_qp(ibqp);
        errno = ENOMEM;
        return NULL;
    }
    return ibqp;
}

/* The IBVERBS_1.1 defaults of the names hv-compat.c refuses at IBVERBS_1.0. */
HV_DEFAULT_VERSION(ibv_attach_mcast);
HV_DEFAULT_VERSION(ibv_create_qp);
HV_DEFAULT_VERSION(ibv_destroy_qp);
HV_DEFAULT_VERSION(ibv_detach_mcast);
HV_DEFAULT_VERSION(ibv_modify_qp);
HV_DEFAULT_VERSION(ibv_query_qp);
