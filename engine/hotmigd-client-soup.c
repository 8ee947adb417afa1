/* The HTTPS client of hotmigd (OrchHotmigdClientOps over libsoup): one SoupSession per daemon, the
 * client certificate on every message, the CA as the only trust anchor. Calls are synchronous: each
 * runs the session's own main context until the reply is read or the deadline cancels it. One
 * of the two files that use libsoup (hotmigd/server.c is the other; docs/decisions.md). Replies are
 * size-limited and checked before use. */
#include "engine/hotmigd-client.h"

#include <string.h>

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "engine/json.h"
#include "hotplug/hotplug.h"

#define VFD_TIMEOUT_MAX 3600
#define VFD_READ_CHUNK (64 * 1024)

typedef struct {
    OrchHotmigdClient parent;
    GMainContext *ctx; /* the session's; pushed for each call */
    SoupSession *session;
    GTlsCertificate *cert;
    char *cert_path;
    char *ca_path;
    char *host; /* the URL's host, for messages */
    guint timeout_s;
} VfdClient;

/* ---- one request -------------------------------------------------------------------------- */

typedef struct {
    GAsyncResult *result;
    gboolean timed_out;
    gboolean given_up; /* cancelled, and still no result after a grace period */
    GCancellable *cancel;
    GMainContext *ctx;
} Wait;

#define VFD_CANCEL_GRACE_S 2

static void wait_done(GObject *source, GAsyncResult *result, gpointer data)
{
    Wait *wait = data;

    wait->result = g_object_ref(result);
}

static gboolean wait_give_up(gpointer data)
{
    Wait *wait = data;

    wait->given_up = TRUE;
    return G_SOURCE_REMOVE;
}

static gboolean wait_deadline(gpointer data)
{
    Wait *wait = data;
    GSource *grace = g_timeout_source_new_seconds(VFD_CANCEL_GRACE_S);

    wait->timed_out = TRUE;
    g_cancellable_cancel(wait->cancel);
    /* Should the cancelled operation never complete, the wait still ends. */
    g_source_set_callback(grace, wait_give_up, wait, NULL);
    g_source_attach(grace, wait->ctx);
    g_source_unref(grace);
    return G_SOURCE_REMOVE;
}

/* Runs the client's context until @wait has a result; returns it (owned), or NULL when the
 * operation did not even end after its cancellation (then the session's connections are
 * dropped). */
static GAsyncResult *wait_run(VfdClient *client, Wait *wait)
{
    while (!wait->result && !wait->given_up)
        g_main_context_iteration(client->ctx, TRUE);
    if (!wait->result)
        soup_session_abort(client->session);
    return g_steal_pointer(&wait->result);
}

/* The server's certificate did not verify: remember why, refuse it. */
static gboolean on_accept_certificate(SoupMessage *msg, GTlsCertificate *cert,
                                      GTlsCertificateFlags errors, gpointer data)
{
    GTlsCertificateFlags *seen = data;

    *seen = errors;
    return FALSE;
}

/* Why the server's certificate was refused, from the verification flags. */
static char *tls_flags_text(VfdClient *client, GTlsCertificateFlags flags)
{
    g_autoptr(GString) s = g_string_new(NULL);

    if (flags & G_TLS_CERTIFICATE_UNKNOWN_CA)
        g_string_append_printf(s, "%snot signed by CA '%s'", s->len ? ", " : "", client->ca_path);
    if (flags & G_TLS_CERTIFICATE_BAD_IDENTITY)
        g_string_append_printf(s, "%sdoes not name host '%s'", s->len ? ", " : "", client->host);
    if (flags & G_TLS_CERTIFICATE_NOT_ACTIVATED)
        g_string_append_printf(s, "%snot valid yet", s->len ? ", " : "");
    if (flags & G_TLS_CERTIFICATE_EXPIRED)
        g_string_append_printf(s, "%sexpired", s->len ? ", " : "");
    if (flags & G_TLS_CERTIFICATE_REVOKED)
        g_string_append_printf(s, "%srevoked", s->len ? ", " : "");
    if (flags & G_TLS_CERTIFICATE_INSECURE)
        g_string_append_printf(s, "%sinsecure (weak algorithm)", s->len ? ", " : "");
    if (!s->len)
        g_string_append(s, "not valid");
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* What happened to a message on its way, for the error messages. */
typedef struct {
    GTlsCertificateFlags server_flags; /* why the server's certificate was refused; 0: it was not */
    gboolean handshaked;               /* the TLS handshake completed (as the client sees it) */
    gboolean got_headers;              /* the response began */
} Progress;

static void on_network_event(SoupMessage *msg, GSocketClientEvent event, GIOStream *conn,
                             gpointer data)
{
    Progress *progress = data;

    if (event == G_SOCKET_CLIENT_TLS_HANDSHAKED)
        progress->handshaked = TRUE;
}

static void on_got_headers(SoupMessage *msg, gpointer data)
{
    Progress *progress = data;

    progress->got_headers = TRUE;
}

/* An error of the transport (connect, TLS, read) in words an operator can act on. */
static void request_fail(VfdClient *client, const char *what, GError *local,
                         const Progress *progress, gboolean timed_out, GError **error)
{
    const char *url = client->parent.url;
    GTlsCertificateFlags server_flags = progress ? progress->server_flags : 0;

    if (timed_out || g_error_matches(local, G_IO_ERROR, G_IO_ERROR_TIMED_OUT)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_TIMEOUT,
                    "hotmigd at %s did not answer %s within %u s", url, what, client->timeout_s);
    } else if (server_flags) {
        g_autofree char *why = tls_flags_text(client, server_flags);

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE, "certificate of hotmigd at %s %s",
                    url, why);
    } else if (local->domain == G_TLS_ERROR ||
               (progress && progress->handshaked && !progress->got_headers)) {
        /* The daemon checks our certificate during (TLS 1.2: an alert) or right after (TLS 1.3:
         * the connection ends before any answer) the handshake. */
        g_set_error(
            error, ORCH_ERROR, ORCH_ERROR_UNAVAILABLE,
            "hotmigd at %s refused our certificate '%s' (it ended the connection at the TLS handshake: is the certificate signed by the CA hotmigd trusts, and valid? hotmigd's log says why): %s",
            url, client->cert_path, local->message);
    } else {
        /* Before any handshake: the connection itself failed, the request went nowhere (no
         * @progress: the request was answered, its body was being read). */
        gboolean unreached = progress && !progress->handshaked;

        g_set_error(error, ORCH_ERROR, unreached ? ORCH_ERROR_UNREACHABLE : ORCH_ERROR_UNAVAILABLE,
                    "Cannot reach hotmigd at %s (%s): %s", url, what, local->message);
    }
}

