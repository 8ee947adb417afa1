/* The start's recovery (recovery.c): the unfinished migration journals under the state
 * directory, recovered in a thread of its own while the daemon serves. */
#pragma once

#include <glib.h>

#include "engine/engine.h"

G_BEGIN_DECLS

/* Recovers the unfinished journals under opts->state_dir: orch_recover() or a test's fake
 * (called in a thread of its own). */
typedef gboolean (*HotmigdRecoverFunc)(const OrchOptions *opts, GPtrArray **ret_results,
                                       GError **error);

typedef struct HotmigdRecovery HotmigdRecovery;

/* Starts recovering, one domain at a time, the journals under @opts' state_dir (copied) with
 * @recover (NULL: orch_recover()): NULL when there is none (or they cannot be listed: warned).
 * When it is done, on the calling thread's default context, what it did is logged once and
 * *@slot is set to NULL (the recovery frees itself), unless hotmigd_recovery_forget() was
 * called before. */
HotmigdRecovery *hotmigd_recovery_start(const OrchOptions *opts, HotmigdRecoverFunc recover,
                                        HotmigdRecovery **slot);

/* The daemon is gone: the recovery runs on and, done, touches nothing of it. */
void hotmigd_recovery_forget(HotmigdRecovery *r);

G_END_DECLS
