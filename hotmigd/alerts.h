/* hotmigd's failure-prediction hook (docs/alerts.md): events from three inputs go into this
 * daemon's alert book, or to the daemon responsible for their host, and become quarantines
 * and evacuations.
 *
 *   alerts.c        HotmigdAlerts: checks events against the cluster's hosts ([host NAME]
 *                   groups), decides which daemon acts (the host's own while it answers, else
 *                   the first answering host in configuration order), applies them to the book
 *                   and acts; the mutual-TLS API's /v1/alerts; the webhook's checks (bearer
 *                   token, hosts, body); /metrics
 *   alerts-input.c  the exec'd command and the Unix socket of event lines
 *   server.c        the plain-HTTP listener of the Alertmanager webhook and /metrics (libsoup;
 *                   server.h), and /v1/alerts on the mutual-TLS server
 *   alert-parse.c   the parsers (alert-parse.h); metrics.c the text format (metrics.h)
 *   alerts-hook.c   hotmigd's wiring of all this (alerts-hook.h, part of the executable)
 *
 * Everything runs on the main loop but the calls to other daemons, which run in worker threads
 * with a deadline: no input ever waits on another host. */
#pragma once

#include <glib.h>

#include "common/config.h"
#include "engine/engine.h"
#include "engine/hotmigd-client.h"
#include "hotmigd/alert-parse.h"
#include "hotmigd/api.h"
#include "hotmigd/metrics.h"
#include "hotmigd/pool.h"
#include "policies/policies.h"

G_BEGIN_DECLS

#define HOTMIGD_ALERTS_TOKEN_MAX 4096      /* bytes of the token file */
#define HOTMIGD_ALERTS_FORWARD_TIMEOUT_S 5 /* a call to another host's hotmigd */
#define HOTMIGD_ALERTS_WEBHOOKS_MAX 8      /* webhook bodies handled at once; more: 503 */

/* What became of one event, as the inputs answer it. */
typedef enum {
    ORCH_ALERT_RESULT_ACCEPTED, /* applied (a new alert, a change, a resolution) */
    ORCH_ALERT_RESULT_MERGED,   /* a repeat or update of an active alert of the same key */
    ORCH_ALERT_RESULT_IGNORED,  /* below the confidence threshold */
    ORCH_ALERT_RESULT_ERROR,    /* not applied anywhere: the reason says why */
    ORCH_ALERT_RESULT_LAST,
} OrchAlertResultKind;

HM_ENUM_DECL(orch_alert_result_kind, OrchAlertResultKind)

typedef struct {
    OrchAlertResultKind kind;
    char *host;                /* the event's host (NULL when it had none) */
    char *actor;               /* the host whose daemon applied it; NULL on error */
    PolAlertActionKind action; /* what the actor's book asked for */
    PolHostState state;        /* the host's state in the actor's book afterwards */
    char *reason;              /* one line: what happened and why */
} OrchAlertResult;

void orch_alert_result_free(OrchAlertResult *result);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAlertResult, orch_alert_result_free)

/* "accepted: REASON", "merged (by A): REASON", "error: REASON" (owned): the Unix socket's
 * reply line, without the newline. */
char *orch_alert_result_format(const OrchAlertResult *result, const char *self);

/* What the hook asks of the rest of the daemon; tests bring fakes. */
typedef struct {
    /* A client of the hotmigd at @url (owned). Called from worker threads: must be
     * thread-safe. NULL: the HTTPS client with [migrate] client-cert, client-key, ca-cert. */
    OrchHotmigdClient *(*open_peer)(gpointer data, const char *url, GError **error);
    /* Evacuates @host (hotmigd_evacuate(), docs/hotmigd.md): idempotent per host (*ret_merged
     * when it joins a running evacuation, then with the earlier deadline); *ret_late (owned,
     * may be empty) the VMs predicted to miss @deadline. NULL: evacuations fail. */
    gboolean (*evacuate)(gpointer data, const char *host, gint64 deadline, const char *reason,
                         char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error);
    /* Holds @host quarantined (POL_HOST_QUARANTINED) or not (POL_HOST_OK) in the plans of the
     * daemon (hotmigd_set_host_state()): called whenever the book moves the host between ok
     * and quarantined-or-evacuating (an evacuation keeps it evacuating by itself; when it ends
     * with alerts left, the quarantine holds). NULL: nothing to tell. */
    gboolean (*set_state)(gpointer data, const char *host, PolHostState state, const char *reason,
                          GError **error);
    /* Fills the migrations and phases of @metrics, at once. NULL: they stay 0. */
    void (*stats)(gpointer data, HotmigdMetrics *metrics);
    /* Counts this host's VFs by state for /metrics: calls @done once, at once or later on the
     * main context (hotmigd: the pool's worker thread counts, hotmigd_api_worker_count_vfs()).
     * NULL: /metrics has no VF gauges. */
    void (*vfs)(gpointer data, HotmigdApiCountsFunc done, gpointer done_data);
    /* Unix seconds. NULL: the system's clock. */
    gint64 (*now)(gpointer data);
} HotmigdAlertsOps;

typedef struct HotmigdAlerts HotmigdAlerts;