/* Reads all of @stream, at most ORCH_HOTMIGD_CLIENT_REPLY_MAX bytes (owned, NUL-terminated). */
static GBytes *request_read(VfdClient *client, GInputStream *stream, Wait *wait, const char *what,
                            GError **error)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();

    for (;;) {
        g_autoptr(GAsyncResult) res = NULL;
        g_autoptr(GBytes) chunk = NULL;
        g_autoptr(GError) local = NULL;

        g_input_stream_read_bytes_async(stream, VFD_READ_CHUNK, G_PRIORITY_DEFAULT, wait->cancel,
                                        wait_done, wait);
        res = wait_run(client, wait);
        chunk = res ? g_input_stream_read_bytes_finish(stream, res, &local) : NULL;
        if (!chunk) {
            request_fail(client, what, local, NULL, wait->timed_out, error);
            return NULL;
        }
        if (g_bytes_get_size(chunk) == 0)
            break;
        if (buf->len + g_bytes_get_size(chunk) > ORCH_HOTMIGD_CLIENT_REPLY_MAX) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "hotmigd at %s sent a reply to %s larger than %d bytes", client->parent.url,
                        what, ORCH_HOTMIGD_CLIENT_REPLY_MAX);
            return NULL;
        }
        g_byte_array_append(buf, g_bytes_get_data(chunk, NULL), g_bytes_get_size(chunk));
    }
    return g_byte_array_free_to_bytes(g_steal_pointer(&buf));
}

/* The message of @method @url with @body (a JSON object or NULL), its events told to
 * @progress (owned; @url was checked by orch_hotmigd_client_new()). */
static SoupMessage *request_message(VfdClient *client, const char *method, const char *url,
                                    JsonBuilder *body, Progress *progress)
{
    g_autoptr(SoupMessage) msg = soup_message_new(method, url);

    g_return_val_if_fail(msg != NULL, NULL);
    if (body) {
        g_autoptr(JsonGenerator) gen = json_generator_new();
        g_autoptr(JsonNode) node = json_builder_get_root(body);
        g_autoptr(GBytes) req = NULL;
        gsize text_len = 0;
        char *text;

        json_generator_set_root(gen, node);
        text = json_generator_to_data(gen, &text_len);
        req = g_bytes_new_take(text, text_len);
        soup_message_set_request_body_from_bytes(msg, "application/json", req);
    }
    /* One connection per request: a kept-alive connection that goes idle between the phases of
     * a migration (minutes) can be closed under a request by the session's idle timer. */
    soup_message_headers_replace(soup_message_get_request_headers(msg), "Connection", "close");
    soup_message_set_tls_client_certificate(msg, client->cert);
    g_signal_connect(msg, "accept-certificate", G_CALLBACK(on_accept_certificate),
                     &progress->server_flags);
    g_signal_connect(msg, "network-event", G_CALLBACK(on_network_event), progress);
    g_signal_connect(msg, "got-headers", G_CALLBACK(on_got_headers), progress);
    return g_steal_pointer(&msg);
}

/* Sends @msg and reads its reply's body (owned), within the client's timeout; NULL with why
 * (request_fail()). */
