/* The cluster's inventory: what every host of the configuration's [host NAME] groups has and
 * runs, read from its libvirt (through OrchVirtOps) and its hotmigd (GET /v1/host, through
 * OrchHotmigdClientOps), turned into a PolCluster for the planner or into the snapshot JSON that
 * `migrate-vm plan --snapshot` reads (docs/policies.md, docs/hotmigd.md).
 *
 * What is read, and from where:
 *   host   cpus, memory_mib     virNodeGetInfo (node_get_info)
 *          vfs, vfs_free        its hotmigd's GET /v1/host: pool size minus missing, free
 *   VM     vcpus, memory_mib    virDomainGetInfo: nrVirtCpu, maxMem (the most it may use)
 *          cpu_util             two cpuTime samples cpu_sample_ms apart:
 *                               delta cpuTime / (delta wall time x vcpus), within 0..1;
 *                               1.0 (as busy as it may be) when not measurable: no sampling,
 *                               the VM missing from the second sample, a clock that did not move
 *          vfs                  its live XML's VFs (xml_domain_find_vfs, stand-ins included)
 *          job                  its live XML's <metadata> job id (xml_domain_get_job); without
 *                               one, the job its agent's inventory names for its processes
 *                               (a running VM whose agent channel is connected, the channel
 *                               never taken from another client: orch_agent_processes_unforced),
 *                               or none
 * Host states: libvirt unreachable (or its answers fail) -> down (its VMs are unknown and
 * cannot be live-migrated); libvirt answers but the host's hotmigd does not -> quarantined (its
 * VMs run and count, but no VF can be leased there and no move can be started from there: it
 * takes no VM, and only a drain tries to move its VMs). The reason is kept (state_reason).
 * VF models are not told apart (GET /v1/host counts the pool as a whole): one model per host. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "common/config.h"
#include "engine/engine.h"
#include "policies/policies.h"

G_BEGIN_DECLS

#define HOTMIGD_INVENTORY_CPU_SAMPLE_MS_DEFAULT 500

typedef struct {
    char *name;    /* the [host NAME] */
    char *uri;     /* its libvirt URI */
    char *hotmigd; /* its hotmigd URL */
    PolHostState state;
    char *state_reason;        /* why the inventory found it down or quarantined; NULL when ok */
    gboolean hotmigd_asked;    /* its hotmigd was asked (not when its libvirt is down) */
    gboolean hotmigd_answered; /* ... and answered GET /v1/host */
    guint cpus;
    guint64 memory_mib;
    guint vfs_total; /* VFs of its pool that are there */
    guint vfs_free;
    guint vms; /* VMs running there */
} HotmigdInvHost;

typedef struct {
    char *name;
    char *host;
    guint vcpus;
    guint64 memory_mib;
    double cpu_util;       /* 0..1 */
    gboolean cpu_measured; /* FALSE: cpu_util is 1.0 because it could not be measured */
    guint vfs;
    char *job; /* the MPI job it runs a part of, or NULL */
} HotmigdInvVm;

typedef struct {
    GPtrArray *hosts;    /* HotmigdInvHost, in configuration order */
    GPtrArray *vms;      /* HotmigdInvVm, host by host */
    GPtrArray *warnings; /* char *: what could not be read but did not make a host down */
    gint64 taken;        /* unix seconds at the end */
    double took_ms;
} HotmigdInventory;

void hotmigd_inventory_free(HotmigdInventory *inv);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdInventory, hotmigd_inventory_free)

typedef struct {
    /* Required: the hosts are reached as a migration reaches them (orch_connector_open_virt()
     * and _vfd() with these options: their connector, their certificate files); stand-in VFs
     * are named by their alias_prefix ([migrate] vf-alias-prefix). */
    const OrchOptions *migrate_opts;
    guint cpu_sample_ms;       /* 0: cpu_util 1.0 everywhere, no second sample */
    GCancellable *cancellable; /* cuts the wait between the samples short (then FAILS) */
} HotmigdInventoryOptions;

/* Reads every host of @hosts (HmConfigHost, borrowed; each with its hotmigd URL resolved, NULL
 * when none is known: the host is then quarantined); blocking (call it
 * from a thread of its own): each host's libvirt twice, cpu_sample_ms apart, and its hotmigd
 * once. A host that does not answer is down or quarantined with the reason, not an error; a VM
 * seen on two hosts (the two sides of a migration under way) is counted where it runs, not
 * where it is paused. Fails only when cancelled (ORCH_ERROR_CANCELLED). Owned result. */
HotmigdInventory *hotmigd_inventory_collect(GPtrArray *hosts, const HotmigdInventoryOptions *opts,
                                            GError **error);

/* A VM that a running or pending move (of a schedule under way) brings to @host. */
typedef struct {
    const char *vm;
    const char *host;
} HotmigdInvArrival;

/* What the daemon adds to the inventory: host states set by alerts and evacuations (@states:
 * host name -> GINT_TO_POINTER(PolHostState), may be NULL), when VMs last moved (@moved: VM name
 * -> gint64 * unix seconds, may be NULL), the arrivals of the schedules under way (@arriving:
 * HotmigdInvArrival, may be NULL), and now. A host's state is the stronger of the inventory's and
 * @states' (ok < quarantined < evacuating < down). */
typedef struct {
    GHashTable *states;
    GHashTable *moved;
    GArray *arriving;
    gint64 now;
} HotmigdInventoryView;

/* The host's state in @view (its inventory state, raised by view->states). */
PolHostState hotmigd_inventory_host_state(const HotmigdInventory *inv, const HotmigdInvHost *host,
                                          const HotmigdInventoryView *view);

/* The inventory as a cluster for the planner (owned). Each arrival of @view holds, on its
 * destination, the room its VM will take there: a pinned stand-in named "VM/arriving/N" (libvirt
 * names hold no '/') with the VM's size, its VFs taken from the host's free ones; the VM itself
 * still counts on its source, where it runs until its move is done. So no plan made while
 * other schedules run can take room they count on (docs/policies.md). Fails only on what the
 * model refuses (names too long, ...), naming the host or VM. */
PolCluster *hotmigd_inventory_to_cluster(const HotmigdInventory *inv,
                                         const HotmigdInventoryView *view, GError **error);

/* The inventory in the snapshot format orch_snapshot_parse() reads (owned JSON text): hosts with
 * name, cpus, memory_mib, vfs, vfs_free, state (+ state_reason), VMs with name, host, vcpus,
 * memory_mib, cpu_util (+ cpu_measured), vfs, job and moved_ago_s when known; "taken" (RFC
 * 3339) and "warnings" at the top. Parsed back it gives the cluster hotmigd_inventory_to_cluster()
 * gives. */
char *hotmigd_inventory_format_snapshot(const HotmigdInventory *inv,
                                        const HotmigdInventoryView *view, gboolean pretty);

G_END_DECLS
