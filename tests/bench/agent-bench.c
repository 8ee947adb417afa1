/* hm-agent-bench: the agent's prepare -> all-quiesced latency with 1, 16 and 64 registered
 * processes (p50/p99). A benchmark, not a test: it measures and prints.
 *
 * It starts its own hotmig-agent (--device fd:3 on a socketpair, its own process socket) so it
 * can act as the host from inside a guest, forks N processes that register with libhotmig in
 * lazy mode (each answers QUIESCE/RESUME at once from its poll loop), then times rounds of
 * `prepare` (request written -> reply read, which the agent sends once every process answered)
 * and undoes each with `resume`. libc and libhotmig only, so it runs in the lab's initramfs:
 *
 *   hm-agent-bench [--agent PATH] [--rounds N] [--procs 1,16,64]
 *   hotmig-lab exec GUEST 'hm-agent-bench --rounds 200'
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest-agent/libhotmig/hotmig.h"

#define BENCH_REPLY_MAX (256 * 1024)
#define BENCH_TIMEOUT_MS 30000
#define BENCH_PROCS_MAX 256

typedef struct {
    int fd;                /* host side of the agent's channel */
    int resume_timeout_ms; /* short without an RDMA device: resume would wait for one */
    pid_t agent;
    char buf[BENCH_REPLY_MAX];
    size_t len;
} Bench;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "hm-agent-bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* Reads one reply line (after skipping up to a 0xFF for sync replies) into @out. */
static int bench_read_line(Bench *b, char *out, size_t outlen)
{
    int64_t deadline = now_us() + (int64_t)BENCH_TIMEOUT_MS * 1000;

    for (;;) {
        char *nl = memchr(b->buf, '\n', b->len);
        if (nl) {
            size_t n = (size_t)(nl - b->buf);
            size_t c = n < outlen - 1 ? n : outlen - 1;
            memcpy(out, b->buf, c);
            out[c] = '\0';
            memmove(b->buf, nl + 1, b->len - n - 1);
            b->len -= n + 1;
            return 0;
        }
        int64_t left = (deadline - now_us()) / 1000;
        struct pollfd pfd = {.fd = b->fd, .events = POLLIN};
        if (left <= 0 || b->len == sizeof(b->buf)) {
            return -ETIMEDOUT;
        }
        if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
            return -errno;
        }
        ssize_t r = read(b->fd, b->buf + b->len, sizeof(b->buf) - b->len);
        if (r == 0) {
            return -EPIPE;
        }
        if (r < 0 && errno != EINTR && errno != EAGAIN) {
            return -errno;
        }
        if (r > 0) {
            b->len += (size_t)r;
        }
    }
}

static void bench_send(Bench *b, const char *line)
{
    size_t len = strlen(line);
    if (write(b->fd, line, len) != (ssize_t)len) {
        die("writing to the agent: %s", strerror(errno));
    }
}

static void bench_cmd(Bench *b, const char *line, char *reply, size_t replylen)
{
    bench_send(b, line);
    int r = bench_read_line(b, reply, replylen);
    if (r < 0) {
        die("no reply from the agent: %s", strerror(-r));
    }
    if (strncmp(reply, "{\"error\"", 8) == 0) {
        die("agent error: %s", reply);
    }
}

/* ---- the registered processes ------------------------------------------------------------ */

static int child_quiesce(void *opaque)
{
    return 0;
}

static int child_resume(const char *device, void *opaque)
{
    return 0;
}

