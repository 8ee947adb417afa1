/* libhotmig against a fake agent: a Unix socket served by the test itself. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest-agent/libhotmig/hotmig.h"

typedef struct {
    char dir[64];
    char path[128];
    int listen_fd;
    int conn_fd; /* the agent's end of the client connection */
    atomic_int quiesce_calls;
    atomic_int resume_calls;
    int quiesce_result;
    int resume_result;
    char device[80];
    int device_null;
    pthread_t callback_thread;
    HotmigClient *client;
    int free_in_callback;
} Fixture;

static int setup(void **state)
{
    Fixture *f = calloc(1, sizeof(*f));
    struct sockaddr_un addr = {.sun_family = AF_UNIX};

    snprintf(f->dir, sizeof(f->dir), "/tmp/libhotmig-test.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/agent.sock", f->dir);
    strcpy(addr.sun_path, f->path);
    f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->listen_fd >= 0);
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(f->listen_fd, 8), 0);
    setenv(HOTMIG_AGENT_SOCKET_ENV, f->path, 1);
    f->conn_fd = -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;

    hotmig_client_free(f->client);
    if (f->conn_fd >= 0)
        close(f->conn_fd);
    close(f->listen_fd);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static int on_quiesce(void *opaque)
{
    Fixture *f = opaque;

    f->callback_thread = pthread_self();
    atomic_fetch_add(&f->quiesce_calls, 1);
    if (f->free_in_callback)
        hotmig_client_free(f->client);
    return f->quiesce_result;
}

static int on_resume(const char *device, void *opaque)
{
    Fixture *f = opaque;

    f->callback_thread = pthread_self();
    f->device_null = device == NULL;
    snprintf(f->device, sizeof(f->device), "%s", device ? device : "");
    atomic_fetch_add(&f->resume_calls, 1);
    return f->resume_result;
}

/* Reads one line (without its newline) from @fd within 5 s. */
static void read_line(int fd, char *buf, size_t size)
{
    size_t len = 0;

    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        char c;

        assert_int_equal(poll(&pfd, 1, 5000), 1);
        assert_int_equal(read(fd, &c, 1), 1);
        if (c == '\n')
            break;
        assert_true(len + 1 < size);
        buf[len++] = c;
    }
    buf[len] = '\0';
}

static void send_str(int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static void wait_readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};

    assert_int_equal(poll(&pfd, 1, 5000), 1);
}

/* Creates the client and accepts its connection; checks the HELLO line. */
static void connect_client(Fixture *f, HotmigMode mode)
{
    char line[600];
    char expect[128];

    f->client = hotmig_client_new("rank0", mode, on_quiesce, on_resume, f);
    assert_non_null(f->client);
    f->conn_fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    assert_true(f->conn_fd >= 0);
    read_line(f->conn_fd, line, sizeof(line));
    snprintf(expect, sizeof(expect), "HELLO 0.1.0 %d %s rank0", (int)getpid(),
             mode == HOTMIG_MODE_LAZY ? "lazy" : "threaded");
    assert_string_equal(line, expect);
}

static void test_lazy_quiesce_resume(void **state)
{
    Fixture *f = *state;
    char line[600];
    int fd;

    connect_client(f, HOTMIG_MODE_LAZY);
    fd = hotmig_client_get_fd(f->client);
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(hotmig_client_dispatch(f->client), 0); /* nothing waits: no block */
    assert_false(hotmig_client_is_quiesced(f->client));

    send_str(f->conn_fd, "QUIESCE 7\n");
    wait_readable(fd);
    assert_int_equal(atomic_load(&f->quiesce_calls), 0); /* lazy: nothing before dispatch */
    assert_int_equal(hotmig_client_dispatch(f->client), 1);
    assert_int_equal(atomic_load(&f->quiesce_calls), 1);
    assert_true(pthread_equal(f->callback_thread, pthread_self()));
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 7");
    assert_true(hotmig_client_is_quiesced(f->client));

    send_str(f->conn_fd, "RESUME 8 rxe0\n");
    wait_readable(fd);
    assert_int_equal(hotmig_client_dispatch(f->client), 1);
    assert_string_equal(f->device, "rxe0");
    assert_false(f->device_null);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 8");
    assert_false(hotmig_client_is_quiesced(f->client));

    /* "-": no device appeared. */
    send_str(f->conn_fd, "RESUME 9 -\n");
    wait_readable(fd);
    assert_int_equal(hotmig_client_dispatch(f->client), 1);
    assert_true(f->device_null);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 9");
}