static GBytes *request_send(VfdClient *client, SoupMessage *msg, Progress *progress,
                            const char *what, GError **error)
{
    g_autoptr(GCancellable) cancel = g_cancellable_new();
    g_autoptr(GAsyncResult) res = NULL;
    g_autoptr(GInputStream) stream = NULL;
    g_autoptr(GBytes) bytes = NULL;
    g_autoptr(GError) local = NULL;
    Wait wait = {.cancel = cancel, .ctx = client->ctx};
    GSource *timer;

    g_main_context_push_thread_default(client->ctx);
    timer = g_timeout_source_new_seconds(client->timeout_s);
    g_source_set_callback(timer, wait_deadline, &wait, NULL);
    g_source_attach(timer, client->ctx);
    soup_session_send_async(client->session, msg, G_PRIORITY_DEFAULT, cancel, wait_done, &wait);
    res = wait_run(client, &wait);
    stream = res ? soup_session_send_finish(client->session, res, &local) : NULL;
    if (stream)
        bytes = request_read(client, stream, &wait, what, error);
    else
        request_fail(client, what, local, progress, wait.timed_out, error);
    if (stream)
        g_input_stream_close(stream, NULL, NULL);
    g_source_destroy(timer);
    g_source_unref(timer);
    /* Let the session finish what the cancelled or completed request left in the context. */
    while (g_main_context_iteration(client->ctx, FALSE))
        ;
    g_main_context_pop_thread_default(client->ctx);
    return g_steal_pointer(&bytes);
}

/* The reply @bytes to @msg as a JSON object (owned) when its status is @want, else NULL with
 * the daemon's message. */
static JsonObject *request_reply(VfdClient *client, SoupMessage *msg, GBytes *bytes,
                                 const char *what, guint want, GError **error)
{
    g_autoptr(GError) local_depth = NULL;
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    guint status = soup_message_get_status(msg);
    gsize len;
    const char *data = g_bytes_get_data(bytes, &len);
    JsonNode *root;

    /* A peer's reply: nesting is checked before json-glib (which recurses per level) sees it. */
    if (!hm_json_check_depth(data, (gssize)len, HM_JSON_MAX_DEPTH, &local_depth)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "hotmigd at %s answered %s with %u %s: %s",
                    client->parent.url, what, status, soup_status_get_phrase(status),
                    local_depth->message);
        return NULL;
    }
    if (len == 0 || !g_utf8_validate(data, len, NULL) ||
        !json_parser_load_from_data(parser, data, len, NULL) ||
        !(root = json_parser_get_root(parser)) || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "hotmigd at %s answered %s with %u %s and a body that is not a JSON object",
                    client->parent.url, what, status, soup_status_get_phrase(status));
        return NULL;
    }
    if (status != want) {
        JsonNode *node = json_object_get_member(json_node_get_object(root), "error");
        const char *message =
            node && JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == G_TYPE_STRING
                ? json_node_get_string(node)
                : NULL;
        OrchError code = status == 400 || status == 413 || status == 422 ? ORCH_ERROR_INVALID
                         : status == 404                                 ? ORCH_ERROR_NOT_FOUND
                         : status == 409                                 ? ORCH_ERROR_CONFLICT
                         : status == 403                                 ? ORCH_ERROR_FORBIDDEN
                         : status == 503                                 ? ORCH_ERROR_UNAVAILABLE
                                                                         : ORCH_ERROR_FAILED;

        g_set_error(error, ORCH_ERROR, code, "hotmigd at %s refused %s (%u %s): %s",
                    client->parent.url, what, status, soup_status_get_phrase(status),
                    message ? message : "(no message)");
        return NULL;
    }
    return json_object_ref(json_node_get_object(root));
}

/* @method @path with @body (a JSON object or NULL); the reply's JSON object (owned) when the
 * status is @want, else NULL with the daemon's message. */
static JsonObject *request(VfdClient *client, const char *method, const char *path,
                           JsonBuilder *body, guint want, GError **error)
{
    g_autofree char *url = g_strconcat(client->parent.url, path, NULL);
    g_autofree char *what = g_strdup_printf("%s %s", method, path);
    Progress progress = {0};
    g_autoptr(SoupMessage) msg = request_message(client, method, url, body, &progress);
    g_autoptr(GBytes) bytes = NULL;

    if (!msg)
        return NULL;
    bytes = request_send(client, msg, &progress, what, error);
    if (!bytes)
        return NULL;
    return request_reply(client, msg, bytes, what, want, error);
}

/* ---- replies --------------------------------------------------------------------------------- */

/* "hotmigd at URL sent a bad reply to WHAT: member 'NAME' ..." */
static gboolean reply_bad(VfdClient *client, const char *what, const char *name,
                          const char *problem, GError **error)
{
    g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                "hotmigd at %s sent a bad reply to %s: member '%s' %s", client->parent.url, what,
                name, problem);
    return FALSE;
}

/* String member: *ret NULL when null or absent and !@required. Owned copy. */
static gboolean reply_string(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                             gboolean required, char **ret, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);

    if (!node || JSON_NODE_HOLDS_NULL(node)) {
        if (required)
            return reply_bad(client, what, name, "is missing", error);
        *ret = NULL;
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING)
        return reply_bad(client, what, name, "is not a string", error);
    *ret = g_strdup(json_node_get_string(node));
    return TRUE;
}

