/* hm-engine: moves a running domain that holds VFs from one host to another:
 * agent prepare -> VF unplug -> live migration -> VF plug on the destination -> agent resume,
 * undoing the earlier phases when one fails. */
#pragma once

#include <gio/gio.h>
#include <glib.h>

#include "common/common.h"
#include "common/config.h"

G_BEGIN_DECLS

#define ORCH_ERROR (orch_error_quark())
GQuark orch_error_quark(void);

typedef enum {
    ORCH_ERROR_FAILED,
    ORCH_ERROR_INVALID,      /* bad options */
    ORCH_ERROR_NO_DOMAIN,    /* the domain is not running on the source */
    ORCH_ERROR_AGENT,        /* the guest agent refused, failed or did not answer */
    ORCH_ERROR_HYPERVISOR,   /* libvirt / QEMU said no */
    ORCH_ERROR_TIMEOUT,      /* a deadline expired */
    ORCH_ERROR_ROLLBACK,     /* undoing a failed phase failed too: needs a human */
    ORCH_ERROR_BUSY,         /* another migration or recovery of the domain is under way */
    ORCH_ERROR_NOT_FOUND,    /* nothing to recover */
    ORCH_ERROR_CANCELLED,    /* interrupted by the user (SIGINT, SIGTERM) */
    ORCH_ERROR_UNFINISHED,   /* an earlier migration of the domain needs --recover first */
    ORCH_ERROR_CONFLICT,     /* hotmigd: the state says no (no free VF, VF leased, stale lease) */
    ORCH_ERROR_UNAVAILABLE,  /* hotmigd (or a service it needs) did not answer, or refused TLS */
    ORCH_ERROR_PREFLIGHT,    /* a --dry-run check failed */
    ORCH_ERROR_UNREACHABLE,  /* hotmigd could not be connected to: no request reached it */
    ORCH_ERROR_FORBIDDEN,    /* hotmigd: the client may not do that (docs/security.md) */
    ORCH_ERROR_REFUSED,      /* a process in the guest used what a migration cannot carry */
    ORCH_ERROR_LAST,
} OrchError;

typedef enum {
    ORCH_PHASE_CONNECT,
    ORCH_PHASE_INSPECT,
    ORCH_PHASE_TARGET_VF,
    ORCH_PHASE_PREPARE,
    ORCH_PHASE_UNPLUG,
    ORCH_PHASE_MIGRATE,
    ORCH_PHASE_PLUG,
    ORCH_PHASE_RESUME,
    ORCH_PHASE_LAST,
} OrchPhase;

HM_ENUM_DECL(orch_phase, OrchPhase)

typedef enum {
    ORCH_STATUS_PENDING, /* not reached */
    ORCH_STATUS_OK,
    ORCH_STATUS_FAILED,
    ORCH_STATUS_SKIPPED, /* not needed (no VF, --no-agent) */
    ORCH_STATUS_UNDONE,  /* done, then rolled back after a later failure */
    ORCH_STATUS_LAST,
} OrchStatus;

HM_ENUM_DECL(orch_status, OrchStatus)

/* What a migration that exceeds OrchOptions.migrate_timeout_ms does (virsh migrate --timeout). */
typedef enum {
    ORCH_TIMEOUT_SUSPEND,  /* pause the guest so the copy completes; it runs again on the destination */
    ORCH_TIMEOUT_POSTCOPY, /* switch to post-copy (needs postcopy) */
    ORCH_TIMEOUT_ABORT,    /* abort the migration job: the migrate phase fails and is undone */
    ORCH_TIMEOUT_LAST,
} OrchTimeoutAction;

HM_ENUM_DECL(orch_timeout_action, OrchTimeoutAction)

#define ORCH_AGENT_CHANNEL_DEFAULT "org.hotmig.agent.0"

typedef struct OrchHotmigdClient
    OrchHotmigdClient;            /* a client of a host's hotmigd (engine/hotmigd-client.h) */
typedef struct OrchVirt OrchVirt; /* a connection to a host's libvirt (engine/virt.h) */
typedef OrchVirt *(*OrchVirtOpenFunc)(const char *uri, const char *label, gpointer opaque,
                                      GError **error);
typedef OrchHotmigdClient *(*OrchHotmigdOpenFunc)(const char *url, gpointer opaque, GError **error);

/* How the engine and the programs reach a host: its libvirt and its hotmigd. Every connection
 * is opened through orch_connector_open_virt() and orch_connector_open_hotmigd() (connector.c);
 * a connector replaces the real openers (tests bring fakes). Both get @data. */
typedef struct {
    OrchVirtOpenFunc open_virt; /* NULL: the libvirt adapter, fault injection included */
    OrchHotmigdOpenFunc
        open_hotmigd; /* NULL: the HTTPS client with the options' certificate files */
    gpointer data;
} OrchConnector;

