/* hm-pingpong verbs adapter (see wl-verbs.h). */
#include "tests/workload/wl-verbs.h"

#include "tests/workload/wl-log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define WL_WRID_RECV 1
#define WL_WRID_SEND 2
#define WL_CQ_DEPTH 8

struct WlVerbs {
    char name[WL_DEV_NAME_MAX];
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_comp_channel *channel;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    uint8_t *buf; /* [0, size) send, [size, 2 size) receive */
    size_t size;
    uint8_t port;
    int gid_index;
    int is_global; /* RoCE: always route with the GRH */
    union ibv_gid gid;
    char gid_str[INET6_ADDRSTRLEN];
    uint16_t lid;
    enum ibv_mtu mtu;
    uint32_t psn;
};

static int neg_errno(int fallback)
{
    return errno > 0 ? -errno : -fallback;
}

/* libibverbs returns errno values directly from most calls. */
static int neg_ret(int ret)
{
    return ret > 0 ? -ret : (ret < 0 ? ret : -EIO);
}

static int set_fd_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        return -errno;
    }
    fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
        return -errno;
    }
    return 0;
}

static uint32_t mtu_bytes(enum ibv_mtu mtu)
{
    switch (mtu) {
    case IBV_MTU_256:
        return 256;
    case IBV_MTU_512:
        return 512;
    case IBV_MTU_1024:
        return 1024;
    case IBV_MTU_2048:
        return 2048;
    case IBV_MTU_4096:
        return 4096;
    }
    return 1024;
}

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
    switch (bytes) {
    case 256:
        return IBV_MTU_256;
    case 512:
        return IBV_MTU_512;
    case 2048:
        return IBV_MTU_2048;
    case 4096:
        return IBV_MTU_4096;
    default:
        return IBV_MTU_1024;
    }
}

/* First ACTIVE port of @ctx, or 0. */
static uint8_t first_active_port(struct ibv_context *ctx, struct ibv_port_attr *ret_attr)
{
    struct ibv_device_attr dattr;
    if (ibv_query_device(ctx, &dattr) != 0) {
        return 0;
    }
    for (int p = 1; p <= dattr.phys_port_cnt && p <= 255; p++) {
        struct ibv_port_attr pattr;
        if (ibv_query_port(ctx, (uint8_t)p, &pattr) == 0 && pattr.state == IBV_PORT_ACTIVE) {
            if (ret_attr) {
                *ret_attr = pattr;
            }
            return (uint8_t)p;
        }
    }
    return 0;
}

