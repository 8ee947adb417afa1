/* hm-pingpong: an RDMA RC ping-pong between two guests that proves a hotmig live migration
 * loses and corrupts nothing.
 *
 * The client sends message seq=0,1,2,... over an RC QP; the server verifies each one and
 * echoes it back; the client verifies the echo and sends the next one. A TCP control
 * connection carries the QP exchange and the pause/resume handshake:
 *
 *   HELLO hm-pingpong 1 <role>            both ways, once
 *   QP <dev> <lid> <qpn> <psn> <gid> <mtu> each side, whenever it has a new QP
 *   RTS                                    my QP is connected to the last QP you sent
 *   PAUSE <cycle> <kind>                   I am going down: destroy your QP, forget mine
 *   PAUSED <cycle>                         done
 *   DONE / RESULT ...                      the end: the server reports its counts
 *
 * Either side can go down: on a quiesce from hotmig-agent (libhotmig), on a device that
 * vanished (IBV_EVENT_DEVICE_FATAL) or to reset a QP that failed. A side that goes down sends
 * PAUSE and ignores QP/RTS lines until PAUSED has come back: everything after PAUSED is
 * fresh. The side that receives PAUSE destroys its QP, answers PAUSED, creates a new QP and
 * sends QP at once (the other side keeps it until it is up again). A side connects (RTR/RTS)
 * once it has sent its QP and holds the peer's; traffic flows once both sent RTS. The client
 * retransmits the message in flight after every reconnection; the server echoes a
 * retransmitted message again and counts it as a duplicate.
 *
 * TCP fallback (--fallback tcp on both sides): a second TCP connection (to port + 1, over the
 * control NIC, which is never unplugged) carries the same messages while the RDMA link is
 * down. The client decides the path: RDMA while the link is up; TCP once its QP is gone (after
 * PAUSED, or at once when the peer pauses) or never connected; back to RDMA when the link is up
 * again and the TCP message in flight has been echoed, so no echo can arrive on a path the
 * client has left. The server echoes each message on the path it came in on. The message in
 * flight when the QP went away is retransmitted on TCP (a duplicate for the server if it had
 * arrived). The blackout is the longest gap between two delivered echoes, on any path.
 *
 * Everything runs on the main thread around one poll(): control socket, completion
 * channel, async event fd, and the libhotmig fd (lazy) or a wake-up eventfd (threaded:
 * libhotmig's thread hands the request over and waits for the main thread to do it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/workload/wl-log.h"
#include "tests/workload/wl-verbs.h"
#include "tests/workload/wl.h"

#ifdef HM_WL_HAVE_HOTMIG
#include "guest-agent/libhotmig/hotmig.h"
#endif

#define WL_DEVICE_WAIT_MS 120000  /* a device to appear (resume, recovery, start) */
#define WL_PAUSE_WAIT_MS 15000    /* PAUSED after PAUSE */
#define WL_CONNECT_WAIT_MS 300000 /* the client reaching the server */
#define WL_DRAIN_WAIT_MS 120000   /* the echo of the last message after the stop */
#define WL_RESULT_WAIT_MS 30000   /* RESULT after DONE */
#define WL_SERVER_GRACE_MS 300000 /* the server waits for DONE this long past max-seconds */
#define WL_AGENT_WAIT_MS 30000    /* the agent's socket to appear at start */
#define WL_PROGRESS_MS 5000
#define WL_RESETS_MAX 50
#define WL_TICK_MS 1000

typedef struct {
    uint64_t number; /* 1-based */
    int local;       /* this side went down (else the peer did) */
    WlPauseKind kind;
    char device[WL_DEV_NAME_MAX]; /* the migrated side's device after the resume */
    uint64_t epoch;               /* link epoch of the reconnection; 0 = not yet */
    uint64_t delivered_after;
    uint64_t delivered_tcp; /* delivered over the TCP fallback while the cycle ran */
    int64_t blackout;       /* longest gap between echoes from the pause to RDMA again */
    int64_t blackout_at;    /* when that gap began, ms after the pause (< 0: before it) */
    int64_t t_pause;
    int64_t t_resume; /* resume request (local) or first QP from the peer (peer) */
} WlCycle;

typedef enum {
    REQ_NONE = 0,
    REQ_QUIESCE,
    REQ_RESUME,
} ReqType;

typedef struct {
    WlArgs args;
    int64_t t_start;

    /* control connection */
    int listen_fd;
    int ctl_fd;
    int connecting; /* client: non-blocking connect in progress */
    int64_t connect_retry_at;
    int connect_backoff_ms;
    WlLineBuf lb;
    int hello_done;

    /* verbs and link state */
    WlVerbs *v;
    char dev[WL_DEV_NAME_MAX]; /* device to open; "" = the first ACTIVE one */
    int64_t dev_wait_since;    /* 0 = not waiting for a device */
    int64_t dev_retry_at;
    int dev_backoff_ms;
    int local_down;         /* quiesced by the agent */
    int pauses_outstanding; /* PAUSE sent, PAUSED not yet back */
    int sent_qp, have_peer_qp, qp_rts, peer_rts, connected;
    WlQpInfo peer_qp;
    uint64_t epoch;
    int ready_printed;

    WlCycle *cycles;
    size_t ncycles, cycles_cap;
    uint64_t qp_gen; /* bumped whenever our QP is destroyed */

    /* TCP fallback */
    int fb_listen_fd;
    int fb_fd;
    uint8_t *fb_rx, *fb_tx;
    size_t fb_rx_len;
    int fb_pending;      /* client: a message is in flight on TCP */
    int inflight_on_tcp; /* client: the message in flight was last sent on TCP */
    uint64_t inflight_qp_gen;
    uint64_t tcp_sent, tcp_delivered;

    /* data */
    int send_posted;
    int echo_deferred; /* server: a message waits for the previous echo's completion */
    uint32_t echo_len;
    uint64_t next_seq, inflight_seq;
    int inflight;
    uint64_t inflight_epoch; /* link epoch the message in flight was last posted on */
    uint64_t sent, echoes, received, corrupt, duplicates, retransmits;
    uint64_t verbs_errors, resets;
    int have_last;
    uint64_t last_seq;
    int64_t last_echo, longest_gap;
    int64_t progress_at;

    /* end */
    int stopping;
    int64_t tail_at, drain_deadline, result_deadline;
    int done_sent, done_received, got_result, finish, failed;
    WlResultCounts peer_result;
    char error[256];

    /* agent */
    int in_dispatch;
#ifdef HM_WL_HAVE_HOTMIG
    HotmigClient *hm;
#endif
    int wake_fd;
    pthread_mutex_t req_lock;
    pthread_cond_t req_cond;
    ReqType req_type;
    char req_dev[WL_DEV_NAME_MAX];
    int req_has_dev, req_done, req_result, req_shutdown;
} App;

static void advance(App *app);
static void client_kick(App *app);
static int loop_once(App *app, int64_t max_wait_ms, int top);

