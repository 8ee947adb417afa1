/* Unit tests for hm_text_sanitize() (common/text.c): what a hostile guest may put in an error
 * description or a process name comes out without anything a terminal acts on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "common/common.h"

static void test_fixed(void **state)
{
    struct {
        const char *in, *out;
        gsize max;
    } cases[] = {
        {"mpi_rank3", "mpi_rank3", 64},
        {"", "", 64},
        {"a\x1b[2J\x1b]0;owned\x07z", "a?[2J?]0;owned?z", 64}, /* ESC, BEL */
        {"line\nforged: ok\r", "line?forged: ok?", 64},
        {"tab\there\x7f", "tab?here?", 64},
        {"c1 \xc2\x9b" "31m", "c1 ?31m", 64},                      /* U+009B CSI */
        {"rtl \xe2\x80\xae" "gpj.exe", "rtl ?gpj.exe", 64},         /* U+202E */
        {"iso \xe2\x81\xa6x\xe2\x81\xa9", "iso ?x?", 64},          /* U+2066, U+2069 */
        {"sep \xe2\x80\xa8", "sep ?", 64},                          /* U+2028 */
        {"bad \xff\xc3", "bad \xef\xbf\xbd\xef\xbf\xbd", 64},      /* not UTF-8 */
        {"Mellanox \xc3\xa9\xe2\x82\xac", "Mellanox \xc3\xa9\xe2\x82\xac", 64},
        {"abcdef", "abc...", 3},
        {"\xc3\xa9\xc3\xa9\xc3\xa9", "\xc3\xa9\xc3\xa9...", 2},    /* counts characters */
        {"abc", "abc", 3},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *got = hm_text_sanitize(cases[i].in, cases[i].max);

        if (!g_str_equal(got, cases[i].out))
            fail_msg("case %zu: got '%s', expected '%s'", i, got, cases[i].out);
    }
    {
        g_autofree char *got = hm_text_sanitize(NULL, 8);

        assert_string_equal(got, "");
    }
}

/* Random bytes: the output is UTF-8, holds no control byte and is bounded. */
static void test_random(void **state)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(20261125);

    for (int n = 0; n < 20000; n++) {
        guint len = (guint)g_rand_int_range(rand, 0, 48);
        g_autofree char *in = g_malloc0(len + 1);
        g_autofree char *out = NULL;

        for (guint i = 0; i < len; i++)
            in[i] = (char)g_rand_int_range(rand, 1, 256);
        out = hm_text_sanitize(in, 16);
        if (!g_utf8_validate(out, -1, NULL))
            fail_msg("output of random case %d is not UTF-8", n);
        if (g_utf8_strlen(out, -1) > 16 + 3)
            fail_msg("output of random case %d is longer than 16 characters and '...'", n);
        for (const char *p = out; *p; p = g_utf8_next_char(p))
            if (g_unichar_iscntrl(g_utf8_get_char(p)))
                fail_msg("output of random case %d holds a control character", n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_random),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
