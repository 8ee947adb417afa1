/* libhotmig-verbs, objects layer: protection domains and memory regions (virtual keys). */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* verbs.h turns these into inline wrappers; the layer defines the symbols themselves. */
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

HV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
    HvContext *ctx = hv_ctx_of(c);
    HvPd *pd;

    if (!ctx)
        return hv_real.r_ibv_alloc_pd(c);
    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    pd = calloc(1, sizeof(*pd));
    if (!pd)
        return NULL;
    pd->phys = hv_real.r_ibv_alloc_pd(ctx->phys);
    if (!pd->phys) {
        free(pd);
        return NULL;
    }
    pd->ctx = ctx;
    pd->pub.context = c;
    pd->pub.handle = pd->phys->handle;
    pthread_mutex_lock(&hv.lock);
    HV_LINK(ctx->pds, pd);
    pthread_mutex_unlock(&hv.lock);
    return &pd->pub;
}

HV_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvPd *pd = (HvPd *)ibpd;
    int r;

    if (!ctx)
        return hv_real.r_ibv_dealloc_pd(ibpd);
    HV_DESTROY(ctx, ctx->pds, pd, hv_real.r_ibv_dealloc_pd, r);
    if (!r && pd->sb) /* its standby twin (hv-standby.c) */
        hv_real.r_ibv_dealloc_pd(pd->sb);
    if (!r)
        free(pd);
    return r;
}

/* A virtual key for @phys that no live virtual key of @ctx uses. */
static uint32_t hv_key_pick(HvContext *ctx, uint32_t phys, HvMr *self)
{
    static uint32_t next_synth = 0xf0000000u;
    uint32_t v = phys;

    for (;;) {
        int clash = 0;

        for (HvMr *m = ctx->mrs; m; m = m->next)
            if (m != self && (m->pub.lkey == v || m->pub.rkey == v))
                clash = 1;
        if (!clash)
            return v;
        v = next_synth++;
    }
}

/* Gives @mr the virtual keys of its physical MR (synthetic ones on a clash), maps them. */
static void hv_mr_keys(HvContext *ctx, HvMr *mr)
{
    mr->pub.lkey = hv_key_pick(ctx, mr->phys->lkey, mr);
    mr->pub.rkey =
        mr->phys->rkey == mr->phys->lkey ? mr->pub.lkey : hv_key_pick(ctx, mr->phys->rkey, mr);
    if (mr->pub.lkey != mr->phys->lkey || mr->pub.rkey != mr->phys->rkey)
        hv_log("memory region %p got synthetic keys l=0x%x r=0x%x (physical l=0x%x r=0x%x)",
               mr->pub.addr, mr->pub.lkey, mr->pub.rkey, mr->phys->lkey, mr->phys->rkey);
    hv_map_put(&ctx->lkey, mr->pub.lkey, mr->phys->lkey);
}

static struct ibv_mr *hv_reg(struct ibv_pd *ibpd, void *addr, size_t len, uint64_t iova,
                             unsigned access, int kind)
{
    HvContext *ctx = HV_CTX(ibpd);
    HvPd *pd = (HvPd *)ibpd;
    HvMr *mr;

    if (hv_wait_phys(ctx)) {
        errno = ENODEV;
        return NULL;
    }
    mr = calloc(1, sizeof(*mr));
    if (!mr)
        return NULL;
    mr->phys = kind ? hv_real.r_ibv_reg_mr_iova2(pd->phys, addr, len, iova, access)
                    : hv_real.r_ibv_reg_mr(pd->phys, addr, len, (int)access);
    if (!mr->phys) {
        free(mr);
        return NULL;
    }
    mr->pd = pd;
    mr->iova = iova;
    mr->access = (int)access;
    mr->kind = kind;
    mr->pub = *mr->phys;
    mr->pub.context = &ctx->vctx.context;
    mr->pub.pd = ibpd;
    pthread_mutex_lock(&hv.lock);
    pthread_mutex_lock(&ctx->lock);
    hv_mr_keys(ctx, mr);
    HV_LINK(ctx->mrs, mr);
    pthread_mutex_unlock(&ctx->lock);
    hv_sb_mr_reg(mr); /* a QP of its PD runs on the standby device: registered there too */
    pthread_mutex_unlock(&hv.lock);
    if (mr->pub.rkey != mr->phys->rkey &&
        (access & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)))
        hv_keymap_push(ctx, mr->pub.rkey, mr->phys->rkey); /* before ibv_reg_mr returns */
    return &mr->pub;
}

HV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    if (!HV_CTX(pd))
        return hv_real.r_ibv_reg_mr(pd, addr, len, access);
    return hv_reg(pd, addr, len, (uintptr_t)addr, (unsigned)access, 0);
}

HV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                         int access)
{
    if (!HV_CTX(pd))
        return hv_real.r_ibv_reg_mr_iova(pd, addr, len, iova, access);
    return hv_reg(pd, addr, len, iova, (unsigned)access, 1);
}

HV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                          unsigned int access)
{
    if (!HV_CTX(pd))
        return hv_real.r_ibv_reg_mr_iova2(pd, addr, len, iova, access);
    return hv_reg(pd, addr, len, iova, access, 1);
}

HV_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
    HvContext *ctx = HV_CTX(ibmr);
    HvMr *mr = (HvMr *)ibmr;
    int r = 0;

    if (!ctx)
        return hv_real.r_ibv_dereg_mr(ibmr);
    hv_wait_phys(ctx);
    pthread_mutex_lock(&hv.lock);
    hv_sb_mr_dereg(mr);
    if (mr->phys)
        r = hv_real.r_ibv_dereg_mr(mr->phys);
    if (!r) {
        pthread_mutex_lock(&ctx->lock);
        hv_map_del(&ctx->lkey, mr->pub.lkey);
        HV_UNLINK(ctx->mrs, mr);
        pthread_mutex_unlock(&ctx->lock);
    }
    pthread_mutex_unlock(&hv.lock);
    if (!r)
        free(mr);
    return r;
}

/* The IBVERBS_1.1 defaults of the names hv-compat.c refuses at IBVERBS_1.0. */
HV_DEFAULT_VERSION(ibv_alloc_pd);
HV_DEFAULT_VERSION(ibv_dealloc_pd);
HV_DEFAULT_VERSION(ibv_dereg_mr);
HV_DEFAULT_VERSION(ibv_reg_mr);
