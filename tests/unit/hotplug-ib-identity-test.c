/* Unit tests for the InfiniBand identity of a VF (hotplug/ib-identity.c): GUIDs set through the
 * PF over a fake netlink adapter, the skip rule, bad input, GUID text, injected failures. */
#include <net/if_arp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib/gstdio.h>

#include "hotplug/hotplug.h"
#include "hotplug/netlink-priv.h"
#include "netlink-fake.h"
#include "test-error.h"

static const guint64 node_guid = 0x0002c90300a1b2c3ULL;
static const guint64 port_guid = 0x0002c90300a1b2c4ULL;

/* Every test: a fake host with an InfiniBand PF of 8 VFs, an Ethernet PF of 4 VFs and an
 * InfiniBand PF without VFs. */
typedef struct {
    NetlinkFake *fake;
    HotplugNetlink *nl;
} Fixture;

static int fixture_setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);

    f->fake = netlink_fake_new();
    netlink_fake_add_link(f->fake, "ib0", ARPHRD_INFINIBAND, 8);
    netlink_fake_add_link(f->fake, "enp59s0f0", ARPHRD_ETHER, 4);
    netlink_fake_add_link(f->fake, "ib1", ARPHRD_INFINIBAND, 0);
    f->nl = netlink_fake_adapter(f->fake);
    *state = f;
    return 0;
}

static int fixture_teardown(void **state)
{
    Fixture *f = *state;

    hotplug_netlink_free(f->nl);
    netlink_fake_free(f->fake);
    g_free(f);
    return 0;
}

static void assert_calls(Fixture *f, const char *expected)
{
    g_autofree char *calls = netlink_fake_calls_joined(f->fake);

    assert_string_equal(calls, expected);
}

static void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        fail_msg("'%s' does not contain '%s'", haystack, needle);
}

/* ---- applying ------------------------------------------------------------------------------ */

static void test_ib_pf_sets_both_guids(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    char *note = (char *)"untouched";

    assert_true(hotplug_ib_identity_apply(f->nl, "ib0", 3, node_guid, port_guid, &note, &error));
    assert_null(error);
    assert_null(note);
    /* One lookup, then one request per GUID, node first. */
    assert_calls(f, "link_info ib0; vf_set_guid ib0 3 node 0002:c903:00a1:b2c3; "
                    "vf_set_guid ib0 3 port 0002:c903:00a1:b2c4");
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 3, HOTPLUG_GUID_NODE) == node_guid);
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 3, HOTPLUG_GUID_PORT) == port_guid);
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 2, HOTPLUG_GUID_NODE) == 0);

    /* The last VF is in range. */
    assert_true(hotplug_ib_identity_apply(f->nl, "ib0", 7, node_guid, port_guid, &note, &error));
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 7, HOTPLUG_GUID_PORT) == port_guid);
}

static void test_ethernet_pf_skipped(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *note = NULL;
    g_autofree char *note2 = NULL;

    assert_true(
        hotplug_ib_identity_apply(f->nl, "enp59s0f0", 1, node_guid, port_guid, &note, &error));
    assert_null(error);
    assert_non_null(note);
    assert_string_equal(note, "PF 'enp59s0f0' is not InfiniBand (link type 1, Ethernet): the "
                              "GUIDs of VF 1 were left as they are");
    assert_calls(f, "link_info enp59s0f0");
    assert_true(netlink_fake_vf_guid(f->fake, "enp59s0f0", 1, HOTPLUG_GUID_NODE) == 0);

    /* Skipped before the VF index is looked at: nothing of this PF is ours to check. */
    assert_true(
        hotplug_ib_identity_apply(f->nl, "enp59s0f0", 99, node_guid, port_guid, &note2, &error));
    assert_null(error);
    assert_non_null(note2);
    assert_calls(f, "link_info enp59s0f0; link_info enp59s0f0");
}

