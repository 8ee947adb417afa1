/* hm-policies: the alert book. The active alerts of each host, merged by key, and the host
 * state they lead to (docs/policies.md, "Host alerts"). Pure: time is a parameter. */
#include "policies/policies-priv.h"

#include <math.h>
#include <string.h>

HM_ENUM_IMPL(pol_severity, PolSeverity, POL_SEVERITY_LAST, "quarantine", "evacuate", "urgent")
HM_ENUM_IMPL(pol_alert_action_kind, PolAlertActionKind, POL_ALERT_ACTION_LAST, "none", "quarantine",
             "evacuate", "lift")

/* ---- events and actions ------------------------------------------------------------------ */

PolAlertEvent *pol_alert_event_new(void)
{
    PolAlertEvent *event = g_new0(PolAlertEvent, 1);

    event->confidence = 1.0;
    return event;
}

PolAlertEvent *pol_alert_event_copy(const PolAlertEvent *event)
{
    PolAlertEvent *copy = g_new(PolAlertEvent, 1);

    *copy = *event;
    copy->host = g_strdup(event->host);
    copy->source = g_strdup(event->source);
    copy->key = g_strdup(event->key);
    return copy;
}

void pol_alert_event_free(PolAlertEvent *event)
{
    if (!event)
        return;
    g_free(event->host);
    g_free(event->source);
    g_free(event->key);
    g_free(event);
}

void pol_alert_action_free(PolAlertAction *action)
{
    if (!action)
        return;
    g_free(action->host);
    g_free(action->reason);
    g_free(action);
}

/* ---- the book ---------------------------------------------------------------------------- */

typedef struct {
    char *name;
    PolHostState state;   /* ok, quarantined or evacuating */
    GPtrArray *alerts;    /* PolAlertEvent (owned): the active alerts, in the order received */
    char *evacuation_key; /* the alert that started the running evacuation, or NULL */
} BookHost;

struct PolAlertBook {
    double min_confidence;
    GPtrArray *hosts;         /* BookHost, in the order first seen */
    GHashTable *host_by_name; /* name -> BookHost (borrowed) */
};

static void book_host_free(BookHost *h)
{
    if (!h)
        return;
    g_free(h->name);
    g_ptr_array_unref(h->alerts);
    g_free(h->evacuation_key);
    g_free(h);
}

PolAlertBook *pol_alert_book_new(double min_confidence)
{
    PolAlertBook *book;

    g_return_val_if_fail(isfinite(min_confidence) && min_confidence >= 0.0 && min_confidence <= 1.0,
                         NULL);
    book = g_new0(PolAlertBook, 1);
    book->min_confidence = min_confidence;
    book->hosts = g_ptr_array_new_with_free_func((GDestroyNotify)book_host_free);
    book->host_by_name = g_hash_table_new(g_str_hash, g_str_equal);
    return book;
}

void pol_alert_book_free(PolAlertBook *book)
{
    if (!book)
        return;
    g_hash_table_unref(book->host_by_name); /* borrows its keys from the hosts */
    g_ptr_array_unref(book->hosts);
    g_free(book);
}

static BookHost *book_host(const PolAlertBook *book, const char *name)
{
    return g_hash_table_lookup(book->host_by_name, name);
}

static BookHost *book_host_add(PolAlertBook *book, const char *name)
{
    BookHost *h = g_new0(BookHost, 1);

    h->name = g_strdup(name);
    h->state = POL_HOST_OK;
    h->alerts = g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);
    g_ptr_array_add(book->hosts, h);
    g_hash_table_insert(book->host_by_name, h->name, h);
    return h;
}

static gint alert_index(const BookHost *h, const char *key)
{
    for (guint i = 0; h && i < h->alerts->len; i++) {
        if (g_str_equal(((PolAlertEvent *)g_ptr_array_index(h->alerts, i))->key, key))
            return (gint)i;
    }
    return -1;
}

