/* hotmigd's failure-prediction hook: the alert book of this daemon and who acts on an alert
 * (docs/alerts.md, "Who acts").
 *
 * An event about host X, from any input of any daemon D:
 *   - X is not a [host NAME] of the configuration: refused (the webhook: 422, nothing applied);
 *   - X is D's own host: D applies it to its book and acts;
 *   - else D forwards it to X's hotmigd (POST /v1/alerts over mutual TLS), which applies it;
 *   - X's hotmigd does not answer (unreachable, TLS refused, 503, no answer within
 *     HOTMIGD_ALERTS_FORWARD_TIMEOUT_S): the first host in configuration order, X left out, whose
 *     hotmigd answers acts for X. D walks the hosts in that order: reaching itself, it acts;
 *     another host that answers is sent the event as deputy and acts (it does not forward
 *     again). Every daemon that gets the same alert finds the same deputy, and the deputy's
 *     book merges the copies: the evacuation starts once.
 * Calls to other daemons run in worker threads; their results come back to the main loop. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/alerts.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "engine/json.h"

HM_ENUM_IMPL(orch_alert_result_kind, OrchAlertResultKind, ORCH_ALERT_RESULT_LAST, "accepted",
             "merged", "ignored", "error")

typedef struct {
    char *name;
    char *url; /* its hotmigd */
} AlertHost;

struct HotmigdAlerts {
    gint refs;
    char *name;
    GPtrArray *hosts; /* AlertHost, in configuration order */
    char *token;      /* NULL: none could be read, every webhook request is refused */
    char *token_problem;
    double min_confidence;
    char *host_label;
    OrchAlertOptions parse;
    char *cert, *key, *ca; /* for the default open_peer */
    HotmigdAlertsOps ops;
    gpointer data;
    PolAlertBook *book;
    GHashTable *reported;      /* host -> GINT_TO_POINTER(PolHostState + 1) its daemon said */
    GHashTable *down;          /* host -> TRUE: its daemon did not answer our last call */
    GHashTable *evac_deadline; /* host -> gint64 *: the deadline given to its running evacuation */
    GHashTable *held;          /* host -> TRUE: told the daemon it is quarantined */
    guint64 counts[ORCH_ALERT_OUTCOME_LAST];
    /* The blast radius (issue 15, item 9): at most max_unavailable hosts (0: no limit)
     * quarantined or evacuating at once, as this daemon knows them (its book, what the daemons
     * it forwarded to said) with those an event forwarded now may hold (pending); at most
     * HOTMIGD_ALERTS_WEBHOOKS_MAX webhook bodies handled at once. */
    guint max_unavailable;
    GHashTable *pending; /* host -> GUINT_TO_POINTER(forwards in flight that may hold it) */
    guint webhooks;      /* webhook bodies being handled */
};

static void alert_host_free(AlertHost *peer)
{
    if (!peer)
        return;
    g_free(peer->name);
    g_free(peer->url);
    g_free(peer);
}

static AlertHost *alert_host_copy(const AlertHost *peer)
{
    AlertHost *copy = g_new0(AlertHost, 1);

    copy->name = g_strdup(peer->name);
    copy->url = g_strdup(peer->url);
    return copy;
}

void orch_alert_result_free(OrchAlertResult *result)
{
    if (!result)
        return;
    g_free(result->host);
    g_free(result->actor);
    g_free(result->reason);
    g_free(result);
}

static OrchAlertResult *result_error(const char *host, char *reason)
{
    OrchAlertResult *result = g_new0(OrchAlertResult, 1);

    result->kind = ORCH_ALERT_RESULT_ERROR;
    result->host = g_strdup(host);
    result->reason = reason;
    return result;
}

char *orch_alert_result_format(const OrchAlertResult *result, const char *self)
{
    const char *word = orch_alert_result_kind_to_string(result->kind);

    if (result->actor && g_strcmp0(result->actor, self) != 0)
        return g_strdup_printf("%s (by %s): %s", word, result->actor, result->reason);
    return g_strdup_printf("%s: %s", word, result->reason);
}

static gint64 alerts_now(const HotmigdAlerts *alerts)
{
    return alerts->ops.now ? alerts->ops.now(alerts->data) : g_get_real_time() / G_USEC_PER_SEC;
}

/* ---- construction -------------------------------------------------------------------------- */

/* [host NAME] hotmigd, else https://SERVER:[migrate] hotmigd-port with SERVER from its URI
 * (localhost for a URI without one), as migrate-vm finds a destination's daemon. */
static char *host_url(const HmConfig *config, const HmConfigHost *host, GError **error)
{
    g_autoptr(GUri) uri = NULL;
    const char *server;

    if (host->hotmigd)
        return g_strdup(host->hotmigd);
    uri = g_uri_parse(host->uri, G_URI_FLAGS_NONE, NULL);
    if (!uri) {
        g_set_error(
            error, ORCH_ERROR, ORCH_ERROR_INVALID,
            "[host %s]: cannot tell where its hotmigd listens: uri '%s' is not a URI; set its 'hotmigd'",
            host->name, host->uri);
        return NULL;
    }
    server = g_uri_get_host(uri) && *g_uri_get_host(uri) ? g_uri_get_host(uri) : "localhost";
    return g_strdup_printf("https://%s%s%s:%" G_GUINT64_FORMAT, strchr(server, ':') ? "[" : "",
                           server, strchr(server, ':') ? "]" : "",
                           hm_config_get_uint(config, HM_CONFIG_MIGRATE_HOTMIGD_PORT));
}