static void test_unknown_pf(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    char *note = (char *)"untouched";

    assert_false(hotplug_ib_identity_apply(f->nl, "ib7", 0, node_guid, port_guid, &note, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND);
    assert_string_equal(error->message, "Giving VF 0 of 'ib7' node GUID 0002:c903:00a1:b2c3 and "
                                        "port GUID 0002:c903:00a1:b2c4: No net device 'ib7'");
    assert_string_equal(note, "untouched");
    assert_calls(f, "link_info ib7");
}

static void test_vf_index_out_of_range(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) error2 = NULL;
    char *note = (char *)"untouched";

    assert_false(hotplug_ib_identity_apply(f->nl, "ib0", 8, node_guid, port_guid, &note, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF);
    assert_string_equal(error->message, "Giving VF 8 of 'ib0' node GUID 0002:c903:00a1:b2c3 and "
                                        "port GUID 0002:c903:00a1:b2c4: 'ib0' has 8 VFs (0 to 7)");

    assert_false(hotplug_ib_identity_apply(f->nl, "ib1", 0, node_guid, port_guid, &note, &error2));
    assert_error(error2, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF);
    assert_contains(error2->message, ": 'ib1' has no VFs enabled");

    assert_string_equal(note, "untouched");
    /* Looked up, nothing set. */
    assert_calls(f, "link_info ib0; link_info ib1");
}

static void test_bad_input_changes_nothing(void **state)
{
    Fixture *f = *state;
    static const char *const bad_names[] = {
        "", ".", "..", "ib/0", "ib:0", "ib 0", "ib0\n", "sixteen_chars_xx",
    };
    char *note = (char *)"untouched";

    for (gsize i = 0; i < G_N_ELEMENTS(bad_names); i++) {
        g_autoptr(GError) error = NULL;

        assert_false(
            hotplug_ib_identity_apply(f->nl, bad_names[i], 0, node_guid, port_guid, &note, &error));
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID);
        assert_contains(error->message, "is not a valid interface name");
        assert_contains(error->message, "node GUID 0002:c903:00a1:b2c3 and port GUID");
    }
    {
        g_autoptr(GError) error = NULL;

        /* The longest valid name is 15 bytes: it reaches the adapter (and is not found). */
        assert_false(hotplug_ib_identity_apply(f->nl, "fifteen_chars_x", 0, node_guid, port_guid,
                                               &note, &error));
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND);
    }
    {
        g_autoptr(GError) error = NULL;

        /* A control byte is quoted escaped. */
        assert_false(
            hotplug_ib_identity_apply(f->nl, "ib\t0", 0, node_guid, port_guid, &note, &error));
        assert_contains(error->message, "'ib\\t0' is not a valid interface name");
    }
    {
        g_autoptr(GError) error = NULL;

        assert_false(hotplug_ib_identity_apply(f->nl, "ib0", 2, 0, port_guid, &note, &error));
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID);
        assert_string_equal(error->message,
                            "Giving VF 2 of 'ib0' node GUID 0000:0000:0000:0000 and port GUID "
                            "0002:c903:00a1:b2c4: the node GUID must not be zero");
    }
    {
        g_autoptr(GError) error = NULL;

        assert_false(hotplug_ib_identity_apply(f->nl, "ib0", 2, node_guid, 0, &note, &error));
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID);
        assert_contains(error->message, ": the port GUID must not be zero");
    }
    assert_string_equal(note, "untouched");
    assert_calls(f, "link_info fifteen_chars_x");
}

/* ---- injected failures --------------------------------------------------------------------- */

/* The shipped fault wrapper over the fake: the port GUID request fails, the node GUID stays
 * set, the error names PF, VF and both GUIDs and says which call failed. */
static void test_injected_failure_propagates(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    g_autoptr(HotplugNetlink) nl = NULL;
    char *note = (char *)"untouched";

    nl = hotplug_netlink_fault_wrap(netlink_fake_adapter(f->fake), "destination",
                                    "migrate@source,netlink_vf_set_guid@destination#2", &error);
    assert_non_null(nl);
    assert_null(error);

    assert_false(hotplug_ib_identity_apply(nl, "ib0", 5, node_guid, port_guid, &note, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK);
    assert_string_equal(error->message,
                        "Giving VF 5 of 'ib0' node GUID 0002:c903:00a1:b2c3 and port GUID "
                        "0002:c903:00a1:b2c4: injected fault: netlink_vf_set_guid on "
                        "destination host (call 2)");
    assert_string_equal(note, "untouched");
    /* The injected fault stops the second request before the adapter sees it. */
    assert_calls(f, "link_info ib0; vf_set_guid ib0 5 node 0002:c903:00a1:b2c3");
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 5, HOTPLUG_GUID_NODE) == node_guid);
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 5, HOTPLUG_GUID_PORT) == 0);

    /* #2 was that rule's only hit: applying again sets both. */
    g_clear_error(&error);
    assert_true(hotplug_ib_identity_apply(nl, "ib0", 5, node_guid, port_guid, &note, &error));
    assert_null(note);
    assert_true(netlink_fake_vf_guid(f->fake, "ib0", 5, HOTPLUG_GUID_PORT) == port_guid);
}

