/* The client of a host's hotmigd (docs/hotmigd.md), as migrate-vm uses it to reach the VFs of
 * a destination: a table of operations like OrchVirtOps, so that the migration engine's tests
 * can bring a fake. hotmigd-client-soup.c is the real one: HTTPS with a client certificate
 * (libsoup; with hotmigd/server.c, the only files that use libsoup).
 *
 * Every call is synchronous and waits at most the timeout given to orch_hotmigd_client_new() (the
 * whole request: connect, TLS, request, reply). An OrchHotmigdClient is used from the thread that
 * created it. Errors (ORCH_ERROR) name the daemon's URL; HTTP errors carry the daemon's message:
 *   _UNAVAILABLE  not reachable, TLS refused either way (our certificate, or theirs), 503
 *   _TIMEOUT      no complete answer before the deadline
 *   _CONFLICT     409: no free VF, VF leased by another, lease not current
 *   _NOT_FOUND    404: the VF is not in that host's pool
 *   _INVALID      400/413: the request was refused as bad (a bad id, GUID, ...); bad arguments
 *                 to orch_hotmigd_client_new()
 *   _FAILED       anything else (500, a reply that is not what the API says) */
#pragma once

#include <glib.h>

#include "common/common.h"
#include "engine/engine.h"
#include "hotplug/hotplug.h"
#include "policies/policies.h"

G_BEGIN_DECLS

#define ORCH_HOTMIGD_CLIENT_REPLY_MAX (4 * 1024 * 1024) /* bytes of a reply body */

/* The kinds and states of a pool's VFs, as the API spells them. */
typedef enum {
    ORCH_VF_KIND_PCI,     /* an SR-IOV VF */
    ORCH_VF_KIND_STANDIN, /* a network device standing in for one (the emulated lab) */
    ORCH_VF_KIND_LAST,
} OrchVfKind;

HM_ENUM_DECL(orch_vf_kind, OrchVfKind) /* "pci", "standin" */

typedef enum {
    /* the lease states first, with their words (HOTPLUG_LEASE_STATE_WORDS) */
    ORCH_VF_STATE_FREE = HOTPLUG_LEASE_FREE,         /* leasable */
    ORCH_VF_STATE_LEASED = HOTPLUG_LEASE_LEASED,     /* held by a lease not confirmed yet */
    ORCH_VF_STATE_ASSIGNED = HOTPLUG_LEASE_ASSIGNED, /* held by a confirmed lease */
    ORCH_VF_STATE_IN_USE,  /* no lease, but a running domain uses it (plugged by hand) */
    ORCH_VF_STATE_MISSING, /* configured but not there (no such device, no such netdev) */
    ORCH_VF_STATE_LAST,
} OrchVfState;

HM_ENUM_DECL(orch_vf_state, OrchVfState) /* "free", "leased", "assigned", "in-use", "missing" */

/* GET /v1/host */
typedef struct {
    char *name;    /* the host's name */
    char *version; /* hotmigd's version */
    guint pool_size;
    guint counts[ORCH_VF_STATE_LAST];  /* VFs per state */
    char **warnings;                   /* problems reading the pool (NULL-terminated) */
} OrchHotmigdHostInfo;

void orch_hotmigd_host_info_free(OrchHotmigdHostInfo *info);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchHotmigdHostInfo, orch_hotmigd_host_info_free)

/* A lease as the daemon reports it is a HotplugLease (hotplug/hotplug.h): vf, id, state
 * (HOTPLUG_LEASE_LEASED or _ASSIGNED), holder, reason, domain, created, expires (0 once
 * assigned); the store's other fields stay unset. */

/* One VF of a pool (GET /v1/vfs). */
typedef struct {
    char *id; /* PCI address or stand-in name */
    OrchVfKind kind;
    OrchVfState state;
    guint vendor_id; /* PCI VFs; 0 for stand-ins and missing VFs */
    guint device_id;
    char *pf;            /* PF address or NULL */
    int vf_index;        /* -1 when unknown */
    char *driver;        /* bound driver or NULL */
    HotplugLease *lease; /* NULL when free */
    char *assigned_to;   /* domain that has it, or NULL */
    char *note;          /* why missing, or NULL */
} OrchHotmigdVfInfo;