/* ---- utilities ---------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line "HMWL {json}" on stdout. */
static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void emit(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("HMWL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    va_end(ap);
}

static void json_escape(const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    for (; *in && o + 7 < outlen; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c > 0x7e) {
            o += (size_t)snprintf(out + o, outlen - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

/* The run has failed: remember the first reason, report it once. */
static void fail(App *app, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(App *app, const char *fmt, ...)
{
    va_list ap;
    char msg[256];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    wl_log("%s", msg);
    if (!app->failed) {
        snprintf(app->error, sizeof(app->error), "%s", msg);
    }
    app->failed = 1;
    app->finish = 1;
}

static int ctl_up(const App *app)
{
    return app->ctl_fd >= 0 && !app->connecting && app->hello_done;
}

static void ctl_close(App *app)
{
    if (app->ctl_fd >= 0 && close(app->ctl_fd) < 0) {
        wl_log("closing the control connection: %s", strerror(errno));
    }
    app->ctl_fd = -1;
    app->connecting = 0;
}

static void ctl_send(App *app, const WlCtlMsg *msg)
{
    char line[WL_CTL_LINE_MAX];
    int n = wl_ctl_format(msg, line, sizeof(line));
    size_t off = 0;

    if (n < 0) {
        fail(app, "internal error: cannot format control message %d", (int)msg->type);
        return;
    }
    if (app->ctl_fd < 0) {
        return;
    }
    while (off < (size_t)n) {
        ssize_t w = send(app->ctl_fd, line + off, (size_t)n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0) {
            fail(app, "sending on the control connection: %s", strerror(errno));
            ctl_close(app);
            return;
        }
        off += (size_t)w;
    }
}

static void ctl_send_simple(App *app, WlCtlType type)
{
    WlCtlMsg m = {.type = type};
    ctl_send(app, &m);
}

/* ---- cycles ------------------------------------------------------------------------------- */

static WlCycle *cycle_new(App *app, int local, WlPauseKind kind)
{
    if (app->ncycles == app->cycles_cap) {
        size_t cap = app->cycles_cap ? 2 * app->cycles_cap : 16;
        WlCycle *c = realloc(app->cycles, cap * sizeof(*c));
        if (!c) {
            fail(app, "out of memory recording cycle %zu", app->ncycles + 1);
            return NULL;
        }
        app->cycles = c;
        app->cycles_cap = cap;
    }
    WlCycle *c = &app->cycles[app->ncycles++];
    memset(c, 0, sizeof(*c));
    c->number = app->ncycles;
    c->local = local;
    c->kind = kind;
    c->t_pause = now_ms();
    return c;
}

static size_t cycles_completed(const App *app)
{
    size_t n = 0;
    for (size_t i = 0; i < app->ncycles; i++) {
        n += app->cycles[i].epoch != 0;
    }
    return n;
}

/* Counts one delivered message for the cycles that ended with the current link epoch. */
static void cycles_count_delivery(App *app)
{
    for (size_t i = app->ncycles; i-- > 0;) {
        if (app->cycles[i].epoch != app->epoch) {
            break;
        }
        app->cycles[i].delivered_after++;
    }
}

/* ---- verbs state -------------------------------------------------------------------------- */

/* Destroys our QP and everything else and closes the device. The peer's QP info stays
 * valid: only a PAUSE (sent or received) makes it stale. */
static void verbs_down(App *app)
{
    if (app->v) {
        app->qp_gen++;
    }
    wl_verbs_close(app->v);
    app->v = NULL;
    app->send_posted = 0;
    app->echo_deferred = 0;
    app->sent_qp = 0;
    app->qp_rts = 0;
    app->peer_rts = 0;
    app->connected = 0;
}

/* Going down for a reason other than the agent: close now, then tell the peer. */
static void pause_start(App *app, WlPauseKind kind)
{
    verbs_down(app);
    app->have_peer_qp = 0;
    client_kick(app);
    if (ctl_up(app)) {
        WlCtlMsg m = {.type = WL_CTL_PAUSE};
        m.u.pause.cycle = app->ncycles;
        m.u.pause.kind = kind;
        ctl_send(app, &m);
        app->pauses_outstanding++;
    } else {
        advance(app);
    }
}

/* The device vanished without a quiesce (hot-unplug without the agent, or before it acted):
 * let go of it at once (rxe blocks the unplug while it is open), tell the peer, then wait in
 * the background for any device to come back. Counts as a cycle of kind "fatal". */
static void device_lost(App *app)
{
    int64_t t0 = now_ms();
    WlCycle *c;

    app->verbs_errors++;
    if (app->local_down || app->pauses_outstanding > 0) {
        verbs_down(app); /* already going down: just release the device */
        return;
    }
    wl_log("device '%s' is gone without a quiesce; closed it, waiting for a device", app->dev);
    c = cycle_new(app, 1, WL_PAUSE_FATAL);
    app->dev[0] = '\0'; /* take whatever device comes back */
    pause_start(app, WL_PAUSE_FATAL);
    if (c) {
        emit("{\"event\":\"quiesced\",\"cycle\":%" PRIu64 ",\"side\":\"local\","
             "\"kind\":\"fatal\",\"ms\":%" PRId64 "}",
             c->number, now_ms() - t0);
    }
}

static void verbs_error(App *app, const char *what)
{
    int fatal = 0;
    char found[WL_DEV_NAME_MAX];

    if (!app->qp_rts || app->local_down || app->pauses_outstanding > 0) {
        app->verbs_errors++;
        return; /* flushed work requests of a QP being replaced */
    }
    /* An unplug often shows as a failed completion before IBV_EVENT_DEVICE_FATAL arrives:
     * a device without an ACTIVE port is a lost device, not a QP to reset. */
    if (wl_verbs_read_async(app->v, &fatal) < 0) {
        fatal = 1;
    }
    verbs_down(app);
    if (fatal || wl_verbs_find_active(app->dev, found, sizeof(found)) < 0) {
        wl_log("verbs error on '%s' (%s) and the device has no ACTIVE port", app->dev, what);
        device_lost(app);
        return;
    }
    app->verbs_errors++;
    wl_log("verbs error on '%s': %s; resetting the connection", app->dev, what);
    app->resets++;
    if (app->resets > WL_RESETS_MAX) {
        fail(app, "more than %d connection resets; giving up", WL_RESETS_MAX);
        return;
    }
    pause_start(app, WL_PAUSE_RESET);
}

/* ---- data path ---------------------------------------------------------------------------- */

static void fb_close(App *app)
{
    if (app->fb_fd >= 0 && close(app->fb_fd) < 0) {
        wl_log("closing the fallback connection: %s", strerror(errno));
    }
    app->fb_fd = -1;
    app->fb_rx_len = 0;
    app->fb_pending = 0;
}

/* Sends one whole message on the fallback connection (one message in flight: the socket
 * buffer takes it at once; SO_SNDTIMEO bounds the rest). */
static int fb_send(App *app, const uint8_t *buf, size_t len)
{
    size_t off = 0;

    while (off < len) {
        ssize_t w = send(app->fb_fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0) {
            return -errno;
        }
        off += (size_t)w;
    }
    return 0;
}

/* Client: the message in flight was posted on a QP that still exists: its echo may come. */
static int inflight_on_live_qp(const App *app)
{
    return app->inflight && !app->inflight_on_tcp && app->v && app->inflight_qp_gen == app->qp_gen;
}

/* Client: (re)send the message in flight, or the next one, on the TCP fallback. */
static void client_kick_tcp(App *app)
{
    int r;

    if (app->fb_fd < 0 || app->fb_pending || inflight_on_live_qp(app)) {
        return;
    }
    if (app->inflight) {
        app->retransmits++;
    } else {
        if (app->stopping) {
            return;
        }
        app->inflight_seq = app->next_seq++;
        app->inflight = 1;
        app->sent++;
    }
    wl_msg_encode(app->fb_tx, app->args.size, app->inflight_seq);
    r = fb_send(app, app->fb_tx, app->args.size);
    if (r < 0) {
        fail(app, "sending on the fallback connection: %s", strerror(-r));
        fb_close(app);
        return;
    }
    app->inflight_on_tcp = 1;
    app->fb_pending = 1;
    app->tcp_sent++;
}

/* Client: (re)send the message in flight, or the next one. */
static void client_kick(App *app)
{
    if (app->args.role != WL_ROLE_CLIENT || app->send_posted || app->fb_pending) {
        return; /* one message in flight, on one path */
    }
    if (!app->connected || !app->v) {
        client_kick_tcp(app);
        return;
    }
    if (app->inflight) {
        if (!app->inflight_on_tcp && app->inflight_epoch == app->epoch) {
            return; /* posted on this connection, its echo is still to come */
        }
        app->retransmits++;
    } else {
        if (app->stopping) {
            return;
        }
        app->inflight_seq = app->next_seq++;
        app->inflight = 1;
        app->sent++;
    }
    wl_msg_encode(wl_verbs_send_buf(app->v), app->args.size, app->inflight_seq);
    if (wl_verbs_post_send(app->v, app->args.size) < 0) {
        verbs_error(app, "posting a send failed");
        return;
    }
    app->inflight_epoch = app->epoch;
    app->inflight_on_tcp = 0;
    app->inflight_qp_gen = app->qp_gen;
    app->send_posted = 1;
}

static void server_echo(App *app)
{
    memcpy(wl_verbs_send_buf(app->v), wl_verbs_recv_buf(app->v), app->echo_len);
    app->echo_deferred = 0;
    if (wl_verbs_post_recv(app->v) < 0) {
        verbs_error(app, "posting a receive failed");
        return;
    }
    if (wl_verbs_post_send(app->v, app->echo_len) < 0) {
        verbs_error(app, "posting a send failed");
        return;
    }
    app->send_posted = 1;
}

/* Client: an echo arrived (on RDMA or, @via_tcp, on the fallback connection). */
static void client_account(App *app, const uint8_t *buf, size_t len, int via_tcp)
{
    uint64_t seq = 0;
    int64_t now = now_ms();
    WlMsgStatus st;

    if (!app->inflight) {
        app->corrupt++;
        wl_log("unexpected echo (seq %" PRIu64 ") with no message in flight",
               wl_msg_peek_seq(buf, len));
    } else {
        st = wl_msg_verify(buf, len, app->args.size, &app->inflight_seq, &seq);
        /* The cycles not delivering over RDMA again yet (this echo may be their first) had
         * this gap: the blackout of a migration, whatever path carried the traffic. */
        for (size_t i = 0; app->last_echo != 0 && i < app->ncycles; i++) {
            WlCycle *c = &app->cycles[i];
            if ((c->epoch == 0 || c->delivered_after == 0) && now - app->last_echo > c->blackout) {
                c->blackout = now - app->last_echo;
                c->blackout_at = app->last_echo - c->t_pause;
            }
        }
        app->echoes++;
        app->inflight = 0;
        if (st != WL_MSG_OK) {
            app->corrupt++;
            wl_log("echo of message %" PRIu64 " is corrupt: %s (seq %" PRIu64 ", %zu bytes)",
                   app->inflight_seq, wl_msg_status_to_string(st), seq, len);
        } else {
            app->received++;
            if (via_tcp) {
                app->tcp_delivered++;
                if (app->ncycles > 0 && app->cycles[app->ncycles - 1].epoch == 0) {
                    app->cycles[app->ncycles - 1].delivered_tcp++;
                }
            } else {
                cycles_count_delivery(app);
            }
        }
        if (app->last_echo != 0 && now - app->last_echo > app->longest_gap) {
            app->longest_gap = now - app->last_echo;
        }
        app->last_echo = now;
    }
}

static void on_recv_client(App *app, uint32_t len)
{
    client_account(app, wl_verbs_recv_buf(app->v), len, 0);
    if (wl_verbs_post_recv(app->v) < 0) {
        verbs_error(app, "posting a receive failed");
        return;
    }
    client_kick(app);
}

/* Server: a message arrived (on RDMA or, @via_tcp, on the fallback connection). */
static void server_account(App *app, const uint8_t *buf, size_t len, int via_tcp)
{
    uint64_t seq = 0;
    WlMsgStatus st = wl_msg_verify(buf, len, app->args.size, NULL, &seq);

    if (st != WL_MSG_OK) {
        app->corrupt++;
        wl_log("message (seq %" PRIu64 ", %zu bytes) is corrupt: %s", seq, len,
               wl_msg_status_to_string(st));
    } else if (!app->have_last || seq == app->last_seq + 1) {
        app->received++;
        app->have_last = 1;
        app->last_seq = seq;
        if (via_tcp) {
            app->tcp_delivered++;
            if (app->ncycles > 0 && app->cycles[app->ncycles - 1].epoch == 0) {
                app->cycles[app->ncycles - 1].delivered_tcp++;
            }
        } else {
            cycles_count_delivery(app);
        }
    } else if (seq == app->last_seq) {
        app->duplicates++; /* retransmitted after a reconnection or a path switch */
    } else {
        app->corrupt++;
        wl_log("message seq %" PRIu64 " after %" PRIu64 ": out of order", seq, app->last_seq);
        app->last_seq = seq;
    }
}

static void on_recv_server(App *app, uint32_t len)
{
    server_account(app, wl_verbs_recv_buf(app->v), len, 0);
    /* Echo as soon as our QP is in RTS: the client starts on our RTS line, so its message
     * can arrive before its own RTS line does. Not while we are going down ourselves: then
     * the client retransmits after the reconnection. */
    if (!app->qp_rts || app->local_down || app->pauses_outstanding > 0) {
        if (wl_verbs_post_recv(app->v) < 0) {
            verbs_error(app, "posting a receive failed");
        }
        return;
    }
    app->echo_len = len;
    if (app->send_posted) {
        app->echo_deferred = 1; /* echo once the previous echo's send completed */
        return;
    }
    server_echo(app);
}

static void on_cq(App *app)
{
    WlVerbs *v = app->v;
    WlCompletion wc[8];
    int n;

    do {
        n = wl_verbs_poll(v, wc, 8);
        if (n < 0) {
            verbs_error(app, "reading the completion queue failed");
            return;
        }
        for (int i = 0; i < n && app->v == v; i++) {
            if (!wc[i].ok) {
                char what[128];
                snprintf(what, sizeof(what), "%s completion status '%s'",
                         wc[i].is_recv ? "receive" : "send", wc[i].status_str);
                verbs_error(app, what);
                continue;
            }
            if (wc[i].is_recv) {
                if (app->args.role == WL_ROLE_CLIENT) {
                    on_recv_client(app, wc[i].byte_len);
                } else {
                    on_recv_server(app, wc[i].byte_len);
                }
            } else {
                app->send_posted = 0;
                if (app->args.role == WL_ROLE_CLIENT) {
                    client_kick(app);
                } else if (app->echo_deferred && app->qp_rts && !app->local_down &&
                           app->pauses_outstanding == 0) {
                    server_echo(app);
                }
            }
        }
    } while (n > 0 && app->v == v);
}

static void on_async(App *app)
{
    int fatal = 0;
    if (wl_verbs_read_async(app->v, &fatal) < 0 || fatal) {
        device_lost(app);
    }
}

/* The fallback connection is readable: collect one message, account for it, echo it
 * (server) or send the next one (client). */
static void on_fb(App *app)
{
    size_t size = app->args.size;
    ssize_t n = read(app->fb_fd, app->fb_rx + app->fb_rx_len, size - app->fb_rx_len);

    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) {
            return;
        }
        fail(app, "reading the fallback connection: %s", strerror(errno));
        fb_close(app);
        return;
    }
    if (n == 0) {
        if (!app->finish) {
            fail(app, "the peer closed the fallback connection");
        }
        fb_close(app);
        return;
    }
    app->fb_rx_len += (size_t)n;
    if (app->fb_rx_len < size) {
        return;
    }
    app->fb_rx_len = 0;
    if (app->args.role == WL_ROLE_CLIENT) {
        if (!app->fb_pending) {
            app->corrupt++;
            wl_log("echo on the fallback connection with no message in flight there");
            return;
        }
        app->fb_pending = 0;
        client_account(app, app->fb_rx, size, 1);
        client_kick(app);
        return;
    }
    server_account(app, app->fb_rx, size, 1);
    int r = fb_send(app, app->fb_rx, size);
    if (r < 0) {
        fail(app, "echoing on the fallback connection: %s", strerror(-r));
        fb_close(app);
    }
}

/* ---- link state machine ------------------------------------------------------------------- */

static void on_connected(App *app)
{
    int64_t now = now_ms();

    app->connected = 1;
    app->epoch++;
    if (!app->ready_printed) {
        app->ready_printed = 1;
        emit("{\"event\":\"ready\",\"role\":\"%s\",\"device\":\"%s\",\"gid\":\"%s\","
             "\"peer_device\":\"%s\",\"mode\":\"%s\",\"agent\":%s}",
             wl_role_to_string(app->args.role), wl_verbs_device_name(app->v),
             wl_verbs_gid_string(app->v), app->peer_qp.dev, wl_mode_to_string(app->args.mode),
             app->args.no_agent ? "false" : "true");
    }
    for (size_t i = 0; i < app->ncycles; i++) {
        WlCycle *c = &app->cycles[i];
        if (c->epoch != 0) {
            continue;
        }
        c->epoch = app->epoch;
        snprintf(c->device, sizeof(c->device), "%s",
                 c->local ? wl_verbs_device_name(app->v) : app->peer_qp.dev);
        emit("{\"event\":\"resumed\",\"cycle\":%" PRIu64 ",\"side\":\"%s\",\"device\":\"%s\","
             "\"ms\":%" PRId64 ",\"outage_ms\":%" PRId64 "}",
             c->number, c->local ? "local" : "peer", c->device,
             now - (c->t_resume ? c->t_resume : c->t_pause), now - c->t_pause);
    }
    if (app->args.role == WL_ROLE_CLIENT) {
        client_kick(app);
    }
}

/* Opens the device, sends our QP, connects, as far as the state allows. Idempotent. */
static void advance(App *app)
{
    int64_t now = now_ms();

    if (app->failed || app->finish || app->local_down || app->pauses_outstanding > 0) {
        return;
    }
    if (!app->v) {
        int r = wl_verbs_open(app->dev[0] ? app->dev : NULL, app->args.size, &app->v);
        if (r < 0) {
            if (app->dev_wait_since == 0) {
                app->dev_wait_since = now;
                app->dev_backoff_ms = 20;
                wl_log("waiting for RDMA device '%s' to be usable (%s)",
                       app->dev[0] ? app->dev : "any",
                       r == -ENODEV ? "no ACTIVE port" : strerror(-r));
            } else if (now - app->dev_wait_since >= WL_DEVICE_WAIT_MS) {
                fail(app, "no ACTIVE RDMA device '%s' within %d s",
                     app->dev[0] ? app->dev : "(any)", WL_DEVICE_WAIT_MS / 1000);
                return;
            }
            app->dev_retry_at = now + app->dev_backoff_ms;
            if (app->dev_backoff_ms < 1000) {
                app->dev_backoff_ms *= 2;
            }
            return;
        }
        app->dev_wait_since = 0;
        app->dev_retry_at = 0;
        snprintf(app->dev, sizeof(app->dev), "%s", wl_verbs_device_name(app->v));
    }
    if (!ctl_up(app)) {
        return;
    }
    if (!app->sent_qp) {
        WlCtlMsg m = {.type = WL_CTL_QP};
        wl_verbs_get_info(app->v, &m.u.qp);
        ctl_send(app, &m);
        app->sent_qp = 1;
    }
    if (app->have_peer_qp && !app->qp_rts && app->v) {
        int64_t t0 = now_ms();
        if (wl_verbs_connect(app->v, &app->peer_qp) < 0) {
            app->qp_rts = 1; /* so that verbs_error() resets */
            verbs_error(app, "connecting the QP failed");
            return;
        }
        if (now_ms() - t0 >= 100) {
            /* RoCE: RTR resolves the peer's MAC (ARP) and waits for it. */
            wl_log("connecting the QP took %" PRId64 " ms", now_ms() - t0);
        }
        app->qp_rts = 1;
        ctl_send_simple(app, WL_CTL_RTS);
    }
    if (app->qp_rts && app->peer_rts && !app->connected && !app->failed) {
        on_connected(app);
    }
}

/* The peer goes down: destroy our QP, answer, come back up with a new QP at once. */
static void on_peer_pause(App *app, WlPauseKind kind)
{
    int64_t t0 = now_ms();
    WlCtlMsg m = {.type = WL_CTL_PAUSED};

    verbs_down(app);
    app->have_peer_qp = 0;
    m.u.pause.cycle = app->ncycles;
    ctl_send(app, &m);
    client_kick(app); /* our QP is gone: the fallback takes over (if any) */
    if (kind != WL_PAUSE_RESET) {
        WlCycle *c = cycle_new(app, 0, kind);
        if (c) {
            emit("{\"event\":\"quiesced\",\"cycle\":%" PRIu64 ",\"side\":\"peer\","
                 "\"kind\":\"%s\",\"ms\":%" PRId64 "}",
                 c->number, wl_pause_kind_to_string(kind), now_ms() - t0);
        }
    }
    advance(app);
}

static void on_line(App *app, const char *line)
{
    WlCtlMsg m;
    char err[160];

    if (wl_ctl_parse(line, &m, err, sizeof(err)) < 0) {
        fail(app, "bad control line from the peer: %s", err);
        return;
    }
    if (m.type != WL_CTL_HELLO && !app->hello_done) {
        fail(app, "control line '%s' before HELLO", line);
        return;
    }
    switch (m.type) {
    case WL_CTL_HELLO:
        if (app->hello_done) {
            fail(app, "second HELLO from the peer");
            return;
        }
        if (m.u.hello.version != WL_CTL_VERSION || m.u.hello.role == app->args.role) {
            fail(app, "peer says '%s': want version %d and the other role", line, WL_CTL_VERSION);
            return;
        }
        if (app->args.role == WL_ROLE_SERVER) {
            WlCtlMsg h = {.type = WL_CTL_HELLO};
            h.u.hello.version = WL_CTL_VERSION;
            h.u.hello.role = app->args.role;
            ctl_send(app, &h);
        }
        app->hello_done = 1;
        advance(app);
        break;
    case WL_CTL_QP:
        if (app->pauses_outstanding > 0) {
            return; /* sent before the peer saw our PAUSE: stale */
        }
        app->peer_qp = m.u.qp;
        app->have_peer_qp = 1;
        if (app->ncycles > 0) {
            WlCycle *c = &app->cycles[app->ncycles - 1];
            if (!c->local && c->epoch == 0 && c->t_resume == 0) {
                c->t_resume = now_ms();
            }
        }
        advance(app);
        break;
    case WL_CTL_RTS:
        if (app->pauses_outstanding > 0) {
            return;
        }
        if (!app->qp_rts) {
            wl_log("peer sent RTS before we connected; ignored");
            return;
        }
        app->peer_rts = 1;
        advance(app);
        break;
    case WL_CTL_PAUSE:
        on_peer_pause(app, m.u.pause.kind);
        break;
    case WL_CTL_PAUSED:
        if (app->pauses_outstanding == 0) {
            wl_log("stray PAUSED from the peer; ignored");
            return;
        }
        if (--app->pauses_outstanding == 0) {
            verbs_down(app);
            client_kick(app);
            advance(app);
        }
        break;
    case WL_CTL_DONE: {
        if (app->args.role != WL_ROLE_SERVER) {
            fail(app, "the server sent DONE");
            return;
        }
        WlCtlMsg r = {.type = WL_CTL_RESULT};
        r.u.result.received = app->received;
        r.u.result.duplicates = app->duplicates;
        r.u.result.corrupt = app->corrupt;
        r.u.result.cycles = app->ncycles;
        r.u.result.verbs_errors = app->verbs_errors;
        ctl_send(app, &r);
        app->done_received = 1;
        app->finish = 1;
        break;
    }
    case WL_CTL_RESULT:
        if (app->args.role != WL_ROLE_CLIENT || !app->done_sent) {
            fail(app, "unexpected RESULT from the peer");
            return;
        }
        app->peer_result = m.u.result;
        app->got_result = 1;
        app->finish = 1;
        break;
    case WL_CTL_LAST:
        break;
    }
}

static void on_ctl(App *app)
{
    char tmp[sizeof(app->lb.buf)];
    char line[WL_CTL_LINE_MAX];
    size_t room = sizeof(app->lb.buf) - app->lb.len;
    ssize_t n;

    if (room == 0) { /* cannot happen: a partial line is shorter than WL_CTL_LINE_MAX */
        fail(app, "control connection: input buffer full");
        ctl_close(app);
        return;
    }
    n = read(app->ctl_fd, tmp, room < sizeof(tmp) ? room : sizeof(tmp));

    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) {
            return;
        }
        fail(app, "reading the control connection: %s", strerror(errno));
        ctl_close(app);
        return;
    }
    if (n == 0) {
        if (!app->finish) {
            fail(app, "the peer closed the control connection");
        }
        ctl_close(app);
        return;
    }
    if (wl_linebuf_push(&app->lb, tmp, (size_t)n) < 0) {
        fail(app, "control connection: line longer than %d bytes", WL_CTL_LINE_MAX - 1);
        ctl_close(app);
        return;
    }
    for (;;) {
        int r = wl_linebuf_next(&app->lb, line, sizeof(line));
        if (r == 0) {
            break;
        }
        if (r < 0) {
            fail(app, "control connection: malformed line (%s)", strerror(-r));
            ctl_close(app);
            return;
        }
        on_line(app, line);
        if (app->ctl_fd < 0 || app->failed) {
            return;
        }
    }
}

/* ---- control connection setup ------------------------------------------------------------- */

static int sock_setup(int fd)
{
    int one = 1;
    struct timeval tv = {.tv_sec = 10};
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
        return -errno;
    }
    return 0;
}