/* The token file's first line, trimmed; NULL with *ret_problem when there is none. */
static char *token_read(const char *path, char **ret_problem)
{
    g_autofree char *contents = NULL;
    g_autoptr(GError) local = NULL;
    gsize len = 0;
    GStatBuf st;

    if (!path || !*path) {
        *ret_problem = g_strdup("[alerts] token-file is empty");
        return NULL;
    }
    if (!hm_file_read_limited(path, HOTMIGD_ALERTS_TOKEN_MAX, &contents, &len, &local)) {
        *ret_problem = g_strdup_printf("cannot read the token file: %s", local->message);
        return NULL;
    }
    if (memchr(contents, '\0', len)) {
        *ret_problem = g_strdup_printf("the token file '%s' holds a NUL byte", path);
        return NULL;
    }
    contents[strcspn(contents, "\r\n")] = '\0';
    g_strstrip(contents);
    if (!*contents) {
        *ret_problem = g_strdup_printf("the token file '%s' is empty", path);
        return NULL;
    }
    if (g_stat(path, &st) == 0 && (st.st_mode & 0077))
        g_warning("The alert token file '%s' can be read by others than its owner (mode %04o): "
                  "chmod 600 it",
                  path, (unsigned)(st.st_mode & 07777));
    return g_steal_pointer(&contents);
}

HotmigdAlerts *hotmigd_alerts_new(const HmConfig *config, const char *name,
                                  const HotmigdAlertsOps *ops, gpointer data, GError **error)
{
    g_autoptr(HotmigdAlerts) alerts = NULL;
    GPtrArray *hosts;
    const char *token_file;

    g_return_val_if_fail(config && name && *name, NULL);

    alerts = g_new0(HotmigdAlerts, 1);
    alerts->refs = 1;
    alerts->name = g_strdup(name);
    alerts->hosts = g_ptr_array_new_with_free_func((GDestroyNotify)alert_host_free);
    alerts->reported = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    alerts->down = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    alerts->evac_deadline = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    alerts->held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    alerts->pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    alerts->max_unavailable = hm_config_get_uint(config, HM_CONFIG_ALERTS_MAX_UNAVAILABLE);
    if (ops)
        alerts->ops = *ops;
    alerts->data = data;
    alerts->min_confidence = hm_config_get_uint(config, HM_CONFIG_ALERTS_MIN_CONFIDENCE) / 100.0;
    alerts->book = pol_alert_book_new(alerts->min_confidence);
    /* The default label, "instance", falls back to "host"; a label set in the file does not
     * (docs/alerts.md). */
    if (hm_config_get_line(config, HM_CONFIG_ALERTS_HOST_LABEL) > 0)
        alerts->host_label = g_strdup(hm_config_get_string(config, HM_CONFIG_ALERTS_HOST_LABEL));
    alerts->parse.host_label = alerts->host_label;
    alerts->cert = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_CLIENT_CERT));
    alerts->key = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_CLIENT_KEY));
    alerts->ca = g_strdup(hm_config_get_string(config, HM_CONFIG_MIGRATE_CA_CERT));

    hosts = hm_config_get_hosts(config);
    for (guint i = 0; i < hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(hosts, i);
        AlertHost *peer = g_new0(AlertHost, 1);

        g_ptr_array_add(alerts->hosts, peer);
        peer->name = g_strdup(host->name);
        peer->url = host_url(config, host, error);
        if (!peer->url)
            return NULL;
    }
    token_file = hm_config_get_string(config, HM_CONFIG_ALERTS_TOKEN_FILE);
    alerts->token = token_read(token_file, &alerts->token_problem);
    return g_steal_pointer(&alerts);
}

HotmigdAlerts *hotmigd_alerts_ref(HotmigdAlerts *alerts)
{
    g_return_val_if_fail(alerts != NULL, NULL);
    g_atomic_int_inc(&alerts->refs);
    return alerts;
}

void hotmigd_alerts_unref(HotmigdAlerts *alerts)
{
    if (!alerts || !g_atomic_int_dec_and_test(&alerts->refs))
        return;
    g_free(alerts->name);
    g_ptr_array_unref(alerts->hosts);
    if (alerts->token)
        memset(alerts->token, 0, strlen(alerts->token));
    g_free(alerts->token);
    g_free(alerts->token_problem);
    g_free(alerts->host_label);
    g_free(alerts->cert);
    g_free(alerts->key);
    g_free(alerts->ca);
    pol_alert_book_free(alerts->book);
    g_hash_table_unref(alerts->reported);
    g_hash_table_unref(alerts->down);
    g_hash_table_unref(alerts->evac_deadline);
    g_hash_table_unref(alerts->held);
    g_hash_table_unref(alerts->pending);
    g_free(alerts);
}

const char *hotmigd_alerts_get_name(const HotmigdAlerts *alerts)
{
    g_return_val_if_fail(alerts != NULL, NULL);
    return alerts->name;
}

const PolAlertBook *hotmigd_alerts_get_book(const HotmigdAlerts *alerts)
{
    g_return_val_if_fail(alerts != NULL, NULL);
    return alerts->book;
}

static const AlertHost *alerts_host(const HotmigdAlerts *alerts, const char *name)
{
    for (guint i = 0; i < alerts->hosts->len; i++) {
        const AlertHost *peer = g_ptr_array_index(alerts->hosts, i);

        if (g_str_equal(peer->name, name))
            return peer;
    }
    return NULL;
}

gboolean hotmigd_alerts_knows_host(const HotmigdAlerts *alerts, const char *host)
{
    g_return_val_if_fail(alerts != NULL, FALSE);
    return host && alerts_host(alerts, host) != NULL;
}

PolHostState hotmigd_alerts_get_state(const HotmigdAlerts *alerts, const char *host)
{
    PolHostState state;
    gpointer reported;

    g_return_val_if_fail(alerts && host, POL_HOST_OK);
    state = pol_alert_book_get_state(alerts->book, host);
    if (state != POL_HOST_OK)
        return state;
    if (g_hash_table_contains(alerts->down, host))
        return POL_HOST_DOWN;
    reported = g_hash_table_lookup(alerts->reported, host);
    return reported ? (PolHostState)(GPOINTER_TO_INT(reported) - 1) : POL_HOST_OK;
}