/* Fails each adapter call of one apply in turn (the fake's counter): every failure is reported
 * with the PF, VF and GUIDs, and no call follows the failed one. */
static void test_fault_walk(void **state)
{
    Fixture *f = *state;
    guint n_calls;

    {
        g_autoptr(GError) error = NULL;
        char *note = NULL;

        assert_true(
            hotplug_ib_identity_apply(f->nl, "ib0", 1, node_guid, port_guid, &note, &error));
        n_calls = netlink_fake_calls(f->fake)->len;
        assert_int_equal(n_calls, 3);
    }
    for (guint nth = 1; nth <= n_calls; nth++) {
        g_autoptr(GError) error = NULL;
        char *note = (char *)"untouched";
        guint before = netlink_fake_calls(f->fake)->len;

        netlink_fake_fail_nth(f->fake, nth, "kernel said no");
        assert_false(
            hotplug_ib_identity_apply(f->nl, "ib0", 1, node_guid, port_guid, &note, &error));
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK);
        assert_string_equal(error->message,
                            "Giving VF 1 of 'ib0' node GUID 0002:c903:00a1:b2c3 and port GUID "
                            "0002:c903:00a1:b2c4: kernel said no");
        assert_string_equal(note, "untouched");
        assert_int_equal(netlink_fake_calls(f->fake)->len - before, nth);
    }
    netlink_fake_fail_nth(f->fake, 0, NULL);
}

static void test_fault_spec(void **state)
{
    Fixture *f = *state;
    static const struct {
        const char *spec;
        const char *message;
    } bad[] = {
        {"netlink_bogus", "Fault spec 'netlink_bogus': unknown operation 'netlink_bogus' "
                          "(netlink_link_info, netlink_vf_set_guid, netlink_vf_get_guids)"},
        {"netlink_link_info#0",
         "Fault spec 'netlink_link_info#0': call count '0' is not a positive number"},
        {"device_attach, netlink_link_info@elsewhere",
         "Fault spec 'netlink_link_info@elsewhere': host must be 'source' or 'destination', not "
         "'elsewhere'"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;

        /* The wrapper owns the inner adapter also when it fails (ASan checks the free). */
        assert_null(hotplug_netlink_fault_wrap(netlink_fake_adapter(f->fake), "destination",
                                               bad[i].spec, &error));
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID);
        assert_string_equal(error->message, bad[i].message);
    }

    /* Rules of other adapters and of the other host do not touch this one. */
    {
        g_autoptr(GError) error = NULL;
        g_autoptr(HotplugNetlink) nl = hotplug_netlink_fault_wrap(
            netlink_fake_adapter(f->fake), "destination",
            "device_attach,migrate#2,netlink_link_info@source,,", &error);
        char *note = NULL;

        assert_non_null(nl);
        assert_true(hotplug_ib_identity_apply(nl, "ib0", 0, node_guid, port_guid, &note, &error));
        assert_null(error);
    }
    /* Without a count every matching call fails. */
    {
        g_autoptr(GError) error = NULL;
        g_autoptr(HotplugNetlink) nl = hotplug_netlink_fault_wrap(
            netlink_fake_adapter(f->fake), "source", "netlink_link_info", &error);
        char *note = NULL;

        assert_non_null(nl);
        for (guint i = 1; i <= 2; i++) {
            g_autoptr(GError) call_error = NULL;
            g_autofree char *expected = g_strdup_printf(
                "Giving VF 0 of 'ib0' node GUID 0002:c903:00a1:b2c3 and port GUID "
                "0002:c903:00a1:b2c4: injected fault: netlink_link_info on source host (call %u)",
                i);

            assert_false(
                hotplug_ib_identity_apply(nl, "ib0", 0, node_guid, port_guid, &note, &call_error));
            assert_string_equal(call_error->message, expected);
        }
    }
}

/* ---- GUID text ----------------------------------------------------------------------------- */

