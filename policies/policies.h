/* hm-policies: pure placement planning for a cluster of hosts with SR-IOV VFs. No I/O, no
 * libvirt, no JSON: the caller builds a PolCluster (from libvirt, a snapshot file, a
 * benchmark), asks for a plan, and formats or executes it. Depends on hm-common and GLib.
 *
 * Plans are deterministic: the same cluster (hosts and VMs added in the same order) and the
 * same options give the same plan, move for move. Only PolPlan.plan_ms is measured. */
#pragma once

#include <glib.h>

#include "common/common.h"

G_BEGIN_DECLS

#define POL_ERROR (pol_error_quark())
GQuark pol_error_quark(void);

typedef enum {
    POL_ERROR_FAILED,
    POL_ERROR_INVALID,   /* bad cluster description or options: names the field */
    POL_ERROR_NOT_FOUND, /* an unknown host or VM */
    POL_ERROR_NO_ROOM,   /* the VMs do not fit, or cannot be moved without overcommitting */
    POL_ERROR_BLOCKED,   /* a VM that must move is pinned or within its minimum stay */
    POL_ERROR_OVER_CAP,  /* no plan within opts->max_migrations */
    POL_ERROR_LAST,
} PolError;

typedef enum {
    POL_HOST_OK,          /* runs VMs and accepts new ones */
    POL_HOST_QUARANTINED, /* keeps its VMs, accepts none */
    POL_HOST_EVACUATING,  /* every movable VM leaves it in any plan */
    POL_HOST_DOWN,        /* its VMs cannot be live-migrated: left out of plans */
    POL_HOST_STATE_LAST,
} PolHostState;

HM_ENUM_DECL(pol_host_state, PolHostState)

typedef enum {
    POL_POLICY_CONSOLIDATE, /* fewest hosts, each freed host worth host_value migrations */
    POL_POLICY_DRAIN,       /* empty one host */
    POL_POLICY_BALANCE,     /* lower the most loaded host's load */
    POL_POLICY_LAST,
} PolPolicy;

HM_ENUM_DECL(pol_policy, PolPolicy)

/* ---- cluster model ----------------------------------------------------------------------- */

/* Limits on a cluster description (anything larger is rejected as invalid). */
#define POL_HOSTS_MAX 1000000
#define POL_VMS_MAX 10000000
#define POL_CPUS_MAX 100000                   /* per host or VM */
#define POL_MEMORY_MIB_MAX (G_GUINT64_CONSTANT(1) << 40) /* per host or VM */
#define POL_VFS_MAX 100000                    /* per host or VM, per model */
#define POL_NAME_MAX 256

typedef struct PolCluster PolCluster;

/* A new empty cluster (owned). */
PolCluster *pol_cluster_new(void);
void pol_cluster_free(PolCluster *cluster);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolCluster, pol_cluster_free)

/* Adds host @name with @cpus physical CPUs and @memory_mib of memory. Fails (and changes
 * nothing) on an empty, too long or duplicate name or a size out of range. */
gboolean pol_cluster_add_host(PolCluster *cluster, const char *name, guint cpus,
                              guint64 memory_mib, PolHostState state, GError **error);

/* Declares that host @host has @total VFs of model @model (NULL or "" is the default model),
 * of which @free are free; @free < 0 means "total minus the VFs of the VMs on the host".
 * VFs that are neither free nor held by a VM of the cluster stay reserved. */
gboolean pol_cluster_set_host_vfs(PolCluster *cluster, const char *host, const char *model,
                                  guint total, gint free, GError **error);

typedef struct {
    const char *name;
    const char *host;
    guint vcpus;
    guint64 memory_mib;
    double cpu_util;      /* demand as a fraction of the vCPUs, 0..1 */
    guint vfs;            /* VFs the VM holds */
    const char *vf_model; /* NULL or "": the default model */
    const char *job;      /* MPI job id, or NULL */
    gboolean pinned;      /* never moved by a plan */
    gint64 moved_ago_s;   /* seconds since the VM last migrated, < 0: never (or unknown) */
    gint priority;        /* higher: moved first among equals in an evacuation (default 0) */
    double dirty_mib_s;   /* memory dirtied per second (MiB/s) while it runs; 0: unknown */
} PolVmSpec;

