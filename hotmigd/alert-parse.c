/* The failure-prediction hook's inputs (json-glib): the Alertmanager webhook and our event
 * lines, read into PolAlertEvents. Every byte here comes from the network or another
 * program: size and nesting are checked before json-glib parses, and every rejection names
 * the field. */
#include "hotmigd/alert-parse.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "engine/json-fields.h"

/* The root object of @data, or NULL with the error. */
static JsonParser *parse_object(const char *data, gsize len, gsize max, const char *what,
                                GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;
    JsonNode *root;

    if (len > max) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "%s: larger than %" G_GSIZE_FORMAT " bytes", what, max);
        return NULL;
    }
    if (!orch_json_check_depth(data, len, what, ORCH_ALERT_MAX_DEPTH, error))
        return NULL;
    if (len == 0 || !json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "%s: not JSON: %s", what,
                    local ? local->message : "empty");
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "%s: must be a JSON object", what);
        return NULL;
    }
    return g_steal_pointer(&parser);
}

/* ---- values ------------------------------------------------------------------------------ */

#define SHOWN_MAX 64 /* bytes of a bad value quoted in a message */

/* @value as quoted in an error message (owned): at most SHOWN_MAX bytes, cut on a character,
 * control characters as '?', so that what a client sends cannot flood or forge log lines. */
static char *shown(const char *value)
{
    GString *out = g_string_new(NULL);
    gsize len = strlen(value), cut = len;
    gboolean utf8 = g_utf8_validate(value, (gssize)len, NULL);

    if (len > SHOWN_MAX) {
        /* The start of the character holding byte SHOWN_MAX. */
        const char *end = utf8 ? g_utf8_find_prev_char(value, value + SHOWN_MAX + 1) : NULL;
        cut = end ? (gsize)(end - value) : SHOWN_MAX;
    }
    for (gsize i = 0; i < cut; i++) {
        guchar ch = (guchar)value[i];
        g_string_append_c(out, ch < ' ' || ch == 0x7f || (!utf8 && ch >= 0x80) ? '?' : (char)ch);
    }
    if (cut < len)
        g_string_append(out, "...");
    return g_string_free(out, FALSE);
}

/* A host name from a label: "node1:9100" -> "node1", "[fe80::1]:9100" -> "fe80::1". */
static gboolean host_value(const OrchJsonItem *ctx, const char *path, const char *value, char **ret,
                           GError **error)
{
    g_autofree char *host = NULL;
    const char *colon = strrchr(value, ':');

    g_autofree char *quoted = shown(value);

    if (value[0] == '[') {
        const char *end = strchr(value, ']');
        if (!end || (end[1] && (end[1] != ':' || !end[2] ||
                                strspn(end + 2, "0123456789") != strlen(end + 2))))
            return orch_json_item_bad(ctx, path, error,
                                      "'%s' is not a host, host:port or [address]:port", quoted);
        host = g_strndup(value + 1, end - value - 1);
    } else if (colon && strchr(value, ':') == colon && colon[1] &&
               strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        host = g_strndup(value, colon - value); /* one colon, then a port */
    } else {
        host = g_strdup(value);
    }
    if (!*host)
        return orch_json_item_bad(ctx, path, error, "empty host in '%s'", quoted);
    if (strlen(host) > POL_NAME_MAX || !g_utf8_validate(host, -1, NULL))
        return orch_json_item_bad(ctx, path, error, "the host must be UTF-8 of at most %d bytes",
                                  POL_NAME_MAX);
    for (const char *p = host; *p; p++) {
        if ((guchar)*p <= ' ' || *p == 0x7f)
            return orch_json_item_bad(ctx, path, error,
                                      "the host '%s' has a space or a control character", quoted);
    }
    *ret = g_steal_pointer(&host);
    return TRUE;
}

