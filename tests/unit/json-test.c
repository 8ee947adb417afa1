/* Unit tests for hm_json_append_string() (common/json.c): fixed cases, and random byte
 * strings whose output json-glib must parse back (to the input, when the input is UTF-8). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <json-glib/json-glib.h>

#include "common/common.h"

static char *escape(const char *in)
{
    GString *out = g_string_new(NULL);

    hm_json_append_string(out, in);
    return g_string_free(out, FALSE);
}

static void test_fixed(void **state)
{
    struct {
        const char *in, *out;
    } cases[] = {
        {"", "\"\""},
        {"ib0", "\"ib0\""},
        {"a\"b\\c/d", "\"a\\\"b\\\\c/d\""},
        {"\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\""},
        {"\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\""},
        {"Mellanox \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
         "\"Mellanox \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},
        {"\xe2\x80\xa8\xe2\x80\xa9", "\"\\u2028\\u2029\""},
        {"\xff", "\"\xef\xbf\xbd\""},                                 /* not UTF-8 */
        {"a\xc3", "\"a\xef\xbf\xbd\""},                               /* cut short */
        {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""},                 /* overlong '/' */
        {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* a surrogate */
        {"\xf4\x90\x80\x80",
         "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* > U+10FFFF */
        {"\xe2\x82x", "\"\xef\xbf\xbd\xef\xbf\xbdx\""},           /* a sequence broken by ASCII */
    };
    g_autoptr(GString) out = g_string_new("x");

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *got = escape(cases[i].in);

        if (!g_str_equal(got, cases[i].out))
            fail_msg("case %zu: got '%s', expected '%s'", i, got, cases[i].out);
    }
    hm_json_append_string(out, NULL);
    assert_string_equal(out->str, "xnull");
}

/* Parses @literal as a JSON string with json-glib. Owned, or NULL when it does not parse. */
static char *parse_back(const char *literal)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *doc = g_strdup_printf("[%s]", literal);
    JsonArray *array;

    if (!json_parser_load_from_data(parser, doc, -1, NULL))
        return NULL;
    array = json_node_get_array(json_parser_get_root(parser));
    if (!array || json_array_get_length(array) != 1)
        return NULL;
    return g_strdup(json_array_get_string_element(array, 0));
}

static void test_random(void **state)
{
    g_autoptr(GRand) rand = g_rand_new_with_seed(20240601);

    for (int n = 0; n < 20000; n++) {
        guint len = (guint)g_rand_int_range(rand, 0, 24);
        g_autofree char *in = g_malloc0(len + 1);
        g_autofree char *out = NULL;
        g_autofree char *back = NULL;

        for (guint i = 0; i < len; i++) {
            /* Mostly the bytes that matter: controls, quotes, UTF-8 lead and trail bytes. */
            static const guchar pick[] = {0x01, 0x1f, '"',  '\\', 'a',  0x7f, 0x80, 0xbf,
                                          0xc2, 0xe2, 0xed, 0xf0, 0xf4, 0xff, 0x82, 0xa8};
            in[i] = (char)(g_rand_boolean(rand) ? pick[g_rand_int_range(rand, 0, sizeof(pick))]
                                                : g_rand_int_range(rand, 1, 256));
        }
        out = escape(in);
        if (!g_utf8_validate(out, -1, NULL))
            fail_msg("output of random case %d is not UTF-8", n);
        for (const char *p = out; *p; p++)
            if ((guchar)*p < 0x20)
                fail_msg("output of random case %d holds a control byte", n);
        back = parse_back(out);
        if (!back)
            fail_msg("json-glib cannot parse '%s'", out);
        if (g_utf8_validate(in, -1, NULL) && !g_str_equal(back, in))
            fail_msg("random case %d does not come back as it went in", n);
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
