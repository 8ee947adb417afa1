/* The agent's peer directory (guest-agent/agent/dir-msg.c, dir-table.c, directory.c): the
 * announcement parser, the table (expiry, conflicts, bounds), the file, and agents in one
 * process on loopback (multicast, and unicast seeds) whose identity change reaches the others'
 * files. The RDMA ports come from a fake verbs adapter. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest-agent/agent/directory.h"

#define BOOT_A "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a"
#define BOOT_B "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"
#define GID_1 "fe800000000000000002c90300000001"
#define GID_2 "fe800000000000000002c90300000002"
#define GID_3 "fe800000000000000002c90300000003"

static AgentDirMsg parse_ok(const char *text)
{
    g_autoptr(GError) error = NULL;
    AgentDirMsg m;

    if (!agent_dir_msg_parse(text, strlen(text), &m, &error))
        fail_msg("'%s': %s", text, error->message);
    return m;
}

/* ---- the parser ------------------------------------------------------------------------- */

static void test_msg_parse(void **state)
{
    AgentDirMsg m = parse_ok("hotmig-dir 1 announce group " BOOT_A " 1700000000000 7 10 "
                             "198.51.100.1 7475 2 " GID_1 "/257 " GID_2 "/0\n");
    char buf[AGENT_DIR_MSG_MAX + 1];
    gsize len;

    assert_int_equal(m.via, AGENT_DIR_VIA_GROUP);
    assert_int_equal(m.boot_id[0], 0x0a);
    assert_true(m.since_ms == 1700000000000ULL);
    assert_true(m.seq == 7);
    assert_int_equal(m.refresh_s, 10);
    assert_string_equal(m.addr, "198.51.100.1");
    assert_int_equal(m.port, 7475);
    assert_int_equal(m.n_ports, 2);
    assert_int_equal(m.ports[0].lid, 257);
    assert_int_equal(m.ports[0].gid[0], 0xfe);
    assert_int_equal(m.ports[0].gid[15], 0x01);
    /* formatting gives the same line back */
    len = agent_dir_msg_format(&m, buf, sizeof(buf));
    assert_string_equal(buf, "hotmig-dir 1 announce group " BOOT_A " 1700000000000 7 10 "
                             "198.51.100.1 7475 2 " GID_1 "/257 " GID_2 "/0\n");
    assert_int_equal(len, strlen(buf));
    /* IPv6 addresses come out canonical; no ports is an agent alive without a port yet */
    m = parse_ok("hotmig-dir 1 announce relay " BOOT_B " 0 1 3600 2001:DB8:0:0::1 1 0\n");
    assert_string_equal(m.addr, "2001:db8::1");
    assert_int_equal(m.via, AGENT_DIR_VIA_RELAY);
    assert_int_equal(m.n_ports, 0);
}

static void test_msg_refused(void **state)
{
    static const char *const bad[] = {
        "",
        "\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0", /* no newline */
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0\n\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0 \n",
        " hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir  1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 2 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 leave group " BOOT_A " 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce GROUP " BOOT_A " 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group 0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A0A 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group 0a0a 1 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 01 1 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 0 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 18446744073709551616 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 9223372036854775808 10 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 0 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 3601 198.51.100.1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 0.0.0.0 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 239.255.74.75 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 :: 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 node1 7475 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 0 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 65536 0\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 33\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0 " GID_1 "/1\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1 " GID_1 "\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1 " GID_1 "/65536\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1 " GID_1 "/01\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1 " GID_1 "/-1\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1 "
        "FE800000000000000002C90300000001/1\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 1 "
        "00000000000000000000000000000000/1\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 2 " GID_1 "/1 " GID_1
        "/2\n",
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51.100.1 7475 0\t\n",
    };
    static const char nul[] =
        "hotmig-dir 1 announce group " BOOT_A " 1 1 10 198.51\0.100.1 7475 0\n";
    g_autoptr(GString) big = g_string_new("hotmig-dir 1 announce group " BOOT_A " 1 1 10 ");
    g_autoptr(GError) error = NULL;
    AgentDirMsg m;

    memset(&m, 0x5a, sizeof(m));
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        if (agent_dir_msg_parse(bad[i], strlen(bad[i]), &m, &error))
            fail_msg("accepted: '%s'", bad[i]);
        assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID));
        assert_non_null(strstr(error->message, "directory announcement"));
        g_clear_error(&error);
        assert_int_equal(m.port, 0x5a5a); /* untouched */
    }
    assert_false(agent_dir_msg_parse(nul, sizeof(nul) - 1, &m, &error));
    g_clear_error(&error);
    /* over the datagram limit, whatever it holds */
    while (big->len <= AGENT_DIR_MSG_MAX)
        g_string_append_c(big, '1');
    g_string_append_c(big, '\n');
    assert_false(agent_dir_msg_parse(big->str, big->len, &m, &error));
    assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TOO_LARGE));
}

