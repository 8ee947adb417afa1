/* The agent core in-process: the test is the host (feeding bytes, reading replies) and the
 * processes (raw Unix sockets); libibverbs is replaced by a fake. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netlink.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "guest-agent/agent/agent-priv.h"
#include "guest-agent/agent/device-users.h"
#include "guest-agent/agent/job.h"

typedef struct {
    char *dir;
    char *sock;
    Agent *agent;
    GString *out; /* what the agent sent to the host */
    /* fake verbs */
    int verbs_calls;
    int verbs_found_after; /* find_active_device succeeds from this call on; <0 never */
    const char *verbs_device;
    const char *verbs_also_active; /* another active device, returned when preferred */
    char *verbs_last_prefer;
    /* fake port watch (setup_watch) */
    int watch_fd;     /* eventfd standing for the devices' async event fds */
    int watch_opened; /* port_watch_new calls */
    int watch_freed;
    int watch_drained; /* events read */
} Fixture;

static char *fake_find_active_device(gpointer data, const char *prefer, const char *except,
                                     GError **error)
{
    Fixture *f = data;

    f->verbs_calls++;
    g_free(f->verbs_last_prefer);
    f->verbs_last_prefer = g_strdup(prefer);
    if (f->verbs_found_after >= 0 && f->verbs_calls > f->verbs_found_after) {
        if (prefer && f->verbs_also_active && g_str_equal(prefer, f->verbs_also_active))
            return g_strdup(prefer);
        return g_strdup(f->verbs_device);
    }
    g_set_error_literal(error, HM_COMMON_ERROR, HM_COMMON_ERROR_FAILED, "fake: no device yet");
    return NULL;
}

static GPtrArray *fake_list_devices(gpointer data, GError **error)
{
    Fixture *f = data;
    GPtrArray *devices = g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_device_free);
    AgentRdmaDevice *dev = agent_rdma_device_new(f->verbs_device, "5054:00ff:fe12:3456");
    AgentRdmaPort *port = agent_rdma_device_add_port(dev, 1, "ACTIVE", "Ethernet", 0);

    g_ptr_array_add(port->gids, g_strdup("fe80::5054:ff:fe12:3456"));
    g_ptr_array_add(port->gids, g_strdup("::ffff:198.51.100.1"));
    g_ptr_array_add(devices, dev);
    return devices;
}

static const AgentVerbsOps fake_verbs = {.find_active_device = fake_find_active_device,
                                         .list_devices = fake_list_devices};

/* The fake port watch is the fixture itself; its fd is an eventfd the test writes to. */
static AgentPortWatch *fake_port_watch_new(gpointer data, int *ret_fd, GError **error)
{
    Fixture *f = data;

    f->watch_opened++;
    *ret_fd = f->watch_fd;
    return (AgentPortWatch *)f;
}

