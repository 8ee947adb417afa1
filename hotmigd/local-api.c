/* hotmigd's local API (local-api.h): JSON lines on a Unix socket, the listener (the wire format
 * and the client are engine/local-protocol.c). Requests come from root on this host, but are
 * checked as strictly as any input: a size limit per line, UTF-8, one JSON object nested at
 * most 16 deep (orch_local_request_parse()), only the members a command knows, each of its
 * type. The commands' work is the daemon's, bound from the table HotmigdLocalApiOps. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/local-api.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gunixsocketaddress.h>

#include "engine/json.h"
#include "engine/plan-json.h"
#include "engine/snapshot.h"

#define LOCAL_READ_CHUNK (64 * 1024)
#define LOCAL_REPLY_MAX (64 * 1024 * 1024) /* bytes of a reply line the client accepts */
#define LOCAL_MAX_STRING 1024

/* ---- lines ----------------------------------------------------------------------------------- */

static char *line_error(OrchLocalErrorClass cls, const char *desc)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    g_autofree char *valid = g_utf8_make_valid(desc, -1);

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "error");
    json_builder_begin_object(b);
    orch_json_member_string(b, "class", orch_local_error_class_to_string(cls));
    orch_json_member_string(b, "desc", valid);
    json_builder_end_object(b);
    json_builder_end_object(b);
    return orch_local_line(b);
}

static char *line_value(const char *member, JsonNode *value)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, member);
    json_builder_add_value(b, json_node_copy(value));
    json_builder_end_object(b);
    return orch_local_line(b);
}

/* ---- the listener ------------------------------------------------------------------------------
 */

struct HotmigdLocalApi {
    const HotmigdLocalApiOps *ops;
    gpointer owner;
    GSocketService *service;
    char *path;
    GPtrArray *clients; /* Client (a reference each) */
};

typedef struct {
    gint ref;
    HotmigdLocalApi *api; /* NULL once the API is gone */
    GSocketConnection *conn;
    GCancellable *cancel;
    GByteArray *buf;  /* input not yet taken as a line */
    gboolean busy;    /* a request is being answered: the next line waits */
    gboolean eof;     /* the peer closed its side */
    gboolean closing; /* close once the writes are done */
    gboolean closed;
    gboolean reading;
    gboolean next_soon; /* an idle takes the next line */
    GQueue writes;      /* GBytes */
    gboolean writing;
    char *wait_id; /* the schedule `wait` follows */
} Client;

static Client *client_ref(Client *c)
{
    g_atomic_int_inc(&c->ref);
    return c;
}

static void client_unref(Client *c)
{
    if (!g_atomic_int_dec_and_test(&c->ref))
        return;
    g_clear_object(&c->conn);
    g_clear_object(&c->cancel);
    g_byte_array_unref(c->buf);
    g_queue_clear_full(&c->writes, (GDestroyNotify)g_bytes_unref);
    g_free(c->wait_id);
    g_free(c);
}

static void client_close(Client *c)
{
    if (c->closed)
        return;
    c->closed = TRUE;
    g_cancellable_cancel(c->cancel);
    g_io_stream_close(G_IO_STREAM(c->conn), NULL, NULL);
    /* Drops the API's reference. */
    if (c->api)
        g_ptr_array_remove(c->api->clients, c);
}

static void client_write_next(Client *c);

static void client_written(GObject *source, GAsyncResult *result, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;

    c->writing = FALSE;
    if (!g_output_stream_write_all_finish(G_OUTPUT_STREAM(source), result, NULL, &error)) {
        if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            g_debug("local API: a client went away: %s", error->message);
        client_close(c);
    } else {
        client_write_next(c);
    }
    client_unref(c);
}

static void client_write_next(Client *c)
{
    GBytes *bytes;

    if (c->writing || c->closed)
        return;
    bytes = g_queue_pop_head(&c->writes);
    if (!bytes) {
        if (c->closing || (c->eof && !c->busy))
            client_close(c);
        return;
    }
    c->writing = TRUE;
    /* The data stays alive in the source's user data until written. */
    g_object_set_data_full(G_OBJECT(c->conn), "hotmigd-writing", bytes,
                           (GDestroyNotify)g_bytes_unref);
    g_output_stream_write_all_async(g_io_stream_get_output_stream(G_IO_STREAM(c->conn)),
                                    g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes),
                                    G_PRIORITY_DEFAULT, c->cancel, client_written, client_ref(c));
}