/* The largest announcement (32 ports, IPv6, the longest numbers) fits in one datagram. */
static void test_msg_largest(void **state)
{
    AgentDirMsg m = {.via = AGENT_DIR_VIA_RELAY,
                     .since_ms = G_MAXINT64,
                     .seq = G_MAXINT64,
                     .refresh_s = 3600,
                     .addr = "2001:db8:ffff:ffff:ffff:ffff:255.255.255.255",
                     .port = 65535,
                     .n_ports = AGENT_DIR_PORTS_MAX};
    char buf[AGENT_DIR_MSG_MAX + 1];
    AgentDirMsg back;
    gsize len;

    memset(m.boot_id, 0xff, 16);
    for (guint i = 0; i < m.n_ports; i++) {
        memset(m.ports[i].gid, 0xff, 16);
        m.ports[i].gid[0] = (guint8)i;
        m.ports[i].lid = 65535;
    }
    len = agent_dir_msg_format(&m, buf, sizeof(buf));
    assert_true(len > 0 && len <= AGENT_DIR_MSG_MAX);
    assert_true(agent_dir_msg_parse(buf, len, &back, NULL));
    assert_int_equal(back.n_ports, AGENT_DIR_PORTS_MAX);
    assert_int_equal(agent_dir_msg_format(&m, buf, 100), 0); /* does not fit: 0 */
}

/* ---- the table -------------------------------------------------------------------------- */

static AgentDirMsg msg_make(guint8 boot, guint64 since, guint64 seq, const char *addr, guint16 port,
                            const char *gid, guint16 lid)
{
    AgentDirMsg m = {
        .via = AGENT_DIR_VIA_GROUP, .since_ms = since, .seq = seq, .refresh_s = 10, .port = port};

    memset(m.boot_id, boot, 16);
    g_strlcpy(m.addr, addr, sizeof(m.addr));
    if (gid) {
        for (guint i = 0; i < 16; i++)
            m.ports[0].gid[i] = (guint8)(g_ascii_xdigit_value(gid[2 * i]) << 4 |
                                         g_ascii_xdigit_value(gid[2 * i + 1]));
        m.ports[0].lid = lid;
        m.n_ports = 1;
    }
    return m;
}

static void gid_bytes(const char *text, guint8 out[16])
{
    for (guint i = 0; i < 16; i++)
        out[i] = (guint8)(g_ascii_xdigit_value(text[2 * i]) << 4 |
                          g_ascii_xdigit_value(text[2 * i + 1]));
}

static void assert_lookup(AgentDirTable *t, const char *gid, guint16 lid, const char *addr)
{
    guint8 g[16];
    guint16 got_lid = 0xffff, port = 0;
    const char *got_addr = NULL;

    gid_bytes(gid, g);
    if (!agent_dir_table_lookup(t, g, &got_lid, &got_addr, &port))
        fail_msg("GID %s not in the table", gid);
    assert_int_equal(got_lid, lid);
    assert_string_equal(got_addr, addr);
}

static void assert_absent(AgentDirTable *t, const char *gid)
{
    guint8 g[16];
    guint16 lid, port;
    const char *addr;

    gid_bytes(gid, g);
    assert_false(agent_dir_table_lookup(t, g, &lid, &addr, &port));
}

static void test_table_update(void **state)
{
    g_autoptr(AgentDirTable) t = agent_dir_table_new(0);
    AgentDirMsg a = msg_make(0xa, 100, 1, "198.51.100.1", 7475, GID_1, 257);

    assert_int_equal(agent_dir_table_update(t, &a, 0, NULL), AGENT_DIR_UPDATE_CHANGED);
    assert_lookup(t, GID_1, 257, "198.51.100.1");
    /* the same datagram again (multicast and a seed's relay): stale */
    assert_int_equal(agent_dir_table_update(t, &a, 1, NULL), AGENT_DIR_UPDATE_STALE);
    a.seq = 2;
    assert_int_equal(agent_dir_table_update(t, &a, 2, NULL), AGENT_DIR_UPDATE_REFRESH);
    /* the mover: its LID is the destination's */
    a.seq = 3;
    a.since_ms = 200;
    a.ports[0].lid = 513;
    assert_int_equal(agent_dir_table_update(t, &a, 3, NULL), AGENT_DIR_UPDATE_CHANGED);
    assert_lookup(t, GID_1, 513, "198.51.100.1");
    /* an older datagram that arrives late changes nothing */
    a.seq = 2;
    a.ports[0].lid = 257;
    assert_int_equal(agent_dir_table_update(t, &a, 4, NULL), AGENT_DIR_UPDATE_STALE);
    assert_lookup(t, GID_1, 513, "198.51.100.1");
    assert_int_equal(agent_dir_table_n_announcers(t), 1);
    assert_int_equal(agent_dir_table_n_claims(t), 1);
}

