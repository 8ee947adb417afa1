/* Unit tests for the configuration file (common/config.c): defaults, values, the sample file,
 * and every kind of bad input rejected with FILE:LINE and the key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config.h"

#define NAME "test.conf"

static HmConfig *load(const char *text, GError **error)
{
    return hm_config_load_data(text, strlen(text), NAME, error);
}

static void test_defaults(void **state)
{
    g_autoptr(HmConfig) c = hm_config_new();

    assert_string_equal(hm_config_get_string(c, HM_CONFIG_MIGRATE_CONNECT), "");
    assert_string_equal(hm_config_get_string(c, HM_CONFIG_MIGRATE_AGENT_CHANNEL),
                        "org.hotmig.agent.0");
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_AGENT_TIMEOUT), 5);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_PREPARE_TIMEOUT), 30);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_RESUME_TIMEOUT), 60);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_PLUG_ATTEMPTS), 2);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_PARALLEL), 0);
    assert_false(hm_config_get_bool(c, HM_CONFIG_MIGRATE_POSTCOPY));
    assert_string_equal(hm_config_get_string(c, HM_CONFIG_MIGRATE_TIMEOUT_ACTION), "suspend");
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++)
        assert_int_equal(hm_config_get_line(c, k), 0);
    assert_null(hm_config_get_path(c));
}

static void test_values(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) c = load("# comment\n"
                                 "\n"
                                 "  [migrate]  \r\n"
                                 "prepare-timeout = 45\n"
                                 "  postcopy=true\n"
                                 "timeout-action = abort\n"
                                 "connect = qemu+tcp://a\\sb/system\n"
                                 "parallel = 4\n"
                                 "connect-is-not-a-prefix-check = x\n",
                                 &error);

    /* The last line is an unknown key: the whole file is refused. */
    assert_null(c);
    assert_non_null(strstr(error->message, NAME ":9: [migrate] unknown key "
                                                "'connect-is-not-a-prefix-check'"));
    g_clear_error(&error);

    c = load("[migrate]\n"
             "prepare-timeout = 45\n"
             "  postcopy=true\n"
             "timeout-action = abort\n"
             "connect = qemu+tcp://a\\sb/system\n"
             "parallel = 4\n",
             &error);
    assert_non_null(c);
    assert_null(error);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_PREPARE_TIMEOUT), 45);
    assert_int_equal(hm_config_get_line(c, HM_CONFIG_MIGRATE_PREPARE_TIMEOUT), 2);
    assert_true(hm_config_get_bool(c, HM_CONFIG_MIGRATE_POSTCOPY));
    assert_string_equal(hm_config_get_string(c, HM_CONFIG_MIGRATE_TIMEOUT_ACTION), "abort");
    assert_string_equal(hm_config_get_string(c, HM_CONFIG_MIGRATE_CONNECT),
                        "qemu+tcp://a b/system");
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_PARALLEL), 4);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_UNPLUG_TIMEOUT), 30); /* default */
    assert_int_equal(hm_config_get_line(c, HM_CONFIG_MIGRATE_UNPLUG_TIMEOUT), 0);
    assert_string_equal(hm_config_get_path(c), NAME);
}

static void test_empty(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) c = hm_config_load_data("", 0, NAME, &error);

    assert_non_null(c);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_AGENT_TIMEOUT), 5);
}

