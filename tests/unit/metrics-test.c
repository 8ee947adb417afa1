/* hotmigd's /metrics (hotmigd/metrics.c): the whole text for one set of values, checked
 * line for line against the Prometheus text format 0.0.4 as written by hand; every family
 * present with zeros; numbers in the C locale. */
#include <locale.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "hotmigd/metrics.h"

static const char expected[] =
    "# HELP hotmig_migrations_total Migrations run by this hotmigd's scheduler, by how they ended.\n"
    "# TYPE hotmig_migrations_total counter\n"
    "hotmig_migrations_total{result=\"ok\"} 12\n"
    "hotmig_migrations_total{result=\"failed\"} 1\n"
    "hotmig_migrations_total{result=\"skipped\"} 0\n"
    "# HELP hotmig_phase_duration_seconds Time the migrations spent in each phase.\n"
    "# TYPE hotmig_phase_duration_seconds summary\n"
    "hotmig_phase_duration_seconds_sum{phase=\"connect\"} 0.25\n"
    "hotmig_phase_duration_seconds_count{phase=\"connect\"} 13\n"
    "hotmig_phase_duration_seconds_sum{phase=\"inspect\"} 0\n"
    "hotmig_phase_duration_seconds_count{phase=\"inspect\"} 0\n"
    "hotmig_phase_duration_seconds_sum{phase=\"target-vf\"} 0\n"
    "hotmig_phase_duration_seconds_count{phase=\"target-vf\"} 0\n"
    "hotmig_phase_duration_seconds_sum{phase=\"prepare\"} 0\n"
    "hotmig_phase_duration_seconds_count{phase=\"prepare\"} 0\n"
    "hotmig_phase_duration_seconds_sum{phase=\"unplug\"} 0\n"
    "hotmig_phase_duration_seconds_count{phase=\"unplug\"} 0\n"
    "hotmig_phase_duration_seconds_sum{phase=\"migrate\"} 1234.5678\n"
    "hotmig_phase_duration_seconds_count{phase=\"migrate\"} 12\n"
    "hotmig_phase_duration_seconds_sum{phase=\"plug\"} 0\n"
    "hotmig_phase_duration_seconds_count{phase=\"plug\"} 0\n"
    "hotmig_phase_duration_seconds_sum{phase=\"resume\"} 1e-06\n"
    "hotmig_phase_duration_seconds_count{phase=\"resume\"} 1\n"
    "# HELP hotmig_vf_leases VFs of this host's pool, by state.\n"
    "# TYPE hotmig_vf_leases gauge\n"
    "hotmig_vf_leases{state=\"free\"} 60\n"
    "hotmig_vf_leases{state=\"leased\"} 1\n"
    "hotmig_vf_leases{state=\"assigned\"} 2\n"
    "hotmig_vf_leases{state=\"in-use\"} 0\n"
    "hotmig_vf_leases{state=\"missing\"} 1\n"
    "# HELP hotmig_hosts Hosts of the cluster ([host NAME] groups), by state as this hotmigd sees them.\n"
    "# TYPE hotmig_hosts gauge\n"
    "hotmig_hosts{state=\"ok\"} 3\n"
    "hotmig_hosts{state=\"quarantined\"} 0\n"
    "hotmig_hosts{state=\"evacuating\"} 1\n"
    "hotmig_hosts{state=\"down\"} 1\n"
    "# HELP hotmig_alerts_total Alert events this hotmigd handled (from its inputs, or forwarded to it), by what they led to.\n"
    "# TYPE hotmig_alerts_total counter\n"
    "hotmig_alerts_total{action=\"quarantine\"} 0\n"
    "hotmig_alerts_total{action=\"evacuate\"} 1\n"
    "hotmig_alerts_total{action=\"lift\"} 0\n"
    "hotmig_alerts_total{action=\"none\"} 0\n"
    "hotmig_alerts_total{action=\"merged\"} 18446744073709551615\n"
    "hotmig_alerts_total{action=\"ignored\"} 0\n"
    "hotmig_alerts_total{action=\"forwarded\"} 2\n"
    "hotmig_alerts_total{action=\"rejected\"} 4\n"
    "hotmig_alerts_total{action=\"held\"} 0\n";

static HotmigdMetrics sample(void)
{
    HotmigdMetrics m = {0};

    m.migrations[HOTMIGD_METRICS_MIGRATION_OK] = 12;
    m.migrations[HOTMIGD_METRICS_MIGRATION_FAILED] = 1;
    m.phase_seconds_sum[ORCH_PHASE_CONNECT] = 0.25;
    m.phase_count[ORCH_PHASE_CONNECT] = 13;
    m.phase_seconds_sum[ORCH_PHASE_MIGRATE] = 1234.5678;
    m.phase_count[ORCH_PHASE_MIGRATE] = 12;
    m.phase_seconds_sum[ORCH_PHASE_RESUME] = 0.000001;
    m.phase_count[ORCH_PHASE_RESUME] = 1;
    m.have_vfs = TRUE;
    m.vfs[ORCH_VF_STATE_FREE] = 60;
    m.vfs[ORCH_VF_STATE_LEASED] = 1;
    m.vfs[ORCH_VF_STATE_ASSIGNED] = 2;
    m.vfs[ORCH_VF_STATE_MISSING] = 1;
    m.hosts[POL_HOST_OK] = 3;
    m.hosts[POL_HOST_EVACUATING] = 1;
    m.hosts[POL_HOST_DOWN] = 1;
    m.alerts[ORCH_ALERT_OUTCOME_EVACUATE] = 1;
    m.alerts[ORCH_ALERT_OUTCOME_MERGED] = G_MAXUINT64;
    m.alerts[ORCH_ALERT_OUTCOME_FORWARDED] = 2;
    m.alerts[ORCH_ALERT_OUTCOME_REJECTED] = 4;
    return m;
}

