/* hotmigd's failure-prediction hook (hotmigd/alerts.c) with fakes for the other
 * hosts' daemons and for the scheduler: the bearer check, bad webhook bodies (oversized,
 * malformed, an unknown host) changing nothing, acting on the book (an evacuation started
 * once, asked again for an earlier deadline, its late VMs said up front, lifted when done), who
 * acts (the host's own daemon while it answers, else the first answering host in
 * configuration order, the same for every receiver), /v1/alerts and the host states of
 * /metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>

#include "hotmigd/alerts.h"

#define NOW 1700000000
#define TOKEN "s3cret-token-0123456789"

/* ---- the log: captured, so that tests can assert what the daemon says -------------------- */

static GPtrArray *logged; /* char *: "LEVEL MESSAGE" */

static GLogWriterOutput log_capture(GLogLevelFlags level, const GLogField *fields, gsize n,
                                    gpointer data)
{
    const char *message = NULL;

    for (gsize i = 0; i < n; i++) {
        if (g_str_equal(fields[i].key, "MESSAGE"))
            message = fields[i].value;
    }
    if (message)
        g_ptr_array_add(logged, g_strdup_printf("%s %s",
                                                level & G_LOG_LEVEL_WARNING ? "warning"
                                                : level & G_LOG_LEVEL_DEBUG ? "debug"
                                                                            : "message",
                                                message));
    return G_LOG_WRITER_HANDLED;
}

/* Was a line containing @text logged? */
static gboolean logged_has(const char *text)
{
    for (guint i = 0; i < logged->len; i++) {
        if (strstr(g_ptr_array_index(logged, i), text))
            return TRUE;
    }
    return FALSE;
}

/* ---- fakes: the other daemons ---------------------------------------------------------- */

typedef enum {
    PEER_ANSWERS,
    PEER_DOWN,     /* connection refused */
    PEER_TIMEOUT,  /* no answer in time */
    PEER_REFUSES,  /* 422 */
    PEER_BAD_CERT, /* our certificate files do not load */
} PeerMode;

static GMutex fake_lock;
static PeerMode modes[3];   /* A, B, C */
static GPtrArray *forwards; /* char *: "NAME HOST deputy|owner" */

static int peer_index(const char *url)
{
    return url[8] - 'a'; /* https://a:1 */
}

typedef struct {
    OrchHotmigdClient parent;
    int index;
} FakePeer;

static OrchHotmigdAlertReply *fake_alert(OrchHotmigdClient *vfd, const PolAlertEvent *event,
                                         const char *from, gboolean deputy, GError **error)
{
    FakePeer *peer = (FakePeer *)vfd;
    char name[2] = {(char)('A' + peer->index), 0};
    OrchHotmigdAlertReply *reply;
    PeerMode mode;

    g_mutex_lock(&fake_lock);
    g_ptr_array_add(forwards,
                    g_strdup_printf("%s %s %s", name, event->host, deputy ? "deputy" : "owner"));
    mode = modes[peer->index];
    g_mutex_unlock(&fake_lock);
    switch (mode) {
    case PEER_DOWN:
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNREACHABLE,
                    "Cannot reach hotmigd at %s (POST /v1/alerts): Connection refused", vfd->url);
        return NULL;
    case PEER_TIMEOUT:
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_TIMEOUT,
                    "hotmigd at %s did not answer POST /v1/alerts within 5 s", vfd->url);
        return NULL;
    case PEER_REFUSES:
        g_set_error(
            error, ORCH_ERROR, ORCH_ERROR_INVALID,
            "hotmigd at %s refused POST /v1/alerts (422 Unprocessable Entity): host '%s' is not one of the cluster's hosts",
            vfd->url, event->host);
        return NULL;
    default:
        break;
    }
    reply = g_new0(OrchHotmigdAlertReply, 1);
    reply->result = g_strdup("accepted");
    reply->actor = g_strdup(name);
    reply->action = POL_ALERT_ACTION_QUARANTINE;
    reply->state = POL_HOST_QUARANTINED;
    reply->reason = g_strdup_printf("host '%s': quarantined by %s", event->host, name);
    return reply;
}

static void fake_free(OrchHotmigdClient *vfd)
{
    orch_hotmigd_client_clear(vfd);
    g_free(vfd);
}

static const OrchHotmigdClientOps fake_peer_ops = {.alert = fake_alert, .free = fake_free};

static OrchHotmigdClient *fake_open_peer(gpointer data, const char *url, GError **error)
{
    FakePeer *peer;

    if (modes[peer_index(url)] == PEER_BAD_CERT) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Cannot load the client certificate '/nonexistent.pem'");
        return NULL;
    }
    peer = g_new0(FakePeer, 1);
    orch_hotmigd_client_init(&peer->parent, &fake_peer_ops, url);
    peer->index = peer_index(url);
    return &peer->parent;
}

/* ---- fakes: the scheduler ---------------------------------------------------------------- */

typedef struct {
    GPtrArray *evacuations; /* char *: "HOST DEADLINE" */
    gboolean fail;          /* evacuate() fails */
    char **late;            /* VMs predicted late, given back by evacuate() */
    gboolean running;       /* an evacuation runs: the next call merges */
    GString *states;        /* what set_state() was told: "A quarantined, A ok" */
} Scheduler;

static gboolean fake_set_state(gpointer data, const char *host, PolHostState state,
                               const char *reason, GError **error)
{
    Scheduler *sched = data;

    g_string_append_printf(sched->states, "%s%s %s", sched->states->len ? ", " : "", host,
                           pol_host_state_to_string(state));
    return TRUE;
}