static void test_table_expiry(void **state)
{
    g_autoptr(AgentDirTable) t = agent_dir_table_new(0);
    AgentDirMsg own = msg_make(0x1, 100, 1, "198.51.100.1", 7475, GID_1, 1);
    AgentDirMsg a = msg_make(0xa, 100, 1, "198.51.100.2", 7475, GID_2, 2);
    gint64 ttl = 3 * 10 * G_USEC_PER_SEC;

    agent_dir_table_set_own(t, own.boot_id);
    agent_dir_table_update(t, &own, 0, NULL);
    agent_dir_table_update(t, &a, 0, NULL);
    assert_int_equal(agent_dir_table_expire(t, ttl), 0); /* 3 refreshes: still there */
    a.seq = 2;
    agent_dir_table_update(t, &a, ttl, NULL); /* heard again */
    assert_int_equal(agent_dir_table_expire(t, 2 * ttl), 0);
    assert_int_equal(agent_dir_table_expire(t, 2 * ttl + 1), 1);
    assert_absent(t, GID_2);
    /* this agent's own entry never expires */
    assert_lookup(t, GID_1, 1, "198.51.100.1");
    assert_int_equal(agent_dir_table_n_announcers(t), 1);
}

/* Two guests claim one GID: the one whose identity changed last wins, in any order. */
static void test_table_gid_conflict(void **state)
{
    for (guint order = 0; order < 2; order++) {
        g_autoptr(AgentDirTable) t = agent_dir_table_new(0);
        AgentDirMsg old = msg_make(0xa, 100, 50, "198.51.100.1", 7475, GID_1, 1);
        AgentDirMsg new = msg_make(0xb, 200, 1, "198.51.100.2", 7475, GID_1, 2);

        agent_dir_table_update(t, order ? &new : &old, 0, NULL);
        agent_dir_table_update(t, order ? &old : &new, 0, NULL);
        assert_lookup(t, GID_1, 2, "198.51.100.2");
        assert_int_equal(agent_dir_table_n_claims(t), 2);
        /* refreshes do not change the winner */
        old.seq = 51;
        agent_dir_table_update(t, &old, 1, NULL);
        assert_lookup(t, GID_1, 2, "198.51.100.2");
        /* the winner gone, the other claimant has it */
        agent_dir_table_expire(t, 31 * G_USEC_PER_SEC);
        assert_absent(t, GID_1);
        old.seq = 52;
        new.seq = 2;
        agent_dir_table_update(t, &old, 40 * G_USEC_PER_SEC, NULL);
        agent_dir_table_update(t, &new, 40 * G_USEC_PER_SEC, NULL);
        new.seq = 3;
        new.since_ms = 300;
        new.ports[0].gid[15] = 0x02; /* the winner now claims another GID */
        agent_dir_table_update(t, &new, 41 * G_USEC_PER_SEC, NULL);
        assert_lookup(t, GID_1, 1, "198.51.100.1");
        assert_lookup(t, GID_2, 2, "198.51.100.2");
    }
}

/* The same control endpoint with a new boot id: the agent restarted; its old run is dropped,
 * and a late datagram of the old run does not come back. */
static void test_table_restart(void **state)
{
    g_autoptr(AgentDirTable) t = agent_dir_table_new(0);
    AgentDirMsg run1 = msg_make(0xa, 100, 9, "198.51.100.1", 7475, GID_1, 1);
    AgentDirMsg run2 = msg_make(0xb, 200, 1, "198.51.100.1", 7475, GID_1, 1);

    agent_dir_table_update(t, &run1, 0, NULL);
    assert_int_equal(agent_dir_table_update(t, &run2, 1, NULL), AGENT_DIR_UPDATE_CHANGED);
    assert_int_equal(agent_dir_table_n_announcers(t), 1);
    assert_int_equal(agent_dir_table_n_claims(t), 1);
    run1.seq = 10;
    assert_int_equal(agent_dir_table_update(t, &run1, 2, NULL), AGENT_DIR_UPDATE_STALE);
    assert_int_equal(agent_dir_table_n_announcers(t), 1);
}