static gboolean check_text(const char *what, const char *value, gsize max, GError **error)
{
    if (!value || !*value) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "alert: %s: empty", what);
        return FALSE;
    }
    if (strlen(value) > max || !g_utf8_validate(value, -1, NULL)) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "alert: %s: must be UTF-8 of at most %" G_GSIZE_FORMAT " bytes", what, max);
        return FALSE;
    }
    return TRUE;
}

static gboolean check_event(const PolAlertEvent *ev, GError **error)
{
    if (!check_text("host", ev->host, POL_NAME_MAX, error) ||
        !check_text("key", ev->key, POL_ALERT_KEY_MAX, error) ||
        (ev->source && !check_text("source", ev->source, POL_ALERT_KEY_MAX, error)))
        return FALSE;
    if ((int)ev->severity < 0 || ev->severity >= POL_SEVERITY_LAST) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "alert '%s' on '%s': bad severity %d",
                    ev->key, ev->host, (int)ev->severity);
        return FALSE;
    }
    if (!isfinite(ev->confidence) || ev->confidence < 0.0 || ev->confidence > 1.0) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "alert '%s' on '%s': confidence must be between 0 and 1, not %g", ev->key,
                    ev->host, ev->confidence);
        return FALSE;
    }
    if (ev->deadline < 0) {
        g_set_error(
            error, POL_ERROR, POL_ERROR_INVALID,
            "alert '%s' on '%s': deadline must be a unix time >= 0 (0: none), not %" G_GINT64_FORMAT,
            ev->key, ev->host, ev->deadline);
        return FALSE;
    }
    return TRUE;
}

/* The earlier of two deadlines, 0 meaning none. */
static gint64 earliest(gint64 a, gint64 b)
{
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return MIN(a, b);
}

/* "deadline in 120 s", "deadline passed 5 s ago", "no deadline" (owned). */
static char *deadline_text(gint64 deadline, gint64 now)
{
    if (deadline == 0)
        return g_strdup("no deadline");
    if (deadline >= now)
        return g_strdup_printf("deadline in %" G_GINT64_FORMAT " s", deadline - now);
    return g_strdup_printf("deadline passed %" G_GINT64_FORMAT " s ago", now - deadline);
}

/* "'fp1' from alertmanager (evacuate, confidence 0.90, deadline in 120 s)" (owned). */
static char *alert_text(const PolAlertEvent *a, gint64 now)
{
    g_autofree char *dl = deadline_text(a->deadline, now);

    return g_strdup_printf("'%s' from %s (%s, confidence %.2f, %s)", a->key,
                           a->source ? a->source : "an unnamed source",
                           pol_severity_to_string(a->severity), a->confidence, dl);
}

/* An action on @h (which may be NULL: a host the book does not hold) with the host's
 * strongest severity and earliest deadline. */
static PolAlertAction *action_new(PolAlertActionKind kind, const char *host, const BookHost *h,
                                  gboolean merged, char *reason)
{
    PolAlertAction *action = g_new0(PolAlertAction, 1);

    action->kind = kind;
    action->host = g_strdup(host);
    action->state = h ? h->state : POL_HOST_OK;
    action->severity = POL_SEVERITY_QUARANTINE;
    for (guint i = 0; h && i < h->alerts->len; i++) {
        const PolAlertEvent *a = g_ptr_array_index(h->alerts, i);
        action->severity = MAX(action->severity, a->severity);
        action->deadline = earliest(action->deadline, a->deadline);
    }
    action->merged = merged;
    action->reason = reason;
    return action;
}

/* A firing alert @a of @h was added (@merged FALSE) or changed (@what says how; @rose: its
 * severity rose): the state transition. An evacuation starts for a new alert of severity
 * evacuate or urgent, or one that rose to it, unless one is running already. */
