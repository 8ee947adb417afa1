/* Cluster snapshots (JSON, read with json-glib) and plans formatted as JSON or a table. */
#include "engine/snapshot.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

/* ---- reading ----------------------------------------------------------------------------- */

/* json-glib's parser recurses: refuse deep nesting before it sees the input. */
static gboolean check_depth(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(GError) local = NULL;

    if (hm_json_check_depth(data, (gssize)len, ORCH_SNAPSHOT_MAX_DEPTH, &local))
        return TRUE;
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': %s", name, local->message);
    return FALSE;
}

typedef struct {
    const char *name;   /* the snapshot */
    const char *where;  /* "hosts[3]" */
    JsonObject *obj;
} Item;

static gboolean bad(const Item *it, const char *field, GError **error, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

static gboolean bad(const Item *it, const char *field, GError **error, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': %s.%s: %s", it->name,
                it->where, field, msg);
    return FALSE;
}

/* The member @field, or NULL when absent or null. */
static JsonNode *member(const Item *it, const char *field)
{
    JsonNode *node = json_object_get_member(it->obj, field);

    return node && !JSON_NODE_HOLDS_NULL(node) ? node : NULL;
}

static gboolean get_string(const Item *it, const char *field, gboolean required,
                           const char **ret, GError **error)
{
    JsonNode *node = member(it, field);

    if (!node) {
        if (required)
            return bad(it, field, error, "missing");
        *ret = NULL;
        return TRUE;
    }
    if (json_node_get_value_type(node) != G_TYPE_STRING)
        return bad(it, field, error, "must be a string");
    *ret = json_node_get_string(node);
    return TRUE;
}

static gboolean get_int(const Item *it, const char *field, gboolean required, gint64 min,
                        gint64 max, gint64 def, gint64 *ret, GError **error)
{
    JsonNode *node = member(it, field);
    gint64 v;

    if (!node) {
        if (required)
            return bad(it, field, error, "missing");
        *ret = def;
        return TRUE;
    }
    if (json_node_get_value_type(node) != G_TYPE_INT64)
        return bad(it, field, error, "must be an integer between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT,
                   min, max);
    v = json_node_get_int(node);
    if (v < min || v > max)
        return bad(it, field, error, "must be between %" G_GINT64_FORMAT " and %" G_GINT64_FORMAT ", not %" G_GINT64_FORMAT,
                   min, max, v);
    *ret = v;
    return TRUE;
}

static gboolean get_fraction(const Item *it, const char *field, double def, double *ret,
                             GError **error)
{
    JsonNode *node = member(it, field);
    GType type;
    double v;

    if (!node) {
        *ret = def;
        return TRUE;
    }
    type = json_node_get_value_type(node);
    if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
        return bad(it, field, error, "must be a number between 0 and 1");
    v = type == G_TYPE_DOUBLE ? json_node_get_double(node) : (double)json_node_get_int(node);
    if (!isfinite(v) || v < 0.0 || v > 1.0)
        return bad(it, field, error, "must be between 0 and 1, not %g", v);
    *ret = v;
    return TRUE;
}

static gboolean get_bool(const Item *it, const char *field, gboolean *ret, GError **error)
{
    JsonNode *node = member(it, field);

    *ret = FALSE;
    if (!node)
        return TRUE;
    if (json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return bad(it, field, error, "must be true or false");
    *ret = json_node_get_boolean(node);
    return TRUE;
}

/* The array member @field of the root, each element an object. */
static JsonArray *get_objects(JsonObject *root, const char *field, const char *name,
                              GError **error)
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
static gboolean wrap(GError *pol_error, const Item *it, GError **error)
{
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': %s: %s", it->name,
                it->where, pol_error->message);
    g_error_free(pol_error);
    return FALSE;
}

/* The members each object may have: what the reader takes, and what hotmigd's snapshot export
 * (GET /v1/snapshot) adds for people (state_reason, running_vms, cpu_measured, taken, took_ms,
 * warnings). Anything else is refused: a misspelt "pined" would otherwise move a pinned VM. */
static const char *const top_members[] = {"hosts", "vms", "taken", "took_ms", "warnings", NULL};
static const char *const host_members[] = {"name",     "cpus",  "memory_mib",   "vfs",
                                           "vfs_free", "state", "vf_model",     "state_reason",
                                           "running_vms", NULL};
static const char *const vm_members[] = {"name", "host",     "vcpus",  "memory_mib",
                                         "cpu_util", "cpu_measured", "vfs", "vf_model",
                                         "job",  "pinned",   "moved_ago_s", NULL};

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

