/* hotmig-agent: the processes that hold a verbs device open (/dev/infiniband/uverbs*) as the
 * guest's /proc shows them (issue 29 item 5). The inventory names those that did not register
 * (neither the verbs layer nor libhotmig): a move would take the device from under them, so the
 * host's jobs check fails naming them and the move is refused unless forced. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define AGENT_DEVICE_USERS_MAX 64 /* listed; the rest are counted */
#define AGENT_DEVICE_NODE_PREFIX "/dev/infiniband/uverbs"

typedef struct {
    gint pid;
    char *name;   /* its /proc/PID/comm, printable, white space made '_' ("_" when none) */
    char *device; /* the node of its first such descriptor: "uverbs0" */
} AgentDeviceUser;

void agent_device_user_free(AgentDeviceUser *user);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentDeviceUser, agent_device_user_free)

/* The processes of @proc_root ("/proc") with a descriptor on an AGENT_DEVICE_NODE_PREFIX node,
 * in pid order, but @skip (sorted or not, @n_skip pids: the agent itself, the registered
 * processes): at most AGENT_DEVICE_USERS_MAX (owned AgentDeviceUser), *ret_dropped gets the
 * number of those left out. A process whose descriptors cannot be read (another user's, without
 * CAP_SYS_PTRACE; gone meanwhile) is not listed: *ret_unreadable counts them. */
GPtrArray *agent_device_users(const char *proc_root, const gint *skip, gsize n_skip,
                              guint *ret_dropped, guint *ret_unreadable);

G_END_DECLS