static void test_guid_parse_forms(void **state)
{
    static const char *const forms[] = {
        "0x0002c90300a1b2c3",      "0X0002C90300A1B2C3",  "0x2c90300a1b2c3",
        "0002:c903:00a1:b2c3",     "0002:C903:00A1:B2C3", "00:02:c9:03:00:a1:b2:c3",
        "00:02:C9:03:00:A1:B2:C3",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(forms); i++) {
        g_autoptr(GError) error = NULL;
        guint64 guid = 0;

        if (!hotplug_guid_parse(forms[i], &guid, &error))
            fail_msg("'%s': %s", forms[i], error->message);
        assert_true(guid == node_guid);
    }
}

static void test_guid_round_trip(void **state)
{
    static const struct {
        guint64 guid;
        const char *text;
    } cases[] = {
        {0x0002c90300a1b2c3ULL, "0002:c903:00a1:b2c3"},
        {0, "0000:0000:0000:0000"},
        {1, "0000:0000:0000:0001"},
        {G_MAXUINT64, "ffff:ffff:ffff:ffff"},
        {0x8000000000000000ULL, "8000:0000:0000:0000"},
        {0x5054000000ff1234ULL, "5054:0000:00ff:1234"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *text = hotplug_guid_format(cases[i].guid);
        g_autofree char *hex = g_strdup_printf("0x%016" G_GINT64_MODIFIER "x", cases[i].guid);
        guint64 back = 42;

        assert_string_equal(text, cases[i].text);
        assert_true(hotplug_guid_parse(text, &back, &error));
        assert_true(back == cases[i].guid);
        assert_true(hotplug_guid_parse(hex, &back, &error));
        assert_true(back == cases[i].guid);
    }
}

static void test_guid_parse_rejects(void **state)
{
    static const char *const bad[] = {
        "",
        "0x",
        "0x00002c90300a1b2c3", /* 17 digits */
        "0x0002c90300a1b2cg",
        "0x-1",
        "0x 1",
        "0002c90300a1b2c3", /* no prefix, no colons */
        "0002:c903:00a1:b2c",
        "0002:c903:00a1:b2c3:",
        "0002:c903:00a1:b2c33",
        "0002:c903:00a1-b2c3",
        "002:c9030:00a1:b2c3",
        " 0002:c903:00a1:b2c3",
        "0002:c903:00a1:b2c3\n",
        "00:02:c9:03:00:a1:b2",
        "00:02:c9:03:00:a1:b2:c3:",
        "00-02-c9-03-00-a1-b2-c3",
        "0:02:c9:03:00:a1:b2:c3a",
        "fe80::2:c903:a1:b2c3",
        "ib0",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        guint64 guid = 42;

        if (hotplug_guid_parse(bad[i], &guid, &error))
            fail_msg("'%s' parsed as 0x%" G_GINT64_MODIFIER "x", bad[i], guid);
        assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID);
        assert_contains(error->message, "is not of the form 0x0002c90300a1b2c3, "
                                        "0002:c903:00a1:b2c3 or 00:02:c9:03:00:a1:b2:c3");
        assert_true(guid == 42);
    }
}

static void test_guid_parse_message_bounded(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) error2 = NULL;
    g_autofree char *long_text = g_strnfill(1000, 'a');
    guint64 guid = 42;

    assert_false(hotplug_guid_parse(long_text, &guid, &error));
    /* 40 bytes of the input, then "...". */
    assert_contains(error->message, "GUID 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is not");
    assert_true(strlen(error->message) < 200);

    assert_false(hotplug_guid_parse("00:02\x1b[2J\xff", &guid, &error2));
    assert_contains(error2->message, "GUID '00:02\\033[2J\\377' is not");
    assert_true(guid == 42);
}

/* ---- reading (the identity a migration carries comes from the host, issue 15) ------------ */

