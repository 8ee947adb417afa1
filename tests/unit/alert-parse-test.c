/* The failure-prediction hook's parsers (hotmigd/alert-parse.c): Alertmanager webhook
 * bodies as Alertmanager sends them, our event lines, and every rejection naming its field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "hotmigd/alert-parse.h"

#define NOW 1700000000 /* 2023-11-14T22:13:20Z */

/* What Alertmanager 0.25 posts (send_resolved on), two alerts of one group. */
#define WEBHOOK                                                                                    \
    "{\"receiver\":\"hotmig\",\"status\":\"firing\",\"alerts\":["                                  \
    "{\"status\":\"firing\",\"labels\":{\"alertname\":\"HostFailurePredicted\","                   \
    "\"instance\":\"node01:9100\",\"job\":\"node\",\"hotmig_action\":\"urgent\"},"                 \
    "\"annotations\":{\"summary\":\"ECC errors rising\",\"hotmig_deadline\":"                      \
    "\"2023-11-14T22:23:20Z\",\"hotmig_confidence\":\"0.85\"},"                                    \
    "\"startsAt\":\"2023-11-14T22:13:20.123Z\",\"endsAt\":\"0001-01-01T00:00:00Z\","               \
    "\"generatorURL\":\"http://prometheus:9090/graph?g0.expr=ecc\",\"fingerprint\":"               \
    "\"a3c9f0e2b1d4c5e6\"},"                                                                       \
    "{\"status\":\"resolved\",\"labels\":{\"alertname\":\"DiskFailing\",\"host\":\"node02\","      \
    "\"severity\":\"critical\"},\"annotations\":{\"deadline\":\"120s\"},"                          \
    "\"startsAt\":\"2023-11-14T21:00:00Z\",\"endsAt\":\"2023-11-14T22:10:00Z\","                   \
    "\"generatorURL\":\"\",\"fingerprint\":\"0f1e2d3c4b5a6978\"}],"                                \
    "\"groupLabels\":{},\"commonLabels\":{},\"commonAnnotations\":{},"                             \
    "\"externalURL\":\"http://alertmanager:9093\",\"version\":\"4\","                              \
    "\"groupKey\":\"{}:{}\",\"truncatedAlerts\":0}"

static GPtrArray *webhook(const char *text, const OrchAlertOptions *opts, GError **error)
{
    return orch_alert_webhook_parse(text, strlen(text), opts, NOW, error);
}

/* A body with one alert of @labels and @annotations (JSON members, without braces). */
static char *one_alert(const char *labels, const char *annotations)
{
    return g_strdup_printf("{\"version\":\"4\",\"status\":\"firing\",\"alerts\":[{\"status\":"
                           "\"firing\",\"labels\":{%s},\"annotations\":{%s},\"fingerprint\":"
                           "\"f1\"}]}",
                           labels, annotations);
}

static PolAlertEvent *only_event(const char *labels, const char *annotations,
                                 const OrchAlertOptions *opts)
{
    g_autofree char *text = one_alert(labels, annotations);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) events = webhook(text, opts, &error);

    if (!events)
        fail_msg("%s: %s", text, error->message);
    assert_int_equal(events->len, 1);
    return pol_alert_event_copy(g_ptr_array_index(events, 0));
}

static void test_webhook_good(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) events = webhook(WEBHOOK, NULL, &error);
    const PolAlertEvent *a, *b;

    assert_non_null(events);
    assert_int_equal(events->len, 2);
    a = g_ptr_array_index(events, 0);
    assert_string_equal(a->host, "node01");
    assert_int_equal(a->severity, POL_SEVERITY_URGENT);
    assert_true(a->confidence == 0.85);
    assert_int_equal(a->deadline, NOW + 600);
    assert_string_equal(a->source, "alertmanager");
    assert_string_equal(a->key, "a3c9f0e2b1d4c5e6");
    assert_false(a->resolved);
    assert_int_equal(a->received, NOW);
    b = g_ptr_array_index(events, 1);
    assert_string_equal(b->host, "node02");
    assert_int_equal(b->severity, POL_SEVERITY_EVACUATE); /* severity critical */
    assert_true(b->confidence == 1.0);
    assert_int_equal(b->deadline, NOW + 120); /* the "deadline" annotation, 120 s from now */
    assert_true(b->resolved);
    assert_string_equal(b->key, "0f1e2d3c4b5a6978");
}

