/* hotmigd's HTTP+JSON API (docs/hotmigd.md) without the transport: a request's method, path and
 * body in, a status and a JSON body out. The body comes from another host: it is size-limited,
 * must be UTF-8 JSON with an object at the top and only the members a request knows, each of
 * the right type and length; every refusal is a 4xx naming the member. Nothing changes before
 * the whole request has been checked. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/api.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

#include <string.h>

#include <json-glib/json-glib.h>

#include "engine/json-fields.h"
#include "engine/json.h"

#define API_PREFIX "/v1/"
#define API_MAX_SEGMENTS 6
#define API_MAX_REASON HOTMIGD_API_MAX_REASON

void hotmigd_api_reply_free(HotmigdApiReply *reply)
{
    if (!reply)
        return;
    g_free(reply->body);
    g_free(reply->log);
    g_free(reply);
}

HotmigdApiReply *hotmigd_api_reply_new(guint status, JsonBuilder *b, char *log)
{
    HotmigdApiReply *reply = g_new0(HotmigdApiReply, 1);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = NULL;

    json_generator_set_root(gen, root);
    json_generator_set_pretty(gen, TRUE);
    text = json_generator_to_data(gen, NULL);
    reply->status = status;
    reply->body = g_strconcat(text, "\n", NULL);
    reply->log = log;
    return reply;
}

HotmigdApiReply *hotmigd_api_reply_error(guint status, const char *fmt, ...)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *msg = NULL;
    char *valid;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    /* Parts of the request are quoted, cut to a length: keep the message valid UTF-8. */
    valid = g_utf8_make_valid(msg, -1);
    json_builder_begin_object(b);
    orch_json_member_string(b, "error", valid);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(status, b, valid);
}

/* The status for an ORCH_ERROR from the pool. */
static HotmigdApiReply *reply_gerror(const GError *error)
{
    guint status = 500;

    if (error->domain == ORCH_ERROR) {
        switch (error->code) {
        case ORCH_ERROR_INVALID:
            status = 400;
            break;
        case ORCH_ERROR_NOT_FOUND:
            status = 404;
            break;
        case ORCH_ERROR_CONFLICT:
            status = 409;
            break;
        case ORCH_ERROR_UNAVAILABLE:
            status = 503;
            break;
        case ORCH_ERROR_FORBIDDEN:
            status = 403;
            break;
        default:
            break;
        }
    }
    return hotmigd_api_reply_error(status, "%s", error->message);
}

/* ---- request bodies ------------------------------------------------------------------------ */

JsonObject *hotmigd_api_body_object(const char *body, gsize len, const char *const *known,
                                    guint max_depth, HotmigdApiReply **ret_reply)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;
    g_autoptr(GList) members = NULL;
    JsonNode *root;
    JsonObject *obj;

    if (len > HOTMIGD_API_MAX_BODY) {
        *ret_reply = hotmigd_api_reply_error(
            413, "the request body has %" G_GSIZE_FORMAT " bytes, more than the limit of %d", len,
            HOTMIGD_API_MAX_BODY);
        return NULL;
    }
    if (len == 0)
        return json_object_new();
    if (memchr(body, '\0', len) || !g_utf8_validate(body, len, NULL)) {
        *ret_reply = hotmigd_api_reply_error(400, "the request body is not UTF-8 text");
        return NULL;
    }
    if (!hm_json_check_depth(body, (gssize)len, max_depth, NULL)) {
        *ret_reply =
            hotmigd_api_reply_error(400, "the request body nests deeper than %u levels", max_depth);
        return NULL;
    }
    if (!json_parser_load_from_data(parser, body, len, &local)) {
        *ret_reply =
            hotmigd_api_reply_error(400, "the request body is not JSON: %s", local->message);
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        *ret_reply = hotmigd_api_reply_error(400, "the request body is not a JSON object");
        return NULL;
    }
    obj = json_node_get_object(root);
    members = json_object_get_members(obj);
    for (GList *m = members; m; m = m->next) {
        if (!known || !g_strv_contains(known, m->data)) {
            g_autofree char *list = known ? g_strjoinv(", ", (char **)known) : NULL;

            *ret_reply =
                list ? hotmigd_api_reply_error(400, "unknown member '%.64s' (known: %s)",
                                               (const char *)m->data, list)
                     : hotmigd_api_reply_error(400, "this request takes no body (member '%.64s')",
                                               (const char *)m->data);
            return NULL;
        }
    }
    return json_object_ref(obj);
}

/* The pool's and the cluster's bodies. */
static JsonObject *body_object(const char *body, gsize len, const char *const *known,
                               HotmigdApiReply **ret_reply)
{
    return hotmigd_api_body_object(body, len, known, HOTMIGD_API_MAX_DEPTH, ret_reply);
}

/* Member @name as a string: NULL without a reply when absent and not @required; NULL with a 400
 * when of another type, empty, longer than @max bytes or holding control characters. */
static const char *member_string(JsonObject *obj, const char *name, gboolean required, gsize max,
                                 HotmigdApiReply **ret_reply)
{
    JsonNode *node = json_object_get_member(obj, name);
    const char *value;

    if (!node) {
        if (required)
            *ret_reply = hotmigd_api_reply_error(400, "member '%s' is missing", name);
        return NULL;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        *ret_reply = hotmigd_api_reply_error(400, "member '%s' must be a string", name);
        return NULL;
    }
    value = json_node_get_string(node);
    if (!*value) {
        *ret_reply = hotmigd_api_reply_error(400, "member '%s' must not be empty", name);
        return NULL;
    }
    if (strlen(value) > max) {
        *ret_reply = hotmigd_api_reply_error(
            400, "member '%s' is longer than %" G_GSIZE_FORMAT " bytes", name, max);
        return NULL;
    }
    for (const char *p = value; *p; p++) {
        if (g_ascii_iscntrl(*p)) {
            *ret_reply =
                hotmigd_api_reply_error(400, "member '%s' contains a control character", name);
            return NULL;
        }
    }
    return value;
}

/* Member @name as a whole number @min..@max: an integer, or (@hex_text) a string of hex
 * digits with an optional "0x" ("0x15b3", "15b3"). FALSE without a reply when absent. */