int wl_verbs_find_active(const char *want, char *ret_name, size_t len)
{
    int num = 0;
    int ret = -ENODEV;
    struct ibv_device **list = ibv_get_device_list(&num);

    if (!list) {
        return neg_errno(ENODEV);
    }
    for (int i = 0; i < num && ret == -ENODEV; i++) {
        const char *name = ibv_get_device_name(list[i]);
        if (!name || (want && *want && strcmp(want, name) != 0)) {
            continue;
        }
        struct ibv_context *ctx = ibv_open_device(list[i]);
        if (!ctx) {
            continue;
        }
        if (first_active_port(ctx, NULL) != 0 && strlen(name) < len && wl_dev_name_valid(name)) {
            snprintf(ret_name, len, "%s", name);
            ret = 0;
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    return ret;
}

static int is_ipv4_mapped(const union ibv_gid *gid)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

/* RoCE: the RoCE v2 GID that is an IPv4-mapped address of the interface; -EADDRNOTAVAIL when
 * there is none (is the interface up with an IPv4 address?). */
static int pick_roce_gid(WlVerbs *v, int gid_tbl_len)
{
    for (int i = 0; i < gid_tbl_len; i++) {
        struct ibv_gid_entry entry;
        if (ibv_query_gid_ex(v->ctx, v->port, (uint32_t)i, &entry, 0) != 0) {
            continue;
        }
        if (entry.gid_type != IBV_GID_TYPE_ROCE_V2) {
            continue;
        }
        memcpy(v->gid.raw, entry.gid.raw, sizeof(v->gid.raw));
        if (!is_ipv4_mapped(&v->gid)) {
            continue;
        }
        v->gid_index = i;
        return 0;
    }
    return -EADDRNOTAVAIL; /* quiet: the address may be on its way; the caller says it */
}

int wl_verbs_open(const char *want, size_t msg_size, WlVerbs **ret)
{
    struct ibv_device **list = NULL;
    struct ibv_port_attr pattr;
    int num = 0;
    int r;
    WlVerbs *v = calloc(1, sizeof(*v));

    if (!v) {
        return -ENOMEM;
    }
    v->size = msg_size;

    list = ibv_get_device_list(&num);
    if (!list) {
        r = neg_errno(ENODEV);
        wl_log("cannot list RDMA devices: %s", strerror(-r));
        goto fail;
    }
    /* One pass, one open: the device found with an ACTIVE port is the one used (a resume
     * does not open the new device twice). */
    for (int i = 0; i < num && !v->ctx; i++) {
        const char *name = ibv_get_device_name(list[i]);
        if (!name || !wl_dev_name_valid(name) || (want && *want && strcmp(want, name) != 0)) {
            continue;
        }
        v->ctx = ibv_open_device(list[i]);
        if (!v->ctx) {
            continue;
        }
        v->port = first_active_port(v->ctx, &pattr);
        if (v->port == 0) {
            ibv_close_device(v->ctx);
            v->ctx = NULL;
            continue;
        }
        snprintf(v->name, sizeof(v->name), "%s", name);
    }
    ibv_free_device_list(list);
    if (!v->ctx) {
        r = -ENODEV; /* not (yet): quiet, the caller retries */
        goto fail;
    }
    const char *dev = v->name;
    r = set_fd_flags(v->ctx->async_fd);
    if (r < 0) {
        wl_log("device '%s': cannot set flags on the async fd: %s", dev, strerror(-r));
        goto fail;
    }

    v->lid = pattr.lid;
    v->mtu = pattr.active_mtu;
    if (pattr.link_layer == IBV_LINK_LAYER_ETHERNET) {
        v->is_global = 1;
        r = pick_roce_gid(v, pattr.gid_tbl_len);
        if (r < 0) {
            goto fail;
        }
    } else {
        v->gid_index = 0;
        r = ibv_query_gid(v->ctx, v->port, 0, &v->gid);
        if (r != 0) {
            r = neg_ret(r);
            wl_log("device '%s': cannot read GID 0: %s", dev, strerror(-r));
            goto fail;
        }
    }
    if (!inet_ntop(AF_INET6, v->gid.raw, v->gid_str, sizeof(v->gid_str))) {
        snprintf(v->gid_str, sizeof(v->gid_str), "?");
    }

    v->pd = ibv_alloc_pd(v->ctx);
    if (!v->pd) {
        r = neg_errno(ENOMEM);
        wl_log("device '%s': ibv_alloc_pd failed: %s", dev, strerror(-r));
        goto fail;
    }
    v->buf = calloc(2, msg_size);
    if (!v->buf) {
        r = -ENOMEM;
        goto fail;
    }
    v->mr = ibv_reg_mr(v->pd, v->buf, 2 * msg_size, IBV_ACCESS_LOCAL_WRITE);
    if (!v->mr) {
        r = neg_errno(ENOMEM);
        wl_log("device '%s': ibv_reg_mr failed: %s", dev, strerror(-r));
        goto fail;
    }
    v->channel = ibv_create_comp_channel(v->ctx);
    if (!v->channel) {
        r = neg_errno(ENOMEM);
        wl_log("device '%s': ibv_create_comp_channel failed: %s", dev, strerror(-r));
        goto fail;
    }
    r = set_fd_flags(v->channel->fd);
    if (r < 0) {
        wl_log("device '%s': cannot set flags on the completion fd: %s", dev, strerror(-r));
        goto fail;
    }
    v->cq = ibv_create_cq(v->ctx, WL_CQ_DEPTH, NULL, v->channel, 0);
    if (!v->cq) {
        r = neg_errno(ENOMEM);
        wl_log("device '%s': ibv_create_cq failed: %s", dev, strerror(-r));
        goto fail;
    }
    r = ibv_req_notify_cq(v->cq, 0);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': ibv_req_notify_cq failed: %s", dev, strerror(-r));
        goto fail;
    }

    struct ibv_qp_init_attr qia = {
        .send_cq = v->cq,
        .recv_cq = v->cq,
        .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    v->qp = ibv_create_qp(v->pd, &qia);
    if (!v->qp) {
        r = neg_errno(ENOMEM);
        wl_log("device '%s': ibv_create_qp failed: %s", dev, strerror(-r));
        goto fail;
    }
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = v->port,
        .qp_access_flags = 0,
    };
    r = ibv_modify_qp(v->qp, &attr,
                      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': QP %u to INIT failed: %s", dev, v->qp->qp_num, strerror(-r));
        goto fail;
    }
    if (getrandom(&v->psn, sizeof(v->psn), 0) != (ssize_t)sizeof(v->psn)) {
        v->psn = (uint32_t)v->qp->qp_num * 2654435761u;
    }
    v->psn &= 0xffffff;
    r = wl_verbs_post_recv(v);
    if (r < 0) {
        goto fail;
    }
    *ret = v;
    return 0;

fail:
    wl_verbs_close(v);
    return r;
}

void wl_verbs_close(WlVerbs *v)
{
    int r;
    if (!v) {
        return;
    }
    if (v->qp && (r = ibv_destroy_qp(v->qp)) != 0) {
        wl_log("device '%s': ibv_destroy_qp failed: %s", v->name, strerror(-neg_ret(r)));
    }
    if (v->cq && (r = ibv_destroy_cq(v->cq)) != 0) {
        wl_log("device '%s': ibv_destroy_cq failed: %s", v->name, strerror(-neg_ret(r)));
    }
    if (v->channel && (r = ibv_destroy_comp_channel(v->channel)) != 0) {
        wl_log("device '%s': ibv_destroy_comp_channel failed: %s", v->name,
                     strerror(-neg_ret(r)));
    }
    if (v->mr && (r = ibv_dereg_mr(v->mr)) != 0) {
        wl_log("device '%s': ibv_dereg_mr failed: %s", v->name, strerror(-neg_ret(r)));
    }
    if (v->pd && (r = ibv_dealloc_pd(v->pd)) != 0) {
        wl_log("device '%s': ibv_dealloc_pd failed: %s", v->name, strerror(-neg_ret(r)));
    }
    if (v->ctx && (r = ibv_close_device(v->ctx)) != 0) {
        wl_log("device '%s': ibv_close_device failed: %s", v->name, strerror(-neg_ret(r)));
    }
    free(v->buf);
    free(v);
}

void wl_verbs_get_info(const WlVerbs *v, WlQpInfo *ret_info)
{
    memset(ret_info, 0, sizeof(*ret_info));
    snprintf(ret_info->dev, sizeof(ret_info->dev), "%s", v->name);
    ret_info->lid = v->lid;
    ret_info->qpn = v->qp->qp_num;
    ret_info->psn = v->psn;
    memcpy(ret_info->gid, v->gid.raw, sizeof(ret_info->gid));
    ret_info->mtu = mtu_bytes(v->mtu);
}

const char *wl_verbs_gid_string(const WlVerbs *v)
{
    return v->gid_str;
}

const char *wl_verbs_device_name(const WlVerbs *v)
{
    return v->name;
}

int wl_verbs_connect(WlVerbs *v, const WlQpInfo *peer)
{
    enum ibv_mtu mtu = mtu_enum(peer->mtu);
    int r;

    if (mtu > v->mtu) {
        mtu = v->mtu;
    }
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = mtu,
        .dest_qp_num = peer->qpn,
        .rq_psn = peer->psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12,
        .ah_attr =
            {
                .is_global = 0,
                .dlid = (uint16_t)peer->lid,
                .sl = 0,
                .src_path_bits = 0,
                .port_num = v->port,
            },
    };
    if (v->is_global || peer->lid == 0) {
        attr.ah_attr.is_global = 1;
        memcpy(attr.ah_attr.grh.dgid.raw, peer->gid, sizeof(peer->gid));
        attr.ah_attr.grh.sgid_index = (uint8_t)v->gid_index;
        attr.ah_attr.grh.hop_limit = 64;
    }
    r = ibv_modify_qp(v->qp, &attr,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': QP %u to RTR (peer QP %u on '%s') failed: %s", v->name,
                     v->qp->qp_num, peer->qpn, peer->dev, strerror(-r));
        return r;
    }
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 16; /* 4.096 us * 2^16 = 268 ms: TCG guests are slow */
    attr.retry_cnt = 7;
    attr.rnr_retry = 7; /* infinite */
    attr.sq_psn = v->psn;
    attr.max_rd_atomic = 1;
    r = ibv_modify_qp(v->qp, &attr,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': QP %u to RTS failed: %s", v->name, v->qp->qp_num, strerror(-r));
        return r;
    }
    return 0;
}

