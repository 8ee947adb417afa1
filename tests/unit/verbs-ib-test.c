/* libhotmig-verbs on InfiniBand (issue 29): LID-routed connections are migratable, a mover's new
 * LID reaches every peer QP (GRH or not), and peers are found in the agents' directory without
 * HOTMIG_VERBS_PEERS. The layer's sources are linked in; the real libibverbs below them is
 * faked through hv_real (the table every physical call goes through). */
#include "hv.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- the fake device: one port, LID fake_lid, GID 0 = fe80::<guid> ------------------------ */
static uint16_t fake_lid = 0x101;
static struct ibv_qp_attr last_rtr; /* the last modify to RTR the layer made */
static int n_rtr;

static int fake_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
    (void)c;
    (void)port;
    memset(a, 0, sizeof(struct ibv_port_attr));
    ((struct ibv_port_attr *)a)->lid = fake_lid;
    ((struct ibv_port_attr *)a)->link_layer = IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

static const uint8_t own_gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 1};
static const uint8_t peer_gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0, 0, 2};

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
    if ((mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RTR) {
        last_rtr = *a;
        n_rtr++;
    }
    return 0;
}

static struct ibv_context fake_phys_ctx;
static struct ibv_qp fake_phys_qp = {.qp_num = 77};

/* A context with one RC QP (virtual 5, physical 77) connected to the peer's QP 9 at @dlid,
 * with a GRH when @global: as the program made it. */
static HvQp *connected_qp(int global, uint16_t dlid)
{
    HvContext *ctx = calloc(1, sizeof(*ctx));
    HvPd *pd = calloc(1, sizeof(*pd));
    HvQp *qp = calloc(1, sizeof(*qp));

    assert_non_null(ctx);
    assert_non_null(pd);
    assert_non_null(qp);
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&qp->lock, NULL);
    ctx->phys = &fake_phys_ctx;
    pd->ctx = ctx;
    qp->pd = pd;
    qp->phys = &fake_phys_qp;
    qp->pub.qp_num = 5;
    qp->init.qp_type = IBV_QPT_RC;
    qp->m_init = IBV_QP_STATE | IBV_QP_PORT;
    qp->a_init.port_num = 1;
    qp->m_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    qp->a_rtr.qp_state = IBV_QPS_RTR;
    qp->a_rtr.dest_qp_num = 9;
    qp->a_rtr.ah_attr.port_num = 1;
    qp->a_rtr.ah_attr.dlid = dlid;
    qp->a_rtr.ah_attr.is_global = (uint8_t)global;
    if (global)
        memcpy(qp->a_rtr.ah_attr.grh.dgid.raw, peer_gid, 16);
    qp->state = IBV_QPS_RTR;
    qp->peer_vqpn = 9;
    qp->peer_pqpn = 9;
    memcpy(qp->peer_gid.raw, peer_gid, 16);
    qp->peer_known = 1;
    ctx->qps = qp;
    assert_int_equal(hv_map_put(&ctx->vqpn, 5, (uintptr_t)qp), 0);
    pthread_mutex_lock(&hv.lock);
    ctx->next = hv.ctxs;
    hv.ctxs = ctx;
    pthread_mutex_unlock(&hv.lock);
    return qp;
}

static int setup(void **state)
{
    (void)state;
    hv_real.r_ibv_query_port = fake_query_port;
    hv_real.r_ibv_query_gid = fake_query_gid;
    hv_real.r_ibv_modify_qp = fake_modify_qp;
    n_rtr = 0;
    return 0;
}

/* Defect 1: a LID-routed RC QP (no GRH: ibv_rc_pingpong without -g, UCX's default on IB) is a
 * connection the swap pauses, suspends and reconnects: the layer required a GRH. */
static void test_lid_routed_is_connected(void **state)
{
    HvQp *qp = connected_qp(0, 0x201);

    (void)state;
    assert_true(hv_qp_connected(qp));
    qp->state = IBV_QPS_INIT;
    assert_false(hv_qp_connected(qp)); /* not yet at RTR: nothing to suspend */
}

/* Defect 2: the mover's RECONNECT carries its new LID; the peer's QP goes to RTR at that DLID
 * with or without a GRH (on IB the LRH is routed by the DLID), answers with its own LID, and
 * keeps the new DLID for the next swap. The layer kept the old DLID whenever the QP had a GRH. */
static void reconnect_moves_dlid(int global)
{
    HvQp *qp = connected_qp(global, 0x201);
    HvMsg *m = calloc(1, sizeof(*m)), *rep = calloc(1, sizeof(*rep));

    assert_non_null(m);
    assert_non_null(rep);
    m->type = HV_MSG_RECONNECT;
    m->target = 5;
    m->sender = 9;
    m->sender_pqpn = 30;
    m->sender_psn = 1;
    m->target_psn = 2;
    memcpy(m->gid, peer_gid, 16);
    m->lid = 0x102; /* the mover now sits on host A's slot 2 */
    assert_int_equal(hv_peer_handle(m, peer_gid, rep), 0); /* from the peer the QP is connected to */
    assert_int_equal(rep->type, HV_MSG_RECONNECTED);
    assert_int_equal(rep->target, 77);
    assert_int_equal(rep->lid, fake_lid); /* our own LID: the mover may have moved us too */
    assert_true(n_rtr > 0);
    assert_int_equal(last_rtr.dest_qp_num, 30);
    assert_int_equal(last_rtr.ah_attr.dlid, 0x102);
    assert_int_equal(qp->a_rtr.ah_attr.dlid, 0x102);
    free(m);
    free(rep);
}