static gboolean member_uint(JsonObject *obj, const char *name, guint64 min, guint64 max,
                            gboolean hex_text, guint64 *ret_value, HotmigdApiReply **ret_reply)
{
    JsonNode *node = json_object_get_member(obj, name);
    guint64 value;

    if (!node)
        return FALSE;
    if (JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_INT64) {
        gint64 n = json_node_get_int(node);

        if (n < 0 || (guint64)n < min || (guint64)n > max) {
            *ret_reply = hotmigd_api_reply_error(400,
                                                 "member '%s' must be from %" G_GUINT64_FORMAT
                                                 " to %" G_GUINT64_FORMAT ", not %" G_GINT64_FORMAT,
                                                 name, min, max, n);
            return FALSE;
        }
        value = (guint64)n;
    } else if (hex_text && JSON_NODE_HOLDS_VALUE(node) &&
               json_node_get_value_type(node) == G_TYPE_STRING) {
        const char *text = json_node_get_string(node);
        const char *digits =
            g_str_has_prefix(text, "0x") || g_str_has_prefix(text, "0X") ? text + 2 : text;

        if (!*digits || strlen(digits) > 8 ||
            !g_ascii_string_to_unsigned(digits, 16, min, max, &value, NULL)) {
            *ret_reply = hotmigd_api_reply_error(
                400,
                "member '%s': '%.32s' is not a hex number from 0x%" G_GINT64_MODIFIER
                "x to 0x%" G_GINT64_MODIFIER "x",
                name, text, min, max);
            return FALSE;
        }
    } else {
        *ret_reply = hotmigd_api_reply_error(400, "member '%s' must be %s", name,
                                             hex_text ? "a number or a hex string like \"0x15b3\""
                                                      : "a whole number");
        return FALSE;
    }
    *ret_value = value;
    return TRUE;
}

/* ---- replies ------------------------------------------------------------------------------- */

static void lease_json(JsonBuilder *b, const HotplugLease *lease)
{
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", lease->vf);
    orch_json_member_string(b, "id", lease->id);
    orch_json_member_string(b, "state", hotplug_lease_state_to_string(lease->state));
    orch_json_member_string(b, "holder", lease->holder);
    orch_json_member_string(b, "reason", lease->reason);
    orch_json_member_string(b, "domain", lease->domain);
    orch_json_member_time(b, "created", lease->created);
    orch_json_member_time(b, "expires", lease->expires);
    json_builder_end_object(b);
}

static void member_hex(JsonBuilder *b, const char *name, const HotmigdPoolPciVf *pci, guint value)
{
    g_autofree char *text = pci ? g_strdup_printf("0x%04x", value) : NULL;

    orch_json_member_string(b, name, text);
}

static void entry_json(JsonBuilder *b, const HotmigdPoolEntry *entry)
{
    const HotmigdPoolPciVf *pci = entry->pci;

    json_builder_begin_object(b);
    orch_json_member_string(b, "id", entry->id);
    orch_json_member_string(b, "kind", orch_vf_kind_to_string(entry->kind));
    orch_json_member_string(b, "state", orch_vf_state_to_string(entry->state));
    member_hex(b, "vendor_id", pci, pci ? pci->vendor_id : 0);
    member_hex(b, "device_id", pci, pci ? pci->device_id : 0);
    orch_json_member_string(b, "pf", pci ? pci->pf_address : NULL);
    json_builder_set_member_name(b, "vf_index");
    if (pci && pci->pf_address)
        json_builder_add_int_value(b, pci->vf_index);
    else
        json_builder_add_null_value(b);
    orch_json_member_string(b, "driver", pci ? pci->driver : NULL);
    json_builder_set_member_name(b, "lease");
    if (entry->lease)
        lease_json(b, entry->lease);
    else
        json_builder_add_null_value(b);
    orch_json_member_string(b, "assigned_to", entry->assigned_to);
    orch_json_member_string(b, "note", entry->note);
    json_builder_end_object(b);
}

static void warnings_json(JsonBuilder *b, char **warnings)
{
    json_builder_set_member_name(b, "warnings");
    json_builder_begin_array(b);
    for (guint i = 0; warnings && warnings[i]; i++)
        json_builder_add_string_value(b, warnings[i]);
    json_builder_end_array(b);
}

/* ---- the requests -------------------------------------------------------------------------- */

static HotmigdApiReply *api_host(HotmigdPool *pool)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) warnings = NULL;
    g_autoptr(GPtrArray) entries = hotmigd_pool_list(pool, &warnings, &error);
    guint counts[ORCH_VF_STATE_LAST] = {0};

    if (!entries)
        return reply_gerror(error);
    /* A stale confirmed lease's VF is free for a lease (which ends that lease), and so for the
     * plans made on these counts: a drain is not refused for lack of it. */
    for (guint i = 0; i < entries->len; i++) {
        const HotmigdPoolEntry *entry = g_ptr_array_index(entries, i);

        counts[entry->reclaimable ? ORCH_VF_STATE_FREE : entry->state]++;
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "name", hotmigd_pool_host_name(pool));
    orch_json_member_string(b, "version", HOTMIG_VERSION);
    orch_json_member_int(b, "api", 1);
    json_builder_set_member_name(b, "pool");
    json_builder_begin_object(b);
    orch_json_member_int(b, "size", entries->len);
    for (int st = 0; st < ORCH_VF_STATE_LAST; st++)
        orch_json_member_int(b, orch_vf_state_to_string(st), counts[st]);
    json_builder_end_object(b);
    warnings_json(b, warnings);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL);
}

static HotmigdApiReply *api_vfs(HotmigdPool *pool)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) warnings = NULL;
    g_autoptr(GPtrArray) entries = hotmigd_pool_list(pool, &warnings, &error);

    if (!entries)
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "host", hotmigd_pool_host_name(pool));
    json_builder_set_member_name(b, "vfs");
    json_builder_begin_array(b);
    for (guint i = 0; i < entries->len; i++)
        entry_json(b, g_ptr_array_index(entries, i));
    json_builder_end_array(b);
    warnings_json(b, warnings);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL);
}