uint8_t *wl_verbs_send_buf(WlVerbs *v)
{
    return v->buf;
}

const uint8_t *wl_verbs_recv_buf(const WlVerbs *v)
{
    return v->buf + v->size;
}

int wl_verbs_post_recv(WlVerbs *v)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)(v->buf + v->size),
        .length = (uint32_t)v->size,
        .lkey = v->mr->lkey,
    };
    struct ibv_recv_wr wr = {.wr_id = WL_WRID_RECV, .sg_list = &sge, .num_sge = 1};
    struct ibv_recv_wr *bad = NULL;
    int r = ibv_post_recv(v->qp, &wr, &bad);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': ibv_post_recv failed: %s", v->name, strerror(-r));
        return r;
    }
    return 0;
}

int wl_verbs_post_send(WlVerbs *v, size_t len)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)v->buf,
        .length = (uint32_t)len,
        .lkey = v->mr->lkey,
    };
    struct ibv_send_wr wr = {
        .wr_id = WL_WRID_SEND,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_send_wr *bad = NULL;
    int r = ibv_post_send(v->qp, &wr, &bad);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': ibv_post_send failed: %s", v->name, strerror(-r));
        return r;
    }
    return 0;
}

int wl_verbs_cq_fd(const WlVerbs *v)
{
    return v->channel->fd;
}

