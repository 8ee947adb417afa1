/* libhotmig-verbs: the peer protocol as a trust boundary (issue 28, findings 1, 2 and 4;
 * docs/security.md, "The verbs peer protocol"). The layer's sources are linked in, libibverbs
 * below them faked through hv_real. Each request about a QP is taken only from the peer that QP
 * is connected to (the sender's GID from its authenticated frame, not a QPN alone), the tables
 * a peer fills are bounded, a SUSPEND and a UDHOLD end; and on a socket pair, a layer with
 * another key (or none) is refused by the channel, which names why. */
#include "hv.h"
#include "hv-auth.h"

#include <errno.h>
#include <pthread.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const uint8_t own_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
static const uint8_t peer_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2};
static const uint8_t evil_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 3};
static int n_modify;

static int fake_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
    (void)c;
    (void)port;
    memset(a, 0, sizeof(struct ibv_port_attr));
    return 0;
}

static int fake_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
    (void)c;
    (void)port;
    (void)index;
    memcpy(gid->raw, own_gid, 16);
    return 0;
}

static int fake_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    (void)qp;
    (void)a;
    (void)mask;
    n_modify++;
    return 0;
}

static int fake_destroy_qp(struct ibv_qp *qp)
{
    (void)qp;
    return 0;
}

static struct ibv_context fake_phys_ctx;
static struct ibv_qp fake_phys_qp = {.qp_num = 77};
static HvContext *ctx;

/* An RC QP (virtual 18) connected to the peer's QP 17 at peer_gid, as the program made it. */
static HvQp *rc_qp(void)
{
    HvQp *qp = calloc(1, sizeof(*qp));

    assert_non_null(qp);
    pthread_mutex_init(&qp->lock, NULL);
    qp->pd = ctx->pds;
    qp->phys = &fake_phys_qp;
    qp->pub.qp_num = 18;
    qp->init.qp_type = IBV_QPT_RC;
    qp->init.cap.max_send_wr = 4;
    qp->init.cap.max_send_sge = 1;
    qp->m_init = IBV_QP_STATE | IBV_QP_PORT;
    qp->a_init.port_num = 1;
    qp->m_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    qp->a_rtr.qp_state = IBV_QPS_RTR;
    qp->a_rtr.dest_qp_num = 17;
    qp->a_rtr.ah_attr.port_num = 1;
    qp->a_rtr.ah_attr.is_global = 1;
    memcpy(qp->a_rtr.ah_attr.grh.dgid.raw, peer_gid, 16);
    memcpy(qp->peer_gid.raw, peer_gid, 16);
    qp->peer_known = 1;
    qp->state = IBV_QPS_RTS;
    qp->peer_vqpn = 17;
    qp->peer_pqpn = 17;
    return qp;
}

/* A UD QP (virtual 19) that sent to peer_gid. */
static HvQp *ud_qp(void)
{
    HvQp *qp = rc_qp();
    HvUdEntry *sent;
    int added;

    qp->pub.qp_num = 19;
    qp->init.qp_type = IBV_QPT_UD;
    qp->m_rtr = 0;
    qp->state = IBV_QPS_RTS;
    sent = hv_ud_set_add(&qp->ud_sent, peer_gid, 0, &added);
    assert_non_null(sent);
    sent->n = 5;
    return qp;
}

static void add_qp(HvQp *qp)
{
    qp->next = ctx->qps;
    ctx->qps = qp;
    assert_int_equal(hv_map_put(&ctx->vqpn, qp->pub.qp_num, (uintptr_t)qp), 0);
}

static int setup(void **state)
{
    (void)state;
    hv_real.r_ibv_query_port = fake_query_port;
    hv_real.r_ibv_query_gid = fake_query_gid;
    hv_real.r_ibv_modify_qp = fake_modify_qp;
    hv_real.r_ibv_destroy_qp = fake_destroy_qp;
    n_modify = 0;
    ctx = calloc(1, sizeof(*ctx));
    assert_non_null(ctx);
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->phys = &fake_phys_ctx;
    ctx->pds = calloc(1, sizeof(*ctx->pds));
    assert_non_null(ctx->pds);
    ctx->pds->ctx = ctx;
    pthread_mutex_lock(&hv.lock);
    hv.ctxs = ctx;
    pthread_mutex_unlock(&hv.lock);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pthread_mutex_lock(&hv.lock);
    hv.ctxs = NULL;
    pthread_mutex_unlock(&hv.lock);
    for (HvQp *qp = ctx->qps, *next; qp; qp = next) {
        next = qp->next;
        hv_sendq_free(&qp->queued);
        hv_map_clear(&qp->peer_rkeys);
        hv_ud_set_free(&qp->ud_sent);
        free(qp);
    }
    hv_map_clear(&ctx->vqpn);
    free(ctx->pds);
    free(ctx);
    return 0;
}

