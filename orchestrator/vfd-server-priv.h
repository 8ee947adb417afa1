/* hotmigd's side of the VF API (docs/hotmigd.md): the pool of VFs this host hands out, the
 * HTTP+JSON API over it, and the mutual-TLS server that carries it.
 *
 *   vfd-pool.c    the pool: which VFs, their state, leases (hotplug lease store), IB identity,
 *                 vfio; asks the host through OrchVfdHostOps so tests can fake it
 *   vfd-host.c    the real OrchVfdHostOps: sysfs, netlink, vfio under a sysfs root, libvirt
 *   vfd-api.c     requests (method, path, body) -> replies (status, JSON): parsing, limits,
 *                 errors as HTTP statuses; no transport, so unit tests call it directly
 *   vfd-server.c  libsoup: the HTTPS listener with client certificates (the only file of the
 *                 daemon that uses libsoup)
 *
 * Errors are ORCH_ERROR: _INVALID bad input (400), _NOT_FOUND unknown VF (404), _CONFLICT the
 * state says no (409), _UNAVAILABLE something the daemon needs did not answer (503), anything
 * else 500. */
#pragma once

#include <glib.h>

#include "common/common.h"
#include "hotplug/hotplug.h"
#include "orchestrator/orchestrator.h"
#include "orchestrator/vfd-priv.h"

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
} OrchVfdPciVf;

void orch_vfd_pci_vf_free(OrchVfdPciVf *vf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdPciVf, orch_vfd_pci_vf_free)

typedef struct {
    /* The VFs of PF @pf (new array of OrchVfdPciVf). */
    GPtrArray *(*pf_vfs)(gpointer host, const char *pf, GError **error);
    /* One VF (owned). */
    OrchVfdPciVf *(*vf_read)(gpointer host, const char *address, GError **error);
    /* Does network device @name exist (a stand-in is there)? */
    gboolean (*netdev_exists)(gpointer host, const char *name);
    /* Which running domain uses which PCI address: a new table "DDDD:BB:SS.F" -> domain name
     * (owned strings). ORCH_ERROR_UNAVAILABLE when the hypervisor cannot be asked. */
    GHashTable *(*domains_using)(gpointer host, GError **error);
    /* Sets the IB node and port GUIDs of @vf through its PF. *ret_note (owned, may be NULL
     * when nothing is worth saying) says what was done. */
    gboolean (*ib_identity)(gpointer host, const OrchVfdPciVf *vf, guint64 node_guid,
                            guint64 port_guid, char **ret_note, GError **error);
    /* hotplug_vfio_bind() on the host's sysfs. */
    gboolean (*vfio_bind)(gpointer host, const char *address, gboolean *ret_changed,
                          char **ret_previous_driver, GError **error);
    void (*free)(gpointer host);
} OrchVfdHostOps;

/* ---- the real host (vfd-host.c) --------------------------------------------------------- */

/* @sysfs_root: where sysfs is ("/sys" or a fixture); @libvirt_uri: the host's hypervisor for
 * domains_using ("" or NULL: libvirt's default), asked from a thread of its own and given up
 * (ORCH_ERROR_UNAVAILABLE) after @libvirt_timeout_ms; @vfio_timeout_ms: how long a vfio-pci
 * probe may take. Owned result, free with ops->free. Never fails: netlink and libvirt are
 * opened when first needed. */
gpointer orch_vfd_host_new(const char *sysfs_root, const char *libvirt_uri, guint vfio_timeout_ms,
                           guint libvirt_timeout_ms);
extern const OrchVfdHostOps orch_vfd_host_ops;

/* ---- the pool ----------------------------------------------------------------------------- */

/* OrchVfdKind, OrchVfdState: vfd-priv.h (the client reads the same words). */

/* One VF of the pool, as listed. */
typedef struct {
    char *id; /* PCI address (kernel spelling) or the stand-in's netdev name */
    OrchVfdKind kind;
    OrchVfdState state;
    OrchVfdPciVf *pci;   /* PCI facts (NULL for stand-ins and missing VFs) */
    HotplugLease *lease; /* the current lease (NULL when free) */
    char *assigned_to;   /* the domain that has it: from the hypervisor, else the lease */
    char *note;          /* why missing, or NULL */
} OrchVfdEntry;