typedef struct {
    char *domain;
    char *source_uri;       /* NULL: libvirt's default URI */
    char *dest_uri;
    char *migrate_uri;      /* hypervisor data URI to the destination, or NULL */
    char *alias_prefix;     /* stand-in VF alias prefix, NULL: default "ua-hmvf" */
    char *target_vf;        /* force this destination PCI address for a hostdev VF */
    char *agent_channel;    /* NULL: ORCH_AGENT_CHANNEL_DEFAULT */
    gboolean no_agent;      /* go on without the guest agent */
    gboolean no_standby;    /* the connections pause for the whole move: no standby path */
    gboolean force;         /* move even when a process used what a migration cannot carry */
    gboolean persistent;    /* define the domain on the destination */
    gboolean undefine_source;
    guint64 bandwidth_mib;  /* 0 = unlimited */
    guint parallel;         /* parallel migration connections (multifd), 0 = one, no multifd */
    gboolean auto_converge; /* throttle vCPUs when the copy does not converge */
    gboolean postcopy;      /* allow the switch to post-copy (not with parallel) */
    guint postcopy_after_ms;  /* switch to post-copy after this much pre-copy, 0 = never */
    gboolean postcopy_after_precopy; /* switch once the first pass of pre-copy is done (virsh) */
    gboolean tls;             /* the migration data over TLS (VIR_MIGRATE_TLS) */
    guint migrate_timeout_ms; /* the memory copy's limit, 0 = none; then timeout_action */
    OrchTimeoutAction timeout_action;
    guint agent_timeout_ms;   /* handshake / ping */
    guint prepare_timeout_ms;
    guint unplug_timeout_ms;
    guint resume_timeout_ms;
    guint plug_attempts;      /* tries on the destination before migrating back */
    char *state_dir;          /* journal and locks; NULL: /var/lib/hotmig */
    char *hotmigd_url;        /* the destination's hotmigd, https://HOST:PORT */
    char *source_hotmigd_url; /* the source's, told when the domain left; NULL: not told */
    char *tls_cert;           /* our client certificate for hotmigd (PEM file) */
    char *tls_key;            /* its private key */
    char *tls_ca;             /* the CA hotmigd's certificate must chain to */
    guint hotmigd_timeout_ms; /* each call to hotmigd */
    /* What opens the hosts' libvirt and hotmigd clients (borrowed); NULL: the real ones, with
     * the tls_* files and hotmigd_timeout_ms (tests bring fakes). */
    const OrchConnector *connector;
    GCancellable *cancellable; /* cancelled: abort the migration job and undo (borrowed) */
    /* Progress lines for --verbose (phase, message); called on any thread; may be NULL. */
    void (*progress)(OrchPhase phase, const char *message, gpointer opaque);
    gpointer progress_opaque;
} OrchOptions;

/* Fills @opts with the defaults: those of the configuration's [migrate] keys for the timeouts
 * and plug attempts (common/config.c). Strings stay NULL. */
void orch_options_init(OrchOptions *opts);

/* Sets what the configuration's [migrate] group says of a migration in @opts (after
 * orch_options_init()): agent channel, VF alias prefix, timeouts and their action, plug
 * attempts, persistent, undefinesource, bandwidth, parallel, auto-converge, post-copy, the
 * client's TLS files. The only mapping from the configuration to the options: a command line
 * overrides what it gives on top. */
void orch_options_take_config(OrchOptions *opts, const HmConfig *config);
void orch_options_clear(OrchOptions *opts);
/* A copy of @src's strings and values into @dst (clear it with orch_options_clear()). */
void orch_options_copy(OrchOptions *dst, const OrchOptions *src);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(OrchOptions, orch_options_clear)

/* What the migrate phase asks libvirt, in migrate-vm's option words: "live, p2p, persistent,
 * bandwidth 10 MiB/s, parallel 2, ..." (owned). */
char *orch_options_format_migration(const OrchOptions *opts);

/* What the standby path did for the guest's processes (issue 30; docs/design.md "Standby
 * path"): the agent's per-process "standby" records of a prepare or resume answer, summed. In
 * the prepare phase the switch, in the resume phase the switch back and what the standby path
 * carried. @used FALSE (no process had a standby device, or an agent or layer that does not
 * tell): nothing to show. */
typedef struct {
    gboolean used;
    guint switched;   /* prepare: connections switched to the standby device */
    guint paused;     /* prepare: connections that pause until the resume */
    guint64 sends;    /* resume: sends the standby path carried */
    guint64 receives; /* resume: receives it carried */
    guint ms; /* the longest pause of one process: the switch's (prepare), the switch back's */
} OrchStandbyFigures;

typedef struct {
    OrchPhase phase;
    OrchStatus status;
    gint64 duration_us;
    char *detail;               /* human-readable, may be NULL */
    OrchStandbyFigures standby; /* prepare and resume: in the JSON as "standby" when used */
} OrchPhaseRecord;

typedef struct {
    char *action; /* "agent-resume", "plug-source", "migrate-back", ... */
    gboolean ok;
    gint64 duration_us;
    char *detail;
} OrchRollbackRecord;

