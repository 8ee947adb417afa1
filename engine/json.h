/* Small helpers for the JSON the engine prints (json-glib's builder, one call a member) and
 * reads. */
#pragma once

#include <json-glib/json-glib.h>

/* The string member @name of @obj (borrowed), or NULL when @obj is NULL, the member is missing
 * or is not a string. Safe on hostile input. */
static inline const char *orch_json_get_string(JsonObject *obj, const char *name)
{
    JsonNode *node = obj ? json_object_get_member(obj, name) : NULL;

    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return NULL;
    return json_node_get_string(node);
}

/* "name": "value", or "name": null when @value is NULL. */
static inline void orch_json_member_string(JsonBuilder *b, const char *name, const char *value)
{
    json_builder_set_member_name(b, name);
    if (value)
        json_builder_add_string_value(b, value);
    else
        json_builder_add_null_value(b);
}

static inline void orch_json_member_int(JsonBuilder *b, const char *name, gint64 value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_int_value(b, value);
}

static inline void orch_json_member_bool(JsonBuilder *b, const char *name, gboolean value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_boolean_value(b, value);
}

static inline void orch_json_member_double(JsonBuilder *b, const char *name, double value)
{
    json_builder_set_member_name(b, name);
    json_builder_add_double_value(b, value);
}

/* "name": "2026-01-02T03:04:05Z", the ISO-8601 UTC time of @unix_s, or "name": null when
 * @unix_s is 0 or before (never set) or beyond what GDateTime holds. */
static inline void orch_json_member_time(JsonBuilder *b, const char *name, gint64 unix_s)
{
    g_autoptr(GDateTime) t = unix_s > 0 ? g_date_time_new_from_unix_utc(unix_s) : NULL;
    g_autofree char *text = t ? g_date_time_format_iso8601(t) : NULL;

    orch_json_member_string(b, name, text);
}
