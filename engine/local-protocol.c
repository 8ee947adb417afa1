/* The client of hotmigd's local API (engine/local-protocol.h), as migrate-vm uses it: one request,
 * its events and its answer over the Unix socket, with a deadline for the whole exchange. */
#include "engine/local-protocol.h"

#include <string.h>

#include <gio/gunixsocketaddress.h>

#include "engine/json-fields.h"
#include "engine/json.h"

#define LOCAL_READ_CHUNK (64 * 1024)
#define LOCAL_REPLY_MAX (64 * 1024 * 1024) /* bytes of a reply line the client accepts */

HM_ENUM_IMPL(orch_local_error_class, OrchLocalErrorClass, ORCH_LOCAL_ERROR_LAST, "InvalidJSON",
             "InvalidParameter", "CommandNotFound", "TooLarge", "NotFound", "Conflict", "Failed")

OrchLocalErrorClass orch_local_error_class_of(const GError *error)
{
    if (error->domain != ORCH_ERROR)
        return ORCH_LOCAL_ERROR_FAILED;
    switch (error->code) {
    case ORCH_ERROR_INVALID:
        return ORCH_LOCAL_ERROR_INVALID_PARAMETER;
    case ORCH_ERROR_NOT_FOUND:
        return ORCH_LOCAL_ERROR_NOT_FOUND;
    case ORCH_ERROR_CONFLICT:
    case ORCH_ERROR_BUSY:
        return ORCH_LOCAL_ERROR_CONFLICT;
    default:
        return ORCH_LOCAL_ERROR_FAILED;
    }
}

char *orch_local_line(JsonBuilder *b)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *text = NULL;

    json_generator_set_root(gen, root);
    text = json_generator_to_data(gen, NULL);
    return g_strconcat(text, "\n", NULL);
}

/* ---- requests ---------------------------------------------------------------------------- */

#define LOCAL_MAX_DEPTH 16

static gboolean request_fail(OrchLocalErrorClass *ret_class, OrchLocalErrorClass cls,
                             GError **error, const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static gboolean request_fail(OrchLocalErrorClass *ret_class, OrchLocalErrorClass cls,
                             GError **error, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    *ret_class = cls;
    g_set_error_literal(error, ORCH_ERROR, ORCH_ERROR_INVALID, msg);
    return FALSE;
}

gboolean orch_local_request_parse(const char *line, gsize len, char **ret_command,
                                  JsonObject **ret_arguments, OrchLocalErrorClass *ret_class,
                                  GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new_immutable();
    g_autoptr(GError) local = NULL;
    g_autoptr(GList) members = NULL;
    JsonNode *root, *args, *execute;
    JsonObject *obj;

    g_return_val_if_fail((line || !len) && ret_command && ret_arguments && ret_class, FALSE);
    if (len && line[len - 1] == '\r')
        len--;
    if (len > ORCH_LOCAL_API_MAX_LINE)
        return request_fail(ret_class, ORCH_LOCAL_ERROR_TOO_LARGE, error,
                            "a request line is longer than %d bytes", ORCH_LOCAL_API_MAX_LINE);
    if ((len && memchr(line, '\0', len)) || !g_utf8_validate(line, len, NULL))
        return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_JSON, error,
                            "the request is not UTF-8 text");
    if (!hm_json_check_depth(line, (gssize)len, LOCAL_MAX_DEPTH, NULL))
        return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_JSON, error,
                            "the request nests deeper than %d levels", LOCAL_MAX_DEPTH);
    if (len && !json_parser_load_from_data(parser, line, (gssize)len, &local))
        return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_JSON, error,
                            "the request is not JSON: %s", local->message);
    root = len ? json_parser_get_root(parser) : NULL;
    if (!root || !JSON_NODE_HOLDS_OBJECT(root))
        return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_JSON, error,
                            "the request is not a JSON object");
    obj = json_node_get_object(root);
    members = json_object_get_members(obj);
    for (GList *m = members; m; m = m->next) {
        if (!g_str_equal(m->data, "execute") && !g_str_equal(m->data, "arguments"))
            return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_PARAMETER, error,
                                "unknown member '%.64s' (a request has \"execute\" and \"arguments\")",
                                (const char *)m->data);
    }
    execute = json_object_get_member(obj, "execute");
    if (!execute || !JSON_NODE_HOLDS_VALUE(execute) ||
        json_node_get_value_type(execute) != G_TYPE_STRING)
        return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_PARAMETER, error,
                            "member 'execute' (the command, a string) is missing");
    args = json_object_get_member(obj, "arguments");
    if (args && !JSON_NODE_HOLDS_NULL(args) && !JSON_NODE_HOLDS_OBJECT(args))
        return request_fail(ret_class, ORCH_LOCAL_ERROR_INVALID_PARAMETER, error,
                            "member 'arguments' must be an object");
    *ret_command = g_strdup(json_node_get_string(execute));
    *ret_arguments = args && JSON_NODE_HOLDS_OBJECT(args)
                         ? json_object_ref(json_node_get_object(args))
                         : NULL;
    return TRUE;
}

