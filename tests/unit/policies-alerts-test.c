/* hm-policies: the alert book (merging, host state transitions, an evacuation started at most
 * once, resolved alerts lifting, the confidence threshold, bad events changing nothing) and
 * the ordering of an evacuation before a deadline (hand-checked cases). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "policies/policies-priv.h"

#define NOW 1700000000

static PolAlertEvent *event(const char *host, PolSeverity severity, double confidence,
                            gint64 deadline, const char *key)
{
    PolAlertEvent *ev = pol_alert_event_new();

    ev->host = g_strdup(host);
    ev->severity = severity;
    ev->confidence = confidence;
    ev->deadline = deadline;
    ev->source = g_strdup("socket");
    ev->key = g_strdup(key);
    return ev;
}

static PolAlertEvent *resolved(const char *host, const char *key)
{
    PolAlertEvent *ev = event(host, POL_SEVERITY_QUARANTINE, 1.0, 0, key);

    ev->resolved = TRUE;
    return ev;
}

/* Applies @ev (taking it) and checks the action's kind; returns the action (owned). */
static PolAlertAction *apply(PolAlertBook *book, PolAlertEvent *ev_in, PolAlertActionKind want)
{
    g_autoptr(PolAlertEvent) ev = ev_in;
    g_autoptr(GError) error = NULL;
    PolAlertAction *action = NULL;

    if (!pol_alert_book_apply(book, ev, NOW, &action, &error))
        fail_msg("apply: %s", error->message);
    assert_non_null(action);
    assert_non_null(action->reason);
    if (action->kind != want)
        fail_msg("expected %s, got %s: %s", pol_alert_action_kind_to_string(want),
                 pol_alert_action_kind_to_string(action->kind), action->reason);
    assert_string_equal(action->host, ev->host);
    return action;
}

/* ---- the alert book ---------------------------------------------------------------------- */

static void test_book_quarantine_then_evacuate(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.0);
    g_autoptr(PolAlertAction) a1 = NULL, a2 = NULL, a3 = NULL, a4 = NULL;

    assert_int_equal(pol_alert_book_get_state(book, "h1"), POL_HOST_OK);
    a1 = apply(book, event("h1", POL_SEVERITY_QUARANTINE, 0.9, 0, "k1"),
               POL_ALERT_ACTION_QUARANTINE);
    assert_int_equal(a1->state, POL_HOST_QUARANTINED);
    assert_false(a1->merged);
    assert_non_null(strstr(
        a1->reason,
        "host 'h1': alert 'k1' from socket (quarantine, confidence 0.90, no deadline) fires: quarantined"));
    a2 = apply(book, event("h1", POL_SEVERITY_EVACUATE, 0.8, NOW + 600, "k2"),
               POL_ALERT_ACTION_EVACUATE);
    assert_int_equal(a2->state, POL_HOST_EVACUATING);
    assert_int_equal(a2->severity, POL_SEVERITY_EVACUATE);
    assert_int_equal(a2->deadline, NOW + 600);
    assert_non_null(strstr(a2->reason, "deadline in 600 s) fires: evacuating"));
    /* Another alert while the evacuation runs: recorded, nothing new starts. */
    a3 = apply(book, event("h1", POL_SEVERITY_URGENT, 1.0, NOW + 60, "k3"), POL_ALERT_ACTION_NONE);
    assert_int_equal(a3->state, POL_HOST_EVACUATING);
    assert_int_equal(a3->severity, POL_SEVERITY_URGENT);
    assert_int_equal(a3->deadline, NOW + 60); /* the daemon may reorder what is left */
    assert_non_null(strstr(a3->reason, "the evacuation started for alert 'k2' is already running"));
    /* Other hosts are not concerned. */
    assert_int_equal(pol_alert_book_get_state(book, "h2"), POL_HOST_OK);
    a4 = apply(book, event("h2", POL_SEVERITY_URGENT, 1.0, NOW - 5, "k1"),
               POL_ALERT_ACTION_EVACUATE);
    assert_non_null(strstr(a4->reason, "deadline passed 5 s ago"));
}