static void test_lazy_failure(void **state)
{
    Fixture *f = *state;
    char line[600];

    connect_client(f, HOTMIG_MODE_LAZY);
    f->quiesce_result = -EIO;
    send_str(f->conn_fd, "QUIESCE 3\n");
    wait_readable(hotmig_client_get_fd(f->client));
    assert_int_equal(hotmig_client_dispatch(f->client), 1);
    read_line(f->conn_fd, line, sizeof(line));
    assert_true(strncmp(line, "FAILED 3 ", 9) == 0);
    assert_non_null(strstr(line, "errno 5"));
    assert_false(hotmig_client_is_quiesced(f->client));

    f->quiesce_result = 0;
    f->resume_result = -ENODEV;
    send_str(f->conn_fd, "QUIESCE 4\nRESUME 5 mlx5_0\n");
    wait_readable(hotmig_client_get_fd(f->client));
    /* Both requests may arrive in one read; dispatch handles every waiting one. */
    int handled = hotmig_client_dispatch(f->client);
    if (handled == 1) {
        wait_readable(hotmig_client_get_fd(f->client));
        handled += hotmig_client_dispatch(f->client);
    }
    assert_int_equal(handled, 2);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 4");
    read_line(f->conn_fd, line, sizeof(line));
    assert_true(strncmp(line, "FAILED 5 ", 9) == 0);
    assert_true(hotmig_client_is_quiesced(f->client)); /* resume failed: still quiesced */
}

static void test_lazy_partial_and_garbage(void **state)
{
    Fixture *f = *state;
    char line[600];
    char big[2000];

    connect_client(f, HOTMIG_MODE_LAZY);
    send_str(f->conn_fd, "QUIES");
    wait_readable(hotmig_client_get_fd(f->client));
    assert_int_equal(hotmig_client_dispatch(f->client), 0);
    send_str(f->conn_fd, "CE 11\n");
    wait_readable(hotmig_client_get_fd(f->client));
    assert_int_equal(hotmig_client_dispatch(f->client), 1);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 11");

    /* Unknown requests, bad sequence numbers and overlong lines are ignored. */
    memset(big, 'A', sizeof(big) - 2);
    big[sizeof(big) - 2] = '\n';
    big[sizeof(big) - 1] = '\0';
    send_str(f->conn_fd, "HELLO\nQUIESCE x\nQUIESCE 0\nQUIESCE -1\nRESUME 5\nRESUME 5 a b\n");
    send_str(f->conn_fd, big);
    send_str(f->conn_fd, "QUIESCE 12\n");
    wait_readable(hotmig_client_get_fd(f->client));
    int handled = 0;
    for (int i = 0; i < 50 && handled == 0; i++) {
        handled = hotmig_client_dispatch(f->client);
        if (handled == 0)
            usleep(10000); /* the rest of the bytes are still on their way */
    }
    assert_int_equal(handled, 1);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 12"); /* already quiesced: answered without a call */
    assert_int_equal(atomic_load(&f->quiesce_calls), 1);
}

static void test_lazy_agent_gone(void **state)
{
    Fixture *f = *state;

    connect_client(f, HOTMIG_MODE_LAZY);
    close(f->conn_fd);
    f->conn_fd = -1;
    wait_readable(hotmig_client_get_fd(f->client));
    assert_true(hotmig_client_dispatch(f->client) < 0);
    assert_true(hotmig_client_dispatch(f->client) < 0); /* and it stays lost */
}

