/* libhotmig: lets a process in a guest take part in a hotmig live migration.
 *
 * A process registers with the in-guest hotmig-agent and gives two callbacks. Before the
 * host unplugs the RDMA VF the agent asks every registered process to quiesce: stop
 * communicating over the device and close every verbs object on it. After the migration
 * and the plug of the new VF the agent asks them to resume on the new device.
 *
 * Depends on libc and pthreads only. Thread-safe as documented per function.
 */
#ifndef HOTMIG_H
#define HOTMIG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOTMIG_VERSION_MAJOR 0
#define HOTMIG_VERSION_MINOR 1
#define HOTMIG_VERSION_MICRO 0

/* Environment variable naming the agent socket; default HOTMIG_AGENT_SOCKET_DEFAULT. */
#define HOTMIG_AGENT_SOCKET_ENV "HOTMIG_AGENT_SOCKET"
#define HOTMIG_AGENT_SOCKET_DEFAULT "/run/hotmig/agent.sock"

typedef enum {
    /* The library only records the request and makes hotmig_client_get_fd() readable; the
     * application calls hotmig_client_dispatch() the next time it enters its communication
     * layer, and the callbacks run on that thread (pscom's lazy mode). */
    HOTMIG_MODE_LAZY = 0,
    /* A helper thread runs the callbacks as soon as the request arrives (threaded mode).
     * The application must synchronise its own state with the callbacks. */
    HOTMIG_MODE_THREADED = 1,
} HotmigMode;

typedef struct HotmigClient HotmigClient;

/* Quiesce: stop traffic on the RDMA device and close every verbs object on it.
 * Return 0 when done, a negative errno value when it failed. */
typedef int (*HotmigQuiesceFunc)(void *opaque);

/* Resume: reconnect over @device (an RDMA device name such as "rxe0" or "mlx5_0"; NULL when
 * the agent saw no device appear before its deadline). Return 0 or a negative errno value. */
typedef int (*HotmigResumeFunc)(const char *device, void *opaque);

/* Connects to the agent and registers this process under @name (at most 64 bytes, no white
 * space). Returns a new client, owned by the caller (free with hotmig_client_free()), or NULL
 * with errno set (ECONNREFUSED/ENOENT when no agent runs, EINVAL on bad arguments). */
HotmigClient *hotmig_client_new(const char *name, HotmigMode mode, HotmigQuiesceFunc quiesce,
                                HotmigResumeFunc resume, void *opaque);

/* Lazy mode: an fd that polls readable when a request waits. Borrowed; valid until free.
 * Threaded mode: -1. */
int hotmig_client_get_fd(const HotmigClient *client);

/* Lazy mode: runs the callbacks of every waiting request on the calling thread and reports
 * their results to the agent. Returns the number of requests handled (0 if none waited), or a
 * negative errno value when the connection to the agent is lost. Never blocks. */
int hotmig_client_dispatch(HotmigClient *client);

/* Tells the agent that this process talks to a peer over the RDMA device: @gid is the remote
 * port's GID as 32 lower-case hex digits (network order), @qpn the remote QP number (< 2^24).
 * The agent lists it in its inventory: the host learns whose connections a move pauses.
 * Returns 0, or a negative errno value (-EINVAL on bad arguments). Any thread. */
int hotmig_client_report_peer(HotmigClient *client, const char *gid, unsigned qpn);

/* Tells the agent that this process called something the migration cannot carry (@call: 1..64
 * printable bytes, no space, e.g. "ibv_alloc_mw"): the host then refuses to move the guest
 * unless forced. Returns 0 or a negative errno value. Any thread. */
int hotmig_client_report_refused(HotmigClient *client, const char *call);

/* What the standby path (docs/design.md "Standby path") did for this process in the move under
 * way, told before the answer to a quiesce (the switch: @switched connections moved to the
 * standby device, @paused ones wait for the resume, @ms the pause the switch cost) and to a
 * resume (the switch back: the @sends and @recvs the standby device carried, the pause in @ms).
 * @used is 0 when no standby device was had (every connection paused). The agent adds it to
 * its prepare and resume answers (docs/protocol.md "STATS"). */
#define HOTMIG_STANDBY_QPS_MAX 65536                /* switched, paused */
#define HOTMIG_STANDBY_COUNT_MAX ((1ULL << 53) - 1) /* sends, recvs: exact in JSON */
#define HOTMIG_STANDBY_MS_MAX 600000                /* ms */
typedef struct {
    int used; /* 0 or 1 */
    unsigned switched, paused;
    unsigned long long sends, recvs;
    unsigned ms;
} HotmigStandbyStats;

/* Sends @stats ("STATS ..."). Returns 0 or a negative errno value (-EINVAL when out of the
 * bounds above). Any thread; call it from the quiesce or resume callback, before it returns:
 * the agent keeps it for the answer that follows and drops it otherwise. */
int hotmig_client_report_standby(HotmigClient *client, const HotmigStandbyStats *stats);

/* The standby RDMA device (docs/design.md "Standby path"): asks the agent for the soft-RoCE
 * device on the guest's control NIC, which carries this process's connections while a peer
 * guest (or this one) moves. The agent makes it when needed. On success returns a file
 * descriptor, the lease (the device stays while it is open: close() it when done, before or
 * after closing the device), and writes the device's name into @device (@size bytes, at least
 * HOTMIG_DEVICE_NAME_MAX + 1). A negative errno value otherwise: -EOPNOTSUPP when this guest
 * has no standby device (or, during a move of this guest, when the move does not use one),
 * -ECONNREFUSED/-ENOENT when no agent runs, -ETIMEDOUT after @timeout_ms. Independent of any
 * client; any thread. */
#define HOTMIG_DEVICE_NAME_MAX 63
int hotmig_standby_acquire(char *device, size_t size, int timeout_ms);

/* Non-zero while the process is quiesced (between a completed quiesce and the next resume). */
int hotmig_client_is_quiesced(const HotmigClient *client);

/* Unregisters and frees. NULL-safe. In threaded mode waits for a running callback to end. */
void hotmig_client_free(HotmigClient *client);

#ifdef __cplusplus
}
#endif

#endif /* HOTMIG_H */
