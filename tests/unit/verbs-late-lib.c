/* A stand-in for UCX's libuct_ib in verbs-late-load-test: a module linked against libibverbs
 * that the test opens RTLD_LOCAL after start-up, so libibverbs is first loaded then. */
#include <infiniband/verbs.h>

void *late_device_list_fn(void);
const char *late_wc_status_str(void);
int late_rate_to_mbps(void);
int late_device_count(void);

void *late_device_list_fn(void)
{
    return (void *)&ibv_get_device_list; /* what this module's reference binds to */
}

const char *late_wc_status_str(void)
{
    return ibv_wc_status_str(IBV_WC_SUCCESS);
}

int late_rate_to_mbps(void)
{
    return ibv_rate_to_mbps(IBV_RATE_10_GBPS);
}

int late_device_count(void)
{
    int n = -1;
    struct ibv_device **l = ibv_get_device_list(&n);

    if (!l)
        return -1;
    ibv_free_device_list(l);
    return n;
}