/* One LID claimed by two GIDs of one subnet: the most recent claim keeps it, the other's LID is
 * written as 0 until it announces its new one; another subnet's LID is another LID. */
static void test_table_lid_conflict(void **state)
{
    g_autoptr(AgentDirTable) t = agent_dir_table_new(0);
    AgentDirMsg gone = msg_make(0xa, 100, 1, "198.51.100.1", 7475, GID_1, 513);
    AgentDirMsg mover = msg_make(0xb, 200, 1, "198.51.100.2", 7475, GID_2, 513);
    AgentDirMsg other = msg_make(0xc, 300, 1, "198.51.100.3", 7475, GID_3, 513);
    g_autoptr(GString) text = NULL;

    other.ports[0].gid[7] = 0x01; /* subnet prefix fe80::1 */
    agent_dir_table_update(t, &gone, 0, NULL);
    agent_dir_table_update(t, &mover, 0, NULL);
    agent_dir_table_update(t, &other, 0, NULL);
    assert_lookup(t, GID_2, 513, "198.51.100.2");
    assert_lookup(t, GID_1, 0, "198.51.100.1");
    text = agent_dir_table_format(t);
    assert_string_equal(text->str, AGENT_DIR_FILE_HEADER GID_1
                        " 0 198.51.100.1 7475\n" GID_2 " 513 198.51.100.2 7475\n"
                        "fe800000000000010002c90300000003 513 198.51.100.3 7475\n");
    /* it announces its new LID: no conflict left */
    gone.seq = 2;
    gone.since_ms = 400;
    gone.ports[0].lid = 257;
    agent_dir_table_update(t, &gone, 1, NULL);
    assert_lookup(t, GID_1, 257, "198.51.100.1");
    assert_lookup(t, GID_2, 513, "198.51.100.2");
}

/* At most max_entries claims: the announcer heard longest ago goes first, never this agent. */
static void test_table_bounds(void **state)
{
    g_autoptr(AgentDirTable) t = agent_dir_table_new(4);
    AgentDirMsg own = msg_make(0x1, 100, 1, "10.0.0.1", 7475, GID_1, 1);

    agent_dir_table_set_own(t, own.boot_id);
    agent_dir_table_update(t, &own, 0, NULL);
    for (guint i = 2; i <= 10; i++) {
        g_autofree char *addr = g_strdup_printf("10.0.0.%u", i);
        AgentDirMsg m = msg_make((guint8)(0x10 + i), 100, 1, addr, 7475, GID_1, (guint16)i);

        m.ports[0].gid[15] = (guint8)i;
        agent_dir_table_update(t, &m, i, NULL);
        assert_true(agent_dir_table_n_claims(t) <= 4);
    }
    assert_int_equal(agent_dir_table_n_announcers(t), 4);
    assert_lookup(t, GID_1, 1, "10.0.0.1");
    assert_lookup(t, "fe800000000000000002c9030000000a", 10, "10.0.0.10");
    assert_lookup(t, "fe800000000000000002c90300000008", 8, "10.0.0.8");
    assert_absent(t, "fe800000000000000002c90300000007");
    /* the table's bound also holds at its largest */
    {
        g_autoptr(AgentDirTable) big = agent_dir_table_new(G_MAXUINT);

        for (guint i = 0; i < AGENT_DIR_ENTRIES_MAX + 100; i += 32) {
            AgentDirMsg m = msg_make(0, 100, 1, "10.1.0.1", 7475, NULL, 0);

            memcpy(m.boot_id, &i, sizeof(i));
            m.port = (guint16)(1 + i / 32);
            m.n_ports = 32;
            for (guint k = 0; k < 32; k++) {
                guint v = i + k + 1;

                m.ports[k].gid[0] = 0xfe;
                memcpy(m.ports[k].gid + 8, &v, sizeof(v));
            }
            agent_dir_table_update(big, &m, i, NULL);
        }
        assert_int_equal(agent_dir_table_n_claims(big), AGENT_DIR_ENTRIES_MAX);
    }
}

/* ---- the file --------------------------------------------------------------------------- */

