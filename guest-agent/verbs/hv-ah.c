/* libhotmig-verbs, objects layer: address handles. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

HV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *ibpd, struct ibv_ah_attr *attr)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvAh *ah;

    if (!ctx)
        return hv_real.r_ibv_create_ah(ibpd, attr);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    ah = calloc(1, sizeof(*ah));
    if (!ah)
        return NULL;
    ah->pd = (HvPd *)ibpd;
    ah->attr = *attr;
    ah->peer_known = hv_av_peer(ctx, attr, &ah->peer);
    if (!ah->peer_known) {
        hv_log("UD: an address handle to LID %u, a port the agents' directory does not know: "
               "datagrams through it do not follow its peer when it moves",
               attr->dlid);
        hv_unsupported("an address handle to a LID the agents' directory does not know");
    }
    ah->phys = hv_real.r_ibv_create_ah(ah->pd->phys, attr);
    if (!ah->phys) {
        int e = errno;
        free(ah);
        errno = e;
        return NULL;
    }
    ah->pub.context = &ctx->vctx.context;
    ah->pub.pd = ibpd;
    ah->pub.handle = ah->phys->handle;
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->ahs, ah);
    pthread_mutex_unlock(&hv.lock);
    return &ah->pub;
}

HV_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
    HvContext *ctx = HV_CTX(ibah);
    HvAh *ah = (HvAh *)ibah;
    int r;

    if (!ctx)
        return hv_real.r_ibv_destroy_ah(ibah);
    if (ah->stale)
        hv_real.r_ibv_destroy_ah(ah->stale);
    ah->stale = NULL;
    HV_DESTROY(ctx, ctx->ahs, ah, hv_real.r_ibv_destroy_ah, r);
    if (!r)
        free(ah);
    return r;
}

HV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t port, struct ibv_wc *wc,
                                  struct ibv_grh *grh, struct ibv_ah_attr *a)
{
    HV_PHYS_CTX(c, hv_real.r_ibv_init_ah_from_wc(c, port, wc, grh, a));
    return hv_real.r_ibv_init_ah_from_wc(ctx->phys, port, wc, grh, a);
}

HV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
                                               struct ibv_grh *grh, uint8_t port)
{
    struct ibv_ah_attr a;

    if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &a))
        return NULL;
    return ibv_create_ah(pd, &a);
}

/* The IBVERBS_1.1 defaults of the names hv-compat.c refuses at IBVERBS_1.0. */
HV_DEFAULT_VERSION(ibv_create_ah);
HV_DEFAULT_VERSION(ibv_destroy_ah);