/* Adds a VM (strings are copied). Fails, changing nothing, on an unknown host, a duplicate
 * name or a value out of range; the message names the field. */
gboolean pol_cluster_add_vm(PolCluster *cluster, const PolVmSpec *spec, GError **error);

guint pol_cluster_get_n_hosts(const PolCluster *cluster);
guint pol_cluster_get_n_vms(const PolCluster *cluster);

/* ---- planning ---------------------------------------------------------------------------- */

typedef struct {
    gboolean pack_by_vcpus;     /* CPU demand = allocated vCPUs, not vCPUs x cpu_util */
    gboolean keep_jobs_together; /* VMs of one job are placed on one host, moved together */
    guint min_stay_s;           /* a VM moved less than this ago is not moved (0: no limit) */
    double bandwidth_mib_s;     /* for predicted durations: memory / bandwidth */
    double balance_tolerance;   /* balance stops when max - min host load <= this (0..1) */
    guint max_moves;            /* balance: at most this many migrations (0: no limit) */
    guint host_value;           /* consolidate: a freed host is worth this many migrations */
    guint max_migrations;       /* consolidate: at most this many migrations (0: no limit) */
    guint cpu_allocation;       /* a host holds CPU demand up to its CPUs x this / 100 (0: 100) */
} PolOptions;

#define POL_BANDWIDTH_MIB_S_DEFAULT 1250.0 /* ~10 Gb/s */
#define POL_BALANCE_TOLERANCE_DEFAULT 0.05

#define POL_HOST_VALUE_MAX 1000000
#define POL_CPU_ALLOCATION_MAX 1600 /* percent: [scheduler] cpu-allocation's bound */

/* Fills @opts with the defaults (host_value, cpu_allocation: hotmig.conf's [scheduler] host-value
 * and cpu-allocation defaults). */
void pol_options_init(PolOptions *opts);

typedef struct {
    char *vm;
    char *from;
    char *to;
    guint64 memory_mib;
    double duration_s; /* predicted: memory / bandwidth (an evacuation adds its overhead) */
    gboolean extra;    /* a detour through a third host that breaks a cycle of moves */
    gint priority;     /* the scheduler starts higher first (planners leave 0) */
} PolMigration;

/* A copy of @m (owned). */
PolMigration *pol_migration_copy(const PolMigration *m);
void pol_migration_free(PolMigration *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolMigration, pol_migration_free)

/* One plan the consolidation found: with so many hosts, so many migrations and so much memory
 * moved (detours left out), and the migration lower bound at that many hosts (G_MAXUINT: not
 * computed, see docs/policies.md). */
typedef struct {
    guint hosts;
    guint migrations;
    guint64 moved_mib;
    guint migration_bound;
} PolFrontPoint;

typedef struct {
    PolPolicy policy;
    char *drained;          /* DRAIN: the host emptied; else NULL */
    GPtrArray *migrations;  /* PolMigration, in the order to run them */
    GPtrArray *hosts;       /* char *: the hosts with VMs after the plan, in cluster order */
    guint hosts_before;     /* hosts with VMs before the plan */
    guint hosts_used;       /* == hosts->len */
    guint lower_bound;      /* fewest hosts any placement needs (see docs/policies.md) */
    guint extra_moves;      /* migrations with extra == TRUE */
    guint64 moved_mib;      /* memory of the VMs migrated, detours included */
    guint migration_bound;  /* CONSOLIDATE: fewest migrations any plan on hosts_used hosts needs */
    guint host_value;       /* CONSOLIDATE: the options' host_value and max_migrations */
    guint max_migrations;
    GArray *front;          /* CONSOLIDATE: PolFrontPoint, fewest hosts first, none worse than
                             * another on all three counts; else NULL */
    guint front_chosen;     /* index of the plan's point in front */
    double duration_s;      /* sum of the predicted durations */
    double max_load_before; /* highest host load (max over dimensions, 0..1) before */
    double max_load_after;  /* ... and after the plan */
    double plan_ms;         /* wall time spent planning (the only non-deterministic field) */
} PolPlan;

