/* libhotmig: the process side of the process <-> agent protocol (docs/design.md).
 * libc and pthreads only: it is linked into MPI processes. */
#include "hotmig.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define HOTMIG_EXPORT __attribute__((visibility("default")))

#define HOTMIG_LINE_MAX 512 /* bytes per line, newline included */
#define HOTMIG_NAME_MAX 64
#define HOTMIG_DEVICE_MAX 64
#define HOTMIG_READ_MAX (16 * 1024) /* per dispatch, so a call never runs long */

struct HotmigClient {
    int fd;
    HotmigMode mode;
    HotmigQuiesceFunc quiesce;
    HotmigResumeFunc resume;
    void *opaque;

    pthread_mutex_t lock;      /* input buffer and callbacks */
    pthread_mutex_t send_lock; /* one line at a time on fd: replies and reports */
    char buf[HOTMIG_LINE_MAX];
    size_t len;
    int discarding;
    int in_dispatch;

    atomic_int quiesced;
    atomic_int lost; /* errno value once the agent connection is gone */

    /* threaded mode */
    pthread_t thread;
    int thread_running;
    int stop_fd;
    atomic_int free_from_callback;
};

static int hotmig_send_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends one whole line; reports (any thread) and replies (the helper thread) do not interleave. */
static int hotmig_send_line(HotmigClient *client, const char *line)
{
    int r;

    pthread_mutex_lock(&client->send_lock);
    r = hotmig_send_all(client->fd, line, strlen(line));
    pthread_mutex_unlock(&client->send_lock);
    return r;
}