static gboolean fake_evacuate(gpointer data, const char *host, gint64 deadline, const char *reason,
                              char **ret_id, gboolean *ret_merged, char ***ret_late, GError **error)
{
    Scheduler *sched = data;

    g_ptr_array_add(sched->evacuations,
                    g_strdup_printf("%s %" G_GINT64_FORMAT, host, deadline ? deadline - NOW : 0));
    if (sched->fail) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "no room for the VMs of '%s'", host);
        return FALSE;
    }
    *ret_id = g_strdup_printf("evac-%u", sched->evacuations->len);
    *ret_merged = sched->running;
    *ret_late = g_strdupv(sched->late);
    sched->running = TRUE;
    return TRUE;
}

static void fake_stats(gpointer data, HotmigdMetrics *metrics)
{
    metrics->migrations[HOTMIGD_METRICS_MIGRATION_OK] = 3;
}

/* The pool's counts, at once (hotmigd counts on the pool's worker thread: hotmigd-metrics-test). */
static void fake_vfs(gpointer data, HotmigdApiCountsFunc done, gpointer done_data)
{
    guint counts[ORCH_VF_STATE_LAST] = {[ORCH_VF_STATE_FREE] = 2};

    done(counts, NULL, done_data);
}

static void metrics_keep(char *text, gpointer data)
{
    *(char **)data = text;
}

/* /metrics' text (owned); the fakes answer at once. */
static char *metrics_text(HotmigdAlerts *alerts)
{
    char *text = NULL;

    hotmigd_alerts_metrics(alerts, metrics_keep, &text);
    assert_non_null(text);
    return text;
}

static gint64 fake_now(gpointer data)
{
    return NOW;
}

static const HotmigdAlertsOps fake_ops = {
    .open_peer = fake_open_peer,
    .evacuate = fake_evacuate,
    .set_state = fake_set_state,
    .stats = fake_stats,
    .vfs = fake_vfs,
    .now = fake_now,
};

/* ---- fixture -----------------------------------------------------------------------------------
 */

typedef struct {
    char *dir;
    char *token_file;
    Scheduler sched;
    HotmigdAlerts *alerts;
} Fixture;

static int setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);

    f->dir = g_dir_make_tmp("alerts-daemon-test.XXXXXX", NULL);
    assert_non_null(f->dir);
    f->token_file = g_build_filename(f->dir, "token", NULL);
    assert_true(g_file_set_contents(f->token_file, TOKEN "\n", -1, NULL));
    g_chmod(f->token_file, 0600);
    f->sched.evacuations = g_ptr_array_new_with_free_func(g_free);
    f->sched.states = g_string_new(NULL);
    g_mutex_lock(&fake_lock);
    memset(modes, 0, sizeof(modes));
    g_ptr_array_set_size(forwards, 0);
    g_mutex_unlock(&fake_lock);
    g_ptr_array_set_size(logged, 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;

    hotmigd_alerts_unref(f->alerts);
    g_unlink(f->token_file);
    g_rmdir(f->dir);
    g_free(f->token_file);
    g_free(f->dir);
    g_ptr_array_unref(f->sched.evacuations);
    g_string_free(f->sched.states, TRUE);
    g_strfreev(f->sched.late);
    g_free(f);
    return 0;
}

/* The hook of host @self in a cluster of A, B, C (in that order) with @extra configuration. */
static HotmigdAlerts *alerts_new(Fixture *f, const char *self, const char *extra)
{
    g_autofree char *text =
        g_strdup_printf("[alerts]\ntoken-file = %s\nmin-confidence = 60\n%s\n"
                        "[host A]\nuri = qemu+tls://a/system\nhotmigd = https://a:1\n"
                        "[host B]\nuri = qemu+tls://b/system\nhotmigd = https://b:1\n"
                        "[host C]\nuri = qemu+tls://c/system\nhotmigd = https://c:1\n",
                        f->token_file, extra ? extra : "");
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = hm_config_load_data(text, strlen(text), "test.conf", &error);
    HotmigdAlerts *alerts;

    if (!config)
        fail_msg("%s", error->message);
    alerts = hotmigd_alerts_new(config, self, &fake_ops, &f->sched, &error);
    if (!alerts)
        fail_msg("%s", error->message);
    f->alerts = alerts;
    return alerts;
}

static void set_mode(int index, PeerMode mode)
{
    g_mutex_lock(&fake_lock);
    modes[index] = mode;
    g_mutex_unlock(&fake_lock);
}

/* "A A owner, B A deputy" (owned): the forwards so far. */
static char *forwards_text(void)
{
    g_autoptr(GString) s = g_string_new(NULL);

    g_mutex_lock(&fake_lock);
    for (guint i = 0; i < forwards->len; i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "", (char *)g_ptr_array_index(forwards, i));
    g_mutex_unlock(&fake_lock);
    return g_string_free(g_steal_pointer(&s), FALSE);
}