void pol_plan_free(PolPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolPlan, pol_plan_free)

/* Consolidates: among the plans found for each number of hosts (the front), the one with the
 * lowest host_value x hosts + migrations, within max_migrations, less memory moved breaking
 * ties (docs/policies.md). Fails with POL_ERROR_INVALID naming the hosts already over a
 * capacity, POL_ERROR_OVER_CAP when no plan is within max_migrations (naming the VMs that must
 * move), POL_ERROR_NO_ROOM when the VMs fit nowhere. Returns the plan (owned). */
PolPlan *pol_plan_consolidate(const PolCluster *cluster, const PolOptions *opts,
                              GError **error);

/* Moves every VM off @host, onto the hosts already fullest first. Fails with
 * POL_ERROR_BLOCKED naming a VM that may not move, or POL_ERROR_NO_ROOM. */
PolPlan *pol_plan_drain(const PolCluster *cluster, const char *host, const PolOptions *opts,
                        GError **error);

/* Moves VMs from the most to the least loaded hosts until their loads are within
 * opts->balance_tolerance or no move helps. */
PolPlan *pol_plan_balance(const PolCluster *cluster, const PolOptions *opts, GError **error);

/* Replays @plan on @cluster and checks each step: every VM named exists and is where the
 * move says, no host ever exceeds a capacity, no destination is unavailable, no pinned VM
 * moves. Returns FALSE with POL_ERROR_INVALID describing the first bad step. */
gboolean pol_plan_verify(const PolCluster *cluster, const PolPlan *plan, const PolOptions *opts,
                         GError **error);

/* Sets *@ret_bound to the fewest migrations any consolidation of @cluster onto @hosts hosts
 * needs (docs/policies.md, "Migration lower bound"; @opts NULL: the defaults). Fails with
 * POL_ERROR_NO_ROOM, *@ret_bound untouched, when no placement on @hosts hosts can exist (more
 * hosts must keep VMs, or the kept hosts can never hold the others' VMs). */
gboolean pol_cluster_migration_bound(const PolCluster *cluster, const PolOptions *opts,
                                     guint hosts, guint *ret_bound, GError **error);

/* The Martello-Toth L2 lower bound on the number of bins of capacity @capacity that can hold
 * @n_sizes items of the given sizes (each <= capacity). */
guint pol_lower_bound_l2(const guint64 *sizes, gsize n_sizes, guint64 capacity);

/* ---- host alerts ------------------------------------------------------------------------- */

/* What an alert about a host asks for, weakest first (docs/policies.md, "Host alerts"). */
typedef enum {
    POL_SEVERITY_QUARANTINE, /* the host accepts no new VMs */
    POL_SEVERITY_EVACUATE,   /* every movable VM leaves it */
    POL_SEVERITY_URGENT,     /* ... before the deadline: see pol_evacuation_order() */
    POL_SEVERITY_LAST,
} PolSeverity;

HM_ENUM_DECL(pol_severity, PolSeverity)

#define POL_ALERT_KEY_MAX 512        /* bytes of a dedup key */
#define POL_ALERTS_PER_HOST_MAX 1000 /* active alerts of one host */

/* One event from a failure-prediction input (hotmigd/alert-parse.c reads them). */
typedef struct {
    char *host;
    PolSeverity severity;
    double confidence; /* 0..1 */
    gint64 deadline;   /* unix seconds by which the host may fail; 0: none */
    char *source;      /* "exec:NAME", "socket", "alertmanager" */
    char *key;         /* the same alert again has the same key (per host): an Alertmanager
                        * fingerprint, the source and alert name, ... */
    gboolean resolved; /* the alert is over */
    gint64 received;   /* unix seconds; 0: when it is applied */
} PolAlertEvent;

/* A new event (owned): every field zero or NULL but confidence 1.0. */
PolAlertEvent *pol_alert_event_new(void);
/* A deep copy of @event (owned). */
PolAlertEvent *pol_alert_event_copy(const PolAlertEvent *event);
void pol_alert_event_free(PolAlertEvent *event);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolAlertEvent, pol_alert_event_free)