/* Our words, and Prometheus' usual severities. */
static gboolean severity_value(const OrchJsonItem *ctx, const char *path, const char *value,
                               gboolean prometheus, PolSeverity *ret, GError **error)
{
    g_autofree char *quoted = shown(value);
    int s = pol_severity_from_string(value);

    if (s < 0 && prometheus && g_str_equal(value, "critical"))
        s = POL_SEVERITY_EVACUATE;
    if (s < 0 && prometheus && g_str_equal(value, "warning"))
        s = POL_SEVERITY_QUARANTINE;
    if (s < 0)
        return orch_json_item_bad(ctx, path, error,
                                  "must be quarantine, evacuate or urgent%s, not '%s'",
                                  prometheus ? " (or critical, warning)" : "", quoted);
    *ret = (PolSeverity)s;
    return TRUE;
}

static gboolean confidence_text(const OrchJsonItem *ctx, const char *path, const char *value,
                                double *ret, GError **error)
{
    g_autofree char *quoted = shown(value);
    char *end = NULL;
    double v = g_ascii_strtod(value, &end);

    if (!*value || end == value || *end || !isfinite(v) || v < 0.0 || v > 1.0)
        return orch_json_item_bad(ctx, path, error, "must be a number between 0 and 1, not '%s'",
                                  quoted);
    *ret = v;
    return TRUE;
}

/* A deadline: RFC 3339 ("2026-11-22T10:00:00Z") or how long from @now ("120", "120s", "5m",
 * "1h"). Returns unix seconds. */
static gboolean deadline_text(const OrchJsonItem *ctx, const char *path, const char *value,
                              gint64 now, gint64 *ret, GError **error)
{
    g_autofree char *quoted = shown(value);
    gsize digits = strspn(value, "0123456789");
    char suffix = value[digits];

    if (digits > 0 && (suffix == '\0' || ((suffix == 's' || suffix == 'm' || suffix == 'h') &&
                                          value[digits + 1] == '\0'))) {
        guint64 n = 0, unit = suffix == 'm' ? 60 : suffix == 'h' ? 3600 : 1;
        for (gsize i = 0; i < digits; i++)
            n = MIN(n * 10 + (guint64)(value[i] - '0'), (guint64)ORCH_ALERT_DEADLINE_MAX_S + 1);
        if (n * unit > ORCH_ALERT_DEADLINE_MAX_S)
            return orch_json_item_bad(ctx, path, error, "'%s' is more than %d seconds from now",
                                      quoted, ORCH_ALERT_DEADLINE_MAX_S);
        *ret = now + (gint64)(n * unit);
        return TRUE;
    }
    if (strlen(value) <= 64) {
        g_autoptr(GDateTime) dt = g_date_time_new_from_iso8601(value, NULL);
        if (dt && g_date_time_to_unix(dt) > 0) {
            *ret = g_date_time_to_unix(dt);
            return TRUE;
        }
    }
    return orch_json_item_bad(
        ctx, path, error,
        "must be an RFC 3339 time with a zone (2026-11-22T10:00:00Z) or a time from now (120, 120s, 5m, 1h), not '%s'",
        value);
}

/* ---- the Alertmanager webhook ------------------------------------------------------------ */

/* The value of label or annotation @name, looked for in @labels, then in @annotations (either
 * NULL: not looked at): *@ret_path says where ("labels.instance"). */
static gboolean lookup(const OrchJsonItem *labels, const OrchJsonItem *annotations,
                       const char *name, const char **ret, char **ret_path, GError **error)
{
    const OrchJsonItem *in[] = {labels, annotations};

    *ret = NULL;
    for (guint i = 0; i < G_N_ELEMENTS(in) && !*ret; i++) {
        if (in[i] && !orch_json_item_string(in[i], name, FALSE, ret, error))
            return FALSE;
        if (*ret)
            *ret_path = g_strdup_printf("%s.%s", i ? "annotations" : "labels", name);
    }
    return TRUE;
}

/* An alert's labels or annotations as an item of their own: their errors say
 * "webhook: alerts[3].labels.NAME". */
typedef struct {
    OrchJsonItem labels, annotations;
    char *lwhere, *awhere;
} AlertMembers;