static gboolean reply_int(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                          gint64 min, gint64 max, gint64 absent, gint64 *ret, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);

    if (!node || JSON_NODE_HOLDS_NULL(node)) {
        *ret = absent;
        return TRUE;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64 ||
        json_node_get_int(node) < min || json_node_get_int(node) > max)
        return reply_bad(client, what, name, "is not a number in range", error);
    *ret = json_node_get_int(node);
    return TRUE;
}

/* An ISO 8601 time member as unix seconds, 0 when null. */
static gboolean reply_time(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                           gint64 *ret, GError **error)
{
    g_autofree char *text = NULL;
    g_autoptr(GDateTime) t = NULL;

    if (!reply_string(client, what, obj, name, FALSE, &text, error))
        return FALSE;
    if (!text) {
        *ret = 0;
        return TRUE;
    }
    t = g_date_time_new_from_iso8601(text, NULL);
    if (!t)
        return reply_bad(client, what, name, "is not an ISO 8601 time", error);
    *ret = g_date_time_to_unix(t);
    return TRUE;
}

static gboolean reply_enum(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                           int (*from_string)(const char *), int *ret, GError **error)
{
    g_autofree char *text = NULL;
    int value;

    if (!reply_string(client, what, obj, name, TRUE, &text, error))
        return FALSE;
    value = from_string(text);
    if (value < 0)
        return reply_bad(client, what, name, "has an unknown value", error);
    *ret = value;
    return TRUE;
}

/* A hex id "0x15b3" or null (0). */
static gboolean reply_hex(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                          guint *ret, GError **error)
{
    g_autofree char *text = NULL;
    guint64 value = 0;

    if (!reply_string(client, what, obj, name, FALSE, &text, error))
        return FALSE;
    if (text && (!g_str_has_prefix(text, "0x") ||
                 !g_ascii_string_to_unsigned(text + 2, 16, 0, 0xffff, &value, NULL)))
        return reply_bad(client, what, name, "is not a hex id like \"0x15b3\"", error);
    *ret = (guint)value;
    return TRUE;
}

static HotplugLease *reply_lease(VfdClient *client, const char *what, JsonObject *obj,
                                 GError **error)
{
    g_autoptr(HotplugLease) lease = g_new0(HotplugLease, 1);
    int state = 0;

    if (!reply_string(client, what, obj, "vf", TRUE, &lease->vf, error) ||
        !reply_string(client, what, obj, "id", TRUE, &lease->id, error) ||
        !reply_enum(client, what, obj, "state", orch_vf_state_from_string, &state, error) ||
        !reply_string(client, what, obj, "holder", FALSE, &lease->holder, error) ||
        !reply_string(client, what, obj, "reason", FALSE, &lease->reason, error) ||
        !reply_string(client, what, obj, "domain", FALSE, &lease->domain, error) ||
        !reply_time(client, what, obj, "created", &lease->created, error) ||
        !reply_time(client, what, obj, "expires", &lease->expires, error))
        return NULL;
    if (state != ORCH_VF_STATE_LEASED && state != ORCH_VF_STATE_ASSIGNED) {
        reply_bad(client, what, "state", "is neither 'leased' nor 'assigned'", error);
        return NULL;
    }
    lease->state = (HotplugLeaseState)state; /* the same values */
    return g_steal_pointer(&lease);
}

/* An object member (NULL when null or absent). */
static gboolean reply_object(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                             JsonObject **ret, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);

    *ret = NULL;
    if (!node || JSON_NODE_HOLDS_NULL(node))
        return TRUE;
    if (!JSON_NODE_HOLDS_OBJECT(node))
        return reply_bad(client, what, name, "is not an object", error);
    *ret = json_node_get_object(node);
    return TRUE;
}

static gboolean reply_strv(VfdClient *client, const char *what, JsonObject *obj, const char *name,
                           char ***ret, GError **error)
{
    JsonNode *node = json_object_get_member(obj, name);
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);
    JsonArray *array;

    if (node && !JSON_NODE_HOLDS_ARRAY(node))
        return reply_bad(client, what, name, "is not an array", error);
    array = node ? json_node_get_array(node) : NULL;
    for (guint i = 0; array && i < json_array_get_length(array); i++) {
        JsonNode *item = json_array_get_element(array, i);

        if (!JSON_NODE_HOLDS_VALUE(item) || json_node_get_value_type(item) != G_TYPE_STRING)
            return reply_bad(client, what, name, "holds something else than strings", error);
        g_ptr_array_add(out, g_strdup(json_node_get_string(item)));
    }
    g_ptr_array_add(out, NULL);
    *ret = (char **)g_ptr_array_steal(out, NULL);
    return TRUE;
}

/* ---- the operations -------------------------------------------------------------------------- */

/* "/v1/leases/VF/ID" and the like, each id escaped (owned). */
static char *path_join(const char *prefix, const char *a, const char *b, const char *suffix)
{
    g_autofree char *ea = g_uri_escape_string(a, NULL, FALSE);
    g_autofree char *eb = b ? g_uri_escape_string(b, NULL, FALSE) : NULL;

    return g_strconcat(prefix, ea, eb ? "/" : "", eb ? eb : "", suffix ? suffix : "", NULL);
}

