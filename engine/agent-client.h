/* The host side of the guest agent protocol (docs/design.md), over a guest channel of the
 * hypervisor adapter. Every byte from the guest is untrusted: lines are size-limited and
 * replies are checked before use. */
#pragma once

#include <json-glib/json-glib.h>

#include "engine/json.h"

#include "engine/virt.h"

G_BEGIN_DECLS

#define ORCH_AGENT_MAX_LINE (64 * 1024)

typedef struct OrchAgent OrchAgent;

/* Opens @channel of @domain on @virt (taken from another client that holds it: a killed
 * migration's) and runs the sync handshake, waiting at most @timeout_ms. Returns a new
 * OrchAgent (owned) or NULL with ORCH_ERROR_AGENT. */
OrchAgent *orch_agent_open(OrchVirt *virt, const char *domain, const char *channel,
                           guint timeout_ms, GError **error);
void orch_agent_free(OrchAgent *agent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAgent, orch_agent_free)

/* A request for orch_agent_open_with(): @args borrowed, may be NULL. */
typedef struct {
    const char *command;
    JsonObject *args;
} OrchAgentRequest;

/* orch_agent_open() that sends @reqs (@n_reqs, may be 0) in the same write as the handshake:
 * the agent answers the lines of the host in order, so one round trip carries them all. Their
 * replies are then read in order with orch_agent_reply(). The requests go again when the
 * handshake is retried on a fresh channel: they must change nothing in the guest. */
OrchAgent *orch_agent_open_with(OrchVirt *virt, const char *domain, const char *channel,
                                const OrchAgentRequest *reqs, guint n_reqs, guint timeout_ms,
                                GError **error);

/* The reply to the oldest request sent and not answered yet, waiting at most @timeout_ms:
 * its "return" object (owned), or NULL with an error as orch_agent_execute() says. A reply
 * that is missing, late or not what the protocol says drops the replies still expected (the
 * next command re-synchronizes first); an error reply keeps them. */
JsonObject *orch_agent_reply(OrchAgent *agent, guint timeout_ms, GError **error);

/* Runs @command with @args (borrowed, may be NULL) and waits at most @timeout_ms for the
 * reply. Returns the reply's "return" object (owned), or NULL with ORCH_ERROR_AGENT (an error
 * reply, a reply that is not what the protocol says) or ORCH_ERROR_TIMEOUT. After a timeout
 * the next call re-synchronizes first. */
JsonObject *orch_agent_execute(OrchAgent *agent, const char *command, JsonObject *args,
                               guint timeout_ms, GError **error);

/* ---- typed calls: what the engine asks of the guest, parsed here alone ------------------- */

#define ORCH_AGENT_MAX_DEVICES 64 /* RDMA devices of an inventory read; more is refused */
#define ORCH_AGENT_MAX_PORTS 64   /* ports of a device */
#define ORCH_AGENT_MAX_GIDS 256   /* GIDs of a port */

/* The agent's `info` (all owned). Members missing or of another type read as NULL / 0. */
typedef struct {
    char *version;   /* "0.1.0" */
    gint64 protocol; /* the protocol version the session speaks */
} OrchAgentInfo;

void orch_agent_info_free(OrchAgentInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAgentInfo, orch_agent_info_free)

/* One port of an RDMA device in the guest. */
typedef struct {
    char *link_layer; /* "InfiniBand", "Ethernet", or NULL */
    char **gids;      /* the GIDs as text, in order, up to the first that is not a string */
} OrchAgentPort;

/* One RDMA device in the guest. */
typedef struct {
    char *name;       /* "mlx5_0", or NULL */
    char *node_guid;  /* as the agent wrote it, or NULL */
    GPtrArray *ports; /* OrchAgentPort, in order */
} OrchAgentDevice;

/* The agent's `inventory` (protocol 2): the guest's RDMA devices and its registered processes. */
typedef struct {
    GPtrArray *devices;       /* OrchAgentDevice, in order */
    GPtrArray *processes;     /* OrchAgentProcess (orch_agent_processes_parse()), or NULL when
                               * they do not parse: then processes_error says why */
    GError *processes_error;
    /* its standby RDMA device's state ("absent", "ready", "down", "unavailable"), NULL for an
     * agent that has none configured or predates it: prepare's "standby" argument is sent
     * only to an agent that reports one (docs/design.md "Standby path") */
    char *standby_state;
} OrchAgentInventory;

void orch_agent_inventory_free(OrchAgentInventory *inv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAgentInventory, orch_agent_inventory_free)

