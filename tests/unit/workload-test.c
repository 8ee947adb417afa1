/* hm-pingpong's pure parts: data messages, control lines, the line splitter, arguments. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/workload/wl.h"

/* ---- messages ---------------------------------------------------------------------------- */

static void test_fnv1a64_known_values(void **state)
{
    /* Reference values of FNV-1a 64. */
    assert_true(wl_fnv1a64("", 0) == 0xcbf29ce484222325ull);
    assert_true(wl_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(wl_fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
}

static void test_msg_roundtrip(void **state)
{
    static const size_t sizes[] = {WL_MSG_SIZE_MIN, 65, 4096, 4097, 65536};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        uint8_t *buf = malloc(sizes[s]);
        assert_non_null(buf);
        for (uint64_t seq = 0; seq < 5; seq++) {
            uint64_t got = 99;
            uint64_t want = seq;
            wl_msg_encode(buf, sizes[s], seq * 1000003);
            want = seq * 1000003;
            assert_int_equal(wl_msg_verify(buf, sizes[s], sizes[s], &want, &got), WL_MSG_OK);
            assert_true(got == want);
            assert_true(wl_msg_peek_seq(buf, sizes[s]) == want);
            assert_int_equal(wl_msg_verify(buf, sizes[s], sizes[s], NULL, NULL), WL_MSG_OK);
        }
        free(buf);
    }
}

static void test_msg_payload_differs_by_seq(void **state)
{
    uint8_t a[256], b[256];
    wl_msg_encode(a, sizeof(a), 1);
    wl_msg_encode(b, sizeof(b), 2);
    assert_memory_not_equal(a + WL_MSG_HEADER_SIZE, b + WL_MSG_HEADER_SIZE,
                            sizeof(a) - WL_MSG_HEADER_SIZE);
}

static void test_msg_detects_corruption(void **state)
{
    uint8_t buf[512];
    uint64_t seq = 7, other = 8, got = 0;

    /* every single flipped bit is caught */
    for (size_t bit = 0; bit < sizeof(buf) * 8; bit++) {
        wl_msg_encode(buf, sizeof(buf), seq);
        buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_not_equal(wl_msg_verify(buf, sizeof(buf), sizeof(buf), &seq, NULL), WL_MSG_OK);
    }

    wl_msg_encode(buf, sizeof(buf), seq);
    assert_int_equal(wl_msg_verify(buf, sizeof(buf), sizeof(buf), &other, &got), WL_MSG_BAD_SEQ);
    assert_true(got == 7);
    /* truncated, wrong expected size, short header */
    assert_int_equal(wl_msg_verify(buf, sizeof(buf) - 1, sizeof(buf), &seq, NULL),
                     WL_MSG_BAD_LENGTH);
    assert_int_equal(wl_msg_verify(buf, sizeof(buf), 256, &seq, NULL), WL_MSG_BAD_LENGTH);
    assert_int_equal(wl_msg_verify(buf, 10, sizeof(buf), &seq, NULL), WL_MSG_BAD_LENGTH);
    /* bad magic */
    buf[0] ^= 0xff;
    assert_int_equal(wl_msg_verify(buf, sizeof(buf), sizeof(buf), &seq, NULL), WL_MSG_BAD_MAGIC);
    buf[0] ^= 0xff;
    /* checksum recomputed by a "corrupter" still leaves the payload pattern wrong */
    wl_msg_encode(buf, sizeof(buf), seq);
    memset(buf + WL_MSG_HEADER_SIZE, 0, 16);
    uint64_t h = wl_fnv1a64(buf + WL_MSG_HEADER_SIZE, sizeof(buf) - WL_MSG_HEADER_SIZE);
    for (int i = 0; i < 8; i++) {
        buf[16 + i] = (uint8_t)(h >> (8 * i));
    }
    assert_int_equal(wl_msg_verify(buf, sizeof(buf), sizeof(buf), &seq, NULL), WL_MSG_BAD_PAYLOAD);
    /* payload of another seq under this header */
    uint8_t other_buf[512];
    wl_msg_encode(other_buf, sizeof(other_buf), 8);
    wl_msg_encode(buf, sizeof(buf), seq);
    memcpy(buf + WL_MSG_HEADER_SIZE, other_buf + WL_MSG_HEADER_SIZE,
           sizeof(buf) - WL_MSG_HEADER_SIZE);
    assert_int_equal(wl_msg_verify(buf, sizeof(buf), sizeof(buf), &seq, NULL), WL_MSG_BAD_CHECKSUM);
    assert_string_equal(wl_msg_status_to_string(WL_MSG_BAD_CHECKSUM), "checksum mismatch");
    assert_string_equal(wl_msg_status_to_string(WL_MSG_LAST), "unknown");
}

/* ---- control lines ----------------------------------------------------------------------- */

static void roundtrip(const WlCtlMsg *in, const char *want_line)
{
    char line[WL_CTL_LINE_MAX];
    char err[160];
    WlCtlMsg out;
    int n = wl_ctl_format(in, line, sizeof(line));

    assert_true(n > 0);
    assert_string_equal(line, want_line);
    line[n - 1] = '\0'; /* newline */
    assert_int_equal(wl_ctl_parse(line, &out, err, sizeof(err)), 0);
    assert_int_equal(out.type, in->type);
    assert_memory_equal(&out.u, &in->u, sizeof(out.u));
}

static void test_ctl_roundtrip(void **state)
{
    WlCtlMsg m;

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_HELLO;
    m.u.hello.version = 1;
    m.u.hello.role = WL_ROLE_CLIENT;
    roundtrip(&m, "HELLO hm-pingpong 1 client\n");

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_QP;
    snprintf(m.u.qp.dev, sizeof(m.u.qp.dev), "rxe0");
    m.u.qp.lid = 0;
    m.u.qp.qpn = 17;
    m.u.qp.psn = 0xabcdef;
    const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
    memcpy(m.u.qp.gid, gid, 16);
    m.u.qp.mtu = 1024;
    roundtrip(&m, "QP rxe0 0 17 11259375 00000000000000000000ffffc0000201 1024\n");

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_PAUSE;
    m.u.pause.cycle = 3;
    m.u.pause.kind = WL_PAUSE_FATAL;
    roundtrip(&m, "PAUSE 3 fatal\n");

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_PAUSED;
    m.u.pause.cycle = 3;
    roundtrip(&m, "PAUSED 3\n");

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_RTS;
    roundtrip(&m, "RTS\n");
    m.type = WL_CTL_DONE;
    roundtrip(&m, "DONE\n");

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_RESULT;
    m.u.result.received = 18446744073709551615ull;
    m.u.result.duplicates = 2;
    m.u.result.corrupt = 0;
    m.u.result.cycles = 4;
    m.u.result.verbs_errors = 1;
    roundtrip(&m, "RESULT 18446744073709551615 2 0 4 1\n");
}

static void test_ctl_format_rejects_invalid(void **state)
{
    char line[WL_CTL_LINE_MAX];
    WlCtlMsg m;

    memset(&m, 0, sizeof(m));
    m.type = WL_CTL_QP;
    snprintf(m.u.qp.dev, sizeof(m.u.qp.dev), "bad dev");
    m.u.qp.qpn = 1;
    m.u.qp.mtu = 1024;
    assert_int_equal(wl_ctl_format(&m, line, sizeof(line)), -EINVAL);
    snprintf(m.u.qp.dev, sizeof(m.u.qp.dev), "rxe0");
    m.u.qp.mtu = 1000;
    assert_int_equal(wl_ctl_format(&m, line, sizeof(line)), -EINVAL);
    m.type = WL_CTL_LAST;
    assert_int_equal(wl_ctl_format(&m, line, sizeof(line)), -EINVAL);
}

static void test_ctl_rejects_bad_input(void **state)
{
    static const char *const bad[] = {
        "",
        " ",
        "HELLO",
        "HELLO hm-pingpong 1",
        "HELLO hm-pingpong 1 client extra",
        "HELLO other 1 client",
        "HELLO hm-pingpong x client",
        "HELLO hm-pingpong 1 boss",
        "HELLO  hm-pingpong 1 client",
        " HELLO hm-pingpong 1 client",
        "HELLO hm-pingpong 1 client ",
        "hello hm-pingpong 1 client",
        "QP rxe0 0 17 5 00000000000000000000ffffc0000201",
        "QP rxe0 0 0 5 00000000000000000000ffffc0000201 1024",        /* qpn 0 */
        "QP rxe0 0 16777216 5 00000000000000000000ffffc0000201 1024", /* qpn > 24 bit */
        "QP rxe0 0 17 16777216 00000000000000000000ffffc0000201 1024",
        "QP rxe0 65536 17 5 00000000000000000000ffffc0000201 1024",
        "QP rxe0 0 17 5 00000000000000000000ffffc000020 1024",  /* short gid */
        "QP rxe0 0 17 5 00000000000000000000FFFFC0000201 1024", /* upper case */
        "QP rxe0 0 17 5 00000000000000000000ffffc000020g 1024",
        "QP rxe0 0 17 5 00000000000000000000ffffc0000201 1000", /* not an mtu */
        "QP rxe0 0 17 5 00000000000000000000ffffc0000201 8192",
        "QP rx/e0 0 17 5 00000000000000000000ffffc0000201 1024", /* bad device name */
        "QP rxe0 -1 17 5 00000000000000000000ffffc0000201 1024",
        "QP rxe0 +1 17 5 00000000000000000000ffffc0000201 1024",
        "QP rxe0 01 17 5 00000000000000000000ffffc0000201 1024", /* leading zero */
        "RTS now",
        "PAUSE 1",
        "PAUSE 1 nap",
        "PAUSE 4294967296 reset",
        "PAUSED",
        "PAUSED x",
        "DONE 1",
        "RESULT 1 2 3 4",
        "RESULT 1 2 3 4 18446744073709551616", /* > UINT64_MAX */
        "RESULT 1 2 3 4 99999999999999999999999",
        "UNKNOWN",
        "RTS\t",
        "RTS\r",
        "PAUSED 1\x7f",
        "PAUSED \xc3\xa9",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        WlCtlMsg m;
        char err[160] = "";
        int r = wl_ctl_parse(bad[i], &m, err, sizeof(err));
        if (r == 0) {
            fail_msg("accepted bad control line '%s'", bad[i]);
        }
        assert_true(err[0] != '\0');
    }

    /* over-long line */
    char longline[WL_CTL_LINE_MAX + 10];
    memset(longline, 'A', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    WlCtlMsg m;
    assert_int_equal(wl_ctl_parse(longline, &m, NULL, 0), -EMSGSIZE);

    /* the error names the field */
    char err[160];
    assert_int_equal(
        wl_ctl_parse("QP rxe0 0 17 5 00000000000000000000ffffc0000201 999", &m, err, sizeof(err)),
        -EINVAL);
    assert_non_null(strstr(err, "mtu"));
}

static void test_linebuf(void **state)
{
    WlLineBuf lb;
    char line[WL_CTL_LINE_MAX];

    memset(&lb, 0, sizeof(lb));
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), 0);
    assert_int_equal(wl_linebuf_push(&lb, "RT", 2), 0);
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), 0);
    assert_int_equal(wl_linebuf_push(&lb, "S\nDONE\nPAU", 10), 0);
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), 1);
    assert_string_equal(line, "RTS");
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), 1);
    assert_string_equal(line, "DONE");
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), 0);
    assert_int_equal(wl_linebuf_push(&lb, "SED 1\n", 6), 0);
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), 1);
    assert_string_equal(line, "PAUSED 1");
    assert_int_equal(lb.len, 0);

    /* a line without newline longer than the limit */
    char big[WL_CTL_LINE_MAX];
    memset(big, 'x', sizeof(big));
    assert_int_equal(wl_linebuf_push(&lb, big, sizeof(big)), 0);
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), -EMSGSIZE);

    /* overflow of the buffer itself */
    memset(&lb, 0, sizeof(lb));
    char huge[sizeof(lb.buf) + 1];
    memset(huge, 'x', sizeof(huge));
    assert_int_equal(wl_linebuf_push(&lb, huge, sizeof(huge)), -ENOBUFS);

    /* embedded NUL */
    memset(&lb, 0, sizeof(lb));
    assert_int_equal(wl_linebuf_push(&lb, "RT\0S\n", 5), 0);
    assert_int_equal(wl_linebuf_next(&lb, line, sizeof(line)), -EBADMSG);
}