static char *evacuations_text(Fixture *f)
{
    g_autoptr(GString) s = g_string_new(NULL);

    for (guint i = 0; i < f->sched.evacuations->len; i++)
        g_string_append_printf(s, "%s%s", i ? ", " : "",
                               (char *)g_ptr_array_index(f->sched.evacuations, i));
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* An Alertmanager body of one alert per "HOST:SEVERITY:FINGERPRINT[:DEADLINE]" of @alerts. */
static char *webhook_body(const char *const *alerts, const char *status)
{
    g_autoptr(GString) s = g_string_new("{\"version\":\"4\",\"status\":\"firing\",\"alerts\":[");

    for (guint i = 0; alerts[i]; i++) {
        g_auto(GStrv) part = g_strsplit(alerts[i], ":", 4);

        g_string_append_printf(
            s,
            "%s{\"status\":\"%s\",\"labels\":{\"alertname\":\"P\",\"host\":\"%s\","
            "\"hotmig_action\":\"%s\"},\"annotations\":{%s%s%s},"
            "\"fingerprint\":\"%s\"}",
            i ? "," : "", status, part[0], part[1], part[3] ? "\"deadline\":\"" : "",
            part[3] ? part[3] : "", part[3] ? "\"" : "", part[2]);
    }
    g_string_append(s, "]}");
    return g_string_free(g_steal_pointer(&s), FALSE);
}

typedef struct {
    gboolean done;
    HotmigdApiReply *reply;
    GPtrArray *results;
} Wait;

static void got_reply(HotmigdApiReply *reply, gpointer data)
{
    Wait *wait = data;

    wait->reply = reply;
    wait->done = TRUE;
}

/* Posts @body to the webhook and runs the main loop until the reply (owned). */
static HotmigdApiReply *post(HotmigdAlerts *alerts, const char *body, gsize len)
{
    Wait wait = {0};

    hotmigd_alerts_webhook(alerts, body, len, "127.0.0.1", got_reply, &wait);
    while (!wait.done)
        g_main_context_iteration(NULL, TRUE);
    return wait.reply;
}

static HotmigdApiReply *post_alerts(HotmigdAlerts *alerts, const char *const *list,
                                    const char *status)
{
    g_autofree char *body = webhook_body(list, status);

    return post(alerts, body, strlen(body));
}

static HotmigdApiReply *post_text(HotmigdAlerts *alerts, const char *body)
{
    return post(alerts, body, strlen(body));
}

/* POST /v1/alerts of the mutual-TLS API with @body. */
static HotmigdApiReply *api(HotmigdAlerts *alerts, const char *body)
{
    /* Sent by the host the body names as 'from' (its certificate says so). */
    const char *from = strstr(body, "\"from\":\"");
    g_autofree char *host = from ? g_strndup(from + 8, strcspn(from + 8, "\"")) : NULL;

    return hotmigd_alerts_api_handle(alerts, "POST", body, strlen(body), NULL, host);
}

/* The reply's results[i].member. */
static char *result_member(const HotmigdApiReply *reply, guint i, const char *member)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonArray *results;
    JsonObject *obj;

    if (!json_parser_load_from_data(parser, reply->body, -1, NULL))
        fail_msg("reply not JSON: %s", reply->body);
    results =
        json_object_get_array_member(json_node_get_object(json_parser_get_root(parser)), "results");
    assert_true(i < json_array_get_length(results));
    obj = json_array_get_object_element(results, i);
    return g_strdup(json_object_has_member(obj, member) && !json_object_get_null_member(obj, member)
                        ? json_object_get_string_member(obj, member)
                        : NULL);
}

static void assert_result(const HotmigdApiReply *reply, guint i, const char *result,
                          const char *actor, const char *action)
{
    g_autofree char *r = result_member(reply, i, "result");
    g_autofree char *a = result_member(reply, i, "actor");
    g_autofree char *k = result_member(reply, i, "action");

    if (g_strcmp0(r, result) || g_strcmp0(a, actor) || g_strcmp0(k, action))
        fail_msg("results[%u]: %s by %s (%s), expected %s by %s (%s): %s", i, r, a, k, result,
                 actor, action, reply->body);
}

static void assert_error_reply(HotmigdApiReply *reply_in, guint status, const char *text)
{
    g_autoptr(HotmigdApiReply) reply = reply_in;

    if (reply->status != status || !strstr(reply->body, text))
        fail_msg("expected %u with '%s', got %u %s", status, text, reply->status, reply->body);
}

/* ---- the bearer token ------------------------------------------------------------------------ */

static void test_bearer(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", NULL);
    g_autofree char *why = NULL;

    assert_true(hotmigd_alerts_authorized(alerts, "Bearer " TOKEN, NULL));
    assert_true(hotmigd_alerts_authorized(alerts, "bearer  " TOKEN " ", NULL)); /* RFC 7235 */
    assert_false(hotmigd_alerts_authorized(alerts, NULL, &why));
    assert_string_equal(why, "no Authorization header");
    g_clear_pointer(&why, g_free);
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer s3cret-token-0123456788", &why));
    assert_string_equal(why, "wrong bearer token");
    g_clear_pointer(&why, g_free);
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer s3cret", NULL));     /* a prefix */
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer " TOKEN "x", NULL)); /* longer */
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer ", NULL));
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer" TOKEN, NULL));
    assert_false(hotmigd_alerts_authorized(alerts, "Basic " TOKEN, &why));
    assert_string_equal(why, "the Authorization header is not 'Bearer TOKEN'");
}

static void test_bearer_no_token(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts;
    g_autofree char *why = NULL;

    g_unlink(f->token_file);
    alerts = alerts_new(f, "A", NULL);
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer " TOKEN, &why));
    assert_non_null(strstr(why, "no token is configured (cannot read the token file"));
    g_clear_pointer(&why, g_free);
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer ", &why));
    assert_true(g_file_set_contents(f->token_file, " \n", -1, NULL));
    hotmigd_alerts_unref(f->alerts);
    alerts = alerts_new(f, "A", NULL);
    assert_false(hotmigd_alerts_authorized(alerts, "Bearer  ", NULL));
}

/* ---- bad bodies change nothing --------------------------------------------------------------- */

static void assert_nothing_changed(Fixture *f)
{
    g_autoptr(GPtrArray) active = pol_alert_book_list(hotmigd_alerts_get_book(f->alerts), NULL);
    g_autofree char *fw = forwards_text();

    assert_int_equal(active->len, 0);
    assert_int_equal(f->sched.evacuations->len, 0);
    assert_string_equal(fw, "");
}