/* "A, B, C" (owned). */
static char *alerts_host_list(const HotmigdAlerts *alerts)
{
    g_autoptr(GString) s = g_string_new(NULL);

    for (guint i = 0; i < alerts->hosts->len; i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "",
                               ((AlertHost *)g_ptr_array_index(alerts->hosts, i))->name);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* "host 'X' is not one of the cluster's hosts (the [host NAME] groups: A, B)" (owned). */
static char *unknown_host_text(const HotmigdAlerts *alerts, const char *host)
{
    g_autofree char *list = alerts_host_list(alerts);

    return g_strdup_printf(
        "host '%.256s' is not one of the cluster's hosts (the [host NAME] groups: %s)", host,
        *list ? list : "none");
}

/* ---- acting ---------------------------------------------------------------------------------- */

static char *deadline_text(gint64 deadline, gint64 now)
{
    if (deadline == 0)
        return g_strdup("no deadline");
    if (deadline >= now)
        return g_strdup_printf("deadline in %" G_GINT64_FORMAT " s", deadline - now);
    return g_strdup_printf("deadline passed %" G_GINT64_FORMAT " s ago", now - deadline);
}

/* Tells the daemon whether the book holds @host (quarantined or evacuating: no new VMs on it)
 * or not, when that changed. */
static void alerts_sync(HotmigdAlerts *alerts, const char *host, const char *reason)
{
    PolHostState state = pol_alert_book_get_state(alerts->book, host);
    gboolean hold = state == POL_HOST_QUARANTINED || state == POL_HOST_EVACUATING;
    g_autoptr(GError) error = NULL;

    if (hold == g_hash_table_contains(alerts->held, host) || !alerts->ops.set_state)
        return;
    if (!alerts->ops.set_state(alerts->data, host, hold ? POL_HOST_QUARANTINED : POL_HOST_OK,
                               reason, &error)) {
        g_warning("Cannot %s host '%s' in the scheduler's plans: %s",
                  hold ? "quarantine" : "lift the quarantine of", host, error->message);
        return;
    }
    if (hold)
        g_hash_table_add(alerts->held, g_strdup(host));
    else
        g_hash_table_remove(alerts->held, host);
}

static void book_done_log(HotmigdAlerts *alerts, const PolAlertAction *action)
{
    g_message("%s", action->reason);
    alerts_sync(alerts, action->host, action->reason);
}

/* Starts (or, when one runs, reorders for the earlier @deadline) the evacuation of @host. */
static void alerts_evacuate(HotmigdAlerts *alerts, const char *host, gint64 deadline,
                            const char *reason)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *id = NULL;
    g_autofree char *when = deadline_text(deadline, alerts_now(alerts));
    g_auto(GStrv) late = NULL;
    gboolean merged = FALSE, ok;
    gint64 *stored = g_new(gint64, 1);

    *stored = deadline;
    /* Before the call: the evacuation may end (and say so) before it returns. */
    g_hash_table_replace(alerts->evac_deadline, g_strdup(host), stored);
    if (alerts->ops.evacuate) {
        ok =
            alerts->ops.evacuate(alerts->data, host, deadline, reason, &id, &merged, &late, &error);
    } else {
        g_set_error(&error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "this hotmigd has no scheduler to run evacuations");
        ok = FALSE;
    }
    if (!ok) {
        g_autoptr(PolAlertAction) action = NULL;
        g_autoptr(GError) local = NULL;

        g_warning("Cannot evacuate host '%s' (%s): %s", host, when, error->message);
        g_hash_table_remove(alerts->evac_deadline, host);
        if (pol_alert_book_evacuation_done(alerts->book, host, FALSE, alerts_now(alerts), &action,
                                           &local))
            book_done_log(alerts, action);
        return;
    }
    g_message("Evacuation %s of host '%s' %s (%s)", id ? id : "?", host,
              merged ? "was running: asked again with the earlier deadline" : "started", when);
    if (late && late[0]) {
        g_autofree char *list = g_strjoinv(", ", late);

        g_warning("Evacuation %s of host '%s': %u VMs are predicted to miss the deadline (%s): %s",
                  id ? id : "?", host, g_strv_length(late), when, list);
    }
}

/* ---- the blast radius ------------------------------------------------------------------------ */

static gboolean state_unavailable(PolHostState state)
{
    return state == POL_HOST_QUARANTINED || state == POL_HOST_EVACUATING;
}

/* How many hosts but @except are quarantined or evacuating as this daemon knows it, or may be
 * by an event forwarded now; their names in *ret_list ("A, B", owned). */
static guint alerts_unavailable(const HotmigdAlerts *alerts, const char *except, char **ret_list)
{
    g_autoptr(GString) list = g_string_new(NULL);
    guint n = 0;

    for (guint i = 0; i < alerts->hosts->len; i++) {
        const AlertHost *peer = g_ptr_array_index(alerts->hosts, i);
        gboolean pending = g_hash_table_contains(alerts->pending, peer->name);

        if (g_str_equal(peer->name, except) ||
            (!pending && !state_unavailable(hotmigd_alerts_get_state(alerts, peer->name))))
            continue;
        g_string_append_printf(list, "%s%s%s", list->len ? ", " : "", peer->name,
                               pending ? " (an alert on its way)" : "");
        n++;
    }
    *ret_list = g_string_free(g_steal_pointer(&list), FALSE);
    return n;
}

/* Would @ev make its host unavailable (firing, confident enough, the host not held yet)? */
static gboolean event_would_hold(const HotmigdAlerts *alerts, const PolAlertEvent *ev)
{
    return ev->host && !ev->resolved && ev->confidence >= alerts->min_confidence &&
           !state_unavailable(hotmigd_alerts_get_state(alerts, ev->host));
}

/* NULL when @ev may be applied or forwarded; else its error result: [alerts] max-unavailable
 * hosts are held already, the event is held back (logged, counted "held"). */
static OrchAlertResult *alerts_limit(HotmigdAlerts *alerts, const PolAlertEvent *ev,
                                     const char *input)
{
    g_autofree char *list = NULL;
    OrchAlertResult *result;
    guint n;

    if (!alerts->max_unavailable || !event_would_hold(alerts, ev))
        return NULL;
    n = alerts_unavailable(alerts, ev->host, &list);
    if (n < alerts->max_unavailable)
        return NULL;
    result = result_error(
        ev->host,
        g_strdup_printf("held back: host '%s' stays in service: [alerts] max-unavailable is %u "
                        "and %u host%s %s quarantined or evacuating (%s)",
                        ev->host, alerts->max_unavailable, n, n == 1 ? "" : "s",
                        n == 1 ? "is" : "are", list));
    alerts->counts[ORCH_ALERT_OUTCOME_HELD]++;
    g_warning("Alert from %s: %s", input, result->reason);
    return result;
}

