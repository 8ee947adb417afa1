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
    POL_POLICY_CONSOLIDATE, /* fewest hosts, then fewest migrations */
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
} PolOptions;

#define POL_BANDWIDTH_MIB_S_DEFAULT 1250.0 /* ~10 Gb/s */
#define POL_BALANCE_TOLERANCE_DEFAULT 0.05

/* Fills @opts with the defaults. */
void pol_options_init(PolOptions *opts);

typedef struct {
    char *vm;
    char *from;
    char *to;
    guint64 memory_mib;
    double duration_s; /* predicted: memory / bandwidth */
    gboolean extra;    /* a detour through a third host that breaks a cycle of moves */
} PolMigration;

typedef struct {
    PolPolicy policy;
    char *drained;          /* DRAIN: the host emptied; else NULL */
    GPtrArray *migrations;  /* PolMigration, in the order to run them */
    GPtrArray *hosts;       /* char *: the hosts with VMs after the plan, in cluster order */
    guint hosts_before;     /* hosts with VMs before the plan */
    guint hosts_used;       /* == hosts->len */
    guint lower_bound;      /* fewest hosts any placement needs (see docs/policies.md) */
    guint extra_moves;      /* migrations with extra == TRUE */
    double duration_s;      /* sum of the predicted durations */
    double max_load_before; /* highest host load (max over dimensions, 0..1) before */
    double max_load_after;  /* ... and after the plan */
    double plan_ms;         /* wall time spent planning (the only non-deterministic field) */
} PolPlan;

void pol_plan_free(PolPlan *plan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolPlan, pol_plan_free)

/* Packs the VMs onto the fewest hosts, then with the fewest migrations. Returns the plan
 * (owned) or NULL with @error set. */
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

/* The Martello-Toth L2 lower bound on the number of bins of capacity @capacity that can hold
 * @n_sizes items of the given sizes (each <= capacity). */
guint pol_lower_bound_l2(const guint64 *sizes, gsize n_sizes, guint64 capacity);

G_END_DECLS