static HotmigdApiReply *api_lease(HotmigdPool *pool, const char *owner, const char *body, gsize len)
{
    static const char *const known[] = {"vf",     "vendor_id", "device_id", "holder",
                                        "reason", "domain",    "ttl",       NULL};
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(HotplugLease) lease = NULL;
    HotmigdApiReply *reply = NULL;
    HotmigdPoolLeaseSpec spec = {0};
    guint64 vendor = 0, device = 0, ttl = 0;
    gboolean have_vendor, have_device;

    obj = body_object(body, len, known, &reply);
    if (!obj)
        return reply;
    spec.vf = member_string(obj, "vf", FALSE, HOTMIGD_API_MAX_STRING, &reply);
    if (reply)
        return reply;
    have_vendor = member_uint(obj, "vendor_id", 0, 0xffff, TRUE, &vendor, &reply);
    if (reply)
        return reply;
    have_device = member_uint(obj, "device_id", 0, 0xffff, TRUE, &device, &reply);
    if (reply)
        return reply;
    if (spec.vf && (have_vendor || have_device))
        return hotmigd_api_reply_error(400,
                                       "give either 'vf' or 'vendor_id' and 'device_id', not both");
    if (!spec.vf && !have_vendor && !have_device)
        return hotmigd_api_reply_error(
            400,
            "give 'vf' (the VF to lease), or 'vendor_id' and 'device_id' (lease the first free VF of that model)");
    if (have_vendor != have_device)
        return hotmigd_api_reply_error(
            400, "member '%s' is missing ('vendor_id' and 'device_id' go together)",
            have_vendor ? "device_id" : "vendor_id");
    spec.holder = member_string(obj, "holder", TRUE, HOTMIGD_API_MAX_STRING, &reply);
    if (reply)
        return reply;
    spec.reason = member_string(obj, "reason", TRUE, API_MAX_REASON, &reply);
    if (reply)
        return reply;
    spec.domain = member_string(obj, "domain", TRUE, HOTMIGD_API_MAX_STRING, &reply);
    if (reply)
        return reply;
    member_uint(obj, "ttl", 1, hotmigd_pool_lease_ttl_max(pool), FALSE, &ttl, &reply);
    if (reply)
        return reply;
    spec.owner = owner;
    spec.vendor_id = vendor;
    spec.device_id = device;
    spec.ttl_s = ttl;

    lease = hotmigd_pool_lease(pool, &spec, &error);
    if (!lease)
        return reply_gerror(error);
    lease_json(b, lease);
    return hotmigd_api_reply_new(
        201, b,
        g_strdup_printf("VF '%s' leased to '%s' for domain '%s' (%s): lease %s", lease->vf,
                        lease->holder, lease->domain, lease->reason, lease->id));
}

static HotmigdApiReply *api_confirm(HotmigdPool *pool, const char *vf, const char *id,
                                    const char *body, gsize len)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(HotplugLease) lease = NULL;
    HotmigdApiReply *reply = NULL;

    obj = body_object(body, len, NULL, &reply);
    if (!obj)
        return reply;
    lease = hotmigd_pool_confirm(pool, vf, id, &error);
    if (!lease)
        return reply_gerror(error);
    lease_json(b, lease);
    return hotmigd_api_reply_new(
        200, b,
        g_strdup_printf("VF '%s': lease %s confirmed, assigned to domain '%s'", lease->vf,
                        lease->id, lease->domain));
}

static HotmigdApiReply *api_release(HotmigdPool *pool, const char *vf, const char *id,
                                    const char *body, gsize len)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    HotmigdApiReply *reply = NULL;

    obj = body_object(body, len, NULL, &reply);
    if (!obj)
        return reply;
    if (!hotmigd_pool_release(pool, vf, id, &error))
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", vf);
    orch_json_member_string(b, "id", id);
    orch_json_member_bool(b, "released", TRUE);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(
        200, b, g_strdup_printf("VF '%.64s': lease %.64s released (or gone already)", vf, id));
}

/* POST /v1/leases/{vf}/{id}/renew {"ttl"?}: a migration that outlasts the lease's TTL keeps
 * it (issue 15). */
static HotmigdApiReply *api_renew(HotmigdPool *pool, const char *vf, const char *id,
                                  const char *body, gsize len)
{
    static const char *const known[] = {"ttl", NULL};
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    HotmigdApiReply *reply = NULL;
    guint64 ttl = 0;

    obj = body_object(body, len, known, &reply);
    if (!obj)
        return reply;
    member_uint(obj, "ttl", 1, hotmigd_pool_lease_ttl_max(pool), FALSE, &ttl, &reply);
    if (reply)
        return reply;
    if (!hotmigd_pool_renew(pool, vf, id, (guint)ttl, &error))
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", vf);
    orch_json_member_string(b, "id", id);
    orch_json_member_bool(b, "renewed", TRUE);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL);
}

/* POST /v1/vfs/{vf}/left {"domain"}: the domain migrated away; its assigned lease ends. */
static HotmigdApiReply *api_left(HotmigdPool *pool, const char *vf, const char *body, gsize len)
{
    static const char *const known[] = {"domain", NULL};
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    HotmigdApiReply *reply = NULL;
    const char *domain;

    obj = body_object(body, len, known, &reply);
    if (!obj)
        return reply;
    domain = member_string(obj, "domain", TRUE, HOTPLUG_LEASE_DOMAIN_MAX, &reply);
    if (!domain)
        return reply;
    if (!hotmigd_pool_left(pool, vf, domain, &error))
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", vf);
    orch_json_member_string(b, "domain", domain);
    orch_json_member_bool(b, "released", TRUE);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(
        200, b,
        g_strdup_printf("VF '%.64s': domain '%.64s' left this host, its lease ended", vf, domain));
}

static HotmigdApiReply *api_ib_identity(HotmigdPool *pool, const char *vf, const char *body,
                                        gsize len)
{
    static const char *const known[] = {"node_guid", "port_guid", NULL};
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autofree char *note = NULL;
    HotmigdApiReply *reply = NULL;
    const char *names[2] = {"node_guid", "port_guid"};
    guint64 guids[2] = {0};
    gboolean applied = FALSE;

    obj = body_object(body, len, known, &reply);
    if (!obj)
        return reply;
    for (guint i = 0; i < 2; i++) {
        const char *text = member_string(obj, names[i], TRUE, 64, &reply);

        if (!text)
            return reply;
        if (!hotplug_guid_parse(text, &guids[i], &error))
            return hotmigd_api_reply_error(400, "member '%s': %s", names[i], error->message);
    }
    if (!hotmigd_pool_ib_identity(pool, vf, guids[0], guids[1], &applied, &note, &error))
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", vf);
    for (guint i = 0; i < 2; i++) {
        g_autofree char *text = hotplug_guid_format(guids[i]);

        orch_json_member_string(b, names[i], text);
    }
    orch_json_member_bool(b, "applied", applied);
    orch_json_member_string(b, "note", note);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, g_strdup_printf("VF '%.64s': %s", vf, note));
}