/* The replies read into their structs (owned): pure, for the calls below and the fuzz target
 * agent-reply-fuzz. More devices, ports or GIDs than the limits above is ORCH_ERROR_AGENT. */
OrchAgentInfo *orch_agent_info_parse(JsonObject *ret, GError **error);
OrchAgentInventory *orch_agent_inventory_parse(JsonObject *ret, GError **error);

/* `info`, asking for protocol @protocol (0: without asking), waiting at most @timeout_ms. */
OrchAgentInfo *orch_agent_info(OrchAgent *agent, guint protocol, guint timeout_ms,
                               GError **error);

/* `inventory` (needs protocol 2: orch_agent_info() first), waiting at most @timeout_ms. */
OrchAgentInventory *orch_agent_inventory(OrchAgent *agent, guint timeout_ms, GError **error);

/* Opens the agent (orch_agent_open()) with `info` (protocol 2) and `inventory` sent in the
 * handshake's write: one round trip instead of three. NULL with @error when the handshake
 * failed. Otherwise the open agent (owned), and *ret_inv gets the inventory (owned) or NULL
 * with @inv_error saying why: info's error when info failed (the inventory's reply is then
 * not waited for: the agent re-synchronizes before its next command), else the inventory's.
 * Each reply is waited for at most @timeout_ms. */
OrchAgent *orch_agent_open_inventory(OrchVirt *virt, const char *domain, const char *channel,
                                     guint timeout_ms, OrchAgentInventory **ret_inv,
                                     GError **inv_error, GError **error);

/* {"timeout_ms": @timeout_ms} (owned). */
JsonObject *orch_agent_timeout_args(guint timeout_ms);

/* The processes listed in @member of a prepare/resume reply as "name[pid] (error)", comma-
 * separated, at most 16 (owned); *ret_count gets how many the list holds. */
char *orch_agent_process_list(JsonObject *ret, const char *member, guint *ret_count);

/* The bounds of a process's "standby" record (the agent's AGENT_STATS_*_MAX, docs/protocol.md) */
#define ORCH_AGENT_STANDBY_QPS_MAX 65536                                /* switched, paused */
#define ORCH_AGENT_STANDBY_COUNT_MAX ((G_GINT64_CONSTANT(1) << 53) - 1) /* sends, receives */
#define ORCH_AGENT_STANDBY_MS_MAX 600000                                /* ms */

/* The "standby" records of the processes listed in @member ("quiesced", "resumed") of a
 * prepare or resume reply @ret, summed into *ret_figures: switched, paused, sends and receives
 * added up, ms the longest of a process that had a standby device, used when one had. Pure:
 * for the engine and the fuzz target. No records (an older agent or layer) give used FALSE. A
 * record out of shape or over the bounds above, or more than ORCH_AGENT_MAX_PROCESSES listed,
 * is ORCH_ERROR_AGENT naming the member and the process; *ret_figures is then untouched. */
gboolean orch_agent_standby_parse(JsonObject *ret, const char *member,
                                  OrchStandbyFigures *ret_figures, GError **error);

/* What @figures say for a phase's detail (owned): the switch ("; standby: 3 connection(s)
 * switched, 1 paused until the resume, switch pause 42 ms") or, @back, the switch back (";
 * standby: carried 1234 sends and 1230 receives, switch-back pause 17 ms"); without the pause
 * when no connection switched; "" when not used. */
char *orch_agent_standby_detail(const OrchStandbyFigures *figures, gboolean back);

/* Both for a phase: the records of @member in @ret summed into *ret_figures (zero when out of
 * shape) and their detail, or "; standby figures left out: WHY" (the figures never fail a
 * move). Owned. */
char *orch_agent_standby_report(JsonObject *ret, const char *member, gboolean back,
                                OrchStandbyFigures *ret_figures);

/* Opens the agent of @domain on @virt and resumes it: processes reconnect. Resume is
 * idempotent in the agent, so undo and recovery may call it whatever happened before; but a
 * second resume after one that failed finds the processes running and reports none: do not
 * retry on ORCH_ERROR_FAILED. Fails with ORCH_ERROR_FAILED when the agent answered that a
 * process failed to resume (or its device never came up), ORCH_ERROR_AGENT (or BUSY,
 * TIMEOUT) when it did not answer. *ret_detail (owned) says how many resumed on which
 * device, and what the standby path did (orch_agent_standby_detail()); *ret_standby (may be
 * NULL) gets those figures. Standby records out of shape do not fail the resume: the detail
 * says they were left out, and used stays FALSE. */