static void test_file_write(void **state)
{
    g_autofree char *tmp = g_dir_make_tmp("agent-directory-test.XXXXXX", NULL);
    g_autofree char *dir = g_build_filename(tmp, "run", "verbs", NULL);
    g_autofree char *path = g_build_filename(dir, AGENT_DIR_FILE, NULL);
    g_autoptr(AgentDirTable) t = agent_dir_table_new(0);
    AgentDirMsg a = msg_make(0xa, 100, 1, "2001:db8::1", 7475, GID_2, 0);
    AgentDirMsg b = msg_make(0xb, 100, 1, "198.51.100.2", 7400, GID_1, 65535);
    g_autoptr(GString) text = NULL;
    g_autofree char *got = NULL;
    g_autoptr(GDir) d = NULL;
    const char *name;
    struct stat st;
    mode_t old = umask(077); /* as the shipped unit */

    agent_dir_table_update(t, &a, 0, NULL);
    agent_dir_table_update(t, &b, 0, NULL);
    text = agent_dir_table_format(t);
    assert_true(agent_dir_file_write(dir, text, NULL));
    umask(old);
    assert_true(g_file_get_contents(path, &got, NULL, NULL));
    assert_string_equal(got, "# hotmig-directory 1\n" GID_1 " 65535 198.51.100.2 7400\n" GID_2
                             " 0 2001:db8::1 7475\n");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* rewritten in place by a rename: nothing else is left in the directory */
    assert_true(agent_dir_file_write(dir, text, NULL));
    d = g_dir_open(dir, 0, NULL);
    while ((name = g_dir_read_name(d)))
        assert_string_equal(name, AGENT_DIR_FILE);
    /* a directory that cannot be made: an error naming it */
    {
        g_autofree char *file = g_build_filename(tmp, "plain", NULL);
        g_autofree char *under = g_build_filename(file, "verbs", NULL);
        g_autoptr(GError) error = NULL;

        assert_true(g_file_set_contents(file, "", 0, NULL));
        assert_false(agent_dir_file_write(under, text, &error));
        assert_non_null(strstr(error->message, under));
        g_unlink(file);
    }
    g_unlink(path);
    g_rmdir(dir);
    g_free(path);
    path = g_build_filename(tmp, "run", NULL);
    g_rmdir(path);
    g_rmdir(tmp);
}

/* ---- agents on loopback ------------------------------------------------------------------ */

typedef struct {
    char gid[40];
    guint16 lid;
    const char *state; /* of port 1; NULL: ACTIVE (the adapter's word for PortState 4) */
    guint lists;
    int watch_fd; /* an eventfd standing for the devices' async event fds */
    int watch_opened, watch_freed;
} FakePorts;

static GPtrArray *fake_list_devices(gpointer data, GError **error)
{
    FakePorts *f = data;
    GPtrArray *devices = g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_device_free);
    AgentRdmaDevice *dev = agent_rdma_device_new("mlx5_0", "0002:c903:0000:0001");
    AgentRdmaPort *port = agent_rdma_device_add_port(
        dev, 1, f->state ? f->state : agent_rdma_port_state_name(4), "InfiniBand", f->lid);

    f->lists++;
    g_ptr_array_add(port->gids, g_strdup(f->gid));
    g_ptr_array_add(port->gids, g_strdup("fe80::1234")); /* index 1: not announced on IB */
    /* a port that is down is not announced */
    agent_rdma_device_add_port(dev, 2, "DOWN", "InfiniBand", 0);
    g_ptr_array_add(devices, dev);
    return devices;
}

static const AgentVerbsOps fake_verbs = {.list_devices = fake_list_devices};

static AgentPortWatch *fake_port_watch_new(gpointer data, int *ret_fd, GError **error)
{
    FakePorts *f = data;

    f->watch_opened++;
    *ret_fd = f->watch_fd;
    return (AgentPortWatch *)f;
}

