/* Two inputs of the failure-prediction hook (docs/alerts.md), both of event lines
 * (orch_alert_line_parse()):
 *   - [alerts] socket: a Unix socket (mode 0600); any local program writes one JSON event a
 *     line and reads one reply line per event: "accepted: ...", "merged: ...", "ignored: ..."
 *     or "error: ...", with "(by HOST)" when another host's daemon applied it;
 *   - [alerts] exec: a command run every exec-interval seconds with this host's name as its
 *     argument; each line of its standard output is an event. A run that is still going when
 *     the next is due is killed and logged; one that fails is logged with its last line of
 *     standard error. Nothing here blocks the main loop: every read and wait is asynchronous. */
#define G_LOG_DOMAIN "hotmigd"

#include "hotmigd/alerts.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gio/gio.h>
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>

#define INPUT_CHUNK 4096
#define SOCKET_MAX_CONNECTIONS 32
#define SOCKET_MAX_QUEUED 1000        /* lines read and not yet answered, a connection */
#define EXEC_MAX_OUTPUT (1024 * 1024) /* bytes of standard output, a run */
#define EXEC_MAX_STDERR 4096          /* bytes of standard error kept for the log */

/* ---- lines ------------------------------------------------------------------------------------
 */

/* Takes the complete lines out of @buf into @lines (owned strings, the newline removed).
 * FALSE when what is left has no newline and is longer than a line may be. */
static gboolean lines_take(GByteArray *buf, GQueue *lines)
{
    guint start = 0;

    for (guint i = 0; i < buf->len; i++) {
        if (buf->data[i] != '\n')
            continue;
        g_queue_push_tail(lines, g_strndup((const char *)buf->data + start, i - start));
        start = i + 1;
    }
    g_byte_array_remove_range(buf, 0, start);
    return buf->len < ORCH_ALERT_LINE_MAX_BYTES;
}

/* ---- the Unix socket ----------------------------------------------------------------------------
 */

typedef struct ExecRun ExecRun;

struct OrchAlertInputs {
    HotmigdAlerts *alerts;
    char *self;
    /* The socket. */
    char *socket_path;
    GSocketService *service;
    GList *conns; /* Conn */
    /* The command. */
    char **argv; /* the command and this host's name */
    char *exec_name;
    guint interval_s;
    guint timer;
    ExecRun *run; /* the run going on, or NULL */
};

typedef struct {
    OrchAlertInputs *inputs; /* NULL once the connection is closed (dead) */
    GSocketConnection *conn;
    GCancellable *cancel;
    GByteArray *in;
    GQueue lines;        /* char *: read, not yet handled; NULL: a line too long */
    gboolean reading;    /* a read is under way */
    gboolean handling;   /* a line is being handled (its event may be forwarded) */
    gboolean submitting; /* inside hotmigd_alerts_submit(): its answer may come at once */
    gboolean eof;        /* nothing more to read: close once every line is answered */
    gboolean skipping;   /* in a line that is too long: dropped up to its newline */
    GString *out;        /* replies not yet written */
    GBytes *writing;     /* what is being written (the start of out), or NULL */
    guint number;        /* lines seen, for the log */
} Conn;

static void conn_read(Conn *conn);
static void conn_next(Conn *conn);

static void conn_free(Conn *conn)
{
    g_io_stream_close(G_IO_STREAM(conn->conn), NULL, NULL);
    g_object_unref(conn->conn);
    g_object_unref(conn->cancel);
    g_byte_array_unref(conn->in);
    g_queue_clear_full(&conn->lines, g_free);
    g_string_free(conn->out, TRUE);
    if (conn->writing)
        g_bytes_unref(conn->writing);
    g_free(conn);
}

/* Closes @conn: at once, or, while an event of it is being handled, when that is done (the
 * handler holds it). Pending reads and writes are cancelled: their callbacks only free. */
