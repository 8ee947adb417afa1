/* The hotmig-agent binary end to end, no guest needed: the host channel is one end of a
 * socketpair handed over as --device fd:3, and the processes are real libhotmig clients in
 * both modes. libibverbs is the real one: without RDMA hardware resume reports device "".
 * Usage: agent-binary-test PATH-TO-hotmig-agent */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest-agent/libhotmig/hotmig.h"

static const char *agent_path;

typedef struct {
    char *dir;
    char *sock;
    pid_t pid;
    int host; /* our end of the channel */
    GString *in;
    int quiesced;
    int resumed;
    char device[64];
} Fixture;

static int setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);
    int sv[2];

    f->dir = g_dir_make_tmp("agent-binary-test.XXXXXX", NULL);
    f->sock = g_build_filename(f->dir, "hotmig", "agent.sock", NULL);
    f->in = g_string_new(NULL);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    f->pid = fork();
    assert_true(f->pid >= 0);
    if (f->pid == 0) {
        dup2(sv[1], 3); /* dup2 clears O_CLOEXEC on the copy */
        execl(agent_path, agent_path, "--device", "fd:3", "--socket", f->sock, NULL);
        _exit(127);
    }
    close(sv[1]);
    f->host = sv[0];
    /* Ready once the socket exists. */
    for (int i = 0; i < 500 && !g_file_test(f->sock, G_FILE_TEST_EXISTS); i++)
        g_usleep(10000);
    assert_true(g_file_test(f->sock, G_FILE_TEST_EXISTS));
    g_setenv(HOTMIG_AGENT_SOCKET_ENV, f->sock, TRUE);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    g_autofree char *sockdir = g_path_get_dirname(f->sock);
    int status = 0;

    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    assert_false(g_file_test(f->sock, G_FILE_TEST_EXISTS)); /* unlinked on exit */
    close(f->host);
    g_rmdir(sockdir);
    g_rmdir(f->dir);
    g_free(f->dir);
    g_free(f->sock);
    g_string_free(f->in, TRUE);
    g_free(f);
    return 0;
}