static int hotmig_parse_seq(const char *str, uint64_t *ret)
{
    char *end = NULL;
    unsigned long long v;

    if (str[0] < '0' || str[0] > '9')
        return -EINVAL;
    errno = 0;
    v = strtoull(str, &end, 10);
    if (errno || !end || *end != '\0' || v == 0)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* Copies @reason into @out (no control characters, at most @max - 1 bytes). */
static void hotmig_clean_reason(char *out, size_t max, const char *reason)
{
    size_t i;

    for (i = 0; reason[i] && i + 1 < max; i++) {
        unsigned char c = (unsigned char)reason[i];

        out[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    out[i] = '\0';
    if (i == 0)
        snprintf(out, max, "failed");
}

static int hotmig_reply(HotmigClient *client, uint64_t seq, int result)
{
    char line[HOTMIG_LINE_MAX];

    if (result == 0) {
        snprintf(line, sizeof(line), "DONE %" PRIu64 "\n", seq);
    } else {
        char reason[128];
        char errbuf[96];
        int e = result < 0 ? -result : result;
        const char *msg = strerror_r(e, errbuf, sizeof(errbuf));

        hotmig_clean_reason(reason, sizeof(reason), msg);
        snprintf(line, sizeof(line), "FAILED %" PRIu64 " %s (errno %d)\n", seq, reason, e);
    }
    return hotmig_send_line(client, line);
}

/* Handles one line from the agent. Returns 1 when it was a request, 0 when it was ignored,
 * a negative errno value when the reply could not be sent. */
static int hotmig_handle_line(HotmigClient *client, char *line)
{
    char *save = NULL;
    char *verb = strtok_r(line, " ", &save);
    char *seq_str = verb ? strtok_r(NULL, " ", &save) : NULL;
    uint64_t seq;
    int r;

    if (!verb || !seq_str || hotmig_parse_seq(seq_str, &seq) < 0)
        return 0; /* not for us: ignored, for forward compatibility */

    if (strcmp(verb, "QUIESCE") == 0) {
        if (strtok_r(NULL, " ", &save))
            return 0;
        if (atomic_load(&client->quiesced))
            r = 0; /* already quiesced: the agent asked again */
        else
            r = client->quiesce(client->opaque);
        if (r == 0)
            atomic_store(&client->quiesced, 1);
    } else if (strcmp(verb, "RESUME") == 0) {
        char *device = strtok_r(NULL, " ", &save);

        if (!device || strtok_r(NULL, " ", &save) || strlen(device) > HOTMIG_DEVICE_MAX)
            return 0;
        /* Called even when the process was not quiesced: after a migration every process
         * has to move to the new device. */
        r = client->resume(strcmp(device, "-") == 0 ? NULL : device, client->opaque);
        if (r == 0)
            atomic_store(&client->quiesced, 0);
    } else {
        return 0;
    }
    r = hotmig_reply(client, seq, r);
    return r < 0 ? r : 1;
}

/* Reads what the agent sent and handles complete lines. Called with the lock held. Returns
 * the number of requests handled or a negative errno value when the connection is lost. */
static int hotmig_process_input(HotmigClient *client)
{
    int handled = 0;
    size_t total = 0;

    if (atomic_load(&client->lost))
        return -atomic_load(&client->lost);
    while (total < HOTMIG_READ_MAX) {
        char chunk[1024];
        ssize_t n = recv(client->fd, chunk, sizeof(chunk), MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            atomic_store(&client->lost, n < 0 ? errno : ECONNRESET);
            break;
        }
        total += (size_t)n;
        for (ssize_t i = 0; i < n; i++) {
            char c = chunk[i];

            if (c != '\n') {
                if (client->discarding)
                    continue;
                if (client->len + 1 >= HOTMIG_LINE_MAX) {
                    client->discarding = 1; /* too long: skipped up to its newline */
                    client->len = 0;
                    continue;
                }
                client->buf[client->len++] = c;
                continue;
            }
            if (client->discarding) {
                client->discarding = 0;
                continue;
            }
            client->buf[client->len] = '\0';
            client->len = 0;
            int r = hotmig_handle_line(client, client->buf);
            if (r < 0) {
                atomic_store(&client->lost, -r);
                return handled > 0 ? handled : r;
            }
            handled += r;
        }
    }
    if (handled == 0 && atomic_load(&client->lost))
        return -atomic_load(&client->lost);
    return handled;
}

static void hotmig_client_destroy(HotmigClient *client)
{
    if (client->fd >= 0)
        close(client->fd);
    if (client->stop_fd >= 0)
        close(client->stop_fd);
    pthread_mutex_destroy(&client->lock);
    pthread_mutex_destroy(&client->send_lock);
    free(client);
}

static void *hotmig_thread(void *data)
{
    HotmigClient *client = data;

    for (;;) {
        struct pollfd pfd[2] = {
            {.fd = client->fd, .events = POLLIN},
            {.fd = client->stop_fd, .events = POLLIN},
        };
        int r = poll(pfd, 2, -1);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || pfd[1].revents)
            break;
        if (pfd[0].revents) {
            pthread_mutex_lock(&client->lock);
            r = hotmig_process_input(client);
            pthread_mutex_unlock(&client->lock);
            if (atomic_load(&client->free_from_callback))
                break;
            if (r < 0)
                break; /* the agent is gone; hotmig_client_dispatch() reports it */
        }
    }
    if (atomic_load(&client->free_from_callback)) {
        /* hotmig_client_free() was called by a callback on this thread. */
        pthread_detach(pthread_self());
        hotmig_client_destroy(client);
    }
    return NULL;
}

static int hotmig_name_ok(const char *name)
{
    size_t n;

    if (!name)
        return 0;
    n = strlen(name);
    if (n == 0 || n > HOTMIG_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];

        if (c <= 0x20 || c == 0x7f)
            return 0;
    }
    return 1;
}

HOTMIG_EXPORT HotmigClient *hotmig_client_new(const char *name, HotmigMode mode,
                                              HotmigQuiesceFunc quiesce, HotmigResumeFunc resume,
                                              void *opaque)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    const char *path = getenv(HOTMIG_AGENT_SOCKET_ENV);
    char hello[HOTMIG_LINE_MAX];
    HotmigClient *client;
    int r;

    if (!hotmig_name_ok(name) || !quiesce || !resume ||
        (mode != HOTMIG_MODE_LAZY && mode != HOTMIG_MODE_THREADED)) {
        errno = EINVAL;
        return NULL;
    }
    if (!path || !*path)
        path = HOTMIG_AGENT_SOCKET_DEFAULT;
    if (strlen(path) >= sizeof(addr.sun_path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);

    client = calloc(1, sizeof(*client));
    if (!client)
        return NULL;
    client->fd = -1;
    client->stop_fd = -1;
    client->mode = mode;
    client->quiesce = quiesce;
    client->resume = resume;
    client->opaque = opaque;
    pthread_mutex_init(&client->lock, NULL);
    pthread_mutex_init(&client->send_lock, NULL);

    client->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (client->fd < 0)
        goto fail;
    do {
        r = connect(client->fd, (struct sockaddr *)&addr, sizeof(addr));
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        goto fail;
    snprintf(hello, sizeof(hello), "HELLO %d.%d.%d %ld %s %s\n", HOTMIG_VERSION_MAJOR,
             HOTMIG_VERSION_MINOR, HOTMIG_VERSION_MICRO, (long)getpid(),
             mode == HOTMIG_MODE_LAZY ? "lazy" : "threaded", name);
    r = hotmig_send_all(client->fd, hello, strlen(hello));
    if (r < 0) {
        errno = -r;
        goto fail;
    }
    if (mode == HOTMIG_MODE_THREADED) {
        sigset_t all, old;

        client->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (client->stop_fd < 0)
            goto fail;
        /* The helper thread takes no signals: they stay with the application's threads. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = pthread_create(&client->thread, NULL, hotmig_thread, client);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
            errno = r;
            goto fail;
        }
        client->thread_running = 1;
    }
    return client;

fail:
    r = errno;
    hotmig_client_destroy(client);
    errno = r;
    return NULL;
}

HOTMIG_EXPORT int hotmig_client_get_fd(const HotmigClient *client)
{
    if (!client || client->mode != HOTMIG_MODE_LAZY)
        return -1;
    return client->fd;
}

HOTMIG_EXPORT int hotmig_client_dispatch(HotmigClient *client)
{
    int r;

    if (!client)
        return -EINVAL;
    if (client->mode == HOTMIG_MODE_THREADED) {
        /* The helper thread runs the callbacks; report a lost connection all the same. */
        r = atomic_load(&client->lost);
        return r ? -r : 0;
    }
    pthread_mutex_lock(&client->lock);
    if (client->in_dispatch) {
        pthread_mutex_unlock(&client->lock);
        return -EDEADLK; /* called from a callback */
    }
    client->in_dispatch = 1;
    r = hotmig_process_input(client);
    client->in_dispatch = 0;
    pthread_mutex_unlock(&client->lock);
    return r;
}

/* @word: 1..64 bytes, printable ASCII, no space. */
static int hotmig_report(HotmigClient *client, const char *verb, const char *word)
{
    char line[HOTMIG_LINE_MAX];
    size_t n;

    if (!client || !word)
        return -EINVAL;
    n = strlen(word);
    if (n == 0 || n > 64)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)word[i] <= 0x20 || (unsigned char)word[i] >= 0x7f)
            return -EINVAL;
    if (atomic_load(&client->lost))
        return -atomic_load(&client->lost);
    snprintf(line, sizeof(line), "%s %s\n", verb, word);
    return hotmig_send_line(client, line);
}