/* Queues @line (taken). */
static void client_send(Client *c, char *line)
{
    if (c->closed) {
        g_free(line);
        return;
    }
    g_queue_push_tail(&c->writes, g_bytes_new_take(line, strlen(line)));
    client_write_next(c);
}

static void client_read_more(Client *c);

static gboolean client_next(gpointer data)
{
    Client *c = data;

    c->next_soon = FALSE;
    client_read_more(c);
    return G_SOURCE_REMOVE;
}

/* The request is answered: take the next line (from the main loop: many short lines in the
 * buffer must not nest calls). */
static void client_answered(Client *c, char *line)
{
    GSource *src;

    client_send(c, line);
    c->busy = FALSE;
    if (c->next_soon)
        return;
    c->next_soon = TRUE;
    src = g_idle_source_new();
    g_source_set_callback(src, client_next, client_ref(c), (GDestroyNotify)client_unref);
    g_source_attach(src, g_main_context_get_thread_default());
    g_source_unref(src);
}

/* ---- requests
 * ------------------------------------------------------------------------------------ */

typedef struct {
    JsonObject *args;
    char *problem; /* the first bad member */
} Args;

static gboolean args_bad(Args *a, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean args_bad(Args *a, const char *fmt, ...)
{
    va_list ap;

    if (a->problem)
        return FALSE;
    va_start(ap, fmt);
    a->problem = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return FALSE;
}

static gboolean args_known(Args *a, const char *const *known)
{
    g_autoptr(GList) members = a->args ? json_object_get_members(a->args) : NULL;

    for (GList *m = members; m; m = m->next) {
        if (!known || !g_strv_contains(known, m->data)) {
            g_autofree char *list = known ? g_strjoinv(", ", (char **)known) : NULL;

            return args_bad(a, "unknown argument '%.64s' (%s%s)", (const char *)m->data,
                            list ? "known: " : "this command takes none", list ? list : "");
        }
    }
    return TRUE;
}

static JsonNode *args_member(Args *a, const char *name)
{
    JsonNode *node = a->args ? json_object_get_member(a->args, name) : NULL;

    return node && !JSON_NODE_HOLDS_NULL(node) ? node : NULL;
}

/* A string argument: NULL when absent (a problem when @required), or of another type, empty,
 * too long or with control characters (a problem). */
static const char *args_string(Args *a, const char *name, gboolean required)
{
    JsonNode *node = args_member(a, name);
    const char *value;

    if (!node) {
        if (required)
            args_bad(a, "argument '%s' is missing", name);
        return NULL;
    }
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_STRING) {
        args_bad(a, "argument '%s' must be a string", name);
        return NULL;
    }
    value = json_node_get_string(node);
    if (!*value || strlen(value) > LOCAL_MAX_STRING) {
        args_bad(a, "argument '%s' must be 1 to %d bytes", name, LOCAL_MAX_STRING);
        return NULL;
    }
    for (const char *p = value; *p; p++) {
        if (g_ascii_iscntrl(*p)) {
            args_bad(a, "argument '%s' contains a control character", name);
            return NULL;
        }
    }
    return value;
}

static gint64 args_int(Args *a, const char *name, gint64 min, gint64 max, gint64 absent)
{
    JsonNode *node = args_member(a, name);
    gint64 v;

    if (!node)
        return absent;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        args_bad(a, "argument '%s' must be a whole number", name);
        return absent;
    }
    v = json_node_get_int(node);
    if (v < min || v > max) {
        args_bad(a,
                 "argument '%s' must be from %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT
                 ", not %" G_GINT64_FORMAT,
                 name, min, max, v);
        return absent;
    }
    return v;
}

static double args_double(Args *a, const char *name, double min, double max, double absent)
{
    JsonNode *node = args_member(a, name);
    GType type;
    double v;

    if (!node)
        return absent;
    type = JSON_NODE_HOLDS_VALUE(node) ? json_node_get_value_type(node) : G_TYPE_INVALID;
    if (type != G_TYPE_INT64 && type != G_TYPE_DOUBLE) {
        args_bad(a, "argument '%s' must be a number", name);
        return absent;
    }
    v = type == G_TYPE_INT64 ? (double)json_node_get_int(node) : json_node_get_double(node);
    if (!isfinite(v) || v < min || v > max) {
        args_bad(a, "argument '%s' must be from %g to %g", name, min, max);
        return absent;
    }
    return v;
}

static gboolean args_bool(Args *a, const char *name)
{
    JsonNode *node = args_member(a, name);

    if (!node)
        return FALSE;
    if (!JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_BOOLEAN)
        return args_bad(a, "argument '%s' must be true or false", name);
    return json_node_get_boolean(node);
}