static gboolean known_members(const Item *it, const char *const *known, GError **error)
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
            return bad(it, field, error, "unknown member (did you mean \"%s\"?)", near);
        list = g_strjoinv(", ", (char **)known);
        return bad(it, field, error, "unknown member (known: %s)", list);
    }
    return TRUE;
}

static gboolean parse_host(PolCluster *c, const Item *it, GError **error)
{
    const char *name, *state_str, *model;
    gint64 cpus, memory, vfs, vfs_free;
    int state = POL_HOST_OK;
    GError *perr = NULL;

    if (!known_members(it, host_members, error) || !get_string(it, "name", TRUE, &name, error) ||
        !get_int(it, "cpus", TRUE, 0, POL_CPUS_MAX, 0, &cpus, error) ||
        !get_int(it, "memory_mib", TRUE, 0, (gint64)POL_MEMORY_MIB_MAX, 0, &memory, error) ||
        !get_int(it, "vfs", FALSE, 0, POL_VFS_MAX, 0, &vfs, error) ||
        !get_int(it, "vfs_free", FALSE, 0, POL_VFS_MAX, -1, &vfs_free, error) ||
        !get_string(it, "vf_model", FALSE, &model, error) ||
        !get_string(it, "state", FALSE, &state_str, error))
        return FALSE;
    if (state_str && (state = pol_host_state_from_string(state_str)) < 0)
        return bad(it, "state", error, "must be ok, quarantined, evacuating or down, not '%s'",
                   state_str);
    if (vfs_free > vfs)
        return bad(it, "vfs_free", error, "must be at most vfs (%" G_GINT64_FORMAT "), not %" G_GINT64_FORMAT,
                   vfs, vfs_free);
    if (!pol_cluster_add_host(c, name, (guint)cpus, (guint64)memory, state, &perr) ||
        !pol_cluster_set_host_vfs(c, name, model, (guint)vfs, (gint)vfs_free, &perr))
        return wrap(perr, it, error);
    return TRUE;
}

static gboolean parse_vm(PolCluster *c, const Item *it, GError **error)
{
    PolVmSpec spec = {0};
    gint64 vcpus, memory, vfs;
    GError *perr = NULL;

    if (!known_members(it, vm_members, error) || !get_string(it, "name", TRUE, &spec.name, error) ||
        !get_string(it, "host", TRUE, &spec.host, error) ||
        !get_int(it, "vcpus", TRUE, 1, POL_CPUS_MAX, 0, &vcpus, error) ||
        !get_int(it, "memory_mib", TRUE, 0, (gint64)POL_MEMORY_MIB_MAX, 0, &memory, error) ||
        !get_fraction(it, "cpu_util", 1.0, &spec.cpu_util, error) ||
        !get_int(it, "vfs", FALSE, 0, POL_VFS_MAX, 0, &vfs, error) ||
        !get_string(it, "vf_model", FALSE, &spec.vf_model, error) ||
        !get_string(it, "job", FALSE, &spec.job, error) ||
        !get_bool(it, "pinned", &spec.pinned, error) ||
        !get_int(it, "moved_ago_s", FALSE, 0, G_MAXINT64, -1, &spec.moved_ago_s, error))
        return FALSE;
    spec.vcpus = (guint)vcpus;
    spec.memory_mib = (guint64)memory;
    spec.vfs = (guint)vfs;
    if (!pol_cluster_add_vm(c, &spec, &perr))
        return wrap(perr, it, error);
    return TRUE;
}

PolCluster *orch_snapshot_parse(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(PolCluster) c = pol_cluster_new();
    g_autoptr(GError) local = NULL;
    JsonNode *root;
    JsonArray *hosts, *vms;

    g_return_val_if_fail(data != NULL || len == 0, NULL);
    if (len > ORCH_SNAPSHOT_MAX_BYTES) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "snapshot '%s': larger than %d bytes", name, ORCH_SNAPSHOT_MAX_BYTES);
        return NULL;
    }
    if (!check_depth(data, len, name, error))
        return NULL;
    if (len == 0 || !json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "snapshot '%s': not JSON: %s", name,
                    local ? local->message : "empty");
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "snapshot '%s': the top level must be an object with \"hosts\" and \"vms\"",
                    name);
        return NULL;
    }
    {
        Item top = {name, "(top level)", json_node_get_object(root)};

        if (!known_members(&top, top_members, error))
            return NULL;
    }
    if (!(hosts = get_objects(json_node_get_object(root), "hosts", name, error)) ||
        !(vms = get_objects(json_node_get_object(root), "vms", name, error)))
        return NULL;
    for (guint i = 0; i < json_array_get_length(hosts); i++) {
        g_autofree char *where = g_strdup_printf("hosts[%u]", i);
        Item it = {name, where, json_array_get_object_element(hosts, i)};
        if (!parse_host(c, &it, error))
            return NULL;
    }
    for (guint i = 0; i < json_array_get_length(vms); i++) {
        g_autofree char *where = g_strdup_printf("vms[%u]", i);
        Item it = {name, where, json_array_get_object_element(vms, i)};
        if (!parse_vm(c, &it, error))
            return NULL;
    }
    return g_steal_pointer(&c);
}