/* The hook of the daemon of host @name (a [host NAME] of @config, or it acts for no other
 * host) with @config's [alerts] and [host NAME] groups; @ops and @data (borrowed) as above.
 * A token file that cannot be read is a warning (every webhook request is then refused), not
 * an error. Owned result; NULL with ORCH_ERROR_INVALID when @config's hosts give no hotmigd
 * URL. */
HotmigdAlerts *hotmigd_alerts_new(const HmConfig *config, const char *name,
                                  const HotmigdAlertsOps *ops, gpointer data, GError **error);
HotmigdAlerts *hotmigd_alerts_ref(HotmigdAlerts *alerts);
void hotmigd_alerts_unref(HotmigdAlerts *alerts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HotmigdAlerts, hotmigd_alerts_unref)

const char *hotmigd_alerts_get_name(const HotmigdAlerts *alerts); /* borrowed */

/* The book (borrowed): pol_alert_book_get_state() says which hosts are quarantined or
 * evacuating, for plans. */
const PolAlertBook *hotmigd_alerts_get_book(const HotmigdAlerts *alerts);

/* @host's state as this daemon knows it: its book's, else what @host's daemon said last when
 * an event was forwarded to it, else POL_HOST_DOWN when its daemon did not answer the last
 * call, else ok. */
PolHostState hotmigd_alerts_get_state(const HotmigdAlerts *alerts, const char *host);

/* Is @host a [host NAME] of the configuration? */
gboolean hotmigd_alerts_knows_host(const HotmigdAlerts *alerts, const char *host);

typedef void (*HotmigdAlertsDone)(GPtrArray *results, gpointer data);

/* Handles @events (PolAlertEvent, copied) from @input ("socket", "exec:NAME", "alertmanager
 * from ADDRESS": for the log), one after the other: an unknown host is an error result;
 * events about this host are applied here; the others are forwarded to the daemon
 * responsible (worker threads). Then calls @done with one OrchAlertResult per event
 * (borrowed, in order), from the main loop; at once when nothing was forwarded. */
void hotmigd_alerts_submit(HotmigdAlerts *alerts, GPtrArray *events, const char *input,
                           HotmigdAlertsDone done, gpointer data);

/* The evacuation of @host has ended (hotmigd_set_evacuation_done()): the book lifts the host,
 * or keeps it quarantined while alerts remain. */
void hotmigd_alerts_evacuation_done(HotmigdAlerts *alerts, const char *host, gboolean ok);

/* Whether the hotmigd of @host answers, as found by a call of this daemon's (a forwarded
 * alert, the inventory): GET /v1/alerts reports a host whose daemon does not as down. */
void hotmigd_alerts_set_answers(HotmigdAlerts *alerts, const char *host, gboolean answers);

/* /v1/alerts of the mutual-TLS API, from @peer (for the log): POST takes a forwarded event
 * (orch_hotmigd_client_alert()) and applies it here, and only from the host it names in 'from':
 * @peer_host is the [host NAME] the client's certificate is (NULL: none, 403); GET lists the
 * book. */
HotmigdApiReply *hotmigd_alerts_api_handle(HotmigdAlerts *alerts, const char *method,
                                           const char *body, gsize len, const char *peer,
                                           const char *peer_host);

/* ---- the webhook and /metrics (the plain-HTTP listener) ---------------------------------- */

/* Reads the bearer token again from @token_file (a reload), replacing the one held; main
 * context only (the listener checks tokens there). */
void hotmigd_alerts_reload_token(HotmigdAlerts *alerts, const char *token_file);

/* Does the Authorization header @authorization (NULL: none) carry the bearer token? Compared
 * in constant time. FALSE with *@ret_why (owned) for the log when not. */
gboolean hotmigd_alerts_authorized(const HotmigdAlerts *alerts, const char *authorization,
                                   char **ret_why);

/* POST /v1/alerts/alertmanager with an authorized body of @len bytes from @peer: 413 over
 * ORCH_ALERT_WEBHOOK_MAX_BYTES, 400 naming the field when it does not parse, 422 naming an
 * unknown host (nothing of the body is applied then); else every event is handled as by
 * hotmigd_alerts_submit() and the reply is 200 with each event's result, or 502 when one could
 * not be applied anywhere (Alertmanager sends it again; repeats merge). Calls @done with the
 * reply (taken) once, maybe before returning. */
void hotmigd_alerts_webhook(HotmigdAlerts *alerts, const char *body, gsize len, const char *peer,
                            HotmigdApiReplyFunc done, gpointer data);

/* /metrics: @done gets the text once the VF counts are in (ops->vfs), maybe before this
 * returns; everything else is taken now. The book is held until then. */
void hotmigd_alerts_metrics(HotmigdAlerts *alerts, HotmigdMetricsDone done, gpointer data);

/* ---- the other inputs (alerts-input.c) --------------------------------------------------- */

typedef struct OrchAlertInputs OrchAlertInputs;

/* Starts @config's [alerts] socket (a Unix socket, mode 0600; a stale one is replaced) and
 * exec (run with this host's name as its argument every exec-interval seconds; killed when it
 * runs longer) into @alerts. Fails naming the socket or the command. Owned result; freeing it
 * stops both (a running command is killed). */
OrchAlertInputs *orch_alert_inputs_new(const HmConfig *config, HotmigdAlerts *alerts,
                                       GError **error);
void orch_alert_inputs_free(OrchAlertInputs *inputs);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OrchAlertInputs, orch_alert_inputs_free)

G_END_DECLS