typedef enum {
    POL_ALERT_ACTION_NONE,       /* nothing to do: ignored, merged, recorded, or already done */
    POL_ALERT_ACTION_QUARANTINE, /* mark the host quarantined */
    POL_ALERT_ACTION_EVACUATE,   /* mark it evacuating and start its evacuation (never twice) */
    POL_ALERT_ACTION_LIFT,       /* every alert of the host is resolved: it is ok again */
    POL_ALERT_ACTION_LAST,
} PolAlertActionKind;

HM_ENUM_DECL(pol_alert_action_kind, PolAlertActionKind)

typedef struct {
    PolAlertActionKind kind;
    char *host;
    PolHostState state;   /* the host's state in the book afterwards: ok, quarantined, evacuating */
    PolSeverity severity; /* the strongest active alert of the host (quarantine when none) */
    gint64 deadline;      /* the earliest deadline of its active alerts; 0: none */
    gboolean merged;      /* the event repeated or updated an active alert (same key) */
    char *reason;         /* one line for the log: what the event did and why */
} PolAlertAction;

void pol_alert_action_free(PolAlertAction *action);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolAlertAction, pol_alert_action_free)

/* The active alerts of every host and the state they put the host in. Pure: time is a
 * parameter, nothing is read or written outside it. */
typedef struct PolAlertBook PolAlertBook;

/* A new empty book (owned). Firing events with a confidence below @min_confidence (0..1) are
 * ignored. */
PolAlertBook *pol_alert_book_new(double min_confidence);
void pol_alert_book_free(PolAlertBook *book);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolAlertBook, pol_alert_book_free)

/* Applies @event at unix time @now and sets *@ret_action (owned) to what the caller must do.
 * Duplicates (same host and key) are merged: strongest severity, highest confidence, earliest
 * deadline; a repeat that changes nothing gives NONE, "merged". Host states: ok ->
 * quarantined -> evacuating, back to ok (LIFT) once every alert of the host is resolved and
 * no evacuation runs. EVACUATE is returned at most once until
 * pol_alert_book_evacuation_done(). Fails with POL_ERROR_INVALID (the book unchanged) on an
 * invalid event (empty host or key, confidence outside 0..1, ...) or when the host has
 * POL_ALERTS_PER_HOST_MAX active alerts. Unknown hosts are the caller's business. */
gboolean pol_alert_book_apply(PolAlertBook *book, const PolAlertEvent *event, gint64 now,
                              PolAlertAction **ret_action, GError **error);

/* The evacuation of @host has ended (@ok: every VM left). The host stays quarantined while
 * it has active alerts (a new alert, not a repeat, may start another evacuation), else it is
 * lifted (LIFT). Fails with POL_ERROR_INVALID when no evacuation of @host runs. */
gboolean pol_alert_book_evacuation_done(PolAlertBook *book, const char *host, gboolean ok,
                                        gint64 now, PolAlertAction **ret_action, GError **error);

/* The state the alerts put @host in (POL_HOST_OK for a host the book does not know). */
PolHostState pol_alert_book_get_state(const PolAlertBook *book, const char *host);

/* Copies of the active alerts (PolAlertEvent, owned array) of @host, or of every host when
 * @host is NULL: hosts in the order first seen, each host's alerts in the order received. */
GPtrArray *pol_alert_book_list(const PolAlertBook *book, const char *host);

/* ---- evacuation before a deadline -------------------------------------------------------- */

typedef struct {
    double bandwidth_mib_s;      /* per migration; <= 0: POL_BANDWIDTH_MIB_S_DEFAULT */
    double overhead_s;           /* added to every move: the phases other than the copy */
    double dirty_mib_s_per_vcpu; /* a VM without dirty_mib_s dirties this x vcpus x cpu_util */
    guint concurrency; /* migrations off the host at a time, 1..POL_EVAC_CONCURRENCY_MAX */
    gint priority;     /* given to every migration of the ordered plan */
} PolEvacOptions;

/* The phases other than the memory copy took about 2 s in docs/benchmarks.md. */
#define POL_EVAC_OVERHEAD_S_DEFAULT 2.0
#define POL_EVAC_CONCURRENCY_MAX 1024