PolCluster *orch_snapshot_load(const char *path, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    if (!hm_file_read_limited(path, ORCH_SNAPSHOT_MAX_BYTES, &data, &len, error)) {
        g_prefix_error(error, "snapshot '%s': ", path);
        return NULL;
    }
    return orch_snapshot_parse(data, len, path, error);
}

/* ---- plans read back ------------------------------------------------------------------------ */

static gboolean get_double(const Item *it, const char *field, double def, double *ret,
                          GError **error)
{
    JsonNode *node = member(it, field);
    GType type;

    if (!node) {
        *ret = def;
        return TRUE;
    }
    type = json_node_get_value_type(node);
    if (type != G_TYPE_DOUBLE && type != G_TYPE_INT64)
        return bad(it, field, error, "must be a number");
    *ret = type == G_TYPE_DOUBLE ? json_node_get_double(node) : (double)json_node_get_int(node);
    if (!isfinite(*ret))
        return bad(it, field, error, "must be a finite number");
    return TRUE;
}

static gboolean plan_fill(PolPlan *plan, JsonObject *root, const char *name, GError **error)
{
    Item top = {name, "plan", root};
    JsonNode *node;
    const char *policy, *drained;
    gint64 n, ms;
    int p;

    if (!get_string(&top, "policy", TRUE, &policy, error) ||
        !get_string(&top, "drained", FALSE, &drained, error))
        return FALSE;
    if ((p = pol_policy_from_string(policy)) < 0)
        return bad(&top, "policy", error, "must be consolidate, drain or balance, not '%.64s'",
                   policy);
    plan->policy = p;
    plan->drained = g_strdup(drained);
    node = json_object_get_member(root, "migrations");
    if (!node || !JSON_NODE_HOLDS_ARRAY(node))
        return bad(&top, "migrations", error, node ? "must be an array" : "missing");
    for (guint i = 0; i < json_array_get_length(json_node_get_array(node)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(node), i);
        g_autofree char *where = g_strdup_printf("migrations[%u]", i);
        Item it = {name, where, NULL};
        g_autoptr(PolMigration) m = g_new0(PolMigration, 1);
        const char *vm, *from, *to;
        gint64 mem, dur;

        if (!JSON_NODE_HOLDS_OBJECT(el)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "plan '%s': %s: must be an object",
                        name, where);
            return FALSE;
        }
        it.obj = json_node_get_object(el);
        if (!get_string(&it, "vm", TRUE, &vm, error) ||
            !get_string(&it, "from", TRUE, &from, error) ||
            !get_string(&it, "to", TRUE, &to, error) ||
            !get_int(&it, "memory_mib", FALSE, 0, (gint64)POL_MEMORY_MIB_MAX, 0, &mem, error) ||
            !get_int(&it, "duration_ms", FALSE, 0, G_MAXINT64 / 2, 0, &dur, error) ||
            !get_bool(&it, "extra", &m->extra, error))
            return FALSE;
        if (!*vm || !*from || !*to || strlen(vm) > POL_NAME_MAX || strlen(from) > POL_NAME_MAX ||
            strlen(to) > POL_NAME_MAX)
            return bad(&it, "vm", error, "names must be 1 to %d bytes", POL_NAME_MAX);
        m->vm = g_strdup(vm);
        m->from = g_strdup(from);
        m->to = g_strdup(to);
        m->memory_mib = (guint64)mem;
        m->duration_s = dur / 1000.0;
        plan->extra_moves += m->extra;
        plan->duration_s += m->duration_s;
        plan->moved_mib += m->memory_mib;
        g_ptr_array_add(plan->migrations, g_steal_pointer(&m));
    }
    node = json_object_get_member(root, "hosts");
    if (node && !JSON_NODE_HOLDS_ARRAY(node))
        return bad(&top, "hosts", error, "must be an array of strings");
    for (guint i = 0; node && i < json_array_get_length(json_node_get_array(node)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(node), i);

        if (!JSON_NODE_HOLDS_VALUE(el) || json_node_get_value_type(el) != G_TYPE_STRING)
            return bad(&top, "hosts", error, "must be an array of strings");
        g_ptr_array_add(plan->hosts, g_strdup(json_node_get_string(el)));
    }
    if (!get_int(&top, "hosts_before", FALSE, 0, POL_HOSTS_MAX, 0, &n, error))
        return FALSE;
    plan->hosts_before = (guint)n;
    if (!get_int(&top, "lower_bound", FALSE, 0, POL_HOSTS_MAX, 0, &n, error))
        return FALSE;
    plan->lower_bound = (guint)n;
    if (!get_int(&top, "duration_ms", FALSE, 0, G_MAXINT64 / 2, -1, &ms, error))
        return FALSE;
    if (ms >= 0)
        plan->duration_s = ms / 1000.0;
    plan->hosts_used = plan->hosts->len;
    return get_double(&top, "max_load_before", 0, &plan->max_load_before, error) &&
           get_double(&top, "max_load_after", 0, &plan->max_load_after, error) &&
           get_double(&top, "plan_ms", 0, &plan->plan_ms, error);
}