static int listen_on(unsigned port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        wl_log("socket: %s", strerror(errno));
        return -1;
    }
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
        wl_log("listening on 0.0.0.0:%u: %s", port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int server_listen(App *app)
{
    app->listen_fd = listen_on(app->args.port);
    if (app->listen_fd < 0) {
        return -1;
    }
    if (app->args.fallback == WL_FALLBACK_TCP) {
        app->fb_listen_fd = listen_on(app->args.port + 1);
        if (app->fb_listen_fd < 0) {
            close(app->listen_fd);
            app->listen_fd = -1;
            return -1;
        }
    }
    return 0;
}

/* Server: the client's fallback connection. */
static void server_accept_fb(App *app)
{
    int fd = accept4(app->fb_listen_fd, NULL, NULL, SOCK_CLOEXEC);
    int r;

    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
            wl_log("accept (fallback): %s", strerror(errno));
        }
        return;
    }
    r = sock_setup(fd);
    if (r < 0) {
        wl_log("setting up the fallback connection: %s", strerror(-r));
        close(fd);
        return;
    }
    wl_log("fallback connection up (port %u)", app->args.port + 1);
    app->fb_fd = fd;
    close(app->fb_listen_fd); /* one client per run */
    app->fb_listen_fd = -1;
}

/* Client: opens the fallback connection once the control connection is up (the server
 * listens on both before it accepts anything, so this does not wait). */