static void test_book_duplicates_merged(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.0);
    g_autoptr(PolAlertAction) a1 = NULL, a2 = NULL, a3 = NULL, a4 = NULL, a5 = NULL, a6 = NULL;
    g_autoptr(GPtrArray) list = NULL;
    const PolAlertEvent *stored;

    a1 = apply(book, event("h1", POL_SEVERITY_QUARANTINE, 0.7, NOW + 900, "fp"),
               POL_ALERT_ACTION_QUARANTINE);
    /* The same alert again, weaker in every way: merged, nothing changes. */
    a2 = apply(book, event("h1", POL_SEVERITY_QUARANTINE, 0.5, NOW + 1200, "fp"),
               POL_ALERT_ACTION_NONE);
    assert_true(a2->merged);
    assert_non_null(strstr(a2->reason, "repeats: merged, nothing changes"));
    /* Higher confidence and an earlier deadline: updated, still only quarantined. */
    a3 = apply(book, event("h1", POL_SEVERITY_QUARANTINE, 0.95, NOW + 300, "fp"),
               POL_ALERT_ACTION_NONE);
    assert_true(a3->merged);
    assert_non_null(
        strstr(a3->reason,
               "updated: confidence 0.70 -> 0.95, deadline earlier; the host stays quarantined"));
    assert_int_equal(a3->deadline, NOW + 300);
    /* A stronger severity for the same alert: the evacuation starts. */
    a4 = apply(book, event("h1", POL_SEVERITY_EVACUATE, 0.1, 0, "fp"), POL_ALERT_ACTION_EVACUATE);
    assert_true(a4->merged);
    assert_non_null(strstr(a4->reason, "updated: severity quarantine -> evacuate: evacuating"));
    /* Repeats while it runs change nothing. */
    a5 = apply(book, event("h1", POL_SEVERITY_EVACUATE, 0.95, NOW + 300, "fp"),
               POL_ALERT_ACTION_NONE);
    assert_true(a5->merged);
    a6 = apply(book, event("h1", POL_SEVERITY_QUARANTINE, 0.2, 0, "fp"), POL_ALERT_ACTION_NONE);
    assert_true(a6->merged);

    list = pol_alert_book_list(book, "h1");
    assert_int_equal(list->len, 1);
    stored = g_ptr_array_index(list, 0);
    assert_int_equal(stored->severity, POL_SEVERITY_EVACUATE);
    assert_true(stored->confidence == 0.95);
    assert_int_equal(stored->deadline, NOW + 300);
    assert_int_equal(stored->received, NOW);
    assert_string_equal(stored->source, "socket");
}

static void test_book_confidence_threshold(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.6);
    g_autoptr(PolAlertAction) a1 = NULL, a2 = NULL, a3 = NULL;
    g_autoptr(GPtrArray) list = NULL;

    a1 = apply(book, event("h1", POL_SEVERITY_URGENT, 0.4, NOW + 60, "k"), POL_ALERT_ACTION_NONE);
    assert_int_equal(a1->state, POL_HOST_OK);
    assert_non_null(strstr(a1->reason, "ignored: its confidence is below the threshold 0.60"));
    list = pol_alert_book_list(book, NULL);
    assert_int_equal(list->len, 0);
    a2 =
        apply(book, event("h1", POL_SEVERITY_QUARANTINE, 0.6, 0, "k"), POL_ALERT_ACTION_QUARANTINE);
    /* Below the threshold, even for a known alert: ignored, the alert keeps what it had. */
    a3 = apply(book, event("h1", POL_SEVERITY_URGENT, 0.59, 0, "k"), POL_ALERT_ACTION_NONE);
    assert_int_equal(a3->state, POL_HOST_QUARANTINED);
    assert_int_equal(a3->severity, POL_SEVERITY_QUARANTINE);
}