static void test_webhook_refused(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", NULL);
    const char *unknown[] = {"A:evacuate:f1", "B:quarantine:f2", "nodeX:urgent:f3", NULL};
    g_autofree char *big = g_malloc(ORCH_ALERT_WEBHOOK_MAX_BYTES + 1);
    g_autofree char *unknown_body = webhook_body(unknown, "firing");
    g_autofree char *metrics = NULL;

    memset(big, ' ', ORCH_ALERT_WEBHOOK_MAX_BYTES + 1);
    assert_error_reply(post(alerts, big, ORCH_ALERT_WEBHOOK_MAX_BYTES + 1), 413,
                       "the webhook body has 1048577 bytes, more than the limit of 1048576");
    assert_error_reply(post_text(alerts, "{\"alerts\":[}"), 400, "webhook: not JSON");
    assert_error_reply(post_text(alerts, "{\"alerts\":{}}"), 400,
                       "webhook: alerts: must be an array of objects");
    assert_error_reply(
        post_text(alerts, "{\"alerts\":[{\"status\":\"firing\",\"labels\":{\"host\":\"A\"}}]}"),
        400, "webhook: alerts[0].labels.hotmig_action: missing (and no labels.severity)");
    assert_error_reply(
        post(alerts, unknown_body, strlen(unknown_body)), 422,
        "webhook: alerts[2]: host 'nodeX' is not one of the cluster's hosts (the [host NAME] groups: A, B, C): nothing of the body was applied");
    assert_nothing_changed(f);
    metrics = metrics_text(alerts);
    assert_non_null(strstr(metrics, "hotmig_alerts_total{action=\"rejected\"} 5\n"));
    assert_non_null(strstr(metrics, "hotmig_hosts{state=\"ok\"} 3\n"));
}

/* ---- acting on this host's alerts -------------------------------------------------------------
 */

static void test_evacuate_once(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", NULL);
    const char *first[] = {"A:evacuate:fp1:600s", NULL};
    const char *urgent[] = {"A:urgent:fp1:120s", NULL};
    const char *second[] = {"A:evacuate:fp2:900s", NULL};
    g_autoptr(HotmigdApiReply) r1 = NULL, r2 = NULL, r3 = NULL, r4 = NULL, r5 = NULL;
    g_autofree char *evacs = NULL;

    f->sched.late = g_strsplit("vm7,vm9", ",", -1);
    r1 = post_alerts(alerts, first, "firing");
    assert_int_equal(r1->status, 200);
    assert_result(r1, 0, "accepted", "A", "evacuate");
    assert_true(logged_has("Evacuation evac-1 of host 'A' started (deadline in 600 s)"));
    assert_true(logged_has(
        "Evacuation evac-1 of host 'A': 2 VMs are predicted to miss the deadline (deadline in 600 s): vm7, vm9"));
    /* Alertmanager sends it again: merged, not started again. */
    r2 = post_alerts(alerts, first, "firing");
    assert_result(r2, 0, "merged", "A", "none");
    /* It becomes urgent with an earlier deadline: the scheduler is asked again with it. */
    r3 = post_alerts(alerts, urgent, "firing");
    assert_result(r3, 0, "merged", "A", "none");
    assert_true(logged_has(
        "Evacuation evac-2 of host 'A' was running: asked again with the earlier deadline (deadline in 120 s)"));
    /* Another alert while it runs, with a later deadline: nothing more. */
    r4 = post_alerts(alerts, second, "firing");
    assert_result(r4, 0, "accepted", "A", "none");
    evacs = evacuations_text(f);
    assert_string_equal(evacs, "A 600, A 120");
    assert_int_equal(pol_alert_book_get_state(hotmigd_alerts_get_book(alerts), "A"),
                     POL_HOST_EVACUATING);

    /* Done: quarantined while alerts remain; lifted when the last is resolved. */
    hotmigd_alerts_evacuation_done(alerts, "A", TRUE);
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_QUARANTINED);
    r5 =
        post_alerts(alerts, (const char *[]){"A:evacuate:fp1", "A:evacuate:fp2", NULL}, "resolved");
    assert_result(r5, 0, "accepted", "A", "none");
    assert_result(r5, 1, "accepted", "A", "lift");
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_OK);
    /* The scheduler was told: held from the first alert on, released at the end. */
    assert_string_equal(f->sched.states->str, "A quarantined, A ok");
    /* An evacuation the alerts did not start ends: nothing to say. */
    hotmigd_alerts_evacuation_done(alerts, "A", TRUE);
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_OK);
    {
        g_autofree char *m = metrics_text(alerts);

        assert_non_null(strstr(m, "hotmig_alerts_total{action=\"evacuate\"} 1\n"));
        assert_non_null(strstr(m, "hotmig_alerts_total{action=\"merged\"} 2\n"));
        assert_non_null(strstr(m, "hotmig_alerts_total{action=\"none\"} 2\n"));
        assert_non_null(strstr(m, "hotmig_alerts_total{action=\"lift\"} 1\n"));
        assert_non_null(strstr(m, "hotmig_migrations_total{result=\"ok\"} 3\n"));
        assert_non_null(strstr(m, "hotmig_vf_leases{state=\"free\"} 2\n"));
    }
}

