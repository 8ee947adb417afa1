/* The hypervisor adapter: everything the orchestrator asks of a host, as a table of
 * operations. virt-libvirt.c is the only file that talks to libvirt; tests bring a fake;
 * virt-fault.c wraps any adapter to fail chosen calls (fault injection).
 *
 * Every operation follows the house error rules: it returns FALSE/NULL and sets @error exactly
 * when it fails; domains are named by their libvirt name. */
#pragma once

#include <glib.h>

#include "common/common.h"
#include "engine/engine.h"
#include "xml/xml.h"

G_BEGIN_DECLS

typedef struct OrchVirtChannel OrchVirtChannel;

/* What a finished migration reports (from libvirt's job statistics). */
typedef struct {
    guint64 data_bytes;   /* memory transferred */
    guint64 downtime_ms;  /* the guest's pause at the switch-over */
    guint64 total_ms;     /* the job as libvirt timed it */
    gboolean have_stats;  /* FALSE when the hypervisor did not report them */
    char event[128];      /* what the timeout or postcopy_after did ("" when nothing) */
} OrchMigrateStats;

typedef struct {
    const char *migrate_uri; /* hypervisor data URI (tcp://host:port) or NULL */
    guint64 bandwidth_mib;   /* MiB/s, 0 = unlimited */
    gboolean persistent;     /* VIR_MIGRATE_PERSIST_DEST */
    gboolean undefine_source;
    guint parallel;          /* VIR_MIGRATE_PARALLEL with this many connections, 0 = off */
    gboolean auto_converge;  /* VIR_MIGRATE_AUTO_CONVERGE */
    gboolean postcopy;       /* VIR_MIGRATE_POSTCOPY: allows virDomainMigrateStartPostCopy */
    guint postcopy_after_ms; /* start post-copy this long after the job began, 0 = never */
    gboolean postcopy_after_precopy; /* start post-copy once the first pre-copy pass is done */
    gboolean tls;            /* VIR_MIGRATE_TLS: the migration data encrypted */
    guint timeout_ms;        /* then timeout_action (virsh migrate --timeout), 0 = no limit */
    OrchTimeoutAction timeout_action;
    /* Called from another thread about once a second while the job runs; may be NULL. */
    void (*progress)(guint64 processed_bytes, guint64 total_bytes, gpointer opaque);
    gpointer progress_opaque;
} OrchMigrateParams;

typedef enum {
    ORCH_VIRT_DOMAIN_MISSING, /* not defined on this host */
    ORCH_VIRT_DOMAIN_INACTIVE, /* defined, not running here (e.g. after migrating away) */
    ORCH_VIRT_DOMAIN_RUNNING,  /* running or paused here */
    ORCH_VIRT_DOMAIN_LAST,
} OrchVirtDomainState;

/* The host itself (virNodeGetInfo). */
typedef struct {
    guint cpus;         /* active CPUs */
    guint64 memory_kib; /* memory */
} OrchVirtNodeInfo;

/* One running domain as the inventory sees it (virDomainGetInfo, and its live XML). */
typedef struct {
    char *name;
    guint vcpus;
    guint64 memory_kib;  /* the most it may use (maxMem): what a destination must hold */
    guint64 cpu_time_ns; /* CPU time used so far, all vCPUs together */
    gint64 sampled_us;   /* g_get_monotonic_time() when cpu_time_ns was read */
    gboolean paused;     /* paused (e.g. the incoming side of a migration), not running */
    char *xml;           /* live XML (owned), when asked for; else NULL */
} OrchVirtDomainInfo;

void orch_virt_domain_info_free(OrchVirtDomainInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVirtDomainInfo, orch_virt_domain_info_free)

typedef void (*OrchVirtMigratedInFunc)(gpointer opaque);

