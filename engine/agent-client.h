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
