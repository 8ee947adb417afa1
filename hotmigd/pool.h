/* hotmigd's side of the VF API (docs/hotmigd.md): the pool of VFs this host hands out.
 *
 *   pool.c    the pool: which VFs, their state, leases (hotplug lease store), IB identity,
 *             vfio; asks the host through HotmigdHostOps so tests can fake it
 *   host.c    the real HotmigdHostOps: sysfs, netlink, vfio under a sysfs root, libvirt
 *
 * The HTTP+JSON API over the pool is api.h, the mutual-TLS server that carries it server.h.
 *
 * Errors are ORCH_ERROR: _INVALID bad input (400), _NOT_FOUND unknown VF (404), _CONFLICT the
 * state says no (409), _UNAVAILABLE something the daemon needs did not answer (503), anything
 * else 500. */
#pragma once

#include <glib.h>

#include "common/common.h"
#include "engine/engine.h"
#include "engine/hotmigd-client.h"
#include "hotplug/hotplug.h"

G_BEGIN_DECLS

/* ---- what the pool asks of the host ------------------------------------------------------ */

/* A PCI VF as the pool needs it (filled from hm-hotplug's sysfs reader). */
typedef struct {
    char *address;    /* "0000:3b:00.1" */
    char *pf_address; /* its PF */
    guint vf_index;   /* virtfnN of the PF */
    guint vendor_id;
    guint device_id;
    char *driver;    /* bound driver or NULL */
    char *pf_netdev; /* the PF's network device (netlink sets GUIDs through it), or NULL */
} HotmigdPoolPciVf;

void hotmigd_pool_pci_vf_free(HotmigdPoolPciVf *vf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdPoolPciVf, hotmigd_pool_pci_vf_free)

typedef struct {
    /* The VFs of PF @pf (new array of HotmigdPoolPciVf). */
    GPtrArray *(*pf_vfs)(gpointer host, const char *pf, GError **error);
    /* One VF (owned). */
    HotmigdPoolPciVf *(*vf_read)(gpointer host, const char *address, GError **error);
    /* Does network device @name exist (a stand-in is there)? */
    gboolean (*netdev_exists)(gpointer host, const char *name);
    /* Which running domain uses which PCI address: a new table "DDDD:BB:SS.F" -> domain name
     * (owned strings). ORCH_ERROR_UNAVAILABLE when the hypervisor cannot be asked. */
    GHashTable *(*domains_using)(gpointer host, GError **error);
    /* Sets the IB node and port GUIDs of @vf through its PF. *ret_note (owned, may be NULL
     * when nothing is worth saying) says what was done. */
    gboolean (*ib_identity)(gpointer host, const HotmigdPoolPciVf *vf, guint64 node_guid,
                            guint64 port_guid, char **ret_note, GError **error);
    /* The node and port GUIDs @vf has now, as the host's kernel reports them
     * (hotplug_ib_identity_read(); HOTPLUG_ERROR_UNKNOWN when it does not say). */
    gboolean (*ib_identity_read)(gpointer host, const HotmigdPoolPciVf *vf, guint64 *ret_node_guid,
                                 guint64 *ret_port_guid, GError **error);
    /* The same two for stand-in network device @netdev ([pool] standins), whose PF driver is
     * the directory [pool] standin-guids (hotplug_netlink_standin_new()). Without one,
     * standin_ib_identity succeeds with a note that nothing was set and standin_ib_identity_read
     * fails with HOTPLUG_ERROR_UNKNOWN. NULL ops: stand-ins have no IB identity. */
    gboolean (*standin_ib_identity)(gpointer host, const char *netdev, guint64 node_guid,
                                    guint64 port_guid, char **ret_note, GError **error);
    gboolean (*standin_ib_identity_read)(gpointer host, const char *netdev,
                                         guint64 *ret_node_guid, guint64 *ret_port_guid,
                                         GError **error);
    /* hotplug_vfio_bind() on the host's sysfs. */
    gboolean (*vfio_bind)(gpointer host, const char *address, gboolean *ret_changed,
                          char **ret_previous_driver, GError **error);
    void (*free)(gpointer host);
} HotmigdHostOps;

/* ---- the real host (host.c) --------------------------------------------------------- */

