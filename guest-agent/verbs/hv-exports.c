/* libhotmig-verbs: the exports that hold no verbs object (passed to libibverbs), the ones the
 * layer refuses (EOPNOTSUPP and one log line naming the call). */
#include "hv.h"

#include <dlfcn.h>
#include <errno.h>

HV_EXPORT int ibv_fork_init(void)
{
    hv_init();
    return hv_real.r_ibv_fork_init();
}

HV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
    hv_init();
    return hv_real.r_ibv_is_fork_initialized();
}

HV_EXPORT int ibv_dontfork_range(void *b, size_t s)
{
    hv_init();
    return hv_real.r_ibv_dontfork_range(b, s);
}

HV_EXPORT int ibv_dofork_range(void *b, size_t s)
{
    hv_init();
    return hv_real.r_ibv_dofork_range(b, s);
}

HV_EXPORT const char *ibv_get_sysfs_path(void)
{
    hv_init();
    return hv_real.r_ibv_get_sysfs_path();
}

HV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
    hv_init();
    return hv_real.r_ibv_read_sysfs_file(dir, file, buf, size);
}

HV_EXPORT void ibv_copy_qp_attr_from_kern(void *dst, void *src)
{
    hv_init();
    hv_real.r_ibv_copy_qp_attr_from_kern(dst, src);
}

HV_EXPORT void ibv_copy_ah_attr_from_kern(void *dst, void *src)
{
    hv_init();
    hv_real.r_ibv_copy_ah_attr_from_kern(dst, src);
}

HV_EXPORT void ibv_copy_path_rec_from_kern(void *dst, void *src)
{
    hv_init();
    hv_real.r_ibv_copy_path_rec_from_kern(dst, src);
}

HV_EXPORT void ibv_copy_path_rec_to_kern(void *dst, void *src)
{
    hv_init();
    hv_real.r_ibv_copy_path_rec_to_kern(dst, src);
}

HV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
    hv_init();
    return hv_real.r_ibv_node_type_str(t);
}

HV_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
    hv_init();
    return hv_real.r_ibv_port_state_str(s);
}

HV_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
    hv_init();
    return hv_real.r_ibv_event_type_str(e);
}

HV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
    hv_init();
    return hv_real.r_ibv_wc_status_str(s);
}

HV_EXPORT int ibv_rate_to_mult(enum ibv_rate r)
{
    hv_init();
    return hv_real.r_ibv_rate_to_mult(r);
}

HV_EXPORT enum ibv_rate mult_to_ibv_rate(int m)
{
    hv_init();
    return hv_real.r_mult_to_ibv_rate(m);
}

HV_EXPORT int ibv_rate_to_mbps(enum ibv_rate r)
{
    hv_init();
    return hv_real.r_ibv_rate_to_mbps(r);
}

HV_EXPORT enum ibv_rate mbps_to_ibv_rate(int m)
{
    hv_init();
    return hv_real.r_mbps_to_ibv_rate(m);
}

/* ---- refused ------------------------------------------------------------------------------ */

HV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
                           size_t length, int access)
{
    int (*real)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t, int) =
        (int (*)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t, int))dlvsym(
            hv_real_lib, "ibv_rereg_mr", "IBVERBS_1.1");

    if (!hv_ctx_of(mr->context) && real)
        return real(mr, flags, pd, addr, length, access);
    hv_unsupported("ibv_rereg_mr");
    return IBV_REREG_MR_ERR_INPUT;
}

HV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
                                           uint64_t iova, int fd, int access)
{
    struct ibv_mr *(*real)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int) =
        (struct ibv_mr * (*)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int))
            dlvsym(hv_real_lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");

    if (!hv_ctx_of(pd->context) && real)
        return real(pd, offset, length, iova, fd, access);
    if (fd < 0) {
        /* jobs (issue 18): a probe (UCX asks with fd -1 whether dma-buf works): refused, but it
         * registers nothing, so it is not reported as a use that stops a migration */
        errno = EOPNOTSUPP;
        return NULL;
    }
    hv_unsupported("ibv_reg_dmabuf_mr");
    return NULL;
}

HV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
    (void)cmd_fd;
    hv_unsupported("ibv_import_device");
    return NULL;
}

HV_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *c, uint32_t handle)
{
    (void)c;
    (void)handle;
    hv_unsupported("ibv_import_pd");
    return NULL;
}

HV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
    (void)pd;
    hv_unsupported("ibv_unimport_pd");
}

HV_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t handle)
{
    (void)pd;
    (void)handle;
    hv_unsupported("ibv_import_mr");
    return NULL;
}

HV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
    (void)mr;
    hv_unsupported("ibv_unimport_mr");
}

HV_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *c, uint32_t handle)
{
    (void)c;
    (void)handle;
    hv_unsupported("ibv_import_dm");
    return NULL;
}

HV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
    (void)dm;
    hv_unsupported("ibv_unimport_dm");
}

/* The pre-2018 provider registration entry: providers of rdma-core 44 use
 * verbs_register_driver_34, which the layer leaves to libibverbs. */
HV_EXPORT void ibv_register_driver(const char *name, void *init_func)
{
    (void)name;
    (void)init_func;
    hv_unsupported("ibv_register_driver");
}