static void alert_members_clear(AlertMembers *m)
{
    g_free(m->lwhere);
    g_free(m->awhere);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(AlertMembers, alert_members_clear)

/* firing or resolved; the labels (required) and annotations; the members we only type-check. */
static gboolean alert_status(const OrchJsonItem *ctx, PolAlertEvent *ev, AlertMembers *m,
                             const char **ret_fingerprint, const char **ret_alertname,
                             GError **error)
{
    JsonObject *labels, *annotations;
    const char *status, *ignored;

    if (!orch_json_item_string(ctx, "status", TRUE, &status, error))
        return FALSE;
    if (!g_str_equal(status, "firing") && !g_str_equal(status, "resolved")) {
        g_autofree char *quoted = shown(status);
        return orch_json_item_bad(ctx, "status", error, "must be firing or resolved, not '%s'",
                                  quoted);
    }
    ev->resolved = g_str_equal(status, "resolved");
    if (!orch_json_item_object(ctx, "labels", FALSE, &labels, error) ||
        !orch_json_item_object(ctx, "annotations", FALSE, &annotations, error))
        return FALSE;
    if (!labels)
        return orch_json_item_bad(ctx, "labels", error, "missing");
    m->lwhere = g_strdup_printf("%s.labels", ctx->where);
    m->awhere = g_strdup_printf("%s.annotations", ctx->where);
    m->labels = (OrchJsonItem){.what = ctx->what, .where = m->lwhere, .obj = labels};
    m->annotations = (OrchJsonItem){.what = ctx->what, .where = m->awhere, .obj = annotations};
    return orch_json_item_string(ctx, "startsAt", FALSE, &ignored, error) &&
           orch_json_item_string(ctx, "endsAt", FALSE, &ignored, error) &&
           orch_json_item_string(ctx, "fingerprint", FALSE, ret_fingerprint, error) &&
           orch_json_item_string(&m->labels, "alertname", FALSE, ret_alertname, error);
}

/* The host: the label the options name, else "instance", then "host". */
static gboolean alert_host(const OrchJsonItem *ctx, const AlertMembers *m,
                           const OrchAlertOptions *o, PolAlertEvent *ev, GError **error)
{
    const char *host_label = o->host_label ? o->host_label : "instance";
    g_autofree char *path = NULL;
    const char *value;

    if (!lookup(&m->labels, NULL, host_label, &value, &path, error))
        return FALSE;
    if (!value && !o->host_label && !lookup(&m->labels, NULL, "host", &value, &path, error))
        return FALSE;
    if (!value) {
        g_autofree char *host_path = g_strdup_printf("labels.%s", host_label);
        return orch_json_item_bad(ctx, host_path, error, "missing%s",
                                  o->host_label ? "" : " (and no labels.host)");
    }
    return host_value(ctx, path, value, &ev->host, error);
}

/* What it asks for: the label the options name, else "hotmig_action", then Prometheus'
 * "severity". */
static gboolean alert_severity(const OrchJsonItem *ctx, const AlertMembers *m,
                               const OrchAlertOptions *o, PolAlertEvent *ev, GError **error)
{
    const char *severity_label = o->severity_label ? o->severity_label : "hotmig_action";
    g_autofree char *path = NULL;
    const char *value;

    if (!lookup(&m->labels, NULL, severity_label, &value, &path, error))
        return FALSE;
    if (value && !severity_value(ctx, path, value, FALSE, &ev->severity, error))
        return FALSE;
    g_clear_pointer(&path, g_free);
    if (!value && !o->severity_label) {
        if (!lookup(&m->labels, NULL, "severity", &value, &path, error))
            return FALSE;
        if (value && !severity_value(ctx, path, value, TRUE, &ev->severity, error))
            return FALSE;
    }
    if (!value) {
        g_autofree char *severity_path = g_strdup_printf("labels.%s", severity_label);
        return orch_json_item_bad(ctx, severity_path, error, "missing%s",
                                  o->severity_label ? "" : " (and no labels.severity)");
    }
    return TRUE;
}

/* How sure (a label or an annotation), and by when (an annotation). */
static gboolean alert_timing(const OrchJsonItem *ctx, const AlertMembers *m,
                             const OrchAlertOptions *o, gint64 now, PolAlertEvent *ev,
                             GError **error)
{
    const char *confidence = o->confidence ? o->confidence : "hotmig_confidence";
    const char *deadline = o->deadline ? o->deadline : "hotmig_deadline";
    g_autofree char *path = NULL;
    const char *value;

    if (!lookup(&m->labels, &m->annotations, confidence, &value, &path, error))
        return FALSE;
    if (value && !confidence_text(ctx, path, value, &ev->confidence, error))
        return FALSE;
    g_clear_pointer(&path, g_free);
    if (!lookup(NULL, &m->annotations, deadline, &value, &path, error))
        return FALSE;
    if (!value && !o->deadline && !lookup(NULL, &m->annotations, "deadline", &value, &path, error))
        return FALSE;
    return !value || deadline_text(ctx, path, value, now, &ev->deadline, error);
}

static gboolean parse_alert(const OrchJsonItem *ctx, const OrchAlertOptions *o, gint64 now,
                            PolAlertEvent *ev, GError **error)
{
    g_auto(AlertMembers) m = {0};
    const char *fingerprint = NULL, *alertname = NULL;

    if (!alert_status(ctx, ev, &m, &fingerprint, &alertname, error) ||
        !alert_host(ctx, &m, o, ev, error) || !alert_severity(ctx, &m, o, ev, error) ||
        !alert_timing(ctx, &m, o, now, ev, error))
        return FALSE;
    /* The same alert again has the same fingerprint. */
    if (fingerprint && *fingerprint)
        ev->key = g_strdup(fingerprint);
    else if (alertname && *alertname)
        ev->key = g_strdup_printf("alertmanager:%s", alertname);
    else
        ev->key = g_strdup("alertmanager");
    if (strlen(ev->key) > POL_ALERT_KEY_MAX || !g_utf8_validate(ev->key, -1, NULL))
        return orch_json_item_bad(ctx,
                                  fingerprint && *fingerprint ? "fingerprint" : "labels.alertname",
                                  error, "must be UTF-8 of at most %d bytes", POL_ALERT_KEY_MAX);
    ev->source = g_strdup("alertmanager");
    ev->received = now;
    return TRUE;
}

static gboolean parse_webhook(JsonObject *root, const OrchAlertOptions *opts, gint64 now,
                              GPtrArray *events, GError **error)
{
    const OrchJsonItem top = {.what = "webhook", .obj = root};
    JsonNode *node;
    JsonArray *alerts;
    const char *version;

    if (!orch_json_item_string(&top, "version", FALSE, &version, error))
        return FALSE;
    if (version && !g_str_equal(version, "4")) {
        g_autofree char *quoted = shown(version);
        return orch_json_item_bad(&top, "version", error, "must be \"4\", not \"%s\"", quoted);
    }
    node = orch_json_item_member(&top, "alerts");
    if (!node)
        return orch_json_item_bad(&top, "alerts", error, "missing");
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return orch_json_item_bad(&top, "alerts", error, "must be an array of objects");
    alerts = json_node_get_array(node);
    if (json_array_get_length(alerts) > ORCH_ALERT_MAX_ALERTS)
        return orch_json_item_bad(&top, "alerts", error, "more than %d alerts",
                                  ORCH_ALERT_MAX_ALERTS);
    for (guint i = 0; i < json_array_get_length(alerts); i++) {
        g_autofree char *where = g_strdup_printf("alerts[%u]", i);
        g_autoptr(PolAlertEvent) ev = pol_alert_event_new();
        JsonNode *element = json_array_get_element(alerts, i);
        OrchJsonItem ctx = {.what = "webhook", .where = where};

        if (!JSON_NODE_HOLDS_OBJECT(element)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "webhook: %s: must be an object",
                        where);
            return FALSE;
        }
        ctx.obj = json_node_get_object(element);
        if (!parse_alert(&ctx, opts, now, ev, error))
            return FALSE;
        g_ptr_array_add(events, g_steal_pointer(&ev));
    }
    return TRUE;
}