/* GET /v1/vfs/VF/identity/DOMAIN: the GUIDs the VF carries for DOMAIN, as this host knows
 * them (a migration carries them away: never the guest's word, docs/security.md). */
static HotmigdApiReply *api_identity(HotmigdPool *pool, const char *vf, const char *domain,
                                     gsize len)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *source = NULL;
    g_autofree char *node = NULL;
    g_autofree char *port = NULL;
    guint64 guids[2] = {0};

    if (len)
        return hotmigd_api_reply_error(400, "this request takes no body");
    if (!hotmigd_pool_identity(pool, vf, domain, &guids[0], &guids[1], &source, &error))
        return reply_gerror(error);
    node = hotplug_guid_format(guids[0]);
    port = hotplug_guid_format(guids[1]);
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", vf);
    orch_json_member_string(b, "domain", domain);
    orch_json_member_string(b, "node_guid", node);
    orch_json_member_string(b, "port_guid", port);
    orch_json_member_string(b, "source", source);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL);
}

static HotmigdApiReply *api_vfio(HotmigdPool *pool, const char *vf, const char *body, gsize len)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autofree char *driver = NULL;
    g_autofree char *note = NULL;
    HotmigdApiReply *reply = NULL;
    gboolean changed = FALSE;

    obj = body_object(body, len, NULL, &reply);
    if (!obj)
        return reply;
    if (!hotmigd_pool_vfio(pool, vf, &changed, &driver, &note, &error))
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "vf", vf);
    orch_json_member_string(b, "driver", driver);
    orch_json_member_bool(b, "changed", changed);
    orch_json_member_string(b, "note", note);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, g_strdup_printf("VF '%.64s': %s", vf, note));
}

/* ---- paths --------------------------------------------------------------------------------- */

#define API_FILES_MAX 64

/* POST /v1/files {"paths":[...]}: which of these files this host has (a pre-flight check: the
 * domain's disks and kernel must be reachable from the destination). Read only. */
/* Is @path under one of @roots (each a directory; a path with a '.' or '..' component is
 * under none)? *ret_root_len: the length of the root's part of @path. */
static gboolean files_allowed(const char *path, const char *const *roots, gsize *ret_root_len)
{
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);

    for (char **p = parts; *p; p++) {
        if (g_str_equal(*p, ".") || g_str_equal(*p, ".."))
            return FALSE;
    }
    for (const char *const *r = roots; r && *r; r++) {
        gsize n = strlen(*r);

        while (n > 1 && (*r)[n - 1] == '/')
            n--;
        if (n > 0 && strncmp(path, *r, n) == 0 && (path[n] == '/' || (n == 1 && **r == '/'))) {
            *ret_root_len = n;
            return TRUE;
        }
    }
    return FALSE;
}

static HotmigdApiReply *api_files(const char *const *roots, const char *body, gsize len)
{
    static const char *const known[] = {"paths", NULL};
    HotmigdApiReply *bad = NULL;
    g_autoptr(JsonObject) obj = body_object(body, len, known, &bad);
    g_autoptr(JsonBuilder) b = json_builder_new();
    JsonNode *node;
    JsonArray *paths;

    if (!obj)
        return bad;
    node = json_object_get_member(obj, "paths");
    if (!node || !JSON_NODE_HOLDS_ARRAY(node))
        return hotmigd_api_reply_error(400, "member 'paths' must be an array of absolute paths");
    paths = json_node_get_array(node);
    if (json_array_get_length(paths) > API_FILES_MAX)
        return hotmigd_api_reply_error(400, "member 'paths' has %u entries, more than %d",
                                       json_array_get_length(paths), API_FILES_MAX);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "files");
    json_builder_begin_array(b);
    for (guint i = 0; i < json_array_get_length(paths); i++) {
        JsonNode *el = json_array_get_element(paths, i);
        const char *path;
        g_autofree char *root = NULL;
        g_autoptr(GError) local = NULL;
        gsize root_len = 0;
        struct stat st;
        gboolean exists;

        if (!JSON_NODE_HOLDS_VALUE(el) || json_node_get_value_type(el) != G_TYPE_STRING)
            return hotmigd_api_reply_error(400, "paths[%u] must be a string", i);
        path = json_node_get_string(el);
        if (path[0] != '/' || strlen(path) > 4096)
            return hotmigd_api_reply_error(
                400, "paths[%u] must be an absolute path of at most 4096 bytes", i);
        for (const char *p = path; *p; p++) {
            if (g_ascii_iscntrl(*p))
                return hotmigd_api_reply_error(400, "paths[%u] contains a control character", i);
        }
        if (!files_allowed(path, roots, &root_len))
            return hotmigd_api_reply_error(
                403,
                "paths[%u] is not under a directory of [hotmigd] file-roots (no '.' or '..' components)",
                i);
        /* Below its root, a link is not followed (issue 28, finding 8): the answer would tell
         * whether any path of the host exists. */
        root = g_strndup(path, root_len);
        if (!hm_file_stat_beneath(root, path + root_len, &exists, &st, &local)) {
            if (g_error_matches(local, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID))
                return hotmigd_api_reply_error(
                    403, "paths[%u]: %s: hotmigd does not follow links under [hotmigd] file-roots",
                    i, local->message);
            exists = FALSE;
        }
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "path");
        json_builder_add_string_value(b, path);
        json_builder_set_member_name(b, "exists");
        json_builder_add_boolean_value(b, exists);
        json_builder_set_member_name(b, "kind");
        json_builder_add_string_value(b, !exists                ? "none"
                                         : S_ISREG(st.st_mode) ? "file"
                                         : S_ISDIR(st.st_mode) ? "dir"
                                         : S_ISBLK(st.st_mode) ? "block"
                                                               : "other");
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
    return hotmigd_api_reply_new(200, b, NULL);
}

