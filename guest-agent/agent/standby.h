/* The standby RDMA device (issue 30): a soft-RoCE device (rdma_rxe) on the guest's paravirtual
 * control NIC, which migrates with the VM, made by the agent while a move is under way (from
 * prepare to resume) and named in its inventory (docs/design.md "Standby path"). */
#pragma once

#include <json-glib/json-glib.h>

#include "common/common.h"

G_BEGIN_DECLS

#define AGENT_STANDBY_DEVICE_DEFAULT "hmsb0"
#define AGENT_STANDBY_LINK_TYPE "rxe"
#define AGENT_STANDBY_MODULE "rdma_rxe"
#define AGENT_STANDBY_NAME_MAX 63 /* an RDMA device's name (IB_DEVICE_NAME_MAX 64, its NUL) */

/* The RDMA netlink adapter (rdma-link.c is the only file that talks to libnl): what 'rdma
 * link add NAME type TYPE netdev NETDEV' and 'rdma link del NAME' do. FALSE with @error set
 * and *@ret_errno the kernel's errno (0 when the request did not reach it). */
typedef struct {
    gboolean (*add)(gpointer data, const char *name, const char *type, const char *netdev,
                    int *ret_errno, GError **error);
    gboolean (*del)(gpointer data, const char *name, int *ret_errno, GError **error);
} AgentRdmaLinkOps;

extern const AgentRdmaLinkOps agent_rdma_link_ops;

typedef enum {
    AGENT_STANDBY_STATE_ABSENT,      /* not made: no move under way */
    AGENT_STANDBY_STATE_READY,       /* made, its port ACTIVE */
    AGENT_STANDBY_STATE_DOWN,        /* made, its port not ACTIVE (the NIC without carrier) */
    AGENT_STANDBY_STATE_UNAVAILABLE, /* this guest cannot have one: the error says why */
    AGENT_STANDBY_STATE_LAST,
} AgentStandbyState;
HM_ENUM_DECL(agent_standby_state, AgentStandbyState)

typedef struct AgentStandby AgentStandby; /* also declared by agent-priv.h */

/* A standby device @device (NULL: AGENT_STANDBY_DEVICE_DEFAULT) on the network interface
 * @netdev, made and removed through @ops. Owned; NULL with @error set (HM_COMMON_ERROR_INVALID)
 * when a name is not one the kernel takes. */
AgentStandby *agent_standby_new(const char *netdev, const char *device, const AgentRdmaLinkOps *ops,
                                gpointer ops_data, GError **error);
void agent_standby_free(AgentStandby *sb);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentStandby, agent_standby_free)

/* Where the kernel is looked at: @sysfs_root (default "/sys"), @modules_dir (default
 * "/lib/modules/<uname -r>"). Tests give fixture trees. */
void agent_standby_set_roots(AgentStandby *sb, const char *sysfs_root, const char *modules_dir);

/* Whether this guest can have the standby device: the network interface is there and the
 * kernel has soft-RoCE (the module rdma_rxe loaded, built in, or installed to be loaded).
 * FALSE with @error naming what is missing; the state is then UNAVAILABLE with that error. */
gboolean agent_standby_check(AgentStandby *sb, GError **error);

/* Makes the device (one already there on @netdev is taken as it is; one of that name on
 * another NIC is refused). FALSE with @error set; a kernel without rdma_rxe is said so. The
 * time the kernel took is agent_standby_get_created_ms(). */
gboolean agent_standby_up(AgentStandby *sb, GError **error);
/* Removes it (nothing when it is not there). The kernel waits until every process that opened
 * it closed it: call it where blocking is allowed (a thread). */
gboolean agent_standby_down(AgentStandby *sb, GError **error);

AgentStandbyState agent_standby_get_state(AgentStandby *sb);  /* reads sysfs */
const char *agent_standby_get_device(const AgentStandby *sb); /* borrowed */
const char *agent_standby_get_netdev(const AgentStandby *sb); /* borrowed */
gint64 agent_standby_get_created_ms(const AgentStandby *sb);  /* -1: not made yet */

/* The inventory's "standby" member: {"netdev","device","state","created_ms"?,"error"?}. */
void agent_standby_add_json(AgentStandby *sb, JsonBuilder *b);

G_END_DECLS