static void client_done(JsonNode *result, GError *error, gpointer data)
{
    Client *c = data;
    g_autoptr(JsonNode) node = result;
    g_autoptr(GError) local = error;

    if (local)
        client_answered(c, line_error(orch_local_error_class_of(local), local->message));
    else
        client_answered(c, line_value("return", node));
    client_unref(c);
}

static void cmd_plan(Client *c, Args *a)
{
    static const char *const known[] = {"policy",     "host",       "min_stay",
                                        "bandwidth",  "pack_vcpus", "keep_jobs",
                                        "tolerance",  "max_moves",  "host_value",
                                        "max_migrations", NULL};
    HotmigdPlanRequest req = {0};
    const char *policy;
    int p = -1;

    args_known(a, known);
    policy = args_string(a, "policy", TRUE);
    req.host = args_string(a, "host", FALSE);
    req.min_stay_s = (gint)args_int(a, "min_stay", 0, 7 * 24 * 3600, -1);
    req.bandwidth = args_double(a, "bandwidth", 1, 1e9, 0);
    req.pack_vcpus = args_bool(a, "pack_vcpus");
    req.keep_jobs = args_bool(a, "keep_jobs");
    req.tolerance = args_double(a, "tolerance", 0, 1, -1);
    req.max_moves = (gint)args_int(a, "max_moves", 0, G_MAXINT, -1);
    req.host_value = (gint)args_int(a, "host_value", 0, POL_HOST_VALUE_MAX, -1);
    req.max_migrations = (gint)args_int(a, "max_migrations", 1, G_MAXINT, -1);
    if (policy && (p = pol_policy_from_string(policy)) < 0)
        args_bad(a, "argument 'policy' must be consolidate, drain or balance, not '%.64s'", policy);
    else if (policy)
        req.policy = p;
    if (policy && p == POL_POLICY_DRAIN && !req.host)
        args_bad(a, "argument 'host' is missing: a drain empties one host");
    else if (policy && p != POL_POLICY_DRAIN && req.host)
        args_bad(a, "argument 'host' is for drain plans only");
    if (a->problem) {
        client_answered(c, line_error(ORCH_LOCAL_ERROR_INVALID_PARAMETER, a->problem));
        return;
    }
    c->api->ops->plan(c->api->owner, &req, client_done, client_ref(c));
}

static void cmd_run(Client *c, Args *a)
{
    static const char *const known[] = {"plan", "reason", NULL};
    g_autoptr(GError) error = NULL;
    const char *reason;
    JsonNode *node;
    PolPlan *plan = NULL;

    args_known(a, known);
    reason = args_string(a, "reason", FALSE);
    node = args_member(a, "plan");
    if (!node)
        args_bad(a, "argument 'plan' is missing (a plan as `migrate-vm plan --json` prints it)");
    else if (!a->problem && !(plan = orch_plan_parse_node(node, "argument 'plan'", &error)))
        args_bad(a, "%s", error->message);
    if (a->problem) {
        pol_plan_free(plan);
        client_answered(c, line_error(ORCH_LOCAL_ERROR_INVALID_PARAMETER, a->problem));
        return;
    }
    c->api->ops->run(c->api->owner, plan, reason, client_done, client_ref(c));
}

static void cmd_drain(Client *c, Args *a)
{
    static const char *const known[] = {"host", "deadline", "reason", NULL};
    const char *host, *reason;
    gint64 deadline;

    args_known(a, known);
    host = args_string(a, "host", TRUE);
    deadline = args_int(a, "deadline", 0, G_MAXINT64 / 2, 0);
    reason = args_string(a, "reason", FALSE);
    if (a->problem) {
        client_answered(c, line_error(ORCH_LOCAL_ERROR_INVALID_PARAMETER, a->problem));
        return;
    }
    c->api->ops->drain(c->api->owner, host, deadline, reason, client_done, client_ref(c));
}

static void cmd_status(Client *c, Args *a)
{
    static const char *const known[] = {"id", NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) status = NULL;
    const char *id;

    args_known(a, known);
    id = args_string(a, "id", FALSE);
    if (a->problem) {
        client_answered(c, line_error(ORCH_LOCAL_ERROR_INVALID_PARAMETER, a->problem));
        return;
    }
    status = c->api->ops->status(c->api->owner, id, &error);
    client_answered(c, status ? line_value("return", status)
                              : line_error(orch_local_error_class_of(error), error->message));
}