/* Fills @opts with the defaults: default bandwidth, 2 s overhead, no dirty estimate,
 * concurrency 1, priority 0. */
void pol_evac_options_init(PolEvacOptions *opts);

typedef struct {
    const PolMigration *migration; /* borrowed from PolEvacuation.plan */
    guint slot;                    /* which of the concurrent migrations runs it */
    double start_s;                /* predicted, seconds after now */
    double finish_s;               /* predicted, seconds after now */
    gboolean late;                 /* finishes after the deadline */
} PolEvacMove;

typedef struct {
    PolPlan *plan;    /* the drain plan reordered (owned): migrations in the order to start
                       * them, duration_s predicted with the overhead, priority set */
    GPtrArray *moves; /* PolEvacMove (owned), one per migration of plan, same order */
    GPtrArray *late;  /* PolEvacMove (borrowed from moves): those predicted to miss the
                       * deadline, in start order; empty without a deadline */
    guint concurrency;
    gint64 now;        /* unix seconds: the times above count from here */
    gint64 deadline;   /* unix seconds; 0: none */
    double makespan_s; /* predicted end of the last move, seconds after now */
} PolEvacuation;

void pol_evacuation_free(PolEvacuation *evac);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolEvacuation, pol_evacuation_free)

/* The predicted duration of migrating VM @vm of @cluster: memory / (bandwidth - dirty rate),
 * the denominator at least bandwidth / 10, plus the overhead. -1 for an unknown VM. */
double pol_evacuation_predict(const PolCluster *cluster, const char *vm,
                              const PolEvacOptions *opts);

/* Orders the moves of @drain (a plan from pol_plan_drain() on @cluster) to save the most VMs
 * before @deadline (unix seconds, 0: none) when @opts->concurrency migrations run at a time
 * from @now: shortest predicted first, each on the first free slot (equal durations: higher
 * VM priority first, then VMs of one job together, then by name); when that leaves some late
 * and several slots run, a first-fit-decreasing packing of the shortest into the slots, if it
 * saves more (docs/policies.md). Lists the VMs predicted to finish after the deadline. Any
 * order of a drain plan is safe: its destinations only receive. Fails with POL_ERROR_INVALID when @drain is not a drain plan of @cluster or an
 * option is out of range. Returns the evacuation (owned). */
PolEvacuation *pol_evacuation_order(const PolCluster *cluster, const PolPlan *drain,
                                    const PolEvacOptions *opts, gint64 now, gint64 deadline,
                                    GError **error);

/* ---- running a plan: the scheduler ------------------------------------------------------- */

typedef struct {
    guint per_host_out; /* migrations leaving one host at once; 0: no limit */
    guint per_host_in;  /* migrations arriving at one host at once; 0: no limit */
    guint total;        /* migrations in the cluster at once; 0: no limit */
} PolScheduleLimits;

typedef enum {
    POL_MOVE_PENDING, /* not started */
    POL_MOVE_RUNNING,
    POL_MOVE_DONE,
    POL_MOVE_FAILED,  /* detail: the engine's message */
    POL_MOVE_SKIPPED, /* detail: why it can no longer run */
    POL_MOVE_STATE_LAST,
} PolMoveState;

HM_ENUM_DECL(pol_move_state, PolMoveState)

/* One migration of a schedule. Owned by the schedule; read-only for the caller. */
typedef struct {
    guint index; /* position in the schedule's order */
    char *vm;
    char *from;
    char *to;
    char *job; /* its VM's job id, or NULL */
    double duration_s;
    gint priority;
    gboolean extra;
    PolMoveState state;
    char *detail;    /* FAILED, SKIPPED: why; else NULL */
    gint64 started;  /* the @now it started at; 0: not started */
    gint64 finished; /* the @now it ended at (done, failed, skipped); 0: not ended */
} PolScheduleMove;

typedef struct {
    guint total;
    guint pending;
    guint running;
    guint done;
    guint failed;
    guint skipped;
} PolScheduleProgress;

typedef struct PolSchedule PolSchedule;

