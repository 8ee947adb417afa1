/* libhm-ib-emu.so: the lab's InfiniBand port on soft-RoCE (docs/lab.md, "InfiniBand fabric
 * mode"). Lab-only: built for the lab's guests, never packaged.
 *
 * Preloaded in every process of an IB-mode guest through /etc/ld.so.preload, so it comes after
 * anything in LD_PRELOAD (the hotmig verbs layer finds these functions as its "real" ones with
 * dlvsym(RTLD_NEXT)) and before libibverbs: it wraps the rxe provider's answers and address
 * vectors, below every verbs user.
 *
 *   ibv_query_port      link layer InfiniBand; LID, SM LID and state from the LID the SM gave
 *                       the port (the port's 198.18.x.y GID, ib-emu.h); INIT until it has one;
 *                       one GID, no RoCE flags. Both the context's query_port op (what the
 *                       inline ibv_query_port calls) and the exported compat call.
 *   ibv_query_gid(_ex, _table)   one GID: index 0 = fe80::/64 + the port GUID.
 *   ibv_get_device_guid, ibv_query_device(_ex)   the node GUID.
 *                       The GUIDs are the VF's, which hotmigd set and the SM handed to the
 *                       guest's SMA (HM_IB_RUN_DIR/DEV/node_guid, port_guid: ib-emu.h); without
 *                       them both are rxe's node GUID, the EUI-64 of the VF stand-in's MAC.
 *   ibv_modify_qp, ibv_create_ah   an address vector's DLID becomes a GRH to the address of
 *                       that LID, sourced from the port's own LID address; a GRH the program
 *                       gave keeps its traffic class and flow label, its DGID does not route.
 *   ibv_query_qp        the program's own address vector back.
 *   ibv_poll_cq         wc.slid of RC/UC receives: the LID the QP was connected to.
 *   ibv_init_ah_from_wc an AH to wc.slid, without GRH (the emulation delivers none).
 *   ibv_get_async_event the GID change that the SM's LID assignment causes is reported as
 *                       IBV_EVENT_PORT_ACTIVE once the port has its LID.
 * Everything else goes straight to libibverbs. A call made while this library is inside a
 * libibverbs function (the rxe provider queries GIDs in create_ah) is not rewritten.
 * HM_IB_EMU=0 turns it off in a process; HM_IB_EMU_DEBUG=1 logs each mapping on stderr.
 */
#include "ib-emu.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>

#undef ibv_query_port

#define EXPORT __attribute__((visibility("default")))
#define EMU_CTX_MAX 64
#define EMU_QP_SLOTS 4096
#define EMU_GID_SCAN_MAX 64

typedef int (*QueryPortFn)(struct ibv_context *, uint8_t, struct ibv_port_attr *, size_t);
typedef int (*PollCqFn)(struct ibv_cq *, int, struct ibv_wc *);
typedef int (*QueryDeviceExFn)(struct ibv_context *, const struct ibv_query_device_ex_input *,
                               struct ibv_device_attr_ex *, size_t);

typedef struct {
    struct ibv_context *ctx; /* NULL: free */
    QueryPortFn query_port;
    PollCqFn poll_cq;
    QueryDeviceExFn query_device_ex; /* NULL: the provider has none */
} EmuCtx;

typedef struct {
    int used;
    uint32_t qpn;
    struct ibv_context *ctx;
    struct ibv_ah_attr app; /* the program's address vector */
} EmuQp;

static pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
static EmuCtx emu_ctxs[EMU_CTX_MAX];
static EmuQp emu_qps[EMU_QP_SLOTS];
static __thread int emu_in_real;

/* ---- the real functions --------------------------------------------------------------------- */