/* ---- arguments --------------------------------------------------------------------------- */

static int parse(WlArgs *a, char *err, size_t errlen, ...)
{
    char *argv[40];
    int argc = 0;
    va_list ap;
    argv[argc++] = (char *)"hm-pingpong";
    va_start(ap, errlen);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;) {
        argv[argc++] = (char *)s;
    }
    va_end(ap);
    argv[argc] = NULL;
    return wl_args_parse(argc, argv, a, err, errlen);
}

static void test_args_defaults_and_all(void **state)
{
    WlArgs a;
    char err[200];

    assert_int_equal(parse(&a, err, sizeof(err), "--role", "server", NULL), 0);
    assert_int_equal(a.role, WL_ROLE_SERVER);
    assert_int_equal(a.port, 7471);
    assert_int_equal(a.mode, WL_MODE_LAZY);
    assert_int_equal(a.size, 4096);
    assert_int_equal(a.cycles, 0);
    assert_int_equal(a.tail, 3);
    assert_int_equal(a.max_seconds, 600);
    assert_int_equal(a.quiesce_delay, 0);
    assert_int_equal(a.no_agent, 0);
    assert_int_equal(a.fallback, WL_FALLBACK_NONE);

    assert_int_equal(parse(&a, err, sizeof(err), "--role,server,--fallback,tcp", NULL), 0);
    assert_int_equal(a.fallback, WL_FALLBACK_TCP);
    assert_string_equal(wl_fallback_to_string(a.fallback), "tcp");
    assert_int_equal(parse(&a, err, sizeof(err), "--role", "server", "--fallback=none", NULL), 0);
    assert_int_equal(a.fallback, WL_FALLBACK_NONE);

    assert_int_equal(parse(&a, err, sizeof(err), "--role", "client", "--peer", "198.51.100.2",
                           "--port", "9000", "--mode", "threaded", "--size", "64", "--cycles", "2",
                           "--tail", "0", "--max-seconds", "30", "--quiesce-delay", "2500",
                           "--no-agent", NULL),
                     0);
    assert_int_equal(a.role, WL_ROLE_CLIENT);
    assert_string_equal(a.peer, "198.51.100.2");
    assert_int_equal(a.port, 9000);
    assert_int_equal(a.mode, WL_MODE_THREADED);
    assert_int_equal(a.size, 64);
    assert_int_equal(a.cycles, 2);
    assert_int_equal(a.tail, 0);
    assert_int_equal(a.max_seconds, 30);
    assert_int_equal(a.quiesce_delay, 2500);
    assert_int_equal(a.no_agent, 1);

    assert_int_equal(parse(&a, err, sizeof(err), "--role=client", "--peer=10.0.0.1", NULL), 0);
    assert_string_equal(a.peer, "10.0.0.1");
    assert_int_equal(parse(&a, err, sizeof(err), "--help", NULL), 0);
    assert_true(a.help);
}