typedef struct {
    /* Live domain state on this host. */
    gboolean (*domain_state)(OrchVirt *virt, const char *domain, OrchVirtDomainState *ret_state,
                             GError **error);
    /* Is the domain persistent (defined) here? */
    gboolean (*domain_is_persistent)(OrchVirt *virt, const char *domain, gboolean *ret_persistent,
                                     GError **error);
    /* The live domain XML (owned). */
    char *(*domain_get_xml)(OrchVirt *virt, const char *domain, GError **error);
    /* Asks the guest to release device @alias and waits, at most @timeout_ms, until the
     * hypervisor reports it removed. @config: remove it from the persistent definition too. */
    gboolean (*device_detach)(OrchVirt *virt, const char *domain, const char *alias,
                              gboolean config, guint timeout_ms, GError **error);
    /* Hot-plugs the device described by @device_xml. */
    gboolean (*device_attach)(OrchVirt *virt, const char *domain, const char *device_xml,
                              gboolean config, GError **error);
    /* Live peer-to-peer migration of @domain from this host to @dest_uri. Blocks until done;
     * fills @ret_stats on success. On failure the domain still runs here. */
    gboolean (*migrate)(OrchVirt *virt, const char *domain, const char *dest_uri,
                        const OrchMigrateParams *params, OrchMigrateStats *ret_stats,
                        GError **error);
    /* Aborts the domain's running job (a migration). TRUE also when no job runs. */
    gboolean (*domain_abort_job)(OrchVirt *virt, const char *domain, GError **error);
    /* Calls @fn(@opaque) once, from another thread, when @domain resumes on this host at the
     * end of an incoming migration (its switch-over: it runs here from then on, while the
     * source's side of the migration still ends). Returns the watch (> 0) for unwatch(); once it
     * is gone, maybe after unwatch() returned, @destroy(@opaque). 0 with @error when it cannot
     * be set up: then @destroy is not called. May be NULL (no such watch). */
    guint (*watch_migrated_in)(OrchVirt *virt, const char *domain, OrchVirtMigratedInFunc fn,
                               gpointer opaque, GDestroyNotify destroy, GError **error);
    void (*unwatch)(OrchVirt *virt, guint watch);
    /* Opens the guest channel @name of @domain (a byte stream). @force: taken from another
     * client that holds it (a migration's, maybe a dead one's); otherwise an error while
     * another client holds it. Owned result. */
    OrchVirtChannel *(*channel_open)(OrchVirt *virt, const char *domain, const char *name,
                                     gboolean force, GError **error);
    /* Sends all of @len bytes before @deadline. */
    gboolean (*channel_send)(OrchVirtChannel *chan, const void *buf, gsize len,
                             HmDeadline deadline, GError **error);
    /* Receives at most @len bytes; waits until at least one byte arrived or @deadline
     * (HM_COMMON_ERROR_TIMEOUT). Returns the count, 0 at end of stream, -1 on error. */
    gssize (*channel_recv)(OrchVirtChannel *chan, void *buf, gsize len, HmDeadline deadline,
                           GError **error);
    void (*channel_close)(OrchVirtChannel *chan);
    /* Node device XML (virNodeDeviceGetXMLDesc) of every PCI device on the host, as a new
     * GPtrArray of owned strings. */
    GPtrArray *(*nodedev_list_pci_xml)(OrchVirt *virt, GError **error);
    /* Live XML of every running domain on the host (owned strings). */
    GPtrArray *(*domain_list_xml)(OrchVirt *virt, GError **error);
    /* Can this host run a domain with @needs? Asks the hypervisor for its capabilities for the
     * domain's type, arch, machine and emulator and, when @needs has a <cpu>, whether its CPU
     * can provide that one (virConnectCompareHypervisorCPU). Sets *ret_capable and
     * *ret_detail (owned: why not, or what was compared); fails only when the question cannot
     * be asked. */
    gboolean (*domain_capable)(OrchVirt *virt, const XmlDomainNeeds *needs,
                               gboolean *ret_capable, char **ret_detail, GError **error);
    /* The host's CPUs and memory. */
    gboolean (*node_get_info)(OrchVirt *virt, OrchVirtNodeInfo *ret_info, GError **error);
    /* Every running domain of the host (new array of OrchVirtDomainInfo), with its live XML
     * when @with_xml. A domain that ends while being read is left out. */
    GPtrArray *(*domain_list_info)(OrchVirt *virt, gboolean with_xml, GError **error);
    void (*free)(OrchVirt *virt);
} OrchVirtOps;

/* Every adapter's handle starts with this. */
struct OrchVirt {
    const OrchVirtOps *ops;
    char *uri;   /* as given by the user */
    char *label; /* "source" or "destination": names the host in messages and fault specs */
};