GPtrArray *orch_alert_webhook_parse(const char *data, gsize len, const OrchAlertOptions *opts,
                                    gint64 now, GError **error)
{
    static const OrchAlertOptions defaults = {NULL, NULL, NULL, NULL};
    g_autoptr(JsonParser) parser = NULL;
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);

    g_return_val_if_fail(data != NULL || len == 0, NULL);
    if (!(parser = parse_object(data, len, ORCH_ALERT_WEBHOOK_MAX_BYTES, "webhook", error)))
        return NULL;
    if (!parse_webhook(json_node_get_object(json_parser_get_root(parser)), opts ? opts : &defaults,
                       now, events, error))
        return NULL;
    return g_steal_pointer(&events);
}

/* ---- our event lines --------------------------------------------------------------------- */

static gboolean parse_line(JsonObject *obj, const char *source, gint64 now, PolAlertEvent *ev,
                           GError **error)
{
    const OrchJsonItem ctx = {.what = "event", .obj = obj};
    JsonNode *node;
    const char *value;

    if (!orch_json_item_string(&ctx, "host", TRUE, &value, error))
        return FALSE;
    if (!host_value(&ctx, "host", value, &ev->host, error))
        return FALSE;

    node = orch_json_item_member(&ctx, "resolved");
    if (node && json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return orch_json_item_bad(&ctx, "resolved", error, "must be true or false");
    ev->resolved = node && json_node_get_boolean(node);

    if (!orch_json_item_string(&ctx, "severity", FALSE, &value, error))
        return FALSE;
    if (!value && !ev->resolved)
        return orch_json_item_bad(&ctx, "severity", error, "missing");
    if (value && !severity_value(&ctx, "severity", value, FALSE, &ev->severity, error))
        return FALSE;

    if ((node = orch_json_item_member(&ctx, "confidence"))) {
        GType type = json_node_get_value_type(node);
        double v = type == G_TYPE_DOUBLE  ? json_node_get_double(node)
                   : type == G_TYPE_INT64 ? (double)json_node_get_int(node)
                                          : NAN;
        if (!isfinite(v) || v < 0.0 || v > 1.0)
            return orch_json_item_bad(&ctx, "confidence", error,
                                      "must be a number between 0 and 1");
        ev->confidence = v;
    }

    if ((node = orch_json_item_member(&ctx, "deadline"))) {
        GType type = json_node_get_value_type(node);
        if (type == G_TYPE_STRING) {
            if (!deadline_text(&ctx, "deadline", json_node_get_string(node), now, &ev->deadline,
                               error))
                return FALSE;
        } else if (type == G_TYPE_INT64) {
            ev->deadline = json_node_get_int(node);
            if (ev->deadline < 0)
                return orch_json_item_bad(
                    &ctx, "deadline", error,
                    "must be a unix time >= 0 (0: none), not %" G_GINT64_FORMAT, ev->deadline);
        } else {
            return orch_json_item_bad(
                &ctx, "deadline", error,
                "must be a unix time or a string (RFC 3339, or a time from now)");
        }
    }

    if (!orch_json_item_string(&ctx, "key", FALSE, &value, error))
        return FALSE;
    if (value &&
        (!*value || strlen(value) > POL_ALERT_KEY_MAX || !g_utf8_validate(value, -1, NULL)))
        return orch_json_item_bad(&ctx, "key", error, "must be UTF-8 of 1 to %d bytes",
                                  POL_ALERT_KEY_MAX);
    ev->key = g_strdup(value ? value : source);
    ev->source = g_strdup(source);
    ev->received = now;
    return TRUE;
}

PolAlertEvent *orch_alert_line_parse(const char *data, gsize len, const char *source, gint64 now,
                                     GError **error)
{
    g_autoptr(JsonParser) parser = NULL;
    g_autoptr(PolAlertEvent) ev = pol_alert_event_new();

    g_return_val_if_fail((data != NULL || len == 0) && source != NULL && *source, NULL);
    if (len > ORCH_ALERT_LINE_MAX_BYTES) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "event: longer than %d bytes",
                    ORCH_ALERT_LINE_MAX_BYTES);
        return NULL;
    }
    if (len > 0 && data[len - 1] == '\n')
        len--;
    if (len > 0 && data[len - 1] == '\r')
        len--;
    if (memchr(data, '\n', len)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "event: more than one line (one JSON object per line)");
        return NULL;
    }
    if (!(parser = parse_object(data, len, ORCH_ALERT_LINE_MAX_BYTES, "event", error)))
        return NULL;
    if (!parse_line(json_node_get_object(json_parser_get_root(parser)), source, now, ev, error))
        return NULL;
    return g_steal_pointer(&ev);
}