/* The path's segments after "/v1/", percent-decoded (owned, NULL-terminated), or NULL when the
 * path is not an API path. */
static char **path_segments(const char *path)
{
    g_auto(GStrv) raw = NULL;
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);

    if (!path || !g_str_has_prefix(path, API_PREFIX) || strlen(path) > 512)
        return NULL;
    raw = g_strsplit(path + strlen(API_PREFIX), "/", API_MAX_SEGMENTS + 1);
    if (g_strv_length(raw) > API_MAX_SEGMENTS)
        return NULL;
    for (guint i = 0; raw[i]; i++) {
        char *seg = g_uri_unescape_segment(raw[i], NULL, "/");

        if (!seg || !*seg || !g_utf8_validate(seg, -1, NULL)) {
            g_free(seg);
            return NULL;
        }
        for (const char *p = seg; *p; p++) {
            if (g_ascii_iscntrl(*p)) {
                g_free(seg);
                return NULL;
            }
        }
        g_ptr_array_add(out, seg);
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_steal(out, NULL);
}

static HotmigdApiReply *method_not_allowed(const char *method, const char *path,
                                           const char *allowed)
{
    return hotmigd_api_reply_error(405, "method %.16s is not allowed on %.200s (allowed: %s)",
                                   method, path, allowed);
}

/* ---- the cluster's requests ------------------------------------------------------------------ */

static void migration_json(JsonBuilder *b, const OrchHotmigdMigration *mig)
{
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", mig->id);
    orch_json_member_string(b, "domain", mig->domain);
    orch_json_member_string(b, "source", mig->source);
    orch_json_member_string(b, "destination", mig->destination);
    orch_json_member_string(b, "reason", mig->reason);
    orch_json_member_string(b, "plan", mig->plan);
    orch_json_member_string(b, "state", orch_hotmigd_migration_state_to_string(mig->state));
    orch_json_member_string(b, "error", mig->error);
    orch_json_member_time(b, "started", mig->started);
    orch_json_member_time(b, "finished", mig->finished);
    json_builder_set_member_name(b, "report");
    {
        g_autoptr(JsonNode) report = mig->report ? json_from_string(mig->report, NULL) : NULL;

        if (report && JSON_NODE_HOLDS_OBJECT(report))
            json_builder_add_value(b, g_steal_pointer(&report));
        else
            json_builder_add_null_value(b);
    }
    json_builder_end_object(b);
}

char *hotmigd_api_migration_format_json(const OrchHotmigdMigration *mig)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(HotmigdApiReply) reply = NULL;

    migration_json(b, mig);
    reply = hotmigd_api_reply_new(200, b, NULL);
    return g_steal_pointer(&reply->body);
}

static HotmigdApiReply *api_migration_start(const HotmigdApiServices *services, const char *body,
                                            gsize len)
{
    static const char *const known[] = {"domain", "destination", "reason", "plan", NULL};
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autofree char *id = NULL;
    HotmigdApiReply *reply = NULL;
    OrchHotmigdMigrationRequest req = {0};

    obj = body_object(body, len, known, &reply);
    if (!obj)
        return reply;
    req.domain = member_string(obj, "domain", TRUE, HOTMIGD_API_MAX_STRING, &reply);
    if (reply)
        return reply;
    req.destination = member_string(obj, "destination", TRUE, HOTMIGD_API_MAX_STRING, &reply);
    if (reply)
        return reply;
    req.reason = member_string(obj, "reason", TRUE, API_MAX_REASON, &reply);
    if (reply)
        return reply;
    req.plan = member_string(obj, "plan", FALSE, HOTMIGD_API_MAX_STRING, &reply);
    if (reply)
        return reply;
    id = services->migration_start(services->data, &req, &error);
    if (!id)
        return reply_gerror(error);
    json_builder_begin_object(b);
    orch_json_member_string(b, "id", id);
    orch_json_member_string(b, "domain", req.domain);
    orch_json_member_string(b, "destination", req.destination);
    orch_json_member_string(b, "state", "running");
    json_builder_end_object(b);
    return hotmigd_api_reply_new(202, b,
                                 g_strdup_printf("migration %s of domain '%s' to '%s' started (%s)",
                                                 id, req.domain, req.destination, req.reason));
}

static HotmigdApiReply *api_migration_get(const HotmigdApiServices *services, const char *id,
                                          const char *body, gsize len)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(OrchHotmigdMigration) mig = NULL;
    HotmigdApiReply *reply = NULL;

    obj = body_object(body, len, NULL, &reply);
    if (!obj)
        return reply;
    mig = services->migration_get(services->data, id, &error);
    if (!mig)
        return reply_gerror(error);
    migration_json(b, mig);
    return hotmigd_api_reply_new(200, b, NULL);
}

typedef struct {
    HotmigdApiReplyFunc cb;
    gpointer data;
} SnapshotWait;

static void api_snapshot_done(char *json, GError *error, gpointer data)
{
    SnapshotWait *wait = data;
    g_autofree char *text = json;
    g_autoptr(GError) local = error;
    HotmigdApiReply *reply;

    if (text) {
        reply = g_new0(HotmigdApiReply, 1);
        reply->status = 200;
        reply->body = g_strconcat(text, "\n", NULL);
    } else {
        reply = reply_gerror(local);
    }
    wait->cb(reply, wait->data);
    g_free(wait);
}

/* ---- routing: the API's methods, bound from a table ------------------------------------- */

/* One request on its way to its method: the API's bindings, the request, and the parameters
 * of the route's pattern (the segments written in capitals: VF, ID), in pattern order. */
typedef struct {
    const HotmigdApi *api;
    const HotmigdApiRequest *req;
    char **args;
} Call;

/* What a route needs bound to the API; without it the route answers 503 (404 for the alerts). */
typedef enum {
    NEED_POOL,
    NEED_MIGRATION_START,
    NEED_MIGRATION_GET,
    NEED_SNAPSHOT,
    NEED_ALERTS,
} RouteNeed;

/* Who may call a route (docs/security.md): the roles of the client's certificate. */
#define ANY_ROLE (HOTMIGD_ROLE_HOST | HOTMIGD_ROLE_OPERATOR)

