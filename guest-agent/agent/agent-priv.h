/* hotmig-agent internals: the host protocol parser, the process protocol parser, the agent
 * core (state machine, process registry) and the host channel. Reachable from tests only. */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "common/common.h"
#include "guest-agent/libhotmig/hotmig.h" /* the STATS bounds (HOTMIG_STANDBY_*_MAX) */
#include "agent-schema.h" /* generated from guest-agent/schema/agent-protocol.json */
#include "hv-proto.h"     /* the layer <-> agent hand-off: run dir, route and socket files */

G_BEGIN_DECLS

/* ---- limits ------------------------------------------------------------------------------ */

#define AGENT_PROC_LINE_MAX 512 /* bytes per process line, newline included */
#define AGENT_PROCS_MAX 1024    /* connections on the registry socket */
#define AGENT_JSON_DEPTH_MAX 16 /* nesting of arrays/objects in a request */
#define AGENT_TIMEOUT_MS_MAX (10 * 60 * 1000)
#define AGENT_NAME_MAX 64               /* process name, bytes */
#define AGENT_PEERS_MAX 256             /* peers (GID, QPN) kept per process; more are counted */
#define AGENT_REFUSED_MAX 16            /* refused calls kept per process */
#define AGENT_CALL_MAX 64               /* a refused call's name, bytes */
#define AGENT_DEVICE_MAX 64             /* RDMA device name, bytes */
#define AGENT_OUTPUT_MAX (1024 * 1024)  /* queued output to the host before it is dropped */
#define AGENT_DEVICE_POLL_MS 50         /* looking for an active RDMA device, without events */
#define AGENT_DEVICE_POLL_EVENTS_MS 500 /* the same, as a fallback, when device events come */
#define AGENT_UEVENT_MAX 8192           /* bytes of one kernel uevent (the kernel sends <= 2 KiB) */

/* ---- errors: the GError code is the protocol's error class ------------------------------- */

/* AgentError, AgentCommand, their names, the argument specs and the protocol constants
 * (AGENT_PROTOCOL_VERSION, AGENT_PROTOCOL_MIN, AGENT_HOST_LINE_MAX, AGENT_SYNC_BYTE) come from
 * the schema (agent-schema.h). */
#define AGENT_ERROR (agent_error_quark())
GQuark agent_error_quark(void);
HM_ENUM_DECL(agent_error_class, AgentError)

/* ---- enums ------------------------------------------------------------------------------- */

HM_ENUM_DECL(agent_command, AgentCommand)

typedef enum {
    AGENT_STATE_RUNNING,
    AGENT_STATE_PREPARED,
    AGENT_STATE_LAST,
} AgentState;
HM_ENUM_DECL(agent_state, AgentState)

typedef enum {
    AGENT_PROC_MODE_LAZY,
    AGENT_PROC_MODE_THREADED,
    AGENT_PROC_MODE_LAST,
} AgentProcMode;
HM_ENUM_DECL(agent_proc_mode, AgentProcMode)

/* Where a registered process stands, as inventory reports it. */
typedef enum {
    AGENT_PROC_STATE_RUNNING,
    AGENT_PROC_STATE_QUIESCING, /* QUIESCE sent, no answer yet */
    AGENT_PROC_STATE_QUIESCED,
    AGENT_PROC_STATE_RESUMING, /* RESUME sent, no answer yet */
    AGENT_PROC_STATE_FAILED,   /* its last request failed or went unanswered */
    AGENT_PROC_STATE_LAST,
} AgentProcState;
HM_ENUM_DECL(agent_proc_state, AgentProcState)

/* ---- line framing ------------------------------------------------------------------------ */

typedef enum {
    AGENT_FRAME_LINE,     /* a complete line, newline (and a trailing CR) removed */
    AGENT_FRAME_OVERSIZE, /* a line longer than the limit ended; its bytes were discarded */
    AGENT_FRAME_SYNC,     /* the sync byte arrived; any partial line was dropped */
} AgentFrameEvent;

/* Returns FALSE to stop feeding (the rest of the data is not looked at). @line is borrowed,
 * NUL-terminated at @len (it may hold other NUL bytes). */
typedef gboolean (*AgentFrameFunc)(AgentFrameEvent event, const char *line, gsize len,
                                   gpointer user_data);

typedef struct {
    GString *buf;
    gsize max;                 /* bytes per line, newline included */
    gboolean sync_byte;        /* whether 0xFF resets the framer */
    gboolean oversize_at_once; /* report an overlong line when it overflows, not at its end */
    gboolean discarding;
} AgentFramer;