static void test_book_resolved_lifts(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.0);
    g_autoptr(PolAlertAction) a1 = NULL, a2 = NULL, a3 = NULL, a4 = NULL, a5 = NULL, a6 = NULL;

    a1 =
        apply(book, event("h1", POL_SEVERITY_QUARANTINE, 1.0, 0, "a"), POL_ALERT_ACTION_QUARANTINE);
    a2 = apply(book, event("h1", POL_SEVERITY_QUARANTINE, 1.0, 0, "b"), POL_ALERT_ACTION_NONE);
    assert_false(a2->merged);
    a3 = apply(book, resolved("h1", "a"), POL_ALERT_ACTION_NONE);
    assert_non_null(strstr(
        a3->reason, "alert 'a' resolved; 1 other alerts still active: it stays quarantined"));
    /* Resolving it again, or an alert never seen: nothing to do. */
    a4 = apply(book, resolved("h1", "a"), POL_ALERT_ACTION_NONE);
    assert_non_null(strstr(a4->reason, "not active"));
    a5 = apply(book, resolved("h9", "zz"), POL_ALERT_ACTION_NONE);
    assert_int_equal(a5->state, POL_HOST_OK);
    a6 = apply(book, resolved("h1", "b"), POL_ALERT_ACTION_LIFT);
    assert_int_equal(a6->state, POL_HOST_OK);
    assert_int_equal(pol_alert_book_get_state(book, "h1"), POL_HOST_OK);
    assert_non_null(strstr(a6->reason, "the last one: lifted"));
}

/* The same evacuation never runs twice: repeats, resolutions and new alerts while it runs
 * start nothing; it ends only when the caller says so. */
static void test_book_evacuation_once(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.0);
    g_autoptr(GError) error = NULL;
    PolAlertAction *a = NULL;
    guint evacuations = 0;

    for (int round = 0; round < 5; round++) {
        g_autoptr(PolAlertAction) x = NULL;
        x = apply(book, event("h1", POL_SEVERITY_EVACUATE, 1.0, 0, "fp1"),
                  round == 0 ? POL_ALERT_ACTION_EVACUATE : POL_ALERT_ACTION_NONE);
        evacuations += x->kind == POL_ALERT_ACTION_EVACUATE;
    }
    assert_int_equal(evacuations, 1);
    /* Ended, the alert still active: quarantined, and a repeat does not start it again. */
    assert_true(pol_alert_book_evacuation_done(book, "h1", FALSE, NOW, &a, &error));
    assert_int_equal(a->kind, POL_ALERT_ACTION_NONE);
    assert_int_equal(a->state, POL_HOST_QUARANTINED);
    assert_non_null(
        strstr(a->reason, "evacuation failed; 1 alerts still active: it stays quarantined"));
    g_clear_pointer(&a, pol_alert_action_free);
    pol_alert_action_free(
        apply(book, event("h1", POL_SEVERITY_EVACUATE, 1.0, 0, "fp1"), POL_ALERT_ACTION_NONE));
    /* A new alert does. */
    pol_alert_action_free(
        apply(book, event("h1", POL_SEVERITY_EVACUATE, 1.0, 0, "fp2"), POL_ALERT_ACTION_EVACUATE));
    /* Every alert resolved while it runs: the host is lifted when it ends, not before. */
    pol_alert_action_free(apply(book, resolved("h1", "fp1"), POL_ALERT_ACTION_NONE));
    a = apply(book, resolved("h1", "fp2"), POL_ALERT_ACTION_NONE);
    assert_int_equal(a->state, POL_HOST_EVACUATING);
    assert_non_null(
        strstr(a->reason, "its evacuation runs on, and the host is lifted when it ends"));
    g_clear_pointer(&a, pol_alert_action_free);
    assert_true(pol_alert_book_evacuation_done(book, "h1", TRUE, NOW, &a, &error));
    assert_int_equal(a->kind, POL_ALERT_ACTION_LIFT);
    assert_int_equal(a->state, POL_HOST_OK);
    g_clear_pointer(&a, pol_alert_action_free);
    /* Nothing runs any more. */
    assert_false(pol_alert_book_evacuation_done(book, "h1", TRUE, NOW, &a, &error));
    assert_null(a);
    assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_INVALID));
    assert_string_equal(error->message, "host 'h1': no evacuation is running");
}