PolPlan *orch_plan_parse_node(JsonNode *root, const char *name, GError **error)
{
    g_autoptr(PolPlan) plan = g_new0(PolPlan, 1);

    plan->migrations = g_ptr_array_new_with_free_func((GDestroyNotify)pol_migration_free);
    plan->hosts = g_ptr_array_new_with_free_func(g_free);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "plan '%s': must be an object with \"policy\" and \"migrations\"", name);
        return NULL;
    }
    if (!plan_fill(plan, json_node_get_object(root), name, error))
        return NULL;
    return g_steal_pointer(&plan);
}

PolPlan *orch_plan_parse(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;

    if (len > ORCH_SNAPSHOT_MAX_BYTES) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "plan '%s': larger than %d bytes",
                    name, ORCH_SNAPSHOT_MAX_BYTES);
        return NULL;
    }
    if (!check_depth(data, len, name, error))
        return NULL;
    if (len == 0 || !json_parser_load_from_data(parser, data, (gssize)len, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "plan '%s': not JSON: %s", name,
                    local ? local->message : "empty");
        return NULL;
    }
    return orch_plan_parse_node(json_parser_get_root(parser), name, error);
}

/* ---- writing ----------------------------------------------------------------------------- */

static double rounded(double x, double scale)
{
    return round(x * scale) / scale;
}

/* Member @name: @value, or null when it is @none (not computed, no limit). */
static void add_count_or_null(JsonBuilder *b, const char *name, guint value, guint none)
{
    json_builder_set_member_name(b, name);
    if (value == none)
        json_builder_add_null_value(b);
    else
        json_builder_add_int_value(b, value);
}