static guint fake_port_watch_drain(AgentPortWatch *watch)
{
    Fixture *f = (Fixture *)watch;
    guint64 n = 0;

    if (read(f->watch_fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
        n = 0;
    f->watch_drained += (int)n;
    return (guint)n;
}

static void fake_port_watch_free(AgentPortWatch *watch)
{
    ((Fixture *)watch)->watch_freed++;
}

static const AgentVerbsOps fake_verbs_watch = {.find_active_device = fake_find_active_device,
                                               .list_devices = fake_list_devices,
                                               .port_watch_new = fake_port_watch_new,
                                               .port_watch_drain = fake_port_watch_drain,
                                               .port_watch_free = fake_port_watch_free};

static void capture_reply(const char *data, gsize len, gpointer user_data)
{
    Fixture *f = user_data;

    g_string_append_len(f->out, data, (gssize)len);
}

static int setup_with(void **state, const AgentVerbsOps *verbs)
{
    Fixture *f = g_new0(Fixture, 1);
    g_autoptr(GError) error = NULL;

    f->dir = g_dir_make_tmp("agent-core-test.XXXXXX", NULL);
    assert_non_null(f->dir);
    f->sock = g_build_filename(f->dir, "run", "hotmig", "agent.sock", NULL);
    f->out = g_string_new(NULL);
    f->verbs_device = "rxe0";
    f->watch_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    assert_true(f->watch_fd >= 0);
    f->agent = agent_new(verbs, f);
    agent_set_reply_func(f->agent, capture_reply, f);
    agent_set_device_poll_ms(f->agent, 10);
    if (!agent_listen(f->agent, f->sock, NULL, &error))
        fail_msg("listen: %s", error->message);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, &fake_verbs);
}

/* The verbs adapter can watch port events. */
static int setup_watch(void **state)
{
    return setup_with(state, &fake_verbs_watch);
}

static int teardown(void **state)
{
    Fixture *f = *state;
    g_autofree char *run_hotmig = g_path_get_dirname(f->sock);
    g_autofree char *run = g_path_get_dirname(run_hotmig);

    agent_free(f->agent);
    assert_false(g_file_test(f->sock, G_FILE_TEST_EXISTS)); /* unlinked on exit */
    g_rmdir(run_hotmig);
    g_rmdir(run);
    g_rmdir(f->dir);
    g_free(f->dir);
    g_free(f->sock);
    g_string_free(f->out, TRUE);
    g_free(f->verbs_last_prefer);
    close(f->watch_fd);
    g_free(f);
    /* Drain sources the agent removed. */
    while (g_main_context_iteration(NULL, FALSE))
        ;
    return 0;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static void pump(guint ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

    while (g_get_monotonic_time() < end) {
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
}

static void host_send(Fixture *f, const char *s)
{
    agent_host_feed(f->agent, (const guint8 *)s, strlen(s));
}

/* Waits (running the main loop) for one reply line and returns it without its newline. */
static char *host_reply_text(Fixture *f, guint timeout_ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    const char *nl;
    char *line;

    while (!(nl = memchr(f->out->str, '\n', f->out->len))) {
        if (g_get_monotonic_time() > end)
            fail_msg("no reply from the agent within %u ms", timeout_ms);
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
    line = g_strndup(f->out->str, (gsize)(nl - f->out->str));
    g_string_erase(f->out, 0, nl - f->out->str + 1);
    return line;
}

static JsonNode *host_reply(Fixture *f, guint timeout_ms)
{
    g_autofree char *text = host_reply_text(f, timeout_ms);
    g_autoptr(GError) error = NULL;
    JsonNode *node = json_from_string(text, &error);

    if (!node)
        fail_msg("reply '%s' is not JSON: %s", text, error->message);
    assert_true(JSON_NODE_HOLDS_OBJECT(node));
    return node;
}

/* Returns the "return" object of a reply (fails on an error reply). */
static JsonObject *reply_return(JsonNode *node)
{
    JsonObject *obj = json_node_get_object(node);

    if (!json_object_has_member(obj, "return"))
        fail_msg("expected a return, got '%s'", json_to_string(node, FALSE));
    return json_object_get_object_member(obj, "return");
}

/* Checks that the next reply is an error of @klass whose desc holds @needle. */
static void expect_error(Fixture *f, const char *request, const char *klass, const char *needle)
{
    g_autoptr(JsonNode) node = NULL;
    JsonObject *err;

    host_send(f, request);
    node = host_reply(f, 1000);
    assert_true(json_object_has_member(json_node_get_object(node), "error"));
    err = json_object_get_object_member(json_node_get_object(node), "error");
    assert_string_equal(json_object_get_string_member(err, "class"), klass);
    if (needle && !strstr(json_object_get_string_member(err, "desc"), needle))
        fail_msg("desc '%s' lacks '%s'", json_object_get_string_member(err, "desc"), needle);
}

static int proc_connect(Fixture *f, const char *hello)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    g_strlcpy(addr.sun_path, f->sock, sizeof(addr.sun_path));
    assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    if (hello) {
        guint before = agent_get_n_procs(f->agent);
        gint64 end = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;

        assert_int_equal(write(fd, hello, strlen(hello)), (ssize_t)strlen(hello));
        /* Wait until the agent registered it (slow under valgrind). */
        while (agent_get_n_procs(f->agent) == before && g_get_monotonic_time() < end) {
            if (!g_main_context_iteration(NULL, FALSE))
                g_usleep(1000);
        }
        assert_int_equal(agent_get_n_procs(f->agent), before + 1);
    }
    return fd;
}

static void proc_send(int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Reads one line from a process socket while running the agent; NULL on EOF. */
static char *proc_read_line(int fd, guint timeout_ms)
{
    g_autoptr(GString) line = g_string_new(NULL);
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;

    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        char c;

        g_main_context_iteration(NULL, FALSE);
        if (poll(&pfd, 1, 1) == 1) {
            ssize_t n = read(fd, &c, 1);

            if (n <= 0)
                return NULL;
            if (c == '\n')
                return g_string_free(g_steal_pointer(&line), FALSE);
            g_string_append_c(line, c);
        }
        if (g_get_monotonic_time() > end)
            fail_msg("no line from the agent within %u ms", timeout_ms);
    }
}

/* Sends @answer_fmt (with the seq of the request just read) for a request starting with
 * @verb; returns the seq. */
static guint64 proc_expect(int fd, const char *verb)
{
    g_autofree char *line = proc_read_line(fd, 2000);
    g_auto(GStrv) fields = NULL;

    assert_non_null(line);
    fields = g_strsplit(line, " ", 0);
    assert_string_equal(fields[0], verb);
    return g_ascii_strtoull(fields[1], NULL, 10);
}

static void proc_answer(int fd, const char *verb, guint64 seq)
{
    g_autofree char *s = g_strdup_printf("%s %" G_GUINT64_FORMAT "%s\n", verb, seq,
                                         g_str_equal(verb, "FAILED") ? " cannot close QP" : "");

    proc_send(fd, s);
}

static JsonArray *member_array(JsonObject *obj, const char *member)
{
    assert_true(json_object_has_member(obj, member));
    return json_object_get_array_member(obj, member);
}

static JsonObject *array_obj(JsonArray *a, guint i)
{
    return json_array_get_object_element(a, i);
}

/* ---- tests: protocol --------------------------------------------------------------------- */

static void test_sync_handshake(void **state)
{
    Fixture *f = *state;
    g_autofree char *r1 = NULL;
    g_autofree char *r2 = NULL;

    /* Garbage and a partial request before 0xFF are dropped. */
    host_send(f, "garbage \x01\x02 {\"execute\":\"pi");
    host_send(f, "\xff{\"execute\":\"sync\",\"arguments\":{\"id\":1234567890123}}\n");
    r1 = host_reply_text(f, 1000);
    assert_string_equal(r1, "\xff{\"return\":1234567890123}");
    assert_int_equal(f->out->len, 0);

    /* A sync byte inside a request line also resets; CRLF is accepted. */
    host_send(f, "{\"execute\":\xff{\"execute\":\"sync\",\"arguments\":{\"id\":-7}}\r\n");
    r2 = host_reply_text(f, 1000);
    assert_string_equal(r2, "\xff{\"return\":-7}");
    assert_int_equal(f->out->len, 0);

    expect_error(f, "{\"execute\":\"sync\"}\n", "InvalidParameter", "'id'");
    expect_error(f, "{\"execute\":\"sync\",\"arguments\":{\"id\":1.5}}\n", "InvalidParameter",
                 "'id'");
}

static void test_commands(void **state)
{
    Fixture *f = *state;
    g_autoptr(JsonNode) ping = NULL;
    g_autoptr(JsonNode) info = NULL;
    g_autoptr(JsonNode) status = NULL;
    JsonObject *ret;

    host_send(f, "\n   \n{\"execute\":\"ping\"}\n"); /* blank lines are ignored */
    ping = host_reply(f, 1000);
    assert_int_equal(json_object_get_size(reply_return(ping)), 0);
    assert_int_equal(f->out->len, 0);

    host_send(f, "{\"execute\":\"info\",\"arguments\":{}}\n");
    info = host_reply(f, 1000);
    ret = reply_return(info);
    assert_string_equal(json_object_get_string_member(ret, "version"), "0.1.0");
    /* Until the host negotiates, the session speaks the oldest version: its 6 commands. */
    assert_int_equal(json_object_get_int_member(ret, "protocol"), 1);
    assert_int_equal(json_object_get_int_member(ret, "protocol_max"), AGENT_PROTOCOL_VERSION);
    assert_int_equal(json_object_get_int_member(ret, "line_max"), 65536);
    assert_int_equal(json_array_get_length(member_array(ret, "commands")), 6);
    assert_true(json_array_get_length(member_array(ret, "capabilities")) >= 3);

    host_send(f, "{\"execute\":\"status\"}\n");
    status = host_reply(f, 1000);
    ret = reply_return(status);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");
    assert_int_equal(json_array_get_length(member_array(ret, "processes")), 0);
}

static void test_errors(void **state)
{
    Fixture *f = *state;
    g_autofree char *deep = NULL;
    g_autoptr(GString) deep_s = g_string_new("{\"execute\":\"ping\",\"arguments\":");

    expect_error(f, "{\"execute\":\"pong\"}\n", "CommandNotFound", "'pong'");
    expect_error(f, "{\"execute\":\"\\u0000\\n\"}\n", "CommandNotFound", "not known");
    expect_error(f, "not json\n", "InvalidJSON", NULL);
    expect_error(f, "{\"execute\":\"ping\"\n", "InvalidJSON", NULL);
    expect_error(f, "[1,2]\n", "InvalidJSON", "not a JSON object");
    expect_error(f, "\"ping\"\n", "InvalidJSON", NULL);
    expect_error(f, "{\"execute\":\"ping\"} {}\n", "InvalidJSON", NULL);
    expect_error(f, "{\"exec\xc3\x28\":\"ping\"}\n", "InvalidJSON", "UTF-8");
    expect_error(f, "{}\n", "InvalidParameter", "'execute'");
    expect_error(f, "{\"execute\":7}\n", "InvalidParameter", "'execute'");
    expect_error(f, "{\"execute\":\"ping\",\"id\":1}\n", "InvalidParameter", "'id'");
    expect_error(f, "{\"execute\":\"ping\",\"arguments\":[]}\n", "InvalidParameter", "'arguments'");
    expect_error(f, "{\"execute\":\"ping\",\"arguments\":{\"x\":1}}\n", "InvalidParameter", "'x'");
    expect_error(f, "{\"execute\":\"prepare\"}\n", "InvalidParameter", "'timeout_ms'");
    expect_error(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":\"5\"}}\n",
                 "InvalidParameter", "'timeout_ms'");
    expect_error(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":0}}\n",
                 "InvalidParameter", "'timeout_ms'");
    expect_error(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":99999999999}}\n",
                 "InvalidParameter", "'timeout_ms'");
    expect_error(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":null}}\n",
                 "InvalidParameter", "'timeout_ms'");
    expect_error(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":5,\"timeout\":5}}\n",
                 "InvalidParameter", "'timeout'");

    for (int i = 0; i < 5000; i++)
        g_string_append_c(deep_s, '[');
    g_string_append(deep_s, "}\n");
    deep = g_string_free(g_steal_pointer(&deep_s), FALSE);
    expect_error(f, deep, "InvalidJSON", "deeper");
    /* What json-glib reads beyond strict JSON (issue 28, finding 6): the prescan would not count
     * the nesting json-glib reads (here 21 levels, in a single-quoted string's shadow). */
    expect_error(f, "{\"execute\":\"ping\" /* a comment */}\n", "InvalidJSON", "not strict JSON");
    expect_error(
        f,
        "{\"execute\":\"ping\",\"arguments\":{\"a\":['\"',[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]"
        "]]]]],'\"']}}\n",
        "InvalidJSON", "not strict JSON at byte 36");

    /* A NUL byte in a line. */
    agent_host_feed(f->agent, (const guint8 *)"{\"execute\":\"ping\"\0}\n", 20);
    {
        g_autoptr(JsonNode) node = host_reply(f, 1000);

        assert_true(json_object_has_member(json_node_get_object(node), "error"));
    }
    /* Still serving. */
    host_send(f, "{\"execute\":\"ping\"}\n");
    g_autoptr(JsonNode) ok = host_reply(f, 1000);
    reply_return(ok);
}

static void test_oversize_line(void **state)
{
    Fixture *f = *state;
    g_autofree char *big = g_malloc(200 * 1024);
    g_autofree char *sync = NULL;

    memset(big, 'x', 200 * 1024);
    /* Fed in pieces, like a stream. */
    for (int i = 0; i < 200; i++)
        agent_host_feed(f->agent, (const guint8 *)big + i * 1024, 1024);
    assert_int_equal(f->out->len, 0);
    host_send(f, "\n");
    expect_error(f, "", "TooLarge", NULL);

    /* Exactly at the limit is fine: 65535 bytes + newline. */
    {
        g_autoptr(GString) line = g_string_new("{\"execute\":\"ping\"}");
        g_autoptr(JsonNode) node = NULL;

        while (line->len < AGENT_HOST_LINE_MAX - 1)
            g_string_append_c(line, ' ');
        g_string_append_c(line, '\n');
        agent_host_feed(f->agent, (const guint8 *)line->str, line->len);
        node = host_reply(f, 1000);
        reply_return(node);
        g_string_insert_c(line, 0, ' '); /* one more byte: too large */
        agent_host_feed(f->agent, (const guint8 *)line->str, line->len);
        expect_error(f, "", "TooLarge", NULL);
    }

    /* An overlong line cut short by a sync byte: no error, just the sync reply. */
    agent_host_feed(f->agent, (const guint8 *)big, 100 * 1024);
    host_send(f, "\xff{\"execute\":\"sync\",\"arguments\":{\"id\":9}}\n");
    sync = host_reply_text(f, 1000);
    assert_string_equal(sync, "\xff{\"return\":9}");
    assert_int_equal(f->out->len, 0);
}

/* Records the host framer's events as text: "L:line", "S", "O". */
static gboolean record_frame(AgentFrameEvent event, const char *line, gsize len, gpointer user_data)
{
    GPtrArray *events = user_data;

    switch (event) {
    case AGENT_FRAME_LINE:
        g_ptr_array_add(events, g_strdup_printf("L:%.*s", (int)len, line));
        break;
    case AGENT_FRAME_SYNC:
        g_ptr_array_add(events, g_strdup("S"));
        break;
    case AGENT_FRAME_OVERSIZE:
        g_ptr_array_add(events, g_strdup("O"));
        break;
    }
    return TRUE;
}

/* The host channel's framer (the fuzz target frames with it too): lines up to
 * AGENT_HOST_LINE_MAX bytes with their newline, CR LF accepted, the sync byte drops a partial
 * line, an overlong line is reported once it ends. */
static void test_host_framer(void **state)
{
    g_autoptr(GPtrArray) events = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *big = g_malloc(AGENT_HOST_LINE_MAX);
    AgentFramer framer;

    memset(big, 'x', AGENT_HOST_LINE_MAX);
    agent_framer_init_host(&framer);
    assert_true(agent_framer_feed(&framer, (const guint8 *)"a\r\nbc\xff", 6, record_frame, events));
    assert_true(agent_framer_feed(&framer, (const guint8 *)"d\n", 2, record_frame, events));
    /* AGENT_HOST_LINE_MAX - 1 bytes and the newline fit. */
    agent_framer_feed(&framer, (const guint8 *)big, AGENT_HOST_LINE_MAX - 1, record_frame, events);
    agent_framer_feed(&framer, (const guint8 *)"\n", 1, record_frame, events);
    assert_int_equal(events->len, 4);
    /* One more byte does not; it is reported at the newline, not when it overflows. */
    agent_framer_feed(&framer, (const guint8 *)big, AGENT_HOST_LINE_MAX, record_frame, events);
    assert_int_equal(events->len, 4);
    agent_framer_feed(&framer, (const guint8 *)"\ne\n", 3, record_frame, events);
    agent_framer_clear(&framer);

    assert_int_equal(events->len, 6);
    assert_string_equal(events->pdata[0], "L:a");
    assert_string_equal(events->pdata[1], "S");
    assert_string_equal(events->pdata[2], "L:d");
    assert_int_equal(strlen(events->pdata[3]), 2 + AGENT_HOST_LINE_MAX - 1);
    assert_string_equal(events->pdata[4], "O");
    assert_string_equal(events->pdata[5], "L:e");
}

/* ---- tests: prepare / resume ------------------------------------------------------------- */

static void test_prepare_resume(void **state)
{
    Fixture *f = *state;
    int p1 = proc_connect(f, "HELLO 0.1.0 101 lazy rank0\n");
    int p2 = proc_connect(f, "HELLO 0.1.0 102 threaded rank1\n");
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) status = NULL;
    g_autoptr(JsonNode) res = NULL;
    g_autoptr(JsonNode) res2 = NULL;
    JsonObject *ret;
    guint64 s1, s2;

    assert_int_equal(agent_get_n_procs(f->agent), 2);
    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":3000}}\n");
    s1 = proc_expect(p1, "QUIESCE");
    s2 = proc_expect(p2, "QUIESCE");
    assert_true(s1 > 0 && s1 == s2);
    assert_true(agent_is_busy(f->agent));
    assert_int_equal(agent_get_state(f->agent), AGENT_STATE_PREPARED);
    proc_answer(p1, "DONE", s1);
    proc_answer(p2, "FAILED", s2);
    prep = host_reply(f, 2000);
    ret = reply_return(prep);
    assert_string_equal(json_object_get_string_member(ret, "state"), "prepared");
    assert_int_equal(json_array_get_length(member_array(ret, "quiesced")), 1);
    assert_int_equal(json_object_get_int_member(array_obj(member_array(ret, "quiesced"), 0), "pid"),
                     101);
    assert_string_equal(
        json_object_get_string_member(array_obj(member_array(ret, "quiesced"), 0), "mode"), "lazy");
    assert_int_equal(json_array_get_length(member_array(ret, "failed")), 1);
    assert_string_equal(
        json_object_get_string_member(array_obj(member_array(ret, "failed"), 0), "error"),
        "cannot close QP");
    assert_string_equal(
        json_object_get_string_member(array_obj(member_array(ret, "failed"), 0), "mode"),
        "threaded");

    host_send(f, "{\"execute\":\"status\"}\n");
    status = host_reply(f, 1000);
    ret = reply_return(status);
    assert_string_equal(json_object_get_string_member(ret, "state"), "prepared");
    assert_int_equal(json_array_get_length(member_array(ret, "processes")), 2);

    expect_error(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":100}}\n", "Busy", NULL);

    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":3000}}\n");
    {
        g_autofree char *l1 = proc_read_line(p1, 2000);
        g_autofree char *l2 = proc_read_line(p2, 2000);
        g_auto(GStrv) f1 = g_strsplit(l1, " ", 0);

        assert_string_equal(f1[0], "RESUME");
        assert_string_equal(f1[2], "rxe0");
        assert_string_equal(l1, l2);
        proc_answer(p1, "DONE", g_ascii_strtoull(f1[1], NULL, 10));
        proc_answer(p2, "DONE", g_ascii_strtoull(f1[1], NULL, 10));
    }
    res = host_reply(f, 2000);
    ret = reply_return(res);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");
    assert_string_equal(json_object_get_string_member(ret, "device"), "rxe0");
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 2);
    assert_int_equal(json_array_get_length(member_array(ret, "failed")), 0);
    assert_int_equal(agent_get_state(f->agent), AGENT_STATE_RUNNING);

    /* Idempotent: resume while running succeeds and asks nothing of the processes. */
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":100}}\n");
    res2 = host_reply(f, 1000);
    ret = reply_return(res2);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 0);
    {
        struct pollfd pfd = {.fd = p1, .events = POLLIN};

        pump(20);
        assert_int_equal(poll(&pfd, 1, 0), 0);
    }
    close(p1);
    close(p2);
}