typedef struct {
    const char *method;  /* NULL: the method checks the request's method itself */
    const char *pattern; /* after /v1/ */
    guint roles;         /* HotmigdRole bits, any of which may call it */
    RouteNeed need;
    HotmigdApiReply *(*handle)(const Call *c);                                  /* answers now */
    void (*handle_async)(const Call *c, HotmigdApiReplyFunc cb, gpointer data); /* or later */
} Route;

static HotmigdApiReply *route_host(const Call *c)
{
    return api_host(c->api->pool);
}

static HotmigdApiReply *route_vfs(const Call *c)
{
    return api_vfs(c->api->pool);
}

static HotmigdApiReply *route_lease(const Call *c)
{
    return api_lease(c->api->pool, hotmigd_authz_client_owner(c->req->who), c->req->body,
                     c->req->len);
}

/* NULL when the client holds the lease (@id; NULL: the VF's current one) it acts on, else
 * the 403. */
static HotmigdApiReply *route_owner_refusal(const Call *c, const char *vf, const char *id)
{
    g_autoptr(GError) error = NULL;

    if (hotmigd_pool_check_owner(c->api->pool, vf, id, hotmigd_authz_client_owner(c->req->who),
                                 &error))
        return NULL;
    return reply_gerror(error);
}

static HotmigdApiReply *route_confirm(const Call *c)
{
    HotmigdApiReply *refused = route_owner_refusal(c, c->args[0], c->args[1]);

    return refused ? refused
                   : api_confirm(c->api->pool, c->args[0], c->args[1], c->req->body, c->req->len);
}

static HotmigdApiReply *route_release(const Call *c)
{
    HotmigdApiReply *refused = route_owner_refusal(c, c->args[0], c->args[1]);

    return refused ? refused
                   : api_release(c->api->pool, c->args[0], c->args[1], c->req->body, c->req->len);
}

static HotmigdApiReply *route_renew(const Call *c)
{
    HotmigdApiReply *refused = route_owner_refusal(c, c->args[0], c->args[1]);

    return refused ? refused
                   : api_renew(c->api->pool, c->args[0], c->args[1], c->req->body, c->req->len);
}

static HotmigdApiReply *route_ib_identity(const Call *c)
{
    HotmigdApiReply *refused = route_owner_refusal(c, c->args[0], NULL);

    return refused ? refused
                   : api_ib_identity(c->api->pool, c->args[0], c->req->body, c->req->len);
}

static HotmigdApiReply *route_identity(const Call *c)
{
    return api_identity(c->api->pool, c->args[0], c->args[1], c->req->len);
}

static HotmigdApiReply *route_vfio(const Call *c)
{
    HotmigdApiReply *refused = route_owner_refusal(c, c->args[0], NULL);

    return refused ? refused : api_vfio(c->api->pool, c->args[0], c->req->body, c->req->len);
}

static HotmigdApiReply *route_left(const Call *c)
{
    return api_left(c->api->pool, c->args[0], c->req->body, c->req->len);
}

static HotmigdApiReply *route_files(const Call *c)
{
    return api_files(c->api->file_roots, c->req->body, c->req->len);
}

static HotmigdApiReply *route_migration_start(const Call *c)
{
    return api_migration_start(c->api->services, c->req->body, c->req->len);
}

static HotmigdApiReply *route_migration_get(const Call *c)
{
    return api_migration_get(c->api->services, c->args[0], c->req->body, c->req->len);
}

static void route_snapshot(const Call *c, HotmigdApiReplyFunc cb, gpointer data)
{
    const HotmigdApiServices *services = c->api->services;
    SnapshotWait *wait;

    if (c->req->len) {
        cb(hotmigd_api_reply_error(400, "this request takes no body"), data);
        return;
    }
    wait = g_new0(SnapshotWait, 1);
    wait->cb = cb;
    wait->data = data;
    services->snapshot(services->data, api_snapshot_done, wait);
}

static HotmigdApiReply *route_alerts(const Call *c)
{
    return c->api->alerts(c->api->alerts_data, c->req->method, c->req->body, c->req->len,
                          c->req->peer, c->req->who);
}

static const Route api_routes[] = {
    {"GET", "host", ANY_ROLE, NEED_POOL, route_host, NULL},
    {"GET", "vfs", ANY_ROLE, NEED_POOL, route_vfs, NULL},
    {"POST", "leases", ANY_ROLE, NEED_POOL, route_lease, NULL},
    {"POST", "leases/VF/ID/confirm", ANY_ROLE, NEED_POOL, route_confirm, NULL},
    {"POST", "leases/VF/ID/renew", ANY_ROLE, NEED_POOL, route_renew, NULL},
    {"DELETE", "leases/VF/ID", ANY_ROLE, NEED_POOL, route_release, NULL},
    {"POST", "vfs/VF/ib-identity", ANY_ROLE, NEED_POOL, route_ib_identity, NULL},
    {"GET", "vfs/VF/identity/DOMAIN", ANY_ROLE, NEED_POOL, route_identity, NULL},
    {"POST", "vfs/VF/vfio", ANY_ROLE, NEED_POOL, route_vfio, NULL},
    /* Whoever ran the migration tells the source the domain left (the pool ends only an
     * ASSIGNED lease of that domain; a VF a domain still uses is never leasable). */
    {"POST", "vfs/VF/left", ANY_ROLE, NEED_POOL, route_left, NULL},
    {"POST", "files", ANY_ROLE, NEED_POOL, route_files, NULL},
    {"POST", "migrations", ANY_ROLE, NEED_MIGRATION_START, route_migration_start, NULL},
    {"GET", "migrations/ID", ANY_ROLE, NEED_MIGRATION_GET, route_migration_get, NULL},
    {"GET", "snapshot", ANY_ROLE, NEED_SNAPSHOT, NULL, route_snapshot},
    /* A POST must come from the host it names ('from'): checked by the alerts' method. */
    {NULL, "alerts", ANY_ROLE, NEED_ALERTS, route_alerts, NULL},
};

/* ---- the worker: the pool's requests off the caller's main loop (issue 15, item 7) ----- */

/* The pool's requests ask libvirt (which may hang), sysfs, netlink and the disk: one thread
 * runs them in order, so the main loop (the local API, the alert hook, the inventory) never
 * waits for them and the thread count stays fixed; the pool and its host are used by that one
 * thread only. What else reads the pool goes through it too: /metrics' VF gauges are counted
 * there (hotmigd_api_worker_count_vfs()), and the HTTP answer waits, paused, for the count.
 * Replies go back to the context the worker was made on. */