static void test_webhook_values(void **state)
{
    const struct {
        const char *labels, *annotations, *host;
        PolSeverity severity;
        double confidence;
        gint64 deadline;
    } cases[] = {
        {"\"instance\":\"[fe80::1]:9100\",\"hotmig_action\":\"quarantine\"", "", "fe80::1",
         POL_SEVERITY_QUARANTINE, 1.0, 0},
        {"\"instance\":\"fe80::1\",\"severity\":\"warning\"", "", "fe80::1",
         POL_SEVERITY_QUARANTINE, 1.0, 0},
        {"\"instance\":\"node7\",\"severity\":\"urgent\",\"hotmig_confidence\":\"0.5\"",
         "\"hotmig_confidence\":\"0.9\"", "node7", POL_SEVERITY_URGENT, 0.5, 0},
        {"\"host\":\"n.example.org\",\"hotmig_action\":\"evacuate\"",
         "\"hotmig_confidence\":\"1\",\"hotmig_deadline\":\"5m\",\"deadline\":\"1s\"",
         "n.example.org", POL_SEVERITY_EVACUATE, 1.0, NOW + 300},
        {"\"instance\":\"n1:80\",\"hotmig_action\":\"evacuate\"",
         "\"hotmig_deadline\":\"2023-11-14T23:13:20+01:00\"", "n1", POL_SEVERITY_EVACUATE, 1.0,
         NOW},
        {"\"instance\":\"n1\",\"hotmig_action\":\"evacuate\"", "\"hotmig_deadline\":\"1h\"", "n1",
         POL_SEVERITY_EVACUATE, 1.0, NOW + 3600},
        {"\"instance\":\"n1\",\"hotmig_action\":\"evacuate\"", "\"hotmig_deadline\":\"0\"", "n1",
         POL_SEVERITY_EVACUATE, 1.0, NOW},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(PolAlertEvent) ev = only_event(cases[i].labels, cases[i].annotations, NULL);
        assert_string_equal(ev->host, cases[i].host);
        assert_int_equal(ev->severity, cases[i].severity);
        assert_true(ev->confidence == cases[i].confidence);
        assert_int_equal(ev->deadline, cases[i].deadline);
        assert_string_equal(ev->key, "f1");
    }
}

static void test_webhook_options(void **state)
{
    OrchAlertOptions o = {
        .host_label = "nodename", .severity_label = "action", .confidence = "p", .deadline = "eta"};
    g_autoptr(PolAlertEvent) ev = only_event(
        "\"nodename\":\"n3\",\"instance\":\"other:1\",\"action\":\"urgent\",\"p\":\"0.25\"",
        "\"eta\":\"30\",\"hotmig_deadline\":\"1h\"", &o);
    g_autofree char *no_host = one_alert("\"instance\":\"n3\",\"action\":\"urgent\"", "");
    g_autofree char *no_action = one_alert("\"nodename\":\"n3\",\"severity\":\"critical\"", "");
    g_autoptr(GError) e1 = NULL, e2 = NULL;

    assert_string_equal(ev->host, "n3");
    assert_int_equal(ev->severity, POL_SEVERITY_URGENT);
    assert_true(ev->confidence == 0.25);
    assert_int_equal(ev->deadline, NOW + 30);
    /* A configured name has no fallback. */
    assert_null(webhook(no_host, &o, &e1));
    assert_string_equal(e1->message, "webhook: alerts[0].labels.nodename: missing");
    assert_null(webhook(no_action, &o, &e2));
    assert_string_equal(e2->message, "webhook: alerts[0].labels.action: missing");
}

static void test_webhook_key(void **state)
{
    g_autoptr(GPtrArray) a =
        webhook("{\"alerts\":[{\"status\":\"firing\",\"labels\":{\"alertname\":"
                "\"X\",\"host\":\"h\",\"severity\":\"critical\"}}]}",
                NULL, NULL);
    g_autoptr(GPtrArray) b = webhook("{\"alerts\":[{\"status\":\"firing\",\"labels\":{\"host\":"
                                     "\"h\",\"severity\":\"critical\"},\"fingerprint\":\"\"}]}",
                                     NULL, NULL);
    g_autoptr(GPtrArray) none = webhook("{\"status\":\"firing\",\"alerts\":[]}", NULL, NULL);

    assert_string_equal(((PolAlertEvent *)g_ptr_array_index(a, 0))->key, "alertmanager:X");
    assert_string_equal(((PolAlertEvent *)g_ptr_array_index(b, 0))->key, "alertmanager");
    assert_int_equal(none->len, 0);
}