/* A schedule (owned) of @migrations (PolMigration: a plan's migrations, in their order) on
 * @cluster, which it does not keep. The schedule's order is by priority, higher first, equal
 * priorities in the given order; that order must replay on @cluster without overcommitting
 * any host (pol_plan_verify()), else POL_ERROR_INVALID names the step. @opts as for the plan
 * (NULL: defaults); @limits NULL: none. */
PolSchedule *pol_schedule_new(const PolCluster *cluster, const GPtrArray *migrations,
                              const PolScheduleLimits *limits, const PolOptions *opts,
                              GError **error);
void pol_schedule_free(PolSchedule *sched);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolSchedule, pol_schedule_free)

/* @side_by_side FALSE (the default): the moves of one MPI job (VMs with the same job id) run
 * one at a time, other moves taking the free places meanwhile. TRUE: side by side like any
 * others (an evacuation against a deadline, whose order and predictions assume it; see
 * docs/policies.md). Call it before the first pol_schedule_next(). */
void pol_schedule_set_jobs_side_by_side(PolSchedule *sched, gboolean side_by_side);

/* The running moves of several schedules (a daemon's plans and evacuations side by side),
 * counted per source and destination host name and in all: the limits of each schedule that
 * shares it apply to the moves of all of them together. Owned; must outlive its schedules. */
typedef struct PolScheduleShare PolScheduleShare;

PolScheduleShare *pol_schedule_share_new(void);
void pol_schedule_share_free(PolScheduleShare *share);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolScheduleShare, pol_schedule_share_free)

/* @sched counts its running moves in @share (borrowed) and starts a move only when its limits
 * allow it counting every move there. Call it before the first pol_schedule_next(). */
void pol_schedule_set_share(PolSchedule *sched, PolScheduleShare *share);

/* How many moves counted in @share run now (all of them, when @host is NULL; else those
 * leaving @host when @leaving, those arriving there otherwise). */
guint pol_schedule_share_running(const PolScheduleShare *share, const char *host,
                                 gboolean leaving);

/* Starts, at unix time @now, every move that may start: in the schedule's order, a move
 * starts when its VM is where the move begins (its earlier moves done), no earlier move
 * still waits to arrive at the same host, its destination has room for it now (counting the
 * VMs arriving there and still counting those leaving until their moves are done), and the
 * limits allow it. A move whose VM is in a job (a job id) with a move running, here or in a
 * schedule sharing @sched's share, waits (unless pol_schedule_set_jobs_side_by_side()),
 * holding its room on the destination; the moves after it may start instead. Sets *@ret_moves (may be NULL) to an owned array of the started moves
 * (PolScheduleMove, borrowed from the schedule) and returns how many started. */
guint pol_schedule_next(PolSchedule *sched, gint64 now, GPtrArray **ret_moves);

/* Records the end of running move @move (from pol_schedule_next()): done when @ok, else
 * failed with @detail. A failure stops no other move, but the moves that can no longer run
 * are skipped at once with the reason: the later moves of the same VM, and moves into a host
 * that will not have room since a move out of it failed. Sets *@ret_skipped (may be NULL) to
 * an owned array of the moves skipped now (borrowed). */
void pol_schedule_done(PolSchedule *sched, const PolScheduleMove *move, gboolean ok,
                       const char *detail, gint64 now, GPtrArray **ret_skipped);

/* Skips every pending move with @reason (an evacuation re-planned for an earlier deadline);
 * running moves go on. Sets *@ret_skipped (may be NULL) to an owned array of them (borrowed). */
void pol_schedule_skip_pending(PolSchedule *sched, const char *reason, gint64 now,
                               GPtrArray **ret_skipped);

/* Nothing pending or running: every move is done, failed or skipped. */
gboolean pol_schedule_is_finished(const PolSchedule *sched);

void pol_schedule_get_progress(const PolSchedule *sched, PolScheduleProgress *ret_progress);

/* Every move (PolScheduleMove, borrowed; the array too) in the schedule's order: the report. */
const GPtrArray *pol_schedule_get_moves(const PolSchedule *sched);

G_END_DECLS