/* ---- the client --------------------------------------------------------------------------------
 */

static gboolean call_fail(GError **error, OrchError code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean call_fail(GError **error, OrchError code, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, ORCH_ERROR, code, msg);
    return FALSE;
}

/* Reads one line (owned, without the newline) before @deadline. */
static char *call_read_line(GSocket *sock, GByteArray *buf, HmDeadline deadline, const char *path,
                            GError **error)
{
    for (;;) {
        guint8 *nl = buf->len ? memchr(buf->data, '\n', buf->len) : NULL;
        guint8 chunk[LOCAL_READ_CHUNK];
        g_autoptr(GError) local = NULL;
        gssize n;

        if (nl) {
            char *line = g_strndup((const char *)buf->data, nl - buf->data);

            g_byte_array_remove_range(buf, 0, nl - buf->data + 1);
            return line;
        }
        if (buf->len > LOCAL_REPLY_MAX) {
            call_fail(error, ORCH_ERROR_FAILED, "hotmigd at '%s' sent a line longer than %d bytes",
                      path, LOCAL_REPLY_MAX);
            return NULL;
        }
        if (g_get_monotonic_time() >= deadline ||
            !g_socket_condition_timed_wait(sock, G_IO_IN, deadline - g_get_monotonic_time(), NULL,
                                           &local)) {
            call_fail(error, ORCH_ERROR_TIMEOUT, "hotmigd at '%s' did not answer in time", path);
            return NULL;
        }
        n = g_socket_receive(sock, (char *)chunk, sizeof(chunk), NULL, &local);
        if (n < 0 && g_error_matches(local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
            continue;
        if (n <= 0) {
            call_fail(error, ORCH_ERROR_UNAVAILABLE,
                      "hotmigd at '%s' closed the connection before answering%s%s", path,
                      local ? ": " : "", local ? local->message : "");
            return NULL;
        }
        g_byte_array_append(buf, chunk, (guint)n);
    }
}

/* Sends @request whole before @deadline (monotonic microseconds). */
static gboolean call_send(GSocket *sock, const char *request, HmDeadline deadline,
                          const char *path, GError **error)
{
    g_autoptr(GError) local = NULL;
    gsize written = 0;

    while (written < strlen(request)) {
        gssize n;

        if (g_get_monotonic_time() >= deadline ||
            !g_socket_condition_timed_wait(sock, G_IO_OUT, deadline - g_get_monotonic_time(), NULL,
                                           NULL)) {
            call_fail(error, ORCH_ERROR_TIMEOUT, "hotmigd at '%s' did not take the request in time",
                      path);
            return FALSE;
        }
        g_clear_error(&local);
        n = g_socket_send(sock, request + written, strlen(request) - written, NULL, &local);
        if (n < 0 && !g_error_matches(local, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
            call_fail(error, ORCH_ERROR_UNAVAILABLE, "Cannot send to hotmigd at '%s': %s", path,
                      local->message);
            return FALSE;
        }
        written += MAX(n, 0);
    }
    return TRUE;
}

/* A line of the answer as an object (borrowed from @parser), or NULL with the error. */
static JsonObject *call_parse_line(JsonParser *parser, const char *line, const char *path,
                                   GError **error)
{
    JsonNode *root;

    if (!hm_json_check_depth(line, -1, HM_JSON_MAX_DEPTH, NULL) ||
        !json_parser_load_from_data(parser, line, -1, NULL) ||
        !(root = json_parser_get_root(parser)) || !JSON_NODE_HOLDS_OBJECT(root)) {
        call_fail(error, ORCH_ERROR_FAILED,
                  "hotmigd at '%s' answered something that is not a JSON object", path);
        return NULL;
    }
    return json_node_get_object(root);
}

/* The answer that is not an event: its return (owned), or NULL with its error. */
static JsonNode *call_reply(JsonObject *obj, const char *path, GError **error)
{
    if (json_object_has_member(obj, "return"))
        return json_node_copy(json_object_get_member(obj, "return"));
    if (json_object_has_member(obj, "error") &&
        JSON_NODE_HOLDS_OBJECT(json_object_get_member(obj, "error"))) {
        JsonObject *e = json_object_get_object_member(obj, "error");
        const char *cls = json_object_get_string_member_with_default(e, "class", "Failed");
        const char *desc = json_object_get_string_member_with_default(e, "desc", "");
        int k = orch_local_error_class_from_string(cls);
        OrchError code = k == ORCH_LOCAL_ERROR_NOT_FOUND         ? ORCH_ERROR_NOT_FOUND
                         : k == ORCH_LOCAL_ERROR_CONFLICT        ? ORCH_ERROR_CONFLICT
                         : k == ORCH_LOCAL_ERROR_FAILED || k < 0 ? ORCH_ERROR_FAILED
                                                                 : ORCH_ERROR_INVALID;

        call_fail(error, code, "%s: %s", cls, desc);
        return NULL;
    }
    call_fail(error, ORCH_ERROR_FAILED, "hotmigd at '%s' answered neither return nor error", path);
    return NULL;
}

JsonNode *orch_local_call(const char *path, const char *command, JsonNode *arguments,
                          guint timeout_s, void (*event)(JsonNode *event, gpointer data),
                          gpointer data, GError **error)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
    g_autoptr(GSocketConnection) conn = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autoptr(GByteArray) buf = g_byte_array_new();
    g_autofree char *request = NULL;
    HmDeadline deadline = hm_deadline_in_ms(MIN(timeout_s, 24u * 3600) * 1000);
    GSocket *sock;

    g_return_val_if_fail(path && command, NULL);
    g_socket_client_set_timeout(client, MAX(timeout_s, 1));
    conn = g_socket_client_connect(client, G_SOCKET_CONNECTABLE(addr), NULL, &local);
    if (!conn) {
        call_fail(
            error, ORCH_ERROR_UNAVAILABLE,
            "Cannot reach hotmigd at '%s' ([hotmigd] socket; is it running, and are you root?): %s",
            path, local->message);
        return NULL;
    }
    json_builder_begin_object(b);
    orch_json_member_string(b, "execute", command);
    if (arguments) {
        json_builder_set_member_name(b, "arguments");
        json_builder_add_value(b, json_node_copy(arguments));
    }
    json_builder_end_object(b);
    request = orch_local_line(b);
    sock = g_socket_connection_get_socket(conn);
    g_socket_set_blocking(sock, FALSE);
    if (!call_send(sock, request, deadline, path, error))
        return NULL;
    /* Events first (handed to @event), then the return or the error. */
    for (;;) {
        g_autofree char *line = call_read_line(sock, buf, deadline, path, error);
        g_autoptr(JsonParser) parser = json_parser_new_immutable();
        JsonObject *obj;

        if (!line || !(obj = call_parse_line(parser, line, path, error)))
            return NULL;
        if (!json_object_has_member(obj, "event"))
            return call_reply(obj, path, error);
        if (event)
            event(json_object_get_member(obj, "event"), data);
    }
}