static HvMsg *msg(HvMsgType type, uint32_t target, uint32_t sender, const uint8_t gid[16])
{
    HvMsg *m = calloc(1, sizeof(*m));

    assert_non_null(m);
    m->type = type;
    m->target = target;
    m->sender = sender;
    if (gid)
        memcpy(m->gid, gid, 16);
    return m;
}

/* Finding 1: the lab's attack. A RECONNECT naming the victim's peer QPN (17, found by a ROUTE
 * scan) but sent from another GID changed the QP's peer; now it is refused and nothing
 * changes. From the real peer it is applied. */
static void test_reconnect_only_from_peer(void **state)
{
    HvQp *qp = rc_qp();
    HvMsg *m = msg(HV_MSG_RECONNECT, 18, 17, evil_gid), rep = {0};

    (void)state;
    add_qp(qp);
    m->sender_pqpn = 99;
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -ENOENT);
    assert_int_equal(rep.type, HV_MSG_ERROR);
    assert_int_equal(n_modify, 0);
    assert_int_equal(qp->peer_pqpn, 17);
    assert_memory_equal(qp->a_rtr.ah_attr.grh.dgid.raw, peer_gid, 16);
    /* the attacker's frame claims the peer's GID, its message its own address: refused */
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), -ENOENT);
    assert_int_equal(n_modify, 0);
    /* the peer, at its own address */
    memcpy(m->gid, peer_gid, 16);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_RECONNECTED);
    assert_int_equal(qp->peer_pqpn, 99);
    free(m);
}

/* The standby path (issue 30): a SWITCH moves a connection onto another device, so it is taken
 * only from the connected peer (its identity from the frame; the message's GID is where its
 * standby QP is, not who it is); a QP that cannot follow (an SRQ, UD, this process moving
 * too, no standby device from the agent) is refused and left as it was. The messages round
 * trip through the parser. */
static void test_switch_only_from_peer_and_refusals(void **state)
{
    HvQp *qp = rc_qp();
    HvMsg *m = msg(HV_MSG_SWITCH, 18, 17, evil_gid), rep = {0}, *back = calloc(1, sizeof(*back));
    char line[512];
    int n;

    (void)state;
    assert_non_null(back);
    add_qp(qp);
    m->sender_pqpn = 99;
    m->nkeys = 1;
    m->keys[0] = (HvKeyPair){0x1234, 0x5678};
    /* the wire: SWITCH with the mover's standby GID, SWITCHED with ours and our keys */
    n = hv_proto_format(m, line, sizeof(line));
    assert_true(n > 0);
    assert_int_equal(hv_proto_parse(line, (size_t)n - 1, back), 0);
    assert_int_equal(back->type, HV_MSG_SWITCH);
    assert_int_equal(back->sender_pqpn, 99);
    assert_memory_equal(back->gid, evil_gid, 16);
    assert_int_equal(back->nkeys, 1);
    back->type = HV_MSG_SWITCHED;
    back->target = 123;
    n = hv_proto_format(back, line, sizeof(line));
    assert_true(n > 0);
    assert_int_equal(hv_proto_parse(line, (size_t)n - 1, back), 0);
    assert_int_equal(back->type, HV_MSG_SWITCHED);
    assert_int_equal(back->target, 123);
    assert_int_equal(back->keys[0].p, 0x5678);
    assert_int_equal(hv_proto_parse("SWITCHED 123", 12, back), -EINVAL);
    /* from anyone but the peer: refused, nothing changed */
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -ENOENT);
    assert_int_equal(rep.type, HV_MSG_ERROR);
    assert_int_equal(n_modify, 0);
    assert_false(qp->on_sb);
    /* this process moves too: the QP stays where it is (the mover keeps it paused) */
    pthread_mutex_lock(&hv.lock);
    hv.swapping = 1;
    pthread_mutex_unlock(&hv.lock);
    memset(&rep, 0, sizeof(rep));
    assert_true(hv_peer_handle(m, peer_gid, &rep) < 0);
    assert_int_equal(rep.type, HV_MSG_ERROR);
    assert_non_null(strstr(rep.text, "moves too"));
    pthread_mutex_lock(&hv.lock);
    hv.swapping = 0;
    pthread_mutex_unlock(&hv.lock);
    /* no agent to lease a standby device from: refused, the QP still on its device */
    setenv("HOTMIG_AGENT_SOCKET", "/nonexistent/hotmig-test-agent.sock", 1);
    memset(&rep, 0, sizeof(rep));
    assert_true(hv_peer_handle(m, peer_gid, &rep) < 0);
    assert_int_equal(rep.type, HV_MSG_ERROR);
    assert_null(ctx->sb);
    assert_false(qp->on_sb);
    assert_int_equal(n_modify, 0);
    assert_int_equal(qp->peer_pqpn, 17);
    /* a UD QP does not switch (an SRQ's QPs do: its twin, hv-standby.c) */
    qp->init.qp_type = IBV_QPT_UD;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), -EOPNOTSUPP);
    assert_non_null(strstr(rep.text, "is not RC or UC"));
    assert_false(qp->on_sb);
    qp->init.qp_type = IBV_QPT_RC;
    /* a QP whose SRQ also serves a connection that stays (UCX's loopback endpoint: its peer
     * is this process) is refused, nothing changed; one whose SRQ's other QPs all go to the
     * same mover is not refused for it */
    {
        HvSrq *srq = calloc(1, sizeof(HvSrq));
        HvQp *other = rc_qp();

        assert_non_null(srq);
        other->pub.qp_num = 19;
        memset(other->peer_gid.raw, 0x42, 16);
        qp->srq = other->srq = srq;
        add_qp(other);
        memset(&rep, 0, sizeof(rep));
        assert_int_equal(hv_peer_handle(m, peer_gid, &rep), -EOPNOTSUPP);
        assert_int_equal(rep.type, HV_MSG_ERROR);
        assert_non_null(strstr(rep.text, "shares its receive queue with QP 19"));
        assert_false(qp->on_sb);
        assert_null(srq->sb);
        memcpy(other->peer_gid.raw, peer_gid, 16); /* to the same mover: it follows later */
        memset(&rep, 0, sizeof(rep));
        assert_true(hv_peer_handle(m, peer_gid, &rep) < 0); /* no agent: refused for that */
        assert_null(strstr(rep.text, "shares its receive queue"));
        ctx->qps = other->next;
        hv_map_del(&ctx->vqpn, 19);
        free(other);
        qp->srq = NULL;
        free(srq);
    }
    unsetenv("HOTMIG_AGENT_SOCKET");
    free(back);
    free(m);
}