struct HotmigdApiWorker {
    GThreadPool *threads;
    GMainContext *context; /* where replies are delivered */
    guint max_queued;
    gint queued;        /* jobs pushed, not yet answered (atomic) */
    /* Who waits for the count of VFs queued or running (CountWaiter; NULL: none is); touched
     * on the worker's context only. */
    GArray *count_waiters;
};

typedef struct {
    HotmigdApiCountsFunc done;
    gpointer data;
} CountWaiter;

/* One request copied for the worker (the transport's strings do not outlive the dispatch), or
 * a count of the pool's VFs (route NULL). */
typedef struct {
    HotmigdApiWorker *worker;
    const HotmigdApi *api; /* borrowed: outlives the worker */
    const Route *route;
    HotmigdPool *count_pool; /* a count: borrowed, outlives the worker */
    guint counts[ORCH_VF_STATE_LAST];
    char *count_why; /* the count failed: why */
    char *method, *path, *peer;
    char *body;
    gsize len;
    HotmigdAuthzClient *who;
    char *args[API_MAX_SEGMENTS + 1];
    HotmigdApiReplyFunc cb;
    gpointer data;
    HotmigdApiReply *reply;
} WorkerJob;

static void worker_job_free(WorkerJob *job)
{
    g_free(job->method);
    g_free(job->path);
    g_free(job->peer);
    g_free(job->body);
    hotmigd_authz_client_free(job->who);
    for (guint i = 0; job->args[i]; i++)
        g_free(job->args[i]);
    hotmigd_api_reply_free(job->reply);
    g_free(job->count_why);
    g_free(job);
}

/* On the worker's context: a count to everyone who waits for it. */
static void worker_count_answer(WorkerJob *job)
{
    g_autoptr(GArray) waiters = g_steal_pointer(&job->worker->count_waiters);

    for (guint i = 0; i < waiters->len; i++) {
        const CountWaiter *w = &g_array_index(waiters, CountWaiter, i);

        w->done(job->count_why ? NULL : job->counts, job->count_why, w->data);
    }
}

/* On the caller's context: the reply to its callback. */
static gboolean worker_answer(gpointer data)
{
    WorkerJob *job = data;

    g_atomic_int_dec_and_test(&job->worker->queued);
    if (job->route)
        job->cb(g_steal_pointer(&job->reply), job->data);
    else
        worker_count_answer(job);
    worker_job_free(job);
    return G_SOURCE_REMOVE;
}

/* On the worker's thread. */
static void worker_count(WorkerJob *job)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) entries = hotmigd_pool_list(job->count_pool, NULL, &error);

    if (!entries) {
        job->count_why = g_strdup_printf("cannot list the pool: %s", error->message);
        return;
    }
    for (guint i = 0; i < entries->len; i++)
        job->counts[((HotmigdPoolEntry *)g_ptr_array_index(entries, i))->state]++;
}

static void worker_run(gpointer data, gpointer user_data)
{
    WorkerJob *job = data;

    if (job->route) {
        HotmigdApiRequest req = {.method = job->method,
                                 .path = job->path,
                                 .body = job->body,
                                 .len = job->len,
                                 .peer = job->peer,
                                 .who = job->who};
        Call c = {job->api, &req, job->args};

        job->reply = job->route->handle(&c);
    } else {
        worker_count(job);
    }
    hm_main_context_post(job->worker->context, G_PRIORITY_DEFAULT, worker_answer, job, NULL);
}

HotmigdApiWorker *hotmigd_api_worker_new(guint max_queued)
{
    HotmigdApiWorker *worker = g_new0(HotmigdApiWorker, 1);

    worker->context = g_main_context_ref_thread_default();
    worker->max_queued = max_queued ? max_queued : HOTMIGD_API_WORKER_MAX_QUEUED;
    /* One thread, exclusive: started now, never more. */
    worker->threads = g_thread_pool_new(worker_run, worker, 1, TRUE, NULL);
    g_assert(worker->threads != NULL);
    return worker;
}

void hotmigd_api_worker_free(HotmigdApiWorker *worker)
{
    if (!worker)
        return;
    /* Runs what is queued (each job is bounded by the host's timeouts), then stops. */
    g_thread_pool_free(worker->threads, FALSE, TRUE);
    /* Replies not delivered yet: delivered now, on this (the worker's) context. */
    while (g_atomic_int_get(&worker->queued) > 0)
        g_main_context_iteration(worker->context, TRUE);
    g_main_context_unref(worker->context);
    g_free(worker);
}

guint hotmigd_api_worker_queued(const HotmigdApiWorker *worker)
{
    g_return_val_if_fail(worker != NULL, 0);
    return (guint)g_atomic_int_get(&((HotmigdApiWorker *)worker)->queued);
}

static gboolean worker_full(HotmigdApiWorker *worker)
{
    return (guint)g_atomic_int_get(&worker->queued) >= worker->max_queued;
}

void hotmigd_api_worker_count_vfs(HotmigdApiWorker *worker, HotmigdPool *pool,
                                  HotmigdApiCountsFunc done, gpointer data)
{
    CountWaiter waiter = {done, data};
    WorkerJob *job;

    g_return_if_fail(worker && pool && done);
    if (worker->count_waiters) {
        g_array_append_val(worker->count_waiters, waiter);
        return;
    }
    if (worker_full(worker)) {
        g_autofree char *why = g_strdup_printf(
            "not counted: %u pool requests are waiting (the host is slow to answer, libvirt maybe)",
            worker->max_queued);

        done(NULL, why, data);
        return;
    }
    worker->count_waiters = g_array_new(FALSE, FALSE, sizeof(CountWaiter));
    g_array_append_val(worker->count_waiters, waiter);
    job = g_new0(WorkerJob, 1);
    job->worker = worker;
    job->count_pool = pool;
    g_atomic_int_inc(&worker->queued);
    g_thread_pool_push(worker->threads, job, NULL);
}