HOTMIG_EXPORT int hotmig_client_report_peer(HotmigClient *client, const char *gid, unsigned qpn)
{
    char word[48];

    if (!gid || strlen(gid) != 32 || strspn(gid, "0123456789abcdef") != 32 || qpn >= (1u << 24))
        return -EINVAL;
    snprintf(word, sizeof(word), "%s/%u", gid, qpn);
    return hotmig_report(client, "PEER", word);
}

HOTMIG_EXPORT int hotmig_client_report_refused(HotmigClient *client, const char *call)
{
    return hotmig_report(client, "REFUSED", call);
}

HOTMIG_EXPORT int hotmig_client_report_standby(HotmigClient *client,
                                               const HotmigStandbyStats *stats)
{
    char word[64];

    if (!stats || (stats->used != 0 && stats->used != 1) ||
        stats->switched > HOTMIG_STANDBY_QPS_MAX || stats->paused > HOTMIG_STANDBY_QPS_MAX ||
        stats->sends > HOTMIG_STANDBY_COUNT_MAX || stats->recvs > HOTMIG_STANDBY_COUNT_MAX ||
        stats->ms > HOTMIG_STANDBY_MS_MAX)
        return -EINVAL;
    /* at most 1+1+5+1+5+1+16+1+16+1+6 = 54 bytes: one word of hotmig_report() */
    snprintf(word, sizeof(word), "%d/%u/%u/%llu/%llu/%u", stats->used, stats->switched,
             stats->paused, stats->sends, stats->recvs, stats->ms);
    return hotmig_report(client, "STATS", word);
}