static void pending_add(HotmigdAlerts *alerts, const char *host, gint delta)
{
    guint n = GPOINTER_TO_UINT(g_hash_table_lookup(alerts->pending, host)) + delta;

    if (n)
        g_hash_table_replace(alerts->pending, g_strdup(host), GUINT_TO_POINTER(n));
    else
        g_hash_table_remove(alerts->pending, host);
}

static OrchAlertOutcome outcome_of(const OrchAlertResult *result)
{
    switch (result->action) {
    case POL_ALERT_ACTION_QUARANTINE:
        return ORCH_ALERT_OUTCOME_QUARANTINE;
    case POL_ALERT_ACTION_EVACUATE:
        return ORCH_ALERT_OUTCOME_EVACUATE;
    case POL_ALERT_ACTION_LIFT:
        return ORCH_ALERT_OUTCOME_LIFT;
    default:
        break;
    }
    switch (result->kind) {
    case ORCH_ALERT_RESULT_MERGED:
        return ORCH_ALERT_OUTCOME_MERGED;
    case ORCH_ALERT_RESULT_IGNORED:
        return ORCH_ALERT_OUTCOME_IGNORED;
    case ORCH_ALERT_RESULT_ERROR:
        return ORCH_ALERT_OUTCOME_REJECTED;
    default:
        return ORCH_ALERT_OUTCOME_NONE;
    }
}

/* Applies @ev to this daemon's book and acts. @deputy_for_down: this daemon acts for
 * @ev->host, whose own daemon does not answer (said in the reason). */
static OrchAlertResult *alerts_apply(HotmigdAlerts *alerts, const PolAlertEvent *ev,
                                     const char *input, gboolean deputy)
{
    g_autoptr(PolAlertAction) action = NULL;
    g_autoptr(GError) error = NULL;
    OrchAlertResult *result;
    gint64 now = alerts_now(alerts);
    const gint64 *running;

    if ((result = alerts_limit(alerts, ev, input)))
        return result;
    if (!pol_alert_book_apply(alerts->book, ev, now, &action, &error)) {
        result = result_error(ev->host, g_strdup(error->message));
        alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
        g_message("Alert from %s refused: %s", input, result->reason);
        return result;
    }
    result = g_new0(OrchAlertResult, 1);
    result->host = g_strdup(ev->host);
    result->actor = g_strdup(alerts->name);
    result->action = action->kind;
    result->state = action->state;
    if (!ev->resolved && ev->confidence < alerts->min_confidence)
        result->kind = ORCH_ALERT_RESULT_IGNORED;
    else if (!ev->resolved && action->merged && action->kind == POL_ALERT_ACTION_NONE)
        result->kind = ORCH_ALERT_RESULT_MERGED;
    else
        result->kind = ORCH_ALERT_RESULT_ACCEPTED;
    result->reason = deputy ? g_strdup_printf("%s (acting for '%s', whose hotmigd does not answer)",
                                              action->reason, ev->host)
                            : g_strdup(action->reason);
    alerts->counts[outcome_of(result)]++;
    if (result->kind == ORCH_ALERT_RESULT_MERGED)
        g_debug("Alert from %s: %s", input, result->reason);
    else
        g_message("Alert from %s: %s: %s", input, orch_alert_result_kind_to_string(result->kind),
                  result->reason);

    alerts_sync(alerts, ev->host, result->reason);
    switch (action->kind) {
    case POL_ALERT_ACTION_EVACUATE:
        alerts_evacuate(alerts, ev->host, action->deadline, result->reason);
        break;
    case POL_ALERT_ACTION_NONE:
        /* An evacuation runs and the alerts now give an earlier deadline (an urgent alert came,
         * or one's deadline moved): the scheduler reorders what is left. */
        running = g_hash_table_lookup(alerts->evac_deadline, ev->host);
        if (action->state == POL_HOST_EVACUATING && running && action->deadline &&
            (*running == 0 || action->deadline < *running))
            alerts_evacuate(alerts, ev->host, action->deadline, result->reason);
        break;
    default:
        break;
    }
    return result;
}

void hotmigd_alerts_evacuation_done(HotmigdAlerts *alerts, const char *host, gboolean ok)
{
    g_autoptr(PolAlertAction) action = NULL;
    g_autoptr(GError) error = NULL;

    g_return_if_fail(alerts && host);
    g_hash_table_remove(alerts->evac_deadline, host);
    if (!pol_alert_book_evacuation_done(alerts->book, host, ok, alerts_now(alerts), &action,
                                        &error)) {
        /* An evacuation the alerts did not start (asked for by hand). */
        g_debug("%s", error->message);
        return;
    }
    book_done_log(alerts, action);
}

/* ---- forwarding ------------------------------------------------------------------------------ */

static OrchHotmigdClient *open_peer_https(HotmigdAlerts *alerts, const char *url, GError **error)
{
    return orch_hotmigd_client_new(url, alerts->cert, alerts->key, alerts->ca,
                                   HOTMIGD_ALERTS_FORWARD_TIMEOUT_S, error);
}

/* One event to hand to another daemon: what the worker thread needs and finds. */
typedef struct {
    HotmigdAlerts
        *alerts; /* a reference: only ops, data and the TLS files are read in the thread */
    char *self;
    PolAlertEvent *event;
    GPtrArray *order;       /* AlertHost: the host's own, then the others in configuration order */
    GHashTable *known_down; /* names found down earlier in this submission (read-only) */
    gboolean pending;       /* counted in alerts->pending while it is on its way */
    /* Found: */
    OrchHotmigdAlertReply *reply; /* a daemon took it */
    gboolean deputy;          /* ... as deputy */
    gboolean act_here;        /* every host before this one is down: this daemon acts */
    GPtrArray *newly_down;    /* char *: hosts whose daemon did not answer now */
    GPtrArray *answered;      /* char *: hosts whose daemon answered */
    GString *why_down;        /* "A: message; B: message" */
    GError *error;            /* refused, or nobody could take it */
} Forward;

