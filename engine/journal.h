/* The migration journal: what a migration is about to do, written durably before it does it,
 * so that a crashed or killed migrate-vm can be finished or undone later (--recover).
 *
 * Layout under the state directory (default /var/lib/hotmig):
 *   journal/DOMAIN.lock     flock()ed by the one process migrating or recovering DOMAIN
 *   journal/DOMAIN.journal  JSON lines, one per event; exists while a migration is unfinished
 * A finished migration's journal is removed.
 *
 * This file owns the record format, writing and reading it: the migration writes a begin
 * record (OrchJournalRecord) and then one step line before each step acts; recovery loads
 * them back into the same record (orch_journal_load()). Which lines are synced follows from
 * which ones the loader reads: keep journal_durable_steps true when it reads another. */
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

/* ---- the record ---------------------------------------------------------------------------- */

/* One VF of the migration. */
typedef struct {
    char *alias;
    char *kind;            /* xml_vf_kind word ("hostdev", ...) */
    char *host_pci;        /* its PCI address on the source, NULL for a stand-in */
    char *source_xml;      /* its device XML on the source */
    char *destination_xml; /* planned; once loaded, the last one journaled for a plug */
    char *lease_vf;        /* its lease on the destination (hotmigd), or NULL */
    char *lease_id;
    gboolean unplug_asked; /* loaded: a detach may have been sent (its removal may be under way) */
} OrchJournalVf;

void orch_journal_vf_free(OrchJournalVf *vf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchJournalVf, orch_journal_vf_free)

/* What recovery needs to finish or undo the migration (all owned). Loaded from a journal
 * without a begin line (the migration stopped before changing anything), everything is NULL. */
typedef struct {
    char *migration; /* its id */
    char *domain;
    char *source;      /* the hosts' libvirt URIs */
    char *destination;
    gboolean persistent;
    gboolean agent;
    char *agent_channel;
    char *hotmigd;        /* the destination's hotmigd URL, or NULL */
    GPtrArray *vfs;       /* OrchJournalVf */
    gboolean agent_asked; /* loaded: a prepare was (about to be) sent: the agent must be resumed */
} OrchJournalRecord;

void orch_journal_record_free(OrchJournalRecord *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchJournalRecord, orch_journal_record_free)

/* Writes @rec as the begin line; durably (fdatasync) before returning when @sync. Without,
 * the caller journals a durable step before anything acts: its sync makes this line durable
 * too (the file is append-only). */
gboolean orch_journal_begin(OrchJournal *journal, const OrchJournalRecord *rec, gboolean sync,
                            GError **error);

/* Writes a step line before the step acts (or once it happened): @step is one of "prepare",
 * "unplug" (@alias), "migrate", "migrated", "plug" (@alias, @xml: the device XML), "resume",
 * "undone" / "undo-failed" (@alias: the undo action), "end" (@alias: "ok", "undone", "kept for
 * recovery", "recovered"). @migration, @alias, @xml may be NULL. The steps recovery reads
 * ("prepare", "unplug", "plug") are durable (fdatasync) on return; the others are written
 * without a sync of their own (a crash may lose them; recovery does not need them). */
gboolean orch_journal_step(OrchJournal *journal, const char *migration, const char *step,
                           const char *alias, const char *xml, GError **error);

/* The record of @journal with what its steps say (owned). A truncated last line (a crash
 * mid-write) is ignored; any other bad line, or a begin line without a string it needs, is
 * an error naming the line. */
OrchJournalRecord *orch_journal_load(OrchJournal *journal, GError **error);

/* The migration is over (done or undone): removes the journal durably. */
gboolean orch_journal_finish(OrchJournal *journal, GError **error);

/* Domains that have an unfinished journal under @state_dir (owned strings, sorted). */
GPtrArray *orch_journal_list(const char *state_dir, GError **error);

G_END_DECLS