static void host_send(Fixture *f, const char *s)
{
    assert_int_equal(send(f->host, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Reads one reply line within @timeout_ms; while waiting, lazy @client (if any) dispatches. */
static char *host_line(Fixture *f, guint timeout_ms, HotmigClient *client)
{
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;

    for (;;) {
        const char *nl = memchr(f->in->str, '\n', f->in->len);
        struct pollfd pfd[2] = {{.fd = f->host, .events = POLLIN},
                                {.fd = hotmig_client_get_fd(client), .events = POLLIN}};
        char buf[4096];

        if (nl) {
            char *line = g_strndup(f->in->str, (gsize)(nl - f->in->str));

            g_string_erase(f->in, 0, nl - f->in->str + 1);
            return line;
        }
        if (g_get_monotonic_time() > end)
            fail_msg("no reply from hotmig-agent within %u ms", timeout_ms);
        if (poll(pfd, client ? 2 : 1, 10) <= 0)
            continue;
        if (pfd[0].revents) {
            ssize_t n = read(f->host, buf, sizeof(buf));

            assert_true(n > 0);
            g_string_append_len(f->in, buf, n);
        }
        if (client && pfd[1].revents)
            assert_true(hotmig_client_dispatch(client) >= 0);
    }
}

static JsonObject *host_return(Fixture *f, const char *request, HotmigClient *client,
                               JsonNode **ret_node)
{
    g_autofree char *line = NULL;
    g_autoptr(GError) error = NULL;
    JsonNode *node;

    host_send(f, request);
    line = host_line(f, 5000, client);
    node = json_from_string(line, &error);
    if (!node || !json_object_has_member(json_node_get_object(node), "return"))
        fail_msg("bad reply '%s'", line);
    *ret_node = node;
    return json_object_get_object_member(json_node_get_object(node), "return");
}

static int on_quiesce(void *opaque)
{
    ((Fixture *)opaque)->quiesced++;
    return 0;
}

static int on_resume(const char *device, void *opaque)
{
    Fixture *f = opaque;

    f->resumed++;
    g_strlcpy(f->device, device ? device : "", sizeof(f->device));
    return 0;
}

static void test_binary_sync_and_errors(void **state)
{
    Fixture *f = *state;
    g_autofree char *sync = NULL;
    g_autofree char *err = NULL;
    g_autofree char *info = NULL;

    host_send(f, "junk\xff{\"execute\":\"sync\",\"arguments\":{\"id\":4242}}\n");
    sync = host_line(f, 5000, NULL);
    assert_string_equal(sync, "\xff{\"return\":4242}");
    host_send(f, "{\"execute\":\"bogus\"}\n");
    err = host_line(f, 5000, NULL);
    assert_non_null(strstr(err, "\"class\":\"CommandNotFound\""));
    host_send(f, "{\"execute\":\"info\"}\n");
    info = host_line(f, 5000, NULL);
    assert_non_null(strstr(info, "\"protocol\":1"));
}

static void test_binary_migration_cycle(void **state)
{
    Fixture *f = *state;
    HotmigClient *lazy = hotmig_client_new("lazy-rank", HOTMIG_MODE_LAZY, on_quiesce, on_resume, f);
    HotmigClient *threaded =
        hotmig_client_new("threaded-rank", HOTMIG_MODE_THREADED, on_quiesce, on_resume, f);
    g_autoptr(JsonNode) n1 = NULL;
    g_autoptr(JsonNode) n2 = NULL;
    g_autoptr(JsonNode) n3 = NULL;
    g_autoptr(JsonNode) n4 = NULL;
    JsonObject *ret;

    assert_non_null(lazy);
    assert_non_null(threaded);
    /* Registered? (HELLO is asynchronous: ask until both show.) */
    for (int i = 0; i < 100; i++) {
        g_clear_pointer(&n1, json_node_unref);
        ret = host_return(f, "{\"execute\":\"status\"}\n", NULL, &n1);
        if (json_array_get_length(json_object_get_array_member(ret, "processes")) == 2)
            break;
        g_usleep(10000);
    }
    assert_int_equal(json_array_get_length(json_object_get_array_member(ret, "processes")), 2);

    ret = host_return(f, "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":5000}}\n", lazy,
                      &n2);
    assert_string_equal(json_object_get_string_member(ret, "state"), "prepared");
    assert_int_equal(json_array_get_length(json_object_get_array_member(ret, "quiesced")), 2);
    assert_int_equal(f->quiesced, 2);
    assert_true(hotmig_client_is_quiesced(lazy));
    assert_true(hotmig_client_is_quiesced(threaded));

    ret =
        host_return(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":800}}\n", lazy, &n3);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");
    assert_int_equal(json_array_get_length(json_object_get_array_member(ret, "resumed")), 2);
    assert_int_equal(f->resumed, 2);
    assert_string_equal(f->device, json_object_get_string_member(ret, "device"));
    assert_false(hotmig_client_is_quiesced(lazy));

    ret =
        host_return(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":800}}\n", lazy, &n4);
    assert_int_equal(json_array_get_length(json_object_get_array_member(ret, "resumed")), 0);

    hotmig_client_free(threaded);
    hotmig_client_free(lazy);
}

static void test_binary_channel_eof_exits(void **state)
{
    Fixture *f = *state;
    int status = 0;

    shutdown(f->host, SHUT_RDWR);
    assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    f->pid = 0;
}

static void test_binary_cli_errors(void **state)
{
    g_autofree char *out = NULL;
    g_autofree char *err = NULL;
    int status = 0;
    const char *argv1[] = {agent_path, "--port", "a", "--device", "b", NULL};
    const char *argv2[] = {
        agent_path, "--port", "no.such.port", "--socket", "/tmp/agent-binary-test-unused.sock",
        NULL};
    const char *argv3[] = {agent_path, "--version", NULL};

    assert_true(g_spawn_sync(NULL, (char **)argv1, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &status, NULL));
    assert_int_equal(WEXITSTATUS(status), 2);
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_true(g_spawn_sync(NULL, (char **)argv2, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &status, NULL));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_non_null(strstr(err, "no.such.port"));
    assert_false(g_file_test("/tmp/agent-binary-test-unused.sock", G_FILE_TEST_EXISTS));
    g_clear_pointer(&out, g_free);
    g_clear_pointer(&err, g_free);
    assert_true(g_spawn_sync(NULL, (char **)argv3, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err,
                             &status, NULL));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(g_str_has_prefix(out, "hotmig-agent 0.1.0"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_binary_sync_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_migration_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_channel_eof_exits, setup, teardown),
        cmocka_unit_test(test_binary_cli_errors),
    };

    if (argc != 2) {
        g_printerr("usage: %s PATH-TO-hotmig-agent\n", argv[0]);
        return 2;
    }
    agent_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