static void test_prepare_deadline(void **state)
{
    Fixture *f = *state;
    int silent = proc_connect(f, "HELLO 0.1.0 201 lazy silent\n");
    int good = proc_connect(f, "HELLO 0.1.0 202 lazy good\n");
    g_autoptr(JsonNode) prep = NULL;
    JsonObject *ret;
    JsonObject *failed;
    gint64 start = g_get_monotonic_time();
    gint64 elapsed_ms;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":300}}\n");
    proc_answer(good, "DONE", proc_expect(good, "QUIESCE"));
    prep = host_reply(f, 3000);
    elapsed_ms = (g_get_monotonic_time() - start) / 1000;
    assert_true(elapsed_ms >= 290 && elapsed_ms < 1500);
    ret = reply_return(prep);
    assert_int_equal(json_array_get_length(member_array(ret, "quiesced")), 1);
    assert_int_equal(json_array_get_length(member_array(ret, "failed")), 1);
    failed = array_obj(member_array(ret, "failed"), 0);
    assert_int_equal(json_object_get_int_member(failed, "pid"), 201);
    assert_non_null(strstr(json_object_get_string_member(failed, "error"), "300 ms"));
    assert_false(agent_is_busy(f->agent));

    /* Its late answer is recorded, not replied. */
    proc_answer(silent, "DONE", proc_expect(silent, "QUIESCE"));
    pump(50);
    assert_int_equal(f->out->len, 0);
    close(silent);
    close(good);
}

static void test_register_while_prepared(void **state)
{
    Fixture *f = *state;
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) status = NULL;
    JsonObject *ret;
    JsonObject *proc;
    int late;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000}}\n");
    prep = host_reply(f, 1000); /* nobody to wait for */
    ret = reply_return(prep);
    assert_int_equal(json_array_get_length(member_array(ret, "quiesced")), 0);
    assert_int_equal(json_array_get_length(member_array(ret, "failed")), 0);

    late = proc_connect(f, "HELLO 0.1.0 301 threaded late\n");
    proc_answer(late, "DONE", proc_expect(late, "QUIESCE"));
    pump(200);
    host_send(f, "{\"execute\":\"status\"}\n");
    status = host_reply(f, 1000);
    ret = reply_return(status);
    assert_string_equal(json_object_get_string_member(ret, "state"), "prepared");
    proc = array_obj(member_array(ret, "processes"), 0);
    assert_int_equal(json_object_get_int_member(proc, "pid"), 301);
    assert_true(json_object_get_boolean_member(proc, "quiesced"));
    close(late);
}

static void test_register_during_prepare(void **state)
{
    Fixture *f = *state;
    int first = proc_connect(f, "HELLO 0.1.0 401 lazy first\n");
    g_autoptr(JsonNode) prep = NULL;
    JsonObject *ret;
    guint64 seq;
    int second;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":3000}}\n");
    seq = proc_expect(first, "QUIESCE");
    second = proc_connect(f, "HELLO 0.1.0 402 lazy second\n");
    assert_int_equal(proc_expect(second, "QUIESCE"), seq); /* it joins the prepare */
    proc_answer(first, "DONE", seq);
    pump(20);
    assert_int_equal(f->out->len, 0); /* still waits for the second */
    proc_answer(second, "DONE", seq);
    prep = host_reply(f, 2000);
    ret = reply_return(prep);
    assert_int_equal(json_array_get_length(member_array(ret, "quiesced")), 2);
    close(first);
    close(second);
}

static void test_proc_gone_during_prepare(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 501 lazy quitter\n");
    g_autoptr(JsonNode) prep = NULL;
    JsonObject *ret;
    JsonObject *failed;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":5000}}\n");
    proc_expect(p, "QUIESCE");
    close(p);
    prep = host_reply(f, 1000); /* long before the deadline */
    ret = reply_return(prep);
    failed = array_obj(member_array(ret, "failed"), 0);
    assert_int_equal(json_object_get_int_member(failed, "pid"), 501);
    assert_non_null(strstr(json_object_get_string_member(failed, "error"), "disconnected"));
    assert_int_equal(agent_get_n_procs(f->agent), 0);
}

static void test_proc_garbage(void **state)
{
    Fixture *f = *state;
    static const char *const bad[] = {
        "HELLO\n",
        "HELLO 0.1.0 1 lazy\n",
        "HELLO 0.1.0 0 lazy x\n",
        "HELLO 0.1.0 -5 lazy x\n",
        "HELLO 0.1.0 99999999999 lazy x\n",
        "HELLO 0.1.0 5 eager x\n",
        "HELLO v1 5 lazy x\n",
        "HELLO 0.1.0 5 lazy x y\n",
        "HELLO 0.1.0 5 lazy  x\n",
        "HELLO 0.1.0 5 lazy \x01\n",
        "DONE 1\n", /* before HELLO */
        "hello 0.1.0 5 lazy x\n",
        "\xff\xfe\n",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        int p = proc_connect(f, NULL);
        g_autofree char *line = NULL;

        proc_send(p, bad[i]);
        line = proc_read_line(p, 1000); /* the agent hangs up */
        assert_null(line);
        close(p);
    }
    assert_int_equal(agent_get_n_procs(f->agent), 0);

    /* Registered, then garbage or an overlong line: dropped. */
    {
        int p = proc_connect(f, "HELLO 0.1.0 601 lazy ok\n");
        g_autofree char *big = g_strnfill(600, 'A');

        assert_int_equal(agent_get_n_procs(f->agent), 1);
        proc_send(p, big);
        assert_null(proc_read_line(p, 1000));
        close(p);
        p = proc_connect(f, "HELLO 0.1.0 602 lazy ok\n");
        proc_send(p, "HELLO 0.1.0 602 lazy again\n");
        assert_null(proc_read_line(p, 1000));
        close(p);
        p = proc_connect(f, "HELLO 0.1.0 603 lazy ok\n");
        proc_send(p, "DONE x\n");
        assert_null(proc_read_line(p, 1000));
        close(p);
        pump(20);
        assert_int_equal(agent_get_n_procs(f->agent), 0);
    }
    /* A stale answer (wrong seq) is ignored, not fatal. */
    {
        int p = proc_connect(f, "HELLO 0.1.0 604 lazy ok\n");
        g_autoptr(JsonNode) prep = NULL;
        guint64 seq;

        host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":3000}}\n");
        seq = proc_expect(p, "QUIESCE");
        proc_answer(p, "DONE", seq + 100);
        proc_answer(p, "DONE", seq);
        prep = host_reply(f, 2000);
        assert_int_equal(json_array_get_length(member_array(reply_return(prep), "quiesced")), 1);
        close(p);
    }
}