/* Every bad input names the file, the line and (where there is one) the key. */
static void test_errors(void **state)
{
    static const struct {
        const char *text;
        const char *message;
    } cases[] = {
        {"[migrate]\nprepare-timeout = 0\n",
         NAME ":2: [migrate] prepare-timeout: '0' is not a whole number from 1 to 86400"},
        {"[migrate]\nprepare-timeout = 86401\n", NAME ":2: [migrate] prepare-timeout: '86401'"},
        {"[migrate]\nprepare-timeout = -1\n", NAME ":2: [migrate] prepare-timeout: '-1'"},
        {"[migrate]\nprepare-timeout = 3s\n", NAME ":2: [migrate] prepare-timeout: '3s'"},
        {"[migrate]\nprepare-timeout =\n", NAME ":2: [migrate] prepare-timeout: ''"},
        {"[migrate]\npostcopy = yes\n",
         NAME ":2: [migrate] postcopy: 'yes' is neither 'true' nor 'false'"},
        {"[migrate]\ntimeout-action = pause\n",
         NAME ":2: [migrate] timeout-action: 'pause' is not one of suspend, postcopy, abort"},
        {"[migrate]\nagent-channel =\n", NAME ":2: [migrate] agent-channel: must not be empty"},
        {"[migrate]\nconnect = a\\tb\n",
         NAME ":2: [migrate] connect: contains a control character"},
        {"[migrate]\nconnect = a\\qb\n", NAME ":2: [migrate] connect: "},
        {"\n[migrate]\nplug-attempts = 2\n# x\nplug-attempts = 3\n",
         NAME ":5: [migrate] plug-attempts: set twice (first on line 3)"},
        {"[migrate]\n[migrate]\n", NAME ":2: group '[migrate]' appears twice"},
        {"[nodes]\n", NAME ":1: unknown group '[nodes]' (known: [migrate], [hotmigd], [pool], "
                         "[scheduler], [alerts], [host NAME])"},
        {"[host a b]\nuri = x\n", NAME ":1: '[host a b]': host name 'a b' may hold only"},
        {"[host ]\n", NAME ":1: '[host ]': host name '' may hold only"},
        {"[host a]\nuri = x\n[host a]\n", NAME ":3: group '[host a]' appears twice (first on "
                                              "line 1)"},
        {"[host a]\nport = 3\n", NAME ":2: [host a] unknown key 'port' (known: uri, hotmigd, identity)"},
        {"[host a]\nuri = x\nuri = y\n", NAME ":3: [host a] uri: set twice (first on line 2)"},
        {"[host a]\nhotmigd = https://a:1\n", NAME ":1: [host a] has no 'uri' key"},
        {"[host a]\nuri = x\nidentity = a,b\n",
         NAME ":1: [host a] identity: 'a,b' holds a control character or a comma"},
        {"[host a]\nuri = x\nhotmigd = http://a:1\n",
         NAME ":1: [host a] hotmigd: 'http://a:1' is not an https:// URL"},
        {"[migrate\n", NAME ":1: '[migrate' is not a group header"},
        {"[migrate] x\n", NAME ":1: '[migrate] x' is not a group header"},
        {"[]\n", NAME ":1: '[]' is not a group header"},
        {"timeout = 3\n", NAME ":1: key 'timeout' comes before any '[group]'"},
        {"[migrate]\njust words\n",
         NAME ":2: 'just words' is not 'key = value', a '[group]' or a '#' comment"},
        {"[migrate]\nconnect[de] = x\n", NAME ":2: [migrate] connect[de]: localized keys"},
        {"[migrate]\nverbose = true\n", NAME ":2: [migrate] unknown key 'verbose' (known: "
                                             "connect, agent-channel,"},
        {"[migrate]\n# \xff\n", NAME ":2: not valid UTF-8"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(HmConfig) c = load(cases[i].text, &error);

        if (c || !error || !g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID))
            fail_msg("case %zu was not rejected as invalid: %s", i,
                     c ? "accepted" : error->message);
        if (!g_str_has_prefix(error->message, cases[i].message))
            fail_msg("case %zu: got \"%s\", expected \"%s...\"", i, error->message,
                     cases[i].message);
    }
}

static void test_nul_and_size(void **state)
{
    static const char nul[] = "[migrate]\n\nconnect = a\0b\n";
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) c = hm_config_load_data(nul, sizeof(nul) - 1, NAME, &error);
    g_autofree char *big = NULL;

    assert_null(c);
    assert_string_equal(error->message, NAME ":3: contains a NUL byte");
    g_clear_error(&error);

    big = g_strnfill(HM_CONFIG_MAX_BYTES + 1, '#');
    c = hm_config_load_data(big, HM_CONFIG_MAX_BYTES + 1, NAME, &error);
    assert_null(c);
    assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TOO_LARGE));
    assert_non_null(strstr(error->message, NAME));
    g_clear_error(&error);
    /* Exactly at the limit is fine. */
    c = hm_config_load_data(big, HM_CONFIG_MAX_BYTES, NAME, &error);
    assert_non_null(c);
}