void orch_vfd_entry_free(OrchVfdEntry *entry);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdEntry, orch_vfd_entry_free)

typedef struct {
    const char *host_name;  /* reported by GET /v1/host */
    const char *lease_dir;  /* the lease store ([hotmigd] run-dir/leases) */
    guint lease_ttl_s;      /* default TTL of an unconfirmed lease */
    const char *const *pfs; /* [pool] pfs, vfs, standins (NULL-terminated; NULL for none) */
    const char *const *vfs;
    const char *const *standins;
} OrchVfdPoolConfig;

typedef struct OrchVfdPool OrchVfdPool;

/* Checks @config (addresses and names) and opens the lease store. Takes ownership of @host
 * (freed with @ops->free, also on failure). Owned result. */
OrchVfdPool *orch_vfd_pool_new(const OrchVfdPoolConfig *config, const OrchVfdHostOps *ops,
                               gpointer host, GError **error);
void orch_vfd_pool_free(OrchVfdPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdPool, orch_vfd_pool_free)

const char *orch_vfd_pool_host_name(const OrchVfdPool *pool); /* borrowed */

/* The pool now: a new array of OrchVfdEntry in configuration order (PFs' VFs, VFs,
 * stand-ins). Problems that do not stop the listing (a PF that cannot be read, the hypervisor
 * not answering) go to *ret_warnings (owned, NULL-terminated, may be empty; NULL allowed). */
GPtrArray *orch_vfd_pool_list(OrchVfdPool *pool, char ***ret_warnings, GError **error);

/* A lease request: @vf, or the first free VF of the model @vendor_id:@device_id. */
typedef struct {
    const char *vf;  /* or NULL */
    guint vendor_id; /* with device_id, when vf is NULL */
    guint device_id;
    const char *holder; /* who asks (e.g. "migrate-vm@hostA"), required */
    const char *reason; /* why (e.g. "migration of vm7 from hostA"), required */
    const char *domain; /* the domain that will get it, required */
    guint ttl_s;        /* 0: the pool's lease_ttl_s */
} OrchVfdLeaseSpec;

/* Leases a VF. ORCH_ERROR_NOT_FOUND: @vf is not in the pool; ORCH_ERROR_CONFLICT: it is not
 * free, or no VF of that model is ("no free VF ..." with the pool's state);
 * ORCH_ERROR_UNAVAILABLE: the hypervisor cannot say which PCI VFs domains use. Owned lease. */
HotplugLease *orch_vfd_pool_lease(OrchVfdPool *pool, const OrchVfdLeaseSpec *spec, GError **error);

/* Makes lease @id of @vf lasting (LEASED -> ASSIGNED). ORCH_ERROR_CONFLICT when @id is not
 * the VF's current lease (expired, released, another's). Owned lease. */
HotplugLease *orch_vfd_pool_confirm(OrchVfdPool *pool, const char *vf, const char *id,
                                    GError **error);

/* Ends lease @id of @vf; TRUE as well when it is gone already (idempotent), also after expiry.
 * ORCH_ERROR_CONFLICT when the VF holds another lease. */
gboolean orch_vfd_pool_release(OrchVfdPool *pool, const char *vf, const char *id, GError **error);

/* Domain @domain has left this host (migrated away): ends the ASSIGNED lease it held on @vf.
 * TRUE as well when @vf holds no lease (nothing to do). ORCH_ERROR_CONFLICT when the lease is
 * another domain's, or not confirmed yet (a migration in flight). */
gboolean orch_vfd_pool_left(OrchVfdPool *pool, const char *vf, const char *domain, GError **error);

/* Sets the IB identity of leased VF @vf. *ret_applied FALSE with a note when there is nothing
 * to set (a stand-in). ORCH_ERROR_CONFLICT when @vf is not leased, or a domain uses it. */
gboolean orch_vfd_pool_ib_identity(OrchVfdPool *pool, const char *vf, guint64 node_guid,
                                   guint64 port_guid, gboolean *ret_applied, char **ret_note,
                                   GError **error);

/* Makes sure vfio-pci drives leased VF @vf (binds it when not). *ret_note says what was done.
 * Stand-ins: nothing to do (*ret_changed FALSE, a note). ORCH_ERROR_CONFLICT when not leased. */