static void test_resume_waits_for_device(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 701 lazy r\n");
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) res = NULL;
    g_autofree char *line = NULL;
    JsonObject *ret;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000}}\n");
    proc_answer(p, "DONE", proc_expect(p, "QUIESCE"));
    prep = host_reply(f, 1000);

    f->verbs_calls = 0;
    f->verbs_found_after = 5; /* the sixth look finds it */
    f->verbs_device = "mlx5_3";
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":3000}}\n");
    line = proc_read_line(p, 2000);
    assert_true(g_str_has_prefix(line, "RESUME "));
    assert_true(g_str_has_suffix(line, " mlx5_3"));
    assert_int_equal(f->verbs_calls, 6);
    {
        g_auto(GStrv) fields = g_strsplit(line, " ", 0);

        proc_answer(p, "DONE", g_ascii_strtoull(fields[1], NULL, 10));
    }
    res = host_reply(f, 2000);
    ret = reply_return(res);
    assert_string_equal(json_object_get_string_member(ret, "device"), "mlx5_3");
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 1);
    close(p);
}

static void test_resume_no_device(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 801 lazy r\n");
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) res = NULL;
    JsonObject *ret;
    gint64 start;
    guint64 seq;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000}}\n");
    proc_answer(p, "DONE", proc_expect(p, "QUIESCE"));
    prep = host_reply(f, 1000);

    f->verbs_found_after = -1;
    start = g_get_monotonic_time();
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":400}}\n");
    {
        g_autofree char *line = proc_read_line(p, 2000);
        g_auto(GStrv) fields = g_strsplit(line, " ", 0);

        assert_string_equal(fields[0], "RESUME");
        assert_string_equal(fields[2], "-");
        seq = g_ascii_strtoull(fields[1], NULL, 10);
        /* The device search left time for the answers. */
        assert_true((g_get_monotonic_time() - start) / 1000 < 390);
    }
    proc_answer(p, "DONE", seq);
    res = host_reply(f, 2000);
    assert_true((g_get_monotonic_time() - start) / 1000 < 1000);
    ret = reply_return(res);
    assert_string_equal(json_object_get_string_member(ret, "device"), "");
    /* It says why no device came: the last look's error. */
    assert_true(json_object_has_member(ret, "device_error"));
    assert_non_null(strstr(json_object_get_string_member(ret, "device_error"),
                           "no RDMA device with an ACTIVE port within"));
    assert_non_null(strstr(json_object_get_string_member(ret, "device_error"),
                           "fake: no device yet"));
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 1);
    assert_true(f->verbs_calls > 3); /* it kept looking */
    close(p);
}

/* Prepares with one lazy process @p; the reply is consumed. */
static void prepare_one(Fixture *f, int p)
{
    g_autoptr(JsonNode) prep = NULL;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":1000}}\n");
    proc_answer(p, "DONE", proc_expect(p, "QUIESCE"));
    prep = host_reply(f, 1000);
    reply_return(prep);
}

/* Answers the RESUME read in @line and checks the reply names @device. */
static void resume_finish(Fixture *f, int p, const char *line, const char *device)
{
    g_auto(GStrv) fields = g_strsplit(line, " ", 0);
    g_autoptr(JsonNode) res = NULL;

    proc_answer(p, "DONE", g_ascii_strtoull(fields[1], NULL, 10));
    res = host_reply(f, 2000);
    assert_string_equal(json_object_get_string_member(reply_return(res), "device"), device);
}

/* With device events the fallback poll is slow (AGENT_DEVICE_POLL_EVENTS_MS); a change of the
 * RDMA devices makes the resume look at once. */
static void test_resume_device_event(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 711 lazy r\n");
    g_autofree char *line = NULL;
    gint64 changed;
    int calls;

    agent_set_device_events(f->agent, TRUE);
    prepare_one(f, p);
    f->verbs_calls = 0;
    f->verbs_found_after = -1;
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":10000}}\n");
    pump(100);
    /* One look at the start, none since: the fallback poll is 500 ms away. */
    assert_int_equal(f->verbs_calls, 1);
    assert_int_equal(f->out->len, 0);

    f->verbs_found_after = 0;
    changed = g_get_monotonic_time();
    agent_devices_changed(f->agent);
    agent_devices_changed(f->agent); /* coalesced with the first */
    line = proc_read_line(p, 2000);
    assert_true(g_str_has_prefix(line, "RESUME "));
    assert_true(g_str_has_suffix(line, " rxe0"));
    assert_true((g_get_monotonic_time() - changed) / 1000 < AGENT_DEVICE_POLL_EVENTS_MS / 2);
    calls = f->verbs_calls;
    assert_int_equal(calls, 2);
    resume_finish(f, p, line, "rxe0");

    /* Outside a resume a change does nothing. */
    agent_devices_changed(f->agent);
    pump(20);
    assert_int_equal(f->verbs_calls, calls);
    close(p);
}

/* A port going ACTIVE on a device already there: the port watch wakes the resume; the watch
 * is opened for the wait and closed when the device is found. */
static void test_resume_port_event(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 721 threaded r\n");
    g_autofree char *line = NULL;
    guint64 one = 1;
    gint64 event;

    agent_set_device_events(f->agent, TRUE);
    prepare_one(f, p);
    f->verbs_calls = 0;
    f->verbs_found_after = -1;
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":10000}}\n");
    pump(50);
    assert_int_equal(f->watch_opened, 1);
    assert_int_equal(f->watch_freed, 0);

    /* A device came (uevent): the watch is reopened on the devices present. */
    agent_devices_changed(f->agent);
    pump(50);
    assert_int_equal(f->watch_opened, 2);
    assert_int_equal(f->watch_freed, 1);
    assert_int_equal(f->out->len, 0);

    f->verbs_found_after = 0;
    event = g_get_monotonic_time();
    assert_int_equal(write(f->watch_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
    line = proc_read_line(p, 2000);
    assert_true(g_str_has_prefix(line, "RESUME "));
    assert_true((g_get_monotonic_time() - event) / 1000 < AGENT_DEVICE_POLL_EVENTS_MS / 2);
    assert_int_equal(f->watch_drained, 1);
    assert_int_equal(f->watch_freed, 2); /* closed once the device was found */
    resume_finish(f, p, line, "rxe0");
    close(p);
}

/* The port went ACTIVE while the port watch was being set up (its event went to nobody): the
 * look made once the watch listens finds it, long before the poll would. */
static void test_resume_port_active_during_watch_setup(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 741 lazy r\n");
    g_autofree char *line = NULL;
    gint64 start;

    agent_set_device_events(f->agent, TRUE);
    prepare_one(f, p);
    f->verbs_calls = 0;
    f->verbs_found_after = 1; /* not at the first look, at the next */
    start = g_get_monotonic_time();
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":10000}}\n");
    line = proc_read_line(p, AGENT_DEVICE_POLL_EVENTS_MS + 1000);
    assert_true(g_str_has_prefix(line, "RESUME "));
    assert_true((g_get_monotonic_time() - start) / 1000 < AGENT_DEVICE_POLL_EVENTS_MS / 2);
    assert_int_equal(f->verbs_calls, 2);
    assert_int_equal(f->watch_opened, 1);
    assert_int_equal(f->watch_drained, 0); /* no event was needed */
    resume_finish(f, p, line, "rxe0");
    close(p);
}

/* Without events, and when no event comes, the poll still finds the device. */
static void test_resume_events_fallback_poll(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 731 lazy r\n");
    g_autofree char *line = NULL;

    agent_set_device_events(f->agent, TRUE);
    prepare_one(f, p);
    f->verbs_calls = 0;
    f->verbs_found_after = 2; /* the first look, the look once the watch listens, the poll */
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":10000}}\n");
    line = proc_read_line(p, AGENT_DEVICE_POLL_EVENTS_MS + 1000);
    assert_true(g_str_has_prefix(line, "RESUME "));
    assert_int_equal(f->verbs_calls, 3);
    assert_int_equal(f->watch_freed, f->watch_opened);
    resume_finish(f, p, line, "rxe0");
    close(p);
}

static void test_uevent_is_rdma(void **state)
{
    static const char ib[] = "add@/devices/virtual/infiniband/rxe0\0ACTION=add\0"
                             "DEVPATH=/devices/virtual/infiniband/rxe0\0SUBSYSTEM=infiniband\0"
                             "NAME=rxe0\0SEQNUM=2093";
    static const char uverbs[] = "add@/devices/virtual/infiniband_verbs/uverbs0\0ACTION=add\0"
                                 "SUBSYSTEM=infiniband_verbs\0MAJOR=231\0MINOR=192";
    static const char last[] = "remove@/x\0ACTION=remove\0SUBSYSTEM=infiniband";
    static const char net[] = "add@/devices/pci0000:00/0000:00:01.0/virtio0/net/eth0\0ACTION=add\0"
                              "SUBSYSTEM=net\0INTERFACE=eth0";
    static const char longer[] = "add@/x\0SUBSYSTEM=infiniband_verbsX\0";
    static const char shorter[] = "add@/x\0SUBSYSTEM=infiniban\0";
    static const char no_header[] = "SUBSYSTEM=infiniband\0ACTION=add";
    static const char no_nul[] = "add@/devices/virtual/infiniband/rxe0";
    static const char udev[] = "libudev\0\xfe\xed\xca\xfeSUBSYSTEM=infiniband";
    g_autofree guint8 *big = g_malloc0(AGENT_UEVENT_MAX + 1);

    assert_true(agent_uevent_is_rdma((const guint8 *)ib, sizeof(ib) - 1));
    assert_true(agent_uevent_is_rdma((const guint8 *)ib, sizeof(ib))); /* a trailing NUL */
    assert_true(agent_uevent_is_rdma((const guint8 *)uverbs, sizeof(uverbs) - 1));
    assert_true(agent_uevent_is_rdma((const guint8 *)last, sizeof(last) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)net, sizeof(net) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)longer, sizeof(longer) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)shorter, sizeof(shorter) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)no_header, sizeof(no_header) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)no_nul, sizeof(no_nul) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)udev, sizeof(udev) - 1));
    assert_false(agent_uevent_is_rdma((const guint8 *)ib, 0));
    assert_false(agent_uevent_is_rdma(NULL, 10));
    /* Over the limit: not looked at, whatever it holds. */
    memcpy(big, ib, sizeof(ib));
    assert_true(agent_uevent_is_rdma(big, AGENT_UEVENT_MAX));
    assert_false(agent_uevent_is_rdma(big, AGENT_UEVENT_MAX + 1));
}

/* The listener opens where the kernel lets it (skipped otherwise) and sets device events. */
/* Set when a test could not run its case here (agent-uevent-test exits 77: a skip for CTest). */
static const char *skipped;

