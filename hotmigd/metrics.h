/* hotmigd's /metrics (docs/hotmigd.md, "Metrics"): what the daemon counts, rendered in the
 * Prometheus text exposition format 0.0.4. metrics.c only formats; the daemon fills
 * HotmigdMetrics from its parts (the cluster's statistics, the pool, the alert book). */
#pragma once

#include <glib.h>

#include "engine/engine.h"
#include "engine/hotmigd-client.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* How a migration ended: label result of hotmig_migrations_total. */
typedef enum {
    HOTMIGD_METRICS_MIGRATION_OK,
    HOTMIGD_METRICS_MIGRATION_FAILED,
    HOTMIGD_METRICS_MIGRATION_SKIPPED,
    HOTMIGD_METRICS_MIGRATION_LAST,
} HotmigdMetricsMigration;

HM_ENUM_DECL(hotmigd_metrics_migration, HotmigdMetricsMigration) /* "ok", "failed", "skipped" */

/* What an alert event received by this daemon led to: label action of hotmig_alerts_total.
 * One per event: the book's action when it asked for one, else why nothing happened. */
typedef enum {
    ORCH_ALERT_OUTCOME_QUARANTINE, /* the host was quarantined */
    ORCH_ALERT_OUTCOME_EVACUATE,   /* its evacuation was started */
    ORCH_ALERT_OUTCOME_LIFT,       /* it is ok again */
    ORCH_ALERT_OUTCOME_NONE,       /* recorded; nothing to do (the state holds already) */
    ORCH_ALERT_OUTCOME_MERGED,     /* a repeat or update of an active alert, nothing to do */
    ORCH_ALERT_OUTCOME_IGNORED,    /* below the confidence threshold */
    ORCH_ALERT_OUTCOME_FORWARDED,  /* handed to the daemon responsible for the host */
    ORCH_ALERT_OUTCOME_REJECTED,   /* invalid, unknown host, or no daemon took it */
    ORCH_ALERT_OUTCOME_HELD,       /* held back: [alerts] max-unavailable hosts are held */
    ORCH_ALERT_OUTCOME_LAST,
} OrchAlertOutcome;

HM_ENUM_DECL(orch_alert_outcome, OrchAlertOutcome)

typedef struct {
    guint64 migrations[HOTMIGD_METRICS_MIGRATION_LAST];
    double phase_seconds_sum[ORCH_PHASE_LAST];
    guint64 phase_count[ORCH_PHASE_LAST];
    gboolean have_vfs;   /* FALSE: the pool was not counted; hotmig_vf_leases is left out */
    const char *vfs_why; /* !have_vfs: why, one comment line (borrowed; NULL: no comment) */
    guint vfs[ORCH_VF_STATE_LAST];
    guint hosts[POL_HOST_STATE_LAST];
    guint64 alerts[ORCH_ALERT_OUTCOME_LAST];
} HotmigdMetrics;

#define HOTMIGD_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* @metrics in the text format (owned): every family with HELP and TYPE, every label value
 * present, also when 0, in a fixed order; without VF counts, hotmig_vf_leases has no samples
 * and, with a vfs_why, the comment "# hotmig_vf_leases left out: WHY". */
char *hotmigd_metrics_render(const HotmigdMetrics *metrics);

/* /metrics' text (taken), answered later: the listener waits for the pool's count. */
typedef void (*HotmigdMetricsDone)(char *text, gpointer data);

G_END_DECLS
