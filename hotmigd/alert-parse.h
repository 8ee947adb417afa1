/* The inputs of the failure-prediction hook, read into PolAlertEvents (docs/alerts.md):
 * - the Prometheus Alertmanager webhook (version 4), the body of a POST:
 *     {"version":"4","status":"firing","alerts":[{"status":"firing|resolved",
 *      "labels":{...},"annotations":{...},"startsAt","endsAt","fingerprint"}],...}
 * - one line of our own event format, what an exec'd command prints and what the Unix socket
 *   takes:
 *     {"host":"h1","severity":"evacuate","confidence":0.9,"deadline":1767225600,
 *      "key":"smart-sda","resolved":false}
 * Whether the host is one of ours is the caller's business; an empty host is refused. */
#pragma once

#include <glib.h>

#include "engine/engine.h"
#include "policies/policies.h"

G_BEGIN_DECLS

#define ORCH_ALERT_WEBHOOK_MAX_BYTES (1024 * 1024)  /* a webhook body */
#define ORCH_ALERT_LINE_MAX_BYTES (64 * 1024)       /* an event line, its newline included */
#define ORCH_ALERT_MAX_ALERTS 1000                  /* alerts in one webhook body */
#define ORCH_ALERT_MAX_DEPTH 16                     /* nesting of arrays and objects */
#define ORCH_ALERT_DEADLINE_MAX_S (366 * 24 * 3600) /* "in N seconds": at most a year */

/* Where the webhook's alerts say what they are about. NULL members take the defaults. */
typedef struct {
    const char *host_label;     /* NULL: "instance", else "host"; a ":port" is stripped */
    const char *severity_label; /* NULL: "hotmig_action", else "severity" */
    const char *confidence;     /* NULL: "hotmig_confidence": a label, else an annotation */
    const char *deadline;       /* NULL: annotation "hotmig_deadline", else "deadline" */
} OrchAlertOptions;

/* Parses an Alertmanager webhook body (@len bytes, need not be NUL-terminated) received at
 * unix time @now. Returns the events (PolAlertEvent, owned), one per alert in order, source
 * "alertmanager", key the fingerprint; or NULL with ORCH_ERROR_INVALID naming the field, e.g.
 * "webhook: alerts[3].labels.instance: missing (and no labels.host)". One bad alert rejects
 * the whole body: nothing of it is to be applied. @opts may be NULL. */
GPtrArray *orch_alert_webhook_parse(const char *data, gsize len, const OrchAlertOptions *opts,
                                    gint64 now, GError **error);

/* Parses one event line (a trailing newline is allowed) from @source ("exec:NAME",
 * "socket") received at unix time @now. The key defaults to @source. Returns the event
 * (owned) or NULL with ORCH_ERROR_INVALID naming the field, e.g. "event: severity: must be
 * quarantine, evacuate or urgent, not 'high'". */
PolAlertEvent *orch_alert_line_parse(const char *data, gsize len, const char *source, gint64 now,
                                     GError **error);

G_END_DECLS