static void test_threaded(void **state)
{
    Fixture *f = *state;
    char line[600];

    connect_client(f, HOTMIG_MODE_THREADED);
    assert_int_equal(hotmig_client_get_fd(f->client), -1);
    assert_int_equal(hotmig_client_dispatch(f->client), 0);

    send_str(f->conn_fd, "QUIESCE 21\n");
    read_line(f->conn_fd, line, sizeof(line)); /* no dispatch: the helper thread ran it */
    assert_string_equal(line, "DONE 21");
    assert_int_equal(atomic_load(&f->quiesce_calls), 1);
    assert_false(pthread_equal(f->callback_thread, pthread_self()));
    assert_true(hotmig_client_is_quiesced(f->client));

    f->resume_result = -EAGAIN;
    send_str(f->conn_fd, "RESUME 22 rxe0\n");
    read_line(f->conn_fd, line, sizeof(line));
    assert_true(strncmp(line, "FAILED 22 ", 10) == 0);

    f->resume_result = 0;
    send_str(f->conn_fd, "RESUME 23 rxe1\n");
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 23");
    assert_string_equal(f->device, "rxe1");
    assert_false(hotmig_client_is_quiesced(f->client));
}

/* PEER, REFUSED and STATS reports: the lines the agent parses; bad arguments refused, nothing sent.
 */
static void test_reports(void **state)
{
    Fixture *f = *state;
    char line[600];

    connect_client(f, HOTMIG_MODE_THREADED);
    assert_int_equal(hotmig_client_report_peer(f->client, "00000000000000000000ffffc6336402", 17),
                     0);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "PEER 00000000000000000000ffffc6336402/17");
    assert_int_equal(hotmig_client_report_refused(f->client, "ibv_alloc_mw"), 0);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "REFUSED ibv_alloc_mw");

    assert_int_equal(hotmig_client_report_peer(f->client, "00000000000000000000FFFFC6336402", 1),
                     -EINVAL);
    assert_int_equal(hotmig_client_report_peer(f->client, "0000", 1), -EINVAL);
    assert_int_equal(hotmig_client_report_peer(f->client, NULL, 1), -EINVAL);
    assert_int_equal(
        hotmig_client_report_peer(f->client, "00000000000000000000ffffc6336402", 1u << 24),
        -EINVAL);
    assert_int_equal(hotmig_client_report_refused(f->client, ""), -EINVAL);
    assert_int_equal(hotmig_client_report_refused(f->client, "a b"), -EINVAL);
    assert_int_equal(hotmig_client_report_refused(NULL, "x"), -EINVAL);
    {
        char long_call[80];

        memset(long_call, 'x', sizeof(long_call) - 1);
        long_call[sizeof(long_call) - 1] = '\0';
        assert_int_equal(hotmig_client_report_refused(f->client, long_call), -EINVAL);
    }
    /* nothing was sent for those: the next line is the next good report */
    assert_int_equal(hotmig_client_report_refused(f->client, "ibv_reg_dmabuf_mr"), 0);
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "REFUSED ibv_reg_dmabuf_mr");

    /* STATS (issue 30): at its bounds one word the agent parses; past them nothing is sent */
    {
        HotmigStandbyStats st = {.used = 1,
                                 .switched = HOTMIG_STANDBY_QPS_MAX,
                                 .paused = 0,
                                 .sends = HOTMIG_STANDBY_COUNT_MAX,
                                 .recvs = 1230,
                                 .ms = HOTMIG_STANDBY_MS_MAX};
        HotmigStandbyStats bad;

        assert_int_equal(hotmig_client_report_standby(f->client, &st), 0);
        read_line(f->conn_fd, line, sizeof(line));
        assert_string_equal(line, "STATS 1/65536/0/9007199254740991/1230/600000");
        assert_int_equal(hotmig_client_report_standby(NULL, &st), -EINVAL);
        assert_int_equal(hotmig_client_report_standby(f->client, NULL), -EINVAL);
        bad = st;
        bad.used = 2;
        assert_int_equal(hotmig_client_report_standby(f->client, &bad), -EINVAL);
        bad = st;
        bad.paused = HOTMIG_STANDBY_QPS_MAX + 1;
        assert_int_equal(hotmig_client_report_standby(f->client, &bad), -EINVAL);
        bad = st;
        bad.recvs = HOTMIG_STANDBY_COUNT_MAX + 1;
        assert_int_equal(hotmig_client_report_standby(f->client, &bad), -EINVAL);
        bad = st;
        bad.ms = HOTMIG_STANDBY_MS_MAX + 1;
        assert_int_equal(hotmig_client_report_standby(f->client, &bad), -EINVAL);
        st = (HotmigStandbyStats){0};
        assert_int_equal(hotmig_client_report_standby(f->client, &st), 0);
        read_line(f->conn_fd, line, sizeof(line));
        assert_string_equal(line, "STATS 0/0/0/0/0/0");
    }
}