static void test_evacuate_fails(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", NULL);
    g_autoptr(HotmigdApiReply) r1 = NULL, r2 = NULL;

    f->sched.fail = TRUE;
    r1 = post_alerts(alerts, (const char *[]){"A:evacuate:fp1", NULL}, "firing");
    assert_result(r1, 0, "accepted", "A", "evacuate");
    assert_true(logged_has("Cannot evacuate host 'A' (no deadline): no room for the VMs of 'A'"));
    /* The alert stays: the host is quarantined, not evacuating, and a new alert tries again. */
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_QUARANTINED);
    f->sched.fail = FALSE;
    r2 = post_alerts(alerts, (const char *[]){"A:evacuate:fp2", NULL}, "firing");
    assert_result(r2, 0, "accepted", "A", "evacuate");
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_EVACUATING);
    assert_string_equal(f->sched.states->str, "A quarantined");
}

/* ---- who acts -----------------------------------------------------------------------------------
 */

static void test_forward_to_owner(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) reply =
        post_alerts(alerts, (const char *[]){"A:quarantine:fp1", NULL}, "firing");
    g_autoptr(GPtrArray) active = pol_alert_book_list(hotmigd_alerts_get_book(alerts), NULL);
    g_autofree char *fw = forwards_text();
    g_autofree char *m = metrics_text(alerts);

    assert_int_equal(reply->status, 200);
    assert_result(reply, 0, "accepted", "A", "quarantine");
    assert_string_equal(fw, "A A owner");
    assert_int_equal(active->len, 0); /* applied by A, not here */
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_QUARANTINED); /* as A said */
    assert_non_null(strstr(m, "hotmig_alerts_total{action=\"forwarded\"} 1\n"));
    assert_non_null(strstr(m, "hotmig_hosts{state=\"quarantined\"} 1\n"));
    assert_string_equal(f->sched.states->str, ""); /* A's daemon tells its own scheduler */
}

static void test_owner_down_self_next(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autofree char *fw = NULL;
    g_autofree char *reason = NULL;
    g_autofree char *evacs = NULL;

    set_mode(0, PEER_DOWN);
    reply = post_alerts(alerts, (const char *[]){"A:evacuate:fp1", NULL}, "firing");
    assert_int_equal(reply->status, 200);
    assert_result(reply, 0, "accepted", "B", "evacuate");
    reason = result_member(reply, 0, "reason");
    assert_non_null(strstr(reason, "(acting for 'A', whose hotmigd does not answer)"));
    fw = forwards_text();
    assert_string_equal(fw, "A A owner"); /* B is next in order: nobody else is asked */
    evacs = evacuations_text(f);
    assert_string_equal(evacs, "A 0");
    assert_true(logged_has("The hotmigd of host 'A' does not answer"));
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_EVACUATING);
}

/* What another call found (the inventory) corrects what a forward found: A down, then up. */
static void test_answers_again(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autoptr(HotmigdApiReply) resolved = NULL;

    set_mode(0, PEER_DOWN);
    reply = post_alerts(alerts, (const char *[]){"A:quarantine:fp1", NULL}, "firing");
    assert_result(reply, 0, "accepted", "B", "quarantine");
    resolved = post_alerts(alerts, (const char *[]){"A:quarantine:fp1", NULL}, "resolved");
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"),
                     POL_HOST_DOWN); /* lifted, not answering */
    hotmigd_alerts_set_answers(alerts, "A", TRUE);
    assert_true(logged_has("The hotmigd of host 'A' answers again"));
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_OK);
    hotmigd_alerts_set_answers(alerts, "A", FALSE);
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_DOWN);
}

static void test_owner_down_deputy_other(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "C", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autofree char *fw = NULL;
    g_autofree char *m = NULL;

    set_mode(0, PEER_TIMEOUT);
    reply = post_alerts(alerts, (const char *[]){"A:evacuate:fp1", NULL}, "firing");
    assert_result(reply, 0, "accepted", "B", "quarantine");
    fw = forwards_text();
    assert_string_equal(fw, "A A owner, B A deputy");
    assert_int_equal(f->sched.evacuations->len, 0); /* B acts, not C */
    m = metrics_text(alerts);
    assert_non_null(strstr(m, "hotmig_hosts{state=\"down\"} 1\n"));
    assert_non_null(strstr(m, "hotmig_hosts{state=\"ok\"} 2\n"));
}

static void test_two_down(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "C", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autofree char *fw = NULL;
    g_autofree char *evacs = NULL;

    set_mode(0, PEER_DOWN);
    set_mode(1, PEER_TIMEOUT);
    /* Two alerts about A in one body: A and B are asked once, for the first. */
    reply =
        post_alerts(alerts, (const char *[]){"A:evacuate:fp1", "A:quarantine:fp2", NULL}, "firing");
    assert_int_equal(reply->status, 200);
    assert_result(reply, 0, "accepted", "C", "evacuate");
    assert_result(reply, 1, "accepted", "C", "none");
    fw = forwards_text();
    assert_string_equal(fw, "A A owner, B A deputy");
    evacs = evacuations_text(f);
    assert_string_equal(evacs, "A 0");
}

static void test_owner_refuses(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autofree char *fw = NULL;
    g_autofree char *reason = NULL;

    set_mode(0, PEER_REFUSES);
    reply = post_alerts(alerts, (const char *[]){"A:evacuate:fp1", NULL}, "firing");
    /* A answers: it is up; its refusal is not a reason for another host to act. */
    assert_int_equal(reply->status, 502);
    assert_result(reply, 0, "error", NULL, NULL);
    reason = result_member(reply, 0, "reason");
    assert_non_null(strstr(reason, "(422 Unprocessable Entity)"));
    fw = forwards_text();
    assert_string_equal(fw, "A A owner");
    assert_int_equal(f->sched.evacuations->len, 0);
    assert_int_equal(hotmigd_alerts_get_state(alerts, "A"), POL_HOST_OK);
}