static gboolean write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    gboolean ok;

    if (fd < 0)
        return FALSE;
    ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    close(fd);
    return ok;
}

/* The uevent listener on a real NETLINK_KOBJECT_UEVENT socket, during a resume wait (each
 * agent_devices_changed() reopens the fake port watch): a kernel uevent of a non-RDMA device
 * (lo) and an RDMA uevent sent from user space change nothing; kernel uevents lost to a full
 * socket buffer (ENOBUFS) make the agent look at the devices again. Root only (it writes
 * sysfs uevent files and sends to the kernel's group). */
static void test_uevent_listener(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    AgentUevent *uevent;
    int p, fd;
    struct sockaddr_nl to = {.nl_family = AF_NETLINK, .nl_groups = 1};
    static const char fake[] = "add@/devices/virtual/infiniband/rxe9\0ACTION=add\0"
                               "DEVPATH=/devices/virtual/infiniband/rxe9\0SUBSYSTEM=infiniband\0";
    g_autofree char *line = NULL;
    guint64 one = 1;

    if (geteuid() != 0) {
        skipped = "not root: cannot write sysfs uevent files or send to the kernel's group";
        return;
    }
    uevent = agent_uevent_new(f->agent, &error);
    assert_non_null(uevent);
    assert_null(error);

    p = proc_connect(f, "HELLO 0.1.0 951 lazy r\n");
    prepare_one(f, p);
    f->verbs_found_after = -1;
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":20000}}\n");
    pump(50);
    assert_int_equal(f->watch_opened, 1);

    /* An RDMA uevent from user space (not the kernel): ignored. */
    fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
    assert_true(fd >= 0);
    assert_int_equal(sendto(fd, fake, sizeof(fake) - 1, 0, (struct sockaddr *)&to, sizeof(to)),
                     (ssize_t)(sizeof(fake) - 1));
    close(fd);
    pump(200);
    assert_int_equal(f->watch_opened, 1);

    /* The kernel's uevent of a network device: not about RDMA, ignored. */
    assert_true(write_file("/sys/class/net/lo/uevent", "change"));
    pump(200);
    assert_int_equal(f->watch_opened, 1);

    /* Kernel uevents by the thousand, nobody reading: the socket overflows (ENOBUFS), events
     * were lost, the agent looks at the devices again. */
    for (int i = 0; i < 4000; i++)
        assert_true(write_file("/sys/class/net/lo/uevent", "change"));
    pump(300);
    assert_true(f->watch_opened >= 2);

    /* The device comes: the resume ends. */
    f->verbs_found_after = 0;
    assert_int_equal(write(f->watch_fd, &one, sizeof(one)), (ssize_t)sizeof(one));
    line = proc_read_line(p, 2000);
    assert_true(g_str_has_prefix(line, "RESUME "));
    resume_finish(f, p, line, "rxe0");
    close(p);
    agent_uevent_free(uevent);
}

static void test_sync_drops_pending_reply(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 901 lazy slow\n");
    g_autofree char *sync = NULL;
    g_autoptr(JsonNode) res = NULL;
    g_autoptr(JsonNode) prep = NULL;
    JsonObject *ret;

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":200}}\n");
    proc_expect(p, "QUIESCE");
    host_send(f, "\xff{\"execute\":\"sync\",\"arguments\":{\"id\":3}}\n");
    sync = host_reply_text(f, 1000);
    assert_string_equal(sync, "\xff{\"return\":3}");
    expect_error(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":200}}\n", "Busy", NULL);
    pump(400);
    assert_int_equal(f->out->len, 0); /* the abandoned prepare's reply was not sent */
    assert_false(agent_is_busy(f->agent));

    /* Rollback: resume while a prepare is under way ends the prepare first. */
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":1000}}\n");
    proc_answer(p, "DONE", proc_expect(p, "RESUME"));
    res = host_reply(f, 2000);
    ret = reply_return(res);
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 1);

    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":2000}}\n");
    proc_expect(p, "QUIESCE");
    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":1000}}\n");
    prep = host_reply(f, 1000);
    ret = reply_return(prep);
    assert_string_equal(
        json_object_get_string_member(array_obj(member_array(ret, "failed"), 0), "error"),
        "prepare ended by resume");
    proc_answer(p, "DONE", proc_expect(p, "RESUME"));
    {
        g_autoptr(JsonNode) res2 = host_reply(f, 2000);

        assert_int_equal(json_array_get_length(member_array(reply_return(res2), "resumed")), 1);
    }
    close(p);
}

static void test_host_reset(void **state)
{
    Fixture *f = *state;
    g_autoptr(JsonNode) ping = NULL;

    host_send(f, "{\"execute\":\"pi");
    agent_host_reset(f->agent);
    host_send(f, "{\"execute\":\"ping\"}\n");
    ping = host_reply(f, 1000);
    reply_return(ping);
}

/* ---- tests: socket and channel ----------------------------------------------------------- */

static void test_listen_socket(void **state)
{
    Fixture *f = *state;
    g_autoptr(Agent) other = agent_new(&fake_verbs, f);
    g_autoptr(GError) error = NULL;
    g_autofree char *stale = g_build_filename(f->dir, "stale.sock", NULL);
    g_autofree char *file = g_build_filename(f->dir, "file", NULL);
    struct stat st;

    assert_int_equal(stat(f->sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);

    /* A live agent is not displaced. */
    assert_false(agent_listen(other, f->sock, NULL, &error));
    assert_non_null(strstr(error->message, "Another agent"));
    g_clear_error(&error);

    /* Not a socket: refused. */
    assert_true(g_file_set_contents(file, "x", 1, NULL));
    assert_false(agent_listen(other, file, NULL, &error));
    g_clear_error(&error);
    g_unlink(file);

    /* A stale socket is replaced. */
    {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);

        g_strlcpy(addr.sun_path, stale, sizeof(addr.sun_path));
        assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
        close(fd);
    }
    if (!agent_listen(other, stale, NULL, &error))
        fail_msg("%s", error->message);
    g_clear_pointer(&other, agent_free);
    assert_false(g_file_test(stale, G_FILE_TEST_EXISTS));
}

static void test_find_port(void **state)
{
    Fixture *f = *state;
    g_autofree char *sys = g_build_filename(f->dir, "sys", NULL);
    g_autofree char *p1 = g_build_filename(sys, "class", "virtio-ports", "vport0p1", NULL);
    g_autofree char *p2 = g_build_filename(sys, "class", "virtio-ports", "vport0p2", NULL);
    g_autofree char *n1 = g_build_filename(p1, "name", NULL);
    g_autofree char *n2 = g_build_filename(p2, "name", NULL);
    g_autofree char *found = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *rm = NULL;

    assert_int_equal(g_mkdir_with_parents(p1, 0755), 0);
    assert_int_equal(g_mkdir_with_parents(p2, 0755), 0);
    assert_true(g_file_set_contents(n1, "org.qemu.guest_agent.0\n", -1, NULL));
    assert_true(g_file_set_contents(n2, "org.hotmig.agent.0\n", -1, NULL));
    found = agent_channel_find_port(sys, "/dev", "org.hotmig.agent.0", &error);
    assert_non_null(found);
    assert_string_equal(found, "/dev/vport0p2");
    assert_null(agent_channel_find_port(sys, "/dev", "org.hotmig.agent.1", &error));
    assert_non_null(strstr(error->message, "org.hotmig.agent.1"));
    g_clear_error(&error);
    assert_null(agent_channel_find_port("/nonexistent", "/dev", "x", &error));

    rm = g_strdup_printf("rm -rf '%s'", sys);
    assert_int_equal(system(rm), 0);
}

/* A pty stands in for the virtio-serial port: once its master closes, the port side polls
 * HUP forever, like a port without a host. The channel must not spin on it. */
static void test_channel_port_hangup_no_busy_loop(void **state)
{
    Fixture *f = *state;
    g_autoptr(AgentChannel) channel = NULL;
    g_autoptr(GError) error = NULL;
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    const char *sync = "\xff{\"execute\":\"sync\",\"arguments\":{\"id\":77}}\n";
    char buf[64] = {0};
    gsize got = 0;
    int slave;
    int iterations = 0;
    gint64 end;

    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(slave >= 0);
    {
        struct termios tio;

        assert_int_equal(tcgetattr(slave, &tio), 0);
        cfmakeraw(&tio);
        assert_int_equal(tcsetattr(slave, TCSANOW, &tio), 0);
    }
    channel = agent_channel_new_port(f->agent, ptsname(master), 100, &error);
    /* (ptsname names the slave: the port side.) */
    if (!channel)
        fail_msg("%s", error->message);
    close(slave);

    assert_int_equal(write(master, sync, strlen(sync)), (ssize_t)strlen(sync));
    end = g_get_monotonic_time() + 2 * G_USEC_PER_SEC;
    while (got < 15 && g_get_monotonic_time() < end) {
        struct pollfd pfd = {.fd = master, .events = POLLIN};

        g_main_context_iteration(NULL, FALSE);
        if (poll(&pfd, 1, 5) == 1) {
            ssize_t n = read(master, buf + got, sizeof(buf) - 1 - got);

            assert_true(n > 0);
            got += (gsize)n;
        }
    }
    assert_memory_equal(buf, "\xff{\"return\":77}\n", 15);

    /* The host goes away: the port now polls HUP. Count main loop wake-ups for 500 ms. */
    close(master);
    end = g_get_monotonic_time() + 500 * 1000;
    while (g_get_monotonic_time() < end) {
        g_main_context_iteration(NULL, TRUE);
        iterations++;
    }
    /* With a 100 ms retry about 5-10; a busy loop would be thousands. */
    assert_true(iterations < 40);
}

/* ---- tests: protocol version, inventory, abort ------------------------------------------- */

static JsonObject *host_return(Fixture *f, const char *request, JsonNode **keep)
{
    host_send(f, request);
    *keep = host_reply(f, 2000);
    return reply_return(*keep);
}

