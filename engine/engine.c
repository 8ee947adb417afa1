/* What engine.h gives every file of the engine: the error domain and the words of its enums.
 * The bottom of the engine: it calls no other file of it. */
#include "engine/engine.h"

G_DEFINE_QUARK(orch - error - quark, orch_error)

HM_ENUM_IMPL(orch_phase, OrchPhase, ORCH_PHASE_LAST, "connect", "inspect", "target-vf", "prepare",
             "unplug", "migrate", "plug", "resume")

HM_ENUM_IMPL(orch_status, OrchStatus, ORCH_STATUS_LAST, "pending", "ok", "failed", "skipped",
             "undone")

HM_ENUM_IMPL(orch_timeout_action, OrchTimeoutAction, ORCH_TIMEOUT_LAST, "suspend", "postcopy",
             "abort")