static void test_book_bad_events_change_nothing(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.0);
    struct {
        PolAlertEvent *ev;
        const char *message;
    } cases[] = {
        {event("", POL_SEVERITY_URGENT, 1.0, 0, "k"), "alert: host: empty"},
        {event(NULL, POL_SEVERITY_URGENT, 1.0, 0, "k"), "alert: host: empty"},
        {event("h1", POL_SEVERITY_URGENT, 1.0, 0, NULL), "alert: key: empty"},
        {event("h1", POL_SEVERITY_URGENT, 1.5, 0, "k"),
         "alert 'k' on 'h1': confidence must be between 0 and 1, not 1.5"},
        {event("h1", POL_SEVERITY_URGENT, NAN, 0, "k"),
         "alert 'k' on 'h1': confidence must be between 0 and 1, not nan"},
        {event("h1", POL_SEVERITY_URGENT, 1.0, -1, "k"),
         "alert 'k' on 'h1': deadline must be a unix time >= 0 (0: none), not -1"},
        {event("h1", (PolSeverity)7, 1.0, 0, "k"), "alert 'k' on 'h1': bad severity 7"},
        {event("h1\xff", POL_SEVERITY_URGENT, 1.0, 0, "k"),
         "alert: host: must be UTF-8 of at most 256 bytes"},
    };
    g_autoptr(GPtrArray) list = NULL;

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(PolAlertEvent) ev = cases[i].ev;
        g_autoptr(GError) error = NULL;
        PolAlertAction *action = NULL;

        assert_false(pol_alert_book_apply(book, ev, NOW, &action, &error));
        assert_null(action);
        assert_true(g_error_matches(error, POL_ERROR, POL_ERROR_INVALID));
        assert_string_equal(error->message, cases[i].message);
    }
    assert_int_equal(pol_alert_book_get_state(book, "h1"), POL_HOST_OK);
    list = pol_alert_book_list(book, NULL);
    assert_int_equal(list->len, 0);
}

static void test_book_alerts_per_host_limit(void **state)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.0);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = NULL;
    PolAlertAction *action = NULL;

    for (guint i = 0; i < POL_ALERTS_PER_HOST_MAX; i++) {
        g_autofree char *key = g_strdup_printf("k%u", i);
        pol_alert_action_free(apply(book, event("h1", POL_SEVERITY_QUARANTINE, 1.0, 0, key),
                                    i == 0 ? POL_ALERT_ACTION_QUARANTINE : POL_ALERT_ACTION_NONE));
    }
    {
        g_autoptr(PolAlertEvent) ev = event("h1", POL_SEVERITY_URGENT, 1.0, 0, "one-more");
        assert_false(pol_alert_book_apply(book, ev, NOW, &action, &error));
    }
    assert_string_equal(error->message,
                        "host 'h1' has 1000 active alerts already: alert 'one-more' refused");
    assert_int_equal(pol_alert_book_get_state(book, "h1"), POL_HOST_QUARANTINED);
    /* A repeat of a known one is still merged. */
    pol_alert_action_free(
        apply(book, event("h1", POL_SEVERITY_QUARANTINE, 1.0, 0, "k7"), POL_ALERT_ACTION_NONE));
    list = pol_alert_book_list(book, NULL);
    assert_int_equal(list->len, POL_ALERTS_PER_HOST_MAX);
}

static void test_alert_strings(void **state)
{
    assert_string_equal(pol_severity_to_string(POL_SEVERITY_URGENT), "urgent");
    assert_int_equal(pol_severity_from_string("evacuate"), POL_SEVERITY_EVACUATE);
    assert_int_equal(pol_severity_from_string("critical"), -1);
    assert_string_equal(pol_alert_action_kind_to_string(POL_ALERT_ACTION_LIFT), "lift");
}

