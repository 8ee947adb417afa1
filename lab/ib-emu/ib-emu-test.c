/* lab-ib-emu: the SM frame parser and the LID <-> address mapping of the lab's IB emulation. */
#include "ib-emu.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

static void test_lid_address_roundtrip(void **state)
{
    uint8_t ip[4], gid[16];

    hm_ib_lid_to_ipv4(0x0105, ip);
    assert_int_equal(ip[0], 198);
    assert_int_equal(ip[1], 18);
    assert_int_equal(ip[2], 1);
    assert_int_equal(ip[3], 5);
    assert_int_equal(hm_ib_ipv4_to_lid(ip), 0x0105);
    hm_ib_lid_to_gid(0x0203, gid);
    assert_int_equal(hm_ib_gid_to_lid(gid), 0x0203);
}

static void test_other_addresses_carry_no_lid(void **state)
{
    const uint8_t vf[4] = {192, 0, 2, 5}, zero[4] = {198, 18, 0, 0}, mcast[4] = {198, 18, 192, 1};
    uint8_t gid[16];

    assert_int_equal(hm_ib_ipv4_to_lid(vf), 0);
    assert_int_equal(hm_ib_ipv4_to_lid(zero), 0);
    assert_int_equal(hm_ib_ipv4_to_lid(mcast), 0); /* 0xc001 is multicast, not a port's */
    hm_ib_lid_to_gid(0x0105, gid);
    gid[0] = 0xfe; /* not IPv4-mapped */
    assert_int_equal(hm_ib_gid_to_lid(gid), 0);
}

static void test_frame_parse(void **state)
{
    const char ok[] = "HMIBSM1 state=ACTIVE lid=0x0105 sm_lid=0x0001 host=A slot=5\n\0\0\0";
    const char init[] = "HMIBSM1 state=INIT lid=0x0205 sm_lid=0x0001 host=B slot=5";
    HmIbSmFrame f;

    assert_int_equal(hm_ib_sm_frame_parse(ok, sizeof(ok), &f), 0);
    assert_int_equal(f.state, HM_IB_PORT_ACTIVE);
    assert_int_equal(f.lid, 0x0105);
    assert_int_equal(f.sm_lid, 1);
    assert_string_equal(f.host, "A");
    assert_int_equal(f.slot, 5);
    assert_int_equal(f.node_guid, 0);
    assert_int_equal(f.port_guid, 0);
    assert_int_equal(hm_ib_sm_frame_parse(init, strlen(init), &f), 0);
    assert_int_equal(f.state, HM_IB_PORT_INIT);
}

/* The VF's GUIDs ride along when hotmigd set some (docs/ib-identity.md "Stand-ins"). */
static void test_frame_parse_guids(void **state)
{
    const char ok[] = "HMIBSM1 state=ACTIVE lid=0x0205 sm_lid=0x0001 host=B slot=5 "
                      "node_guid=0x0002c90300a1b2c3 port_guid=0x0002c90300a1b2c4\n";
    static const char *bad[] = {
        "HMIBSM1 state=ACTIVE lid=0x0205 sm_lid=0x0001 host=B slot=5 node_guid=0x1",
        "HMIBSM1 state=ACTIVE lid=0x0205 sm_lid=0x0001 host=B slot=5 node_guid=0x0 port_guid=0x2",
        "HMIBSM1 state=ACTIVE lid=0x0205 sm_lid=0x0001 host=B slot=5 node_guid=0x1 port_guid=0x0",
        "HMIBSM1 state=ACTIVE lid=0x0205 sm_lid=0x0001 host=B slot=5 node_guid=zz port_guid=0x2",
    };
    HmIbSmFrame f;
    char text[24];
    uint64_t g = 0;

    assert_int_equal(hm_ib_sm_frame_parse(ok, strlen(ok), &f), 0);
    assert_true(f.node_guid == 0x0002c90300a1b2c3ULL);
    assert_true(f.port_guid == 0x0002c90300a1b2c4ULL);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(hm_ib_sm_frame_parse(bad[i], strlen(bad[i]), &f), -1);
    hm_ib_guid_format(0x0002c90300a1b2c3ULL, text, sizeof(text));
    assert_string_equal(text, "0002:c903:00a1:b2c3");
    assert_int_equal(hm_ib_guid_parse("0002:c903:00a1:b2c3\n", &g), 0);
    assert_true(g == 0x0002c90300a1b2c3ULL);
    assert_int_equal(hm_ib_guid_parse("0002:c903:00a1", &g), -1);
    assert_int_equal(hm_ib_guid_parse("0002:c903:00a1:b2c3x", &g), -1);
}

static void test_frame_parse_rejects(void **state)
{
    static const char *bad[] = {
        "",
        "HMIBSM2 state=ACTIVE lid=0x0105 sm_lid=0x0001 host=A slot=5",
        "HMIBSM1 state=ARMED lid=0x0105 sm_lid=0x0001 host=A slot=5",
        "HMIBSM1 state=ACTIVE lid=0x0000 sm_lid=0x0001 host=A slot=5",
        "HMIBSM1 state=ACTIVE lid=0xc000 sm_lid=0x0001 host=A slot=5",
        "HMIBSM1 state=ACTIVE lid=0x0105 sm_lid=0x0000 host=A slot=5",
        "HMIBSM1 state=ACTIVE lid=0x0105",
    };
    char big[HM_IB_FRAME_MAX * 2];
    HmIbSmFrame f = {.lid = 7};

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(hm_ib_sm_frame_parse(bad[i], strlen(bad[i]), &f), -1);
        assert_int_equal(f.lid, 7); /* untouched */
    }
    memset(big, 'x', sizeof(big));
    assert_int_equal(hm_ib_sm_frame_parse(big, sizeof(big), &f), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lid_address_roundtrip),
        cmocka_unit_test(test_other_addresses_carry_no_lid),
        cmocka_unit_test(test_frame_parse),
        cmocka_unit_test(test_frame_parse_rejects),
        cmocka_unit_test(test_frame_parse_guids),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