/* A channel handle starts with this. */
struct OrchVirtChannel {
    OrchVirt *virt; /* borrowed */
};

void orch_virt_free(OrchVirt *virt);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVirt, orch_virt_free)

void orch_virt_channel_close(OrchVirtChannel *chan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVirtChannel, orch_virt_channel_close)

/* Helpers for adapters: fill the common part. */
void orch_virt_init(OrchVirt *virt, const OrchVirtOps *ops, const char *uri, const char *label);
void orch_virt_clear(OrchVirt *virt);

/* ---- the calls: each operation of the table, through one function (virt.c) that checks its
 * arguments, logs it (debug) and says "cannot" for an operation the adapter lacks. Callers use
 * these, never the table. */

gboolean orch_virt_domain_state(OrchVirt *virt, const char *domain, OrchVirtDomainState *ret_state,
                                GError **error);
gboolean orch_virt_domain_is_persistent(OrchVirt *virt, const char *domain,
                                        gboolean *ret_persistent, GError **error);
char *orch_virt_domain_get_xml(OrchVirt *virt, const char *domain, GError **error);
gboolean orch_virt_device_detach(OrchVirt *virt, const char *domain, const char *alias,
                                 gboolean config, guint timeout_ms, GError **error);
gboolean orch_virt_device_attach(OrchVirt *virt, const char *domain, const char *device_xml,
                                 gboolean config, GError **error);
gboolean orch_virt_migrate(OrchVirt *virt, const char *domain, const char *dest_uri,
                           const OrchMigrateParams *params, OrchMigrateStats *ret_stats,
                           GError **error);
gboolean orch_virt_domain_abort_job(OrchVirt *virt, const char *domain, GError **error);
/* The ops' watch_migrated_in; 0 with @error when the adapter has none. */
guint orch_virt_watch_migrated_in(OrchVirt *virt, const char *domain, OrchVirtMigratedInFunc fn,
                                  gpointer opaque, GDestroyNotify destroy, GError **error);
void orch_virt_unwatch(OrchVirt *virt, guint watch);
OrchVirtChannel *orch_virt_channel_open(OrchVirt *virt, const char *domain, const char *name,
                                        gboolean force, GError **error);
GPtrArray *orch_virt_nodedev_list_pci_xml(OrchVirt *virt, GError **error);
GPtrArray *orch_virt_domain_list_xml(OrchVirt *virt, GError **error);
gboolean orch_virt_domain_capable(OrchVirt *virt, const XmlDomainNeeds *needs,
                                  gboolean *ret_capable, char **ret_detail, GError **error);
gboolean orch_virt_node_get_info(OrchVirt *virt, OrchVirtNodeInfo *ret_info, GError **error);
GPtrArray *orch_virt_domain_list_info(OrchVirt *virt, gboolean with_xml, GError **error);
gboolean orch_virt_channel_send(OrchVirtChannel *chan, const void *buf, gsize len,
                                HmDeadline deadline, GError **error);
gssize orch_virt_channel_recv(OrchVirtChannel *chan, void *buf, gsize len, HmDeadline deadline,
                              GError **error);

/* ---- the libvirt adapter (virt-libvirt.c) ------------------------------------------------ */

/* Matches OrchVirtOpenFunc; @opaque unused. Starts libvirt's event loop thread on first use. */
OrchVirt *orch_virt_libvirt_open(const char *uri, const char *label, gpointer opaque,
                                 GError **error);

/* ---- fault injection (virt-fault.c) ------------------------------------------------------- */

/* Wraps @inner (taking ownership): calls pass through, except that the calls matching @spec
 * fail with an "injected fault" error. @spec is a comma-separated list of OP[@LABEL][#N]:
 * OP is an operation name (device_detach, device_attach, migrate, channel_open, channel_send,
 * channel_recv, domain_get_xml, ...), LABEL a host label ("source", "destination"), N the
 * 1-based count of the matching call to fail (default: every matching call).
 * Returns NULL with @error set when @spec does not parse. */
OrchVirt *orch_virt_fault_wrap(OrchVirt *inner, const char *spec, GError **error);

/* The environment variable migrate-vm reads a fault spec from (for tests and drills). */
#define ORCH_FAULT_ENV "HOTMIG_FAULT_INJECT"

G_END_DECLS