static void client_watch(JsonNode *event, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) status = NULL;

    if (event) {
        client_send(c, line_value("event", event));
        return;
    }
    /* The end: the schedule's final state, with each move's report. */
    status = c->api ? c->api->ops->status(c->api->owner, c->wait_id, &error) : NULL;
    if (status)
        client_answered(c, line_value("return", status));
    else
        client_answered(
            c, line_error(ORCH_LOCAL_ERROR_FAILED, error ? error->message : "hotmigd is stopping"));
    client_unref(c);
}

static void cmd_wait(Client *c, Args *a)
{
    static const char *const known[] = {"id", NULL};
    g_autoptr(GError) error = NULL;
    const char *id;

    args_known(a, known);
    id = args_string(a, "id", TRUE);
    if (a->problem) {
        client_answered(c, line_error(ORCH_LOCAL_ERROR_INVALID_PARAMETER, a->problem));
        return;
    }
    g_free(c->wait_id);
    c->wait_id = g_strdup(id);
    if (!c->api->ops->watch(c->api->owner, id, client_watch, client_ref(c), &error)) {
        client_unref(c);
        client_answered(c, line_error(orch_local_error_class_of(error), error->message));
    }
}

static void cmd_snapshot(Client *c, Args *a)
{
    args_known(a, NULL);
    if (a->problem) {
        client_answered(c, line_error(ORCH_LOCAL_ERROR_INVALID_PARAMETER, a->problem));
        return;
    }
    c->api->ops->snapshot(c->api->owner, client_done, client_ref(c));
}

static const struct {
    const char *name;
    void (*fn)(Client *c, Args *a);
} commands[] = {
    {"plan", cmd_plan},     {"run", cmd_run},   {"drain", cmd_drain},
    {"status", cmd_status}, {"wait", cmd_wait}, {"snapshot", cmd_snapshot},
};

/* One request line (without its newline). Answers exactly once, now or later. */
static void client_request(Client *c, const char *line, gsize len)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonObject) args = NULL;
    g_autofree char *name = NULL;
    OrchLocalErrorClass cls;
    Args a = {0};

    c->busy = TRUE;
    if (!orch_local_request_parse(line, len, &name, &args, &cls, &error)) {
        client_answered(c, line_error(cls, error->message));
        return;
    }
    a.args = args;
    for (gsize i = 0; i < G_N_ELEMENTS(commands); i++) {
        if (g_str_equal(commands[i].name, name)) {
            commands[i].fn(c, &a);
            g_free(a.problem);
            return;
        }
    }
    {
        g_autofree char *msg =
            g_strdup_printf("no command '%.64s' (plan, run, drain, status, wait, snapshot)", name);

        client_answered(c, line_error(ORCH_LOCAL_ERROR_COMMAND_NOT_FOUND, msg));
    }
}

/* ---- reading ------------------------------------------------------------------------------------
 */