static void conn_close(Conn *conn)
{
    if (conn->inputs) {
        conn->inputs->conns = g_list_remove(conn->inputs->conns, conn);
        conn->inputs = NULL;
        g_cancellable_cancel(conn->cancel);
    }
    if (!conn->handling && !conn->reading && !conn->writing)
        conn_free(conn);
}

/* Closes @conn once its peer is done and every reply is written. */
static void conn_maybe_end(Conn *conn)
{
    if (conn->eof && !conn->handling && g_queue_is_empty(&conn->lines) && !conn->writing &&
        conn->out->len == 0)
        conn_close(conn);
}

static void conn_flush(Conn *conn);

static void conn_written(GObject *source, GAsyncResult *res, gpointer data)
{
    Conn *conn = data;
    g_autoptr(GError) error = NULL;
    gsize written = 0;
    gboolean ok = g_output_stream_write_all_finish(G_OUTPUT_STREAM(source), res, &written, &error);

    g_clear_pointer(&conn->writing, g_bytes_unref);
    if (!conn->inputs) {
        conn_close(conn);
        return;
    }
    if (!ok) {
        g_debug("Alert socket: a client went away before its reply: %s", error->message);
        conn_close(conn);
        return;
    }
    g_string_erase(conn->out, 0, written);
    conn_flush(conn);
}

static void conn_flush(Conn *conn)
{
    GOutputStream *out = g_io_stream_get_output_stream(G_IO_STREAM(conn->conn));

    if (conn->writing || !conn->inputs)
        return;
    if (conn->out->len == 0) {
        conn_maybe_end(conn);
        return;
    }
    /* A copy: new replies are appended to out meanwhile. */
    conn->writing = g_bytes_new(conn->out->str, conn->out->len);
    g_output_stream_write_all_async(out, g_bytes_get_data(conn->writing, NULL),
                                    g_bytes_get_size(conn->writing), G_PRIORITY_DEFAULT,
                                    conn->cancel, conn_written, conn);
}

static void conn_reply(Conn *conn, const char *line)
{
    g_autofree char *valid = g_utf8_make_valid(line, -1);

    /* One line per event: no newline inside a reply. */
    for (char *p = valid; *p; p++) {
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    }
    g_string_append_printf(conn->out, "%s\n", valid);
    conn_flush(conn);
}

static void conn_handled(GPtrArray *results, gpointer data)
{
    Conn *conn = data;
    const OrchAlertResult *result = g_ptr_array_index(results, 0);

    conn->handling = FALSE;
    if (!conn->inputs) {
        if (!conn->submitting)
            conn_close(conn);
        return;
    }
    {
        g_autofree char *text =
            orch_alert_result_format(result, hotmigd_alerts_get_name(conn->inputs->alerts));

        conn_reply(conn, text);
    }
    /* Answered at once: the loop in conn_next() goes on. */
    if (!conn->submitting)
        conn_next(conn);
}

/* Handles the lines read, one at a time (an event may wait for another host's daemon), then
 * reads on. */