static PolAlertAction *decide(BookHost *h, const PolAlertEvent *a, gboolean merged, gboolean rose,
                              const char *what, gint64 now)
{
    g_autofree char *text = alert_text(a, now);

    if (a->severity >= POL_SEVERITY_EVACUATE && h->state == POL_HOST_EVACUATING)
        return action_new(
            POL_ALERT_ACTION_NONE, h->name, h, merged,
            g_strdup_printf(
                "host '%s': alert %s %s; the evacuation started for alert '%s' is already running",
                h->name, text, what, h->evacuation_key));
    if (a->severity >= POL_SEVERITY_EVACUATE && (!merged || rose)) {
        h->state = POL_HOST_EVACUATING;
        g_free(h->evacuation_key);
        h->evacuation_key = g_strdup(a->key);
        return action_new(
            POL_ALERT_ACTION_EVACUATE, h->name, h, merged,
            g_strdup_printf("host '%s': alert %s %s: evacuating", h->name, text, what));
    }
    if (h->state == POL_HOST_OK) {
        h->state = POL_HOST_QUARANTINED;
        return action_new(
            POL_ALERT_ACTION_QUARANTINE, h->name, h, merged,
            g_strdup_printf("host '%s': alert %s %s: quarantined", h->name, text, what));
    }
    return action_new(POL_ALERT_ACTION_NONE, h->name, h, merged,
                      g_strdup_printf("host '%s': alert %s %s; the host stays %s", h->name, text,
                                      what, pol_host_state_to_string(h->state)));
}

static PolAlertAction *apply_resolved(PolAlertBook *book, const PolAlertEvent *ev)
{
    BookHost *h = book_host(book, ev->host);
    gint i = alert_index(h, ev->key);

    if (i < 0)
        return action_new(
            POL_ALERT_ACTION_NONE, ev->host, h, FALSE,
            g_strdup_printf(
                "host '%s': alert '%s' resolved, but it is not active (resolved already, or never seen): nothing to do",
                ev->host, ev->key));
    g_ptr_array_remove_index(h->alerts, (guint)i);
    if (h->alerts->len > 0)
        return action_new(
            POL_ALERT_ACTION_NONE, h->name, h, TRUE,
            g_strdup_printf(
                "host '%s': alert '%s' resolved; %u other alerts still active: it stays %s",
                h->name, ev->key, h->alerts->len, pol_host_state_to_string(h->state)));
    if (h->state == POL_HOST_EVACUATING)
        return action_new(
            POL_ALERT_ACTION_NONE, h->name, h, TRUE,
            g_strdup_printf(
                "host '%s': alert '%s' resolved, the last one; its evacuation runs on, and the host is lifted when it ends",
                h->name, ev->key));
    h->state = POL_HOST_OK;
    return action_new(
        POL_ALERT_ACTION_LIFT, h->name, h, TRUE,
        g_strdup_printf("host '%s': alert '%s' resolved, the last one: lifted", h->name, ev->key));
}

