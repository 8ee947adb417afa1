/* Unit tests for hm_json_append_string() (common/json.c): fixed cases, and random byte
 * strings whose output json-glib must parse back (to the input, when the input is UTF-8);
 * and for hm_json_check_depth(), the nesting limit put before every untrusted parse, which
 * refuses what json-glib would read differently from strict JSON (issue 28, finding 6). */
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

/* Does the guard let @text through? When not, its message holds @why. */
static gboolean guard_ok(const char *text, guint max, const char *why)
{
    g_autoptr(GError) error = NULL;
    gboolean ok = hm_json_check_depth(text, -1, max, &error);

    assert_true(ok == (error == NULL));
    if (error) {
        assert_int_equal(error->code, HM_COMMON_ERROR_INVALID);
        assert_non_null(strstr(error->message, why));
    }
    return ok;
}

static gboolean depth_ok(const char *text, guint max)
{
    return guard_ok(text, max, "JSON nests deeper than");
}

static void test_depth(void **state)
{
    g_autoptr(GString) deep = g_string_new(NULL);
    g_autoptr(GError) error = NULL;

    assert_true(depth_ok("", 2));
    assert_true(depth_ok("{\"a\":[1,{\"b\":2}]}", 3));
    assert_false(depth_ok("{\"a\":[1,{\"b\":[]}]}", 3));
    assert_true(depth_ok("[[],[],[],[]]", 2)); /* siblings do not add up */
    /* Brackets inside strings, escaped quotes and backslashes do not count. */
    assert_true(depth_ok("[\"[[[[{{{{\"]", 1));
    assert_true(depth_ok("[\"\\\"[[[[\"]", 1));
    assert_true(depth_ok("[\"\\\\\",[]]", 2));
    assert_false(depth_ok("[\"\\\\\",[[]]]", 2));
    /* Unbalanced closers neither underflow nor hide later openers. */
    assert_false(depth_ok("]]]]}}[[[", 2));
    /* @len bounds the scan: what follows is not read. */
    assert_true(hm_json_check_depth("[[[[", 2, 2, NULL));

    /* The input of issue 15: 76 000 nested brackets, which crash json-glib. */
    for (int i = 0; i < 76000; i++)
        g_string_append_c(deep, '[');
    assert_false(hm_json_check_depth(deep->str, (gssize)deep->len, HM_JSON_MAX_DEPTH, &error));
    assert_non_null(strstr(error->message, "deeper than 32 levels at byte 32"));
}

static gboolean strict_ok(const char *text, guint max)
{
    return guard_ok(text, max, "JSON is not strict JSON at byte");
}

/* json-glib reads single-quoted strings, comments and escapes that strict JSON does not have;
 * each of these inputs nests deeper than the limit as json-glib reads it (json-test's old
 * guard let them all through: it saw the brackets inside a string). */
static void test_depth_not_strict(void **state)
{
    g_autoptr(GString) deep = g_string_new("{\"return\":['\"',");
    g_autoptr(GError) error = NULL;

    assert_false(strict_ok("['\"', [[[1]]], '\"']", 2));
    assert_false(strict_ok("[/* \" */ [[[1]]] /* \" */]", 2));
    assert_false(strict_ok("[1 / \" /, [[2]]]", 2));
    assert_false(strict_ok("[\"\\u0\",\",[[[[1]]]]]", 2));         /* \u reads the quote */
    assert_false(strict_ok("[\"\\ud800\",\",[[[[1]]]],\"\"]", 2)); /* so does a surrogate */
    assert_false(strict_ok("[\"\\udc00\"]", 2));
    assert_false(strict_ok("[\"\\ud800\\u0041\"]", 2));
    assert_false(strict_ok("[\"\\x\"]", 2));
    assert_false(strict_ok("[\"\\", 2));
    assert_false(strict_ok("[$1f, 0x1f]", 2) && strict_ok("[#\n1]", 2));
    assert_false(strict_ok("[\"a\"\0]", 2) && hm_json_check_depth("[\"a\"\0]", 6, 2, NULL));
    assert_false(strict_ok("[\"\xc3\xa9\"]\xc2\xa0", 2));
    /* Strict JSON passes, every escape of it included. */
    assert_true(strict_ok("{\"a\":[true,false,null,-1.5e+3,0]}\r\n\t ", 2));
    assert_true(strict_ok("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00'/#\xc3\xa9\"]", 1));

    /* The input of issue 28: passed the old guard, crashed json-glib on an 8 MiB stack. */
    for (int i = 0; i < 100000; i++)
        g_string_append_c(deep, '[');
    assert_false(hm_json_check_depth(deep->str, (gssize)deep->len, HM_JSON_MAX_DEPTH, &error));
    assert_non_null(strstr(error->message, "not strict JSON at byte 11"));
}

static void test_check_one(void **state)
{
    g_autoptr(GError) error = NULL;

    assert_true(hm_json_check_one("{\"a\":[1]} \n", -1, 2, NULL));
    assert_true(hm_json_check_one("  [\"]\"]", -1, 1, NULL));
    assert_false(hm_json_check_one("{\"a\":[[1]]}", -1, 2, NULL)); /* still the depth */
    assert_false(hm_json_check_one("[1]]]", -1, 2, NULL));
    assert_false(hm_json_check_one("{\"a\":1} {\"b\":2}", -1, 2, &error));
    assert_string_equal(error->message, "JSON has data after its value at byte 8");
    /* hm_json_check_depth() leaves that to the caller. */
    assert_true(hm_json_check_depth("{\"a\":1} {\"b\":2}", -1, 2, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_depth_not_strict),
        cmocka_unit_test(test_check_one),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