static void emu_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void emu_debug(const char *fmt, ...)
{
    static int on = -1;
    va_list ap;

    if (on < 0) {
        const char *v = getenv("HM_IB_EMU_DEBUG");

        on = v && v[0] == '1';
    }
    if (!on)
        return;
    va_start(ap, fmt);
    fputs("hm-ib-emu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* libibverbs' @name@@@version: after this library in the global scope, or, when libibverbs was
 * loaded RTLD_LOCAL (UCX dlopens it), on the copy already loaded. */
static void *emu_real(const char *name, const char *version)
{
    void *fn = dlvsym(RTLD_NEXT, name, version);

    if (!fn) {
        void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);

        if (!h)
            h = dlopen("libibverbs.so.1", RTLD_NOW);
        if (h)
            fn = dlvsym(h, name, version);
    }
    if (!fn) {
        fprintf(stderr, "hm-ib-emu: libibverbs has no %s@%s\n", name, version);
        abort();
    }
    return fn;
}

#define REAL(fn, version)                                                                         \
    ({                                                                                            \
        static __typeof__(fn) *real_;                                                             \
        if (!real_)                                                                               \
            real_ = (__typeof__(fn) *)emu_real(#fn, version);                                     \
        real_;                                                                                    \
    })

/* Calls libibverbs' @fn with the rewriting off on this thread (libibverbs and the provider
 * call the exported functions themselves). */
#define CALL_REAL(fn, version, ...)                                                               \
    ({                                                                                            \
        __typeof__(fn) *f_ = REAL(fn, version);                                                   \
        emu_in_real++;                                                                            \
        __auto_type r_ = f_(__VA_ARGS__);                                                         \
        emu_in_real--;                                                                            \
        r_;                                                                                       \
    })

/* ---- emulated contexts -------------------------------------------------------------------- */

static EmuCtx *emu_ctx_find(const struct ibv_context *ctx)
{
    if (!ctx)
        return NULL;
    for (int i = 0; i < EMU_CTX_MAX; i++)
        if (__atomic_load_n(&emu_ctxs[i].ctx, __ATOMIC_ACQUIRE) == ctx)
            return &emu_ctxs[i];
    return NULL;
}

/* Whether @ctx is an emulated IB port and the call is the program's (not libibverbs' own). */
static int emu_on(const struct ibv_context *ctx)
{
    return !emu_in_real && emu_ctx_find(ctx) != NULL;
}

static int emu_wanted(struct ibv_device *dev)
{
    const char *off = getenv("HM_IB_EMU");

    return !(off && off[0] == '0') && dev && strncmp(dev->name, "rxe", 3) == 0;
}

/* The port's own LID (and the index of the GID that carries it), 0 while the SM gave it none. */
static uint16_t emu_own_lid(struct ibv_context *ctx, uint8_t port, int *ret_index)
{
    struct ibv_gid_entry e[EMU_GID_SCAN_MAX];
    ssize_t n = CALL_REAL(_ibv_query_gid_table, "IBVERBS_1.11", ctx, e, EMU_GID_SCAN_MAX, 0,
                          sizeof(e[0]));

    if (n < 0) {
        /* No GID table query: look at the first entries one by one. */
        n = 0;
        for (uint32_t i = 0; i < 16; i++)
            if (CALL_REAL(_ibv_query_gid_ex, "IBVERBS_1.11", ctx, port, i, &e[n], 0,
                          sizeof(e[0])) == 0)
                n++;
    }
    for (ssize_t i = 0; i < n; i++) {
        uint16_t lid = hm_ib_gid_to_lid(e[i].gid.raw);

        if (lid && e[i].port_num == port && e[i].gid_type == IBV_GID_TYPE_ROCE_V2) {
            if (ret_index)
                *ret_index = (int)e[i].gid_index;
            return lid;
        }
    }
    return 0;
}

/* The VF's GUID @name ("node_guid", "port_guid") the SMA wrote for @dev: 0, or -1 when it
 * wrote none (the port keeps rxe's). */
static int emu_vf_guid(const struct ibv_device *dev, const char *name, uint64_t *ret)
{
    char path[256], text[32];
    FILE *f;
    int ok;

    snprintf(path, sizeof(path), "%s/%s/%s", HM_IB_RUN_DIR, dev->name, name);
    f = fopen(path, "re");
    if (!f)
        return -1;
    ok = fgets(text, sizeof(text), f) != NULL;
    fclose(f);
    return ok ? hm_ib_guid_parse(text, ret) : -1;
}

/* The node GUID (network order): the VF's, else rxe's. */
static __be64 emu_node_guid(struct ibv_device *dev)
{
    uint64_t g;

    if (emu_vf_guid(dev, "node_guid", &g) == 0)
        return __builtin_bswap64(g);
    return CALL_REAL(ibv_get_device_guid, "IBVERBS_1.1", dev);
}

/* The port's GID 0: the subnet prefix and the port GUID (the VF's, else rxe's node GUID). */
static void emu_gid0(struct ibv_context *ctx, union ibv_gid *gid)
{
    uint64_t g;
    __be64 guid = emu_vf_guid(ctx->device, "port_guid", &g) == 0
                      ? __builtin_bswap64(g)
                      : CALL_REAL(ibv_get_device_guid, "IBVERBS_1.1", ctx->device);
    uint64_t prefix = __builtin_bswap64(HM_IB_SUBNET_PREFIX);

    memcpy(gid->raw, &prefix, 8);
    memcpy(gid->raw + 8, &guid, 8);
}

/* Rewrites what rxe said of a port as the IB port the SM configured. @full: the caller's struct
 * has the fields after link_layer (not the compat one). */
static void emu_port_fix(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a, int full)
{
    uint16_t lid;

    if (a->link_layer != IBV_LINK_LAYER_ETHERNET)
        return;
    lid = emu_own_lid(ctx, port, NULL);
    a->link_layer = IBV_LINK_LAYER_INFINIBAND;
    if (a->state == IBV_PORT_ACTIVE && !lid)
        a->state = IBV_PORT_INIT;
    a->lid = a->state == IBV_PORT_ACTIVE ? lid : 0;
    a->sm_lid = a->lid ? HM_IB_SM_LID : 0;
    a->lmc = 0;
    a->sm_sl = 0;
    a->subnet_timeout = 18;
    a->gid_tbl_len = 1;
    a->port_cap_flags &= ~(uint32_t)IBV_PORT_IP_BASED_GIDS;
    if (full)
        a->flags = 0; /* not IBV_QPF_GRH_REQUIRED: IB routes by LID */
}

static int emu_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a,
                          size_t len)
{
    EmuCtx *e = emu_ctx_find(ctx);
    int r;

    if (!e)
        return EINVAL;
    r = e->query_port(ctx, port, a, len);
    if (r == 0 && !emu_in_real)
        emu_port_fix(ctx, port, a, len >= sizeof(*a));
    return r;
}

static int emu_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
                               struct ibv_device_attr_ex *attr, size_t len)
{
    EmuCtx *e = emu_ctx_find(ctx);
    int r;