void orch_hotmigd_vf_info_free(OrchHotmigdVfInfo *vf);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchHotmigdVfInfo, orch_hotmigd_vf_info_free)

/* POST /v1/leases: @vf, or (vf NULL) the first free VF of model @vendor_id:@device_id. */
typedef struct {
    const char *vf;
    guint vendor_id;
    guint device_id;
    const char *holder; /* who asks, e.g. "migrate-vm pid 1234 on hostA" (required) */
    const char *reason; /* why, e.g. "migration of vm7 from hostA" (required) */
    const char *domain; /* the domain that will get it (required) */
    guint ttl_s;        /* 0: the daemon's lease-ttl */
} OrchHotmigdLeaseRequest;

/* POST /v1/alerts: what the daemon that applied a forwarded alert event answered. */
typedef struct {
    char *result; /* "accepted", "merged" or "ignored" */
    char *actor;  /* the host whose daemon applied it */
    PolAlertActionKind action;
    PolHostState state; /* the host's state in that daemon's book afterwards */
    char *reason;       /* one line */
} OrchHotmigdAlertReply;

void orch_hotmigd_alert_reply_free(OrchHotmigdAlertReply *reply);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchHotmigdAlertReply, orch_hotmigd_alert_reply_free)

/* POST /v1/migrations: asks the hotmigd of a domain's host to migrate it (moves are driven from
 * their source hosts). */
typedef struct {
    const char *domain;      /* running on that host (required) */
    const char *destination; /* the [host NAME] to move it to (required) */
    const char *reason;      /* why, for its log and status (required) */
    const char *plan;        /* the schedule it belongs to, or NULL */
} OrchHotmigdMigrationRequest;

typedef enum {
    ORCH_HOTMIGD_MIGRATION_RUNNING,
    ORCH_HOTMIGD_MIGRATION_DONE,   /* the domain runs on the destination with its VFs */
    ORCH_HOTMIGD_MIGRATION_FAILED, /* error says why; the report where the domain is */
    ORCH_HOTMIGD_MIGRATION_LAST,
} OrchHotmigdMigrationState;

HM_ENUM_DECL(orch_hotmigd_migration_state,
             OrchHotmigdMigrationState) /* "running", "done", "failed" */

/* GET /v1/migrations/ID */
typedef struct {
    char *id;
    char *domain;
    char *source; /* host names */
    char *destination;
    char *reason;
    char *plan; /* or NULL */
    OrchHotmigdMigrationState state;
    char *error;  /* FAILED: the message; else NULL */
    char *report; /* the migration's report, orch_report_format_json() (compact); NULL while
                   * it runs */
    gint64 started;  /* unix seconds */
    gint64 finished; /* unix seconds, 0 while it runs */
} OrchHotmigdMigration;

void orch_hotmigd_migration_free(OrchHotmigdMigration *mig);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchHotmigdMigration, orch_hotmigd_migration_free)

typedef struct OrchHotmigdClient OrchHotmigdClient;