/* SUSPEND from anyone but the peer is refused (it paused the victim's QP); from the peer it
 * pauses the QP with a deadline: a peer that never reconnects leaves the QP failed, not
 * paused for ever (finding 4). */
static void test_suspend_only_from_peer_and_ends(void **state)
{
    HvQp *qp = rc_qp();
    HvMsg *m = msg(HV_MSG_SUSPEND, 18, 17, NULL), rep = {0};

    (void)state;
    add_qp(qp);
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -ENOENT);
    assert_false(qp->paused);
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_SUSPENDED);
    assert_true(qp->paused);
    assert_true(qp->suspend_until > hv_now_ms());
    /* the mover died: past the deadline the next post finds the QP failed */
    qp->suspend_until = hv_now_ms() - 1;
    pthread_mutex_lock(&qp->lock);
    assert_int_equal(hv_qp_await_expired(qp), 1);
    pthread_mutex_unlock(&qp->lock);
    assert_false(qp->paused);
    assert_int_equal(qp->state, IBV_QPS_ERR);
    assert_int_equal(qp->suspend_until, 0);
    free(m);
}

/* Finding 2: KEYMAP only from the peer, and bounded: it grew peer_rkeys without limit. */
static void test_keymap_only_from_peer_bounded(void **state)
{
    HvQp *qp = rc_qp();
    HvMsg *m = msg(HV_MSG_KEYMAP, 18, 17, NULL), rep = {0};
    uint32_t k = 1;

    (void)state;
    add_qp(qp);
    m->nkeys = HV_PROTO_KEYS_MAX;
    for (uint32_t i = 0; i < m->nkeys; i++)
        m->keys[i] = (HvKeyPair){i + 1, i + 1000};
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -ENOENT);
    assert_int_equal(qp->peer_rkeys.n, 0);
    for (;;) {
        for (uint32_t i = 0; i < m->nkeys; i++)
            m->keys[i] = (HvKeyPair){k++, 7};
        memset(&rep, 0, sizeof(rep));
        if (hv_peer_handle(m, peer_gid, &rep) != 0)
            break;
        assert_int_equal(rep.type, HV_MSG_KEYMAPPED);
        assert_true(k < 100000);
    }
    assert_int_equal(rep.type, HV_MSG_ERROR);
    assert_true(qp->peer_rkeys.n <= 4096);
    assert_true(qp->peer_rkeys.n >= 4096 - HV_PROTO_KEYS_MAX);
    free(m);
}

/* Finding 2: LOOKUP of a connected QP answers only its peer; a QP not connected yet answers
 * any layer of the job (its wire-up). */