    if (!e || !e->query_device_ex)
        return EOPNOTSUPP;
    r = e->query_device_ex(ctx, in, attr, len);
    if (r == 0 && !emu_in_real)
        attr->orig_attr.node_guid = emu_node_guid(ctx->device);
    return r;
}

/* ---- the LID routes ----------------------------------------------------------------------- */

/* Turns @ah (the program's address vector) into what rxe needs: a GRH to the address of its
 * DLID, from the port's own LID address. 0 or an errno. */
static int emu_av_map(struct ibv_context *ctx, uint8_t port, struct ibv_ah_attr *ah)
{
    int sgid_index = -1;
    uint16_t own;
    uint8_t tc = 0;
    uint32_t flow = 0;

    if (ah->port_num)
        port = ah->port_num;
    own = emu_own_lid(ctx, port ? port : 1, &sgid_index);
    if (!own) {
        emu_debug("port %u has no LID (not ACTIVE): cannot route to LID 0x%04x", port, ah->dlid);
        return ENETDOWN;
    }
    if (ah->dlid == 0 || ah->dlid > HM_IB_LID_MAX) {
        emu_debug("DLID 0x%04x is not a unicast LID", ah->dlid);
        return EINVAL;
    }
    if (ah->is_global) {
        tc = ah->grh.traffic_class;
        flow = ah->grh.flow_label;
    }
    ah->is_global = 1;
    hm_ib_lid_to_gid(ah->dlid, ah->grh.dgid.raw);
    ah->grh.sgid_index = (uint8_t)sgid_index;
    ah->grh.hop_limit = 64;
    ah->grh.traffic_class = tc;
    ah->grh.flow_label = flow;
    emu_debug("LID 0x%04x -> 0x%04x (GID index %d)", own, ah->dlid, sgid_index);
    return 0;
}

static EmuQp *emu_qp_slot(uint32_t qpn, struct ibv_context *ctx, int add)
{
    for (unsigned i = 0; i < EMU_QP_SLOTS; i++) {
        EmuQp *q = &emu_qps[(qpn + i) % EMU_QP_SLOTS];

        if (q->used && q->qpn == qpn && q->ctx == ctx)
            return q;
        if (!q->used) {
            if (!add)
                return NULL;
            q->used = 1;
            q->qpn = qpn;
            q->ctx = ctx;
            return q;
        }
    }
    return NULL;
}

static uint16_t emu_qp_peer_lid(uint32_t qpn, struct ibv_context *ctx)
{
    uint16_t lid = 0;
    EmuQp *q;

    pthread_mutex_lock(&emu_lock);
    q = emu_qp_slot(qpn, ctx, 0);
    if (q)
        lid = q->app.dlid;
    pthread_mutex_unlock(&emu_lock);
    return lid;
}