/* @sysfs_root: where sysfs is ("/sys" or a fixture); @libvirt_uri: the host's hypervisor for
 * domains_using ("" or NULL: libvirt's default), asked by one thread of the host's over one
 * connection it keeps, and given up (ORCH_ERROR_UNAVAILABLE) after @libvirt_timeout_ms; while
 * a question has been unanswered longer than that, domains_using fails at once (no thread is
 * added: issue 15, item 7); @vfio_timeout_ms: how long a vfio-pci probe may take. Owned
 * result, free with ops->free. Never fails: netlink and libvirt are opened when first needed.
 * The host may be used from one thread at a time (hotmigd: the API's worker). */
gpointer hotmigd_host_new(const char *sysfs_root, const char *libvirt_uri, guint vfio_timeout_ms,
                          guint libvirt_timeout_ms);
/* The directory that stands in for the stand-ins' PF driver ([pool] standin-guids; NULL or
 * "": none, stand-ins have no IB identity). Before the first GUID call. */
void hotmigd_host_set_standin_guids(gpointer host, const char *dir);
/* Tests: opens the libvirt connection with @open instead of orch_connector_open_virt() (before
 * the first question). */
void hotmigd_host_set_virt_open(gpointer host, OrchVirtOpenFunc open);
extern const HotmigdHostOps hotmigd_host_ops;

/* ---- the pool ----------------------------------------------------------------------------- */

/* OrchVfKind, OrchVfState: engine/hotmigd-client.h (the client reads the same words). */

/* One VF of the pool, as listed. */
typedef struct {
    char *id; /* PCI address (kernel spelling) or the stand-in's netdev name */
    OrchVfKind kind;
    OrchVfState state;
    HotmigdPoolPciVf *pci; /* PCI facts (NULL for stand-ins and missing VFs) */
    HotplugLease *lease; /* the current lease (NULL when free) */
    char *assigned_to;   /* the domain that has it: from the hypervisor, else the lease */
    char *note;          /* why missing, or NULL */
    /* ASSIGNED, and the hypervisor answered that no domain uses the VF here: the lease is
     * stale (its domain was destroyed, or left without its source being told) and the next
     * lease of the VF ends it, so the VF counts as free for what a lease would get. */
    gboolean reclaimable;
} HotmigdPoolEntry;

void hotmigd_pool_entry_free(HotmigdPoolEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdPoolEntry, hotmigd_pool_entry_free)

typedef struct {
    const char *host_name;  /* reported by GET /v1/host */
    const char *lease_dir;  /* the lease store ([hotmigd] run-dir/leases) */
    guint lease_ttl_s;      /* default TTL of an unconfirmed lease */
    guint lease_ttl_max_s;  /* the longest TTL a client may ask for; 0: 1800 */
    const char *const *pfs; /* [pool] pfs, vfs, standins (NULL-terminated; NULL for none) */
    const char *const *vfs;
    const char *const *standins;
} HotmigdPoolConfig;

typedef struct HotmigdPool HotmigdPool;

/* Checks @config (addresses and names) and opens the lease store. Takes ownership of @host
 * (freed with @ops->free, also on failure). Owned result. */
HotmigdPool *hotmigd_pool_new(const HotmigdPoolConfig *config, const HotmigdHostOps *ops,
                              gpointer host, GError **error);
void hotmigd_pool_free(HotmigdPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdPool, hotmigd_pool_free)

const char *hotmigd_pool_host_name(const HotmigdPool *pool); /* borrowed */

/* The longest TTL a client may ask for (HotmigdPoolConfig lease_ttl_max_s). */
guint hotmigd_pool_lease_ttl_max(const HotmigdPool *pool);

/* May @owner act on the lease of @vf (@id: that lease; NULL: the VF's current one)? TRUE when
 * the lease was taken by @owner, has no owner recorded (taken before owners were), or is gone
 * (the call itself then says so). ORCH_ERROR_FORBIDDEN naming the holder otherwise. */
gboolean hotmigd_pool_check_owner(HotmigdPool *pool, const char *vf, const char *id,
                                  const char *owner, GError **error);

/* The pool now: a new array of HotmigdPoolEntry in configuration order (PFs' VFs, VFs,
 * stand-ins). Problems that do not stop the listing (a PF that cannot be read, the hypervisor
 * not answering) go to *ret_warnings (owned, NULL-terminated, may be empty; NULL allowed). */