static void test_cannot_call(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;

    /* Our own certificate does not load: an error, not a reason to act for A. */
    set_mode(0, PEER_BAD_CERT);
    reply = post_alerts(alerts, (const char *[]){"A:evacuate:fp1", NULL}, "firing");
    assert_int_equal(reply->status, 502);
    assert_result(reply, 0, "error", NULL, NULL);
    assert_int_equal(f->sched.evacuations->len, 0);
}

/* Two daemons get the same alert about dead A (Alertmanager sends to both): both find B, which
 * applies it twice, and its book merges the second: one evacuation. */
static void test_same_alert_two_receivers(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *b = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) r1 = NULL, r2 = NULL;
    g_autofree char *fw = NULL;
    g_autofree char *evacs = NULL;
    const char *deputy_body =
        "{\"from\":\"C\",\"deputy\":true,\"host\":\"A\",\"severity\":\"evacuate\","
        "\"confidence\":1.0,\"deadline\":0,\"key\":\"fp1\",\"resolved\":false,\"source\":\"alertmanager\"}";

    set_mode(0, PEER_DOWN);
    r1 = post_alerts(b, (const char *[]){"A:evacuate:fp1", NULL}, "firing");
    assert_result(r1, 0, "accepted", "B", "evacuate");
    /* What C sends B once it found A down (orch_hotmigd_client_alert() as deputy). */
    r2 = hotmigd_alerts_api_handle(b, "POST", deputy_body, strlen(deputy_body), "127.0.0.4 (C)",
                                   "C");
    assert_int_equal(r2->status, 200);
    assert_non_null(strstr(r2->body, "\"result\" : \"merged\""));
    fw = forwards_text();
    assert_string_equal(fw, "A A owner");
    evacs = evacuations_text(f);
    assert_string_equal(evacs, "A 0");
}

/* A host certificate asks this daemon to act as deputy for a host whose hotmigd answers here:
 * refused (issue 28, finding 8); C could otherwise have A's machines evacuated at will. Once
 * this daemon's own call found A silent, the same request is applied. */
static void test_deputy_only_for_down(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *b = alerts_new(f, "B", NULL);
    g_autoptr(HotmigdApiReply) refused = NULL;
    g_autoptr(HotmigdApiReply) self = NULL;
    g_autoptr(HotmigdApiReply) applied = NULL;
    const char *body =
        "{\"from\":\"C\",\"deputy\":true,\"host\":\"A\",\"severity\":\"evacuate\","
        "\"confidence\":1.0,\"deadline\":0,\"key\":\"fp1\",\"resolved\":false}";
    const char *about_itself = "{\"from\":\"A\",\"deputy\":true,\"host\":\"A\",\"severity\":"
                               "\"evacuate\",\"key\":\"fp2\"}";

    hotmigd_alerts_set_answers(b, "A", TRUE);
    refused = hotmigd_alerts_api_handle(b, "POST", body, strlen(body), "127.0.0.4 (C)", "C");
    assert_error_reply(g_steal_pointer(&refused), 409,
                       "'C' asks this host to act for 'A' as deputy, but the hotmigd of 'A' "
                       "answered this host's last call: it acts for itself");
    self = hotmigd_alerts_api_handle(b, "POST", about_itself, strlen(about_itself), "127.0.0.2 (A)",
                                     "A");
    assert_error_reply(g_steal_pointer(&self), 409, "but the hotmigd of 'A' answered");
    assert_int_equal(f->sched.evacuations->len, 0);
    assert_int_equal(hotmigd_alerts_get_state(b, "A"), POL_HOST_OK);

    hotmigd_alerts_set_answers(b, "A", FALSE);
    applied = hotmigd_alerts_api_handle(b, "POST", body, strlen(body), "127.0.0.4 (C)", "C");
    assert_int_equal(applied->status, 200);
    assert_non_null(strstr(applied->body, "\"result\" : \"accepted\""));
    assert_int_equal(f->sched.evacuations->len, 1);
}

static void test_own_host_never_forwarded(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "C", NULL);
    g_autoptr(HotmigdApiReply) reply = NULL;
    g_autofree char *fw = NULL;

    set_mode(0, PEER_DOWN);
    set_mode(1, PEER_DOWN);
    reply = post_alerts(alerts, (const char *[]){"C:quarantine:fp1", NULL}, "firing");
    assert_result(reply, 0, "accepted", "C", "quarantine");
    fw = forwards_text();
    assert_string_equal(fw, "");
}

/* ---- submissions from the other inputs ------------------------------------------------------- */

static void got_results(GPtrArray *results, gpointer data)
{
    Wait *wait = data;

    wait->results = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < results->len; i++)
        g_ptr_array_add(wait->results,
                        orch_alert_result_format(g_ptr_array_index(results, i), "B"));
    wait->done = TRUE;
}

