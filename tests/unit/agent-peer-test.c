/* hotmig-agent: the verbs layer's broker (guest-agent/agent/peer.c) as a trust boundary (issue
 * 28, findings 3 and 5): a flood of silent connections from many addresses does not keep a real
 * ROUTE out (the oldest unrouted one is closed, one address has at most 16), a routed
 * connection ends at its deadline, and a route record is followed only when it is a regular
 * file (no link, no FIFO) whose owner and pid are those of the process behind the socket
 * (SO_PEERCRED). A ROUTE is routed only with the tag the record holds (one the job's key makes),
 * else answered as one for a QP nobody registered: a scan learns nothing; the layer is told
 * where a routed connection comes from (FROM). The broker runs in this process on loopback. */
#include "guest-agent/agent/agent-priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct {
    AgentPeer *peer;
    char *dir;
    guint16 port;
    int unix_fd; /* this process's socket RUN_DIR/<pid>.sock, as a layer's */
} Fixture;

static int setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);
    g_autoptr(GError) error = NULL;
    struct sockaddr_un a = {.sun_family = AF_UNIX};

    f->dir = g_dir_make_tmp("agent-peer-XXXXXX", NULL);
    assert_non_null(f->dir);
    for (int i = 0; i < 20 && !f->peer; i++) {
        g_autofree char *listen = NULL;

        f->port = (guint16)(20000 + (getpid() * 7 + i * 131) % 30000);
        listen = g_strdup_printf("127.0.0.1:%u", f->port);
        g_clear_error(&error);
        f->peer = agent_peer_new(listen, f->dir, &error);
    }
    assert_non_null(f->peer);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/%ld.sock", f->dir, (long)getpid());
    f->unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(f->unix_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(f->unix_fd, 64), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);

    agent_peer_free(f->peer);
    close(f->unix_fd);
    /* let the closed connections' callbacks run */
    for (int i = 0; i < 100; i++)
        g_main_context_iteration(NULL, FALSE);
    assert_int_equal(system(cmd), 0);
    g_free(f->dir);
    g_free(f);
    return 0;
}

/* A client connection from 127.0.0.@src to the broker; -1 when refused at connect. */
static int client(Fixture *f, int src)
{
    struct sockaddr_in me = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    gint64 until = g_get_monotonic_time() + 2 * G_USEC_PER_SEC;
    int err = 0;
    socklen_t el = sizeof(err);

    me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)src);
    to.sin_addr.s_addr = htonl(0x7f000001u);
    to.sin_port = htons(f->port);
    if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 && errno != EINPROGRESS)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* the broker accepts only while its main context runs: run it until connected */
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};

        g_main_context_iteration(NULL, FALSE);
        if (poll(&p, 1, 2) == 1)
            break;
        if (g_get_monotonic_time() > until) {
            close(fd);
            return -1;
        }
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Runs the broker's main context until @fd has a line (or EOF) or @ms passed: the line
 * (without newline), "EOF", or "TIMEOUT". */
static char *reply(int fd, int ms)
{
    GString *s = g_string_new(NULL);
    gint64 until = g_get_monotonic_time() + ms * 1000;

    while (g_get_monotonic_time() < until) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;

        g_main_context_iteration(NULL, FALSE);
        if (poll(&p, 1, 5) <= 0)
            continue;
        if (read(fd, &c, 1) <= 0)
            return g_string_free(s, s->len == 0) ?: g_strdup("EOF");
        if (c == '\n')
            return g_string_free(s, FALSE);
        g_string_append_c(s, c);
    }
    g_string_free(s, TRUE);
    return g_strdup("TIMEOUT");
}

static void spin(int ms)
{
    gint64 until = g_get_monotonic_time() + ms * 1000;

    while (g_get_monotonic_time() < until) {
        g_main_context_iteration(NULL, FALSE);
        g_usleep(1000);
    }
}

/* The route tag the tests' records hold (the layer's is an HMAC of the job's key). */
#define TAG "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"

static char *route_line(Fixture *f, int src, const char *line, int *ret_fd)
{
    int fd = client(f, src);
    char *r;

    assert_true(fd >= 0);
    assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    r = reply(fd, 3000);
    if (ret_fd)
        *ret_fd = fd;
    else
        close(fd);
    return r;
}

static char *route(Fixture *f, int src, guint32 vqpn, int *ret_fd)
{
    g_autofree char *line = g_strdup_printf("ROUTE %u " TAG "\n", vqpn);

    return route_line(f, src, line, ret_fd);
}