static void client_connect_fb(App *app)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)(app->args.port + 1))};
    int fd;
    int r;

    if (inet_pton(AF_INET, app->args.peer, &sa.sin_addr) != 1) {
        fail(app, "bad peer address '%s'", app->args.peer);
        return;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail(app, "socket: %s", strerror(errno));
        return;
    }
    do {
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    } while (r < 0 && errno == EINTR);
    if (r < 0 || (r = sock_setup(fd)) < 0) {
        int e = r < 0 && errno ? errno : -r;
        fail(app, "cannot open the fallback connection to %s:%u: %s", app->args.peer,
             app->args.port + 1, strerror(e));
        close(fd);
        return;
    }
    app->fb_fd = fd;
    wl_log("fallback connection up (%s:%u)", app->args.peer, app->args.port + 1);
}

static void server_accept(App *app)
{
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    char addr[INET_ADDRSTRLEN] = "?";
    int fd = accept4(app->listen_fd, (struct sockaddr *)&sa, &salen, SOCK_CLOEXEC);

    if (fd < 0) {
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
            wl_log("accept: %s", strerror(errno));
        }
        return;
    }
    inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
    if (app->ctl_fd >= 0) {
        wl_log("refusing a second control connection from %s", addr);
        close(fd);
        return;
    }
    int r = sock_setup(fd);
    if (r < 0) {
        wl_log("setting up the control connection from %s: %s", addr, strerror(-r));
        close(fd);
        return;
    }
    wl_log("control connection from %s", addr);
    app->ctl_fd = fd;
    close(app->listen_fd); /* one client per run */
    app->listen_fd = -1;
}

