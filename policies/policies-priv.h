/* hm-policies internals: the cluster model's storage and the planning problem built from it.
 * For the policies sources and the unit tests only. */
#pragma once

#include "policies/policies.h"

G_BEGIN_DECLS

typedef struct {
    guint model; /* index into PolCluster.models */
    guint total;
    gint free; /* < 0: total minus the VFs of the VMs on the host */
} PolHostVfs;

typedef struct {
    char *name;
    guint cpus;
    guint64 memory_mib;
    PolHostState state;
    GArray *vfs; /* PolHostVfs */
} PolHost;

typedef struct {
    char *name;
    guint host;
    guint vcpus;
    guint64 memory_mib;
    double cpu_util;
    guint vfs;
    guint vf_model;
    char *job; /* or NULL */
    gboolean pinned;
    gint64 moved_ago_s;
    gint priority;
    double dirty_mib_s;
} PolVm;

struct PolCluster {
    GPtrArray *hosts;          /* PolHost, in the order added */
    GHashTable *host_by_name;  /* name -> index + 1 */
    GPtrArray *vms;            /* PolVm */
    GHashTable *vm_by_name;    /* name -> index + 1 */
    GPtrArray *models;         /* char *; [0] is "" (the default model) */
    GHashTable *model_by_name; /* name -> index + 1 */
};

/* Dimensions of every demand/capacity vector: CPU (millicores), memory (MiB), then one per VF
 * model. All integers, so fitting is exact and plans are reproducible. */
#define POL_DIM_CPU 0
#define POL_DIM_MEM 1
#define POL_DIM_VF0 2

/* The planning problem: VMs grouped into units (a VM, or the VMs of one job on one host when
 * jobs are kept together), capacities and demands as flat arrays. */
typedef struct {
    const PolCluster *cluster;
    guint dims;
    guint n_hosts;
    guint n_vms;
    guint n_units;
    gint64 *cap;        /* n_hosts * dims: what the VMs may use */
    gint64 *vm_dem;     /* n_vms * dims */
    gint64 *unit_dem;   /* n_units * dims */
    guint *vm_unit;     /* n_vms */
    guint *unit_host;   /* n_units: where the unit runs */
    guint *unit_first;  /* n_units + 1: offsets into unit_vms */
    guint *unit_vms;    /* n_vms: VM indices grouped by unit */
    guint8 *unit_fixed; /* n_units: does not move (pinned, min stay, host down or quarantined) */
    guint8 *accepts;    /* n_hosts: may receive VMs (state ok) */
    guint8 *active;     /* n_hosts: not down */
} PolProblem;

PolProblem *pol_problem_new(const PolCluster *cluster, const PolOptions *opts);
void pol_problem_free(PolProblem *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolProblem, pol_problem_free)

/* Why VM @vm may not move under @opts, or NULL (owned). */
char *pol_vm_blocked_reason(const PolCluster *cluster, guint vm, const PolOptions *opts);

/* The lower bound on the hosts the problem's units need (docs/policies.md). */
guint pol_problem_lower_bound(const PolProblem *p);

/* The fewest migrations a consolidation of @p onto @k hosts needs (docs/policies.md), or
 * G_MAXUINT when no @k hosts can hold the VMs. */
guint pol_problem_migration_bound(const PolProblem *p, guint k);

/* Orders the moves that take each VM from its current host to @vm_final[vm] so that no host
 * exceeds a capacity at any step; when the remaining moves form cycles, one VM of a cycle
 * detours through a third host that has room (one extra move). Returns PolMigration (owned)
 * or NULL with POL_ERROR_NO_ROOM. */
GPtrArray *pol_moves_order(const PolProblem *p, const guint *vm_final, const PolOptions *opts,
                           GError **error);

G_END_DECLS