static void test_webhook_rejected(void **state)
{
    const char *ok = "\"instance\":\"n1:9100\",\"hotmig_action\":\"evacuate\"";
    g_autofree char *long_fp = g_strnfill(POL_ALERT_KEY_MAX + 1, 'f');
    const struct {
        char *text;
        const char *message;
    } cases[] = {
        {g_strdup(""), "webhook: not JSON: empty"},
        {g_strdup("[]"), "webhook: must be a JSON object"},
        {g_strdup("{\"version\":\"5\",\"alerts\":[]}"),
         "webhook: version: must be \"4\", not \"5\""},
        {g_strdup("{\"version\":4,\"alerts\":[]}"), "webhook: version: must be a string"},
        {g_strdup("{\"status\":\"firing\"}"), "webhook: alerts: missing"},
        {g_strdup("{\"alerts\":{}}"), "webhook: alerts: must be an array of objects"},
        {g_strdup("{\"alerts\":[1]}"), "webhook: alerts[0]: must be an object"},
        {g_strdup("{\"alerts\":[{\"labels\":{}}]}"), "webhook: alerts[0].status: missing"},
        {g_strdup("{\"alerts\":[{\"status\":\"pending\",\"labels\":{}}]}"),
         "webhook: alerts[0].status: must be firing or resolved, not 'pending'"},
        {g_strdup("{\"alerts\":[{\"status\":\"firing\"}]}"), "webhook: alerts[0].labels: missing"},
        {g_strdup("{\"alerts\":[{\"status\":\"firing\",\"labels\":[]}]}"),
         "webhook: alerts[0].labels: must be an object"},
        {one_alert("\"hotmig_action\":\"evacuate\"", ""),
         "webhook: alerts[0].labels.instance: missing (and no labels.host)"},
        {one_alert("\"instance\":\":9100\",\"hotmig_action\":\"evacuate\"", ""),
         "webhook: alerts[0].labels.instance: empty host in ':9100'"},
        {one_alert("\"instance\":\"[::1\",\"hotmig_action\":\"evacuate\"", ""),
         "webhook: alerts[0].labels.instance: '[::1' is not a host, host:port or [address]:port"},
        {one_alert("\"host\":\"a b\",\"hotmig_action\":\"evacuate\"", ""),
         "webhook: alerts[0].labels.host: the host 'a b' has a space or a control character"},
        {one_alert("\"instance\":7,\"hotmig_action\":\"evacuate\"", ""),
         "webhook: alerts[0].labels.instance: must be a string"},
        {one_alert("\"instance\":\"n1\",\"hotmig_action\":\"reboot\"", ""),
         "webhook: alerts[0].labels.hotmig_action: must be quarantine, evacuate or urgent, not 'reboot'"},
        {one_alert("\"instance\":\"n1\",\"severity\":\"info\"", ""),
         "webhook: alerts[0].labels.severity: must be quarantine, evacuate or urgent (or critical, warning), not 'info'"},
        {one_alert("\"instance\":\"n1\"", ""),
         "webhook: alerts[0].labels.hotmig_action: missing (and no labels.severity)"},
        {one_alert(ok, "\"hotmig_confidence\":\"high\""),
         "webhook: alerts[0].annotations.hotmig_confidence: must be a number between 0 and 1, not 'high'"},
        {one_alert(ok, "\"hotmig_confidence\":\"1.5\""),
         "webhook: alerts[0].annotations.hotmig_confidence: must be a number between 0 and 1, not '1.5'"},
        {one_alert(ok, "\"hotmig_deadline\":\"tomorrow\""),
         "webhook: alerts[0].annotations.hotmig_deadline: must be an RFC 3339 time with a zone (2026-11-22T10:00:00Z) or a time from now (120, 120s, 5m, 1h), not 'tomorrow'"},
        {one_alert(ok, "\"hotmig_deadline\":\"2023-11-14T22:23:20\""),
         "webhook: alerts[0].annotations.hotmig_deadline: must be an RFC 3339 time with a zone (2026-11-22T10:00:00Z) or a time from now (120, 120s, 5m, 1h), not '2023-11-14T22:23:20'"},
        {one_alert(ok, "\"deadline\":\"99999999999999999999s\""),
         "webhook: alerts[0].annotations.deadline: '99999999999999999999s' is more than 31622400 seconds from now"},
        {one_alert("\"instance\":\"n1\",\"hotmig_action\":\"\\u001b[2Jx0123456789012345678901234567890123456789012345678901234567890123456789\"", ""),
         "webhook: alerts[0].labels.hotmig_action: must be quarantine, evacuate or urgent, not '?[2Jx01234567890123456789012345678901234567890123456789012345678...'"},
        {one_alert("\"instance\":\"n1\",\"hotmig_action\":\"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9x\"", ""),
         "webhook: alerts[0].labels.hotmig_action: must be quarantine, evacuate or urgent, not '\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9...'"},
        {one_alert(ok, "\"hotmig_deadline\":\"10d\""),
         "webhook: alerts[0].annotations.hotmig_deadline: must be an RFC 3339 time with a zone (2026-11-22T10:00:00Z) or a time from now (120, 120s, 5m, 1h), not '10d'"},
        {g_strdup_printf(
             "{\"alerts\":[{\"status\":\"firing\",\"labels\":{%s},\"fingerprint\":\"%s\"}]}", ok,
             long_fp),
         "webhook: alerts[0].fingerprint: must be UTF-8 of at most 512 bytes"},
        {g_strdup_printf("{\"alerts\":[{\"status\":\"firing\",\"labels\":{%s},\"endsAt\":0}]}", ok),
         "webhook: alerts[0].endsAt: must be a string"},
        {g_strdup("{\"alerts\":[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]}"),
         "webhook: JSON nests deeper than 16 levels at byte 25"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *text = cases[i].text;
        g_autoptr(GError) error = NULL;
        g_autoptr(GPtrArray) events = webhook(text, NULL, &error);

        if (events)
            fail_msg("accepted: %s", text);
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
        if (!g_str_equal(error->message, cases[i].message))
            fail_msg("%s\n  got:  %s\n  want: %s", text, error->message, cases[i].message);
    }
}

static void test_webhook_limits(void **state)
{
    g_autoptr(GString) many = g_string_new("{\"version\":\"4\",\"alerts\":[");
    g_autoptr(GString) big = g_string_new(NULL);
    g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL;
    g_autoptr(GPtrArray) most = NULL;
    g_autoptr(GPtrArray) none = NULL;

    for (guint i = 0; i < ORCH_ALERT_MAX_ALERTS; i++)
        g_string_append_printf(many,
                               "%s{\"status\":\"firing\",\"labels\":{\"host\":\"h%u\","
                               "\"severity\":\"critical\"},\"fingerprint\":\"f%u\"}",
                               i ? "," : "", i, i);
    most = orch_alert_webhook_parse(many->str, many->len, NULL, NOW, &e1);
    assert_null(most); /* the array is not closed yet */
    assert_true(g_str_has_prefix(e1->message, "webhook: not JSON: "));
    g_string_append(many, "]}");
    most = orch_alert_webhook_parse(many->str, many->len, NULL, NOW, &e2);
    assert_non_null(most);
    assert_int_equal(most->len, ORCH_ALERT_MAX_ALERTS);
    g_string_truncate(many, many->len - 2);
    g_string_append(many, ",{\"status\":\"firing\",\"labels\":{}}]}");
    none = orch_alert_webhook_parse(many->str, many->len, NULL, NOW, &e3);
    assert_null(none);
    assert_string_equal(e3->message, "webhook: alerts: more than 1000 alerts");
    {
        g_autoptr(GError) error = NULL;
        g_string_append(big, "{\"alerts\":[],\"pad\":\"");
        while (big->len <= ORCH_ALERT_WEBHOOK_MAX_BYTES)
            g_string_append(big, "xxxxxxxxxxxxxxxx");
        g_string_append(big, "\"}");
        assert_null(orch_alert_webhook_parse(big->str, big->len, NULL, NOW, &error));
        assert_string_equal(error->message, "webhook: larger than 1048576 bytes");
    }
}

/* ---- event lines ------------------------------------------------------------------------- */

static PolAlertEvent *line(const char *text, GError **error)
{
    return orch_alert_line_parse(text, strlen(text), "exec:smartctl", NOW, error);
}

static void test_line_good(void **state)
{
    g_autoptr(PolAlertEvent) full = line("{\"host\":\"node01\",\"severity\":\"urgent\","
                                         "\"confidence\":0.75,\"deadline\":1700000300,"
                                         "\"key\":\"sda-reallocated\",\"resolved\":false,"
                                         "\"note\":\"ignored\"}\n",
                                         NULL);
    g_autoptr(PolAlertEvent) minimal =
        line("{\"host\":\"node01\",\"severity\":\"quarantine\"}\r\n", NULL);
    g_autoptr(PolAlertEvent) resolved =
        line("{\"host\":\"node01\",\"key\":\"k\",\"resolved\":true}", NULL);
    g_autoptr(PolAlertEvent) relative = line("{\"host\":\"node01:22\",\"severity\":\"evacuate\","
                                             "\"confidence\":1,\"deadline\":\"90s\"}",
                                             NULL);
    g_autoptr(PolAlertEvent) absolute = line("{\"host\":\"n\",\"severity\":\"evacuate\","
                                             "\"deadline\":\"2023-11-14T22:14:20Z\"}",
                                             NULL);

    assert_non_null(full);
    assert_string_equal(full->host, "node01");
    assert_int_equal(full->severity, POL_SEVERITY_URGENT);
    assert_true(full->confidence == 0.75);
    assert_int_equal(full->deadline, 1700000300);
    assert_string_equal(full->key, "sda-reallocated");
    assert_string_equal(full->source, "exec:smartctl");
    assert_false(full->resolved);
    assert_int_equal(full->received, NOW);
    assert_non_null(minimal);
    assert_true(minimal->confidence == 1.0);
    assert_int_equal(minimal->deadline, 0);
    assert_string_equal(minimal->key, "exec:smartctl"); /* one alert per source and host */
    assert_non_null(resolved);
    assert_true(resolved->resolved);
    assert_non_null(relative);
    assert_string_equal(relative->host, "node01");
    assert_int_equal(relative->deadline, NOW + 90);
    assert_non_null(absolute);
    assert_int_equal(absolute->deadline, NOW + 60);
}

static void test_line_rejected(void **state)
{
    const struct {
        const char *text;
        const char *message;
    } cases[] = {
        {"", "event: not JSON: empty"},
        {"\n", "event: not JSON: empty"},
        {"\"host\"", "event: must be a JSON object"},
        {"{\"severity\":\"urgent\"}", "event: host: missing"},
        {"{\"host\":\"\",\"severity\":\"urgent\"}", "event: host: empty host in ''"},
        {"{\"host\":[\"h\"],\"severity\":\"urgent\"}", "event: host: must be a string"},
        {"{\"host\":\"h\"}", "event: severity: missing"},
        {"{\"host\":\"h\",\"severity\":\"high\"}",
         "event: severity: must be quarantine, evacuate or urgent, not 'high'"},
        {"{\"host\":\"h\",\"severity\":\"critical\"}",
         "event: severity: must be quarantine, evacuate or urgent, not 'critical'"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"confidence\":\"0.5\"}",
         "event: confidence: must be a number between 0 and 1"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"confidence\":2}",
         "event: confidence: must be a number between 0 and 1"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"deadline\":-1}",
         "event: deadline: must be a unix time >= 0 (0: none), not -1"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"deadline\":1.5}",
         "event: deadline: must be a unix time or a string (RFC 3339, or a time from now)"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"deadline\":\"soon\"}",
         "event: deadline: must be an RFC 3339 time with a zone (2026-11-22T10:00:00Z) or a time from now (120, 120s, 5m, 1h), not 'soon'"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"resolved\":\"yes\"}",
         "event: resolved: must be true or false"},
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"key\":\"\"}",
         "event: key: must be UTF-8 of 1 to 512 bytes"},
        /* An escape strict JSON does not have (json-glib would read \777 as the byte 0xff) is
         * refused before json-glib reads it. */
        {"{\"host\":\"h\",\"severity\":\"urgent\",\"key\":\"a\\777\"}",
         "event: JSON is not strict JSON at byte 40: an escape JSON does not have"},
        {"{\"host\":\"h\\777\",\"severity\":\"urgent\"}",
         "event: JSON is not strict JSON at byte 10: an escape JSON does not have"},
        {"{\"host\":\"h\",\"severity\":\"urgent\"}\n{\"host\":\"h\",\"severity\":\"urgent\"}",
         "event: more than one line (one JSON object per line)"},
        {"{\"host\":\"h\",\"severity\":\"urgent\"} x", NULL},
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(PolAlertEvent) ev = line(cases[i].text, &error);

        if (ev)
            fail_msg("accepted: %s", cases[i].text);
        assert_true(g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID));
        if (cases[i].message && !g_str_equal(error->message, cases[i].message))
            fail_msg("%s\n  got:  %s\n  want: %s", cases[i].text, error->message, cases[i].message);
        if (!cases[i].message)
            assert_true(g_str_has_prefix(error->message, "event: not JSON: "));
    }
}