static void client_connect_done(App *app)
{
    int r = sock_setup(app->ctl_fd);
    int fl;
    if (r == 0) {
        fl = fcntl(app->ctl_fd, F_GETFL);
        if (fl < 0 || fcntl(app->ctl_fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            r = -errno;
        }
    }
    if (r < 0) {
        fail(app, "setting up the control connection: %s", strerror(-r));
        ctl_close(app);
        return;
    }
    app->connecting = 0;
    wl_log("connected to %s:%u", app->args.peer, app->args.port);
    WlCtlMsg h = {.type = WL_CTL_HELLO};
    h.u.hello.version = WL_CTL_VERSION;
    h.u.hello.role = app->args.role;
    ctl_send(app, &h);
    if (app->args.fallback == WL_FALLBACK_TCP && app->fb_fd < 0 && !app->failed) {
        client_connect_fb(app);
    }
}

static void client_connect_retry(App *app, int err)
{
    int64_t now = now_ms();
    ctl_close(app);
    if (now - app->t_start >= WL_CONNECT_WAIT_MS) {
        fail(app, "cannot reach the server at %s:%u within %d s: %s", app->args.peer,
             app->args.port, WL_CONNECT_WAIT_MS / 1000, strerror(err));
        return;
    }
    app->connect_retry_at = now + app->connect_backoff_ms;
    if (app->connect_backoff_ms < 2000) {
        app->connect_backoff_ms *= 2;
    }
}

static void client_connect_start(App *app)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)app->args.port)};
    int fd;

    app->connect_retry_at = 0;
    if (inet_pton(AF_INET, app->args.peer, &sa.sin_addr) != 1) {
        fail(app, "bad peer address '%s'", app->args.peer);
        return;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        fail(app, "socket: %s", strerror(errno));
        return;
    }
    app->ctl_fd = fd;
    app->connecting = 1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        client_connect_done(app);
    } else if (errno != EINPROGRESS) {
        client_connect_retry(app, errno);
    }
}

static void client_connect_ready(App *app)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(app->ctl_fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
        err = errno;
    }
    if (err != 0) {
        client_connect_retry(app, err);
        return;
    }
    client_connect_done(app);
}

/* ---- quiesce and resume (libhotmig callbacks, always run on the main thread) -------------- */

static int do_quiesce(App *app)
{
    int64_t t0 = now_ms();
    int64_t deadline = t0 + WL_PAUSE_WAIT_MS;
    WlCycle *c;

    if (app->local_down) {
        return 0;
    }
    if (app->args.quiesce_delay > 0) {
        /* A process slow to reach a quiescent point (tests: the window of a prepare under
         * way). Traffic goes on meanwhile; the agent is not served until the quiesce ends. */
        int64_t until = t0 + app->args.quiesce_delay;
        wl_log("quiesce requested; holding it up for %u ms (--quiesce-delay)",
               app->args.quiesce_delay);
        for (int64_t now = now_ms(); now < until && !app->failed; now = now_ms()) {
            loop_once(app, until - now, 0);
        }
        t0 = now_ms();
        deadline = t0 + WL_PAUSE_WAIT_MS;
    }
    app->local_down = 1; /* from now on advance() keeps us down */
    c = cycle_new(app, 1, WL_PAUSE_QUIESCE);
    if (!c) {
        verbs_down(app);
        return -ENOMEM;
    }
    if (ctl_up(app)) {
        WlCtlMsg m = {.type = WL_CTL_PAUSE};
        m.u.pause.cycle = c->number;
        m.u.pause.kind = WL_PAUSE_QUIESCE;
        app->have_peer_qp = 0;
        app->connected = 0; /* no new sends, no echoes */
        ctl_send(app, &m);
        app->pauses_outstanding++;
        while (app->pauses_outstanding > 0 && app->ctl_fd >= 0 && !app->failed) {
            int64_t now = now_ms();
            if (now >= deadline) {
                wl_log("the peer did not answer PAUSE within %d s; closing the device anyway",
                       WL_PAUSE_WAIT_MS / 1000);
                break;
            }
            loop_once(app, deadline - now, 0);
        }
    }
    verbs_down(app);
    client_kick(app); /* our QP is gone: the fallback takes over (if any) */
    emit("{\"event\":\"quiesced\",\"cycle\":%" PRIu64 ",\"side\":\"local\",\"kind\":\"quiesce\","
         "\"ms\":%" PRId64 "}",
         c->number, now_ms() - t0);
    return 0;
}