typedef struct {
    OrchHotmigdHostInfo *(*host)(OrchHotmigdClient *vfd, GError **error);
    /* New array of OrchHotmigdVfInfo (owned). */
    GPtrArray *(*list)(OrchHotmigdClient *vfd, GError **error);
    HotplugLease *(*lease)(OrchHotmigdClient *vfd, const OrchHotmigdLeaseRequest *req,
                           GError **error);
    HotplugLease *(*confirm)(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                             GError **error);
    gboolean (*release)(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                        GError **error);
    /* NULL in implementations without it (the call fails). */
    gboolean (*renew)(OrchHotmigdClient *vfd, const char *vf, const char *lease_id, guint ttl_s,
                      GError **error);
    gboolean (*ib_identity)(OrchHotmigdClient *vfd, const char *vf, guint64 node_guid,
                            guint64 port_guid, char **ret_note, GError **error);
    gboolean (*vfio)(OrchHotmigdClient *vfd, const char *vf, char **ret_note, GError **error);
    /* NULL in implementations without it (the call fails). */
    gboolean (*identity)(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                         guint64 *ret_node_guid, guint64 *ret_port_guid, char **ret_source,
                         GError **error);
    gboolean (*left)(OrchHotmigdClient *vfd, const char *vf, const char *domain, GError **error);
    /* New array of owned strings: those of @paths (NULL-terminated) missing on the host. */
    GPtrArray *(*files_missing)(OrchHotmigdClient *vfd, const char *const *paths, GError **error);
    /* Returns the migration's id (owned). May be NULL in fakes that do not run migrations. */
    char *(*migration_start)(OrchHotmigdClient *vfd, const OrchHotmigdMigrationRequest *req,
                             GError **error);
    OrchHotmigdMigration *(*migration_get)(OrchHotmigdClient *vfd, const char *id, GError **error);
    void (*free)(OrchHotmigdClient *vfd);
    /* NULL in implementations without it (the call fails). */
    OrchHotmigdAlertReply *(*alert)(OrchHotmigdClient *vfd, const PolAlertEvent *event,
                                    const char *from, gboolean deputy, GError **error);
} OrchHotmigdClientOps;

/* Every implementation's handle starts with this. */
struct OrchHotmigdClient {
    const OrchHotmigdClientOps *ops;
    char *url; /* "https://host:port", for messages */
};

/* Helpers for implementations (fakes): fill and clear the common part. */
void orch_hotmigd_client_init(OrchHotmigdClient *vfd, const OrchHotmigdClientOps *ops,
                              const char *url);
void orch_hotmigd_client_clear(OrchHotmigdClient *vfd);

/* ---- the HTTPS client (hotmigd-client-soup.c) --------------------------------------------- */

/* A client of the hotmigd at @url ("https://HOST:PORT"), presenting certificate @cert with
 * private key @key (PEM files), trusting server certificates signed by @ca (PEM) and naming
 * HOST; each call waits at most @timeout_s seconds (1..3600). Nothing is sent yet: a daemon
 * that is down is noticed by the first call. ORCH_ERROR_INVALID for a bad URL or files that do
 * not load (named). Owned result. */
OrchHotmigdClient *orch_hotmigd_client_new(const char *url, const char *cert, const char *key,
                                           const char *ca, guint timeout_s, GError **error);

void orch_hotmigd_client_free(OrchHotmigdClient *vfd);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchHotmigdClient, orch_hotmigd_client_free)

/* The client of the hotmigd at @url (NULL: none known, an error) of the @whose host
 * ("destination" or "source"), opened by orch_connector_open_hotmigd(), its error prefixed with
 * "Cannot use the @whose's hotmigd". Owned; NULL with @error. */
OrchHotmigdClient *orch_options_open_hotmigd(const OrchOptions *opts, const char *url,
                                             const char *whose, GError **error);

/* ---- the calls (through ops) ---------------------------------------------------------------- */

/* GET /v1/host: name, version, pool size and states. Owned. */
OrchHotmigdHostInfo *orch_hotmigd_client_host(OrchHotmigdClient *vfd, GError **error);

/* GET /v1/vfs: every VF of the pool, a new array of OrchHotmigdVfInfo (owned). */
GPtrArray *orch_hotmigd_client_list(OrchHotmigdClient *vfd, GError **error);

/* POST /v1/leases. Owned lease (state LEASED; expires after the TTL unless confirmed). */
HotplugLease *orch_hotmigd_client_lease(OrchHotmigdClient *vfd, const OrchHotmigdLeaseRequest *req,
                                        GError **error);