static void test_line_limit(void **state)
{
    g_autoptr(GString) s = g_string_new("{\"host\":\"h\",\"severity\":\"urgent\",\"pad\":\"");
    g_autoptr(GError) error = NULL;
    g_autoptr(PolAlertEvent) fits = NULL;
    g_autoptr(PolAlertEvent) over = NULL;

    while (s->len < ORCH_ALERT_LINE_MAX_BYTES - 3)
        g_string_append_c(s, 'x');
    g_string_append(s, "\"}\n");
    assert_int_equal(s->len, ORCH_ALERT_LINE_MAX_BYTES);
    fits = orch_alert_line_parse(s->str, s->len, "socket", NOW, NULL);
    assert_non_null(fits);
    g_string_insert_c(s, 40, 'x');
    over = orch_alert_line_parse(s->str, s->len, "socket", NOW, &error);
    assert_null(over);
    assert_string_equal(error->message, "event: longer than 65536 bytes");
}

/* Parsed events go straight into the alert book: the webhook's firing alert evacuates, the
 * same body again is merged, its resolution lifts after the evacuation ends. */
static void test_into_the_book(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.5);
    g_autofree char *firing = one_alert("\"instance\":\"n1:9100\",\"hotmig_action\":\"urgent\"",
                                        "\"hotmig_deadline\":\"120s\"");
    PolAlertActionKind want[] = {POL_ALERT_ACTION_EVACUATE, POL_ALERT_ACTION_NONE};

    for (guint round = 0; round < 2; round++) {
        g_autoptr(GPtrArray) events = webhook(firing, NULL, NULL);
        g_autoptr(PolAlertAction) action = NULL;
        assert_true(pol_alert_book_apply(book, g_ptr_array_index(events, 0), NOW, &action, NULL));
        assert_int_equal(action->kind, want[round]);
        assert_int_equal(action->deadline, NOW + 120);
        assert_int_equal(action->merged, round == 1);
    }
    {
        g_autoptr(GPtrArray) events = NULL;
        g_autoptr(PolAlertAction) a1 = NULL, a2 = NULL;
        g_autoptr(GError) error = NULL;
        const char *text = "{\"alerts\":[{\"status\":\"resolved\",\"labels\":{\"instance\":"
                           "\"n1:9100\",\"hotmig_action\":\"urgent\"},\"fingerprint\":\"f1\"}]}";
        events = webhook(text, NULL, &error);
        assert_non_null(events);
        assert_true(pol_alert_book_apply(book, g_ptr_array_index(events, 0), NOW, &a1, NULL));
        assert_int_equal(a1->kind, POL_ALERT_ACTION_NONE);
        assert_true(pol_alert_book_evacuation_done(book, "n1", TRUE, NOW + 100, &a2, NULL));
        assert_int_equal(a2->kind, POL_ALERT_ACTION_LIFT);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_webhook_good),
        cmocka_unit_test(test_webhook_values),
        cmocka_unit_test(test_webhook_options),
        cmocka_unit_test(test_webhook_key),
        cmocka_unit_test(test_webhook_rejected),
        cmocka_unit_test(test_webhook_limits),
        cmocka_unit_test(test_line_good),
        cmocka_unit_test(test_line_rejected),
        cmocka_unit_test(test_line_limit),
        cmocka_unit_test(test_into_the_book),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