/* RoCE: the RTR transition resolves the peer's MAC and, when its ARP is not done, waits up to
 * a second in the kernel (rdma_resolve_ip(): an ARP reply that comes before the request is
 * queued wakes nobody). A datagram to the peer's IPv4 address now, before the device is
 * opened, has the neighbour resolved by the time the QP connects. The peer's QP (its GID)
 * came right after its PAUSED. Best effort: nothing is reported. */
static void prime_peer_neighbour(const App *app)
{
    static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(9)}; /* discard */
    int fd;

    if (!app->have_peer_qp || memcmp(app->peer_qp.gid, v4_prefix, sizeof(v4_prefix)) != 0) {
        return;
    }
    memcpy(&sa.sin_addr, app->peer_qp.gid + 12, 4);
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        (void)send(fd, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    close(fd);
}

static int do_resume(App *app, const char *device)
{
    int64_t t0 = now_ms();
    int64_t deadline = t0 + WL_DEVICE_WAIT_MS;
    int64_t backoff = 10;
    const char *want = device && *device ? device : NULL;
    WlVerbs *v = NULL;
    int r;

    if (want && !wl_dev_name_valid(want)) {
        wl_log("RESUME names an invalid device '%.64s'", want);
        return -EINVAL;
    }
    if (!app->local_down) {
        wl_log("RESUME while not quiesced; nothing to do");
        return 0;
    }
    for (size_t i = 0; i < app->ncycles; i++) {
        if (app->cycles[i].local && app->cycles[i].epoch == 0) {
            app->cycles[i].t_resume = t0;
        }
    }
    prime_peer_neighbour(app);
    /* The agent names the device once a port of it is ACTIVE, so the first try normally opens
     * it (once: the open is the check). When it is not usable yet (no ACTIVE port, no IPv4
     * GID yet): bounded retry with backoff, serving the control connection meanwhile. */
    while ((r = wl_verbs_open(want, app->args.size, &v)) == -ENODEV || r == -EADDRNOTAVAIL) {
        int64_t now = now_ms();
        if (now >= deadline || app->failed) {
            break;
        }
        loop_once(app, backoff < deadline - now ? backoff : deadline - now, 0);
        if (backoff < 200) {
            backoff *= 2;
        }
    }
    app->local_down = 0;
    if (r < 0) {
        wl_log("RESUME: no usable RDMA device '%s' within %d s (%s)", want ? want : "(any)",
               WL_DEVICE_WAIT_MS / 1000, r == -ENODEV ? "no ACTIVE port" : strerror(-r));
        snprintf(app->dev, sizeof(app->dev), "%s", want ? want : "");
        advance(app); /* keeps waiting in the background until its own deadline */
        return r;
    }
    app->v = v;
    app->dev_wait_since = 0;
    app->dev_retry_at = 0;
    snprintf(app->dev, sizeof(app->dev), "%s", wl_verbs_device_name(v));
    advance(app); /* sends our QP; connects when the peer's is here */
    return 0;
}

#ifdef HM_WL_HAVE_HOTMIG
/* Threaded mode: runs on libhotmig's thread; hands the request to the main thread. */
static int agent_request(App *app, ReqType type, const char *device)
{
    uint64_t one = 1;
    int r;

    pthread_mutex_lock(&app->req_lock);
    while (app->req_type != REQ_NONE && !app->req_shutdown) {
        pthread_cond_wait(&app->req_cond, &app->req_lock);
    }
    if (app->req_shutdown) {
        pthread_mutex_unlock(&app->req_lock);
        return -ESHUTDOWN;
    }
    app->req_type = type;
    app->req_has_dev = device != NULL;
    snprintf(app->req_dev, sizeof(app->req_dev), "%s", device ? device : "");
    app->req_done = 0;
    if (write(app->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one)) {
        r = -errno;
        app->req_type = REQ_NONE;
        pthread_cond_broadcast(&app->req_cond);
        pthread_mutex_unlock(&app->req_lock);
        return r < 0 ? r : -EIO;
    }
    while (!app->req_done && !app->req_shutdown) {
        pthread_cond_wait(&app->req_cond, &app->req_lock);
    }
    r = app->req_done ? app->req_result : -ESHUTDOWN;
    app->req_type = REQ_NONE;
    app->req_done = 0;
    pthread_cond_broadcast(&app->req_cond);
    pthread_mutex_unlock(&app->req_lock);
    return r;
}

static int cb_quiesce(void *opaque)
{
    App *app = opaque;
    if (app->args.mode == WL_MODE_THREADED) {
        return agent_request(app, REQ_QUIESCE, NULL);
    }
    return do_quiesce(app);
}

static int cb_resume(const char *device, void *opaque)
{
    App *app = opaque;
    if (app->args.mode == WL_MODE_THREADED) {
        return agent_request(app, REQ_RESUME, device);
    }
    return do_resume(app, device);
}

/* Main thread: the request handed over by agent_request(). */
static void on_wake(App *app)
{
    uint64_t val;
    ReqType type;
    char dev[WL_DEV_NAME_MAX];
    int has_dev, r;

    if (read(app->wake_fd, &val, sizeof(val)) < 0 && errno != EAGAIN) {
        fail(app, "reading the wake-up eventfd: %s", strerror(errno));
        return;
    }
    pthread_mutex_lock(&app->req_lock);
    type = app->req_type;
    has_dev = app->req_has_dev;
    memcpy(dev, app->req_dev, sizeof(dev));
    pthread_mutex_unlock(&app->req_lock);
    if (type == REQ_NONE) {
        return;
    }
    r = type == REQ_QUIESCE ? do_quiesce(app) : do_resume(app, has_dev ? dev : NULL);
    pthread_mutex_lock(&app->req_lock);
    app->req_result = r;
    app->req_done = 1;
    pthread_cond_broadcast(&app->req_cond);
    pthread_mutex_unlock(&app->req_lock);
}

static void on_agent(App *app)
{
    int r;
    app->in_dispatch = 1;
    r = hotmig_client_dispatch(app->hm);
    app->in_dispatch = 0;
    if (r < 0) {
        wl_log(
            "lost the connection to hotmig-agent (%s); a migration now looks like a vanished device",
            strerror(-r));
        hotmig_client_free(app->hm);
        app->hm = NULL;
    }
}
#endif

/* ---- main loop ---------------------------------------------------------------------------- */

/* SIGUSR1: the client stops as after its last cycle (drains, sends DONE, prints its result). */
static volatile sig_atomic_t stop_requested;