gboolean orch_agent_resume(OrchVirt *virt, const char *domain, const char *channel,
                           guint agent_timeout_ms, guint resume_timeout_ms, char **ret_detail,
                           OrchStandbyFigures *ret_standby, GError **error);

/* The same on an agent opened already (orch_agent_open()). */
gboolean orch_agent_resume_open(OrchAgent *agent, guint agent_timeout_ms, guint resume_timeout_ms,
                                char **ret_detail, OrchStandbyFigures *ret_standby, GError **error);

/* ---- the processes of an `inventory` reply: jobs (issue 18) ----------------------------- */

#define ORCH_AGENT_MAX_PROCESSES 1024 /* processes of an inventory (AGENT_PROCS_MAX) */
#define ORCH_AGENT_MAX_PEERS 256      /* peers of a process (AGENT_PEERS_MAX) */
#define ORCH_AGENT_MAX_REFUSED 16     /* refused calls of a process (AGENT_REFUSED_MAX) */
#define ORCH_AGENT_MAX_TOKEN 64       /* bytes of a process name or a call name */
#define ORCH_AGENT_MAX_UNREGISTERED 64 /* unregistered device holders (AGENT_DEVICE_USERS_MAX) */

/* A remote QP a process is connected to: a move of its guest pauses that connection. */
typedef struct {
    char *gid; /* the remote port's GID, IPv6 text form as g_inet_address_to_string() makes it */
    guint qpn; /* < 2^24 */
} OrchAgentPeer;

/* One process registered with the agent (`inventory`'s "processes"), or one that holds a verbs
 * device open without having registered (its "unregistered": @unregistered TRUE, @device set,
 * no state, peers or refused calls), which a move would take the device from. */
typedef struct {
    gint pid;
    char *name;       /* 1..64 printable bytes */
    char *state;      /* running|quiescing|quiesced|resuming|failed */
    char *job;        /* the batch job as the guest sees it (1..64 printable bytes), or NULL;
                       * the domain's metadata is the host's record and wins */
    GPtrArray *peers; /* OrchAgentPeer, distinct, in the agent's order */
    guint peers_dropped;
    GPtrArray *refused; /* char *: calls a migration cannot carry */
    gboolean unregistered;
    char *device; /* unregistered: the device node it holds ("uverbs0") */
    guint more;   /* the last unregistered entry: how many more the agent left out */
} OrchAgentProcess;

void orch_agent_process_free(OrchAgentProcess *proc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAgentProcess, orch_agent_process_free)

/* Reads the "processes" of an inventory reply @ret into OrchAgentProcess (owned array), then its
 * "unregistered" (after them, flagged). Pure: for the engine and the fuzz target. An agent older
 * than the jobs report lists no "peers" or "refused": they read as empty; one older than the
 * device scan no "unregistered". Anything else out of shape, or over the limits above, is
 * ORCH_ERROR_AGENT naming the member. */
GPtrArray *orch_agent_processes_parse(JsonObject *ret, GError **error);

/* info (protocol 2) and inventory, sent in one write, waiting at most @timeout_ms for each
 * reply: the processes (owned). */
GPtrArray *orch_agent_processes(OrchAgent *agent, guint timeout_ms, GError **error);

/* The processes of @domain's agent on @virt (owned), asked as orch_agent_open_inventory() asks
 * (info and inventory in the handshake's write, each reply waited for at most @timeout_ms), but
 * without taking the channel from another client that holds it: while one does (a migration
 * under way), the adapter's error. For readers that must not disturb a migration (hotmigd's
 * inventory). The channel is closed again before it returns. */
GPtrArray *orch_agent_processes_unforced(OrchVirt *virt, const char *domain, const char *channel,
                                         guint timeout_ms, GError **error);

/* "name (pid N) used call, call; name2 ..." for the processes of @procs that made a call a
 * migration cannot carry, and "process 'name' (pid N) holds the RDMA device uverbs0 without the
 * hotmig verbs layer or libhotmig" for the unregistered ones (owned), or NULL when none. */
char *orch_agent_refused_summary(GPtrArray *procs);

/* How many of @procs registered with the agent (the unregistered left out). */
guint orch_agent_registered_count(GPtrArray *procs);

/* "name (pid N): gid qpn Q, ...; ..." for the processes of @procs that have peers (owned), at
 * most 8 peers each ("and N more"); *ret_count gets the number of peers in all. NULL when none. */
char *orch_agent_peers_summary(GPtrArray *procs, guint *ret_count);

G_END_DECLS
