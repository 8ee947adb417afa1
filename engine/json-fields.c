/* Reading the snapshot and plan formats' JSON: typed members with their limits, errors
 * naming the input and the field (json-fields.h). */
#include "engine/json-fields.h"

#include <math.h>
#include <string.h>

gboolean orch_json_check_depth(const char *data, gsize len, const char *what, guint max_depth,
                               GError **error)
{
    g_autoptr(GError) local = NULL;

    if (hm_json_check_depth(data, (gssize)len, max_depth, &local))
        return TRUE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "%s: %s", what, local->message);
    return FALSE;
}

gboolean orch_json_item_bad(const OrchJsonItem *it, const char *field, GError **error,
                            const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (it->what)
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "%s: %s%s%s: %s", it->what,
                    it->where ? it->where : "", it->where ? "." : "", field, msg);
    else
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': %s.%s: %s", it->name,
                    it->where, field, msg);
    return FALSE;
}

/* The orch_json_item_member @field, or NULL when absent or null. */
JsonNode *orch_json_item_member(const OrchJsonItem *it, const char *field)
{
    JsonNode *node = it->obj ? json_object_get_member(it->obj, field) : NULL;

    return node && !JSON_NODE_HOLDS_NULL(node) ? node : NULL;
}

gboolean orch_json_item_string(const OrchJsonItem *it, const char *field, gboolean required,
                               const char **ret, GError **error)
{
    JsonNode *node = orch_json_item_member(it, field);

    if (!node) {
        if (required)
            return orch_json_item_bad(it, field, error, "missing");
        *ret = NULL;
        return TRUE;
    }
    if (json_node_get_value_type(node) != G_TYPE_STRING)
        return orch_json_item_bad(it, field, error, "must be a string");
    *ret = json_node_get_string(node);
    return TRUE;
}

gboolean orch_json_item_object(const OrchJsonItem *it, const char *field, gboolean required,
                               JsonObject **ret, GError **error)
{
    JsonNode *node = orch_json_item_member(it, field);

    if (!node) {
        if (required)
            return orch_json_item_bad(it, field, error, "missing");
        *ret = NULL;
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_OBJECT(node))
        return orch_json_item_bad(it, field, error, "must be an object");
    *ret = json_node_get_object(node);
    return TRUE;
}

gboolean orch_json_item_int(const OrchJsonItem *it, const char *field, gboolean required,
                            gint64 min, gint64 max, gint64 def, gint64 *ret, GError **error)
{
    JsonNode *node = orch_json_item_member(it, field);
    gint64 v;

    if (!node) {
        if (required)
            return orch_json_item_bad(it, field, error, "missing");
        *ret = def;
        return TRUE;
    }
    if (json_node_get_value_type(node) != G_TYPE_INT64)
        return orch_json_item_bad(
            it, field, error,
            "must be an integer between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT, min, max);
    v = json_node_get_int(node);
    if (v < min || v > max)
        return orch_json_item_bad(it, field, error,
                                  "must be between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT
                                  ", not %" G_GINT64_FORMAT,
                                  min, max, v);
    *ret = v;
    return TRUE;
}

gboolean orch_json_item_fraction(const OrchJsonItem *it, const char *field, double def, double *ret,
                                 GError **error)
{
    JsonNode *node = orch_json_item_member(it, field);
    GType type;
    double v;

    if (!node) {
        *ret = def;
        return TRUE;
    }
    type = json_node_get_value_type(node);
    if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
        return orch_json_item_bad(it, field, error, "must be a number between 0 and 1");
    v = type == G_TYPE_DOUBLE ? json_node_get_double(node) : (double)json_node_get_int(node);
    if (!isfinite(v) || v < 0.0 || v > 1.0)
        return orch_json_item_bad(it, field, error, "must be between 0 and 1, not %g", v);
    *ret = v;
    return TRUE;
}

gboolean orch_json_item_bool(const OrchJsonItem *it, const char *field, gboolean *ret,
                             GError **error)
{
    JsonNode *node = orch_json_item_member(it, field);

    *ret = FALSE;
    if (!node)
        return TRUE;
    if (json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return orch_json_item_bad(it, field, error, "must be true or false");
    *ret = json_node_get_boolean(node);
    return TRUE;
}

/* The array orch_json_item_member @field of the root, each element an object. */
JsonArray *orch_json_objects(JsonObject *root, const char *field, const char *name, GError **error)
{
    JsonNode *node = json_object_get_member(root, field);
    JsonArray *array;

    if (!node || !JSON_NODE_HOLDS_ARRAY(node)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': %s: %s", name, field,
                    node ? "must be an array of objects" : "missing");
        return NULL;
    }
    array = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(array); i++) {
        if (!JSON_NODE_HOLDS_OBJECT(json_array_get_element(array, i))) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                        "snapshot '%s': %s[%u]: must be an object", name, field, i);
            return NULL;
        }
    }
    return array;
}

/* A policies error (unknown host, duplicate name, ...) with the snapshot and item in front. */
gboolean orch_json_item_wrap(GError *pol_error, const OrchJsonItem *it, GError **error)
{
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': %s: %s", it->name, it->where,
                pol_error->message);
    g_error_free(pol_error);
    return FALSE;
}

gboolean orch_json_item_double(const OrchJsonItem *it, const char *field, double def, double *ret,
                               GError **error)
{
    JsonNode *node = orch_json_item_member(it, field);
    GType type;

    if (!node) {
        *ret = def;
        return TRUE;
    }
    type = json_node_get_value_type(node);
    if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
        return orch_json_item_bad(it, field, error, "must be a number");
    *ret = type == G_TYPE_DOUBLE ? json_node_get_double(node) : (double)json_node_get_int(node);
    if (!isfinite(*ret))
        return orch_json_item_bad(it, field, error, "must be a finite number");
    return TRUE;
}

/* Levenshtein distance of two short strings, capped: "pined" is 1 from "pinned". */
static guint edit_distance(const char *a, const char *b)
{
    gsize la = strlen(a), lb = strlen(b);
    guint row[33];

    if (la > 32 || lb > 32)
        return G_MAXUINT;
    for (gsize j = 0; j <= lb; j++)
        row[j] = (guint)j;
    for (gsize i = 1; i <= la; i++) {
        guint diag = row[0];

        row[0] = (guint)i;
        for (gsize j = 1; j <= lb; j++) {
            guint up = row[j];

            row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), diag + (a[i - 1] != b[j - 1]));
            diag = up;
        }
    }
    return row[lb];
}

gboolean orch_json_item_known(const OrchJsonItem *it, const char *const *known, GError **error)
{
    g_autoptr(GList) names = json_object_get_members(it->obj);

    for (GList *l = names; l; l = l->next) {
        const char *field = l->data;
        const char *near = NULL;
        g_autofree char *list = NULL;

        if (g_strv_contains(known, field))
            continue;
        for (guint i = 0; known[i] && !near; i++) {
            if (edit_distance(field, known[i]) <= (strlen(field) >= 6 ? 2u : 1u))
                near = known[i];
        }
        if (near)
            return orch_json_item_bad(it, field, error, "unknown member (did you mean \"%s\"?)",
                                      near);
        list = g_strjoinv(", ", (char **)known);
        return orch_json_item_bad(it, field, error, "unknown member (known: %s)", list);
    }
    return TRUE;
}
