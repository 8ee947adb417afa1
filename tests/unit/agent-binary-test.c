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
#include <grp.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
    /* Written by the callbacks of two clients at once: the lazy one runs in the test's thread,
     * the threaded one in its own. */
    gint quiesced;
    gint resumed;
    GMutex lock; /* device */
    char device[64];
} Fixture;

static void host_send(Fixture *f, const char *s);
static char *host_line(Fixture *f, guint timeout_ms, HotmigClient *client);

/* Starts the binary with @extra arguments (NULL-terminated, at most 4). */
static int setup_args(void **state, const char *const *extra)
{
    Fixture *f = g_new0(Fixture, 1);
    g_autofree char *ready = NULL;
    int sv[2];

    g_mutex_init(&f->lock);

    f->dir = g_dir_make_tmp("agent-binary-test.XXXXXX", NULL);
    f->sock = g_build_filename(f->dir, "hotmig", "agent.sock", NULL);
    f->in = g_string_new(NULL);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    f->pid = fork();
    assert_true(f->pid >= 0);
    if (f->pid == 0) {
        dup2(sv[1], 3); /* dup2 clears O_CLOEXEC on the copy */
        const char *argv[10] = {agent_path, "--device", "fd:3", "--socket", f->sock};
        guint n = 5;

        for (guint i = 0; extra && extra[i] && n < G_N_ELEMENTS(argv) - 1; i++)
            argv[n++] = extra[i];
        execv(agent_path, (char **)argv);
        _exit(127);
    }
    close(sv[1]);
    f->host = sv[0];
    /* Ready once it answers on the host channel: its main loop runs, so the socket listens
     * and SIGTERM is handled. The socket's file alone is not enough: bind() makes it before
     * listen(), and a client connecting in between is refused (seen under load in CI: the
     * client's hotmig_client_new() failed, then the agent died of the teardown's SIGTERM). */
    host_send(f, "{\"execute\":\"info\"}\n");
    ready = host_line(f, 20000, NULL);
    assert_non_null(strstr(ready, "\"return\""));
    assert_true(g_file_test(f->sock, G_FILE_TEST_EXISTS));
    g_setenv(HOTMIG_AGENT_SOCKET_ENV, f->sock, TRUE);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_args(state, NULL);
}

/* Non-root processes' group: Debian's 'nogroup' (65534), which every system has. */
#define TEST_GID 65534
#define TEST_UID 65534

static int setup_group(void **state)
{
    static const char *const extra[] = {"--socket-group", G_STRINGIFY(TEST_GID), "--socket-mode",
                                        "0660", NULL};

    return setup_args(state, extra);
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
    g_mutex_clear(&f->lock);
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
    g_atomic_int_inc(&((Fixture *)opaque)->quiesced);
    return 0;
}

static int on_resume(const char *device, void *opaque)
{
    Fixture *f = opaque;

    g_mutex_lock(&f->lock);
    g_strlcpy(f->device, device ? device : "", sizeof(f->device));
    g_mutex_unlock(&f->lock);
    g_atomic_int_inc(&f->resumed);
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
    assert_int_equal(g_atomic_int_get(&f->quiesced), 2);
    assert_true(hotmig_client_is_quiesced(lazy));
    assert_true(hotmig_client_is_quiesced(threaded));

    ret =
        host_return(f, "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":800}}\n", lazy, &n3);
    assert_string_equal(json_object_get_string_member(ret, "state"), "running");
    assert_int_equal(json_array_get_length(json_object_get_array_member(ret, "resumed")), 2);
    assert_int_equal(g_atomic_int_get(&f->resumed), 2);
    g_mutex_lock(&f->lock);
    assert_string_equal(f->device, json_object_get_string_member(ret, "device"));
    g_mutex_unlock(&f->lock);
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

/* Registers a lazy client from a child running as uid/gid 65534 (nobody/nogroup): exit 0 once
 * registered and told to go (a byte on @go), 3 when the socket refused it (EACCES), 4 else. */