static void forward_free(Forward *fw)
{
    if (!fw)
        return;
    hotmigd_alerts_unref(fw->alerts);
    g_free(fw->self);
    pol_alert_event_free(fw->event);
    g_ptr_array_unref(fw->order);
    g_hash_table_unref(fw->known_down);
    orch_hotmigd_alert_reply_free(fw->reply);
    g_ptr_array_unref(fw->newly_down);
    g_ptr_array_unref(fw->answered);
    g_string_free(fw->why_down, TRUE);
    g_clear_error(&fw->error);
    g_free(fw);
}

static void forward_thread(GTask *task, gpointer source, gpointer task_data, GCancellable *cancel)
{
    Forward *fw = task_data;
    HotmigdAlerts *alerts = fw->alerts;

    for (guint i = 0; i < fw->order->len; i++) {
        const AlertHost *peer = g_ptr_array_index(fw->order, i);
        g_autoptr(OrchHotmigdClient) vfd = NULL;
        g_autoptr(GError) local = NULL;

        if (i > 0 && g_str_equal(peer->name, fw->self)) {
            fw->act_here = TRUE;
            return;
        }
        if (g_hash_table_contains(fw->known_down, peer->name)) {
            g_string_append_printf(fw->why_down, "%s%s: did not answer before",
                                   fw->why_down->len ? "; " : "", peer->name);
            continue;
        }
        vfd = alerts->ops.open_peer ? alerts->ops.open_peer(alerts->data, peer->url, &local)
                                    : open_peer_https(alerts, peer->url, &local);
        if (vfd)
            fw->reply = orch_hotmigd_client_alert(vfd, fw->event, fw->self, i > 0, &local);
        if (fw->reply) {
            fw->deputy = i > 0;
            g_ptr_array_add(fw->answered, g_strdup(peer->name));
            return;
        }
        if (vfd && (g_error_matches(local, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE) ||
                    g_error_matches(local, ORCH_ERROR, ORCH_ERROR_UNREACHABLE) ||
                    g_error_matches(local, ORCH_ERROR, ORCH_ERROR_TIMEOUT))) {
            g_ptr_array_add(fw->newly_down, g_strdup(peer->name));
            g_string_append_printf(fw->why_down, "%s%s: %s", fw->why_down->len ? "; " : "",
                                   peer->name, local->message);
            continue;
        }
        /* It answered and refused, or we cannot call anyone (our certificate files). */
        if (vfd)
            g_ptr_array_add(fw->answered, g_strdup(peer->name));
        fw->error = g_steal_pointer(&local);
        return;
    }
    g_set_error(&fw->error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
                "no hotmigd answers for host '%s' (%s)", fw->event->host, fw->why_down->str);
}

/* ---- submissions ----------------------------------------------------------------------------- */

typedef struct {
    HotmigdAlerts *alerts;
    GPtrArray *events; /* PolAlertEvent */
    char *input;
    guint next;
    GPtrArray *results; /* OrchAlertResult */
    GHashTable *down;   /* names found down during this submission */
    HotmigdAlertsDone done;
    gpointer data;
} Submission;

static void submission_free(Submission *sub)
{
    if (!sub)
        return;
    hotmigd_alerts_unref(sub->alerts);
    g_ptr_array_unref(sub->events);
    g_free(sub->input);
    g_ptr_array_unref(sub->results);
    g_hash_table_unref(sub->down);
    g_free(sub);
}

static void submission_step(Submission *sub);

void hotmigd_alerts_set_answers(HotmigdAlerts *alerts, const char *host, gboolean answers)
{
    g_return_if_fail(alerts && host);
    if (answers) {
        if (g_hash_table_remove(alerts->down, host))
            g_message("The hotmigd of host '%s' answers again", host);
    } else if (!g_hash_table_contains(alerts->down, host)) {
        g_warning("The hotmigd of host '%s' does not answer", host);
        g_hash_table_add(alerts->down, g_strdup(host));
    }
}

static void forward_done(GObject *source, GAsyncResult *res, gpointer data)
{
    Submission *sub = data;
    HotmigdAlerts *alerts = sub->alerts;
    Forward *fw = g_task_get_task_data(G_TASK(res));
    const PolAlertEvent *ev = fw->event;
    OrchAlertResult *result;

    if (fw->pending)
        pending_add(alerts, ev->host, -1);
    for (guint i = 0; i < fw->newly_down->len; i++) {
        const char *name = g_ptr_array_index(fw->newly_down, i);

        g_hash_table_add(sub->down, g_strdup(name));
        hotmigd_alerts_set_answers(alerts, name, FALSE);
    }
    for (guint i = 0; i < fw->answered->len; i++)
        hotmigd_alerts_set_answers(alerts, g_ptr_array_index(fw->answered, i), TRUE);
    if (fw->act_here) {
        g_message(
            "Alert from %s about host '%s': its hotmigd does not answer (%s): this host acts for it, the first in configuration order whose hotmigd answers",
            sub->input, ev->host, fw->why_down->str);
        result = alerts_apply(alerts, ev, sub->input, TRUE);
    } else if (fw->reply) {
        int kind = orch_alert_result_kind_from_string(fw->reply->result);

        result = g_new0(OrchAlertResult, 1);
        result->kind =
            kind < 0 || kind == ORCH_ALERT_RESULT_ERROR ? ORCH_ALERT_RESULT_ACCEPTED : kind;
        result->host = g_strdup(ev->host);
        result->actor = g_strdup(fw->reply->actor);
        result->action = fw->reply->action;
        result->state = fw->reply->state;
        result->reason = g_strdup(fw->reply->reason);
        if (!fw->deputy)
            g_hash_table_replace(alerts->reported, g_strdup(ev->host),
                                 GINT_TO_POINTER(fw->reply->state + 1));
        alerts->counts[ORCH_ALERT_OUTCOME_FORWARDED]++;
        g_message("Alert from %s about host '%s' forwarded to the hotmigd of '%s'%s%s%s: %s: %s",
                  sub->input, ev->host, fw->reply->actor, fw->deputy ? ", which acts for it (" : "",
                  fw->deputy ? fw->why_down->str : "", fw->deputy ? ")" : "", fw->reply->result,
                  fw->reply->reason);
    } else {
        result = result_error(ev->host, g_strdup(fw->error->message));
        alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
        g_warning("Alert from %s about host '%s' not applied: %s", sub->input, ev->host,
                  fw->error->message);
    }
    g_ptr_array_add(sub->results, result);
    sub->next++;
    submission_step(sub);
}