static void conn_next(Conn *conn)
{
    OrchAlertInputs *in = conn->inputs;

    while (in && !conn->handling && !g_queue_is_empty(&conn->lines)) {
        g_autofree char *line = g_queue_pop_head(&conn->lines);
        g_autoptr(GError) error = NULL;
        g_autoptr(PolAlertEvent) ev = NULL;
        g_autoptr(GPtrArray) events = NULL;
        g_autofree char *input = NULL;

        conn->number++;
        if (!line) {
            g_autofree char *reply =
                g_strdup_printf("error: event: longer than %d bytes (the line is dropped)",
                                ORCH_ALERT_LINE_MAX_BYTES);

            g_message("Alert socket: line %u is longer than %d bytes: dropped", conn->number,
                      ORCH_ALERT_LINE_MAX_BYTES);
            conn_reply(conn, reply);
            continue;
        }
        if (!*line || g_str_equal(line, "\r"))
            continue; /* empty lines are allowed and not answered */
        ev = orch_alert_line_parse(line, strlen(line), "socket", g_get_real_time() / G_USEC_PER_SEC,
                                   &error);
        if (!ev) {
            g_autofree char *reply = g_strdup_printf("error: %s", error->message);

            g_message("Alert socket: line %u refused: %s", conn->number, error->message);
            conn_reply(conn, reply);
            continue;
        }
        events = g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);
        g_ptr_array_add(events, g_steal_pointer(&ev));
        input = g_strdup_printf("the alert socket (line %u)", conn->number);
        conn->handling = TRUE;
        conn->submitting = TRUE;
        hotmigd_alerts_submit(in->alerts, events, input, conn_handled, conn);
        conn->submitting = FALSE;
        if (!conn->inputs) { /* closed meanwhile */
            conn_close(conn);
            return;
        }
    }
    if (!conn->inputs)
        return;
    if (!conn->eof && g_queue_get_length(&conn->lines) < SOCKET_MAX_QUEUED)
        conn_read(conn);
    conn_maybe_end(conn);
}

static void conn_got(GObject *source, GAsyncResult *res, gpointer data)
{
    Conn *conn = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), res, &error);

    conn->reading = FALSE;
    if (!conn->inputs) {
        conn_close(conn);
        return;
    }
    if (!bytes) {
        g_debug("Alert socket: reading: %s", error->message);
        conn_close(conn);
        return;
    }
    if (g_bytes_get_size(bytes) == 0) {
        conn->eof = TRUE;
        if (conn->in->len > 0 && !conn->skipping) /* a last line without its newline */
            g_queue_push_tail(&conn->lines, g_strndup((const char *)conn->in->data, conn->in->len));
        g_byte_array_set_size(conn->in, 0);
    } else {
        const guint8 *bytes_at = g_bytes_get_data(bytes, NULL);
        gsize len = g_bytes_get_size(bytes);

        if (conn->skipping) {
            const guint8 *nl = memchr(bytes_at, '\n', len);

            if (!nl) {
                conn_next(conn);
                return;
            }
            conn->skipping = FALSE;
            len -= nl + 1 - bytes_at;
            bytes_at = nl + 1;
        }
        g_byte_array_append(conn->in, bytes_at, len);
        if (!lines_take(conn->in, &conn->lines)) {
            /* Answered in its turn; the rest of it is dropped. */
            g_queue_push_tail(&conn->lines, NULL);
            g_byte_array_set_size(conn->in, 0);
            conn->skipping = TRUE;
        }
    }
    conn_next(conn);
}

static void conn_read(Conn *conn)
{
    GInputStream *in = g_io_stream_get_input_stream(G_IO_STREAM(conn->conn));

    if (conn->reading)
        return;
    conn->reading = TRUE;
    g_input_stream_read_bytes_async(in, INPUT_CHUNK, G_PRIORITY_DEFAULT, conn->cancel, conn_got,
                                    conn);
}

static gboolean on_incoming(GSocketService *service, GSocketConnection *connection, GObject *source,
                            gpointer data)
{
    OrchAlertInputs *in = data;
    Conn *conn;

    if (g_list_length(in->conns) >= SOCKET_MAX_CONNECTIONS) {
        g_message("Alert socket: %d connections already: one more refused", SOCKET_MAX_CONNECTIONS);
        g_io_stream_close(G_IO_STREAM(connection), NULL, NULL);
        return TRUE;
    }
    conn = g_new0(Conn, 1);
    conn->inputs = in;
    conn->conn = g_object_ref(connection);
    conn->cancel = g_cancellable_new();
    conn->in = g_byte_array_new();
    g_queue_init(&conn->lines);
    conn->out = g_string_new(NULL);
    in->conns = g_list_prepend(in->conns, conn);
    conn_read(conn);
    return TRUE;
}

