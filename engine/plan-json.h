/* Plans (PolPlan) as JSON, written and read back, or as a table for people (plan-json.c). */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/engine.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* A plan as orch_plan_format_json() writes it, read back (owned): policy, drained, migrations
 * (vm, from, to, memory_mib, duration_ms, extra), hosts and the figures; other members are
 * ignored. ORCH_ERROR_INVALID naming the field. */
PolPlan *orch_plan_parse(const char *data, gsize len, const char *name, GError **error);
/* The same from a parsed JSON value. */
PolPlan *orch_plan_parse_node(JsonNode *root, const char *name, GError **error);

/* The plan as a JSON object (owned). Without @timing, "plan_ms" is left out so that the same
 * input always gives the same bytes. */
char *orch_plan_format_json(const PolPlan *plan, gboolean pretty, gboolean timing);

/* The plan as text for people (owned). */
char *orch_plan_format_table(const PolPlan *plan);

G_END_DECLS