static void test_reconnect_moves_dlid_lid_routed(void **state)
{
    (void)state;
    reconnect_moves_dlid(0);
}

static void test_reconnect_moves_dlid_with_grh(void **state)
{
    (void)state;
    reconnect_moves_dlid(1);
}

/* Issue 29, item 5: HOTMIG_VERBS_PEERS held 64 peers in 8 KiB (the rest ignored); a list of
 * a 1,000-guest job now fits, its last entry found. */
static void test_peers_list_of_a_thousand(void **state)
{
    size_t max = 40 * 1000, n = 0;
    char *list = malloc(max);
    union ibv_gid gid;

    (void)state;
    assert_non_null(list);
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(list + n, max - n, "%s10.%d.%d.1=198.51.%d.%d", i ? "," : "",
                              i / 250, i % 250, i / 250, i % 250 + 1);
    assert_true(n < max && n > 8192);
    setenv("HOTMIG_VERBS_PEERS", list, 1);
    hv_peers_parse();
    memset(&gid, 0, sizeof(gid));
    gid.raw[10] = gid.raw[11] = 0xff;
    gid.raw[12] = 10, gid.raw[13] = 3, gid.raw[14] = 249, gid.raw[15] = 1; /* entry 999 */
    assert_true(hv_peer_known(&gid));
    unsetenv("HOTMIG_VERBS_PEERS");
    free(list);
}

/* Defect 3: a peer the agents' directory knows is reachable without HOTMIG_VERBS_PEERS, and
 * a LID-routed address vector names its peer by the GID of the port that holds the LID now. */
static void test_directory_finds_peers(void **state)
{
    char dir[] = "/tmp/verbs-ib-test.XXXXXX", path[64], tmp[64];
    union ibv_gid gid;
    struct ibv_ah_attr ah = {.dlid = 0x203, .port_num = 1};
    FILE *f;

    (void)state;
    assert_non_null(mkdtemp(dir));
    setenv("HOTMIG_VERBS_RUN_DIR", dir, 1);
    unsetenv("HOTMIG_VERBS_PEERS");
    memcpy(gid.raw, peer_gid, 16);
    assert_false(hv_peer_known(&gid)); /* no directory yet */
    snprintf(path, sizeof(path), "%s/directory", dir);
    snprintf(tmp, sizeof(tmp), "%s/directory.tmp", dir);
    f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "# hotmig-directory 1\n"
               "fe800000000000005054fffe000002 515 192.0.2.7 7475\n" /* 30 digits: skipped */
               "fe80000000000000505400fffe000002 515 192.0.2.7 7475\n"
               "fe800000000000005054fffe00000009 516 192.0.2.9 7475\n");
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
    assert_true(hv_peer_known(&gid));
    memset(&gid, 0, sizeof(gid));
    assert_true(hv_av_peer(NULL, &ah, &gid)); /* LID 0x203 = 515 */
    assert_memory_equal(gid.raw, peer_gid, 16);
    ah.dlid = 0x301;
    assert_false(hv_av_peer(NULL, &ah, &gid)); /* a LID nobody holds */
    /* the mover announced its new LID: the agent replaced the file */
    f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "# hotmig-directory 1\nfe80000000000000505400fffe000002 769 192.0.2.7 7475\n");
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
    ah.dlid = 769;
    assert_true(hv_av_peer(NULL, &ah, &gid));
    assert_memory_equal(gid.raw, peer_gid, 16);
    ah.dlid = 515;
    assert_false(hv_av_peer(NULL, &ah, &gid)); /* its old LID is nobody's now */
    unlink(path);
    rmdir(dir);
}

/* The directory's lines are hostile input (another guest's announcements): strict fields. */
static void test_directory_line_parser(void **state)
{
    HvDirEntry e;

    (void)state;
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 257 192.0.2.1 7475", &e),
                     0);
    assert_int_equal(e.lid, 257);
    assert_int_equal(e.addr.ss_family, AF_INET);
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 0 2001:db8::1 7475", &e),
                     0);
    assert_int_equal(e.addr.ss_family, AF_INET6);
    assert_int_equal(hv_dir_parse_line("FE800000000000005054fffe48010101 1 192.0.2.1 1", &e),
                     -EINVAL); /* upper case */
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 65536 192.0.2.1 1", &e),
                     -EINVAL);
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 1 192.0.2.1 0", &e),
                     -EINVAL);
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 01 192.0.2.1 1", &e),
                     -EINVAL); /* leading zero */
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 1 192.0.2.300 1", &e),
                     -EINVAL);
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 1 192.0.2.1 1 x", &e),
                     -EINVAL); /* extra field */
    assert_int_equal(hv_dir_parse_line("fe800000000000005054fffe48010101 1 192.0.2.1", &e),
                     -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lid_routed_is_connected, setup),
        cmocka_unit_test_setup(test_reconnect_moves_dlid_lid_routed, setup),
        cmocka_unit_test_setup(test_reconnect_moves_dlid_with_grh, setup),
        cmocka_unit_test_setup(test_directory_finds_peers, setup),
        cmocka_unit_test_setup(test_peers_list_of_a_thousand, setup),
        cmocka_unit_test_setup(test_directory_line_parser, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