/* ---- evacuation before a deadline -------------------------------------------------------- */

static void add_host(PolCluster *c, const char *name, guint64 mem)
{
    assert_true(pol_cluster_add_host(c, name, 1000, mem, POL_HOST_OK, NULL));
    assert_true(pol_cluster_set_host_vfs(c, name, NULL, 100, -1, NULL));
}

static void add_vm(PolCluster *c, const char *name, const char *host, guint64 mem, gint priority,
                   const char *job)
{
    PolVmSpec spec = {.name = name,
                      .host = host,
                      .vcpus = 1,
                      .memory_mib = mem,
                      .cpu_util = 0.5,
                      .job = job,
                      .moved_ago_s = -1,
                      .priority = priority};

    assert_true(pol_cluster_add_vm(c, &spec, NULL));
}

/* Bandwidth 1000 MiB/s and no overhead: a VM of N x 1000 MiB takes N s. */
static void opts_seconds(PolEvacOptions *o, guint concurrency)
{
    pol_evac_options_init(o);
    o->bandwidth_mib_s = 1000.0;
    o->overhead_s = 0.0;
    o->concurrency = concurrency;
}

/* The VMs of @evac in start order, "a b c", and the late ones "c@10" (owned strings). */
static char *evac_order(const PolEvacuation *evac)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < evac->moves->len; i++) {
        const PolEvacMove *mv = g_ptr_array_index(evac->moves, i);
        g_string_append_printf(s, "%s%s", i ? " " : "", mv->migration->vm);
    }
    return g_string_free(s, FALSE);
}

static char *evac_late(const PolEvacuation *evac)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < evac->late->len; i++) {
        const PolEvacMove *mv = g_ptr_array_index(evac->late, i);
        g_string_append_printf(s, "%s%s@%g", i ? " " : "", mv->migration->vm, mv->finish_s);
    }
    return g_string_free(s, FALSE);
}

static PolEvacuation *evacuate(const PolCluster *c, const PolEvacOptions *o, gint64 deadline)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(PolPlan) drain = pol_plan_drain(c, "src", NULL, &error);
    PolEvacuation *evac;

    if (!drain)
        fail_msg("drain: %s", error->message);
    evac = pol_evacuation_order(c, drain, o, NOW, deadline, &error);
    if (!evac)
        fail_msg("evacuation: %s", error->message);
    /* Any order of a drain plan replays without overcommitting. */
    if (!pol_plan_verify(c, evac->plan, NULL, &error))
        fail_msg("reordered plan: %s", error->message);
    assert_int_equal(evac->plan->migrations->len, drain->migrations->len);
    assert_int_equal(evac->moves->len, drain->migrations->len);
    return evac;
}

/* One slot: shortest first saves the most; the late ones are listed with their finish. */
static void test_evac_one_slot_shortest_first(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolEvacuation) evac = NULL;
    g_autofree char *order = NULL, *late = NULL;
    PolEvacOptions o;

    add_host(c, "src", 100000);
    add_host(c, "dst", 100000);
    add_vm(c, "d4", "src", 4000, 0, NULL);
    add_vm(c, "a1", "src", 1000, 0, NULL);
    add_vm(c, "c3", "src", 3000, 0, NULL);
    add_vm(c, "b2", "src", 2000, 0, NULL);
    opts_seconds(&o, 1);
    /* 1, 2, 3 finish at 1, 3, 6; 4 at 10. */
    evac = evacuate(c, &o, NOW + 6);
    order = evac_order(evac);
    late = evac_late(evac);
    assert_string_equal(order, "a1 b2 c3 d4");
    assert_string_equal(late, "d4@10");
    assert_true(evac->makespan_s == 10.0);
    assert_int_equal(evac->deadline, NOW + 6);
    for (guint i = 0; i < evac->moves->len; i++) {
        const PolEvacMove *mv = g_ptr_array_index(evac->moves, i);
        assert_int_equal(mv->slot, 0);
        assert_true(mv->migration->priority == 0);
        assert_true(mv->finish_s - mv->start_s == mv->migration->duration_s);
    }
}

