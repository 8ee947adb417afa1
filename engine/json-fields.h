/* Typed members of the JSON that the snapshot and plan formats are read from (json-fields.c):
 * each reader checks the member's type and range and names the input and the field when it
 * refuses ("snapshot 'x.json': vms[3].memory_mib: must be ..."), ORCH_ERROR_INVALID. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "engine/engine.h"

G_BEGIN_DECLS

/* One object of the input: @name the input, @where the object ("hosts[3]"; NULL at the top
 * when @what is given), @obj the object (NULL: every member absent). Errors say
 * "snapshot 'NAME': WHERE.FIELD: ...", or "WHAT: WHERE.FIELD: ..." when @what is given (the
 * alert parser's "webhook", "event"). */
typedef struct {
    const char *name;
    const char *where;
    JsonObject *obj;
    const char *what;
} OrchJsonItem;

/* json-glib's parser recurses: every reader of JSON from outside checks the nesting first
 * (hm_json_check_depth()), as an error "WHAT: JSON nests deeper than N levels at byte B"
 * (ORCH_ERROR_INVALID). */
gboolean orch_json_check_depth(const char *data, gsize len, const char *what, guint max_depth,
                               GError **error);

/* Always FALSE: @error says what is wrong with @field of @it. */
gboolean orch_json_item_bad(const OrchJsonItem *it, const char *field, GError **error,
                            const char *fmt, ...) G_GNUC_PRINTF(4, 5);

/* The member @field, or NULL when absent or null (or it->obj is NULL) (borrowed). */
JsonNode *orch_json_item_member(const OrchJsonItem *it, const char *field);

/* A string (borrowed; NULL when absent and not @required). */
gboolean orch_json_item_string(const OrchJsonItem *it, const char *field, gboolean required,
                               const char **ret, GError **error);

/* An object (borrowed; NULL when absent and not @required). */
gboolean orch_json_item_object(const OrchJsonItem *it, const char *field, gboolean required,
                               JsonObject **ret, GError **error);

/* An integer in @min..@max (@def when absent and not @required). */
gboolean orch_json_item_int(const OrchJsonItem *it, const char *field, gboolean required,
                            gint64 min, gint64 max, gint64 def, gint64 *ret, GError **error);

/* A number in 0..1 (@def when absent). */
gboolean orch_json_item_fraction(const OrchJsonItem *it, const char *field, double def, double *ret,
                                 GError **error);

/* A finite number (@def when absent). */
gboolean orch_json_item_double(const OrchJsonItem *it, const char *field, double def, double *ret,
                               GError **error);

/* true or false (FALSE when absent). */
gboolean orch_json_item_bool(const OrchJsonItem *it, const char *field, gboolean *ret,
                             GError **error);

/* The array member @field of @root, each element an object (borrowed). */
JsonArray *orch_json_objects(JsonObject *root, const char *field, const char *name, GError **error);

/* Refuses a member of @it not in @known (NULL-terminated), suggesting the nearest known one
 * ("unknown member (did you mean \"pinned\"?)"): a misspelt member must not be ignored. */
gboolean orch_json_item_known(const OrchJsonItem *it, const char *const *known, GError **error);

/* Always FALSE: @pol_error (taken; a policies error: unknown host, duplicate name, ...) with
 * the input and the item in front. */
gboolean orch_json_item_wrap(GError *pol_error, const OrchJsonItem *it, GError **error);

G_END_DECLS