static void test_submit_lines(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", "max-unavailable = 2");
    const char *lines[] = {
        "{\"host\":\"B\",\"severity\":\"quarantine\",\"key\":\"k\"}",
        "{\"host\":\"B\",\"severity\":\"quarantine\",\"key\":\"k\"}",
        "{\"host\":\"B\",\"severity\":\"urgent\",\"confidence\":0.2}",
        "{\"host\":\"Q\",\"severity\":\"urgent\"}",
        "{\"host\":\"A\",\"severity\":\"quarantine\"}",
        NULL,
    };
    g_autoptr(GPtrArray) events =
        g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);
    Wait wait = {0};

    for (guint i = 0; lines[i]; i++) {
        g_autoptr(GError) error = NULL;
        PolAlertEvent *ev =
            orch_alert_line_parse(lines[i], strlen(lines[i]), "socket", NOW, &error);

        if (!ev)
            fail_msg("%s", error->message);
        g_ptr_array_add(events, ev);
    }
    hotmigd_alerts_submit(alerts, events, "the alert socket", got_results, &wait);
    while (!wait.done)
        g_main_context_iteration(NULL, TRUE);
    assert_int_equal(wait.results->len, 5);
    assert_true(g_str_has_prefix(g_ptr_array_index(wait.results, 0),
                                 "accepted: host 'B': alert 'k' from socket"));
    assert_true(
        g_str_has_prefix(g_ptr_array_index(wait.results, 1), "merged: host 'B': alert 'k'"));
    assert_true(g_str_has_prefix(g_ptr_array_index(wait.results, 2), "ignored: host 'B'"));
    assert_string_equal(
        g_ptr_array_index(wait.results, 3),
        "error: host 'Q' is not one of the cluster's hosts (the [host NAME] groups: A, B, C)");
    assert_string_equal(g_ptr_array_index(wait.results, 4),
                        "accepted (by A): host 'A': quarantined by A");
    g_ptr_array_unref(wait.results);
}

/* ---- the blast radius (issue 15, item 9) ------------------------------------------------------ */

/* One alert naming every host, with [alerts] max-unavailable = 1: the first host is held, the
 * others are held back (error results, 502 so that Alertmanager sends them again), reported in
 * the results, the log, /metrics and GET /v1/alerts; once the host is lifted the next one may
 * go. Forwards on their way count: two bodies in flight cannot hold two hosts. */
static void test_max_unavailable(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", "max-unavailable = 1");
    g_autoptr(HotmigdApiReply) reply = post_alerts(
        alerts, (const char *[]){"A:quarantine:fa", "B:quarantine:fb", "C:evacuate:fc", NULL},
        "firing");
    g_autofree char *reason = result_member(reply, 1, "reason");
    g_autofree char *fw = forwards_text();
    g_autofree char *m = metrics_text(alerts);
    g_autoptr(HotmigdApiReply) list = hotmigd_alerts_api_handle(alerts, "GET", NULL, 0, NULL, "B");

    assert_int_equal(reply->status, 502);
    assert_result(reply, 0, "accepted", "A", "quarantine");
    assert_string_equal(reason, "held back: host 'B' stays in service: [alerts] max-unavailable "
                                "is 1 and 1 host is quarantined or evacuating (A)");
    assert_result(reply, 2, "error", NULL, NULL);
    assert_string_equal(fw, ""); /* neither B's nor C's daemon was asked */
    assert_true(logged_has("held back: host 'C' stays in service"));
    assert_non_null(strstr(m, "hotmig_alerts_total{action=\"held\"} 2\n"));
    assert_non_null(strstr(m, "hotmig_hosts{state=\"quarantined\"} 1\n"));
    assert_non_null(strstr(list->body, "\"max_unavailable\" : 1"));
    assert_int_equal(f->sched.evacuations->len, 0);

    /* Resolved: A is lifted, and B may be quarantined now. */
    {
        g_autoptr(HotmigdApiReply) r1 =
            post_alerts(alerts, (const char *[]){"A:quarantine:fa", NULL}, "resolved");
        g_autoptr(HotmigdApiReply) r2 =
            post_alerts(alerts, (const char *[]){"B:quarantine:fb", NULL}, "firing");

        assert_int_equal(r1->status, 200);
        assert_int_equal(r2->status, 200);
        assert_result(r2, 0, "accepted", "B", "quarantine");
    }
    /* B holds the one place: A's own alert is held back too, B's repeat is not. */
    {
        g_autoptr(HotmigdApiReply) r1 =
            post_alerts(alerts, (const char *[]){"A:evacuate:fa2", NULL}, "firing");
        g_autoptr(HotmigdApiReply) r2 =
            post_alerts(alerts, (const char *[]){"B:evacuate:fb", NULL}, "firing");

        assert_int_equal(r1->status, 502);
        assert_result(r1, 0, "error", NULL, NULL);
        assert_int_equal(r2->status, 200);
        assert_int_equal(f->sched.evacuations->len, 0); /* B's daemon evacuates B */
    }
}

/* Two bodies at once, each naming another host: the forward on its way counts, so only one
 * host is held. */
static void test_max_unavailable_in_flight(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", "max-unavailable = 1");
    g_autofree char *b1 = webhook_body((const char *[]){"B:quarantine:fb", NULL}, "firing");
    g_autofree char *b2 = webhook_body((const char *[]){"C:quarantine:fc", NULL}, "firing");
    Wait w1 = {0}, w2 = {0};

    hotmigd_alerts_webhook(alerts, b1, strlen(b1), "127.0.0.1", got_reply, &w1);
    hotmigd_alerts_webhook(alerts, b2, strlen(b2), "127.0.0.1", got_reply, &w2);
    while (!w1.done || !w2.done)
        g_main_context_iteration(NULL, TRUE);
    assert_int_equal(w1.reply->status, 200);
    assert_int_equal(w2.reply->status, 502);
    assert_non_null(strstr(w2.reply->body, "1 host is quarantined or evacuating (B (an alert on "
                                           "its way))"));
    hotmigd_api_reply_free(w1.reply);
    hotmigd_api_reply_free(w2.reply);
}

/* A burst of webhook bodies: at most HOTMIGD_ALERTS_WEBHOOKS_MAX are handled at once, the others
 * answered 503 at once (Alertmanager sends them again); every one is answered. */