/* Two slots, 2 3 4 5 6 s, 10 s: shortest first saves 4 (6 ends at 12), a packing saves all:
 * slot 0 runs 4 then 6, slot 1 runs 2, 3, 5; started in planned start order. */
static void test_evac_packing_saves_more(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolEvacuation) evac = NULL, lenient = NULL;
    g_autofree char *order = NULL, *late = NULL, *order2 = NULL;
    PolEvacOptions o;

    add_host(c, "src", 100000);
    add_host(c, "dst", 100000);
    add_vm(c, "v6", "src", 6000, 0, NULL);
    add_vm(c, "v5", "src", 5000, 0, NULL);
    add_vm(c, "v4", "src", 4000, 0, NULL);
    add_vm(c, "v3", "src", 3000, 0, NULL);
    add_vm(c, "v2", "src", 2000, 0, NULL);
    opts_seconds(&o, 2);
    evac = evacuate(c, &o, NOW + 10);
    order = evac_order(evac);
    late = evac_late(evac);
    assert_string_equal(order, "v4 v2 v3 v6 v5");
    assert_string_equal(late, "");
    assert_true(evac->makespan_s == 10.0);
    /* Without a deadline: shortest first (the lowest mean finish time). */
    lenient = evacuate(c, &o, 0);
    order2 = evac_order(lenient);
    assert_string_equal(order2, "v2 v3 v4 v5 v6");
    assert_int_equal(lenient->late->len, 0);
    assert_true(lenient->makespan_s == 12.0);
}

/* Equal durations: higher priority first, then one job's VMs together, then by name. */
static void test_evac_ties(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolEvacuation) evac = NULL;
    g_autofree char *order = NULL, *late = NULL;
    PolEvacOptions o;

    add_host(c, "src", 100000);
    add_host(c, "dst", 100000);
    add_vm(c, "z", "src", 1000, 0, NULL);
    add_vm(c, "y-j2", "src", 1000, 0, "j2");
    add_vm(c, "x-j1", "src", 1000, 0, "j1");
    add_vm(c, "w-j2", "src", 1000, 0, "j2");
    add_vm(c, "v-j1", "src", 1000, 0, "j1");
    add_vm(c, "vip", "src", 1000, 5, NULL);
    add_vm(c, "short", "src", 500, 0, NULL);
    opts_seconds(&o, 1);
    o.priority = 7;
    evac = evacuate(c, &o, NOW + 4);
    order = evac_order(evac);
    late = evac_late(evac);
    assert_string_equal(order, "short vip v-j1 x-j1 w-j2 y-j2 z");
    assert_string_equal(late, "w-j2@4.5 y-j2@5.5 z@6.5");
    for (guint i = 0; i < evac->plan->migrations->len; i++)
        assert_int_equal(((PolMigration *)g_ptr_array_index(evac->plan->migrations, i))->priority,
                         7);
}

