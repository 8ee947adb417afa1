/* libhotmig-verbs: a connection made after a swap. LOOKUP / LOOKEDUP (guest-agent/verbs/
 * hv-proto.c, docs/protocol.md): the connecting end asks the peer's layer for the physical
 * QPN behind the virtual one its program was given, and the peer's changed rkeys. */
#include "hv-proto.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int parse(const char *line, HvMsg *m)
{
    return hv_proto_parse(line, strlen(line), m);
}

static void test_lookup_round_trip(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m)), *back = calloc(1, sizeof(*back));
    char buf[256];
    int n;

    (void)state;
    m->type = HV_MSG_LOOKUP;
    m->target = 23;
    m->sender = 0xffffff;
    m->gid[10] = m->gid[11] = 0xff; /* who asks: ::ffff:192.0.2.1 */
    m->gid[12] = 192;
    m->gid[14] = 2;
    m->gid[15] = 1;
    n = hv_proto_format(m, buf, sizeof(buf));
    assert_true(n > 0);
    assert_string_equal(buf, "LOOKUP 23 16777215 00000000000000000000ffffc0000201\n");
    assert_int_equal(hv_proto_parse(buf, (size_t)n - 1, back), 0);
    assert_int_equal(back->type, HV_MSG_LOOKUP);
    assert_int_equal(back->target, 23);
    assert_int_equal(back->sender, 0xffffff);
    assert_memory_equal(back->gid, m->gid, 16);

    memset(m, 0, sizeof(*m));
    m->type = HV_MSG_LOOKEDUP;
    m->target = 17; /* the physical QPN */
    m->lid = 0x102; /* IB: the target port's LID now */
    m->nkeys = 2;
    m->keys[0] = (HvKeyPair){0x1234, 0x5678};
    m->keys[1] = (HvKeyPair){0xffffffff, 1};
    n = hv_proto_format(m, buf, sizeof(buf));
    assert_true(n > 0);
    assert_string_equal(buf, "LOOKEDUP 17 258 2 1234:5678 ffffffff:1\n");
    assert_int_equal(hv_proto_parse(buf, (size_t)n - 1, back), 0);
    assert_int_equal(back->type, HV_MSG_LOOKEDUP);
    assert_int_equal(back->target, 17);
    assert_int_equal(back->lid, 0x102);
    assert_int_equal(back->nkeys, 2);
    assert_int_equal(back->keys[1].v, 0xffffffff);
    /* no key changed: the peer's process never swapped, or registered nothing */
    assert_int_equal(parse("LOOKEDUP 17 0 0", back), 0);
    assert_int_equal(back->nkeys, 0);
    /* the peer is moving: it answers as to a RECONNECT, and the caller asks again */
    assert_int_equal(parse("DEFER moving", back), 0);
    free(m);
    free(back);
}

static void test_lookup_refuses_bad_lines(void **state)
{
    HvMsg *m = calloc(1, sizeof(*m));
    char *big = malloc(HV_PROTO_LINE_MAX + 2);
    size_t off;

    (void)state;
#define G " 00000000000000000000ffffc0000201"
    assert_int_equal(parse("LOOKUP 23" G, m), -EINVAL);          /* no sender */
    assert_int_equal(parse("LOOKUP 23 17", m), -EINVAL);         /* no GID */
    assert_int_equal(parse("LOOKUP 23 17 0000ffffc0000201", m), -EINVAL); /* short GID */
    assert_int_equal(parse("LOOKUP 23 17" G " 1", m), -EINVAL);  /* extra */
    assert_int_equal(parse("LOOKUP 16777216 17" G, m), -EINVAL); /* > 24 bits */
    assert_int_equal(parse("LOOKUP 023 17" G, m), -EINVAL);      /* leading zero */
    assert_int_equal(parse("LOOKUP -1 17" G, m), -EINVAL);
    assert_int_equal(parse("LOOKUP 23 17" G, m), 0);
#undef G
    assert_int_equal(parse("LOOKEDUP 17 0", m), -EINVAL);          /* no count (or no LID) */
    assert_int_equal(parse("LOOKEDUP 17 0 1", m), -EINVAL);        /* fewer than said */
    assert_int_equal(parse("LOOKEDUP 17 0 1 1:2 3:4", m), -EINVAL); /* more than said */
    assert_int_equal(parse("LOOKEDUP 17 0 1 1:100000000", m), -EINVAL); /* key > 32 bits */
    assert_int_equal(parse("LOOKEDUP 16777216 0 0", m), -EINVAL);
    assert_int_equal(parse("LOOKEDUP 17 0 1 1:G", m), -EINVAL);
    assert_int_equal(parse("LOOKEDUP 17 65536 0", m), -EINVAL); /* LID > 16 bits */
    /* more keys than HV_PROTO_KEYS_MAX */
    off = (size_t)snprintf(big, HV_PROTO_LINE_MAX, "LOOKEDUP 17 0 %d", HV_PROTO_KEYS_MAX + 1);
    for (int i = 0; i <= HV_PROTO_KEYS_MAX; i++)
        off += (size_t)snprintf(big + off, HV_PROTO_LINE_MAX - off, " %x:%x", i + 1, i + 2);
    assert_int_equal(hv_proto_parse(big, off, m), -EINVAL);
    /* the formatter refuses what the parser would */
    memset(m, 0, sizeof(*m));
    m->type = HV_MSG_LOOKUP;
    m->target = 0x1000000;
    assert_int_equal(hv_proto_format(m, big, HV_PROTO_LINE_MAX + 2), -EINVAL);
    m->type = HV_MSG_LOOKEDUP;
    m->target = 17;
    m->nkeys = HV_PROTO_KEYS_MAX + 1;
    assert_int_equal(hv_proto_format(m, big, HV_PROTO_LINE_MAX + 2), -EINVAL);
    free(big);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_round_trip),
        cmocka_unit_test(test_lookup_refuses_bad_lines),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