/* Line by line, so that a difference names its line. */
static void assert_text(const char *text, const char *want)
{
    g_auto(GStrv) got_lines = g_strsplit(text, "\n", -1);
    g_auto(GStrv) want_lines = g_strsplit(want, "\n", -1);

    for (guint i = 0; got_lines[i] || want_lines[i]; i++) {
        if (!got_lines[i] || !want_lines[i] || strcmp(got_lines[i], want_lines[i]) != 0)
            fail_msg("line %u: '%s', expected '%s'", i + 1, got_lines[i] ? got_lines[i] : "(end)",
                     want_lines[i] ? want_lines[i] : "(end)");
    }
}

static void test_render(void **state)
{
    HotmigdMetrics m = sample();
    g_autofree char *text = hotmigd_metrics_render(&m);

    assert_text(text, expected);
}

/* A locale with a decimal comma changes nothing. */
static void test_locale(void **state)
{
    HotmigdMetrics m = sample();
    char *saved = g_strdup(setlocale(LC_NUMERIC, NULL));
    char *text;

    /* tests/install-deps generates de_DE.UTF-8: without it this case would test nothing. */
    if (!setlocale(LC_NUMERIC, "de_DE.UTF-8") && !setlocale(LC_NUMERIC, "fr_FR.UTF-8")) {
        g_free(saved);
        fail_msg("no decimal-comma locale (de_DE.UTF-8, fr_FR.UTF-8): run tests/install-deps");
    }
    text = hotmigd_metrics_render(&m);
    setlocale(LC_NUMERIC, saved);
    g_free(saved);
    assert_text(text, expected);
    g_free(text);
}

/* The pool could not be listed: the family is there, without samples (absent, not 0). */
static void test_no_vfs(void **state)
{
    HotmigdMetrics m = sample();
    g_autofree char *text = NULL;

    m.have_vfs = FALSE;
    text = hotmigd_metrics_render(&m);
    assert_non_null(strstr(text, "# TYPE hotmig_vf_leases gauge\n# HELP hotmig_hosts"));
    assert_null(strstr(text, "hotmig_vf_leases{"));
}

/* Why the VFs were not counted: one comment line after the family's TYPE, whatever the message
 * holds (an error from libvirt may span lines). */
static void test_no_vfs_why(void **state)
{
    HotmigdMetrics m = sample();
    g_autofree char *text = NULL;

    m.have_vfs = FALSE;
    m.vfs_why = "cannot list the pool: libvirt said\nno\r\tat all";
    text = hotmigd_metrics_render(&m);
    assert_non_null(strstr(text, "# TYPE hotmig_vf_leases gauge\n"
                                 "# hotmig_vf_leases left out: cannot list the pool: libvirt said "
                                 "no  at all\n"
                                 "# HELP hotmig_hosts"));
    assert_null(strstr(text, "hotmig_vf_leases{"));
    /* Counted: no comment, whatever vfs_why says. */
    m.have_vfs = TRUE;
    g_free(text);
    text = hotmigd_metrics_render(&m);
    assert_null(strstr(text, "left out"));
}

/* Every sample line is NAME{LABEL="VALUE"} NUMBER; every family has HELP then TYPE. */
static void test_syntax(void **state)
{
    HotmigdMetrics m = sample();
    g_autofree char *text = hotmigd_metrics_render(&m);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autoptr(GRegex) sample_re = g_regex_new(
        "^hotmig_[a-z_]+\\{[a-z]+=\"[a-z-]+\"\\} ([0-9]+|[0-9.]+(e-?[0-9]+)?)$", 0, 0, NULL);
    guint helps = 0, types = 0, samples = 0;

    for (guint i = 0; lines[i] && *lines[i]; i++) {
        if (g_str_has_prefix(lines[i], "# HELP "))
            helps++;
        else if (g_str_has_prefix(lines[i], "# TYPE "))
            types++;
        else if (g_regex_match(sample_re, lines[i], 0, NULL))
            samples++;
        else
            fail_msg("not a sample line: '%s'", lines[i]);
    }
    assert_int_equal(helps, 5);
    assert_int_equal(types, 5);
    assert_int_equal(samples, HOTMIGD_METRICS_MIGRATION_LAST + 2 * ORCH_PHASE_LAST +
                                  ORCH_VF_STATE_LAST + POL_HOST_STATE_LAST +
                                  ORCH_ALERT_OUTCOME_LAST);
    assert_true(g_str_has_suffix(text, "\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_locale),
        cmocka_unit_test(test_no_vfs),
        cmocka_unit_test(test_no_vfs_why),
        cmocka_unit_test(test_syntax),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