/* Predicted duration: memory / (bandwidth - dirty rate), at least bandwidth / 10, + overhead. */
static void test_evac_predict(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    PolVmSpec dirty = {.name = "dirty",
                       .host = "src",
                       .vcpus = 4,
                       .memory_mib = 2000,
                       .cpu_util = 0.5,
                       .moved_ago_s = -1,
                       .dirty_mib_s = 500};
    PolVmSpec wild = {.name = "wild",
                      .host = "src",
                      .vcpus = 4,
                      .memory_mib = 2000,
                      .cpu_util = 0.5,
                      .moved_ago_s = -1,
                      .dirty_mib_s = 5000};
    PolVmSpec busy = {.name = "busy",
                      .host = "src",
                      .vcpus = 4,
                      .memory_mib = 2000,
                      .cpu_util = 0.5,
                      .moved_ago_s = -1};
    PolVmSpec bad = {.name = "bad",
                     .host = "src",
                     .vcpus = 4,
                     .memory_mib = 2000,
                     .cpu_util = 0.5,
                     .moved_ago_s = -1,
                     .dirty_mib_s = -1};
    g_autoptr(GError) error = NULL;
    PolEvacOptions o;

    add_host(c, "src", 100000);
    assert_true(pol_cluster_add_vm(c, &dirty, NULL));
    assert_true(pol_cluster_add_vm(c, &wild, NULL));
    assert_true(pol_cluster_add_vm(c, &busy, NULL));
    assert_false(pol_cluster_add_vm(c, &bad, &error));
    assert_string_equal(error->message, "VM 'bad': dirty_mib_s must be a number >= 0, not -1");
    pol_evac_options_init(&o);
    assert_true(o.overhead_s == POL_EVAC_OVERHEAD_S_DEFAULT && o.concurrency == 1);
    o.bandwidth_mib_s = 1000.0;
    assert_true(pol_evacuation_predict(c, "dirty", &o) == 2000.0 / 500.0 + 2.0);
    assert_true(pol_evacuation_predict(c, "wild", &o) == 2000.0 / 100.0 + 2.0);
    assert_true(pol_evacuation_predict(c, "busy", &o) == 2000.0 / 1000.0 + 2.0);
    o.dirty_mib_s_per_vcpu = 100.0; /* 4 vCPUs x 0.5 busy x 100 = 200 MiB/s */
    assert_true(pol_evacuation_predict(c, "busy", &o) == 2000.0 / 800.0 + 2.0);
    assert_true(pol_evacuation_predict(c, "dirty", &o) == 2000.0 / 500.0 + 2.0);
    assert_true(pol_evacuation_predict(c, "nope", &o) == -1.0);
}

static void test_evac_bad_input(void **state)
{
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(PolPlan) consolidate = NULL, drain = NULL;
    g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL;
    PolMigration *m;
    PolEvacOptions o;

    add_host(c, "src", 10000);
    add_host(c, "dst", 10000);
    add_vm(c, "a", "src", 1000, 0, NULL);
    add_vm(c, "b", "dst", 1000, 0, NULL);
    opts_seconds(&o, 1);
    consolidate = pol_plan_consolidate(c, NULL, NULL);
    assert_null(pol_evacuation_order(c, consolidate, &o, NOW, 0, &e1));
    assert_string_equal(e1->message,
                        "evacuation: the plan is a consolidate plan, not a drain plan");
    drain = pol_plan_drain(c, "src", NULL, NULL);
    o.concurrency = 0;
    assert_null(pol_evacuation_order(c, drain, &o, NOW, 0, &e2));
    assert_string_equal(e2->message, "evacuation: concurrency must be between 1 and 1024, not 0");
    o.concurrency = 1;
    assert_null(pol_evacuation_order(c, drain, &o, NOW, -3, &e3));
    /* A move that does not leave the drained host. */
    m = g_ptr_array_index(drain->migrations, 0);
    g_free(m->vm);
    m->vm = g_strdup("b");
    assert_null(pol_evacuation_order(c, drain, &o, NOW, 0, &e4));
    assert_string_equal(
        e4->message,
        "evacuation: step 1 (VM 'b' from 'src' to 'dst') is not a move of a VM of 'src' to another host of the cluster, once");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_book_quarantine_then_evacuate),
        cmocka_unit_test(test_book_duplicates_merged),
        cmocka_unit_test(test_book_confidence_threshold),
        cmocka_unit_test(test_book_resolved_lifts),
        cmocka_unit_test(test_book_evacuation_once),
        cmocka_unit_test(test_book_bad_events_change_nothing),
        cmocka_unit_test(test_book_alerts_per_host_limit),
        cmocka_unit_test(test_alert_strings),
        cmocka_unit_test(test_evac_one_slot_shortest_first),
        cmocka_unit_test(test_evac_packing_saves_more),
        cmocka_unit_test(test_evac_ties),
        cmocka_unit_test(test_evac_predict),
        cmocka_unit_test(test_evac_bad_input),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