int wl_verbs_async_fd(const WlVerbs *v)
{
    return v->ctx->async_fd;
}

int wl_verbs_poll(WlVerbs *v, WlCompletion *wc, int max)
{
    struct ibv_wc wcs[WL_CQ_DEPTH];
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    int n, r;

    while (ibv_get_cq_event(v->channel, &ev_cq, &ev_ctx) == 0) {
        ibv_ack_cq_events(ev_cq, 1);
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        r = neg_errno(EIO);
        wl_log("device '%s': ibv_get_cq_event failed: %s", v->name, strerror(-r));
        return r;
    }
    r = ibv_req_notify_cq(v->cq, 0);
    if (r != 0) {
        r = neg_ret(r);
        wl_log("device '%s': ibv_req_notify_cq failed: %s", v->name, strerror(-r));
        return r;
    }
    if (max > WL_CQ_DEPTH) {
        max = WL_CQ_DEPTH;
    }
    n = ibv_poll_cq(v->cq, max, wcs);
    if (n < 0) {
        wl_log("device '%s': ibv_poll_cq failed", v->name);
        return -EIO;
    }
    for (int i = 0; i < n; i++) {
        wc[i].is_recv = wcs[i].wr_id == WL_WRID_RECV;
        wc[i].ok = wcs[i].status == IBV_WC_SUCCESS;
        wc[i].status_str = ibv_wc_status_str(wcs[i].status);
        wc[i].byte_len = wcs[i].byte_len;
    }
    return n;
}

int wl_verbs_read_async(WlVerbs *v, int *ret_fatal)
{
    struct ibv_async_event ev;

    *ret_fatal = 0;
    while (ibv_get_async_event(v->ctx, &ev) == 0) {
        enum ibv_event_type type = ev.event_type;
        ibv_ack_async_event(&ev);
        wl_log("device '%s': async event '%s'", v->name, ibv_event_type_str(type));
        if (type == IBV_EVENT_DEVICE_FATAL || type == IBV_EVENT_PORT_ERR) {
            *ret_fatal = 1;
        }
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
        int r = neg_errno(EIO);
        wl_log("device '%s': ibv_get_async_event failed: %s", v->name, strerror(-r));
        return r;
    }
    return 0;
}