static void test_protocol_negotiation(void **state)
{
    Fixture *f = *state;
    g_autoptr(JsonNode) n1 = NULL;
    g_autoptr(JsonNode) n2 = NULL;
    g_autoptr(JsonNode) n3 = NULL;
    JsonObject *ret;

    /* Commands newer than the session's version are refused with a hint. */
    expect_error(f, "{\"execute\":\"inventory\"}\n", "CommandNotFound", "needs protocol 2");
    expect_error(f, "{\"execute\":\"abort\",\"arguments\":{\"timeout_ms\":10}}\n",
                 "CommandNotFound", "negotiate with 'info'");
    expect_error(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":0}}\n", "InvalidParameter",
                 "'protocol'");
    expect_error(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":\"2\"}}\n",
                 "InvalidParameter", "must be an integer");

    /* A newer host gets the agent's version; an equal one gets its own. */
    ret = host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":99}}\n", &n1);
    assert_int_equal(json_object_get_int_member(ret, "protocol"), AGENT_PROTOCOL_VERSION);
    assert_int_equal(agent_get_protocol(f->agent), AGENT_PROTOCOL_VERSION);
    assert_int_equal(json_array_get_length(member_array(ret, "commands")), AGENT_COMMAND_LAST);
    ret = host_return(f, "{\"execute\":\"inventory\"}\n", &n2);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");

    /* A new host (the channel reopened, e.g. on the destination) negotiates anew. */
    host_send(f, "{\"execute\":\"inven");
    agent_host_reset(f->agent);
    assert_int_equal(agent_get_protocol(f->agent), 1);
    expect_error(f, "{\"execute\":\"inventory\"}\n", "CommandNotFound", NULL);
    ret = host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":1}}\n", &n3);
    assert_int_equal(json_object_get_int_member(ret, "protocol"), 1);
}

static void test_inventory(void **state)
{
    Fixture *f = *state;
    int p1 = proc_connect(f, "HELLO 0.1.0 301 lazy rank0\n");
    int p2 = proc_connect(f, "HELLO 0.1.0 302 threaded rank1\n");
    g_autoptr(JsonNode) n0 = NULL;
    g_autoptr(JsonNode) n1 = NULL;
    g_autoptr(JsonNode) n2 = NULL;
    g_autoptr(JsonNode) n3 = NULL;
    JsonObject *ret, *dev, *port;
    JsonArray *procs;
    guint64 seq;

    host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", &n0);
    ret = host_return(f, "{\"execute\":\"inventory\"}\n", &n1);
    procs = member_array(ret, "processes");
    assert_int_equal(json_array_get_length(procs), 2);
    assert_int_equal(json_object_get_int_member(array_obj(procs, 0), "pid"), 301);
    assert_string_equal(json_object_get_string_member(array_obj(procs, 0), "name"), "rank0");
    assert_string_equal(json_object_get_string_member(array_obj(procs, 1), "mode"), "threaded");
    assert_string_equal(json_object_get_string_member(array_obj(procs, 0), "state"), "running");
    assert_int_equal(json_array_get_length(member_array(ret, "devices")), 1);
    dev = array_obj(member_array(ret, "devices"), 0);
    assert_string_equal(json_object_get_string_member(dev, "name"), "rxe0");
    assert_string_equal(json_object_get_string_member(dev, "node_guid"), "5054:00ff:fe12:3456");
    port = array_obj(member_array(dev, "ports"), 0);
    assert_int_equal(json_object_get_int_member(port, "port"), 1);
    assert_string_equal(json_object_get_string_member(port, "state"), "ACTIVE");
    assert_int_equal(json_object_get_int_member(port, "lid"), 0);
    assert_int_equal(json_array_get_length(member_array(port, "gids")), 2);
    assert_false(json_object_has_member(ret, "devices_error"));

    /* Per process: quiescing while the request waits, then quiesced or failed. */
    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":3000}}\n");
    seq = proc_expect(p1, "QUIESCE");
    assert_int_equal(proc_expect(p2, "QUIESCE"), seq);
    proc_answer(p1, "DONE", seq);
    pump(20);
    ret = host_return(f, "{\"execute\":\"inventory\"}\n", &n2);
    procs = member_array(ret, "processes");
    assert_string_equal(json_object_get_string_member(ret, "state"), "prepared");
    assert_string_equal(json_object_get_string_member(array_obj(procs, 0), "state"), "quiesced");
    assert_string_equal(json_object_get_string_member(array_obj(procs, 1), "state"), "quiescing");
    proc_answer(p2, "FAILED", seq);
    {
        g_autoptr(JsonNode) prep = host_reply(f, 2000);

        assert_string_equal(json_object_get_string_member(reply_return(prep), "device"), "rxe0");
    }
    ret = host_return(f, "{\"execute\":\"inventory\"}\n", &n3);
    procs = member_array(ret, "processes");
    assert_string_equal(json_object_get_string_member(array_obj(procs, 1), "state"), "failed");
    assert_string_equal(json_object_get_string_member(array_obj(procs, 1), "error"),
                        "cannot close QP");
    close(p1);
    close(p2);
}

/* A process's job as the guest sees it (issue 32 item 7): HOTMIG_JOB, else SLURM_JOB_ID of its
 * environment, else Slurm's job_N of its cgroup; a value that is no job id is none. */
static void test_job_of_pid(void **state)
{
    g_autofree char *root = g_dir_make_tmp("hm-agent-job-XXXXXX", NULL);
    static const struct {
        const char *environ; /* '|' for NUL; NULL: unreadable */
        const char *cgroup;  /* NULL: none */
        const char *job;     /* NULL: none */
    } cases[] = {
        {"PATH=/bin|HOTMIG_JOB=lu-2481|SLURM_JOB_ID=77|", "0::/slurm/job_12/step_0\n", "lu-2481"},
        {"PATH=/bin|SLURM_JOB_ID=77|", "0::/slurm/job_12/step_0\n", "77"},
        {"PATH=/bin|", "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n", "4711"},
        {NULL, "12:memory:/slurm/uid_1000/job_99/step_batch\n", "99"},
        {"HOTMIG_JOB=a b|", "0::/user.slice\n", NULL},      /* not an id; no Slurm cgroup */
        {"XHOTMIG_JOB=nope|HOTMIG_JOB_X=no|", "0::/job_x/\n", NULL},
        {"HOTMIG_JOB=|SLURM_JOB_ID=5", NULL, "5"},            /* empty is none; no final NUL */
        {NULL, NULL, NULL},
    };

    assert_non_null(root);
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *dir = g_strdup_printf("%s/%zu", root, i + 1);
        g_autofree char *env = g_build_filename(dir, "environ", NULL);
        g_autofree char *cg = g_build_filename(dir, "cgroup", NULL);
        g_autofree char *job = NULL;

        assert_int_equal(g_mkdir(dir, 0700), 0);
        if (cases[i].environ) {
            g_autofree char *bytes = g_strdup(cases[i].environ);

            g_strdelimit(bytes, "|", '\0');
            assert_true(g_file_set_contents(env, bytes, strlen(cases[i].environ), NULL));
        }
        if (cases[i].cgroup)
            assert_true(g_file_set_contents(cg, cases[i].cgroup, -1, NULL));
        job = agent_job_of_pid(root, (gint)(i + 1));
        if (g_strcmp0(job, cases[i].job) != 0)
            fail_msg("case %zu: job '%s', expected '%s'", i, job ? job : "(none)",
                     cases[i].job ? cases[i].job : "(none)");
        g_unlink(env);
        g_unlink(cg);
        g_rmdir(dir);
    }
    assert_null(agent_job_of_pid(root, 0));
    g_rmdir(root);
}

/* The inventory reports a registered process's job from its environment. */
static void test_inventory_job(void **state)
{
    Fixture *f = *state;
    char *argv[] = {(char *)"sleep", (char *)"30", NULL};
    char *envp[] = {(char *)"HOTMIG_JOB=lu-2481", NULL};
    g_autoptr(GError) error = NULL;
    g_autoptr(JsonNode) n0 = NULL;
    g_autoptr(JsonNode) n1 = NULL;
    g_autofree char *hello = NULL;
    GPid child;
    JsonArray *procs;
    int p;

    if (!g_spawn_async(NULL, argv, envp, G_SPAWN_SEARCH_PATH_FROM_ENVP | G_SPAWN_DO_NOT_REAP_CHILD,
                       NULL, NULL, &child, &error))
        fail_msg("cannot start sleep: %s", error->message);
    hello = g_strdup_printf("HELLO 0.1.0 %d lazy rank0\n", (int)child);
    p = proc_connect(f, hello);
    host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", &n0);
    procs = member_array(host_return(f, "{\"execute\":\"inventory\"}\n", &n1), "processes");
    assert_int_equal(json_array_get_length(procs), 1);
    assert_string_equal(json_object_get_string_member(array_obj(procs, 0), "job"), "lu-2481");
    close(p);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    g_spawn_close_pid(child);
}

/* A fixture process under @root: its comm (NULL: none) and descriptors 3.. linked to @links. */
static void fake_proc(const char *root, gint pid, const char *comm, const char *const *links)
{
    g_autofree char *fd = g_strdup_printf("%s/%d/fd", root, pid);

    assert_int_equal(g_mkdir_with_parents(fd, 0700), 0);
    if (comm) {
        g_autofree char *path = g_strdup_printf("%s/%d/comm", root, pid);

        assert_true(g_file_set_contents(path, comm, -1, NULL));
    }
    for (int i = 0; links && links[i]; i++) {
        g_autofree char *path = g_strdup_printf("%s/%d", fd, i + 3);

        assert_int_equal(symlink(links[i], path), 0);
    }
}

static void rm_tree(const char *root)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", root);

    assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, NULL, NULL));
}

/* Issue 29 item 5: a process that holds the VF's device open without the layer or libhotmig
 * (ibv_rc_pingpong alone) was not in the inventory at all, so --dry-run said "0 process(es)
 * registered" and the move killed it. Now the inventory names it ("unregistered", from the
 * descriptors /proc shows), but not a registered process, nor one with other descriptors only. */