char *orch_plan_format_json(const PolPlan *plan, gboolean pretty, gboolean timing)
{
    g_autoptr(JsonBuilder) b = json_builder_new_immutable();
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = NULL;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "policy");
    json_builder_add_string_value(b, pol_policy_to_string(plan->policy));
    if (plan->drained) {
        json_builder_set_member_name(b, "drained");
        json_builder_add_string_value(b, plan->drained);
    }
    json_builder_set_member_name(b, "migrations");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(plan->migrations, i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "vm");
        json_builder_add_string_value(b, m->vm);
        json_builder_set_member_name(b, "from");
        json_builder_add_string_value(b, m->from);
        json_builder_set_member_name(b, "to");
        json_builder_add_string_value(b, m->to);
        json_builder_set_member_name(b, "memory_mib");
        json_builder_add_int_value(b, (gint64)m->memory_mib);
        json_builder_set_member_name(b, "duration_ms");
        json_builder_add_int_value(b, (gint64)llround(m->duration_s * 1000.0));
        json_builder_set_member_name(b, "extra");
        json_builder_add_boolean_value(b, m->extra);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_set_member_name(b, "hosts_used");
    json_builder_add_int_value(b, plan->hosts_used);
    json_builder_set_member_name(b, "hosts_before");
    json_builder_add_int_value(b, plan->hosts_before);
    json_builder_set_member_name(b, "lower_bound");
    json_builder_add_int_value(b, plan->lower_bound);
    json_builder_set_member_name(b, "gap");
    json_builder_add_int_value(b, (gint64)plan->hosts_used - (gint64)plan->lower_bound);
    json_builder_set_member_name(b, "ratio");
    json_builder_add_double_value(
        b, plan->lower_bound ? rounded((double)plan->hosts_used / plan->lower_bound, 1e4) : 0.0);
    json_builder_set_member_name(b, "extra_moves");
    json_builder_add_int_value(b, plan->extra_moves);
    json_builder_set_member_name(b, "duration_ms");
    json_builder_add_int_value(b, (gint64)llround(plan->duration_s * 1000.0));
    json_builder_set_member_name(b, "max_load_before");
    json_builder_add_double_value(b, rounded(plan->max_load_before, 1e4));
    json_builder_set_member_name(b, "max_load_after");
    json_builder_add_double_value(b, rounded(plan->max_load_after, 1e4));
    json_builder_set_member_name(b, "moved_mib");
    json_builder_add_int_value(b, (gint64)plan->moved_mib);
    if (plan->policy == POL_POLICY_CONSOLIDATE && plan->front) {
        add_count_or_null(b, "migration_bound", plan->migration_bound, G_MAXUINT);
        json_builder_set_member_name(b, "host_value");
        json_builder_add_int_value(b, plan->host_value);
        add_count_or_null(b, "max_migrations", plan->max_migrations, 0);
        json_builder_set_member_name(b, "front");
        json_builder_begin_array(b);
        for (guint i = 0; i < plan->front->len; i++) {
            const PolFrontPoint *f = &g_array_index(plan->front, PolFrontPoint, i);
            json_builder_begin_object(b);
            json_builder_set_member_name(b, "hosts");
            json_builder_add_int_value(b, f->hosts);
            json_builder_set_member_name(b, "migrations");
            json_builder_add_int_value(b, f->migrations);
            json_builder_set_member_name(b, "moved_mib");
            json_builder_add_int_value(b, (gint64)f->moved_mib);
            add_count_or_null(b, "migration_bound", f->migration_bound, G_MAXUINT);
            json_builder_end_object(b);
        }
        json_builder_end_array(b);
        json_builder_set_member_name(b, "chosen");
        json_builder_add_int_value(b, plan->front_chosen);
    }
    json_builder_set_member_name(b, "hosts");
    json_builder_begin_array(b);
    for (guint i = 0; i < plan->hosts->len; i++)
        json_builder_add_string_value(b, g_ptr_array_index(plan->hosts, i));
    json_builder_end_array(b);
    if (timing) {
        json_builder_set_member_name(b, "plan_ms");
        json_builder_add_double_value(b, rounded(plan->plan_ms, 1000.0));
    }
    json_builder_end_object(b);

    root = json_builder_get_root(b);
    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, pretty);
    return json_generator_to_data(gen, NULL);
}

char *orch_plan_format_table(const PolPlan *plan)
{
    GString *out = g_string_new(NULL);

    g_string_append_printf(out, "%s plan: %u migrations (%u detours), %.1f s predicted\n",
                           pol_policy_to_string(plan->policy), plan->migrations->len,
                           plan->extra_moves, plan->duration_s);
    g_string_append_printf(out, "hosts with VMs: %u -> %u (lower bound %u), max load %.2f -> %.2f\n",
                           plan->hosts_before, plan->hosts_used, plan->lower_bound,
                           plan->max_load_before, plan->max_load_after);
    if (plan->policy == POL_POLICY_CONSOLIDATE && plan->front) {
        g_autofree char *bound = plan->migration_bound == G_MAXUINT
                                     ? g_strdup("none")
                                     : g_strdup_printf("%u", plan->migration_bound);
        g_string_append_printf(out, "migrations %u (lower bound %s on %u hosts), %.1f GiB moved; a host is worth %u migrations; %u plans on the front:\n",
                               plan->migrations->len, bound, plan->hosts_used,
                               plan->moved_mib / 1024.0, plan->host_value, plan->front->len);
        /* The points around the chosen one; --json has them all. */
        guint from = plan->front_chosen > 4 ? plan->front_chosen - 4 : 0;
        guint to = MIN(plan->front->len, from + 10);
        for (guint i = from; i < to; i++) {
            const PolFrontPoint *f = &g_array_index(plan->front, PolFrontPoint, i);
            g_string_append_printf(out, "  %5u hosts %7u migrations %10.1f GiB%s\n", f->hosts,
                                   f->migrations, f->moved_mib / 1024.0,
                                   i == plan->front_chosen ? "  <- chosen" : "");
        }
        if (to - from < plan->front->len)
            g_string_append_printf(out, "  (%u more in --json)\n", plan->front->len - (to - from));
    }
    for (guint i = 0; i < plan->migrations->len; i++) {
        const PolMigration *m = g_ptr_array_index(plan->migrations, i);
        g_string_append_printf(out, "%5u  %-24s %-16s -> %-16s %8.1f s%s\n", i + 1, m->vm,
                               m->from, m->to, m->duration_s, m->extra ? "  (detour)" : "");
    }
    return g_string_free(out, FALSE);
}