typedef struct {
    char *domain;
    char *source_uri;
    char *dest_uri;
    OrchPhaseRecord phases[ORCH_PHASE_LAST];
    GPtrArray *rollback;   /* OrchRollbackRecord, in the order done */
    gboolean ok;
    OrchPhase failed_phase; /* valid when !ok */
    char *error;            /* the failure's message when !ok */
    char *final_host;       /* "source" or "destination": where the domain runs at the end */
    guint vfs_total;        /* VFs the domain had */
    guint vfs_attached;     /* VFs it has at the end */
    gint64 total_us;
} OrchReport;

/* An empty report of the migration @opts asks for, every phase pending (owned; report.c). */
OrchReport *orch_report_new(const OrchOptions *opts);
void orch_report_free(OrchReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchReport, orch_report_free)

/* A plain-text table of the phases (owned). */
char *orch_report_format_table(const OrchReport *report);
/* The same as one JSON object (owned), pretty when @pretty. */
char *orch_report_format_json(const OrchReport *report, gboolean pretty);

/* ---- connecting (connector.c) ---------------------------------------------------------- */

/* The one place that opens a host's libvirt: @opts->connector's open_virt when there is one,
 * else the libvirt adapter, wrapped in fault injection when HOTMIG_FAULT_INJECT asks (with a
 * warning). @opts may be NULL (the real adapter). @label names the host in messages and fault
 * specs ("source", "destination", a host's name). Owned; NULL with @error. */
OrchVirt *orch_connector_open_virt(const OrchOptions *opts, const char *uri, const char *label,
                                   GError **error);

/* The one place that opens the client of the hotmigd at @url: @opts->connector's open_hotmigd when
 * there is one, else the HTTPS client with @opts' tls_* files, each call waiting at most
 * hotmigd_timeout_ms (at least a second). Owned; NULL with @error. */
OrchHotmigdClient *orch_connector_open_hotmigd(const OrchOptions *opts, const char *url,
                                               GError **error);

/* Runs a migration. Always returns a report (owned) in *ret_report, also on failure, so the
 * caller can show what happened. Returns TRUE when the domain runs on the destination with
 * all its VFs and the agent resumed. Hosts are reached through @opts->connector. */
gboolean orch_migrate(const OrchOptions *opts, OrchReport **ret_report, GError **error);

/* ---- pre-flight (--dry-run) ---------------------------------------------------------------- */

typedef enum {
    ORCH_CHECK_PASS,
    ORCH_CHECK_FAIL,
    ORCH_CHECK_SKIP, /* not run: an earlier failure makes it meaningless, or not asked for */
    ORCH_CHECK_LAST,
} OrchCheckStatus;

HM_ENUM_DECL(orch_check_status, OrchCheckStatus)

typedef struct {
    char *name; /* "source", "domain", "destination", "agent", "vfs", "hotmigd", "target-vf",
                 * "files", "migration-port", "cpu" */
    OrchCheckStatus status;
    char *detail; /* one line for people */
} OrchCheck;

void orch_check_free(OrchCheck *check);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchCheck, orch_check_free)

/* Checks, without changing anything on either host, whether @opts->domain could migrate to
 * @opts->dest_uri now. *ret_checks (owned GPtrArray of OrchCheck) is always set. Returns FALSE
 * with ORCH_ERROR_PREFLIGHT when a check failed. */
gboolean orch_preflight(const OrchOptions *opts, GPtrArray **ret_checks, GError **error);

/* One line per check: "PASS  name  detail" (owned). */
char *orch_checks_format_table(GPtrArray *checks);
/* {"checks":[{"name","status","detail"}...],"ok":bool} (owned). */
char *orch_checks_format_json(GPtrArray *checks, gboolean pretty);

/* ---- recovery ------------------------------------------------------------------------ */

typedef struct {
    char *domain;
    char *outcome;    /* "finished", "rolled back", "failed" */
    char *final_host; /* "source", "destination", or NULL when unknown */
    guint vfs_total;
    guint vfs_attached;
    GPtrArray *actions; /* OrchRollbackRecord: what recovery did, in order */
    char *error;        /* why it failed, or NULL */
} OrchRecovery;

void orch_recovery_free(OrchRecovery *rec);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchRecovery, orch_recovery_free)

/* Finishes or undoes the unfinished migrations journaled under opts->state_dir: of
 * opts->domain, or of every domain when it is NULL. For each it asks the hosts where the
 * domain runs, aborts a migration job left running, plugs back the VFs it lacks there and
 * resumes the agent; then removes the journal. Running it again finds nothing to do.
 * *ret_results (owned GPtrArray of OrchRecovery) is always set. Returns FALSE when any
 * recovery failed (its journal is kept) or, for a named domain, when it has no journal
 * (ORCH_ERROR_NOT_FOUND). */
gboolean orch_recover(const OrchOptions *opts, GPtrArray **ret_results, GError **error);

char *orch_recovery_format_table(GPtrArray *results);
char *orch_recovery_format_json(GPtrArray *results, gboolean pretty);

G_END_DECLS