static void test_threaded_agent_gone(void **state)
{
    Fixture *f = *state;
    int r = 0;

    connect_client(f, HOTMIG_MODE_THREADED);
    close(f->conn_fd);
    f->conn_fd = -1;
    for (int i = 0; i < 500 && r == 0; i++) {
        r = hotmig_client_dispatch(f->client);
        if (r == 0)
            usleep(10000);
    }
    assert_true(r < 0);
}

static void test_threaded_free_in_callback(void **state)
{
    Fixture *f = *state;
    char line[600];

    connect_client(f, HOTMIG_MODE_THREADED);
    f->free_in_callback = 1;
    send_str(f->conn_fd, "QUIESCE 31\n");
    read_line(f->conn_fd, line, sizeof(line));
    assert_string_equal(line, "DONE 31");
    f->client = NULL; /* freed by its helper thread */
    /* The helper thread closes the connection once the callback returned. */
    {
        struct pollfd pfd = {.fd = f->conn_fd, .events = POLLIN};
        char c;

        assert_int_equal(poll(&pfd, 1, 5000), 1);
        assert_int_equal(read(f->conn_fd, &c, 1), 0);
    }
    usleep(50000); /* let the detached thread finish before the process checks for leaks */
}

static void test_new_errors(void **state)
{
    Fixture *f = *state;
    char long_name[80];

    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    errno = 0;
    assert_null(hotmig_client_new("", HOTMIG_MODE_LAZY, on_quiesce, on_resume, f));
    assert_int_equal(errno, EINVAL);
    assert_null(hotmig_client_new("a b", HOTMIG_MODE_LAZY, on_quiesce, on_resume, f));
    assert_int_equal(errno, EINVAL);
    assert_null(hotmig_client_new(long_name, HOTMIG_MODE_LAZY, on_quiesce, on_resume, f));
    assert_int_equal(errno, EINVAL);
    assert_null(hotmig_client_new(NULL, HOTMIG_MODE_LAZY, on_quiesce, on_resume, f));
    assert_int_equal(errno, EINVAL);
    assert_null(hotmig_client_new("x", HOTMIG_MODE_LAZY, NULL, on_resume, f));
    assert_int_equal(errno, EINVAL);
    assert_null(hotmig_client_new("x", (HotmigMode)7, on_quiesce, on_resume, f));
    assert_int_equal(errno, EINVAL);

    setenv(HOTMIG_AGENT_SOCKET_ENV, "/nonexistent/hotmig/agent.sock", 1);
    assert_null(hotmig_client_new("x", HOTMIG_MODE_LAZY, on_quiesce, on_resume, f));
    assert_int_equal(errno, ENOENT);
    setenv(HOTMIG_AGENT_SOCKET_ENV, f->path, 1);

    /* NULL-safe accessors. */
    hotmig_client_free(NULL);
    assert_int_equal(hotmig_client_get_fd(NULL), -1);
    assert_int_equal(hotmig_client_is_quiesced(NULL), 0);
    assert_true(hotmig_client_dispatch(NULL) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lazy_quiesce_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lazy_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lazy_partial_and_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lazy_agent_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threaded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threaded_agent_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threaded_free_in_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_errors, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