static void test_inventory_unregistered(void **state)
{
    Fixture *f = *state;
    g_autofree char *root = g_dir_make_tmp("hm-agent-proc-XXXXXX", NULL);
    static const char *const uverbs0[] = {"/dev/null", "/dev/infiniband/uverbs0", NULL};
    static const char *const uverbs1[] = {"socket:[4711]", "/dev/infiniband/uverbs1", NULL};
    static const char *const other[] = {"/dev/infiniband/rdma_cm", "/dev/infiniband", NULL};
    g_autoptr(JsonNode) n0 = NULL;
    g_autoptr(JsonNode) n1 = NULL;
    JsonObject *ret, *user;
    JsonArray *users;
    int p;

    assert_non_null(root);
    fake_proc(root, 401, "verbs:xdlu\n", uverbs0);          /* registered below */
    fake_proc(root, 402, "ibv_rc_pingpong\n", uverbs1);     /* not: named */
    fake_proc(root, 403, "rdma\n", other);                 /* no verbs device */
    fake_proc(root, 404, NULL, uverbs0);                   /* no comm: "_" */
    fake_proc(root, (gint)getpid(), "hotmig-agent\n", uverbs0); /* the agent itself */
    {
        g_autofree char *noise = g_strdup_printf("%s/self", root);

        assert_int_equal(g_mkdir(noise, 0700), 0);
    }
    agent_set_proc_root(f->agent, root);
    p = proc_connect(f, "HELLO 0.1.0 401 threaded verbs:xdlu\n");
    pump(50);
    host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", &n0);
    ret = host_return(f, "{\"execute\":\"inventory\"}\n", &n1);
    assert_int_equal(json_array_get_length(member_array(ret, "processes")), 1);
    users = member_array(ret, "unregistered");
    assert_int_equal(json_array_get_length(users), 2);
    user = array_obj(users, 0);
    assert_int_equal(json_object_get_int_member(user, "pid"), 402);
    assert_string_equal(json_object_get_string_member(user, "name"), "ibv_rc_pingpong");
    assert_string_equal(json_object_get_string_member(user, "device"), "uverbs1");
    user = array_obj(users, 1);
    assert_int_equal(json_object_get_int_member(user, "pid"), 404);
    assert_string_equal(json_object_get_string_member(user, "name"), "_");
    assert_false(json_object_has_member(ret, "unregistered_dropped"));
    close(p);
    rm_tree(root);
}

/* The scan is bounded: AGENT_DEVICE_USERS_MAX listed in pid order, the rest counted; a process
 * whose descriptors cannot be read is counted apart; names are made printable. */
static void test_device_users_bounds(void **state)
{
    g_autofree char *root = g_dir_make_tmp("hm-agent-proc-XXXXXX", NULL);
    static const char *const uverbs[] = {"/dev/infiniband/uverbs12 (deleted)", NULL};
    g_autoptr(GPtrArray) users = NULL;
    const gint skip[] = {1005};
    guint dropped = 0, unreadable = 0;

    (void)state;
    assert_non_null(root);
    for (gint i = 0; i < AGENT_DEVICE_USERS_MAX + 6; i++)
        fake_proc(root, 1000 + i, "a b\tc\n", uverbs);
    {
        g_autofree char *lone = g_strdup_printf("%s/999", root); /* no fd directory */

        assert_int_equal(g_mkdir(lone, 0700), 0);
    }
    users = agent_device_users(root, skip, G_N_ELEMENTS(skip), &dropped, &unreadable);
    assert_int_equal(users->len, AGENT_DEVICE_USERS_MAX);
    assert_int_equal(dropped, 5);
    assert_int_equal(unreadable, 1);
    assert_int_equal(((AgentDeviceUser *)users->pdata[0])->pid, 1000);
    assert_int_equal(((AgentDeviceUser *)users->pdata[5])->pid, 1006); /* 1005 skipped */
    assert_string_equal(((AgentDeviceUser *)users->pdata[0])->name, "a_b_c");
    assert_string_equal(((AgentDeviceUser *)users->pdata[0])->device, "uverbs12");
    g_clear_pointer(&users, g_ptr_array_unref);
    users = agent_device_users("/nonexistent-proc", NULL, 0, &dropped, &unreadable);
    assert_int_equal(users->len, 0);
    rm_tree(root);
}

/* PEER and REFUSED (the verbs layer, issue 18): listed by inventory, distinct and bounded;
 * malformed ones drop the process like any bad line. */
static void test_inventory_peers_refused(void **state)
{
    Fixture *f = *state;
    int p = proc_connect(f, "HELLO 0.1.0 401 threaded verbs:xdlu\n");
    static const char *const bad[] = {
        "PEER 00000000000000000000ffffc6336402\n",          /* no QPN */
        "PEER 00000000000000000000FFFFC6336402/17\n",       /* upper case */
        "PEER 00000000000000000000ffffc633640/17\n",        /* 31 digits */
        "PEER 00000000000000000000ffffc6336402/16777216\n", /* QPN >= 2^24 */
        "PEER 00000000000000000000ffffc6336402/017\n",      /* leading zero */
        "PEER 00000000000000000000ffffc6336402/17 x\n",     /* extra field */
        "REFUSED\n",                                        /* no call */
        "REFUSED a b\n",                                    /* two */
    };
    g_autoptr(JsonNode) n0 = NULL;
    g_autoptr(JsonNode) n1 = NULL;
    JsonObject *ret, *proc;
    JsonArray *peers, *refused;

    proc_send(p, "PEER 00000000000000000000ffffc6336402/17\n");
    proc_send(p, "PEER 00000000000000000000ffffc6336402/17\n"); /* again: kept once */
    proc_send(p, "PEER fe80000000000000505400fffe1234ab/0\n");
    proc_send(p, "REFUSED ibv_alloc_mw\n");
    proc_send(p, "REFUSED ibv_alloc_mw\n");
    for (int i = 0; i < AGENT_PEERS_MAX + 5; i++) {
        g_autofree char *line =
            g_strdup_printf("PEER 00000000000000000000ffffc6336403/%d\n", i + 1);

        proc_send(p, line);
    }
    pump(50);
    host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", &n0);
    ret = host_return(f, "{\"execute\":\"inventory\"}\n", &n1);
    proc = array_obj(member_array(ret, "processes"), 0);
    assert_int_equal(json_object_get_int_member(proc, "pid"), 401);
    peers = member_array(proc, "peers");
    assert_int_equal(json_array_get_length(peers), AGENT_PEERS_MAX);
    assert_string_equal(json_object_get_string_member(array_obj(peers, 0), "gid"),
                        "::ffff:198.51.100.2");
    assert_int_equal(json_object_get_int_member(array_obj(peers, 0), "qpn"), 17);
    assert_string_equal(json_object_get_string_member(array_obj(peers, 1), "gid"),
                        "fe80::5054:ff:fe12:34ab");
    assert_int_equal(json_object_get_int_member(array_obj(peers, 1), "qpn"), 0);
    assert_int_equal(json_object_get_int_member(proc, "peers_dropped"), 7);
    refused = member_array(proc, "refused");
    assert_int_equal(json_array_get_length(refused), 1);
    assert_string_equal(json_array_get_string_element(refused, 0), "ibv_alloc_mw");
    close(p);
    pump(20);
    assert_int_equal(agent_get_n_procs(f->agent), 0);

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        int q = proc_connect(f, "HELLO 0.1.0 402 lazy x\n");

        proc_send(q, bad[i]);
        assert_null(proc_read_line(q, 1000)); /* the agent hangs up */
        close(q);
        pump(20);
    }
    assert_int_equal(agent_get_n_procs(f->agent), 0);
}

/* STATS (issue 30 item 3), parsed alone: six decimal figures, each bounded, no leading zeros,
 * one word of at most AGENT_STATS_WORD_MAX bytes; the error names the field. */
static void test_proc_stats_parse(void **state)
{
    static const struct {
        const char *line;
        const char *needle; /* NULL: parses */
    } cases[] = {
        {"STATS 1/2/0/1234/1230/17", NULL},
        {"STATS 0/0/3/0/0/0", NULL},
        {"STATS 1/65536/65536/9007199254740991/9007199254740991/600000", NULL}, /* the bounds */
        {"STATS 2/0/0/0/0/0", "'used'"},                                        /* out of range */
        {"STATS 1/65537/0/0/0/0", "'switched'"},
        {"STATS 1/0/65537/0/0/0", "'paused'"},
        {"STATS 1/0/0/9007199254740992/0/0", "'sends'"}, /* 2^53 */
        {"STATS 1/0/0/0/9007199254740992/0", "'receives'"},
        {"STATS 1/0/0/0/0/600001", "'ms'"},
        {"STATS 1/0/0/18446744073709551616/0/0", "'sends'"}, /* past 64 bits */
        {"STATS 1/02/0/0/0/0", "'switched'"},                /* leading zeros */
        {"STATS 00/0/0/0/0/0", "'used'"},
        {"STATS 1/0/0/0/0/007", "'ms'"},
        {"STATS 1/-1/0/0/0/0", "'switched'"}, /* malformed */
        {"STATS 1/+1/0/0/0/0", "'switched'"},
        {"STATS 1//0/0/0/0", "'switched'"},
        {"STATS 1/0x1/0/0/0/0", "'switched'"},
        {"STATS 1/2/0/0/0", "one word"},
        {"STATS 1/2/0/0/0/0/0", "one word"},
        {"STATS 1/2/0/0/0/0 x", "one word"},
        {"STATS", "one word"},
        {"STATS 1/1/1/0000000000000000000000000000000000000000000000000000000001/1/1",
         "one word"}, /* too long */
    };

    (void)state;
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        AgentProcMsg msg;
        gboolean ok = agent_proc_msg_parse(cases[i].line, strlen(cases[i].line), &msg, &error);

        if (!cases[i].needle) {
            if (!ok)
                fail_msg("'%s': %s", cases[i].line, error->message);
            assert_int_equal(msg.kind, AGENT_MSG_STATS);
            continue;
        }
        if (ok)
            fail_msg("'%s' parsed", cases[i].line);
        g_assert_error(error, AGENT_ERROR, AGENT_ERROR_INVALID_PARAMETER);
        if (!strstr(error->message, cases[i].needle))
            fail_msg("'%s': %s", cases[i].line, error->message);
    }
    {
        AgentProcMsg msg;
        const char *line = "STATS 1/2/3/1234/1230/17";

        assert_true(agent_proc_msg_parse(line, strlen(line), &msg, NULL));
        assert_true(msg.stats.used);
        assert_int_equal(msg.stats.switched, 2);
        assert_int_equal(msg.stats.paused, 3);
        assert_int_equal(msg.stats.sends, 1234);
        assert_int_equal(msg.stats.recvs, 1230);
        assert_int_equal(msg.stats.ms, 17);
    }
}