static pid_t register_as_nobody(const char *sock, int go)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        gid_t gid = TEST_GID;
        HotmigClient *client;
        char c;

        if (setgroups(1, &gid) < 0 || setgid(TEST_GID) < 0 || setuid(TEST_UID) < 0)
            _exit(5);
        g_setenv(HOTMIG_AGENT_SOCKET_ENV, sock, TRUE);
        client = hotmig_client_new("user-rank", HOTMIG_MODE_LAZY, on_quiesce, on_resume, NULL);
        if (!client)
            _exit(errno == EACCES ? 3 : 4);
        if (read(go, &c, 1) != 1)
            _exit(6);
        hotmig_client_free(client);
        _exit(0);
    }
    return pid;
}

static int wait_exit(pid_t pid)
{
    int status = 0;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* The agent's processes once one registered (asked for 2 s at most): borrowed from *ret_node. */
static JsonArray *status_one_process(Fixture *f, JsonNode **ret_node)
{
    JsonObject *ret = NULL;
    JsonArray *procs;

    for (int i = 0; i < 200; i++) {
        g_clear_pointer(ret_node, json_node_unref);
        ret = host_return(f, "{\"execute\":\"status\"}\n", NULL, ret_node);
        if (json_array_get_length(json_object_get_array_member(ret, "processes")) == 1)
            break;
        g_usleep(10000);
    }
    procs = json_object_get_array_member(ret, "processes");
    assert_int_equal(json_array_get_length(procs), 1);
    return procs;
}

/* The default socket (0600, root's) refuses a process that is not root's: the problem MPI
 * ranks started by Slurm or mpirun as the user meet. */
static void test_binary_socket_root_only(void **state)
{
    Fixture *f = *state;
    struct stat st;
    int go[2];
    pid_t child;

    g_autoptr(JsonNode) node = NULL;

    /* Started (the teardown's SIGTERM must find the agent's handler in place). */
    host_return(f, "{\"execute\":\"status\"}\n", NULL, &node);
    if (geteuid() != 0)
        skip(); /* needs to switch to another user */
    assert_int_equal(stat(f->sock, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(chmod(f->dir, 0755), 0); /* the path, not the socket, is not in the way */
    assert_int_equal(pipe(go), 0);
    child = register_as_nobody(f->sock, go[0]);
    close(go[0]);
    assert_int_equal(wait_exit(child), 3);
    close(go[1]);
}

/* --socket-group 65534 --socket-mode 0660: a process of that group, not root, registers and
 * the agent lists it. */
static void test_binary_socket_group(void **state)
{
    Fixture *f = *state;
    g_autoptr(JsonNode) node = NULL;
    JsonArray *procs;
    struct stat st;
    int go[2];
    pid_t child;

    assert_int_equal(stat(f->sock, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0660);
    assert_int_equal(st.st_gid, TEST_GID);
    if (geteuid() != 0)
        skip(); /* the agent could chown to a group we are in; the switch of user needs root */
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(pipe(go), 0);
    child = register_as_nobody(f->sock, go[0]);
    close(go[0]);
    procs = status_one_process(f, &node);
    {
        g_autofree char *proc = json_to_string(json_array_get_element(procs, 0), FALSE);

        assert_non_null(strstr(proc, "user-rank"));
    }
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    assert_int_equal(wait_exit(child), 0);
}

/* A process of another user says it is pid 1 in its HELLO: the agent registers it under the pid
 * the kernel gives for its connection (SO_PEERCRED; issue 28, finding 5). Before, the agent took
 * the client's word and listed it as pid 1 (and would have answered for it, read its job). */
static void test_binary_pid_from_kernel(void **state)
{
    Fixture *f = *state;
    g_autoptr(JsonNode) node = NULL;
    JsonArray *procs;
    int go[2];
    pid_t child;

    if (geteuid() != 0)
        skip(); /* the switch of user needs root */
    assert_int_equal(chmod(f->dir, 0755), 0);
    assert_int_equal(pipe(go), 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        static const char hello[] = "HELLO 0.1.0 1 lazy liar\n";
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        gid_t gid = TEST_GID;
        char c;
        int fd;

        close(go[1]);
        g_strlcpy(addr.sun_path, f->sock, sizeof(addr.sun_path));
        if (setgroups(1, &gid) < 0 || setgid(TEST_GID) < 0 || setuid(TEST_UID) < 0)
            _exit(5);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
            _exit(3);
        if (write(fd, hello, strlen(hello)) != (ssize_t)strlen(hello) || read(go[0], &c, 1) != 1)
            _exit(6);
        _exit(0);
    }
    close(go[0]);
    procs = status_one_process(f, &node);
    assert_string_equal(json_object_get_string_member(json_array_get_object_element(procs, 0),
                                                      "name"),
                        "liar");
    assert_int_equal(json_object_get_int_member(json_array_get_object_element(procs, 0), "pid"),
                     child);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    assert_int_equal(wait_exit(child), 0);
}

/* Bad --socket-group / --socket-mode: usage errors naming the value. --self-test: 0 with the
 * port, 3 without it. */
static void test_binary_socket_options_and_self_test(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("agent-binary-self-test.XXXXXX", NULL);
    g_autofree char *sock = g_build_filename(dir, "run", "agent.sock", NULL);
    g_autofree char *sys = g_build_filename(dir, "sys", NULL);
    g_autofree char *port_dir = g_build_filename(sys, "class", "virtio-ports", "vport1p1", NULL);
    g_autofree char *name = g_build_filename(port_dir, "name", NULL);
    static const struct {
        const char *option, *value, *message;
    } bad[] = {
        {"--socket-group", "no-such-group-hm", "--socket-group 'no-such-group-hm': no such group"},
        {"--socket-mode", "0644x", "--socket-mode '0644x': not an octal mode"},
        {"--socket-mode", "0400", "--socket-mode '0400'"},
        {"--socket-mode", "0770", "--socket-mode '0770'"},
        {"--socket-mode", "1666", "--socket-mode '1666'"},
    };

    (void)state;
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        const char *argv[] = {agent_path, bad[i].option, bad[i].value, "--self-test", NULL};
        g_autofree char *out = NULL;
        g_autofree char *err = NULL;
        int status = 0;

        assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                 &err, &status, NULL));
        assert_int_equal(WEXITSTATUS(status), 2);
        if (!strstr(err, bad[i].message))
            fail_msg("case %zu: '%s'", i, err);
    }
    for (int with_port = 0; with_port < 2; with_port++) {
        const char *argv[] = {agent_path, "--self-test", "--socket", sock, "--sysfs-root", sys,
                              "--dev-root", "/dev", NULL};
        g_autofree char *out = NULL;
        int status = 0;

        if (with_port) {
            assert_int_equal(g_mkdir_with_parents(port_dir, 0755), 0);
            assert_true(g_file_set_contents(name, "org.hotmig.agent.0\n", -1, NULL));
        }
        assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL,
                                 NULL, &out, NULL, &status, NULL));
        assert_int_equal(WEXITSTATUS(status), with_port ? 0 : 3);
        assert_non_null(strstr(out, with_port ? "virtio port 'org.hotmig.agent.0': /dev/vport1p1"
                                              : "FAIL: no host channel"));
    }
    g_unlink(name);
    for (int up = 0; up < 4; up++) { /* vport1p1, virtio-ports, class, sys */
        g_autofree char *d = g_strdup(port_dir);

        for (int i = 0; i < up; i++) {
            char *parent = g_path_get_dirname(d);

            g_free(d);
            d = parent;
        }
        g_rmdir(d);
    }
    {
        g_autofree char *run = g_path_get_dirname(sock);

        g_rmdir(run);
    }
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_binary_sync_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_migration_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_channel_eof_exits, setup, teardown),
        cmocka_unit_test(test_binary_cli_errors),
        cmocka_unit_test_setup_teardown(test_binary_socket_root_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_socket_group, setup_group, teardown),
        cmocka_unit_test_setup_teardown(test_binary_pid_from_kernel, setup_group, teardown),
        cmocka_unit_test(test_binary_socket_options_and_self_test),
    };

    if (argc != 2) {
        g_printerr("usage: %s PATH-TO-hotmig-agent\n", argv[0]);
        return 2;
    }
    agent_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