static void test_read_back(void **state)
{
    Fixture *f = *state;
    g_autoptr(GError) error = NULL;
    char *note = NULL;
    guint64 node = 42;
    guint64 port = 42;

    /* A driver that reports nothing (the fake's VF with no GUIDs): UNKNOWN, outputs untouched. */
    assert_false(hotplug_ib_identity_read(f->nl, "ib0", 3, &node, &port, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN);
    assert_true(node == 42 && port == 42);
    g_clear_error(&error);

    assert_true(hotplug_ib_identity_apply(f->nl, "ib0", 3, node_guid, port_guid, &note, &error));
    assert_true(hotplug_ib_identity_read(f->nl, "ib0", 3, &node, &port, &error));
    assert_null(error);
    assert_true(node == node_guid && port == port_guid);

    /* Not InfiniBand, no such device, no such VF, a bad name: an error, outputs untouched. */
    node = port = 42;
    assert_false(hotplug_ib_identity_read(f->nl, "enp59s0f0", 1, &node, &port, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN);
    assert_contains(error->message, "is not InfiniBand");
    g_clear_error(&error);
    assert_false(hotplug_ib_identity_read(f->nl, "ib7", 0, &node, &port, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND);
    g_clear_error(&error);
    assert_false(hotplug_ib_identity_read(f->nl, "ib0", 8, &node, &port, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF);
    g_clear_error(&error);
    assert_false(hotplug_ib_identity_read(f->nl, "ib0/x", 0, &node, &port, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID);
    assert_true(node == 42 && port == 42);
}

/* ---- the stand-ins' adapter (netlink-standin.c) -------------------------------------------- */

static char *read_line_of(const char *dir, const char *netdev, const char *name)
{
    g_autofree char *path = g_build_filename(dir, netdev, name, NULL);
    char *text = NULL;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    return text;
}

static void write_line_of(const char *dir, const char *netdev, const char *name, const char *text)
{
    g_autofree char *path = g_build_filename(dir, netdev, name, NULL);

    assert_true(g_file_set_contents(path, text, -1, NULL));
}

static void rm_tree(const char *path)
{
    g_autoptr(GDir) d = g_dir_open(path, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *child = g_build_filename(path, name, NULL);

        if (g_file_test(child, G_FILE_TEST_IS_DIR))
            rm_tree(child);
        else
            g_unlink(child);
    }
    g_rmdir(path);
}

/* A stand-in with a directory is an IB PF with VF 0: both GUIDs written as files (ip-link
 * form), read back; one without is Ethernet (skipped, nothing written). */
static void test_standin_apply_and_read(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-standin-XXXXXX", NULL);
    g_autofree char *ib = g_build_filename(dir, "hmlab0vf3", NULL);
    g_autoptr(HotplugNetlink) nl = hotplug_netlink_standin_new(dir);
    g_autoptr(GError) error = NULL;
    g_autofree char *note = NULL;
    g_autofree char *node = NULL;
    g_autofree char *port = NULL;
    guint64 n = 0, p = 0;

    assert_int_equal(g_mkdir(ib, 0755), 0);
    /* Nothing set yet: the driver does not know. */
    assert_false(hotplug_ib_identity_read(nl, "hmlab0vf3", 0, &n, &p, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN);
    assert_contains(error->message, "Stand-in 'hmlab0vf3' has no node GUID");
    g_clear_error(&error);
    assert_true(hotplug_ib_identity_apply(nl, "hmlab0vf3", 0, node_guid, port_guid, &note, &error));
    assert_null(error);
    assert_null(note);
    node = read_line_of(dir, "hmlab0vf3", "node");
    port = read_line_of(dir, "hmlab0vf3", "port");
    assert_string_equal(node, "00:02:c9:03:00:a1:b2:c3\n");
    assert_string_equal(port, "00:02:c9:03:00:a1:b2:c4\n");
    assert_true(hotplug_ib_identity_read(nl, "hmlab0vf3", 0, &n, &p, &error));
    assert_true(n == node_guid && p == port_guid);
    /* VF 0 only. */
    assert_false(
        hotplug_ib_identity_apply(nl, "hmlab0vf3", 1, node_guid, port_guid, &note, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NO_VF);
    assert_contains(error->message, "'hmlab0vf3' has 1 VFs (0 to 0)");
    g_clear_error(&error);
    /* No directory: a RoCE stand-in, left alone with a note. */
    assert_true(hotplug_ib_identity_apply(nl, "hmlab0vf4", 0, node_guid, port_guid, &note, &error));
    assert_string_equal(note, "PF 'hmlab0vf4' is not InfiniBand (link type 1, Ethernet): the GUIDs "
                              "of VF 0 were left as they are");
    g_clear_pointer(&note, g_free);
    assert_false(hotplug_ib_identity_read(nl, "hmlab0vf4", 0, &n, &p, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_UNKNOWN);
    g_clear_error(&error);
    {
        g_autofree char *none = g_build_filename(dir, "hmlab0vf4", NULL);

        assert_false(g_file_test(none, G_FILE_TEST_EXISTS));
    }
    rm_tree(dir);
}

/* A file that is not one GUID is reported, never taken; a failing write names the file's
 * error; injected faults pass through the same wrapper as the kernel's adapter. */
static void test_standin_bad_files_and_faults(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-standin-XXXXXX", NULL);
    g_autofree char *ib = g_build_filename(dir, "hmlab0vf3", NULL);
    g_autofree char *blocked = g_build_filename(dir, "hmlab0vf5", "node", NULL);
    g_autoptr(HotplugNetlink) nl = hotplug_netlink_standin_new(dir);
    g_autoptr(HotplugNetlink) faulty = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *note = NULL;
    g_autofree char *big = g_strnfill(100, 'a');
    guint64 n = 7, p = 7;

    assert_int_equal(g_mkdir(ib, 0755), 0);
    write_line_of(dir, "hmlab0vf3", "node", "00:02:c9:03:00:a1:b2:c3\n");
    write_line_of(dir, "hmlab0vf3", "port", "not a guid\n");
    assert_false(hotplug_ib_identity_read(nl, "hmlab0vf3", 0, &n, &p, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS);
    assert_contains(error->message, "The port GUID of stand-in 'hmlab0vf3': GUID 'not a guid'");
    assert_true(n == 7 && p == 7);
    g_clear_error(&error);
    write_line_of(dir, "hmlab0vf3", "port", big);
    assert_false(hotplug_ib_identity_read(nl, "hmlab0vf3", 0, &n, &p, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS);
    assert_contains(error->message, "is not one line of at most 64 bytes");
    g_clear_error(&error);
    /* The GUID's place is taken by a directory: the write fails, named. */
    assert_int_equal(g_mkdir_with_parents(blocked, 0755), 0);
    assert_false(
        hotplug_ib_identity_apply(nl, "hmlab0vf5", 0, node_guid, port_guid, &note, &error));
    assert_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NETLINK);
    assert_contains(error->message, "Giving VF 0 of 'hmlab0vf5' node GUID 0002:c903:00a1:b2c3 and "
                                    "port GUID 0002:c903:00a1:b2c4: Setting the node GUID of VF 0 "
                                    "of stand-in 'hmlab0vf5' to 0002:c903:00a1:b2c3: ");
    g_clear_error(&error);
    /* The port GUID request fails: the node GUID was set (as the kernel's). */
    faulty =
        hotplug_netlink_fault_wrap(g_steal_pointer(&nl), "local", "netlink_vf_set_guid#2", &error);
    assert_non_null(faulty);
    assert_false(hotplug_ib_identity_apply(faulty, "hmlab0vf3", 0, node_guid, 0x2, &note, &error));
    assert_contains(error->message, "injected fault: netlink_vf_set_guid on local host (call 2)");
    g_clear_error(&error);
    {
        g_autofree char *node = read_line_of(dir, "hmlab0vf3", "node");

        assert_string_equal(node, "00:02:c9:03:00:a1:b2:c3\n");
    }
    rm_tree(dir);
}

#define FIXTURE_TEST(fn) cmocka_unit_test_setup_teardown(fn, fixture_setup, fixture_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_ib_pf_sets_both_guids),
        FIXTURE_TEST(test_ethernet_pf_skipped),
        FIXTURE_TEST(test_unknown_pf),
        FIXTURE_TEST(test_vf_index_out_of_range),
        FIXTURE_TEST(test_bad_input_changes_nothing),
        FIXTURE_TEST(test_injected_failure_propagates),
        FIXTURE_TEST(test_fault_walk),
        FIXTURE_TEST(test_fault_spec),
        FIXTURE_TEST(test_read_back),
        cmocka_unit_test(test_standin_apply_and_read),
        cmocka_unit_test(test_standin_bad_files_and_faults),
        cmocka_unit_test(test_guid_parse_forms),
        cmocka_unit_test(test_guid_round_trip),
        cmocka_unit_test(test_guid_parse_rejects),
        cmocka_unit_test(test_guid_parse_message_bounded),
    };

    return cmocka_run_group_tests_name("hotplug-ib-identity", tests, NULL, NULL);
}