HOTMIG_EXPORT int hotmig_client_is_quiesced(const HotmigClient *client)
{
    if (!client)
        return 0;
    return atomic_load(&((HotmigClient *)client)->quiesced);
}

HOTMIG_EXPORT void hotmig_client_free(HotmigClient *client)
{
    if (!client)
        return;
    if (client->thread_running) {
        uint64_t one = 1;
        ssize_t n;

        if (pthread_equal(pthread_self(), client->thread)) {
            /* From a callback: the helper thread frees the client once the callback ends. */
            atomic_store(&client->free_from_callback, 1);
            return;
        }
        do {
            n = write(client->stop_fd, &one, sizeof(one));
        } while (n < 0 && errno == EINTR);
        pthread_join(client->thread, NULL);
    }
    hotmig_client_destroy(client);
}

/* One line from @fd within @deadline_ms (CLOCK_MONOTONIC), without its newline. 0 or -errno. */
static int hotmig_read_line_until(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t n = 0;

    while (n + 1 < size) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t got;
        int r = poll(&p, 1, timeout_ms);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        got = recv(fd, buf + n, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? -errno : -ECONNRESET;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return 0;
        }
        n++;
    }
    return -EPROTO;
}

HOTMIG_EXPORT int hotmig_standby_acquire(char *device, size_t size, int timeout_ms)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    const char *path = getenv(HOTMIG_AGENT_SOCKET_ENV);
    char line[HOTMIG_LINE_MAX], name[HOTMIG_DEVICE_NAME_MAX + 2];
    int fd, r, status;

    if (!device || size < HOTMIG_DEVICE_NAME_MAX + 1 || timeout_ms < 0)
        return -EINVAL;
    if (!path || !*path)
        path = HOTMIG_AGENT_SOCKET_DEFAULT;
    if (strlen(path) >= sizeof(addr.sun_path))
        return -ENAMETOOLONG;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    do {
        r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
    } while (r < 0 && errno == EINTR);
    r = r < 0 ? -errno : hotmig_send_all(fd, "STANDBY\n", 8);
    if (!r)
        r = hotmig_read_line_until(fd, line, sizeof(line), timeout_ms);
    /* "STANDBY 0 <device>" or "STANDBY <errno> <reason>" */
    if (!r && (sscanf(line, "STANDBY %d %64s", &status, name) != 2 || status < 0))
        r = -EPROTO;
    if (!r && status)
        r = -status;
    if (!r && (strlen(name) > HOTMIG_DEVICE_NAME_MAX || !*name))
        r = -EPROTO;
    if (r) {
        close(fd);
        return r;
    }
    memcpy(device, name, strlen(name) + 1);
    return fd;
}