/* Is something listening on the Unix socket @path? */
static gboolean socket_in_use(const char *path)
{
    g_autoptr(GSocketClient) client = g_socket_client_new();
    g_autoptr(GSocketAddress) addr = g_unix_socket_address_new(path);
    g_autoptr(GSocketConnection) conn = NULL;

    g_socket_client_set_timeout(client, 1);
    conn = g_socket_client_connect(client, G_SOCKET_CONNECTABLE(addr), NULL, NULL);
    return conn != NULL;
}

static gboolean socket_start(OrchAlertInputs *in, GError **error)
{
    g_autoptr(GSocketAddress) addr = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *dir = g_path_get_dirname(in->socket_path);
    GStatBuf st;
    mode_t old;
    gboolean ok;

    if (g_mkdir_with_parents(dir, 0755) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot create the directory '%s' of the alert socket: %s", dir,
                    g_strerror(errsv));
        return FALSE;
    }
    if (g_lstat(in->socket_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "Cannot make the alert socket '%s': a file that is not a socket is there",
                        in->socket_path);
            return FALSE;
        }
        if (socket_in_use(in->socket_path)) {
            g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                        "The alert socket '%s' is in use (is another hotmigd running?)",
                        in->socket_path);
            return FALSE;
        }
        g_unlink(in->socket_path); /* left by a daemon that died */
    }
    in->service = g_socket_service_new();
    addr = g_unix_socket_address_new(in->socket_path);
    /* Born 0600: nobody else may connect between bind() and chmod(). */
    old = umask(0177);
    ok = g_socket_listener_add_address(G_SOCKET_LISTENER(in->service), addr, G_SOCKET_TYPE_STREAM,
                                       G_SOCKET_PROTOCOL_DEFAULT, NULL, NULL, &local);
    umask(old);
    if (!ok) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED,
                    "Cannot listen on the alert socket '%s': %s", in->socket_path, local->message);
        return FALSE;
    }
    if (g_chmod(in->socket_path, 0600) < 0) {
        int errsv = errno;

        g_set_error(error, ORCH_ERROR, ORCH_ERROR_FAILED, "Cannot chmod the alert socket '%s': %s",
                    in->socket_path, g_strerror(errsv));
        return FALSE;
    }
    g_signal_connect(in->service, "incoming", G_CALLBACK(on_incoming), in);
    g_socket_service_start(in->service);
    return TRUE;
}

/* ---- the command ----------------------------------------------------------------------------- */

struct ExecRun {
    OrchAlertInputs *inputs; /* NULL once the inputs are gone: the run only finishes */
    GSubprocess *proc;
    GCancellable *cancel; /* cancels the reads once the run is killed */
    GByteArray *out;
    GByteArray *err;
    gsize out_total;
    GQueue lines; /* char *: read, not yet handled */
    gboolean handling;
    gboolean submitting;
    gboolean out_done, err_done, exited;
    guint killer;   /* the deadline: exec-interval seconds after the start */
    char *killed;   /* why it was killed, or NULL */
    guint number;   /* lines seen */
    guint events;   /* events handled */
    gint64 started; /* monotonic µs */
};

static void exec_run_next(ExecRun *run);

static void exec_run_free(ExecRun *run)
{
    if (run->killer)
        g_source_remove(run->killer);
    g_object_unref(run->proc);
    g_object_unref(run->cancel);
    g_byte_array_unref(run->out);
    g_byte_array_unref(run->err);
    g_queue_clear_full(&run->lines, g_free);
    g_free(run->killed);
    g_free(run);
}

/* The command runs in a process group of its own: SIGKILL to the group, so that what it
 * started (a shell's children) goes too and no one keeps the pipes open. */
static void exec_child_setup(gpointer data)
{
    setpgid(0, 0);
}

