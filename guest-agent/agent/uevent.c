/* Kernel uevents: tells the agent core when RDMA devices come and go, so that a resume waiting
 * for the new device looks at once instead of at its next poll. */
#include "guest-agent/agent/agent-priv.h"

#include <errno.h>
#include <glib-unix.h>
#include <linux/netlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define AGENT_UEVENT_RCVBUF (256 * 1024) /* a hot-plug sends a few dozen events at once */

struct AgentUevent {
    Agent *agent;
    int fd;
    guint watch_id;
    void (*func)(gpointer data); /* also told (the peer directory), or NULL */
    gpointer func_data;
};

static gboolean agent_uevent_value_is(const guint8 *value, gsize len, const char *want)
{
    return len == strlen(want) && memcmp(value, want, len) == 0;
}

gboolean agent_uevent_is_rdma(const guint8 *msg, gsize len)
{
    const guint8 *end = msg + len;
    const guint8 *p;

    if (!msg || len == 0 || len > AGENT_UEVENT_MAX)
        return FALSE;
    /* The header "ACTION@DEVPATH" ends at the first NUL; the fields follow. */
    p = memchr(msg, '\0', len);
    if (!p || !memchr(msg, '@', (gsize)(p - msg)))
        return FALSE;
    for (p++; p < end;) {
        const guint8 *nul = memchr(p, '\0', (gsize)(end - p));
        gsize flen = nul ? (gsize)(nul - p) : (gsize)(end - p);

        if (flen >= 10 && memcmp(p, "SUBSYSTEM=", 10) == 0)
            return agent_uevent_value_is(p + 10, flen - 10, "infiniband") ||
                   agent_uevent_value_is(p + 10, flen - 10, "infiniband_verbs");
        if (!nul)
            break;
        p = nul + 1;
    }
    return FALSE;
}

static gboolean agent_uevent_io(int fd, GIOCondition condition, gpointer user_data)
{
    AgentUevent *uevent = user_data;
    gboolean changed = FALSE;

    for (guint i = 0; i < 256; i++) {
        guint8 buf[AGENT_UEVENT_MAX];
        struct sockaddr_nl sa;
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr mh = {
            .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0 && errno == ENOBUFS) {
            g_debug("kernel uevents were lost: looking at the RDMA devices anyway");
            changed = TRUE;
            continue;
        }
        if (n < 0) {
            g_warning("reading kernel uevents failed, polling from now on: %s", g_strerror(errno));
            agent_set_device_events(uevent->agent, FALSE);
            uevent->watch_id = 0;
            return G_SOURCE_REMOVE;
        }
        /* Only the kernel's own messages; truncated ones are not trusted. */
        if (sa.nl_pid != 0 || (mh.msg_flags & MSG_TRUNC))
            continue;
        if (agent_uevent_is_rdma(buf, (gsize)n))
            changed = TRUE;
    }
    if (changed)
        agent_devices_changed(uevent->agent);
    if (changed && uevent->func)
        uevent->func(uevent->func_data);
    return G_SOURCE_CONTINUE;
}

AgentUevent *agent_uevent_new(Agent *agent, GError **error)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1 /* the kernel's events */};
    int size = AGENT_UEVENT_RCVBUF;
    AgentUevent *uevent;
    int fd;

    g_return_val_if_fail(agent != NULL, NULL);

    fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_KOBJECT_UEVENT);
    if (fd < 0) {
        hm_set_error_errno(error, errno, "Cannot open a kernel uevent socket");
        return NULL;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0)
        g_debug("uevent socket: SO_RCVBUF %d: %s", size, g_strerror(errno));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        hm_set_error_errno(error, errno, "Cannot listen to kernel uevents");
        close(fd);
        return NULL;
    }
    uevent = g_new0(AgentUevent, 1);
    uevent->agent = agent;
    uevent->fd = fd;
    uevent->watch_id = g_unix_fd_add(fd, G_IO_IN, agent_uevent_io, uevent);
    agent_set_device_events(agent, TRUE);
    return uevent;
}

void agent_uevent_set_func(AgentUevent *uevent, void (*func)(gpointer data), gpointer data)
{
    uevent->func = func;
    uevent->func_data = data;
}

void agent_uevent_free(AgentUevent *uevent)
{
    if (!uevent)
        return;
    if (uevent->watch_id) {
        g_source_remove(uevent->watch_id);
        agent_set_device_events(uevent->agent, FALSE);
    }
    close(uevent->fd);
    g_free(uevent);
}