static OrchHotmigdHostInfo *client_host(OrchHotmigdClient *vfd, GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    const char *what = "GET /v1/host";
    g_autoptr(JsonObject) obj = request(client, "GET", "/v1/host", NULL, 200, error);
    g_autoptr(OrchHotmigdHostInfo) info = NULL;
    JsonObject *pool = NULL;
    gint64 n = 0;

    if (!obj)
        return NULL;
    info = g_new0(OrchHotmigdHostInfo, 1);
    if (!reply_string(client, what, obj, "name", TRUE, &info->name, error) ||
        !reply_string(client, what, obj, "version", TRUE, &info->version, error) ||
        !reply_object(client, what, obj, "pool", &pool, error) ||
        !reply_strv(client, what, obj, "warnings", &info->warnings, error))
        return NULL;
    if (!pool) {
        reply_bad(client, what, "pool", "is missing", error);
        return NULL;
    }
    if (!reply_int(client, what, pool, "size", 0, G_MAXUINT32, 0, &n, error))
        return NULL;
    info->pool_size = n;
    for (int st = 0; st < ORCH_VF_STATE_LAST; st++) {
        if (!reply_int(client, what, pool, orch_vf_state_to_string(st), 0, G_MAXUINT32, 0, &n,
                       error))
            return NULL;
        info->counts[st] = n;
    }
    return g_steal_pointer(&info);
}

static GPtrArray *client_list(OrchHotmigdClient *vfd, GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    const char *what = "GET /v1/vfs";
    g_autoptr(JsonObject) obj = request(client, "GET", "/v1/vfs", NULL, 200, error);
    g_autoptr(GPtrArray) out = NULL;
    JsonNode *node;
    JsonArray *vfs;

    if (!obj)
        return NULL;
    node = json_object_get_member(obj, "vfs");
    if (!node || !JSON_NODE_HOLDS_ARRAY(node)) {
        reply_bad(client, what, "vfs", "is not an array", error);
        return NULL;
    }
    vfs = json_node_get_array(node);
    out = g_ptr_array_new_with_free_func((GDestroyNotify)orch_hotmigd_vf_info_free);
    for (guint i = 0; i < json_array_get_length(vfs); i++) {
        JsonNode *item = json_array_get_element(vfs, i);
        g_autoptr(OrchHotmigdVfInfo) vf = g_new0(OrchHotmigdVfInfo, 1);
        JsonObject *e, *lease = NULL;
        int kind = 0, state = 0;
        gint64 index = -1;

        if (!JSON_NODE_HOLDS_OBJECT(item)) {
            reply_bad(client, what, "vfs", "holds something else than objects", error);
            return NULL;
        }
        e = json_node_get_object(item);
        if (!reply_string(client, what, e, "id", TRUE, &vf->id, error) ||
            !reply_enum(client, what, e, "kind", orch_vf_kind_from_string, &kind, error) ||
            !reply_enum(client, what, e, "state", orch_vf_state_from_string, &state, error) ||
            !reply_hex(client, what, e, "vendor_id", &vf->vendor_id, error) ||
            !reply_hex(client, what, e, "device_id", &vf->device_id, error) ||
            !reply_string(client, what, e, "pf", FALSE, &vf->pf, error) ||
            !reply_int(client, what, e, "vf_index", 0, G_MAXINT32, -1, &index, error) ||
            !reply_string(client, what, e, "driver", FALSE, &vf->driver, error) ||
            !reply_object(client, what, e, "lease", &lease, error) ||
            !reply_string(client, what, e, "assigned_to", FALSE, &vf->assigned_to, error) ||
            !reply_string(client, what, e, "note", FALSE, &vf->note, error))
            return NULL;
        vf->kind = kind;
        vf->state = state;
        vf->vf_index = (int)index;
        if (lease && !(vf->lease = reply_lease(client, what, lease, error)))
            return NULL;
        g_ptr_array_add(out, g_steal_pointer(&vf));
    }
    return g_steal_pointer(&out);
}

static HotplugLease *client_lease(OrchHotmigdClient *vfd, const OrchHotmigdLeaseRequest *req,
                                  GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;

    json_builder_begin_object(b);
    if (req->vf) {
        orch_json_member_string(b, "vf", req->vf);
    } else {
        g_autofree char *vendor = g_strdup_printf("0x%04x", req->vendor_id);
        g_autofree char *device = g_strdup_printf("0x%04x", req->device_id);

        orch_json_member_string(b, "vendor_id", vendor);
        orch_json_member_string(b, "device_id", device);
    }
    orch_json_member_string(b, "holder", req->holder);
    orch_json_member_string(b, "reason", req->reason);
    orch_json_member_string(b, "domain", req->domain);
    if (req->ttl_s)
        orch_json_member_int(b, "ttl", req->ttl_s);
    json_builder_end_object(b);
    obj = request(client, "POST", "/v1/leases", b, 201, error);
    return obj ? reply_lease(client, "POST /v1/leases", obj, error) : NULL;
}