static void client_got(GObject *source, GAsyncResult *result, gpointer data)
{
    Client *c = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) bytes =
        g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), result, &error);

    c->reading = FALSE;
    if (!bytes) {
        if (!g_error_matches(error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
            g_debug("local API: reading from a client: %s", error->message);
        client_close(c);
    } else if (g_bytes_get_size(bytes) == 0) {
        c->eof = TRUE;
        if (!c->busy && !c->writing && g_queue_is_empty(&c->writes))
            client_close(c);
    } else {
        g_byte_array_append(c->buf, g_bytes_get_data(bytes, NULL), g_bytes_get_size(bytes));
        client_read_more(c);
    }
    client_unref(c);
}

/* Takes the next line when there is one and no request runs; reads when it needs more. */
static void client_read_more(Client *c)
{
    guint8 *nl;

    if (c->busy || c->closed || c->closing || !c->api)
        return;
    nl = c->buf->len ? memchr(c->buf->data, '\n', c->buf->len) : NULL;
    if (nl && (gsize)(nl - c->buf->data) + 1 <= ORCH_LOCAL_API_MAX_LINE) {
        gsize len = nl - c->buf->data;
        g_autofree char *line = g_strndup((const char *)c->buf->data, len);

        g_byte_array_remove_range(c->buf, 0, len + 1);
        client_request(c, line, len);
        return;
    }
    if (nl || c->buf->len >= ORCH_LOCAL_API_MAX_LINE) {
        g_autofree char *msg =
            g_strdup_printf("a request line is longer than %d bytes: closing the connection",
                            ORCH_LOCAL_API_MAX_LINE);

        g_message("local API: %s", msg);
        client_send(c, line_error(ORCH_LOCAL_ERROR_TOO_LARGE, msg));
        c->closing = TRUE;
        g_byte_array_set_size(c->buf, 0);
        client_write_next(c);
        return;
    }
    if (c->eof) {
        if (c->buf->len) /* a last line without a newline is not a request */
            g_debug("local API: %u bytes without a newline at the end", c->buf->len);
        if (!c->writing && g_queue_is_empty(&c->writes))
            client_close(c);
        return;
    }
    if (c->reading)
        return;
    c->reading = TRUE;
    g_input_stream_read_bytes_async(g_io_stream_get_input_stream(G_IO_STREAM(c->conn)),
                                    LOCAL_READ_CHUNK, G_PRIORITY_DEFAULT, c->cancel, client_got,
                                    client_ref(c));
}

static gboolean on_incoming(GSocketService *service, GSocketConnection *conn, GObject *source,
                            gpointer data)
{
    HotmigdLocalApi *api = data;
    g_autoptr(GCredentials) creds =
        g_socket_get_credentials(g_socket_connection_get_socket(conn), NULL);
    uid_t uid = creds ? g_credentials_get_unix_user(creds, NULL) : (uid_t)-1;
    Client *c;

    c = g_new0(Client, 1);
    c->ref = 1; /* the API's */
    c->api = api;
    c->conn = g_object_ref(conn);
    c->cancel = g_cancellable_new();
    c->buf = g_byte_array_new();
    g_queue_init(&c->writes);
    g_ptr_array_add(api->clients, c);
    if (uid != geteuid() && uid != 0) {
        g_message("local API: refused a client of uid %d (only root and uid %d)", (int)uid,
                  (int)geteuid());
        client_send(c, line_error(ORCH_LOCAL_ERROR_FAILED, "permission denied"));
        c->closing = TRUE;
        return TRUE;
    }
    if (api->clients->len > ORCH_LOCAL_API_MAX_CLIENTS) {
        client_send(c, line_error(ORCH_LOCAL_ERROR_FAILED, "too many clients: try again"));
        c->closing = TRUE;
        return TRUE;
    }
    client_read_more(c);
    return TRUE;
}

static void api_client_drop(Client *c)
{
    c->api = NULL;
    client_close(c);
    client_unref(c);
}

HotmigdLocalApi *hotmigd_local_api_new(const HotmigdLocalApiOps *ops, gpointer owner,
                                       const char *path, GError **error)
{
    g_autoptr(GSocketAddress) addr = NULL;
    g_autoptr(GError) local = NULL;
    HotmigdLocalApi *api;
    struct stat st;
    mode_t old_mask;
    gboolean ok;

    g_return_val_if_fail(ops && path, NULL);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                        "local socket '%s': the path exists and is not a socket", path);
            return NULL;
        }
        /* A stale socket of an earlier run (hotmigd runs once per host: systemd sees to it). */
        if (unlink(path) < 0) {
            int errsv = errno;

            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "Cannot remove the old local socket '%s': %s", path, g_strerror(errsv));
            return NULL;
        }
    }
    api = g_new0(HotmigdLocalApi, 1);
    api->ops = ops;
    api->owner = owner;
    api->path = g_strdup(path);
    api->clients = g_ptr_array_new_with_free_func((GDestroyNotify)api_client_drop);
    api->service = g_socket_service_new();
    addr = g_unix_socket_address_new(path);
    /* Root only from the start: the socket file is made 0600. */
    old_mask = umask(0177);
    ok = g_socket_listener_add_address(G_SOCKET_LISTENER(api->service), addr, G_SOCKET_TYPE_STREAM,
                                       G_SOCKET_PROTOCOL_DEFAULT, NULL, NULL, &local);
    umask(old_mask);
    if (!ok || chmod(path, 0600) < 0) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot listen on the local socket '%s': %s", path,
                    local ? local->message : g_strerror(errno));
        hotmigd_local_api_free(api);
        return NULL;
    }
    g_signal_connect(api->service, "incoming", G_CALLBACK(on_incoming), api);
    g_socket_service_start(api->service);
    return api;
}

void hotmigd_local_api_free(HotmigdLocalApi *api)
{
    if (!api)
        return;
    g_socket_service_stop(api->service);
    g_socket_listener_close(G_SOCKET_LISTENER(api->service));
    g_clear_object(&api->service);
    /* Each client is closed; one waiting for the daemon keeps its memory until answered. */
    g_ptr_array_unref(api->clients);
    unlink(api->path);
    g_free(api->path);
    g_free(api);
}