static void exec_run_kill(ExecRun *run, char *why)
{
    const char *id = g_subprocess_get_identifier(run->proc);
    gint64 pid = 0;

    if (run->killed) {
        g_free(why);
        return;
    }
    run->killed = why;
    if (id && g_ascii_string_to_signed(id, 10, 1, G_MAXINT, &pid, NULL))
        kill(-(pid_t)pid, SIGKILL);
    g_subprocess_force_exit(run->proc);
    g_cancellable_cancel(run->cancel);
}

/* The last non-empty line of standard error, for the log (owned; "" or ": LINE"). */
static char *exec_stderr_tail(const ExecRun *run)
{
    g_autofree char *text = g_strndup((const char *)run->err->data, run->err->len);
    g_auto(GStrv) lines = NULL;
    g_autofree char *valid = NULL;
    guint n;

    if (!text)
        return g_strdup("");
    lines = g_strsplit(g_strchomp(text), "\n", -1);
    n = g_strv_length(lines);
    valid = n ? g_utf8_make_valid(lines[n - 1], -1) : NULL;

    return valid && *valid ? g_strdup_printf(": %.256s", valid) : g_strdup("");
}

/* Everything read, every line handled and the process gone: log how it ended, free it. */
static void exec_run_maybe_finish(ExecRun *run)
{
    OrchAlertInputs *in = run->inputs;
    const char *name = in ? in->exec_name : "(stopping)";
    double seconds = (g_get_monotonic_time() - run->started) / 1e6;
    g_autofree char *tail = NULL;

    if (!run->exited || !run->out_done || !run->err_done || run->handling || run->submitting ||
        !g_queue_is_empty(&run->lines))
        return;
    tail = exec_stderr_tail(run);
    if (run->killed)
        g_warning("Alert command '%s' killed after %.1f s: %s (%u events read)%s", name, seconds,
                  run->killed, run->events, tail);
    else if (g_subprocess_get_if_signaled(run->proc))
        g_warning("Alert command '%s' killed by signal %d after %.1f s (%u events read)%s", name,
                  g_subprocess_get_term_sig(run->proc), seconds, run->events, tail);
    else if (g_subprocess_get_exit_status(run->proc) != 0)
        g_warning("Alert command '%s' failed with exit status %d after %.1f s (%u events read)%s",
                  name, g_subprocess_get_exit_status(run->proc), seconds, run->events, tail);
    else
        g_debug("Alert command '%s' done in %.1f s: %u events", name, seconds, run->events);
    if (in && in->run == run)
        in->run = NULL;
    exec_run_free(run);
}

static gboolean exec_run_deadline(gpointer data)
{
    ExecRun *run = data;

    run->killer = 0;
    exec_run_kill(run, g_strdup_printf("still running after exec-interval (%u s)",
                                       run->inputs ? run->inputs->interval_s : 0));
    return G_SOURCE_REMOVE;
}

static void exec_run_handled(GPtrArray *results, gpointer data)
{
    ExecRun *run = data;

    run->handling = FALSE;
    if (!run->submitting)
        exec_run_next(run);
}

/* Handles the lines read, one at a time, then frees the run if it is over. */
static void exec_run_next(ExecRun *run)
{
    while (!run->handling && !g_queue_is_empty(&run->lines)) {
        OrchAlertInputs *in = run->inputs;
        g_autofree char *line = g_queue_pop_head(&run->lines);
        g_autoptr(GError) error = NULL;
        g_autoptr(PolAlertEvent) ev = NULL;
        g_autoptr(GPtrArray) events = NULL;
        g_autofree char *source = NULL;
        g_autofree char *input = NULL;

        run->number++;
        if (!in || !*line || g_str_equal(line, "\r"))
            continue;
        source = g_strdup_printf("exec:%s", in->exec_name);
        ev = orch_alert_line_parse(line, strlen(line), source, g_get_real_time() / G_USEC_PER_SEC,
                                   &error);
        if (!ev) {
            g_warning("Alert command '%s': line %u refused: %s", in->exec_name, run->number,
                      error->message);
            continue;
        }
        run->events++;
        events = g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);
        g_ptr_array_add(events, g_steal_pointer(&ev));
        input = g_strdup_printf("command '%s' (line %u)", in->exec_name, run->number);
        run->handling = TRUE;
        run->submitting = TRUE;
        hotmigd_alerts_submit(in->alerts, events, input, exec_run_handled, run);
        run->submitting = FALSE;
    }
    exec_run_maybe_finish(run);
}