GPtrArray *hotmigd_pool_list(HotmigdPool *pool, char ***ret_warnings, GError **error);

/* A lease request: @vf, or the first free VF of the model @vendor_id:@device_id. */
typedef struct {
    const char *vf;  /* or NULL */
    guint vendor_id; /* with device_id, when vf is NULL */
    guint device_id;
    const char *holder; /* who asks (e.g. "migrate-vm@hostA"), required */
    const char *reason; /* why (e.g. "migration of vm7 from hostA"), required */
    const char *domain; /* the domain that will get it, required */
    guint ttl_s;        /* 0: the pool's lease_ttl_s */
    const char
        *owner; /* the client that may act on the lease (hotmigd_authz_client_owner()); or NULL */
} HotmigdPoolLeaseSpec;

/* Leases a VF. ORCH_ERROR_NOT_FOUND: @vf is not in the pool; ORCH_ERROR_CONFLICT: it is not
 * free, or no VF of that model is ("no free VF ..." with the pool's state);
 * ORCH_ERROR_UNAVAILABLE: the hypervisor cannot say which PCI VFs domains use. Owned lease. */
HotplugLease *hotmigd_pool_lease(HotmigdPool *pool, const HotmigdPoolLeaseSpec *spec,
                                 GError **error);

/* Makes lease @id of @vf lasting (LEASED -> ASSIGNED). ORCH_ERROR_CONFLICT when @id is not
 * the VF's current lease (expired, released, another's). Owned lease. */
HotplugLease *hotmigd_pool_confirm(HotmigdPool *pool, const char *vf, const char *id,
                                   GError **error);

/* Ends lease @id of @vf; TRUE as well when it is gone already (idempotent), also after expiry.
 * ORCH_ERROR_CONFLICT when the VF holds another lease. */
gboolean hotmigd_pool_release(HotmigdPool *pool, const char *vf, const char *id, GError **error);

/* Extends lease @id of @vf to @ttl_s seconds from now (1..lease_ttl_max; 0: the pool's
 * lease_ttl_s) while its migration runs; an assigned lease is left as it is.
 * ORCH_ERROR_CONFLICT when @id is not the VF's current lease (expired, released, another's). */
gboolean hotmigd_pool_renew(HotmigdPool *pool, const char *vf, const char *id, guint ttl_s,
                            GError **error);

/* Domain @domain has left this host (migrated away): ends the ASSIGNED lease it held on @vf.
 * TRUE as well when @vf holds no lease (nothing to do). ORCH_ERROR_CONFLICT when the lease is
 * another domain's, or not confirmed yet (a migration in flight). */
gboolean hotmigd_pool_left(HotmigdPool *pool, const char *vf, const char *domain, GError **error);

/* Sets the IB identity of leased VF @vf. *ret_applied FALSE with a note when there is nothing
 * to set (a stand-in). ORCH_ERROR_CONFLICT when @vf is not leased, or a domain uses it. */
gboolean hotmigd_pool_ib_identity(HotmigdPool *pool, const char *vf, guint64 node_guid,
                                  guint64 port_guid, gboolean *ret_applied, char **ret_note,
                                  GError **error);

/* The InfiniBand identity VF @vf carries for domain @domain, as this host knows it (never as
 * a guest says): the GUIDs hotmigd gave it for @domain (recorded with its lease), else those
 * the kernel reports for it. *ret_source (owned) says which. ORCH_ERROR_NOT_FOUND when @vf is
 * not in the pool or the host does not know its GUIDs (the message says why). */
gboolean hotmigd_pool_identity(HotmigdPool *pool, const char *vf, const char *domain,
                               guint64 *ret_node_guid, guint64 *ret_port_guid, char **ret_source,
                               GError **error);

/* Makes sure vfio-pci drives leased VF @vf (binds it when not). *ret_note says what was done.
 * Stand-ins: nothing to do (*ret_changed FALSE, a note). ORCH_ERROR_CONFLICT when not leased. */
gboolean hotmigd_pool_vfio(HotmigdPool *pool, const char *vf, gboolean *ret_changed,
                           char **ret_driver, char **ret_note, GError **error);

G_END_DECLS