static void worker_push(const HotmigdApi *api, const Route *route, const HotmigdApiRequest *req,
                        const char *const *args, HotmigdApiReplyFunc cb, gpointer data)
{
    HotmigdApiWorker *worker = api->worker;
    WorkerJob *job;

    if (worker_full(worker)) {
        cb(hotmigd_api_reply_error(
               503,
               "this hotmigd has %u pool requests waiting (its host is slow to answer, "
               "libvirt maybe): try again later",
               worker->max_queued),
           data);
        return;
    }
    job = g_new0(WorkerJob, 1);
    job->worker = worker;
    job->api = api;
    job->route = route;
    job->method = g_strdup(req->method);
    job->path = g_strdup(req->path);
    job->peer = g_strdup(req->peer);
    job->body = req->len ? g_memdup2(req->body, req->len) : NULL;
    job->len = req->len;
    job->who = req->who
                   ? hotmigd_authz_client_new(req->who->identity, req->who->host, req->who->roles)
                   : NULL;
    for (guint i = 0; args[i]; i++)
        job->args[i] = g_strdup(args[i]);
    job->cb = cb;
    job->data = data;
    g_atomic_int_inc(&worker->queued);
    g_thread_pool_push(worker->threads, job, NULL);
}

/* What @route needs of @api, named for a 503 ("this hotmigd does not serve ..."); NULL when
 * it is bound. */
static const char *route_missing(const Route *route, const HotmigdApi *api)
{
    const HotmigdApiServices *services = api->services;

    switch (route->need) {
    case NEED_POOL:
        return api->pool ? NULL : "its VF pool";
    case NEED_MIGRATION_START:
        return services && services->migration_start ? NULL : "migrations";
    case NEED_MIGRATION_GET:
        return services && services->migration_get ? NULL : "migrations";
    case NEED_SNAPSHOT:
        return services && services->snapshot ? NULL : "snapshots";
    case NEED_ALERTS:
        return api->alerts ? NULL : "alerts";
    }
    g_return_val_if_reached("?");
}

/* Does @seg (the path's segments) match @pattern? Fills @ret_args (borrowed from @seg). */
static gboolean route_match(const char *pattern, char **seg, const char **ret_args)
{
    g_auto(GStrv) parts = g_strsplit(pattern, "/", -1);
    guint n = 0, i;

    if (g_strv_length(parts) != g_strv_length(seg))
        return FALSE;
    for (i = 0; parts[i]; i++) {
        if (g_ascii_isupper(parts[i][0]))
            ret_args[n++] = seg[i];
        else if (!g_str_equal(parts[i], seg[i]))
            return FALSE;
    }
    ret_args[n] = NULL;
    return TRUE;
}

/* Every route bound to @api, for the 404's message: "GET /v1/host, ..." (owned). */
static char *route_list(const HotmigdApi *api)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; i < G_N_ELEMENTS(api_routes); i++) {
        const Route *r = &api_routes[i];

        if (r->need == NEED_ALERTS && route_missing(r, api))
            continue;
        g_string_append_printf(out, "%s%s /v1/%s", out->len ? ", " : "",
                               r->method ? r->method : "GET|POST", r->pattern);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static HotmigdApiReply *unavailable(const char *what)
{
    return hotmigd_api_reply_error(503, "this hotmigd does not serve %s", what);
}

void hotmigd_api_dispatch(const HotmigdApi *api, const HotmigdApiRequest *req,
                          HotmigdApiReplyFunc cb, gpointer data)
{
    g_auto(GStrv) seg = NULL;
    g_autoptr(GString) allowed = g_string_new(NULL);
    const char *args[API_MAX_SEGMENTS + 1];
    const Route *route = NULL;
    const char *missing;

    g_return_if_fail(api && req && req->method && req->path && (req->body || !req->len) && cb);

    seg = path_segments(req->path);
    for (guint i = 0; seg && i < G_N_ELEMENTS(api_routes) && !route; i++) {
        const Route *r = &api_routes[i];

        if (!route_match(r->pattern, seg, args))
            continue;
        if (r->need == NEED_ALERTS && route_missing(r, api))
            continue; /* no alert hook: no such path */
        if (!r->method || g_str_equal(r->method, req->method))
            route = r;
        else
            g_string_append_printf(allowed, "%s%s", allowed->len ? ", " : "", r->method);
    }
    if (!route && allowed->len) {
        cb(method_not_allowed(req->method, req->path, allowed->str), data);
    } else if (!route) {
        g_autofree char *paths = route_list(api);

        cb(hotmigd_api_reply_error(404, "no API path %.200s (%s)", req->path, paths), data);
    } else if (!req->who || !(req->who->roles & route->roles)) {
        cb(hotmigd_api_reply_error(
               403,
               "'%.128s' may not %s /v1/%s: its certificate is neither a [host NAME] identity nor in [hotmigd] operators%s",
               req->who ? req->who->identity : "an unknown client", req->method, route->pattern,
               req->who && req->who->roles ? " (this needs one of the cluster's hosts)" : ""),
           data);
    } else if ((missing = route_missing(route, api))) {
        cb(unavailable(missing), data);
    } else if (route->handle_async) {
        Call c = {api, req, (char **)args};

        route->handle_async(&c, cb, data);
    } else if (api->worker && route->need == NEED_POOL) {
        worker_push(api, route, req, args, cb, data);
    } else {
        Call c = {api, req, (char **)args};

        cb(route->handle(&c), data);
    }
}

static void api_handle_keep(HotmigdApiReply *reply, gpointer data)
{
    *(HotmigdApiReply **)data = reply;
}

HotmigdApiReply *hotmigd_api_handle(HotmigdPool *pool, const char *method, const char *path,
                                    const char *body, gsize len)
{
    static const char *const roots[] = {"/", NULL};
    HotmigdApi api = {.pool = pool, .file_roots = roots};
    g_autoptr(HotmigdAuthzClient) who =
        hotmigd_authz_client_new("test", "test", HOTMIGD_ROLE_HOST | HOTMIGD_ROLE_OPERATOR);
    HotmigdApiRequest req = {.method = method, .path = path, .body = body, .len = len, .who = who};
    HotmigdApiReply *reply = NULL;

    g_return_val_if_fail(pool && method && path && (body || !len), NULL);
    /* Without services every request is answered at once. */
    hotmigd_api_dispatch(&api, &req, api_handle_keep, &reply);
    g_assert(reply != NULL);
    return reply;
}
