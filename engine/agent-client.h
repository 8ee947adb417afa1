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

/* Opens @channel of @domain on @virt and runs the sync handshake, waiting at most
 * @timeout_ms. Returns a new OrchAgent (owned) or NULL with ORCH_ERROR_AGENT. */
OrchAgent *orch_agent_open(OrchVirt *virt, const char *domain, const char *channel,
                           guint timeout_ms, GError **error);
void orch_agent_free(OrchAgent *agent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAgent, orch_agent_free)

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

/* The agent's `inventory` (protocol 2): the guest's RDMA devices. */
typedef struct {
    GPtrArray *devices; /* OrchAgentDevice, in order */
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

/* {"timeout_ms": @timeout_ms} (owned). */
JsonObject *orch_agent_timeout_args(guint timeout_ms);

/* The processes listed in @member of a prepare/resume reply as "name[pid] (error)", comma-
 * separated, at most 16 (owned); *ret_count gets how many the list holds. */
char *orch_agent_process_list(JsonObject *ret, const char *member, guint *ret_count);

/* Opens the agent of @domain on @virt and resumes it: processes reconnect. Resume is
 * idempotent in the agent, so undo and recovery may call it whatever happened before.
 * Fails with ORCH_ERROR_AGENT when a process failed to resume. *ret_detail (owned) says how
 * many resumed on which device. */
gboolean orch_agent_resume(OrchVirt *virt, const char *domain, const char *channel,
                           guint agent_timeout_ms, guint resume_timeout_ms, char **ret_detail,
                           GError **error);

/* The same on an agent opened already (orch_agent_open()). */
gboolean orch_agent_resume_open(OrchAgent *agent, guint agent_timeout_ms, guint resume_timeout_ms,
                                char **ret_detail, GError **error);

G_END_DECLS
