/* The agent's RDMA netlink adapter over libnl-3 (NETLINK_RDMA, the kernel's nldev interface that
 * 'rdma link add|del' speaks): the only file of the agent that talks to libnl. It creates and
 * removes soft-RoCE devices, the standby device (standby.c). */
#include "guest-agent/agent/standby.h"

#include <errno.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/rdma_netlink.h>
#include <string.h>

/* The kernel's error (a positive errno) of the request answered last. */
static int agent_rdma_link_on_error(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
    (void)who;
    *(int *)arg = -e->error;
    return NL_STOP;
}

/* A socket on NETLINK_RDMA, or NULL with @error set: no RDMA netlink in the kernel (ib_core,
 * CONFIG_INFINIBAND) is said so. */
static struct nl_sock *agent_rdma_link_open(int *kernel_errno, GError **error)
{
    struct nl_sock *sk = nl_socket_alloc();
    int err;

    if (!sk) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED, "Out of memory");
        return NULL;
    }
    err = nl_connect(sk, NETLINK_RDMA);
    if (err < 0) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED,
                    "The kernel has no RDMA netlink interface (module 'ib_core', "
                    "CONFIG_INFINIBAND): %s",
                    nl_geterror(err));
        nl_socket_free(sk);
        return NULL;
    }
    nl_socket_modify_err_cb(sk, NL_CB_CUSTOM, agent_rdma_link_on_error, kernel_errno);
    return sk;
}

/* Sends @msg (consumed; @built FALSE: it could not be filled, out of memory) on @sk (freed) and
 * waits for the kernel's answer: 0, or the kernel's errno (ENOMEM, EIO: not sent). */
static int agent_rdma_link_request(struct nl_sock *sk, struct nl_msg *msg, gboolean built,
                                   int *kernel_errno)
{
    int err = built ? nl_send_auto(sk, msg) : -NLE_NOMEM;

    *kernel_errno = 0;
    nlmsg_free(msg);
    if (err < 0)
        *kernel_errno = built ? EIO : ENOMEM;
    else if (nl_wait_for_ack(sk) < 0 && !*kernel_errno)
        *kernel_errno = EIO;
    nl_socket_free(sk);
    return *kernel_errno;
}

static gboolean agent_rdma_link_add(gpointer data, const char *name, const char *type,
                                    const char *netdev, int *ret_errno, GError **error)
{
    int kernel_errno = 0;
    struct nl_sock *sk = agent_rdma_link_open(&kernel_errno, error);
    struct nl_msg *msg;
    gboolean built;
    int r;

    (void)data;
    if (!sk)
        return FALSE;
    msg = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_NEWLINK),
                             NLM_F_REQUEST | NLM_F_ACK);
    built = msg && nla_put_string(msg, RDMA_NLDEV_ATTR_DEV_NAME, name) == 0 &&
            nla_put_string(msg, RDMA_NLDEV_ATTR_LINK_TYPE, type) == 0 &&
            nla_put_string(msg, RDMA_NLDEV_ATTR_NDEV_NAME, netdev) == 0;
    r = agent_rdma_link_request(sk, msg, built, &kernel_errno);
    if (r) {
        *ret_errno = r;
        hm_set_error_errno(error, r, "rdma link add '%s' type %s netdev '%s'", name, type, netdev);
        return FALSE;
    }
    return TRUE;
}

typedef struct {
    const char *name;
    guint32 index;
    gboolean found;
} AgentRdmaLinkFind;

static int agent_rdma_link_on_dev(struct nl_msg *msg, void *arg)
{
    AgentRdmaLinkFind *f = arg;
    struct nlattr *tb[RDMA_NLDEV_ATTR_MAX];

    if (nlmsg_parse(nlmsg_hdr(msg), 0, tb, RDMA_NLDEV_ATTR_MAX - 1, NULL) < 0)
        return NL_SKIP;
    if (tb[RDMA_NLDEV_ATTR_DEV_NAME] && tb[RDMA_NLDEV_ATTR_DEV_INDEX] &&
        g_strcmp0(nla_get_string(tb[RDMA_NLDEV_ATTR_DEV_NAME]), f->name) == 0) {
        f->index = nla_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
        f->found = TRUE;
    }
    return NL_OK;
}

/* The kernel's index of the RDMA device @name (a dump of RDMA_NLDEV_CMD_GET). */
static gboolean agent_rdma_link_index(struct nl_sock *sk, const char *name, guint32 *ret_index,
                                      int *kernel_errno)
{
    AgentRdmaLinkFind f = {.name = name};
    struct nl_msg *msg = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET),
                                            NLM_F_REQUEST | NLM_F_DUMP);
    int err;

    if (!msg)
        return FALSE;
    *kernel_errno = 0;
    nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, agent_rdma_link_on_dev, &f);
    err = nl_send_auto(sk, msg);
    nlmsg_free(msg);
    if (err >= 0)
        err = nl_recvmsgs_default(sk);
    nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_DEFAULT, NULL, NULL);
    if (err < 0 || !f.found)
        return FALSE;
    *ret_index = f.index;
    return TRUE;
}

static gboolean agent_rdma_link_del(gpointer data, const char *name, int *ret_errno, GError **error)
{
    int kernel_errno = 0;
    struct nl_sock *sk = agent_rdma_link_open(&kernel_errno, error);
    struct nl_msg *msg;
    guint32 index = 0;
    int r;

    (void)data;
    if (!sk)
        return FALSE;
    if (!agent_rdma_link_index(sk, name, &index, &kernel_errno)) {
        nl_socket_free(sk);
        *ret_errno = ENODEV;
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED,
                    "rdma link del '%s': no such RDMA device", name);
        return FALSE;
    }
    msg = nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_DELLINK),
                             NLM_F_REQUEST | NLM_F_ACK);
    r = agent_rdma_link_request(
        sk, msg, msg && nla_put_u32(msg, RDMA_NLDEV_ATTR_DEV_INDEX, index) == 0, &kernel_errno);
    if (r) {
        *ret_errno = r;
        hm_set_error_errno(error, r, "rdma link del '%s'", name);
        return FALSE;
    }
    return TRUE;
}

const AgentRdmaLinkOps agent_rdma_link_ops = {
    .add = agent_rdma_link_add,
    .del = agent_rdma_link_del,
};