/* POST /v1/leases/VF/ID/confirm: the domain has the VF now (LEASED -> ASSIGNED). Owned lease.
 * Confirming twice is harmless. */
HotplugLease *orch_hotmigd_client_confirm(OrchHotmigdClient *vfd, const char *vf,
                                          const char *lease_id, GError **error);

/* POST /v1/leases/VF/ID/renew: the lease lives @ttl_s more seconds (0: the daemon's
 * lease-ttl); an assigned one is left as it is. ORCH_ERROR_CONFLICT when it is no longer the
 * VF's current lease (it expired, maybe taken by another). */
gboolean orch_hotmigd_client_renew(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                                   guint ttl_s, GError **error);

/* DELETE /v1/leases/VF/ID: TRUE also when the lease is gone already (expired, released). */
gboolean orch_hotmigd_client_release(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                                     GError **error);

/* POST /v1/vfs/VF/ib-identity: give the leased VF these GUIDs (before it is plugged).
 * *ret_note (owned; may be NULL) says what was done or why nothing was (a stand-in, a PF that
 * is not InfiniBand). */
gboolean orch_hotmigd_client_ib_identity(OrchHotmigdClient *vfd, const char *vf, guint64 node_guid,
                                         guint64 port_guid, char **ret_note, GError **error);

/* GET /v1/vfs/VF/identity/DOMAIN: the GUIDs @vf carries for @domain as its host knows them
 * (what its hotmigd gave it, or what its kernel reports; never the guest's word). *ret_source
 * (owned) says which. ORCH_ERROR_NOT_FOUND when the host does not know them. */
gboolean orch_hotmigd_client_identity(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                                      guint64 *ret_node_guid, guint64 *ret_port_guid,
                                      char **ret_source, GError **error);

/* POST /v1/vfs/VF/left: @domain migrated away from that host; the lease it held on @vf there
 * ends. TRUE also when @vf holds no lease. */
gboolean orch_hotmigd_client_left(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                                  GError **error);

/* POST /v1/files: which of @paths (absolute, NULL-terminated, at most 64) the host lacks; a new
 * array of owned strings, empty when it has them all. */
GPtrArray *orch_hotmigd_client_files_missing(OrchHotmigdClient *vfd, const char *const *paths,
                                             GError **error);

/* POST /v1/vfs/VF/vfio: make sure vfio-pci drives the leased VF (binds it when not).
 * *ret_note (owned; may be NULL) says what was done. */
gboolean orch_hotmigd_client_vfio(OrchHotmigdClient *vfd, const char *vf, char **ret_note,
                                  GError **error);

/* POST /v1/alerts: hands alert @event to that host's hotmigd, from host @from (this one).
 * Without @deputy the daemon must be @event->host's own; with it, it acts for @event->host,
 * whose own daemon does not answer (docs/alerts.md, "Who acts"). Owned reply. A refusal is
 * ORCH_ERROR_INVALID (400, 422: a bad event, a host it does not know) or _CONFLICT (409: not
 * that host's daemon); a daemon that does not answer _UNAVAILABLE or _TIMEOUT. */
OrchHotmigdAlertReply *orch_hotmigd_client_alert(OrchHotmigdClient *vfd, const PolAlertEvent *event,
                                                 const char *from, gboolean deputy, GError **error);

/* POST /v1/migrations: the daemon starts the migration (202) and returns its id (owned). It runs
 * there whatever becomes of this client; follow it with orch_hotmigd_client_migration_get(). */
char *orch_hotmigd_client_migration_start(OrchHotmigdClient *vfd,
                                          const OrchHotmigdMigrationRequest *req, GError **error);

/* GET /v1/migrations/ID: its state, and its report once it ended (owned). ORCH_ERROR_NOT_FOUND
 * when the daemon does not know the id (it restarted, or forgot an old one). */
OrchHotmigdMigration *orch_hotmigd_client_migration_get(OrchHotmigdClient *vfd, const char *id,
                                                        GError **error);

G_END_DECLS