static void exec_read(ExecRun *run, gboolean err);

static void exec_got(ExecRun *run, GObject *source, GAsyncResult *res, gboolean err)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GBytes) bytes = g_input_stream_read_bytes_finish(G_INPUT_STREAM(source), res, &error);
    gsize n = bytes ? g_bytes_get_size(bytes) : 0;

    if (n == 0) {                                 /* the end, an error, or killed */
        if (bytes && !err && run->out->len > 0) { /* a last line without its newline */
            g_queue_push_tail(&run->lines, g_strndup((const char *)run->out->data, run->out->len));
            g_byte_array_set_size(run->out, 0);
        }
        if (err)
            run->err_done = TRUE;
        else
            run->out_done = TRUE;
        exec_run_next(run);
        return;
    }
    if (err) {
        if (run->err->len < EXEC_MAX_STDERR)
            g_byte_array_append(run->err, g_bytes_get_data(bytes, NULL),
                                MIN(n, EXEC_MAX_STDERR - run->err->len));
        exec_read(run, TRUE);
        return;
    }
    run->out_total += n;
    g_byte_array_append(run->out, g_bytes_get_data(bytes, NULL), n);
    if (run->out_total > EXEC_MAX_OUTPUT)
        exec_run_kill(run, g_strdup_printf("it wrote more than %d bytes", EXEC_MAX_OUTPUT));
    else if (!lines_take(run->out, &run->lines))
        exec_run_kill(run, g_strdup_printf("it wrote a line longer than %d bytes",
                                           ORCH_ALERT_LINE_MAX_BYTES));
    if (run->killed)
        g_byte_array_set_size(run->out, 0); /* the complete lines before are still handled */
    exec_read(run, FALSE);
    exec_run_next(run);
}

static void exec_got_out(GObject *source, GAsyncResult *res, gpointer data)
{
    exec_got(data, source, res, FALSE);
}

static void exec_got_err(GObject *source, GAsyncResult *res, gpointer data)
{
    exec_got(data, source, res, TRUE);
}

static void exec_read(ExecRun *run, gboolean err)
{
    GInputStream *stream =
        err ? g_subprocess_get_stderr_pipe(run->proc) : g_subprocess_get_stdout_pipe(run->proc);

    g_input_stream_read_bytes_async(stream, INPUT_CHUNK, G_PRIORITY_DEFAULT, run->cancel,
                                    err ? exec_got_err : exec_got_out, run);
}

static void exec_exited(GObject *source, GAsyncResult *res, gpointer data)
{
    ExecRun *run = data;

    g_subprocess_wait_finish(G_SUBPROCESS(source), res, NULL);
    run->exited = TRUE;
    if (run->killer) {
        g_source_remove(run->killer);
        run->killer = 0;
    }
    exec_run_next(run);
}