static HotplugLease *client_confirm(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                                    GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/leases/", vf, lease_id, "/confirm");
    g_autofree char *what = g_strconcat("POST ", path, NULL);
    g_autoptr(JsonObject) obj = request(client, "POST", path, NULL, 200, error);

    return obj ? reply_lease(client, what, obj, error) : NULL;
}

static gboolean client_release(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                               GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/leases/", vf, lease_id, NULL);
    g_autoptr(JsonObject) obj = request(client, "DELETE", path, NULL, 200, error);

    return obj != NULL;
}

static gboolean client_renew(OrchHotmigdClient *vfd, const char *vf, const char *lease_id,
                             guint ttl_s, GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/leases/", vf, lease_id, "/renew");
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;

    json_builder_begin_object(b);
    if (ttl_s)
        orch_json_member_int(b, "ttl", ttl_s);
    json_builder_end_object(b);
    obj = request(client, "POST", path, b, 200, error);
    return obj != NULL;
}

/* The reply's "note", when @ret_note wants it. */
static gboolean client_note(VfdClient *client, const char *what, JsonObject *obj, char **ret_note,
                            GError **error)
{
    g_autofree char *note = NULL;

    if (!reply_string(client, what, obj, "note", FALSE, &note, error))
        return FALSE;
    if (ret_note)
        *ret_note = g_steal_pointer(&note);
    return TRUE;
}

static gboolean client_ib_identity(OrchHotmigdClient *vfd, const char *vf, guint64 node_guid,
                                   guint64 port_guid, char **ret_note, GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/vfs/", vf, NULL, "/ib-identity");
    g_autofree char *what = g_strconcat("POST ", path, NULL);
    g_autofree char *node = hotplug_guid_format(node_guid);
    g_autofree char *port = hotplug_guid_format(port_guid);
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;

    json_builder_begin_object(b);
    orch_json_member_string(b, "node_guid", node);
    orch_json_member_string(b, "port_guid", port);
    json_builder_end_object(b);
    obj = request(client, "POST", path, b, 200, error);
    return obj && client_note(client, what, obj, ret_note, error);
}

static gboolean client_identity(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                                guint64 *ret_node_guid, guint64 *ret_port_guid, char **ret_source,
                                GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/vfs/", vf, "identity", NULL);
    g_autofree char *full = NULL;
    g_autofree char *what = NULL;
    g_autofree char *escaped = g_uri_escape_string(domain, NULL, FALSE);
    g_autofree char *node = NULL;
    g_autofree char *port = NULL;
    g_autofree char *source = NULL;
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(GError) local = NULL;
    guint64 guids[2] = {0};

    full = g_strconcat(path, "/", escaped, NULL);
    what = g_strconcat("GET ", full, NULL);
    obj = request(client, "GET", full, NULL, 200, error);
    if (!obj || !reply_string(client, what, obj, "node_guid", TRUE, &node, error) ||
        !reply_string(client, what, obj, "port_guid", TRUE, &port, error) ||
        !reply_string(client, what, obj, "source", FALSE, &source, error))
        return FALSE;
    if (!hotplug_guid_parse(node, &guids[0], &local) ||
        !hotplug_guid_parse(port, &guids[1], &local) || !guids[0] || !guids[1]) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "hotmigd at %s answered %s: %s",
                    client->parent.url, what, local ? local->message : "a zero GUID");
        return FALSE;
    }
    *ret_node_guid = guids[0];
    *ret_port_guid = guids[1];
    if (ret_source)
        *ret_source = hm_text_sanitize(source, HM_TEXT_UNTRUSTED_MAX);
    return TRUE;
}

static gboolean client_vfio(OrchHotmigdClient *vfd, const char *vf, char **ret_note, GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/vfs/", vf, NULL, "/vfio");
    g_autofree char *what = g_strconcat("POST ", path, NULL);
    g_autoptr(JsonObject) obj = request(client, "POST", path, NULL, 200, error);

    return obj && client_note(client, what, obj, ret_note, error);
}

static gboolean client_left(OrchHotmigdClient *vfd, const char *vf, const char *domain,
                            GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/vfs/", vf, NULL, "/left");
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;

    json_builder_begin_object(b);
    orch_json_member_string(b, "domain", domain);
    json_builder_end_object(b);
    obj = request(client, "POST", path, b, 200, error);
    return obj != NULL;
}