void agent_framer_init(AgentFramer *framer, gsize max, gboolean sync_byte,
                       gboolean oversize_at_once);
/* The framer of the host channel: lines up to AGENT_HOST_LINE_MAX bytes, the sync byte resets
 * it, an overlong line is reported when it ends. */
void agent_framer_init_host(AgentFramer *framer);
void agent_framer_clear(AgentFramer *framer);
void agent_framer_reset(AgentFramer *framer);
/* Returns FALSE when @func stopped it. */
gboolean agent_framer_feed(AgentFramer *framer, const guint8 *data, gsize len, AgentFrameFunc func,
                           gpointer user_data);

/* ---- host requests ----------------------------------------------------------------------- */

typedef struct {
    AgentCommand command;
    gint64 sync_id;   /* sync */
    guint timeout_ms; /* prepare, resume, abort */
    gboolean no_standby; /* prepare: "standby":0, no standby device for this move */
    gint protocol;    /* info: the host's highest protocol version; 0 when not given */
} AgentRequest;

/* Parses one request line and checks its arguments against the schema (names, types,
 * ranges, required). On failure sets @error in AGENT_ERROR (code = error class) with a
 * message naming the field; *ret is untouched. Does not look at protocol versions. */
gboolean agent_request_parse(const char *line, gsize len, AgentRequest *ret, GError **error);

/* ---- process messages -------------------------------------------------------------------- */

typedef enum {
    AGENT_MSG_HELLO,
    AGENT_MSG_DONE,
    AGENT_MSG_FAILED,
    AGENT_MSG_PEER,    /* the process talks to a remote QP (verbs layer) */
    AGENT_MSG_REFUSED, /* the process called something a migration cannot carry */
    AGENT_MSG_STANDBY, /* a lease on the standby RDMA device (docs/design.md "Standby path") */
    AGENT_MSG_STATS,   /* what the standby path did for it, before a DONE (docs/protocol.md) */
    AGENT_MSG_LAST,
} AgentMsgKind;

/* STATS <used>/<switched>/<paused>/<sends>/<recvs>/<ms>: what the standby path did for a
 * process in this move (the switch at QUIESCE, the switch back and what it carried at RESUME);
 * the bounds are libhotmig's, which writes the line */
#define AGENT_STATS_WORD_MAX 64 /* a report word of libhotmig */
#define AGENT_STATS_QPS_MAX HOTMIG_STANDBY_QPS_MAX
#define AGENT_STATS_COUNT_MAX HOTMIG_STANDBY_COUNT_MAX
#define AGENT_STATS_MS_MAX HOTMIG_STANDBY_MS_MAX
typedef struct {
    gboolean used; /* a standby device was had */
    guint switched, paused;
    guint64 sends, recvs;
    guint ms;
} AgentStandbyStats;

typedef struct {
    AgentMsgKind kind;
    char version[17];                 /* HELLO */
    gint pid;                         /* HELLO */
    AgentProcMode mode;               /* HELLO */
    char name[AGENT_NAME_MAX + 1];    /* HELLO */
    guint64 seq;                      /* DONE, FAILED */
    char reason[AGENT_PROC_LINE_MAX]; /* FAILED */
    guint8 gid[16];                   /* PEER: the remote port's GID, network order */
    guint32 qpn;                      /* PEER: the remote QP number (< 2^24) */
    char call[AGENT_CALL_MAX + 1];    /* REFUSED */
    AgentStandbyStats stats;          /* STATS */
} AgentProcMsg;

gboolean agent_proc_msg_parse(const char *line, gsize len, AgentProcMsg *ret, GError **error);

/* ---- verbs adapter (verbs.c is the only file that talks to libibverbs) -------------------- */

typedef struct {
    guint8 port;
    char *state;      /* "ACTIVE", "DOWN", ... */
    char *link_layer; /* "InfiniBand", "Ethernet" */
    guint16 lid;
    GPtrArray *gids; /* char *, textual (IPv6 form); all-zero entries left out */
} AgentRdmaPort;

typedef struct {
    char *name;
    char *node_guid;  /* "0011:2233:4455:6677" */
    GPtrArray *ports; /* AgentRdmaPort, owned */
} AgentRdmaDevice;

/* Owned; free with agent_rdma_device_free(). */
AgentRdmaDevice *agent_rdma_device_new(const char *name, const char *node_guid);
AgentRdmaPort *agent_rdma_device_add_port(AgentRdmaDevice *dev, guint8 port, const char *state,
                                          const char *link_layer, guint16 lid);