static guint fake_port_watch_drain(AgentPortWatch *watch)
{
    guint64 n = 0;

    if (read(((FakePorts *)watch)->watch_fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
        n = 0;
    return (guint)n;
}

static void fake_port_watch_free(AgentPortWatch *watch)
{
    ((FakePorts *)watch)->watch_freed++;
}

static const AgentVerbsOps fake_verbs_watch = {.list_devices = fake_list_devices,
                                               .port_watch_new = fake_port_watch_new,
                                               .port_watch_drain = fake_port_watch_drain,
                                               .port_watch_free = fake_port_watch_free};

typedef struct {
    char *tmp;
    char *run_dir[3];
    FakePorts ports[3];
    AgentDir *dir[3];
    const AgentVerbsOps *verbs; /* NULL: fake_verbs */
} Agents;

static void agents_init(Agents *a)
{
    memset(a, 0, sizeof(*a));
    a->tmp = g_dir_make_tmp("agent-directory-test.XXXXXX", NULL);
    for (guint i = 0; i < 3; i++) {
        a->run_dir[i] = g_strdup_printf("%s/agent%u", a->tmp, i);
        g_snprintf(a->ports[i].gid, sizeof(a->ports[i].gid), "fe80::2:c903:0:%u", i + 1);
        a->ports[i].lid = (guint16)(0x100 + i);
    }
}

static void agents_clear(Agents *a)
{
    for (guint i = 0; i < 3; i++) {
        g_autofree char *path = g_build_filename(a->run_dir[i], AGENT_DIR_FILE, NULL);

        g_clear_pointer(&a->dir[i], agent_dir_free);
        g_unlink(path);
        g_rmdir(a->run_dir[i]);
        g_free(a->run_dir[i]);
    }
    g_rmdir(a->tmp);
    g_free(a->tmp);
}

static AgentDir *agent_start_refresh(Agents *a, guint i, const char *group, const char *seeds,
                                     guint refresh_s)
{
    g_autofree char *listen = g_strdup_printf("127.0.0.1:%u", 7000 + i);
    AgentDirConfig config = {.group = group,
                             .seeds = seeds,
                             .peer_listen = listen,
                             .run_dir = a->run_dir[i],
                             .refresh_s = refresh_s,
                             .verbs = a->verbs ? a->verbs : &fake_verbs,
                             .verbs_data = &a->ports[i]};
    g_autoptr(GError) error = NULL;
    AgentDir *dir = agent_dir_new(&config, &error);

    if (!dir)
        fail_msg("agent %u: %s", i, error->message);
    return dir;
}

static AgentDir *agent_start(Agents *a, guint i, const char *group, const char *seeds)
{
    return agent_start_refresh(a, i, group, seeds, 2);
}

/* Whether agent @i's file has a line for each of @n agents, agent @who's with LID @lid. */
static gboolean file_has(Agents *a, guint i, guint n, guint who, guint16 lid)
{
    g_autofree char *path = g_build_filename(a->run_dir[i], AGENT_DIR_FILE, NULL);
    g_autofree char *text = NULL;
    g_autofree char *want = NULL;
    guint8 gid[16];
    char hex[33];
    guint lines = 0;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return FALSE;
    inet_pton(AF_INET6, a->ports[who].gid, gid);
    for (guint k = 0; k < 16; k++)
        g_snprintf(hex + 2 * k, 3, "%02x", gid[k]);
    want = g_strdup_printf("%s %u 127.0.0.1 %u\n", hex, lid, 7000 + who);
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    return g_str_has_prefix(text, AGENT_DIR_FILE_HEADER) && strstr(text, want) && lines == n + 1;
}

/* Runs the main loop until every agent's file lists all three, agent @who with @lid, at most
 * @max_ms: the time it took. */
static gint64 agents_wait(Agents *a, guint who, guint16 lid, guint max_ms)
{
    gint64 start = g_get_monotonic_time();
    gint64 end = start + (gint64)max_ms * 1000;

    while (g_get_monotonic_time() < end) {
        gboolean all = TRUE;

        for (guint i = 0; i < 3; i++)
            all = all && file_has(a, i, 3, who, lid);
        if (all)
            return (g_get_monotonic_time() - start) / 1000;
        g_main_context_iteration(NULL, TRUE);
    }
    fail_msg("the agents' files did not show agent %u with LID %u within %u ms", who, lid, max_ms);
    return -1;
}

/* A group and port of this run's own (other runs of the test may share the machine). The port
 * is below Linux's ephemeral range (ip_local_port_range, 32768-60999 by default): a port from
 * it may be held by any connection on the machine, and the bind failed "Address already in
 * use" when the lab's tests ran beside (0.0.0.0:42084, 1 of 15 runs). */
static char *random_group(void)
{
    return g_strdup_printf("239.255.%u.%u:%u", g_random_int_range(1, 255),
                           g_random_int_range(1, 255), g_random_int_range(20000, 32768));
}

static void test_agents_multicast(void **state)
{
    g_autofree char *group = random_group();
    Agents a;
    gint64 ms;

    agents_init(&a);
    for (guint i = 0; i < 3; i++)
        a.dir[i] = agent_start(&a, i, group, NULL);
    /* each announces at start, the others learn it at once or at their next refresh */
    agents_wait(&a, 0, 0x100, 10000);
    /* agent 0 moves: its port's LID is the destination's; the others' files show it at once */
    a.ports[0].lid = 0x201;
    agent_dir_identity_changed(a.dir[0]);
    ms = agents_wait(&a, 0, 0x201, 1500);
    print_message("identity change reached the others' files in %" G_GINT64_FORMAT " ms\n", ms);
    assert_int_equal(agent_dir_table_n_announcers(agent_dir_get_table(a.dir[1])), 3);
    agents_clear(&a);
}

/* An agent that starts late learns the others at once: they answer a newcomer's first
 * announcement (unicast), not only at their refresh (here a minute). */
static void test_agents_welcome(void **state)
{
    g_autofree char *group = random_group();
    Agents a;
    gint64 end;

    agents_init(&a);
    a.dir[0] = agent_start_refresh(&a, 0, group, NULL, 60);
    a.dir[1] = agent_start_refresh(&a, 1, group, NULL, 60);
    end = g_get_monotonic_time() + 1500 * G_TIME_SPAN_MILLISECOND; /* their repeat is over */
    while (g_get_monotonic_time() < end)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    a.dir[2] = agent_start_refresh(&a, 2, group, NULL, 60);
    agents_wait(&a, 2, 0x102, 800);
    agents_clear(&a);
}

/* A guest lands on a new host: its port is not up until the subnet manager sweeps, then has
 * the destination's LID. The agent watches the port's events meanwhile (and only then), and
 * its LID reaches the other agent's file as soon as the port is ACTIVE. */
static void test_agents_port_comes_up(void **state)
{
    g_autofree char *group = random_group();
    Agents a;
    gint64 start, end;

    agents_init(&a);
    a.verbs = &fake_verbs_watch;
    a.ports[0].state = "INIT";
    a.ports[0].lid = 0;
    a.ports[0].watch_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    assert_true(a.ports[0].watch_fd >= 0);
    a.dir[0] = agent_start_refresh(&a, 0, group, NULL, 60);
    a.dir[1] = agent_start_refresh(&a, 1, group, NULL, 60);
    assert_int_equal(a.ports[0].watch_opened, 1); /* its port is not up: watched */
    assert_int_equal(a.ports[1].watch_opened, 0); /* all up: no device held open */
    end = g_get_monotonic_time() + 1500 * G_TIME_SPAN_MILLISECOND;
    while (g_get_monotonic_time() < end)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    assert_false(file_has(&a, 1, 2, 0, 0x201));
    /* the sweep: ACTIVE with a LID, and the port's event */
    a.ports[0].state = "ACTIVE";
    a.ports[0].lid = 0x201;
    start = g_get_monotonic_time();
    assert_int_equal(eventfd_write(a.ports[0].watch_fd, 1), 0);
    while (!(file_has(&a, 1, 2, 0, 0x201) && file_has(&a, 0, 2, 1, 0x101)) &&
           g_get_monotonic_time() < start + G_USEC_PER_SEC)
        g_main_context_iteration(NULL, TRUE);
    assert_true(file_has(&a, 1, 2, 0, 0x201));
    assert_true(file_has(&a, 0, 2, 1, 0x101));
    print_message("a port coming up reached the other's file in %" G_GINT64_FORMAT " ms\n",
                  (g_get_monotonic_time() - start) / 1000);
    assert_int_equal(a.ports[0].watch_freed, a.ports[0].watch_opened); /* closed again */
    close(a.ports[0].watch_fd);
    agents_clear(&a);
}

/* The states as the adapter names them (libibverbs' ibv_port_state_str() says "active", which
 * the directory did not take for ACTIVE: no guest of a real provider was ever announced). */
static void test_port_state_names(void **state)
{
    static const char *const want[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};

    for (guint i = 0; i < G_N_ELEMENTS(want); i++)
        assert_string_equal(agent_rdma_port_state_name(i), want[i]);
    assert_string_equal(agent_rdma_port_state_name(6), "UNKNOWN");
    assert_string_equal(agent_rdma_port_state_name(255), "UNKNOWN");
}

/* The subnet manager activates the port after the agent started, and no port event says so
 * (the lab's SM: only the provider's ibv_query_port changes; or no port watch at all): the
 * agent reads the ports again every second while one is coming up, and its LID reaches the
 * other's file within that (the refresh is a minute). */
static void test_agents_port_up_quiet(void **state)
{
    g_autofree char *group = random_group();
    Agents a;
    gint64 start, end;

    agents_init(&a);
    a.ports[0].state = "INIT";
    a.ports[0].lid = 0;
    a.dir[0] = agent_start_refresh(&a, 0, group, NULL, 60);
    a.dir[1] = agent_start_refresh(&a, 1, group, NULL, 60);
    end = g_get_monotonic_time() + 1500 * G_TIME_SPAN_MILLISECOND;
    while (g_get_monotonic_time() < end)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    assert_false(file_has(&a, 1, 2, 0, 0x201));
    a.ports[0].state = NULL; /* ACTIVE */
    a.ports[0].lid = 0x201;
    start = g_get_monotonic_time();
    while (!(file_has(&a, 1, 2, 0, 0x201) && file_has(&a, 0, 2, 1, 0x101)) &&
           g_get_monotonic_time() < start + 3 * G_USEC_PER_SEC)
        g_main_context_iteration(NULL, TRUE);
    assert_true(file_has(&a, 1, 2, 0, 0x201));
    assert_true(file_has(&a, 0, 2, 1, 0x101));
    print_message("a port up without an event reached the other's file in %" G_GINT64_FORMAT
                  " ms\n",
                  (g_get_monotonic_time() - start) / 1000);
    /* all up: the agent no longer reads them every second */
    {
        guint lists = a.ports[0].lists;

        end = g_get_monotonic_time() + 2500 * G_TIME_SPAN_MILLISECOND;
        while (g_get_monotonic_time() < end)
            if (!g_main_context_iteration(NULL, FALSE))
                g_usleep(1000);
        assert_int_equal(a.ports[0].lists, lists);
    }
    agents_clear(&a);
}

/* Without multicast: agents 1 and 2 name agent 0 as their seed, which relays. */
static void test_agents_seeds(void **state)
{
    g_autofree char *seed = NULL;
    Agents a;
    gint64 ms;

    agents_init(&a);
    a.dir[0] = agent_start(&a, 0, "127.0.0.1:0", NULL);
    seed = g_strdup_printf("127.0.0.1:%u", agent_dir_get_port(a.dir[0]));
    a.dir[1] = agent_start(&a, 1, "127.0.0.1:0", seed);
    a.dir[2] = agent_start(&a, 2, "127.0.0.1:0", seed);
    agents_wait(&a, 2, 0x102, 10000);
    /* agent 2's change reaches agent 1 through the seed */
    a.ports[2].lid = 0x301;
    agent_dir_identity_changed(a.dir[2]);
    ms = agents_wait(&a, 2, 0x301, 1500);
    print_message("identity change reached the others' files through the seed in %" G_GINT64_FORMAT
                  " ms\n",
                  ms);
    /* a guest that is gone is forgotten after three refreshes */
    g_clear_pointer(&a.dir[2], agent_dir_free);
    {
        gint64 end = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

        while (g_get_monotonic_time() < end && !file_has(&a, 1, 2, 0, 0x100))
            g_main_context_iteration(NULL, TRUE);
        assert_true(file_has(&a, 1, 2, 0, 0x100));
        assert_true(file_has(&a, 0, 2, 1, 0x101));
    }
    agents_clear(&a);
}

static void test_config_refused(void **state)
{
    static const struct {
        const char *group, *seeds, *listen, *run_dir;
    } bad[] = {
        {"239.255.74.75", NULL, "127.0.0.1:7475", "/run/x"}, /* a group needs its port */
        {"not-an-address:7476", NULL, "127.0.0.1:7475", "/run/x"},
        {"[::1]:7476", NULL, "127.0.0.1:7475", "/run/x"}, /* IPv4 only */
        {NULL, "127.0.0.1:0:1", "127.0.0.1:7475", "/run/x"},
        {NULL, "seed.example", "127.0.0.1:7475", "/run/x"},
        {NULL, NULL, "127.0.0.1", "/run/x"},
        {NULL, NULL, "127.0.0.1:7475", "relative"},
    };

    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        AgentDirConfig config = {.group = bad[i].group,
                                 .seeds = bad[i].seeds,
                                 .peer_listen = bad[i].listen,
                                 .run_dir = bad[i].run_dir,
                                 .verbs = &fake_verbs};
        g_autoptr(GError) error = NULL;
        g_autoptr(AgentDir) dir = agent_dir_new(&config, &error);

        if (dir)
            fail_msg("config %u accepted", i);
        assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_msg_parse),
        cmocka_unit_test(test_msg_refused),
        cmocka_unit_test(test_msg_largest),
        cmocka_unit_test(test_table_update),
        cmocka_unit_test(test_table_expiry),
        cmocka_unit_test(test_table_gid_conflict),
        cmocka_unit_test(test_table_restart),
        cmocka_unit_test(test_table_lid_conflict),
        cmocka_unit_test(test_table_bounds),
        cmocka_unit_test(test_file_write),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_agents_multicast),
        cmocka_unit_test(test_agents_welcome),
        cmocka_unit_test(test_agents_port_comes_up),
        cmocka_unit_test(test_agents_seeds),
        cmocka_unit_test(test_port_state_names),
        cmocka_unit_test(test_agents_port_up_quiet),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
