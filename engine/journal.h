/* The migration journal: what a migration is about to do, written durably before it does it,
 * so that a crashed or killed migrate-vm can be finished or undone later (--recover).
 *
 * Layout under the state directory (default /var/lib/hotmig):
 *   journal/DOMAIN.lock     flock()ed by the one process migrating or recovering DOMAIN
 *   journal/DOMAIN.journal  JSON lines, one per event; exists while a migration is unfinished
 * A finished migration's journal is removed. */
#pragma once

#include <json-glib/json-glib.h>

#include "engine/engine.h"

G_BEGIN_DECLS

#define ORCH_JOURNAL_MAX_BYTES (4 * 1024 * 1024)
#define ORCH_STATE_DIR_DEFAULT "/var/lib/hotmig"

typedef struct OrchJournal OrchJournal;

/* Takes the per-domain lock (fails with ORCH_ERROR_BUSY naming the holder when another
 * process has it). With @create, refuses when an unfinished journal exists (it needs
 * --recover) and starts a new one; without, opens the existing one for recovery (fails with
 * ORCH_ERROR_NOT_FOUND when there is none). Owned result. */
OrchJournal *orch_journal_open(const char *state_dir, const char *domain, gboolean create,
                               GError **error);
/* Releases the lock; the journal file stays unless finished. NULL-safe. */
void orch_journal_close(OrchJournal *journal);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchJournal, orch_journal_close)

/* Appends @entry (borrowed; "time" is added) as one line and makes it durable (fsync) before
 * returning. */
gboolean orch_journal_append(OrchJournal *journal, JsonObject *entry, GError **error);

/* Convenience: appends {"event": @event} plus string pairs (key, value, ..., NULL). */
gboolean orch_journal_event(OrchJournal *journal, GError **error, const char *event, ...)
    G_GNUC_NULL_TERMINATED;

/* The migration is over (done or undone): removes the journal durably. */
gboolean orch_journal_finish(OrchJournal *journal, GError **error);

/* Every entry of the journal in order (owned array of owned JsonObject). A truncated last line
 * (a crash mid-write) is ignored; any other bad line is an error naming the line. */
GPtrArray *orch_journal_read(OrchJournal *journal, GError **error);

/* Domains that have an unfinished journal under @state_dir (owned strings, sorted). */
GPtrArray *orch_journal_list(const char *state_dir, GError **error);

G_END_DECLS