/* Handles the events from sub->next on, until one must be forwarded (the step goes on when it
 * comes back) or none is left (then the submission ends). */
static void submission_step(Submission *sub)
{
    HotmigdAlerts *alerts = sub->alerts;

    while (sub->next < sub->events->len) {
        const PolAlertEvent *ev = g_ptr_array_index(sub->events, sub->next);
        const AlertHost *owner = ev->host ? alerts_host(alerts, ev->host) : NULL;
        g_autoptr(GTask) task = NULL;
        OrchAlertResult *result;
        Forward *fw;

        if (!owner) {
            g_ptr_array_add(
                sub->results,
                result_error(ev->host, unknown_host_text(alerts, ev->host ? ev->host : "")));
            alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
            g_message("Alert from %s refused: %s", sub->input,
                      ((OrchAlertResult *)g_ptr_array_index(sub->results, sub->results->len - 1))
                          ->reason);
            sub->next++;
            continue;
        }
        if (g_str_equal(ev->host, alerts->name)) {
            g_ptr_array_add(sub->results, alerts_apply(alerts, ev, sub->input, FALSE));
            sub->next++;
            continue;
        }
        if ((result = alerts_limit(alerts, ev, sub->input))) {
            g_ptr_array_add(sub->results, result);
            sub->next++;
            continue;
        }
        fw = g_new0(Forward, 1);
        if (alerts->max_unavailable && event_would_hold(alerts, ev)) {
            fw->pending = TRUE;
            pending_add(alerts, ev->host, +1);
        }
        fw->alerts = hotmigd_alerts_ref(alerts);
        fw->self = g_strdup(alerts->name);
        fw->event = pol_alert_event_copy(ev);
        fw->order = g_ptr_array_new_with_free_func((GDestroyNotify)alert_host_free);
        g_ptr_array_add(fw->order, alert_host_copy(owner));
        for (guint i = 0; i < alerts->hosts->len; i++) {
            const AlertHost *peer = g_ptr_array_index(alerts->hosts, i);

            if (peer != owner)
                g_ptr_array_add(fw->order, alert_host_copy(peer));
        }
        fw->known_down = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        {
            GHashTableIter iter;
            gpointer key;

            g_hash_table_iter_init(&iter, sub->down);
            while (g_hash_table_iter_next(&iter, &key, NULL))
                g_hash_table_add(fw->known_down, g_strdup(key));
        }
        fw->newly_down = g_ptr_array_new_with_free_func(g_free);
        fw->answered = g_ptr_array_new_with_free_func(g_free);
        fw->why_down = g_string_new(NULL);
        task = g_task_new(NULL, NULL, forward_done, sub);
        g_task_set_task_data(task, fw, (GDestroyNotify)forward_free);
        g_task_run_in_thread(task, forward_thread);
        return;
    }
    sub->done(sub->results, sub->data);
    submission_free(sub);
}

void hotmigd_alerts_submit(HotmigdAlerts *alerts, GPtrArray *events, const char *input,
                           HotmigdAlertsDone done, gpointer data)
{
    Submission *sub;

    g_return_if_fail(alerts && events && input && done);

    sub = g_new0(Submission, 1);
    sub->alerts = hotmigd_alerts_ref(alerts);
    sub->events = g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);
    for (guint i = 0; i < events->len; i++)
        g_ptr_array_add(sub->events, pol_alert_event_copy(g_ptr_array_index(events, i)));
    sub->input = g_strdup(input);
    sub->results = g_ptr_array_new_with_free_func((GDestroyNotify)orch_alert_result_free);
    sub->down = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    sub->done = done;
    sub->data = data;
    submission_step(sub);
}

/* ---- replies --------------------------------------------------------------------------------- */

static void result_json(JsonBuilder *b, const OrchAlertResult *result)
{
    json_builder_begin_object(b);
    orch_json_member_string(b, "host", result->host);
    orch_json_member_string(b, "result", orch_alert_result_kind_to_string(result->kind));
    orch_json_member_string(b, "actor", result->actor);
    if (result->kind != ORCH_ALERT_RESULT_ERROR) {
        orch_json_member_string(b, "action", pol_alert_action_kind_to_string(result->action));
        orch_json_member_string(b, "state", pol_host_state_to_string(result->state));
    }
    orch_json_member_string(b, "reason", result->reason);
    json_builder_end_object(b);
}

/* ---- /v1/alerts of the mutual-TLS API -------------------------------------------------------- */

static HotmigdApiReply *api_list(HotmigdAlerts *alerts)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    orch_json_member_string(b, "host", alerts->name);
    orch_json_member_int(b, "max_unavailable", alerts->max_unavailable);
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (guint i = 0; i < alerts->hosts->len; i++) {
        const AlertHost *peer = g_ptr_array_index(alerts->hosts, i);
        g_autoptr(GPtrArray) active = pol_alert_book_list(alerts->book, peer->name);

        json_builder_begin_object(b);
        orch_json_member_string(b, "name", peer->name);
        orch_json_member_string(
            b, "state", pol_host_state_to_string(hotmigd_alerts_get_state(alerts, peer->name)));
        json_builder_set_member_name(b, "alerts");
        json_builder_begin_array(b);
        for (guint j = 0; j < active->len; j++) {
            const PolAlertEvent *a = g_ptr_array_index(active, j);

            json_builder_begin_object(b);
            orch_json_member_string(b, "key", a->key);
            orch_json_member_string(b, "source", a->source);
            orch_json_member_string(b, "severity", pol_severity_to_string(a->severity));
            orch_json_member_double(b, "confidence", a->confidence);
            orch_json_member_time(b, "deadline", a->deadline);
            orch_json_member_time(b, "received", a->received);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL);
}