static gboolean exec_tick(gpointer data)
{
    OrchAlertInputs *in = data;
    g_autoptr(GSubprocessLauncher) launcher = NULL;
    g_autoptr(GError) error = NULL;
    ExecRun *run;
    GSubprocess *proc;

    if (in->run) {
        /* Killed at its deadline (now), not yet reaped: this run is skipped. */
        g_debug("Alert command '%s' is still running: this run is skipped", in->exec_name);
        return G_SOURCE_CONTINUE;
    }
    launcher =
        g_subprocess_launcher_new(G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE);
    g_subprocess_launcher_set_child_setup(launcher, exec_child_setup, NULL, NULL);
    proc = g_subprocess_launcher_spawnv(launcher, (const char *const *)in->argv, &error);
    if (!proc) {
        g_warning("Cannot run the alert command '%s': %s", in->exec_name, error->message);
        return G_SOURCE_CONTINUE;
    }
    run = g_new0(ExecRun, 1);
    run->inputs = in;
    run->proc = proc;
    run->cancel = g_cancellable_new();
    run->out = g_byte_array_new();
    run->err = g_byte_array_new();
    g_queue_init(&run->lines);
    run->started = g_get_monotonic_time();
    in->run = run;
    run->killer = g_timeout_add_seconds(in->interval_s, exec_run_deadline, run);
    g_subprocess_wait_async(proc, NULL, exec_exited, run);
    exec_read(run, FALSE);
    exec_read(run, TRUE);
    return G_SOURCE_CONTINUE;
}

static gboolean exec_start(OrchAlertInputs *in, const char *command, guint interval_s,
                           GError **error)
{
    g_autoptr(GError) local = NULL;
    g_auto(GStrv) argv = NULL;
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    g_autofree char *path = NULL;

    if (!g_shell_parse_argv(command, NULL, &argv, &local)) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID, "[alerts] exec '%s': %s", command,
                    local->message);
        return FALSE;
    }
    path = g_find_program_in_path(argv[0]);
    if (!path) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "[alerts] exec '%s': no program '%s' (not executable, or not in PATH)", command,
                    argv[0]);
        return FALSE;
    }
    g_strv_builder_addv(builder, (const char **)argv);
    g_strv_builder_add(builder, in->self);
    in->argv = g_strv_builder_end(builder);
    in->exec_name = g_path_get_basename(argv[0]);
    in->interval_s = interval_s;
    /* The first run at once, then one every interval. */
    exec_tick(in);
    in->timer = g_timeout_add_seconds(interval_s, exec_tick, in);
    return TRUE;
}

/* ---- both -------------------------------------------------------------------------------------
 */

OrchAlertInputs *orch_alert_inputs_new(const HmConfig *config, HotmigdAlerts *alerts,
                                       GError **error)
{
    g_autoptr(OrchAlertInputs) in = NULL;
    const char *socket_path = hm_config_get_string(config, HM_CONFIG_ALERTS_SOCKET);
    const char *command = hm_config_get_string(config, HM_CONFIG_ALERTS_EXEC);

    g_return_val_if_fail(config && alerts, NULL);

    in = g_new0(OrchAlertInputs, 1);
    in->alerts = hotmigd_alerts_ref(alerts);
    in->self = g_strdup(hotmigd_alerts_get_name(alerts));
    if (socket_path && *socket_path) {
        in->socket_path = g_strdup(socket_path);
        if (!socket_start(in, error))
            return NULL;
    }
    if (command && *command &&
        !exec_start(in, command, hm_config_get_uint(config, HM_CONFIG_ALERTS_EXEC_INTERVAL), error))
        return NULL;
    return g_steal_pointer(&in);
}

void orch_alert_inputs_free(OrchAlertInputs *in)
{
    if (!in)
        return;
    if (in->timer)
        g_source_remove(in->timer);
    if (in->run) {
        /* The run finishes on its own (its callbacks hold it); it acts on nothing more. */
        in->run->inputs = NULL;
        exec_run_kill(in->run, g_strdup("hotmigd is stopping"));
        in->run = NULL;
    }
    if (in->service) {
        g_socket_service_stop(in->service);
        g_socket_listener_close(G_SOCKET_LISTENER(in->service));
        g_object_unref(in->service);
        g_unlink(in->socket_path);
    }
    while (in->conns)
        conn_close(in->conns->data); /* removes it from the list */
    g_strfreev(in->argv);
    g_free(in->exec_name);
    g_free(in->socket_path);
    g_free(in->self);
    hotmigd_alerts_unref(in->alerts);
    g_free(in);
}
