/* libhotmig-verbs, objects layer: shared receive queues. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hv_srq_make(HvSrq *srq)
{
    struct ibv_srq_init_attr a = srq->init;

    a.srq_context = srq;
    srq->phys = hv_real.r_ibv_create_srq(srq->pd->phys, &a);
    return srq->phys ? 0 : (errno ? errno : EIO);
}

HV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *attr)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvSrq *srq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_create_srq(ibpd, attr);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    srq = calloc(1, sizeof(*srq));
    if (!srq)
        return NULL;
    srq->pd = (HvPd *)ibpd;
    srq->init = *attr;
    r = hv_srq_make(srq);
    if (r) {
        free(srq);
        errno = r;
        return NULL;
    }
    /* the device's actual sizes, as the real call reports them */
    hv_real.r_ibv_query_srq(srq->phys, &attr->attr);
    if (hv_recvs_reserve(&srq->recvs, &srq->xr, attr->attr.max_wr, attr->attr.max_sge))
        hv_log("SRQ: no memory to record and translate its receives ahead: its posts allocate");
    pthread_mutex_init(&srq->lock, NULL);
    srq->pub.context = &ctx->vctx.context;
    srq->pub.srq_context = attr->srq_context;
    srq->pub.pd = ibpd;
    srq->pub.handle = srq->phys->handle;
    pthread_mutex_init(&srq->pub.mutex, NULL);
    pthread_cond_init(&srq->pub.cond, NULL);
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->srqs, srq);
    pthread_mutex_unlock(&hv.lock);
    return &srq->pub;
}

HV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *a, int mask)
{
    HvContext *ctx = HV_CTX(ibsrq);
    HvSrq *srq = (HvSrq *)ibsrq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_modify_srq(ibsrq, a, mask);
    if (hv_wait_phys(ctx))
        return ENODEV;
    /* its twin too while QPs of it run on the standby device (hv-standby.c) */
    r = srq->phys ? hv_real.r_ibv_modify_srq(srq->phys, a, mask) : 0;
    if (!r && srq->sb)
        r = hv_real.r_ibv_modify_srq(srq->sb, a, mask);
    if (!r && (mask & IBV_SRQ_LIMIT))
        srq->init.attr.srq_limit = a->srq_limit;
    if (!r && (mask & IBV_SRQ_MAX_WR))
        srq->init.attr.max_wr = a->max_wr;
    return r;
}

HV_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *a)
{
    HvContext *ctx = HV_CTX(ibsrq);
    HvSrq *srq;

    if (!ctx)
        return hv_real.r_ibv_query_srq(ibsrq, a);
    if (hv_wait_phys(ctx))
        return ENODEV;
    srq = (HvSrq *)ibsrq;
    return hv_real.r_ibv_query_srq(srq->phys ? srq->phys : srq->sb, a);
}

HV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
    HvContext *ctx = HV_CTX(ibsrq);
    HvSrq *srq = (HvSrq *)ibsrq;
    int r;

    if (!ctx)
        return hv_real.r_ibv_destroy_srq(ibsrq);
    HV_DESTROY(ctx, ctx->srqs, srq, hv_real.r_ibv_destroy_srq, r);
    if (r)
        return r;
    if (srq->sb) /* its QPs are gone: so is the standby path's use of it */
        hv_real.r_ibv_destroy_srq(srq->sb);
    hv_fifo_free(&srq->sb_recvs);
    hv_fifo_free(&srq->recvs);
    hv_scratch_free(&srq->xr);
    free(srq);
    return 0;
}

/* The IBVERBS_1.1 defaults of the names hv-compat.c refuses at IBVERBS_1.0. */
HV_DEFAULT_VERSION(ibv_create_srq);
HV_DEFAULT_VERSION(ibv_destroy_srq);
HV_DEFAULT_VERSION(ibv_modify_srq);
HV_DEFAULT_VERSION(ibv_query_srq);