static HotmigdApiReply *api_forwarded(HotmigdAlerts *alerts, const char *body, gsize len,
                                      const char *peer, const char *peer_host)
{
    static const char *const known[] = {"from",     "deputy", "host",     "severity", "confidence",
                                        "deadline", "key",    "resolved", "source",   NULL};
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(PolAlertEvent) ev = NULL;
    g_autoptr(OrchAlertResult) result = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *source = NULL;
    g_autofree char *input = NULL;
    HotmigdApiReply *refused = NULL;
    JsonNode *node;
    const char *from, *orig;
    gboolean deputy;

    if (len == 0)
        return hotmigd_api_reply_error(
            400, "the request body is empty: an alert event is a JSON object");
    /* The same checks as every body of the API (api.c). */
    obj = hotmigd_api_body_object(body, len, known, ORCH_ALERT_MAX_DEPTH, &refused);
    if (!obj)
        return refused;
    node = json_object_get_member(obj, "from");
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING ||
        !*(from = json_node_get_string(node)) || strlen(from) > POL_NAME_MAX)
        return hotmigd_api_reply_error(400, "member 'from' must be the sending host's name");
    /* A forged 'from' (or 'deputy') would let any client speak for a host (issue 15). */
    if (!peer_host || !g_str_equal(from, peer_host))
        return hotmigd_api_reply_error(
            403,
            "'from' is '%.64s' but the client's certificate is %s%.64s%s: a host forwards its own alerts only",
            from, peer_host ? "host '" : "no cluster host's", peer_host ? peer_host : "",
            peer_host ? "'" : "");
    node = json_object_get_member(obj, "deputy");
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return hotmigd_api_reply_error(400, "member 'deputy' must be true or false");
    deputy = json_node_get_boolean(node);
    node = json_object_get_member(obj, "source");
    orig = node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING
               ? json_node_get_string(node)
               : "an unnamed source";
    source = g_strdup_printf("%.128s via %.256s", orig, from);
    ev = orch_alert_line_parse(body, len, source, alerts_now(alerts), &local);
    if (!ev)
        return hotmigd_api_reply_error(400, "%s", local->message);
    if (!hotmigd_alerts_knows_host(alerts, ev->host)) {
        g_autofree char *text = unknown_host_text(alerts, ev->host);
        alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
        return hotmigd_api_reply_error(422, "%s", text);
    }
    if (!g_str_equal(ev->host, alerts->name) && !deputy)
        return hotmigd_api_reply_error(
            409,
            "this is the hotmigd of '%s', not of '%s': it acts for '%s' only as deputy (when the hotmigd of '%s' does not answer)",
            alerts->name, ev->host, ev->host, ev->host);
    /* A deputy acts only for a host whose hotmigd is down as this daemon knows it (its last
     * inventory or call found it silent): no host may have another's machines evacuated behind
     * the back of a daemon that answers (issue 28, finding 8). */
    if (!g_str_equal(ev->host, alerts->name) && !g_hash_table_contains(alerts->down, ev->host))
        return hotmigd_api_reply_error(
            409,
            "'%s' asks this host to act for '%s' as deputy, but the hotmigd of '%s' answered this host's last call: it acts for itself",
            from, ev->host, ev->host);
    input = g_strdup_printf("%.256s's hotmigd (%s)", from, peer ? peer : "?");
    result = alerts_apply(alerts, ev, input, deputy && !g_str_equal(ev->host, alerts->name));
    if (result->kind == ORCH_ALERT_RESULT_ERROR)
        return hotmigd_api_reply_error(400, "%s", result->reason);
    json_builder_begin_object(b);
    orch_json_member_string(b, "host", result->host);
    orch_json_member_string(b, "result", orch_alert_result_kind_to_string(result->kind));
    orch_json_member_string(b, "actor", result->actor);
    orch_json_member_string(b, "action", pol_alert_action_kind_to_string(result->action));
    orch_json_member_string(b, "state", pol_host_state_to_string(result->state));
    orch_json_member_string(b, "reason", result->reason);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL); /* alerts_apply() logged it */
}

HotmigdApiReply *hotmigd_alerts_api_handle(HotmigdAlerts *alerts, const char *method,
                                           const char *body, gsize len, const char *peer,
                                           const char *peer_host)
{
    g_return_val_if_fail(alerts && method && (body || !len), NULL);

    if (g_str_equal(method, "GET"))
        return api_list(alerts);
    if (g_str_equal(method, "POST"))
        return api_forwarded(alerts, body, len, peer, peer_host);
    return hotmigd_api_reply_error(
        405, "method %.16s is not allowed on /v1/alerts (allowed: GET, POST)", method);
}

/* ---- the webhook ----------------------------------------------------------------------------- */

void hotmigd_alerts_reload_token(HotmigdAlerts *alerts, const char *token_file)
{
    g_return_if_fail(alerts != NULL && token_file != NULL);
    if (alerts->token)
        memset(alerts->token, 0, strlen(alerts->token));
    g_clear_pointer(&alerts->token, g_free);
    g_clear_pointer(&alerts->token_problem, g_free);
    alerts->token = token_read(token_file, &alerts->token_problem);
}

gboolean hotmigd_alerts_authorized(const HotmigdAlerts *alerts, const char *authorization,
                                   char **ret_why)
{
    const char *given;
    gsize want_len, given_len;
    guchar diff;

    g_return_val_if_fail(alerts != NULL, FALSE);
    if (!alerts->token) {
        if (ret_why)
            *ret_why = g_strdup_printf("no token is configured (%s)", alerts->token_problem);
        return FALSE;
    }
    if (!authorization) {
        if (ret_why)
            *ret_why = g_strdup("no Authorization header");
        return FALSE;
    }
    given = authorization + strspn(authorization, " \t");
    if (g_ascii_strncasecmp(given, "Bearer", 6) != 0 || (given[6] != ' ' && given[6] != '\t')) {
        if (ret_why)
            *ret_why = g_strdup("the Authorization header is not 'Bearer TOKEN'");
        return FALSE;
    }
    given += 6;
    given += strspn(given, " \t");
    given_len = strlen(given);
    while (given_len > 0 && (given[given_len - 1] == ' ' || given[given_len - 1] == '\t'))
        given_len--;
    /* Every byte of the token is looked at whatever the input: the time taken does not say
     * how much of it matched. */
    want_len = strlen(alerts->token);
    diff = want_len != given_len;
    for (gsize i = 0; i < want_len; i++)
        diff |= (guchar)alerts->token[i] ^ (guchar)(i < given_len ? given[i] : 0);
    if (diff) {
        if (ret_why)
            *ret_why = g_strdup("wrong bearer token");
        return FALSE;
    }
    return TRUE;
}

