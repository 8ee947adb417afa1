/* Running plans (run.c: HotmigdRun, and the HotmigdMoves it is made of; the scheduler runner): each
 * move is one orch_migrate(), driven from its source host, and a plan's moves go through the
 * scheduler core (PolSchedule: priority order, limits, skips after a failure). hotmigd uses it
 * (schedules.c, migrations.c); tests run it with a fake migrate function and a fake hotmigd
 * client.
 *
 *   HotmigdMove  one migration in a thread of its own: here (orch_migrate()) when its source is
 *             this host, else asked of the source host's hotmigd (POST /v1/migrations) and
 *             followed there (GET /v1/migrations/ID every poll_ms) until it ends
 *   HotmigdRun   a plan's moves through a PolSchedule: starts what may start, reports each end
 *
 * Both report on the thread-default main context of the thread that created them, never
 * before the call that created them returned. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "common/config.h"
#include "engine/engine.h"
#include "hotmigd/recovery.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* Runs one migration (orch_migrate(), or a test's fake). */
typedef gboolean (*HotmigdMigrateFunc)(const OrchOptions *opts, OrchReport **ret_report,
                                       GError **error);

#define HOTMIGD_MOVE_POLL_MS_DEFAULT 1000
#define HOTMIGD_MOVE_LOST_AFTER_S_DEFAULT 120
/* A move here that failed and kept its journal (an undo or a resume failed: what migrate-vm
 * ends with exit 3) is recovered by the move's thread as 'migrate-vm --recover' would, tried
 * again this often while it fails (a host's libvirtd restarting, say), for this long at most;
 * what is left then, the next start of hotmigd recovers. */
#define HOTMIGD_MOVE_RECOVER_RETRY_MS_DEFAULT 5000
#define HOTMIGD_MOVE_RECOVER_FOR_S 150

/* Where moves run and how. Everything borrowed: it must outlive the moves. */
typedef struct {
    const char *self; /* this host's [host NAME]: moves from it run here */
    GPtrArray *hosts; /* HmConfigHost with their hotmigd URLs resolved */
    /* A migration's options but domain, source_uri, dest_uri, hotmigd_url and cancellable,
     * which each move sets; another host's hotmigd is reached through them too
     * (orch_connector_open_hotmigd(), in the move's thread). */
    const OrchOptions *migrate_opts;
    HotmigdMigrateFunc migrate;
    HotmigdRecoverFunc recover; /* a move's kept journal; NULL: orch_recover() */
    guint recover_retry_ms;     /* 0: HOTMIGD_MOVE_RECOVER_RETRY_MS_DEFAULT */
    guint poll_ms;           /* remote moves: how often to ask; 0: HOTMIGD_MOVE_POLL_MS_DEFAULT */
    guint lost_after_s;      /* remote moves: failed after the source's hotmigd did not answer this
                              * long; 0: HOTMIGD_MOVE_LOST_AFTER_S_DEFAULT */
    PolScheduleShare *share; /* the running moves of every run of this env, for the limits
                              * (NULL: each run has its limits to itself) */
} HotmigdMoveEnv;

/* Waits @ms milliseconds, less when @cancellable (may be NULL) is cancelled: FALSE then. */
gboolean hotmigd_run_wait_ms(guint ms, GCancellable *cancellable);

/* The [host NAME] entry of @env, or NULL (borrowed). */
const HmConfigHost *hotmigd_run_move_env_find_host(const HotmigdMoveEnv *env, const char *name);

/* TRUE when @name is one of @env's hosts, else FALSE with ORCH_ERROR_NOT_FOUND naming them. */
gboolean hotmigd_run_move_env_check_host(const HotmigdMoveEnv *env, const char *name,
                                         GError **error);

typedef struct {
    gboolean ok;     /* the domain runs on the destination with its VFs */
    char *detail;    /* why it failed (and what recovered its kept journal), else NULL */
    char *report;    /* the migration's report (orch_report_format_json(), compact), or NULL
                      * when none was made (the source's hotmigd could not be asked) */
    char *driven_by; /* "here", or the source host's name */
    char *remote_id; /* the migration's id at the source's hotmigd, or NULL */
} HotmigdMoveResult;