static GPtrArray *client_files_missing(OrchHotmigdClient *vfd, const char *const *paths,
                                       GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(GPtrArray) missing = g_ptr_array_new_with_free_func(g_free);
    JsonNode *files;

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "paths");
    json_builder_begin_array(b);
    for (const char *const *p = paths; *p; p++)
        json_builder_add_string_value(b, *p);
    json_builder_end_array(b);
    json_builder_end_object(b);
    obj = request(client, "POST", "/v1/files", b, 200, error);
    if (!obj)
        return NULL;
    files = json_object_get_member(obj, "files");
    if (!files || !JSON_NODE_HOLDS_ARRAY(files)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "hotmigd at %s: POST /v1/files: the reply has no 'files' array", vfd->url);
        return NULL;
    }
    for (guint i = 0; i < json_array_get_length(json_node_get_array(files)); i++) {
        JsonNode *el = json_array_get_element(json_node_get_array(files), i);
        JsonObject *f = JSON_NODE_HOLDS_OBJECT(el) ? json_node_get_object(el) : NULL;
        JsonNode *pn = f ? json_object_get_member(f, "path") : NULL;
        const char *path = pn && JSON_NODE_HOLDS_VALUE(pn) &&
                                   json_node_get_value_type(pn) == G_TYPE_STRING
                               ? json_node_get_string(pn)
                               : NULL;

        if (!f || !path || !json_object_has_member(f, "exists")) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "hotmigd at %s: POST /v1/files: files[%u] is not {path, exists}",
                        vfd->url, i);
            return NULL;
        }
        if (!json_object_get_boolean_member_with_default(f, "exists", FALSE))
            g_ptr_array_add(missing, g_strdup(path));
    }
    return g_steal_pointer(&missing);
}

static OrchHotmigdAlertReply *client_alert(OrchHotmigdClient *vfd, const PolAlertEvent *event,
                                           const char *from, gboolean deputy, GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    const char *what = "POST /v1/alerts";
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;
    g_autoptr(OrchHotmigdAlertReply) reply = g_new0(OrchHotmigdAlertReply, 1);
    int action = 0, state = 0;

    json_builder_begin_object(b);
    orch_json_member_string(b, "from", from);
    orch_json_member_bool(b, "deputy", deputy);
    orch_json_member_string(b, "host", event->host);
    if (!event->resolved)
        orch_json_member_string(b, "severity", pol_severity_to_string(event->severity));
    orch_json_member_double(b, "confidence", event->confidence);
    orch_json_member_int(b, "deadline", event->deadline);
    orch_json_member_string(b, "key", event->key);
    orch_json_member_bool(b, "resolved", event->resolved);
    if (event->source)
        orch_json_member_string(b, "source", event->source);
    json_builder_end_object(b);
    obj = request(client, "POST", "/v1/alerts", b, 200, error);
    if (!obj)
        return NULL;
    if (!reply_string(client, what, obj, "result", TRUE, &reply->result, error) ||
        !reply_string(client, what, obj, "actor", TRUE, &reply->actor, error) ||
        !reply_enum(client, what, obj, "action", pol_alert_action_kind_from_string, &action,
                    error) ||
        !reply_enum(client, what, obj, "state", pol_host_state_from_string, &state, error) ||
        !reply_string(client, what, obj, "reason", TRUE, &reply->reason, error))
        return NULL;
    reply->action = action;
    reply->state = state;
    return g_steal_pointer(&reply);
}

static char *client_migration_start(OrchHotmigdClient *vfd, const OrchHotmigdMigrationRequest *req,
                                    GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(JsonObject) obj = NULL;
    char *id = NULL;

    json_builder_begin_object(b);
    orch_json_member_string(b, "domain", req->domain);
    orch_json_member_string(b, "destination", req->destination);
    orch_json_member_string(b, "reason", req->reason);
    if (req->plan)
        orch_json_member_string(b, "plan", req->plan);
    json_builder_end_object(b);
    obj = request(client, "POST", "/v1/migrations", b, 202, error);
    if (!obj || !reply_string(client, "POST /v1/migrations", obj, "id", TRUE, &id, error))
        return NULL;
    return id;
}

static OrchHotmigdMigration *client_migration_get(OrchHotmigdClient *vfd, const char *id,
                                                  GError **error)
{
    VfdClient *client = (VfdClient *)vfd;
    g_autofree char *path = path_join("/v1/migrations/", id, NULL, NULL);
    g_autofree char *what = g_strconcat("GET ", path, NULL);
    g_autoptr(JsonObject) obj = request(client, "GET", path, NULL, 200, error);
    g_autoptr(OrchHotmigdMigration) mig = NULL;
    JsonNode *report;
    int state = 0;

    if (!obj)
        return NULL;
    mig = g_new0(OrchHotmigdMigration, 1);
    if (!reply_string(client, what, obj, "id", TRUE, &mig->id, error) ||
        !reply_string(client, what, obj, "domain", TRUE, &mig->domain, error) ||
        !reply_string(client, what, obj, "source", FALSE, &mig->source, error) ||
        !reply_string(client, what, obj, "destination", TRUE, &mig->destination, error) ||
        !reply_string(client, what, obj, "reason", FALSE, &mig->reason, error) ||
        !reply_string(client, what, obj, "plan", FALSE, &mig->plan, error) ||
        !reply_enum(client, what, obj, "state", orch_hotmigd_migration_state_from_string, &state,
                    error) ||
        !reply_string(client, what, obj, "error", FALSE, &mig->error, error) ||
        !reply_time(client, what, obj, "started", &mig->started, error) ||
        !reply_time(client, what, obj, "finished", &mig->finished, error))
        return NULL;
    mig->state = state;
    report = json_object_get_member(obj, "report");
    if (report && JSON_NODE_HOLDS_OBJECT(report))
        mig->report = json_to_string(report, FALSE);
    else if (report && !JSON_NODE_HOLDS_NULL(report)) {
        reply_bad(client, what, "report", "is not an object", error);
        return NULL;
    }
    return g_steal_pointer(&mig);
}