static void test_webhook_burst(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", NULL);
    g_autofree char *body = webhook_body((const char *[]){"B:quarantine:fb", NULL}, "firing");
    Wait waits[200] = {{0}};
    guint answered = 0, busy = 0, ok = 0;

    for (guint i = 0; i < G_N_ELEMENTS(waits); i++)
        hotmigd_alerts_webhook(alerts, body, strlen(body), "127.0.0.1", got_reply, &waits[i]);
    for (guint i = 0; i < G_N_ELEMENTS(waits); i++)
        busy += waits[i].done && waits[i].reply->status == 503;
    assert_int_equal(busy, G_N_ELEMENTS(waits) - HOTMIGD_ALERTS_WEBHOOKS_MAX);
    while (answered < G_N_ELEMENTS(waits)) {
        g_main_context_iteration(NULL, TRUE);
        answered = 0;
        for (guint i = 0; i < G_N_ELEMENTS(waits); i++)
            answered += waits[i].done;
    }
    for (guint i = 0; i < G_N_ELEMENTS(waits); i++) {
        ok += waits[i].reply->status == 200;
        hotmigd_api_reply_free(waits[i].reply);
    }
    assert_int_equal(ok, HOTMIGD_ALERTS_WEBHOOKS_MAX);
}

/* ---- /v1/alerts of the mutual-TLS API -------------------------------------------------------- */

static void test_api(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "B", NULL);
    const char *own =
        "{\"from\":\"A\",\"deputy\":false,\"host\":\"B\",\"severity\":\"quarantine\",\"key\":\"k1\"}";
    g_autoptr(HotmigdApiReply) ok = NULL, list = NULL;

    assert_error_reply(api(alerts, "{"), 400, "the request body is not JSON");
    assert_error_reply(api(alerts, "[]"), 400, "the request body is not a JSON object");
    assert_error_reply(api(alerts, ""), 400, "the request body is empty");
    assert_error_reply(api(alerts, "{\"deputy\":false,\"host\":\"B\"}"), 400,
                       "member 'from' must be the sending host's name");
    assert_error_reply(api(alerts, "{\"from\":\"A\",\"host\":\"B\"}"), 400,
                       "member 'deputy' must be true or false");
    assert_error_reply(api(alerts, "{\"from\":\"A\",\"deputy\":1,\"host\":\"B\"}"), 400,
                       "member 'deputy' must be true or false");
    assert_error_reply(api(alerts, "{\"from\":\"A\",\"deputy\":false,\"x\":1}"), 400,
                       "unknown member 'x'");
    assert_error_reply(api(alerts, "{\"from\":\"A\",\"deputy\":false,\"host\":\"B\"}"), 400,
                       "event: severity: missing");
    assert_error_reply(
        api(alerts, "{\"from\":\"A\",\"deputy\":true,\"host\":\"D\",\"severity\":\"urgent\"}"), 422,
        "host 'D' is not one of the cluster's hosts");
    assert_error_reply(
        api(alerts, "{\"from\":\"C\",\"deputy\":false,\"host\":\"A\",\"severity\":\"urgent\"}"),
        409, "this is the hotmigd of 'B', not of 'A'");
    assert_error_reply(hotmigd_alerts_api_handle(alerts, "DELETE", NULL, 0, NULL, NULL), 405,
                       "allowed: GET, POST");
    assert_nothing_changed(f);

    /* Issue 15: 'from' must be the sending host: another host, or no host, gets 403. */
    assert_error_reply(hotmigd_alerts_api_handle(alerts, "POST", own, strlen(own), "x (C)", "C"),
                       403, "a host forwards its own alerts only");
    assert_error_reply(hotmigd_alerts_api_handle(alerts, "POST", own, strlen(own), "x (s)", NULL),
                       403, "no cluster host's");
    assert_nothing_changed(f);
    ok = hotmigd_alerts_api_handle(alerts, "POST", own, strlen(own), "127.0.0.2 (A)", "A");
    assert_int_equal(ok->status, 200);
    assert_null(ok->log); /* logged when applied */
    assert_non_null(strstr(ok->body, "\"actor\" : \"B\""));
    assert_non_null(strstr(ok->body, "\"action\" : \"quarantine\""));
    assert_true(logged_has(
        "Alert from A's hotmigd (127.0.0.2 (A)): accepted: host 'B': alert 'k1' from an unnamed source via A"));
    list = hotmigd_alerts_api_handle(alerts, "GET", NULL, 0, NULL, NULL);
    assert_int_equal(list->status, 200);
    assert_non_null(strstr(list->body, "\"key\" : \"k1\""));
    assert_non_null(strstr(list->body, "\"state\" : \"quarantined\""));
}

static void test_host_label(void **state)
{
    Fixture *f = *state;
    HotmigdAlerts *alerts = alerts_new(f, "A", "host-label = node");
    const char *body =
        "{\"alerts\":[{\"status\":\"firing\",\"labels\":{\"node\":\"A\",\"host\":\"Z\","
        "\"hotmig_action\":\"quarantine\"},\"fingerprint\":\"f\"}]}";
    g_autoptr(HotmigdApiReply) reply = post(alerts, body, strlen(body));

    assert_int_equal(reply->status, 200);
    assert_result(reply, 0, "accepted", "A", "quarantine");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bearer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bearer_no_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_webhook_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evacuate_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_evacuate_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward_to_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_down_self_next, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_down_deputy_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deputy_only_for_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cannot_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_alert_two_receivers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_host_never_forwarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_unavailable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_unavailable_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_webhook_burst, setup, teardown),
        cmocka_unit_test_setup_teardown(test_api, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_label, setup, teardown),
    };
    int rc;

    logged = g_ptr_array_new_with_free_func(g_free);
    forwards = g_ptr_array_new_with_free_func(g_free);
    g_log_set_writer_func(log_capture, NULL, NULL);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    g_ptr_array_unref(forwards);
    g_ptr_array_unref(logged);
    return rc;
}