/* Removes @qpn's record, moving the entries after it that probed past its slot. */
static void emu_qp_forget(uint32_t qpn, struct ibv_context *ctx)
{
    unsigned i, j;

    pthread_mutex_lock(&emu_lock);
    for (i = qpn % EMU_QP_SLOTS; emu_qps[i].used; i = (i + 1) % EMU_QP_SLOTS)
        if (emu_qps[i].qpn == qpn && emu_qps[i].ctx == ctx)
            break;
    if (emu_qps[i].used) {
        emu_qps[i].used = 0;
        for (j = (i + 1) % EMU_QP_SLOTS; emu_qps[j].used; j = (j + 1) % EMU_QP_SLOTS) {
            EmuQp q = emu_qps[j];

            emu_qps[j].used = 0;
            *emu_qp_slot(q.qpn, q.ctx, 1) = q;
        }
    }
    pthread_mutex_unlock(&emu_lock);
}

static int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    EmuCtx *e = emu_ctx_find(cq->context);
    int r;

    if (!e)
        return -1;
    r = e->poll_cq(cq, n, wc);
    for (int i = 0; i < r; i++) {
        uint16_t lid;

        if (wc[i].status != IBV_WC_SUCCESS || !(wc[i].opcode & IBV_WC_RECV))
            continue;
        lid = emu_qp_peer_lid(wc[i].qp_num, cq->context);
        if (lid)
            wc[i].slid = lid;
    }
    return r;
}

/* ---- exports ------------------------------------------------------------------------------ */

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    struct ibv_context *ctx = CALL_REAL(ibv_open_device, "IBVERBS_1.1", dev);
    struct verbs_context *vctx;

    if (!ctx || !emu_wanted(dev))
        return ctx;
    vctx = verbs_get_ctx(ctx);
    if (!vctx || !vctx->query_port) {
        emu_debug("%s: no extended context, left as it is", dev->name);
        return ctx;
    }
    pthread_mutex_lock(&emu_lock);
    for (int i = 0; i < EMU_CTX_MAX; i++) {
        EmuCtx *e = &emu_ctxs[i];

        if (e->ctx)
            continue;
        e->query_port = vctx->query_port;
        e->poll_cq = ctx->ops.poll_cq;
        e->query_device_ex = verbs_get_ctx_op(ctx, query_device_ex) ? vctx->query_device_ex : NULL;
        __atomic_store_n(&e->ctx, ctx, __ATOMIC_RELEASE);
        vctx->query_port = emu_query_port;
        if (e->query_device_ex)
            vctx->query_device_ex = emu_query_device_ex;
        ctx->ops.poll_cq = emu_poll_cq;
        break;
    }
    pthread_mutex_unlock(&emu_lock);
    if (!emu_ctx_find(ctx))
        fprintf(stderr, "hm-ib-emu: more than %d devices open: %s is left RoCE\n", EMU_CTX_MAX,
                dev->name);
    return ctx;
}

EXPORT int ibv_close_device(struct ibv_context *ctx)
{
    EmuCtx *e = emu_ctx_find(ctx);

    if (e) {
        pthread_mutex_lock(&emu_lock);
        for (unsigned i = 0; i < EMU_QP_SLOTS; i++)
            if (emu_qps[i].used && emu_qps[i].ctx == ctx)
                emu_qps[i].used = 0;
        /* Entries of other contexts may now sit past a hole: place them again. */
        for (unsigned i = 0; i < EMU_QP_SLOTS; i++) {
            if (emu_qps[i].used) {
                EmuQp q = emu_qps[i];

                emu_qps[i].used = 0;
                *emu_qp_slot(q.qpn, q.ctx, 1) = q;
            }
        }
        __atomic_store_n(&e->ctx, NULL, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&emu_lock);
    }
    return CALL_REAL(ibv_close_device, "IBVERBS_1.1", ctx);
}

EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *a)
{
    int on = emu_on(ctx);
    int r = CALL_REAL(ibv_query_port, "IBVERBS_1.1", ctx, port, a);

    if (r == 0 && on)
        emu_port_fix(ctx, port, (struct ibv_port_attr *)a, 0);
    return r;
}

EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
    if (emu_in_real || !emu_wanted(dev))
        return CALL_REAL(ibv_get_device_guid, "IBVERBS_1.1", dev);
    return emu_node_guid(dev);
}

EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
    int on = emu_on(ctx);
    int r = CALL_REAL(ibv_query_device, "IBVERBS_1.1", ctx, attr);

    if (r == 0 && on)
        attr->node_guid = emu_node_guid(ctx->device);
    return r;
}

EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    if (!emu_on(ctx))
        return CALL_REAL(ibv_query_gid, "IBVERBS_1.1", ctx, port, index, gid);
    if (index != 0 || port != 1) {
        errno = EINVAL;
        return -1;
    }
    emu_gid0(ctx, gid);
    return 0;
}

EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
                             struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    struct ibv_gid_entry e = {0};

    if (!emu_on(ctx))
        return CALL_REAL(_ibv_query_gid_ex, "IBVERBS_1.11", ctx, port, index, entry, flags,
                         entry_size);
    if (index != 0 || port != 1 || flags || entry_size < sizeof(e))
        return EINVAL;
    emu_gid0(ctx, &e.gid);
    e.gid_index = 0;
    e.port_num = port;
    e.gid_type = IBV_GID_TYPE_IB;
    e.ndev_ifindex = 0;
    memcpy(entry, &e, sizeof(e));
    return 0;
}

EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
                                    size_t max_entries, uint32_t flags, size_t entry_size)
{
    int r;

    if (!emu_on(ctx))
        return CALL_REAL(_ibv_query_gid_table, "IBVERBS_1.11", ctx, entries, max_entries, flags,
                         entry_size);
    if (max_entries < 1)
        return -EINVAL;
    r = _ibv_query_gid_ex(ctx, 1, 0, entries, flags, entry_size);
    return r ? -r : 1;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    struct ibv_qp_attr a;
    int r;

    if (!emu_on(qp->context) || !(mask & (IBV_QP_AV | IBV_QP_ALT_PATH)))
        return CALL_REAL(ibv_modify_qp, "IBVERBS_1.1", qp, attr, mask);
    a = *attr;
    if ((mask & IBV_QP_AV) &&
        (r = emu_av_map(qp->context, (mask & IBV_QP_PORT) ? attr->port_num : 1, &a.ah_attr)))
        return r;
    if ((mask & IBV_QP_ALT_PATH) && (r = emu_av_map(qp->context, attr->alt_port_num, &a.alt_ah_attr)))
        return r;
    r = CALL_REAL(ibv_modify_qp, "IBVERBS_1.1", qp, &a, mask);
    if (r == 0 && (mask & IBV_QP_AV)) {
        EmuQp *q;

        pthread_mutex_lock(&emu_lock);
        q = emu_qp_slot(qp->qp_num, qp->context, 1);
        if (q)
            q->app = attr->ah_attr;
        pthread_mutex_unlock(&emu_lock);
    }
    return r;
}

EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                        struct ibv_qp_init_attr *init_attr)
{
    int on = emu_on(qp->context);
    int r = CALL_REAL(ibv_query_qp, "IBVERBS_1.1", qp, attr, mask, init_attr);

    if (r == 0 && on && (mask & IBV_QP_AV)) {
        EmuQp *q;

        pthread_mutex_lock(&emu_lock);
        q = emu_qp_slot(qp->qp_num, qp->context, 0);
        if (q)
            attr->ah_attr = q->app;
        pthread_mutex_unlock(&emu_lock);
    }
    return r;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
    uint32_t qpn = qp->qp_num;
    struct ibv_context *ctx = qp->context;
    int on = emu_on(ctx);
    int r = CALL_REAL(ibv_destroy_qp, "IBVERBS_1.1", qp);

    if (r == 0 && on)
        emu_qp_forget(qpn, ctx);
    return r;
}

EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    struct ibv_ah_attr a;
    int r;

    if (!emu_on(pd->context))
        return CALL_REAL(ibv_create_ah, "IBVERBS_1.1", pd, attr);
    a = *attr;
    if ((r = emu_av_map(pd->context, 1, &a))) {
        errno = r;
        return NULL;
    }
    return CALL_REAL(ibv_create_ah, "IBVERBS_1.1", pd, &a);
}

EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
                               struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
    if (!emu_on(ctx))
        return CALL_REAL(ibv_init_ah_from_wc, "IBVERBS_1.1", ctx, port, wc, grh, ah);
    memset(ah, 0, sizeof(*ah));
    ah->dlid = wc->slid;
    ah->sl = wc->sl;
    ah->src_path_bits = wc->dlid_path_bits;
    ah->port_num = port;
    return 0;
}

EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
    int on = emu_on(ctx);
    int r = CALL_REAL(ibv_get_async_event, "IBVERBS_1.1", ctx, event);

    if (r == 0 && on && event->event_type == IBV_EVENT_GID_CHANGE &&
        emu_own_lid(ctx, (uint8_t)event->element.port_num, NULL)) {
        emu_debug("GID change on port %d with a LID: PORT_ACTIVE", event->element.port_num);
        event->event_type = IBV_EVENT_PORT_ACTIVE;
    }
    return r;
}