/* The "standby" object of @ret's @member entry @i, or NULL. */
static JsonObject *entry_standby(JsonObject *ret, const char *member, guint i)
{
    JsonObject *entry = array_obj(member_array(ret, member), i);

    return json_object_has_member(entry, "standby")
               ? json_object_get_object_member(entry, "standby")
               : NULL;
}

/* @sb (not NULL) is {"used":true,"switched","paused","sends","receives","ms"} with @v */
static void assert_standby(JsonObject *sb, const gint64 v[5])
{
    static const char *const names[] = {"switched", "paused", "sends", "receives", "ms"};

    assert_non_null(sb);
    assert_true(json_object_get_boolean_member(sb, "used"));
    for (guint k = 0; k < G_N_ELEMENTS(names); k++)
        if (json_object_get_int_member(sb, names[k]) != v[k])
            fail_msg("standby.%s: %" G_GINT64_FORMAT ", not %" G_GINT64_FORMAT, names[k],
                     json_object_get_int_member(sb, names[k]), v[k]);
}

/* A process's STATS goes with the answer that follows it, when that answer is the request's:
 * in the prepare's "quiesced" and the resume's "resumed" entries as "standby". One sent before
 * the request, or followed by a stale answer, is dropped; a bad one drops the process. */
static void test_proc_stats(void **state)
{
    Fixture *f = *state;
    int p1 = proc_connect(f, "HELLO 0.1.0 111 threaded rank0\n");
    int p2 = proc_connect(f, "HELLO 0.1.0 112 threaded rank1\n");
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) res = NULL;
    JsonObject *ret;
    guint64 s1, s2;

    proc_send(p2, "STATS 1/9/9/9/9/9\n"); /* before any request: stale */
    pump(20);
    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":3000}}\n");
    s1 = proc_expect(p1, "QUIESCE");
    s2 = proc_expect(p2, "QUIESCE");
    proc_send(p1, "STATS 1/3/1/0/0/42\n");
    proc_answer(p1, "DONE", s1);
    proc_send(p2, "STATS 1/8/8/8/8/8\n");
    proc_answer(p2, "DONE", s2 + 1000); /* not the request's answer: its STATS goes with it */
    proc_answer(p2, "DONE", s2);
    prep = host_reply(f, 2000);
    ret = reply_return(prep);
    assert_int_equal(json_array_get_length(member_array(ret, "quiesced")), 2);
    assert_standby(entry_standby(ret, "quiesced", 0), (const gint64[]){3, 1, 0, 0, 42});
    assert_null(entry_standby(ret, "quiesced", 1));

    host_send(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":3000}}\n");
    s1 = proc_expect(p1, "RESUME");
    s2 = proc_expect(p2, "RESUME");
    proc_send(p1, "STATS 1/3/1/9007199254740991/1230/17\n");
    proc_answer(p1, "DONE", s1);
    proc_answer(p2, "DONE", s2);
    res = host_reply(f, 2000);
    ret = reply_return(res);
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 2);
    assert_standby(entry_standby(ret, "resumed", 0),
                   (const gint64[]){3, 1, 9007199254740991, 1230, 17});
    assert_null(entry_standby(ret, "resumed", 1));

    proc_send(p1, "STATS 1/3/1/0/0/0600\n"); /* hostile: the process is dropped */
    assert_null(proc_read_line(p1, 1000));
    close(p1);
    close(p2);
    pump(20);
    assert_int_equal(agent_get_n_procs(f->agent), 0);
}

static void test_abort(void **state)
{
    Fixture *f = *state;
    int p1 = proc_connect(f, "HELLO 0.1.0 401 lazy rank0\n");
    g_autoptr(JsonNode) n0 = NULL;
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) ab = NULL;
    g_autoptr(JsonNode) ab2 = NULL;
    JsonObject *ret;
    guint64 seq;

    host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", &n0);
    /* The processes quiesce on mlx5_0; after the failed migration rxe0 is active as well:
     * abort goes back to mlx5_0, the device they were on. */
    f->verbs_device = "mlx5_0";
    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":3000}}\n");
    proc_answer(p1, "DONE", proc_expect(p1, "QUIESCE"));
    prep = host_reply(f, 2000);
    assert_string_equal(json_object_get_string_member(reply_return(prep), "device"), "mlx5_0");
    f->verbs_device = "rxe0";
    f->verbs_also_active = "mlx5_0";
    host_send(f, "{\"execute\":\"abort\",\"arguments\":{\"timeout_ms\":3000}}\n");
    {
        g_autofree char *line = proc_read_line(p1, 2000);
        g_auto(GStrv) fields = g_strsplit(line, " ", 0);

        assert_string_equal(fields[0], "RESUME");
        assert_string_equal(fields[2], "mlx5_0");
        seq = g_ascii_strtoull(fields[1], NULL, 10);
    }
    assert_string_equal(f->verbs_last_prefer, "mlx5_0");
    expect_error(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":100}}\n", "Busy",
                 "abort is under way");
    proc_answer(p1, "DONE", seq);
    ab = host_reply(f, 2000);
    ret = reply_return(ab);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");
    assert_string_equal(json_object_get_string_member(ret, "device"), "mlx5_0");
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 1);
    assert_int_equal(agent_get_state(f->agent), AGENT_STATE_RUNNING);

    /* abort while running: nothing to do, said so at once. */
    ret = host_return(f, "{\"execute\":\"abort\",\"arguments\":{\"timeout_ms\":100}}\n", &ab2);
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 0);
    close(p1);
}

static void test_abort_during_prepare(void **state)
{
    Fixture *f = *state;
    int p1 = proc_connect(f, "HELLO 0.1.0 501 lazy stuck\n");
    g_autoptr(JsonNode) n0 = NULL;
    g_autoptr(JsonNode) prep = NULL;
    g_autoptr(JsonNode) ab = NULL;
    JsonObject *ret;

    host_return(f, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", &n0);
    host_send(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":60000}}\n");
    (void)proc_expect(p1, "QUIESCE"); /* never answered */
    host_send(f, "{\"execute\":\"abort\",\"arguments\":{\"timeout_ms\":3000}}\n");
    prep = host_reply(f, 2000);
    ret = reply_return(prep);
    assert_int_equal(json_array_get_length(member_array(ret, "failed")), 1);
    assert_string_equal(
        json_object_get_string_member(array_obj(member_array(ret, "failed"), 0), "error"),
        "prepare ended by abort");
    {
        g_autofree char *line = proc_read_line(p1, 2000);
        g_auto(GStrv) fields = g_strsplit(line, " ", 0);

        assert_string_equal(fields[0], "RESUME");
        proc_answer(p1, "DONE", g_ascii_strtoull(fields[1], NULL, 10));
    }
    ab = host_reply(f, 2000);
    ret = reply_return(ab);
    assert_int_equal(json_array_get_length(member_array(ret, "resumed")), 1);
    close(p1);
}

/* Garbage of every kind, then a sync: the agent answers the sync and stays usable. */
static void test_garbage_then_sync(void **state)
{
    Fixture *f = *state;
    g_autoptr(GString) junk = g_string_new(NULL);
    g_autofree char *r = NULL;
    g_autoptr(JsonNode) ping = NULL;
    GRand *rand = g_rand_new_with_seed(42);

    for (int i = 0; i < 200000; i++) {
        guint8 c = (guint8)g_rand_int_range(rand, 0, 255); /* never the sync byte */

        g_string_append_c(junk, (char)c);
    }
    g_rand_free(rand);
    agent_host_feed(f->agent, (const guint8 *)junk->str, junk->len);
    g_string_truncate(f->out, 0);        /* error replies to the junk lines */
    host_send(f, "{\"execute\":\"prep"); /* a host that died mid-message */
    host_send(f, "\xff{\"execute\":\"sync\",\"arguments\":{\"id\":5}}\n");
    r = host_reply_text(f, 1000);
    assert_string_equal(r, "\xff{\"return\":5}");
    host_send(f, "{\"execute\":\"ping\"}\n");
    ping = host_reply(f, 1000);
    assert_int_equal(json_object_get_size(reply_return(ping)), 0);
    assert_false(agent_is_busy(f->agent));
}

static void test_dispatcher_complete(void **state)
{
    for (int i = 0; i < AGENT_COMMAND_LAST; i++) {
        assert_true(agent_command_has_handler((AgentCommand)i));
        assert_int_equal(agent_command_from_string(agent_command_to_string((AgentCommand)i)), i);
    }
    for (int i = 0; i < AGENT_ERROR_LAST; i++)
        assert_non_null(agent_error_class_to_string((AgentError)i));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sync_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversize_line, setup, teardown),
        cmocka_unit_test(test_host_framer),
        cmocka_unit_test_setup_teardown(test_prepare_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prepare_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_while_prepared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_register_during_prepare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_gone_during_prepare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_waits_for_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_no_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_device_event, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_port_event, setup_watch, teardown),
        cmocka_unit_test_setup_teardown(test_resume_port_active_during_watch_setup, setup_watch,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resume_events_fallback_poll, setup_watch, teardown),
        cmocka_unit_test(test_uevent_is_rdma),
        cmocka_unit_test_setup_teardown(test_sync_drops_pending_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_find_port, setup, teardown),
        cmocka_unit_test_setup_teardown(test_channel_port_hangup_no_busy_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_negotiation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inventory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inventory_peers_refused, setup, teardown),
        cmocka_unit_test(test_proc_stats_parse),
        cmocka_unit_test_setup_teardown(test_proc_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_inventory_unregistered, setup, teardown),
        cmocka_unit_test(test_device_users_bounds),
        cmocka_unit_test(test_job_of_pid),
        cmocka_unit_test_setup_teardown(test_inventory_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abort_during_prepare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_then_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dispatcher_complete, setup, teardown),
    };

    const struct CMUnitTest uevent_tests[] = {
        cmocka_unit_test_setup_teardown(test_uevent_listener, setup_watch, teardown),
    };

    hm_log_setup("agent-core-test", g_getenv("HM_TEST_VERBOSE") != NULL);
    /* --uevent: only the listener on the real kernel socket (CTest's agent-uevent-test). */
    if (argc > 1 && g_str_equal(argv[1], "--uevent")) {
        int failed = cmocka_run_group_tests_name("agent-uevent", uevent_tests, NULL, NULL);

        if (failed == 0 && skipped) {
            fprintf(stderr, "skipped: %s\n", skipped);
            return 77;
        }
        return failed;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