static void test_args_comma_form(void **state)
{
    WlArgs a;
    char err[200];

    assert_int_equal(parse(&a, err, sizeof(err),
                           "--role,client,--peer,198.51.100.2,--mode,lazy,--cycles,2,--tail,3",
                           NULL),
                     0);
    assert_int_equal(a.role, WL_ROLE_CLIENT);
    assert_string_equal(a.peer, "198.51.100.2");
    assert_int_equal(a.cycles, 2);
    assert_int_equal(a.tail, 3);
    assert_int_equal(parse(&a, err, sizeof(err), "--role,server,--no-agent", NULL), 0);
    assert_int_equal(a.role, WL_ROLE_SERVER);
    assert_true(a.no_agent);
    /* with spaces it is one (bad) argument, not a list */
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role,server, --no-agent", NULL), 0);
    /* empty element */
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role,,server", NULL), 0);
    /* trailing comma: missing value is an empty string, not a role */
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role,", NULL), 0);
}

static void test_args_rejects_bad(void **state)
{
    WlArgs a;
    char err[200];

    memset(&a, 0x5a, sizeof(a));
    WlArgs before = a;
    assert_int_not_equal(parse(&a, err, sizeof(err), NULL), 0); /* no role */
    assert_non_null(strstr(err, "--role"));
    assert_memory_equal(&a, &before, sizeof(a)); /* untouched on failure */
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "client", NULL), 0); /* no peer */
    assert_non_null(strstr(err, "--peer"));
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "boss", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--port", "0", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--port", "65536", NULL),
                         0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--port", "12x", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--port", "-1", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--size", "63", NULL), 0);
    assert_non_null(strstr(err, "--size"));
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--size", "1048577", NULL),
                         0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--mode", "eager", NULL),
                         0);
    assert_int_not_equal(
        parse(&a, err, sizeof(err), "--role", "server", "--max-seconds", "0", NULL), 0);
    assert_int_not_equal(
        parse(&a, err, sizeof(err), "--role", "client", "--peer", "server.example", NULL), 0);
    assert_int_not_equal(
        parse(&a, err, sizeof(err), "--role", "client", "--peer", "1.2.3.4.5", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--fallback", "udp", NULL),
                         0);
    assert_non_null(strstr(err, "'udp'"));
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--fallback", "tcp",
                               "--port", "65535", NULL),
                         0);
    assert_non_null(strstr(err, "port + 1"));
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--bogus", "1", NULL), 0);
    assert_non_null(strstr(err, "--bogus"));
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "stray", NULL), 0);
    assert_int_not_equal(parse(&a, err, sizeof(err), "--role", "server", "--no-agent=1", NULL), 0);
    assert_int_not_equal(
        parse(&a, err, sizeof(err), "--role", "server", "--cycles", "99999999999999999999", NULL),
        0);

    /* too many comma-separated arguments */
    char many[900] = "--role,server";
    for (int i = 0; i < 70; i++) {
        strcat(many, ",--no-agent");
    }
    assert_int_equal(parse(&a, err, sizeof(err), many, NULL), -E2BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fnv1a64_known_values),
        cmocka_unit_test(test_msg_roundtrip),
        cmocka_unit_test(test_msg_payload_differs_by_seq),
        cmocka_unit_test(test_msg_detects_corruption),
        cmocka_unit_test(test_ctl_roundtrip),
        cmocka_unit_test(test_ctl_format_rejects_invalid),
        cmocka_unit_test(test_ctl_rejects_bad_input),
        cmocka_unit_test(test_linebuf),
        cmocka_unit_test(test_args_defaults_and_all),
        cmocka_unit_test(test_args_comma_form),
        cmocka_unit_test(test_args_rejects_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