static void on_sigusr1(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void stop_client(App *app, const char *why)
{
    if (app->stopping) {
        return;
    }
    wl_log("stopping: %s", why);
    app->stopping = 1;
    app->drain_deadline = now_ms() + WL_DRAIN_WAIT_MS;
}

static void run_timers(App *app)
{
    int64_t now = now_ms();

    if (app->dev_retry_at && now >= app->dev_retry_at) {
        app->dev_retry_at = 0;
        advance(app);
    }
    if (app->connect_retry_at && now >= app->connect_retry_at && !app->failed) {
        client_connect_start(app);
    }
    if (now >= app->progress_at) {
        app->progress_at = now + WL_PROGRESS_MS;
        if (app->args.role == WL_ROLE_CLIENT) {
            emit("{\"event\":\"progress\",\"sent\":%" PRIu64 ",\"received\":%" PRIu64
                 ",\"cycles\":%zu,\"connected\":%s}",
                 app->sent, app->received, app->ncycles, app->connected ? "true" : "false");
        } else {
            emit("{\"event\":\"progress\",\"received\":%" PRIu64 ",\"duplicates\":%" PRIu64
                 ",\"cycles\":%zu,\"connected\":%s}",
                 app->received, app->duplicates, app->ncycles, app->connected ? "true" : "false");
        }
    }
    if (app->finish) {
        return;
    }
    client_kick(app); /* idempotent; picks the path */
    if (app->args.role == WL_ROLE_SERVER) {
        if (now - app->t_start >= (int64_t)app->args.max_seconds * 1000 + WL_SERVER_GRACE_MS) {
            fail(app, "no DONE from the client within max-seconds + %d s",
                 WL_SERVER_GRACE_MS / 1000);
        }
        return;
    }
    if (!app->stopping) {
        if (stop_requested) {
            stop_client(app, "asked to (SIGUSR1)");
        }
        if (app->args.cycles && cycles_completed(app) >= app->args.cycles) {
            if (!app->tail_at) {
                app->tail_at = now + (int64_t)app->args.tail * 1000;
            }
            if (now >= app->tail_at) {
                stop_client(app, "all cycles done and the tail elapsed");
            }
        }
        if (now - app->t_start >= (int64_t)app->args.max_seconds * 1000) {
            stop_client(app, "max-seconds reached");
        }
    }
    if (app->stopping && !app->done_sent) {
        if (!app->inflight || now >= app->drain_deadline) {
            if (app->inflight) {
                wl_log("the echo of message %" PRIu64 " did not come within %d s",
                       app->inflight_seq, WL_DRAIN_WAIT_MS / 1000);
            }
            if (!ctl_up(app)) {
                fail(app, "no control connection to send DONE on");
                return;
            }
            ctl_send_simple(app, WL_CTL_DONE);
            app->done_sent = 1;
            app->result_deadline = now + WL_RESULT_WAIT_MS;
        }
    } else if (app->done_sent && !app->got_result && now >= app->result_deadline) {
        fail(app, "no RESULT from the server within %d s", WL_RESULT_WAIT_MS / 1000);
    }
}

/* One poll() round. @top: also serve the agent (not while inside a quiesce/resume). */
static int loop_once(App *app, int64_t max_wait_ms, int top)
{
    struct pollfd pfd[8];
    int n = 0, i_listen = -1, i_ctl = -1, i_cq = -1, i_async = -1, i_agent = -1;
    int i_fb_listen = -1, i_fb = -1;
    int fb_fd = app->fb_fd;
    WlVerbs *v = app->v;
    int ctl_fd = app->ctl_fd;
    int64_t now = now_ms();
    int64_t timeout = max_wait_ms < WL_TICK_MS ? max_wait_ms : WL_TICK_MS;

    if (app->listen_fd >= 0) {
        pfd[i_listen = n++] = (struct pollfd){.fd = app->listen_fd, .events = POLLIN};
    }
    if (ctl_fd >= 0) {
        pfd[i_ctl = n++] =
            (struct pollfd){.fd = ctl_fd, .events = app->connecting ? POLLOUT : POLLIN};
    }
    if (app->fb_listen_fd >= 0) {
        pfd[i_fb_listen = n++] = (struct pollfd){.fd = app->fb_listen_fd, .events = POLLIN};
    }
    if (fb_fd >= 0) {
        pfd[i_fb = n++] = (struct pollfd){.fd = fb_fd, .events = POLLIN};
    }
    if (v) {
        pfd[i_cq = n++] = (struct pollfd){.fd = wl_verbs_cq_fd(v), .events = POLLIN};
        pfd[i_async = n++] = (struct pollfd){.fd = wl_verbs_async_fd(v), .events = POLLIN};
    }
#ifdef HM_WL_HAVE_HOTMIG
    if (top && app->hm && app->args.mode == WL_MODE_LAZY) {
        pfd[i_agent = n++] = (struct pollfd){.fd = hotmig_client_get_fd(app->hm), .events = POLLIN};
    } else if (top && app->wake_fd >= 0) {
        pfd[i_agent = n++] = (struct pollfd){.fd = app->wake_fd, .events = POLLIN};
    }
#endif
    if (app->dev_retry_at && app->dev_retry_at - now < timeout) {
        timeout = app->dev_retry_at - now;
    }
    if (app->connect_retry_at && app->connect_retry_at - now < timeout) {
        timeout = app->connect_retry_at - now;
    }
    if (timeout < 0) {
        timeout = 0;
    }
    int r = poll(pfd, (nfds_t)n, (int)timeout);
    if (r < 0) {
        if (errno == EINTR) {
            return 0;
        }
        fail(app, "poll: %s", strerror(errno));
        return -1;
    }
    if (i_async >= 0 && pfd[i_async].revents && app->v == v) {
        on_async(app);
    }
    if (i_cq >= 0 && pfd[i_cq].revents && app->v == v) {
        on_cq(app);
    }
    if (i_ctl >= 0 && pfd[i_ctl].revents && app->ctl_fd == ctl_fd) {
        if (app->connecting) {
            client_connect_ready(app);
        } else {
            on_ctl(app);
        }
    }
    if (i_listen >= 0 && pfd[i_listen].revents && app->listen_fd >= 0) {
        server_accept(app);
    }
    if (i_fb_listen >= 0 && pfd[i_fb_listen].revents && app->fb_listen_fd >= 0) {
        server_accept_fb(app);
    }
    if (i_fb >= 0 && pfd[i_fb].revents && app->fb_fd == fb_fd) {
        on_fb(app);
    }
#ifdef HM_WL_HAVE_HOTMIG
    if (i_agent >= 0 && pfd[i_agent].revents) {
        if (app->args.mode == WL_MODE_LAZY) {
            if (app->hm) {
                on_agent(app);
            }
        } else {
            on_wake(app);
        }
    }
#else
    (void)i_agent;
    (void)top;
#endif
    run_timers(app);
    return 0;
}

/* ---- result ------------------------------------------------------------------------------- */

static int print_result(App *app)
{
    char cyc[64 * 1024];
    size_t o = 0;
    int all_delivered = 1;
    char err[600];
    WlRole other = app->args.role == WL_ROLE_CLIENT ? WL_ROLE_SERVER : WL_ROLE_CLIENT;

    cyc[0] = '\0';
    for (size_t i = 0; i < app->ncycles; i++) {
        const WlCycle *c = &app->cycles[i];
        if (c->delivered_after == 0) {
            all_delivered = 0;
        }
        int w =
            snprintf(cyc + o, sizeof(cyc) - o,
                     "%s{\"cycle\":%" PRIu64 ",\"migrated\":\"%s\",\"kind\":\"%s\","
                     "\"device\":\"%s\",\"resumed\":%s,\"delivered_after\":%" PRIu64
                     ",\"delivered_tcp\":%" PRIu64 ",\"blackout_ms\":%" PRId64
                     ",\"blackout_at_ms\":%" PRId64 "}",
                     i ? "," : "", c->number, wl_role_to_string(c->local ? app->args.role : other),
                     wl_pause_kind_to_string(c->kind), c->device, c->epoch ? "true" : "false",
                     c->delivered_after, c->delivered_tcp, c->blackout, c->blackout_at);
        if (w < 0 || (size_t)w >= sizeof(cyc) - o) {
            o = (size_t)snprintf(cyc, sizeof(cyc), "\"truncated\"");
            break;
        }
        o += (size_t)w;
    }
    json_escape(app->error, err, sizeof(err));
    double secs = (double)(now_ms() - app->t_start) / 1000.0;

    if (app->args.role == WL_ROLE_CLIENT) {
        uint64_t lost = app->sent - app->echoes;
        uint64_t corrupt = app->corrupt + app->peer_result.corrupt;
        int enough = app->args.cycles == 0 || cycles_completed(app) >= app->args.cycles;
        int ok =
            !app->failed && app->got_result && lost == 0 && corrupt == 0 && all_delivered && enough;
        if (!enough && !app->failed) {
            snprintf(err, sizeof(err), "only %zu of %u cycles completed", cycles_completed(app),
                     app->args.cycles);
        }
        emit("{\"event\":\"result\",\"role\":\"client\",\"sent\":%" PRIu64 ",\"received\":%" PRIu64
             ",\"lost\":%" PRIu64 ",\"corrupt\":%" PRIu64 ",\"longest_gap_ms\":%" PRId64
             ",\"blackout_ms\":%" PRId64 ",\"fallback\":\"%s\",\"tcp_sent\":%" PRIu64
             ",\"tcp_delivered\":%" PRIu64 ",\"cycles\":[%s],\"retransmits\":%" PRIu64
             ",\"server_received\":%" PRIu64 ",\"server_duplicates\":%" PRIu64
             ",\"server_corrupt\":%" PRIu64 ",\"verbs_errors\":%" PRIu64 ",\"resets\":%" PRIu64
             ",\"size\":%u,\"mode\":\"%s\",\"seconds\":%.1f,\"ok\":%s%s%s%s}",
             app->sent, app->received, lost, corrupt, app->longest_gap, app->longest_gap,
             wl_fallback_to_string(app->args.fallback), app->tcp_sent, app->tcp_delivered, cyc,
             app->retransmits, app->peer_result.received, app->peer_result.duplicates,
             app->peer_result.corrupt, app->verbs_errors, app->resets, app->args.size,
             wl_mode_to_string(app->args.mode), secs, ok ? "true" : "false",
             err[0] ? ",\"error\":\"" : "", err, err[0] ? "\"" : "");
        return ok;
    }
    int ok = !app->failed && app->done_received && app->corrupt == 0 && all_delivered;
    emit("{\"event\":\"result\",\"role\":\"server\",\"received\":%" PRIu64
         ",\"tcp_delivered\":%" PRIu64 ",\"duplicates\":%" PRIu64 ",\"corrupt\":%" PRIu64
         ",\"cycles\":[%s],\"verbs_errors\":%" PRIu64 ",\"resets\":%" PRIu64
         ",\"seconds\":%.1f,\"ok\":%s%s%s%s}",
         app->received, app->tcp_delivered, app->duplicates, app->corrupt, cyc, app->verbs_errors,
         app->resets, secs, ok ? "true" : "false", err[0] ? ",\"error\":\"" : "", err,
         err[0] ? "\"" : "");
    return ok;
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fputs(
        "usage: hm-pingpong --role server|client [--peer IP] [--port 7471] [--mode lazy|threaded]\n"
        "                   [--fallback none|tcp] [--size 4096] [--cycles N] [--tail SEC]\n"
        "                   [--max-seconds SEC] [--quiesce-delay MS] [--no-agent]\n"
        "       (also one comma-separated argument: --role,client,--peer,198.51.100.2)\n",
        f);
}

static int agent_register(App *app)
{
#ifdef HM_WL_HAVE_HOTMIG
    char name[64];
    snprintf(name, sizeof(name), "hm-pingpong-%s", wl_role_to_string(app->args.role));
    int64_t deadline = now_ms() + WL_AGENT_WAIT_MS;
    int backoff = 20;

    /* The agent may still be starting (the guest's init starts both at once): retry while
     * its socket is missing or refuses, bounded. */
    for (;;) {
        app->hm = hotmig_client_new(
            name, app->args.mode == WL_MODE_THREADED ? HOTMIG_MODE_THREADED : HOTMIG_MODE_LAZY,
            cb_quiesce, cb_resume, app);
        if (app->hm || (errno != ENOENT && errno != ECONNREFUSED) ||
            now_ms() + backoff >= deadline) {
            break;
        }
        if (poll(NULL, 0, backoff) < 0 && errno != EINTR) {
            break;
        }
        if (backoff < 500) {
            backoff *= 2;
        }
    }
    if (!app->hm) {
        const char *sock = getenv(HOTMIG_AGENT_SOCKET_ENV);
        int e = errno;
        wl_log(
            "cannot register with hotmig-agent at '%s' (tried for up to %d s): %s (use --no-agent to run without)",
            sock ? sock : HOTMIG_AGENT_SOCKET_DEFAULT, WL_AGENT_WAIT_MS / 1000, strerror(e));
        return -1;
    }
    wl_log("registered with hotmig-agent as '%s' (%s mode)", name,
           wl_mode_to_string(app->args.mode));
    return 0;
#else
    wl_log("built without libhotmig: only --no-agent runs are possible");
    return -1;
#endif
}

static void agent_unregister(App *app)
{
    pthread_mutex_lock(&app->req_lock);
    app->req_shutdown = 1;
    pthread_cond_broadcast(&app->req_cond);
    pthread_mutex_unlock(&app->req_lock);
#ifdef HM_WL_HAVE_HOTMIG
    hotmig_client_free(app->hm);
    app->hm = NULL;
#endif
}

int main(int argc, char **argv)
{
    static App app_storage;
    App *app = &app_storage;
    char err[256];
    int ok;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        wl_log("cannot ignore SIGPIPE: %s", strerror(errno));
        return 2;
    }
    {
        struct sigaction sa = {.sa_handler = on_sigusr1};

        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGUSR1, &sa, NULL) < 0) {
            wl_log("cannot handle SIGUSR1: %s", strerror(errno));
            return 2;
        }
    }
    if (wl_args_parse(argc, argv, &app->args, err, sizeof(err)) < 0) {
        wl_log("%s", err);
        usage(stderr);
        return 2;
    }
    if (app->args.help) {
        usage(stdout);
        return 0;
    }
    app->t_start = now_ms();
    app->listen_fd = -1;
    app->ctl_fd = -1;
    app->wake_fd = -1;
    app->fb_listen_fd = -1;
    app->fb_fd = -1;
    app->connect_backoff_ms = 100;
    app->progress_at = app->t_start + WL_PROGRESS_MS;
    pthread_mutex_init(&app->req_lock, NULL);
    pthread_cond_init(&app->req_cond, NULL);

    if (app->args.mode == WL_MODE_THREADED && !app->args.no_agent) {
        app->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (app->wake_fd < 0) {
            wl_log("eventfd: %s", strerror(errno));
            return 2;
        }
    }
    if (app->args.fallback == WL_FALLBACK_TCP) {
        app->fb_rx = malloc(app->args.size);
        app->fb_tx = malloc(app->args.size);
        if (!app->fb_rx || !app->fb_tx) {
            wl_log("out of memory for the fallback buffers");
            return 2;
        }
    }
    if (app->args.role == WL_ROLE_SERVER && server_listen(app) < 0) {
        return 2;
    }
    if (!app->args.no_agent && agent_register(app) < 0) {
        if (app->listen_fd >= 0) {
            close(app->listen_fd);
        }
        if (app->fb_listen_fd >= 0) {
            close(app->fb_listen_fd);
        }
        return 2;
    }
    wl_log("%s, %s mode, fallback %s, %u-byte messages, port %u%s%s",
           wl_role_to_string(app->args.role), wl_mode_to_string(app->args.mode),
           wl_fallback_to_string(app->args.fallback), app->args.size, app->args.port,
           app->args.role == WL_ROLE_CLIENT ? ", server " : "",
           app->args.role == WL_ROLE_CLIENT ? app->args.peer : "");
    advance(app); /* open the device */
    if (app->args.role == WL_ROLE_CLIENT) {
        client_connect_start(app);
    }
    while (!app->finish) {
        loop_once(app, WL_TICK_MS, 1);
    }

    agent_unregister(app);
    ok = print_result(app);
    verbs_down(app);
    ctl_close(app);
    fb_close(app);
    if (app->listen_fd >= 0) {
        close(app->listen_fd);
    }
    if (app->fb_listen_fd >= 0) {
        close(app->fb_listen_fd);
    }
    free(app->fb_rx);
    free(app->fb_tx);
    if (app->wake_fd >= 0) {
        close(app->wake_fd);
    }
    free(app->cycles);
    pthread_cond_destroy(&app->req_cond);
    pthread_mutex_destroy(&app->req_lock);
    return ok ? 0 : 1;
}