void agent_rdma_device_free(AgentRdmaDevice *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentRdmaDevice, agent_rdma_device_free)

/* A port's state (the IB spec's PortState, libibverbs' enum ibv_port_state: 0 NOP, 1 DOWN,
 * 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER) as the inventory and the directory name it:
 * "ACTIVE", "INIT", ... ("UNKNOWN" beyond). Not ibv_port_state_str(), whose words are
 * lower case ("active"). */
const char *agent_rdma_port_state_name(guint state);

/* The adapter's watch on the port events of RDMA devices (opaque). */
typedef struct AgentPortWatch AgentPortWatch;

typedef struct {
    /* Returns the name (owned) of an RDMA device that has a port in the ACTIVE state, or NULL
     * with @error set when there is none (yet). @prefer (may be NULL) is returned when it is
     * one of them; @except (may be NULL: the standby device) never is. */
    char *(*find_active_device)(gpointer data, const char *prefer, const char *except,
                                GError **error);
    /* Every RDMA device with its ports: a GPtrArray of AgentRdmaDevice (owned), or NULL with
     * @error set. */
    GPtrArray *(*list_devices)(gpointer data, GError **error);
    /* Optional, all three or none. Opens the RDMA devices present now to hear of their port
     * events (a port going ACTIVE, a device lost): returns the watch (owned; free with
     * port_watch_free()) and sets *ret_fd (borrowed) to a descriptor that polls readable when
     * events wait; NULL with @error set when it cannot. The devices stay open until freed. */
    AgentPortWatch *(*port_watch_new)(gpointer data, int *ret_fd, GError **error);
    /* Reads and acknowledges the waiting events; returns how many there were. */
    guint (*port_watch_drain)(AgentPortWatch *watch);
    void (*port_watch_free)(AgentPortWatch *watch);
} AgentVerbsOps;

extern const AgentVerbsOps agent_ibverbs_ops;

/* ---- the agent core ---------------------------------------------------------------------- */

typedef struct Agent Agent;

/* Called with each complete reply for the host (including its newline, and the leading sync
 * byte for sync replies). @data is borrowed. */
typedef void (*AgentReplyFunc)(const char *data, gsize len, gpointer user_data);

/* Creates the agent; its sources live in the thread-default main context. Owned. */
Agent *agent_new(const AgentVerbsOps *verbs, gpointer verbs_data);
void agent_free(Agent *agent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Agent, agent_free)

void agent_set_reply_func(Agent *agent, AgentReplyFunc func, gpointer user_data);
/* Where inventory looks for the processes that hold a verbs device open (default "/proc";
 * tests give a fixture tree). */
void agent_set_proc_root(Agent *agent, const char *proc_root);
/* How often resume looks for an active RDMA device (default AGENT_DEVICE_POLL_MS). */
void agent_set_device_poll_ms(Agent *agent, guint poll_ms);
/* Whether something calls agent_devices_changed() when RDMA devices come and go (the kernel
 * uevent listener): resume then looks at once on those calls and on port events, and polls
 * only every MAX(poll_ms, AGENT_DEVICE_POLL_EVENTS_MS) as a fallback. */
void agent_set_device_events(Agent *agent, gboolean device_events);
/* RDMA devices appeared, went away or changed: a resume or abort waiting for an active device
 * looks again at once (from the main loop; several calls make one look) and watches the ports
 * of the devices present then. */
void agent_devices_changed(Agent *agent);

/* Who may connect to the registry socket: its group and mode. MPI ranks started by Slurm or
 * mpirun run as the user, not root: give the socket a group they are in and mode 0660. */
typedef struct {
    gid_t group; /* AGENT_SOCKET_GROUP_ROOT: the agent's own (root's) */
    mode_t mode; /* permission bits, owner read and write always included */
} AgentSocketAccess;

#define AGENT_SOCKET_GROUP_ROOT ((gid_t)-1)
#define AGENT_SOCKET_MODE_DEFAULT 0600
#define AGENT_SOCKET_ACCESS_DEFAULT {AGENT_SOCKET_GROUP_ROOT, AGENT_SOCKET_MODE_DEFAULT}

/* Parses --socket-group (a group name or number; NULL: root's) and --socket-mode (octal, from
 * 0600 to 0777 without execute bits that mean nothing on a socket; NULL: 0600) into @ret.
 * FALSE with HM_COMMON_ERROR_INVALID naming the value, @ret untouched. */
gboolean agent_socket_access_parse(const char *group, const char *mode, AgentSocketAccess *ret,
                                   GError **error);