static void test_lookup(void **state)
{
    HvQp *qp = rc_qp();
    HvMsg *m = msg(HV_MSG_LOOKUP, 18, 17, evil_gid), rep = {0};

    (void)state;
    add_qp(qp);
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -EPERM);
    assert_int_equal(rep.type, HV_MSG_ERROR);
    memcpy(m->gid, peer_gid, 16);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_LOOKEDUP);
    assert_int_equal(rep.target, 77);
    qp->state = IBV_QPS_INIT; /* not connected yet */
    memcpy(m->gid, evil_gid, 16);
    m->sender = 40;
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_LOOKEDUP);
    free(m);
}

/* Finding 2: UDHOLD and UDMAP only from a UD peer this process sends to, for its own GID; a
 * hold in force is not renewed (it was, without end). */
static void test_ud_only_from_peer(void **state)
{
    HvQp *qp = ud_qp();
    HvMsg *m = msg(HV_MSG_UDHOLD, 19, 0, peer_gid), rep = {0};
    int64_t until;

    (void)state;
    add_qp(qp);
    /* a frame from another GID naming the peer's */
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -EPERM);
    assert_int_equal(qp->ud_held_until, 0);
    /* a GID this process never sent to, for itself */
    memcpy(m->gid, evil_gid, 16);
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -EPERM);
    assert_int_equal(qp->ud_held_until, 0);
    /* the peer */
    memcpy(m->gid, peer_gid, 16);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_UDHELD);
    until = qp->ud_held_until;
    assert_true(until > hv_now_ms());
    qp->ud_held_until -= 1000; /* a second UDHOLD later does not extend it */
    until = qp->ud_held_until;
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), 0);
    assert_int_equal(qp->ud_held_until, until);
    /* UDMAP: only the peer, for its own GID */
    m->type = HV_MSG_UDMAP;
    m->nkeys = 1;
    m->keys[0] = (HvKeyPair){0x11, 0x18};
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -EPERM);
    assert_int_equal(qp->ud_held_until, until); /* not released by the forgery */
    memcpy(m->gid, evil_gid, 16);
    assert_int_equal(hv_peer_handle(m, evil_gid, &rep), -EPERM);
    memcpy(m->gid, peer_gid, 16);
    memset(&rep, 0, sizeof(rep));
    assert_int_equal(hv_peer_handle(m, peer_gid, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_UDMAPPED);
    assert_int_equal(qp->ud_held_until, 0);
    free(m);
}

typedef struct {
    HvQp *qp;
    atomic_int done;
} Destroyer;

static void *destroyer(void *arg)
{
    Destroyer *d = arg;

    assert_int_equal(ibv_destroy_qp(&d->qp->pub), 0);
    atomic_store(&d->done, 1);
    return NULL;
}

/* Finding 4: a peer request used its QP (for up to a drain) without a reference, and the
 * program's ibv_destroy_qp freed it under it. Now the destroy waits for the request. */
static void test_destroy_waits_for_request(void **state)
{
    HvQp *qp = rc_qp(), *held;
    Destroyer d = {.qp = qp};
    pthread_t t;

    (void)state;
    hv_ops_install(ctx);
    qp->pub.context = &ctx->vctx.context;
    add_qp(qp);
    held = hv_qp_hold(18, NULL); /* as hv_peer_handle does */
    assert_ptr_equal(held, qp);
    assert_int_equal(pthread_create(&t, NULL, destroyer, &d), 0);
    usleep(200000);
    assert_int_equal(atomic_load(&d.done), 0); /* still held: not freed */
    assert_null(hv_find_vqpn(18, NULL));       /* but no new request finds it */
    assert_int_equal(qp->pub.qp_num, 18);
    hv_qp_release(held);
    pthread_join(t, NULL);
    assert_int_equal(atomic_load(&d.done), 1);
    assert_null(ctx->qps); /* freed by the destroy */
}

/* ---- the channel on a socket pair ----------------------------------------------------------- */
static const char job_key[] = "0123456789abcdef-the-job";

typedef struct {
    int fd;
    const char *key; /* the other end's key (emulated with hv-auth.h), NULL: none */
    char got[256];
    int r;
} Other;

/* The called end of another process: its challenge, then the request opened with its key. */
static void *other_called(void *arg)
{
    Other *o = arg;
    HvAuthSession s = {0};
    HvAuthFrame f;
    char line[HV_AUTH_LINE_MAX + 2];
    int n;

    memset(s.nonce_s, 0x42, sizeof(s.nonce_s));
    n = hv_auth_challenge_format(s.nonce_s, line, sizeof(line));
    hv_write_all(o->fd, line, (size_t)n);
    n = hv_read_line(o->fd, line, sizeof(line), hv_now_ms() + 5000);
    o->r = n < 0 ? n
                 : hv_auth_open((const uint8_t *)o->key, strlen(o->key), &s, HV_AUTH_REQUEST,
                                line, (size_t)n, &f);
    if (o->r == 0) {
        snprintf(o->got, sizeof(o->got), "%.*s", (int)f.msg_len, f.msg);
        n = hv_auth_seal((const uint8_t *)o->key, strlen(o->key), &s, HV_AUTH_REPLY, s.seq,
                         f.gid, "SUSPENDED 3", 11, line, sizeof(line));
    } else {
        n = snprintf(line, sizeof(line), "ERROR authentication failed\n");
    }
    hv_write_all(o->fd, line, (size_t)n);
    return NULL;
}