gboolean pol_alert_book_apply(PolAlertBook *book, const PolAlertEvent *ev, gint64 now,
                              PolAlertAction **ret_action, GError **error)
{
    BookHost *h;
    PolAlertEvent *a;
    gint i;

    g_return_val_if_fail(book != NULL && ev != NULL && ret_action != NULL, FALSE);
    if (!check_event(ev, error))
        return FALSE;
    if (ev->resolved) {
        *ret_action = apply_resolved(book, ev);
        return TRUE;
    }
    h = book_host(book, ev->host);
    if (ev->confidence < book->min_confidence) {
        g_autofree char *text = alert_text(ev, now);
        *ret_action = action_new(
            POL_ALERT_ACTION_NONE, ev->host, h, FALSE,
            g_strdup_printf(
                "host '%s': alert %s ignored: its confidence is below the threshold %.2f", ev->host,
                text, book->min_confidence));
        return TRUE;
    }
    i = alert_index(h, ev->key);
    if (i >= 0) {
        /* A duplicate: the strongest of the two. */
        PolSeverity severity;
        double confidence;
        gint64 deadline;
        gboolean rose;
        g_autoptr(GString) what = g_string_new("updated:");

        a = g_ptr_array_index(h->alerts, i);
        severity = MAX(a->severity, ev->severity);
        confidence = MAX(a->confidence, ev->confidence);
        deadline = earliest(a->deadline, ev->deadline);
        if (severity == a->severity && confidence == a->confidence && deadline == a->deadline) {
            g_autofree char *text = alert_text(a, now);
            *ret_action =
                action_new(POL_ALERT_ACTION_NONE, h->name, h, TRUE,
                           g_strdup_printf("host '%s': alert %s repeats: merged, nothing changes",
                                           h->name, text));
            return TRUE;
        }
        if (severity != a->severity)
            g_string_append_printf(what, " severity %s -> %s,", pol_severity_to_string(a->severity),
                                   pol_severity_to_string(severity));
        if (confidence != a->confidence)
            g_string_append_printf(what, " confidence %.2f -> %.2f,", a->confidence, confidence);
        if (deadline != a->deadline)
            g_string_append(what, " deadline earlier,");
        g_string_truncate(what, what->len - 1);
        rose = severity != a->severity;
        a->severity = severity;
        a->confidence = confidence;
        a->deadline = deadline;
        *ret_action = decide(h, a, TRUE, rose, what->str, now);
        return TRUE;
    }
    if (h && h->alerts->len >= POL_ALERTS_PER_HOST_MAX) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID,
                    "host '%s' has %d active alerts already: alert '%s' refused", h->name,
                    POL_ALERTS_PER_HOST_MAX, ev->key);
        return FALSE;
    }
    if (!h)
        h = book_host_add(book, ev->host);
    a = pol_alert_event_copy(ev);
    if (a->received == 0)
        a->received = now;
    g_ptr_array_add(h->alerts, a);
    *ret_action = decide(h, a, FALSE, FALSE, "fires", now);
    return TRUE;
}

gboolean pol_alert_book_evacuation_done(PolAlertBook *book, const char *host, gboolean ok,
                                        gint64 now, PolAlertAction **ret_action, GError **error)
{
    BookHost *h;
    const char *how = ok ? "done" : "failed";

    g_return_val_if_fail(book != NULL && host != NULL && ret_action != NULL, FALSE);
    h = book_host(book, host);
    if (!h || h->state != POL_HOST_EVACUATING) {
        g_set_error(error, POL_ERROR, POL_ERROR_INVALID, "host '%s': no evacuation is running",
                    host);
        return FALSE;
    }
    g_clear_pointer(&h->evacuation_key, g_free);
    if (h->alerts->len == 0) {
        h->state = POL_HOST_OK;
        *ret_action =
            action_new(POL_ALERT_ACTION_LIFT, h->name, h, FALSE,
                       g_strdup_printf("host '%s': evacuation %s; every alert is resolved: lifted",
                                       h->name, how));
        return TRUE;
    }
    h->state = POL_HOST_QUARANTINED;
    *ret_action = action_new(
        POL_ALERT_ACTION_NONE, h->name, h, FALSE,
        g_strdup_printf("host '%s': evacuation %s; %u alerts still active: it stays quarantined",
                        h->name, how, h->alerts->len));
    return TRUE;
}

PolHostState pol_alert_book_get_state(const PolAlertBook *book, const char *host)
{
    const BookHost *h;

    g_return_val_if_fail(book != NULL && host != NULL, POL_HOST_OK);
    h = book_host(book, host);
    return h ? h->state : POL_HOST_OK;
}

GPtrArray *pol_alert_book_list(const PolAlertBook *book, const char *host)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);

    g_return_val_if_fail(book != NULL, out);
    for (guint i = 0; i < book->hosts->len; i++) {
        const BookHost *h = g_ptr_array_index(book->hosts, i);
        if (host && !g_str_equal(host, h->name))
            continue;
        for (guint j = 0; j < h->alerts->len; j++)
            g_ptr_array_add(out, pol_alert_event_copy(g_ptr_array_index(h->alerts, j)));
    }
    return out;
}