gboolean orch_vfd_pool_vfio(OrchVfdPool *pool, const char *vf, gboolean *ret_changed,
                            char **ret_driver, char **ret_note, GError **error);

/* ---- the API (vfd-api.c) ----------------------------------------------------------------- */

#define ORCH_VFD_API_MAX_BODY (16 * 1024) /* request bodies larger than this: 413 */
#define ORCH_VFD_API_MAX_DEPTH 4          /* JSON nesting of a request body */
#define ORCH_VFD_API_MAX_STRING 256       /* holder, reason, domain, ids */

typedef struct {
    guint status; /* HTTP status */
    char *body;   /* JSON text (owned); errors are {"error": "message"} */
    char *log;    /* what the daemon logs about it: the error, or what changed; NULL for reads */
} OrchVfdReply;

void orch_vfd_reply_free(OrchVfdReply *reply);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdReply, orch_vfd_reply_free)

/* Handles one request: @method ("GET", ...), @path (percent-encoded as received, without the
 * query), @body (@len bytes, may be NULL when 0; not NUL-terminated). Never NULL. The pool's
 * requests only: the cluster's (below) answer 503 here. */
OrchVfdReply *orch_vfd_api_handle(OrchVfdPool *pool, const char *method, const char *path,
                                  const char *body, gsize len);

#define ORCH_VFD_API_MAX_REASON 1024 /* bytes of a "reason" */

/* What the daemon does beyond the pool (hotmigd-priv.h), for the cluster's requests:
 *   POST /v1/migrations      migration_start: run a migration of one of this host's domains
 *   GET  /v1/migrations/ID   migration_get
 *   GET  /v1/snapshot        snapshot: the live cluster in the snapshot format (asynchronous:
 *                            it reads every host; @done is called later, on the same context)
 * Each may be NULL (then 503). Errors are ORCH_ERROR, mapped to statuses as for the pool. */
typedef void (*OrchVfdSnapshotDone)(char *json, GError *error, gpointer data); /* both taken */

typedef struct {
    gpointer data;
    char *(*migration_start)(gpointer data, const OrchVfdMigrationRequest *req, GError **error);
    OrchVfdMigration *(*migration_get)(gpointer data, const char *id, GError **error);
    void (*snapshot)(gpointer data, OrchVfdSnapshotDone done, gpointer done_data);
} OrchVfdServices;

typedef void (*OrchVfdReplyFunc)(OrchVfdReply *reply, gpointer data); /* @reply taken */

/* orch_vfd_api_handle() with the cluster's requests too: @cb gets the reply, at once (before
 * this returns) or later from @services' asynchronous calls, on the caller's context. @pool may
 * be NULL (its requests then answer 503). */
void orch_vfd_api_handle_async(OrchVfdPool *pool, const OrchVfdServices *services,
                               const char *method, const char *path, const char *body, gsize len,
                               OrchVfdReplyFunc cb, gpointer data);

/* The JSON of a migration as GET /v1/migrations/ID answers it (owned). */
char *orch_vfd_migration_format_json(const OrchVfdMigration *mig);

/* ---- the HTTPS server (vfd-server.c) ------------------------------------------------------ */

typedef struct {
    const char *listen; /* address to bind, "" or NULL: every address */
    guint port;         /* 0: any free port (tests; see orch_vfd_server_get_port) */
    const char *cert;   /* server certificate (PEM) */
    const char *key;    /* its private key (PEM) */
    const char *ca;     /* CA certificate(s) (PEM) client certificates must chain to */
} OrchVfdServerConfig;

typedef struct OrchVfdServer OrchVfdServer;

/* Loads the certificates and listens, serving @pool (borrowed; must outlive the server) from
 * the thread-default main context. Fails naming the file or the address. Owned result. */
OrchVfdServer *orch_vfd_server_new(const OrchVfdServerConfig *config, OrchVfdPool *pool,
                                   GError **error);
void orch_vfd_server_free(OrchVfdServer *server);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchVfdServer, orch_vfd_server_free)

/* The port listened on. */
guint orch_vfd_server_get_port(const OrchVfdServer *server);

/* Serves the cluster's requests with @services (borrowed; must outlive the server; NULL: none). */
void orch_vfd_server_set_services(OrchVfdServer *server, const OrchVfdServices *services);

G_END_DECLS