/* Creates the registry socket at @path (its directory is created if missing) with @access
 * (NULL: root only, 0600) and accepts processes on it. The socket is created 0600 and only
 * then given its group and mode: it is never open wider than asked. Unlinked by agent_free(). */
gboolean agent_listen(Agent *agent, const char *path, const AgentSocketAccess *access,
                      GError **error);

/* Bytes from the host. */
void agent_host_feed(Agent *agent, const guint8 *data, gsize len);
/* The host went away: partial input is dropped and pending replies are not sent. */
void agent_host_reset(Agent *agent);

AgentState agent_get_state(const Agent *agent);
gboolean agent_is_busy(const Agent *agent);  /* a prepare or resume is under way */
guint agent_get_n_procs(const Agent *agent); /* registered processes */
gint agent_get_protocol(const Agent *agent); /* the version negotiated with the host */
/* Whether the dispatcher table has a handler for @command (tests check all of them). */
gboolean agent_command_has_handler(AgentCommand command);

/* The standby RDMA device (standby.h; @standby owned by the agent from here): made at each
 * prepare, removed at each resume and abort (in a thread), named in the inventory. */
typedef struct AgentStandby AgentStandby;
void agent_set_standby(Agent *agent, AgentStandby *standby);
/* Waits until the removal of the standby device (its thread) ended. */
void agent_standby_wait(Agent *agent);

/* ---- kernel uevents (uevent.c) ------------------------------------------------------------ */

/* Whether the kernel uevent @msg (@len bytes: "ACTION@DEVPATH", then NUL-separated KEY=VALUE
 * fields) is about an RDMA device: its SUBSYSTEM is infiniband or infiniband_verbs. Anything
 * malformed or longer than AGENT_UEVENT_MAX is not. */
gboolean agent_uevent_is_rdma(const guint8 *msg, gsize len);

typedef struct AgentUevent AgentUevent;

/* Listens to the kernel's uevents (NETLINK_KOBJECT_UEVENT) in the thread-default main context,
 * calls agent_devices_changed() for those about RDMA devices (and when events were lost), and
 * sets agent_set_device_events(). Owned; NULL with @error set when the socket cannot be had
 * (the agent then polls). */
AgentUevent *agent_uevent_new(Agent *agent, GError **error);
/* Calls @func(@data) too when RDMA devices changed (the peer directory, directory.h). */
void agent_uevent_set_func(AgentUevent *uevent, void (*func)(gpointer data), gpointer data);
void agent_uevent_free(AgentUevent *uevent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentUevent, agent_uevent_free)

/* ---- the host channel -------------------------------------------------------------------- */

typedef struct AgentChannel AgentChannel;

/* Finds the virtio-serial port named @name under @sysfs_root/class/virtio-ports and returns
 * its device path under @dev_root (owned). */
char *agent_channel_find_port(const char *sysfs_root, const char *dev_root, const char *name,
                              GError **error);

/* Opens the virtio-serial port @path. When no host is connected the port polls HUP; the
 * channel then stops watching it and looks again on host connect (SIGIO) or after
 * @retry_ms. Feeds @agent, and is set as its reply function. Owned. */
AgentChannel *agent_channel_new_port(Agent *agent, const char *path, guint retry_ms,
                                     GError **error);

/* Opens @path (a unix socket is connected to; "fd:N" uses the inherited fd N; anything else
 * is opened read-write). End of file calls @eof_func. Owned. */
AgentChannel *agent_channel_new_device(Agent *agent, const char *path, GSourceFunc eof_func,
                                       gpointer eof_data, GError **error);
void agent_channel_free(AgentChannel *channel);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentChannel, agent_channel_free)

/* ---- the verbs layer's broker (peer.c) --------------------------------------------------- */

typedef struct AgentPeer AgentPeer;

#define AGENT_VERBS_RUN_DIR_DEFAULT HV_RUN_DIR_DEFAULT

/* Listens on @listen ("ADDR:PORT", the control network) for libhotmig-verbs processes of
 * other guests and routes each to the local process owning the QP it names (registered under
 * @run_dir). Lives in the thread-default main context. Owned. */
AgentPeer *agent_peer_new(const char *listen, const char *run_dir, GError **error);
void agent_peer_free(AgentPeer *peer);
/* The ROUTE line's and a routed connection's deadlines (5 s, 60 s; the tests shorten them). */
void agent_peer_set_timeouts(AgentPeer *peer, guint route_ms, guint routed_ms);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AgentPeer, agent_peer_free)

G_END_DECLS
