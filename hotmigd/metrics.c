/* hotmigd's /metrics in the Prometheus text exposition format 0.0.4: "# HELP", "# TYPE", then
 * one sample a line, name{label="value"} number. Numbers in the C locale; label values
 * escaped (backslash, double quote, newline), although ours are fixed words. */
#include "hotmigd/metrics.h"

#include <math.h>

HM_ENUM_IMPL(hotmigd_metrics_migration, HotmigdMetricsMigration, HOTMIGD_METRICS_MIGRATION_LAST,
             "ok", "failed", "skipped")
HM_ENUM_IMPL(orch_alert_outcome, OrchAlertOutcome, ORCH_ALERT_OUTCOME_LAST, "quarantine",
             "evacuate", "lift", "none", "merged", "ignored", "forwarded", "rejected", "held")

static void family(GString *out, const char *name, const char *type, const char *help)
{
    g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* "# PREFIXTEXT" on one line: control characters of @text (an error message) become spaces. */
static void comment(GString *out, const char *prefix, const char *text)
{
    g_string_append_printf(out, "# %s", prefix);
    for (const char *p = text; *p; p++)
        g_string_append_c(out, g_ascii_iscntrl(*p) ? ' ' : *p);
    g_string_append_c(out, '\n');
}

static void label_value(GString *out, const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"')
            g_string_append_c(out, '\\');
        if (*p == '\n')
            g_string_append(out, "\\n");
        else
            g_string_append_c(out, *p);
    }
}

static void sample_start(GString *out, const char *name, const char *label, const char *value)
{
    g_string_append_printf(out, "%s{%s=\"", name, label);
    label_value(out, value);
    g_string_append(out, "\"} ");
}

static void sample_uint(GString *out, const char *name, const char *label, const char *value,
                        guint64 n)
{
    sample_start(out, name, label, value);
    g_string_append_printf(out, "%" G_GUINT64_FORMAT "\n", n);
}

/* @x in the C locale with the fewest digits that read back as @x: 1e-06, not
 * 9.9999999999999995e-07. */
static const char *shortest(char *buf, gsize size, double x)
{
    static const char *const formats[] = {"%.15g", "%.16g", "%.17g"};

    for (guint i = 0; i < G_N_ELEMENTS(formats); i++) {
        g_ascii_formatd(buf, size, formats[i], x);
        if (g_ascii_strtod(buf, NULL) == x)
            break;
    }
    return buf;
}

static void sample_double(GString *out, const char *name, const char *label, const char *value,
                          double x)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE];

    sample_start(out, name, label, value);
    if (isnan(x))
        g_string_append(out, "NaN\n");
    else if (isinf(x))
        g_string_append(out, x > 0 ? "+Inf\n" : "-Inf\n");
    else
        g_string_append_printf(out, "%s\n", shortest(buf, sizeof(buf), x));
}

char *hotmigd_metrics_render(const HotmigdMetrics *m)
{
    GString *out = g_string_new(NULL);

    g_return_val_if_fail(m != NULL, NULL);

    family(out, "hotmig_migrations_total", "counter",
           "Migrations run by this hotmigd's scheduler, by how they ended.");
    for (int r = 0; r < HOTMIGD_METRICS_MIGRATION_LAST; r++)
        sample_uint(out, "hotmig_migrations_total", "result",
                    hotmigd_metrics_migration_to_string(r), m->migrations[r]);

    family(out, "hotmig_phase_duration_seconds", "summary",
           "Time the migrations spent in each phase.");
    for (int p = 0; p < ORCH_PHASE_LAST; p++) {
        sample_double(out, "hotmig_phase_duration_seconds_sum", "phase", orch_phase_to_string(p),
                      m->phase_seconds_sum[p]);
        sample_uint(out, "hotmig_phase_duration_seconds_count", "phase", orch_phase_to_string(p),
                    m->phase_count[p]);
    }

    family(out, "hotmig_vf_leases", "gauge", "VFs of this host's pool, by state.");
    for (int s = 0; m->have_vfs && s < ORCH_VF_STATE_LAST; s++)
        sample_uint(out, "hotmig_vf_leases", "state", orch_vf_state_to_string(s), m->vfs[s]);
    if (!m->have_vfs && m->vfs_why)
        comment(out, "hotmig_vf_leases left out: ", m->vfs_why);

    family(out, "hotmig_hosts", "gauge",
           "Hosts of the cluster ([host NAME] groups), by state as this hotmigd sees them.");
    for (int s = 0; s < POL_HOST_STATE_LAST; s++)
        sample_uint(out, "hotmig_hosts", "state", pol_host_state_to_string(s), m->hosts[s]);

    family(
        out, "hotmig_alerts_total", "counter",
        "Alert events this hotmigd handled (from its inputs, or forwarded to it), by what they led to.");
    for (int a = 0; a < ORCH_ALERT_OUTCOME_LAST; a++)
        sample_uint(out, "hotmig_alerts_total", "action", orch_alert_outcome_to_string(a),
                    m->alerts[a]);
    return g_string_free(out, FALSE);
}