static void child_main(int index)
{
    char name[32];
    HotmigClient *c;

    snprintf(name, sizeof(name), "bench-%d", index);
    c = hotmig_client_new(name, HOTMIG_MODE_LAZY, child_quiesce, child_resume, NULL);
    if (!c) {
        fprintf(stderr, "hm-agent-bench: %s cannot register: %s\n", name, strerror(errno));
        _exit(1);
    }
    for (;;) {
        struct pollfd pfd = {.fd = hotmig_client_get_fd(c), .events = POLLIN};
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
            _exit(1);
        }
        if (hotmig_client_dispatch(c) < 0) {
            _exit(0); /* the agent went away: the run is over */
        }
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int count_in(const char *reply, const char *member)
{
    const char *p = strstr(reply, member);
    int n = 0;
    if (!p) {
        return -1;
    }
    const char *end = strchr(p, ']');
    for (const char *q = strstr(p, "\"pid\""); q && (!end || q < end);
         q = strstr(q + 1, "\"pid\"")) {
        n++;
    }
    return n;
}

/* Registers @nprocs processes, times @rounds prepares. */
static void bench_run(Bench *b, const char *sock, int nprocs, int rounds)
{
    pid_t pids[BENCH_PROCS_MAX];
    int64_t *lat = calloc((size_t)rounds, sizeof(*lat));
    char reply[BENCH_REPLY_MAX];
    char req[128];

    if (!lat) {
        die("%s", "out of memory");
    }
    setenv(HOTMIG_AGENT_SOCKET_ENV, sock, 1);
    for (int i = 0; i < nprocs; i++) {
        pids[i] = fork();
        if (pids[i] < 0) {
            die("fork: %s", strerror(errno));
        }
        if (pids[i] == 0) {
            close(b->fd);
            child_main(i);
        }
    }
    /* Wait until all registered (status lists them). */
    for (int64_t deadline = now_us() + 20 * 1000000;;) {
        bench_cmd(b, "{\"execute\":\"status\"}\n", reply, sizeof(reply));
        if (count_in(reply, "\"processes\"") == nprocs) {
            break;
        }
        if (now_us() > deadline) {
            die("the processes did not register: %s", reply);
        }
        poll(NULL, 0, 10);
    }
    for (int i = 0; i < rounds; i++) {
        snprintf(req, sizeof(req), "{\"execute\":\"prepare\",\"arguments\":{\"timeout_ms\":%d}}\n",
                 BENCH_TIMEOUT_MS);
        int64_t t0 = now_us();
        bench_cmd(b, req, reply, sizeof(reply));
        lat[i] = now_us() - t0;
        if (count_in(reply, "\"quiesced\"") != nprocs || count_in(reply, "\"failed\"") != 0) {
            die("not every process quiesced: %s", reply);
        }
        snprintf(req, sizeof(req), "{\"execute\":\"resume\",\"arguments\":{\"timeout_ms\":%d}}\n",
                 b->resume_timeout_ms);
        bench_cmd(b, req, reply, sizeof(reply));
    }
    for (int i = 0; i < nprocs; i++) {
        kill(pids[i], SIGTERM);
        waitpid(pids[i], NULL, 0);
    }
    qsort(lat, (size_t)rounds, sizeof(*lat), cmp_i64);
    int i50 = (rounds - 1) * 50 / 100, i99 = (rounds - 1) * 99 / 100;
    printf("HMBENCH {\"bench\":\"agent-prepare\",\"processes\":%d,\"rounds\":%d,"
           "\"p50_us\":%lld,\"p99_us\":%lld,\"min_us\":%lld,\"max_us\":%lld}\n",
           nprocs, rounds, (long long)lat[i50], (long long)lat[i99], (long long)lat[0],
           (long long)lat[rounds - 1]);
    fflush(stdout);
    free(lat);
}

int main(int argc, char **argv)
{
    const char *agent = "hotmig-agent";
    int rounds = 100;
    char procs_arg[64] = "1,16,64";
    char sock[] = "/tmp/hm-agent-bench.XXXXXX";
    char sock_path[128];
    int sv[2];
    static Bench b;
    char reply[4096];

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--agent") == 0 && i + 1 < argc) {
            agent = argv[++i];
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            if (rounds < 1 || rounds > 100000) {
                die("--rounds '%s' is not in 1..100000", argv[i]);
            }
        } else if (strcmp(argv[i], "--procs") == 0 && i + 1 < argc) {
            snprintf(procs_arg, sizeof(procs_arg), "%s", argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: hm-agent-bench [--agent PATH] [--rounds N] [--procs 1,16,64]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (!mkdtemp(sock)) {
        die("mkdtemp: %s", strerror(errno));
    }
    snprintf(sock_path, sizeof(sock_path), "%s/agent.sock", sock);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        die("socketpair: %s", strerror(errno));
    }
    b.fd = sv[0];
    b.agent = fork();
    if (b.agent == 0) {
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

        dup2(sv[1], 3); /* dup2 clears FD_CLOEXEC */
        if (null >= 0) {
            dup2(null, 2); /* the agent logs every request: keep the output readable */
        }
        execlp(agent, agent, "--device", "fd:3", "--socket", sock_path, (char *)NULL);
        fprintf(stderr, "hm-agent-bench: cannot run '%s': %s\n", agent, strerror(errno));
        _exit(127);
    }
    close(sv[1]);
    bench_send(&b, "\xff{\"execute\":\"sync\",\"arguments\":{\"id\":1}}\n");
    if (bench_read_line(&b, reply, sizeof(reply)) < 0 || strcmp(reply, "\xff{\"return\":1}") != 0) {
        die("the agent did not answer sync (got '%s')", reply);
    }
    bench_cmd(&b, "{\"execute\":\"info\",\"arguments\":{\"protocol\":2}}\n", reply, sizeof(reply));
    bench_cmd(&b, "{\"execute\":\"inventory\"}\n", reply, sizeof(reply));
    b.resume_timeout_ms = strstr(reply, "\"state\":\"ACTIVE\"") ? 5000 : 10;
    if (b.resume_timeout_ms < 5000) {
        fprintf(stderr, "hm-agent-bench: no active RDMA device; resumes will not find one\n");
    }
    for (char *save = NULL, *tok = strtok_r(procs_arg, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int n = atoi(tok);
        if (n < 1 || n > BENCH_PROCS_MAX) {
            die("process count '%s' is not in 1..256", tok);
        }
        bench_run(&b, sock_path, n, rounds);
    }
    close(b.fd); /* end of file ends the agent */
    waitpid(b.agent, NULL, 0);
    rmdir(sock);
    return 0;
}