static void call_other(const char *other_key, int want, const char *want_reply)
{
    int sv[2];
    pthread_t t;
    Other o = {.key = other_key};
    char reply[256] = "";

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    o.fd = sv[1];
    assert_int_equal(pthread_create(&t, NULL, other_called, &o), 0);
    assert_int_equal(hv_channel_call(sv[0], 18, "SUSPEND 18 17 3\n", reply, sizeof(reply),
                                     hv_now_ms() + 5000),
                     want);
    pthread_join(t, NULL);
    if (want_reply) {
        assert_string_equal(reply, want_reply);
        assert_string_equal(o.got, "SUSPEND 18 17 3");
    }
    close(sv[0]);
    close(sv[1]);
}

static void test_channel_caller(void **state)
{
    (void)state;
    assert_int_equal(hv_key_set(job_key, strlen(job_key)), 0);
    call_other(job_key, 0, "SUSPENDED 3");
    call_other("0123456789abcdef-another", -EACCES, NULL); /* its reply refuses ours */
    assert_int_equal(hv_key_set(NULL, 0), 0);
    call_other(job_key, -ENOKEY, NULL); /* no key here: nothing is asked */
    assert_int_equal(hv_key_set("short", 5), -EINVAL);
}

/* The called side: a caller with another key gets ERROR and nothing is handled. */
static void test_channel_called(void **state)
{
    int sv[2];
    HvAuthSession s, c = {0};
    HvMsg *m = calloc(1, sizeof(*m));
    char line[HV_AUTH_LINE_MAX + 2];
    uint8_t from[16];
    const char *req = "LOOKUP 18 17 00000000000000000000ffffc0000202";
    int n;

    (void)state;
    for (int round = 0; round < 2; round++) {
        const char *key = round ? job_key : "0123456789abcdef-another";

        assert_int_equal(hv_key_set(job_key, strlen(job_key)), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(hv_channel_accept(sv[0], &s), 0);
        n = hv_read_line(sv[1], line, sizeof(line), hv_now_ms() + 1000);
        assert_int_equal(hv_auth_challenge_parse(line, (size_t)n, c.nonce_s), 0);
        memset(c.nonce_c, 0x21, sizeof(c.nonce_c));
        n = hv_auth_seal((const uint8_t *)key, strlen(key), &c, HV_AUTH_REQUEST, 1, peer_gid, req,
                         strlen(req), line, sizeof(line));
        hv_write_all(sv[1], line, (size_t)n);
        n = hv_channel_read(sv[0], &s, line, sizeof(line), m, from, hv_now_ms() + 1000);
        if (round == 0) {
            assert_int_equal(n, -EACCES);
            n = hv_read_line(sv[1], line, sizeof(line), hv_now_ms() + 1000);
            assert_string_equal(line, "ERROR authentication failed");
        } else {
            assert_int_equal(n, 0);
            assert_int_equal(m->type, HV_MSG_LOOKUP);
            assert_memory_equal(from, peer_gid, 16);
        }
        close(sv[0]);
        close(sv[1]);
    }
    /* without a key the called end says so in plain text and takes nothing */
    assert_int_equal(hv_key_set(NULL, 0), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(hv_channel_accept(sv[0], &s), -ENOKEY);
    n = hv_read_line(sv[1], line, sizeof(line), hv_now_ms() + 1000);
    assert_string_equal(line, "ERROR no HOTMIG_VERBS_KEY here");
    close(sv[0]);
    close(sv[1]);
    free(m);
}

/* Finding 5: a route record was written through whatever link sat at its name (O_TRUNC,
 * following symlinks): a planted qp-N made the layer overwrite the link's target. */
static void test_route_record_no_follow(void **state)
{
    char dir[] = "/tmp/verbs-route-XXXXXX", target[64], link[80], buf[32] = {0};
    HvQp *qp = rc_qp();
    struct stat st;
    FILE *f;

    (void)state;
    assert_int_equal(hv_key_set(job_key, strlen(job_key)), 0); /* no key: no record at all */
    assert_non_null(mkdtemp(dir));
    setenv("HOTMIG_VERBS_RUN_DIR", dir, 1);
    assert_string_equal(hv_routes_dir(), dir);
    hv_routes_enable();
    snprintf(target, sizeof(target), "%s/victim", dir);
    snprintf(link, sizeof(link), "%s/qp-18", dir);
    f = fopen(target, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(hv_qp_route_add(qp), 0);
    f = fopen(target, "r");
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "precious\n");
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    hv_qp_route_del(qp);
    unlink(target);
    rmdir(dir);
    free(qp);
}

/* The last item of issue 28: the record held only the pid and a ROUTE named only the QP, so
 * anyone could route to any registered QP (a scan found them). Now the record holds the route's
 * tag, an HMAC of the job's key (readable by its owner only), and a ROUTE must name it; without
 * a key nothing is registered (nobody could route). */
static void test_route_record_tag(void **state)
{
    char tmp[] = "/tmp/verbs-route-XXXXXX", path[160], buf[HV_ROUTE_FILE_MAX] = {0}, want[80];
    char tag_hex[2 * HV_ROUTE_TAG_LEN + 1], line[96];
    const char *dir;
    uint8_t tag[HV_ROUTE_TAG_LEN], other[HV_ROUTE_TAG_LEN];
    HvQp *qp = rc_qp();
    HvMsg *m = calloc(1, sizeof(*m));
    struct stat st;
    FILE *f;
    int n;

    (void)state;
    assert_non_null(m);
    if (!getenv("HOTMIG_VERBS_RUN_DIR")) { /* the run dir is taken once per process */
        assert_non_null(mkdtemp(tmp));
        setenv("HOTMIG_VERBS_RUN_DIR", tmp, 1);
    }
    dir = hv_routes_dir();
    assert_non_null(dir);
    assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
    hv_routes_enable();
    snprintf(path, sizeof(path), "%s/qp-18", dir);
    assert_int_equal(hv_key_set(NULL, 0), 0);
    assert_int_equal(hv_qp_route_add(qp), 0);
    assert_int_equal(lstat(path, &st), -1); /* no key: no record */
    assert_int_equal(hv_key_set(job_key, strlen(job_key)), 0);
    assert_int_equal(hv_qp_route_add(qp), 0);
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    hv_auth_route_tag((const uint8_t *)job_key, strlen(job_key), 18, tag);
    for (int i = 0; i < HV_ROUTE_TAG_LEN; i++)
        snprintf(tag_hex + 2 * i, 3, "%02x", tag[i]);
    snprintf(want, sizeof(want), "%ld %s\n", (long)getpid(), tag_hex);
    assert_string_equal(buf, want);
    /* another QP, another key: other tags */
    hv_auth_route_tag((const uint8_t *)job_key, strlen(job_key), 19, other);
    assert_memory_not_equal(tag, other, HV_ROUTE_TAG_LEN);
    hv_auth_route_tag((const uint8_t *)"0123456789abcdef-another", 24, 18, other);
    assert_memory_not_equal(tag, other, HV_ROUTE_TAG_LEN);
    /* the ROUTE a caller sends names the tag; one without it does not parse */
    m->type = HV_MSG_ROUTE;
    m->target = 18;
    hv_route_tag(18, m->tag);
    n = hv_proto_format(m, line, sizeof(line));
    snprintf(want, sizeof(want), "ROUTE 18 %s\n", tag_hex);
    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(line, want);
    assert_int_equal(hv_proto_parse(line, (size_t)n - 1, m), 0);
    assert_memory_equal(m->tag, tag, HV_ROUTE_TAG_LEN);
    assert_int_equal(hv_proto_parse("ROUTE 18", 8, m), -EINVAL);
    hv_qp_route_del(qp);
    assert_int_equal(lstat(path, &st), -1);
    rmdir(dir);
    free(m);
    free(qp);
}

/* What hv_refused_hook hands the agent (the inventory's "refused"). */
static char reported[8][80];
static int n_reported;

static void capture_refused(const char *what)
{
    if (n_reported < 8)
        snprintf(reported[n_reported++], sizeof(reported[0]), "%s", what);
}

/* Issue 29 item 5: a UD QP counts its sends to every GID up to HV_UD_SENT_MAX (it kept 16, and a
 * 17th peer guest that moved was neither held nor drained); a UDHOLD from the 100th is answered
 * with its count. The limit reached is reported to the agent, once, never dropped silently; so
 * are the process's (GID, QPN) targets past HV_UD_TARGETS_MAX. */
static void test_ud_limits_reported(void **state)
{
    HvQp *qp = ud_qp();
    HvAh ah = {.peer_known = 1};
    HvMsg *m;
    HvMsg rep = {0};
    void (*saved)(const char *) = hv_refused_hook;

    (void)state;
    add_qp(qp);
    hv_refused_hook = capture_refused;
    n_reported = 0;
    for (uint32_t i = 0; i + 1 < HV_UD_SENT_MAX; i++) { /* peer_gid is the first */
        memset(ah.peer.raw, 0, 16);
        ah.peer.raw[0] = 0xfe;
        ah.peer.raw[14] = (uint8_t)(i >> 8);
        ah.peer.raw[15] = (uint8_t)i;
        for (uint32_t k = 0; k <= (i == 99 ? 2u : 0u); k++)
            hv_ud_count_send(qp, &ah);
    }
    assert_int_equal(qp->ud_sent.n, HV_UD_SENT_MAX);
    assert_int_equal(n_reported, 0);
    ah.peer.raw[0] = 0xfd; /* one GID too many */
    hv_ud_count_send(qp, &ah);
    hv_ud_count_send(qp, &ah);
    assert_int_equal(n_reported, 1);
    assert_string_equal(reported[0], "UD sends of one QP to over 4096 GIDs");
    /* the 100th peer moves: it is a UD peer of this process and learns that 3 were sent */
    memset(ah.peer.raw, 0, 16);
    ah.peer.raw[0] = 0xfe;
    ah.peer.raw[15] = 99;
    m = msg(HV_MSG_UDHOLD, 19, 0, ah.peer.raw);
    assert_int_equal(hv_peer_handle(m, ah.peer.raw, &rep), 0);
    assert_int_equal(rep.type, HV_MSG_UDHELD);
    assert_int_equal(rep.nkeys, 1);
    assert_int_equal(rep.keys[0].p, 3);
    free(m);
    /* the process's targets: every one kept up to the max, the next one reported */
    for (uint32_t i = 0; i < HV_UD_TARGETS_MAX; i++) {
        ah.peer.raw[14] = (uint8_t)(i >> 14);
        ah.peer.raw[15] = (uint8_t)(i >> 6);
        assert_int_equal(hv_ud_send_qpn(&ah, 0x100 + (i & 63)), 0x100 + (i & 63));
    }
    assert_int_equal(n_reported, 1);
    ah.peer.raw[0] = 0xfc;
    hv_ud_send_qpn(&ah, 5);
    assert_int_equal(n_reported, 2);
    assert_string_equal(reported[1], "UD sends to over 65536 (GID, QPN) targets");
    {
        size_t n = 0;
        HvUdTarget *tg = hv_ud_targets_copy(&n);

        assert_int_equal(n, HV_UD_TARGETS_MAX);
        free(tg);
    }
    hv_refused_hook = saved;
}

/* The layer's server (issue 28, "bounded broker"): every connection reaches it through the
 * agent, so it had one cap (16 at once, refusing the 17th): one address's silent connections
 * kept everybody's requests out, a migration's too. Now the agent says where each comes from
 * (FROM) and the server holds at most HV_SERVER_PER_PEER_MAX of one address and
 * HV_SERVER_CONNS_MAX in all; a newcomer past either closes the oldest (of that address) whose
 * caller has not proved the key after HV_SERVER_GRACE_MS; an authenticated one stays, one within
 * its grace too (the newcomer is refused); a connection without FROM (not through the agent) or
 * of another user is refused. */
static int srv_connect(const char *path, const char *from)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char line[128];

    assert_true(fd >= 0);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    if (from) {
        snprintf(line, sizeof(line), "FROM %s\n", from);
        assert_int_equal(hv_write_all(fd, line, strlen(line)), 0);
    }
    return fd;
}

/* The server's next line on @fd within @ms: 1 a CHALLENGE, 0 none yet, -1 closed. */
static int srv_challenge(int fd, int ms)
{
    char line[HV_AUTH_LINE_MAX + 2];
    uint8_t nonce[HV_AUTH_NONCE_LEN];
    int n = hv_read_line(fd, line, sizeof(line), hv_now_ms() + ms);

    if (n == -ETIMEDOUT)
        return 0;
    if (n < 0)
        return -1;
    return hv_auth_challenge_parse(line, (size_t)n, nonce) == 0 ? 1 : -1;
}

static void test_server_bounds(void **state)
{
    char dir[] = "/tmp/verbs-server-XXXXXX", path[80], line[HV_AUTH_LINE_MAX + 2];
    const char *req = "LOOKUP 99 17 00000000000000000000ffffc0000202";
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    enum { PER = HV_SERVER_PER_PEER_MAX, ALL = HV_SERVER_CONNS_MAX };
    HvAuthSession c = {0};
    int lfd, one[PER + 2], k, fill[ALL - PER - 1], late, n;

    (void)state;
    assert_int_equal(hv_key_set(job_key, strlen(job_key)), 0);
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/1.sock", dir);
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 64), 0);
    /* the kernel's credentials decide, not the modes */
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(chmod(path, 0777), 0);
    assert_int_equal(hv_server_listen(lfd), 0);

    /* not through the agent: no FROM, refused */
    k = srv_connect(path, NULL);
    assert_int_equal(hv_write_all(k, "ROUTE 1\n", 8), 0);
    assert_int_equal(srv_challenge(k, 2000), -1);
    close(k);
    /* another user (neither the agent's, root, nor this process's): refused */
    if (geteuid() == 0) {
        pid_t pid = fork();
        int st = 0;

        assert_true(pid >= 0);
        if (pid == 0) { /* no cmocka asserts in the child */
            int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

            if (fd < 0 || setgid(65534) < 0 || setuid(65534) < 0 ||
                connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                _exit(2);
            hv_write_all(fd, "FROM 192.0.2.5\n", 15);
            _exit(srv_challenge(fd, 2000) == -1 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    /* one address: PER at once; one more within their grace is refused, after it closes that
     * address's oldest */
    for (int i = 0; i < PER; i++) {
        one[i] = srv_connect(path, "192.0.2.9");
        assert_int_equal(srv_challenge(one[i], 2000), 1);
    }
    one[PER] = srv_connect(path, "192.0.2.9");
    assert_int_equal(srv_challenge(one[PER], 2000), -1);
    usleep((HV_SERVER_GRACE_MS + 100) * 1000);
    one[PER + 1] = srv_connect(path, "192.0.2.9");
    assert_int_equal(srv_challenge(one[PER + 1], 2000), 1);
    assert_int_equal(srv_challenge(one[0], 2000), -1);
    assert_int_equal(srv_challenge(one[1], 100), 0);
    /* a caller that proved the key keeps its connection */
    k = srv_connect(path, "192.0.2.1");
    n = hv_read_line(k, line, sizeof(line), hv_now_ms() + 2000);
    assert_true(n > 0);
    assert_int_equal(hv_auth_challenge_parse(line, (size_t)n, c.nonce_s), 0);
    memset(c.nonce_c, 0x33, sizeof(c.nonce_c));
    n = hv_auth_seal((const uint8_t *)job_key, strlen(job_key), &c, HV_AUTH_REQUEST, 1, peer_gid,
                     req, strlen(req), line, sizeof(line));
    assert_int_equal(hv_write_all(k, line, (size_t)n), 0);
    n = hv_read_line(k, line, sizeof(line), hv_now_ms() + 2000);
    assert_true(n > 5);
    assert_memory_equal(line, "AUTH ", 5);
    /* ALL in all (PER + 1 + the others' addresses); one more closes the oldest unauthenticated */
    for (int i = 0; i < ALL - PER - 1; i++) {
        char from[32];

        snprintf(from, sizeof(from), "198.51.100.%d", 10 + i);
        fill[i] = srv_connect(path, from);
        assert_int_equal(srv_challenge(fill[i], 2000), 1);
    }
    late = srv_connect(path, "203.0.113.7");
    assert_int_equal(srv_challenge(late, 3000), 1);
    assert_int_equal(srv_challenge(one[1], 2000), -1);
    assert_int_equal(srv_challenge(one[2], 100), 0);
    assert_int_equal(srv_challenge(k, 100), 0); /* still open */
    close(late);
    for (int i = 0; i < ALL - PER - 1; i++)
        close(fill[i]);
    for (int i = 0; i < PER + 2; i++)
        close(one[i]);
    close(k);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    unlink(path);
    rmdir(dir);
}

/* Issue 28, finding 8: the layer logged a peer's (or its agent's) reply as it came, escape
 * sequences and bidirectional overrides included. Now a log line holds printable ASCII only. */
static void test_log_sanitized(void **state)
{
    int p[2], saved = dup(STDERR_FILENO);
    char buf[512] = {0};
    ssize_t n;

    (void)state;
    assert_int_equal(pipe(p), 0);
    assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
    hv_log("the peer agent did not route QP 18: %s", "NOROUTE \x1b[2J\xe2\x80\xae" "evil\x7f");
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(p[1]);
    n = read(p[0], buf, sizeof(buf) - 1);
    close(p[0]);
    assert_true(n > 0);
    assert_non_null(strstr(buf, "QP 18: NOROUTE ?[2J???evil?\n"));
    for (ssize_t i = 0; i < n - 1; i++)
        assert_true(buf[i] >= 0x20 && buf[i] < 0x7f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reconnect_only_from_peer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_suspend_only_from_peer_and_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_switch_only_from_peer_and_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keymap_only_from_peer_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ud_only_from_peer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ud_limits_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_waits_for_request, setup, teardown),
        cmocka_unit_test(test_channel_caller),
        cmocka_unit_test(test_channel_called),
        cmocka_unit_test_setup_teardown(test_route_record_no_follow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_route_record_tag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_bounds, setup, teardown),
        cmocka_unit_test(test_log_sanitized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