typedef struct {
    HotmigdAlerts *alerts; /* a reference */
    HotmigdApiReplyFunc done;
    gpointer data;
} Webhook;

static void webhook_done(GPtrArray *results, gpointer data)
{
    Webhook *hook = data;
    g_autoptr(JsonBuilder) b = json_builder_new();
    guint counts[ORCH_ALERT_RESULT_LAST] = {0};
    g_autoptr(GString) log = g_string_new(NULL);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "results");
    json_builder_begin_array(b);
    for (guint i = 0; i < results->len; i++) {
        const OrchAlertResult *result = g_ptr_array_index(results, i);

        counts[result->kind]++;
        result_json(b, result);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    g_string_printf(log, "%u alerts:", results->len);
    for (int k = 0; k < ORCH_ALERT_RESULT_LAST; k++) {
        if (counts[k])
            g_string_append_printf(log, " %u %s,", counts[k], orch_alert_result_kind_to_string(k));
    }
    g_string_truncate(log, log->len - 1);
    hook->alerts->webhooks--;
    hook->done(hotmigd_api_reply_new(counts[ORCH_ALERT_RESULT_ERROR] ? 502 : 200, b,
                                     g_string_free(g_steal_pointer(&log), FALSE)),
               hook->data);
    hotmigd_alerts_unref(hook->alerts);
    g_free(hook);
}

void hotmigd_alerts_webhook(HotmigdAlerts *alerts, const char *body, gsize len, const char *peer,
                            HotmigdApiReplyFunc done, gpointer data)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) events = NULL;
    g_autofree char *input = NULL;
    Webhook *hook;

    g_return_if_fail(alerts && (body || !len) && done);

    if (len > ORCH_ALERT_WEBHOOK_MAX_BYTES) {
        alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
        done(hotmigd_api_reply_error(
                 413, "the webhook body has %" G_GSIZE_FORMAT " bytes, more than the limit of %d",
                 len, ORCH_ALERT_WEBHOOK_MAX_BYTES),
             data);
        return;
    }
    events = orch_alert_webhook_parse(body, len, &alerts->parse, alerts_now(alerts), &error);
    if (!events) {
        alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
        done(hotmigd_api_reply_error(400, "%s", error->message), data);
        return;
    }
    for (guint i = 0; i < events->len; i++) {
        const PolAlertEvent *ev = g_ptr_array_index(events, i);

        if (!hotmigd_alerts_knows_host(alerts, ev->host)) {
            g_autofree char *text = unknown_host_text(alerts, ev->host);

            alerts->counts[ORCH_ALERT_OUTCOME_REJECTED]++;
            done(hotmigd_api_reply_error(
                     422, "webhook: alerts[%u]: %s: nothing of the body was applied", i, text),
                 data);
            return;
        }
    }
    if (alerts->webhooks >= HOTMIGD_ALERTS_WEBHOOKS_MAX) {
        done(hotmigd_api_reply_error(
                 503,
                 "%u webhook requests are being handled, the most at once: send it again "
                 "later",
                 alerts->webhooks),
             data);
        return;
    }
    alerts->webhooks++;
    hook = g_new0(Webhook, 1);
    hook->alerts = hotmigd_alerts_ref(alerts);
    hook->done = done;
    hook->data = data;
    input = g_strdup_printf("alertmanager (%s)", peer ? peer : "?");
    hotmigd_alerts_submit(alerts, events, input, webhook_done, hook);
}

/* ---- /metrics -------------------------------------------------------------------------------- */

/* A /metrics request waiting for the VF counts. Everything else was taken when it came: the
 * daemon behind ops.stats may be gone by the time the counts come (at a stop, the worker
 * delivers its last replies after the hook stopped). */
typedef struct {
    HotmigdAlerts *alerts; /* a reference */
    HotmigdMetrics metrics;
    HotmigdMetricsDone done;
    gpointer data;
} MetricsWait;

static void metrics_counted(const guint *counts, const char *why, gpointer data)
{
    MetricsWait *wait = data;

    wait->metrics.have_vfs = counts != NULL;
    wait->metrics.vfs_why = why;
    if (counts)
        memcpy(wait->metrics.vfs, counts, sizeof(wait->metrics.vfs));
    else
        g_debug("/metrics without the VF gauges: %s", why ? why : "?");
    wait->done(hotmigd_metrics_render(&wait->metrics), wait->data);
    hotmigd_alerts_unref(wait->alerts);
    g_free(wait);
}

void hotmigd_alerts_metrics(HotmigdAlerts *alerts, HotmigdMetricsDone done, gpointer data)
{
    MetricsWait *wait;

    g_return_if_fail(alerts && done);
    wait = g_new0(MetricsWait, 1);
    wait->alerts = hotmigd_alerts_ref(alerts);
    wait->done = done;
    wait->data = data;
    if (alerts->ops.stats)
        alerts->ops.stats(alerts->data, &wait->metrics);
    for (guint i = 0; i < alerts->hosts->len; i++) {
        const AlertHost *peer = g_ptr_array_index(alerts->hosts, i);

        wait->metrics.hosts[hotmigd_alerts_get_state(alerts, peer->name)]++;
    }
    memcpy(wait->metrics.alerts, alerts->counts, sizeof(wait->metrics.alerts));
    if (alerts->ops.vfs)
        alerts->ops.vfs(alerts->data, metrics_counted, wait);
    else
        metrics_counted(NULL, NULL, wait);
}