typedef struct HotmigdMove HotmigdMove;
typedef void (*HotmigdMoveDone)(HotmigdMove *move, const HotmigdMoveResult *result, gpointer data);

/* Starts migrating @domain from host @from to host @to (names of @env->hosts) in a thread:
 * here when @from is @env->self, else through @from's hotmigd. @done is called once, on the
 * caller's context. @plan: the schedule's id, or NULL. Owned result: free it after @done, or
 * before to give up on it (a migration running here is cancelled and undone first). */
HotmigdMove *hotmigd_run_move_start(const HotmigdMoveEnv *env, const char *domain, const char *from,
                                    const char *to, const char *reason, const char *plan,
                                    HotmigdMoveDone done, gpointer data);
void hotmigd_run_move_free(HotmigdMove *move);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdMove, hotmigd_run_move_free)

/* The remote migration's id, once the source's hotmigd gave one (borrowed; NULL before). */
const char *hotmigd_run_move_get_remote_id(HotmigdMove *move);

/* ---- a plan's run --------------------------------------------------------------------------- */

typedef struct HotmigdRun HotmigdRun;

/* One move of a run, read-only for the caller. */
typedef struct {
    const PolScheduleMove *move; /* state, detail, times (borrowed from the schedule) */
    char *driven_by;             /* "here" or the source host's name; NULL before it started */
    char *remote_id;             /* its id at the source's hotmigd, or NULL */
    char *report;                /* its report (JSON), once it ended with one */
} HotmigdRunMove;

typedef enum {
    HOTMIGD_RUN_EVENT_STARTED,  /* @move started */
    HOTMIGD_RUN_EVENT_ENDED,    /* @move is done, failed or skipped */
    HOTMIGD_RUN_EVENT_FINISHED, /* every move ended (@move NULL) */
    HOTMIGD_RUN_EVENT_LAST,
} HotmigdRunEvent;

typedef void (*HotmigdRunFunc)(HotmigdRun *run, HotmigdRunEvent event, const HotmigdRunMove *move,
                               gpointer data);

/* A run of @migrations (PolMigration) on @cluster (not kept) with @limits and @opts, checked as
 * pol_schedule_new() does (ORCH_ERROR_INVALID naming the step of a plan that does not replay).
 * Nothing starts before hotmigd_run_start(). @id names the run in the moves' reasons. Owned. */
HotmigdRun *hotmigd_run_new(const HotmigdMoveEnv *env, const char *id, const char *reason,
                            const PolCluster *cluster, const GPtrArray *migrations,
                            const PolScheduleLimits *limits, const PolOptions *opts,
                            GError **error);

/* The moves of one MPI job side by side (an evacuation against a deadline) instead of one at a
 * time: pol_schedule_set_jobs_side_by_side(). Before hotmigd_run_start(). */
void hotmigd_run_set_jobs_side_by_side(HotmigdRun *run, gboolean side_by_side);

/* Starts the moves that may start, and the others as earlier ones end; @cb hears of each start
 * and end and of the end of the run (always later than this call). */
void hotmigd_run_start(HotmigdRun *run, HotmigdRunFunc cb, gpointer data);

/* Starts no more moves: the pending ones are skipped with @reason (told as ended); running
 * ones go on, and the run finishes when they end. Returns the VMs of the skipped moves (owned
 * array of owned strings). */
GPtrArray *hotmigd_run_stop_pending(HotmigdRun *run, const char *reason);

/* Another run sharing the limits ended a move: look again soon whether a move may start now.
 * Nothing when @run is not started yet or finished. */
void hotmigd_run_poke(HotmigdRun *run);

/* Gives up: running moves here are cancelled and undone, remote ones no longer followed. NULL-safe.
 */
void hotmigd_run_free(HotmigdRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdRun, hotmigd_run_free)

const char *hotmigd_run_get_id(const HotmigdRun *run);
gboolean hotmigd_run_is_finished(const HotmigdRun *run);
void hotmigd_run_get_progress(const HotmigdRun *run, PolScheduleProgress *ret_progress);
/* Every move (HotmigdRunMove, borrowed; the array too) in the schedule's order. */
const GPtrArray *hotmigd_run_get_moves(const HotmigdRun *run);

G_END_DECLS