/* Finding 3: 64 silent connections blocked every other one (the 65th was closed unanswered). */
static void test_flood_does_not_block_route(void **state)
{
    Fixture *f = *state;
    int fds[200], n = 0, refused = 0;
    g_autofree char *r = NULL;

    for (int src = 2; src < 14; src++)
        for (int i = 0; i < 16; i++) {
            int fd = client(f, src);

            if (fd < 0)
                refused++;
            else
                fds[n++] = fd;
        }
    spin(300); /* the broker accepts them all, evicting the oldest past 64 */
    r = route(f, 100, 17, NULL);
    assert_string_equal(r, "NOROUTE no process owns QP 17");
    /* one address has at most 16 connections: a 17th closes that address's oldest unrouted one
     * (a flood from a peer guest does not keep that guest's own requests out) */
    g_free(r);
    {
        int more[20], k = 0;

        for (; k < 20; k++)
            more[k] = client(f, 200);
        spin(200);
        r = reply(more[0], 500);
        assert_string_equal(r, "EOF"); /* the oldest four are closed */
        g_free(r);
        r = reply(more[3], 200);
        assert_string_equal(r, "EOF");
        g_free(r);
        r = reply(more[4], 200);
        assert_string_equal(r, "TIMEOUT"); /* the others wait for their ROUTE */
        g_free(r);
        assert_int_equal(write(more[19], "ROUTE 17 " TAG "\n", 42), 42);
        r = reply(more[19], 3000);
        assert_string_equal(r, "NOROUTE no process owns QP 17"); /* the newest is served */
        for (k = 0; k < 20; k++)
            if (more[k] >= 0)
                close(more[k]);
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    (void)refused;
}

static void record(Fixture *f, guint32 vqpn, long pid)
{
    g_autofree char *path = g_strdup_printf("%s/qp-%u", f->dir, vqpn);
    g_autofree char *data = g_strdup_printf("%ld " TAG "\n", pid);

    assert_true(g_file_set_contents(path, data, -1, NULL));
}

/* Finding 5: route records followed through links and FIFOs, and on the record's word. */
static void test_route_records(void **state)
{
    Fixture *f = *state;
    g_autofree char *target = g_strdup_printf("%s/elsewhere", f->dir);
    g_autofree char *link = g_strdup_printf("%s/qp-17", f->dir);
    g_autofree char *fifo = g_strdup_printf("%s/qp-20", f->dir);
    g_autofree char *r = NULL;
    int fd;

    assert_true(g_file_set_contents(target, "1\n", -1, NULL));
    assert_int_equal(symlink(target, link), 0);
    r = route(f, 1, 17, NULL);
    assert_string_equal(r, "NOROUTE no process owns QP 17");
    g_free(r);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    r = route(f, 1, 20, NULL);
    assert_string_equal(r, "NOROUTE no process owns QP 20");
    g_free(r);
    /* a record naming another process than the one behind its socket */
    record(f, 21, (long)getpid() + 1);
    {
        g_autofree char *sock = g_strdup_printf("%s/%ld.sock", f->dir, (long)getpid() + 1);
        g_autofree char *mine = g_strdup_printf("%s/%ld.sock", f->dir, (long)getpid());

        assert_int_equal(symlink(mine, sock), 0);
    }
    r = route(f, 1, 21, NULL);
    assert_string_equal(r, "NOROUTE the owner of QP 21 does not answer");
    g_free(r);
    /* a record of another user (root can make one) */
    if (geteuid() == 0) {
        g_autofree char *path = g_strdup_printf("%s/qp-22", f->dir);

        record(f, 22, (long)getpid());
        assert_int_equal(chown(path, 4242, 4242), 0);
        r = route(f, 1, 22, NULL);
        assert_string_equal(r, "NOROUTE the owner of QP 22 does not answer");
        g_free(r);
    }
    /* this process's own record: routed */
    record(f, 19, (long)getpid());
    r = route(f, 1, 19, &fd);
    assert_string_equal(r, "ROUTED");
    close(fd);
}

/* The last item of issue 28: a ROUTE was answered on its QP number alone, so a scan of numbers
 * told which QPs were registered. Now only the record's tag routes; any other ROUTE (no tag, a
 * wrong one, a QP nobody registered) gets the same answer. The layer learns the caller's
 * address from the agent (FROM), which its server counts connections by. */
static void test_route_needs_tag(void **state)
{
    Fixture *f = *state;
    g_autofree char *r = NULL, *unknown = NULL, *from = NULL;
    int fd, lfd;

    record(f, 19, (long)getpid());
    r = route_line(f, 1, "ROUTE 19\n", NULL);
    assert_string_equal(r, "NOROUTE expected ROUTE <vqpn> <tag>");
    g_free(r);
    r = route_line(f, 1, "ROUTE 19 a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5\n", NULL);
    unknown = route_line(f, 1, "ROUTE 23 a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5\n", NULL);
    assert_string_equal(r, "NOROUTE no process owns QP 19");
    assert_string_equal(unknown, "NOROUTE no process owns QP 23");
    g_free(r);
    /* a record without a tag (an older layer's) routes nobody */
    {
        g_autofree char *path = g_strdup_printf("%s/qp-24", f->dir);
        g_autofree char *data = g_strdup_printf("%ld\n", (long)getpid());

        assert_true(g_file_set_contents(path, data, -1, NULL));
    }
    r = route(f, 1, 24, NULL);
    assert_string_equal(r, "NOROUTE no process owns QP 24");
    g_free(r);
    r = route(f, 1, 19, &fd);
    assert_string_equal(r, "ROUTED");
    lfd = accept4(f->unix_fd, NULL, NULL, SOCK_CLOEXEC);
    assert_true(lfd >= 0);
    from = reply(lfd, 1000);
    assert_string_equal(from, "FROM 127.0.0.1");
    close(lfd);
    close(fd);
}

/* Finding 3: a routed connection lived as long as its client wanted (2 fds of the agent). */
static void test_routed_deadline(void **state)
{
    Fixture *f = *state;
    g_autofree char *r = NULL;
    int fd;

    agent_peer_set_timeouts(f->peer, 5000, 300);
    record(f, 19, (long)getpid());
    r = route(f, 1, 19, &fd);
    assert_string_equal(r, "ROUTED");
    g_free(r);
    r = reply(fd, 3000);
    assert_string_equal(r, "EOF"); /* closed by the broker at its deadline */
    close(fd);
}

/* The run directory: the agent's, 01733 (anyone adds a record, nobody replaces another's). */
static void test_run_dir_mode(void **state)
{
    Fixture *f = *state;
    struct stat st;

    assert_int_equal(stat(f->dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 01733);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flood_does_not_block_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_route_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_route_needs_tag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_routed_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_dir_mode, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