static void client_free(OrchHotmigdClient *vfd)
{
    VfdClient *client = (VfdClient *)vfd;

    if (client->session) {
        g_main_context_push_thread_default(client->ctx);
        soup_session_abort(client->session);
        g_clear_object(&client->session);
        while (g_main_context_iteration(client->ctx, FALSE))
            ;
        g_main_context_pop_thread_default(client->ctx);
    }
    g_clear_object(&client->cert);
    g_clear_pointer(&client->ctx, g_main_context_unref);
    g_free(client->cert_path);
    g_free(client->ca_path);
    g_free(client->host);
    orch_hotmigd_client_clear(vfd);
    g_free(client);
}

static const OrchHotmigdClientOps vfd_client_ops = {
    .host = client_host,
    .list = client_list,
    .lease = client_lease,
    .confirm = client_confirm,
    .release = client_release,
    .ib_identity = client_ib_identity,
    .identity = client_identity,
    .renew = client_renew,
    .vfio = client_vfio,
    .left = client_left,
    .files_missing = client_files_missing,
    .migration_start = client_migration_start,
    .migration_get = client_migration_get,
    .free = client_free,
    .alert = client_alert,
};

OrchHotmigdClient *orch_hotmigd_client_new(const char *url, const char *cert, const char *key,
                                           const char *ca, guint timeout_s, GError **error)
{
    g_autoptr(GUri) uri = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(GTlsDatabase) db = NULL;
    g_autofree char *base = NULL;
    VfdClient *client;

    g_return_val_if_fail(url && cert && key && ca, NULL);

    uri = g_uri_parse(url, G_URI_FLAGS_NONE, &local);
    if (!uri || g_strcmp0(g_uri_get_scheme(uri), "https") != 0 || !g_uri_get_host(uri) ||
        !*g_uri_get_host(uri) || g_uri_get_userinfo(uri) || g_uri_get_query(uri) ||
        g_uri_get_fragment(uri) ||
        (*g_uri_get_path(uri) && !g_str_equal(g_uri_get_path(uri), "/"))) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "hotmigd URL '%s' is not of the form https://HOST[:PORT]", url);
        return NULL;
    }
    if (timeout_s < 1 || timeout_s > VFD_TIMEOUT_MAX) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "hotmigd timeout %u s is not from 1 to %d s", timeout_s, VFD_TIMEOUT_MAX);
        return NULL;
    }
    if (!g_tls_backend_supports_tls(g_tls_backend_get_default())) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "GIO has no TLS backend (install glib-networking): cannot reach hotmigd at %s",
                    url);
        return NULL;
    }
    db = g_tls_file_database_new(ca, &local);
    if (!db) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Cannot load the CA certificate '%s' for hotmigd at %s: %s", ca, url,
                    local->message);
        return NULL;
    }
    /* libsoup 3.2 builds each TLS client connection without a database and sets the session's
     * only afterwards, so glib-networking first makes the connection's credentials from the
     * backend's default database: the system trust store, ca-certificates.crt parsed again for
     * every connection (~50 ms each on the lab's machine, twice for the first: the lease and the
     * GUIDs' requests were 100 ms). Made from this CA instead, they cost a file of one
     * certificate; the handshake verifies against the session's database either way (libsoup
     * sets it before the handshake). No other GIO TLS client runs in our programs: the
     * process-wide default is ours to choose (docs/decisions.md). */
    g_tls_backend_set_default_database(g_tls_backend_get_default(), db);
    base = g_uri_join(G_URI_FLAGS_NONE, "https", NULL, g_uri_get_host(uri), g_uri_get_port(uri), "",
                      NULL, NULL);
    client = g_new0(VfdClient, 1);
    orch_hotmigd_client_init(&client->parent, &vfd_client_ops, base);
    client->cert = g_tls_certificate_new_from_files(cert, key, &local);
    if (!client->cert) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "Cannot load the client certificate '%s' with key '%s' for hotmigd at %s: %s",
                    cert, key, url, local->message);
        client_free(&client->parent);
        return NULL;
    }
    client->cert_path = g_strdup(cert);
    client->ca_path = g_strdup(ca);
    client->host = g_strdup(g_uri_get_host(uri));
    client->timeout_s = timeout_s;
    client->ctx = g_main_context_new();
    g_main_context_push_thread_default(client->ctx);
    client->session = soup_session_new_with_options(
        "tls-database", db, "proxy-resolver", NULL, "user-agent", "hotmig/" HOTMIG_VERSION,
        "timeout", 0, "idle-timeout", timeout_s, "max-conns-per-host", 1, NULL);
    g_main_context_pop_thread_default(client->ctx);
    return &client->parent;
}