static void test_load_file(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("hm-config-XXXXXX", &error);
    g_autofree char *path = g_build_filename(dir, "hotmig.conf", NULL);
    g_autofree char *missing = g_build_filename(dir, "missing.conf", NULL);
    g_autoptr(HmConfig) c = NULL;

    assert_non_null(dir);
    assert_true(g_file_set_contents(path, "[migrate]\nresume-timeout = 90\n", -1, NULL));
    c = hm_config_load(path, &error);
    assert_non_null(c);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_RESUME_TIMEOUT), 90);
    assert_string_equal(hm_config_get_path(c), path);
    g_clear_pointer(&c, hm_config_free);

    assert_true(g_file_set_contents(path, "[migrate]\n\nresume-timeout = 0\n", -1, NULL));
    c = hm_config_load(path, &error);
    assert_null(c);
    assert_true(g_str_has_prefix(error->message, path));
    assert_non_null(strstr(error->message, ":3: [migrate] resume-timeout"));
    g_clear_error(&error);

    c = hm_config_load(missing, &error);
    assert_null(c);
    assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO));
    assert_non_null(strstr(error->message, missing));

    unlink(path);
    rmdir(dir);
}

/* The sample holds every key with its default; uncommented, it still gives the defaults. */
static void test_sample(void **state)
{
    g_autofree char *sample = hm_config_format_sample();
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) commented = load(sample, &error);
    g_autoptr(HmConfig) defaults = hm_config_new();
    g_autoptr(HmConfig) uncommented = NULL;
    g_autoptr(GString) open = g_string_new(NULL);
    g_auto(GStrv) lines = g_strsplit(sample, "\n", -1);
    g_autofree char *want = hm_config_format_effective(defaults);
    g_autofree char *got = NULL;
    const char *file = g_getenv("HM_CONFIG_SAMPLE");

    assert_non_null(commented);
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        g_autofree char *line = g_strdup_printf("\n#%s = ", hm_config_key_name(k));

        if (!strstr(sample, line))
            fail_msg("the sample does not show key '%s'", hm_config_key_name(k));
    }
    for (char **l = lines; *l; l++) {
        /* "#key = value" lines are the settings; "# text" lines stay comments. */
        if ((*l)[0] == '#' && (g_ascii_isalpha((*l)[1]) || (*l)[1] == '['))
            g_string_append_printf(open, "%s\n", *l + 1);
        else
            g_string_append_printf(open, "%s\n", *l);
    }
    uncommented = load(open->str, &error);
    if (!uncommented)
        fail_msg("uncommented sample: %s", error->message);
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++)
        assert_int_not_equal(hm_config_get_line(uncommented, k), 0);
    got = hm_config_format_effective(uncommented);
    /* Same values; only the "# where" column differs. */
    {
        g_auto(GStrv) a = g_strsplit(want, "\n", -1);
        g_auto(GStrv) b = g_strsplit(got, "\n", -1);
        const HmConfigHost *host;

        /* The sample's example host comes last; the defaults have none. */
        assert_int_equal(hm_config_get_hosts(uncommented)->len, 1);
        host = hm_config_find_host(uncommented, "node01");
        assert_non_null(host);
        assert_string_equal(host->uri, "qemu+tls://node01/system");
        assert_string_equal(host->hotmigd, "https://node01:16680");
        assert_string_equal(host->identity, "node01.cluster.example");
        assert_true(g_str_has_prefix(b[g_strv_length(b) - 2], "[host node01] "));
        g_free(b[g_strv_length(b) - 2]);
        b[g_strv_length(b) - 2] = g_strdup("");
        g_free(b[g_strv_length(b) - 1]);
        b[g_strv_length(b) - 1] = NULL;

        assert_int_equal(g_strv_length(a), g_strv_length(b));
        for (guint i = 0; a[i]; i++) {
            char *ha = strstr(a[i], " #");
            char *hb = strstr(b[i], " #");

            if (ha)
                *ha = '\0';
            if (hb)
                *hb = '\0';
            assert_string_equal(a[i], b[i]);
        }
    }

    /* The installed sample (etc/hotmig.conf.sample) is this text. */
    if (file) {
        g_autofree char *contents = NULL;

        if (!g_file_get_contents(file, &contents, NULL, &error))
            fail_msg("%s", error->message);
        if (!g_str_equal(contents, sample))
            fail_msg("'%s' differs from 'migrate-vm config sample': regenerate it", file);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_values),
        cmocka_unit_test(test_empty),        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_nul_and_size), cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
