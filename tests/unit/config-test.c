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

/* A '# comment' after a value is refused, naming the line, the key and the value meant. */
static void test_trailing_comment(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) c = load("[hotmigd]\nname = node01 # this host\n", &error);

    assert_null(c);
    assert_string_equal(error->message,
                        NAME ":2: [hotmigd] name: 'node01 # this host' ends in a comment: '#' "
                             "starts a comment only at the start of a line (write 'name = "
                             "node01' and the comment above it)");
    g_clear_error(&error);
    c = load("[host a]\nuri = qemu+tls://a/system\t# node a\n", &error);
    assert_null(c);
    assert_non_null(strstr(error->message, NAME ":2: [host a] uri: "));
    g_clear_error(&error);
    /* A '#' that does not follow white space is data (a URL's fragment, a command's word). */
    c = load("[alerts]\nexec = /usr/bin/probe --tag=a#b\n", &error);
    assert_non_null(c);
    assert_string_equal(hm_config_get_string(c, HM_CONFIG_ALERTS_EXEC),
                        "/usr/bin/probe --tag=a#b");
}

/* One load reports every problem of the file, one per line, in file order. */
static void test_every_error(void **state)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) c = load("[migrate]\n"
                                 "prepare-timeout = 0\n"
                                 "verbose = true\n"
                                 "[nodes]\n"
                                 "x = 1\n"
                                 "[hotmigd]\n"
                                 "port = 99999\n"
                                 "name = a # b\n"
                                 "[host a]\n",
                                 &error);
    g_auto(GStrv) lines = NULL;

    assert_null(c);
    assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID));
    lines = g_strsplit(error->message, "\n", -1);
    assert_int_equal(g_strv_length(lines), 6);
    assert_true(g_str_has_prefix(lines[0], NAME ":3: [migrate] unknown key 'verbose'"));
    assert_true(g_str_has_prefix(lines[1], NAME ":4: unknown group '[nodes]'"));
    /* line 5, a key of the refused group, is not reported again */
    assert_true(g_str_has_prefix(lines[2], NAME ":8: [hotmigd] name: 'a # b' ends in a comment"));
    assert_true(g_str_has_prefix(lines[3], NAME ":2: [migrate] prepare-timeout: '0'"));
    assert_true(g_str_has_prefix(lines[4], NAME ":7: [hotmigd] port: '99999'"));
    assert_string_equal(lines[5], NAME ":9: [host a] has no 'uri' key");
}

static HmConfig *load_ok(const char *text)
{
    g_autoptr(GError) error = NULL;
    HmConfig *c = load(text, &error);

    if (!c)
        fail_msg("'%s' did not load: %s", text, error->message);
    return c;
}

/* hm_config_check: what the values mean, every problem at once. */
static void test_check_meaning(void **state)
{
    static const struct {
        const char *text;
        const char *message; /* NULL: passes */
    } cases[] = {
        {"[migrate]\nconnect = qemu:///system\n[hotmigd]\nconnect = qemu+tls://n2/system\n",
         NULL},
        {"[migrate]\nconnect = node02\n",
         NAME ":2: [migrate] connect: 'node02' is not a libvirt URI like "
              "'qemu+tls://HOST/system'"},
        {"[hotmigd]\nconnect = qemu+tls//node02/system\n",
         NAME ":2: [hotmigd] connect: 'qemu+tls//node02/system' is not a libvirt URI"},
        {"[migrate]\nconnect = qemu+tsl://node02/system\n",
         NAME ":2: [migrate] connect: 'qemu+tsl://node02/system': unknown transport 'tsl'"},
        {"[host a]\nuri = node02\n", NAME ":2: [host a] uri: 'node02' is not a libvirt URI"},
        {"[host a]\nuri = qemu:///system\n", NAME ":2: [host a] uri: 'qemu:///system' names no "
                                                  "server"},
        {"[host a]\nuri = qemu+tls://n1/system\n[host b]\n\nuri = qemu+tls://n1/system\n",
         NAME ":5: [host b] uri: 'qemu+tls://n1/system' is also the uri of [host a] (line 2)"},
        {"[host a]\nuri = qemu+tls://n1/system\nhotmigd = https://:16680\n",
         NAME ":1: [host a] hotmigd: 'https://:16680' is not a URL"},
        {"[pool]\npfs = 0000:3b:00.0, 3b:00.1\nvfs = 0000:3b:02.1\n", NULL},
        {"[pool]\npfs = 0000:3b:00.0, mlx5_0\n",
         NAME ":2: [pool] pfs: 'mlx5_0' is not a PCI address"},
        {"[pool]\nvfs = 0000:3b:20.1\n", NAME ":2: [pool] vfs: '0000:3b:20.1' is not a PCI address"},
        {"[hotmigd]\nlisten = 10.0.0.1\n[alerts]\nlisten = ::1\n", NULL},
        {"[hotmigd]\nlisten = node01\n",
         NAME ":2: [hotmigd] listen: 'node01' is not an IP address"},
        {"[alerts]\nlisten = 10.0.0.256\n",
         NAME ":2: [alerts] listen: '10.0.0.256' is not an IP address"},
        {"[hotmigd]\nname = b\n[host a]\nuri = qemu+tls://a/system\n",
         NAME ":2: [hotmigd] name: 'b' names no [host NAME] group (known: a)"},
        {"[hotmigd]\nname = b\n", NAME ":2: [hotmigd] name: 'b' names no [host NAME] group "
                                       "(the file has none)"},
        {"[hotmigd]\nname = a\n[host a]\nuri = qemu+tls://a/system\n", NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(HmConfig) c = load_ok(cases[i].text);
        g_autoptr(GError) error = NULL;
        gboolean ok = hm_config_check(c, HM_CONFIG_CHECK_SKIP_FILES, &error);

        if (!cases[i].message) {
            if (!ok)
                fail_msg("case %zu: %s", i, error->message);
            continue;
        }
        if (ok)
            fail_msg("case %zu passed the check", i);
        assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID));
        if (!g_str_has_prefix(error->message, cases[i].message))
            fail_msg("case %zu: got \"%s\", expected \"%s...\"", i, error->message,
                     cases[i].message);
    }
}

/* The certificate, key, CA and token files: each set or default one must be a readable file;
 * every one missing is reported. */
static void test_check_files(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-config-check-XXXXXX", NULL);
    g_autofree char *cert = g_build_filename(dir, "cert.pem", NULL);
    g_autofree char *text = NULL;
    g_autoptr(HmConfig) c = NULL;
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) lines = NULL;
    static const char *const file_keys[] = {"client-cert", "client-key", "ca-cert"};

    assert_non_null(dir);
    assert_true(g_file_set_contents(cert, "PEM\n", -1, NULL));
    text = g_strdup_printf("[migrate]\nclient-cert = %s\nclient-key = %s\nca-cert = %s/none.pem\n"
                           "[hotmigd]\nserver-cert = %s\nserver-key = %s\nca-cert = %s\n"
                           "[alerts]\ntoken-file = %s\n",
                           cert, cert, dir, cert, dir, cert, cert);
    c = load_ok(text);
    assert_false(hm_config_check(c, HM_CONFIG_CHECK_DEFAULT, &error));
    lines = g_strsplit(error->message, "\n", -1);
    assert_int_equal(g_strv_length(lines), 2);
    assert_non_null(strstr(lines[0], NAME ":4: [migrate] ca-cert: cannot read '"));
    assert_non_null(strstr(lines[0], "none.pem': No such file or directory"));
    assert_non_null(strstr(lines[1], NAME ":7: [hotmigd] server-key: '"));
    assert_non_null(strstr(lines[1], "' is not a regular file"));
    g_clear_error(&error);
    assert_true(hm_config_check(c, HM_CONFIG_CHECK_SKIP_FILES, &error));

    /* Defaults count: an empty file still needs the default certificates (which this test
     * machine does not have at /etc/pki), and says they are the defaults. */
    g_clear_pointer(&c, hm_config_free);
    g_clear_pointer(&lines, g_strfreev);
    c = load_ok("[migrate]\nclient-cert = /nonexistent/hm/cert.pem\n");
    assert_false(hm_config_check(c, HM_CONFIG_CHECK_DEFAULT, &error));
    assert_true(g_str_has_prefix(error->message, NAME ":2: [migrate] client-cert: cannot read "
                                                      "'/nonexistent/hm/cert.pem'"));
    for (gsize i = 0; i < G_N_ELEMENTS(file_keys); i++)
        assert_non_null(strstr(error->message, file_keys[i]));
    if (!g_file_test("/etc/pki/CA/cacert.pem", G_FILE_TEST_EXISTS))
        assert_non_null(strstr(error->message, NAME ": [migrate] ca-cert (default): cannot read "
                                                    "'/etc/pki/CA/cacert.pem'"));
    unlink(cert);
    rmdir(dir);
}

/* The warnings as one text, one per line. */
static char *warnings_of(const HmConfig *c, HmConfigCheckFlags flags)
{
    g_auto(GStrv) w = hm_config_warnings(c, flags);

    return g_strjoinv("\n", w);
}

/* [hotmigd] listen: '*' is every address; empty is this host's own URL's address or loopback;
 * loopback while other hosts are named, or an address or port other than this host's own
 * [host NAME] hotmigd URL's, is warned about (issue 32). */
static void test_listen(void **state)
{
    static const struct {
        const char *text;
        const char *address; /* hm_config_listen_address() */
        const char *warning; /* NULL: none */
    } cases[] = {
        /* '*' passes the check and means every address. */
        {"[hotmigd]\nlisten = *\nname = a\n[host a]\nuri = qemu+tls://a.example.org/system\n"
         "[host b]\nuri = qemu+tls://b.example.org/system\n",
         "", NULL},
        /* The example inventory's case: hosts known by DNS names, listen not set. */
        {"[hotmigd]\nname = a\n[host a]\nuri = qemu+tls://a.example.org/system\n"
         "[host b]\nuri = qemu+tls://b.example.org/system\n",
         "127.0.0.1",
         NAME ": [hotmigd] listen (default): hotmigd listens on 127.0.0.1, loopback only: the "
              "other hosts cannot reach it (lease its VFs, ask it for migrations); set listen to "
              "this host's address or '*' (empty takes the address of this host's own [host "
              "NAME] hotmigd URL only when that is an IP address)"},
        /* Loopback named outright. */
        {"[hotmigd]\nlisten = ::1\nname = a\n[host a]\nuri = qemu+tls://a/system\n"
         "[host b]\nuri = qemu+tls://b/system\n",
         "::1", NAME ":2: [hotmigd] listen: hotmigd listens on ::1, loopback only"},
        /* Every host on this machine (the lab): loopback is what they use. */
        {"[hotmigd]\nname = a\nlisten = 127.0.0.2\n[host a]\nuri = qemu+tcp://127.0.0.1:16651/system\n"
         "hotmigd = https://127.0.0.2:16680\n[host b]\nuri = qemu+tcp://127.0.0.1:16652/system\n"
         "hotmigd = https://127.0.0.3:16680\n",
         "127.0.0.2", NULL},
        /* One host alone: loopback is no surprise. */
        {"[hotmigd]\nname = a\n[host a]\nuri = qemu+tls://a/system\n", "127.0.0.1", NULL},
        {"", "127.0.0.1", NULL},
        /* Empty: the own URL's address, from its hotmigd or from its uri. */
        {"[hotmigd]\nname = a\n[host a]\nuri = qemu+tls://a/system\nhotmigd = https://10.0.0.1:16680\n"
         "[host b]\nuri = qemu+tls://b/system\n",
         "10.0.0.1", NULL},
        {"[hotmigd]\nname = a\n[host a]\nuri = qemu+tls://10.0.0.1/system\n[host b]\n"
         "uri = qemu+tls://10.0.0.2/system\n",
         "10.0.0.1", NULL},
        /* node01's file listening on node02's address. */
        {"[hotmigd]\nname = a\nlisten = 10.0.0.2\n[host a]\nuri = qemu+tls://10.0.0.1/system\n"
         "[host b]\nuri = qemu+tls://10.0.0.2/system\n",
         "10.0.0.2",
         NAME ":3: [hotmigd] listen: hotmigd listens on 10.0.0.2, but the other hosts reach this "
              "host 'a' at 10.0.0.1 ([host a] hotmigd)"},
        /* The port the others are told against the one it listens on. */
        {"[hotmigd]\nname = a\nport = 16690\n[host a]\nuri = qemu+tls://10.0.0.1/system\n"
         "[host b]\nuri = qemu+tls://10.0.0.2/system\n",
         "10.0.0.1",
         NAME ":3: [hotmigd] port: hotmigd listens on port 16690, but the other hosts reach this "
              "host 'a' on port 16680 ([host a] hotmigd: its uri's server with [migrate] "
              "hotmigd-port)"},
        {"[hotmigd]\nname = a\nport = 16690\n[host a]\nuri = qemu+tls://10.0.0.1/system\n"
         "hotmigd = https://10.0.0.1:16690\n[host b]\nuri = qemu+tls://10.0.0.2/system\n",
         "10.0.0.1", NULL},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(HmConfig) c = load_ok(cases[i].text);
        g_autoptr(GError) error = NULL;
        g_autofree char *address = hm_config_listen_address(c);
        g_autofree char *warnings = warnings_of(c, HM_CONFIG_CHECK_SKIP_FILES);

        if (!hm_config_check(c, HM_CONFIG_CHECK_SKIP_FILES, &error))
            fail_msg("case %zu: %s", i, error->message);
        if (!g_str_equal(address, cases[i].address))
            fail_msg("case %zu: listens on '%s', expected '%s'", i, address, cases[i].address);
        if (!cases[i].warning && *warnings)
            fail_msg("case %zu: warned \"%s\"", i, warnings);
        if (cases[i].warning && !g_str_has_prefix(warnings, cases[i].warning))
            fail_msg("case %zu: warned \"%s\", expected \"%s...\"", i, warnings,
                     cases[i].warning);
    }
}

/* The alert token: without a readable one the check passes with a warning that says what to
 * do (hotmigd starts and its webhook refuses every request: docs/alerts.md); no listener, no
 * warning. */
static void test_token(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-config-token-XXXXXX", NULL);
    g_autofree char *cert = g_build_filename(dir, "cert.pem", NULL);
    g_autofree char *token = g_build_filename(dir, "alert-token", NULL);
    g_autofree char *files = NULL;
    g_autofree char *text = NULL;
    g_autofree char *warnings = NULL;
    g_autofree char *expected = NULL;
    g_autoptr(HmConfig) c = NULL;
    g_autoptr(GError) error = NULL;

    assert_non_null(dir);
    assert_true(g_file_set_contents(cert, "PEM\n", -1, NULL));
    files = g_strdup_printf("[migrate]\nclient-cert = %s\nclient-key = %s\nca-cert = %s\n"
                            "[hotmigd]\nserver-cert = %s\nserver-key = %s\nca-cert = %s\n",
                            cert, cert, cert, cert, cert, cert);
    text = g_strdup_printf("%s[alerts]\ntoken-file = %s\n", files, token);
    c = load_ok(text);
    if (!hm_config_check(c, HM_CONFIG_CHECK_DEFAULT, &error))
        fail_msg("a missing token failed the check: %s", error->message);
    warnings = warnings_of(c, HM_CONFIG_CHECK_DEFAULT);
    expected = g_strdup_printf(NAME ":10: [alerts] token-file: cannot read '%s': No such file or "
                                    "directory: the alert webhook refuses every request until it "
                                    "can be read (write one line of random text there, mode "
                                    "0600: 'umask 077; openssl rand -hex 32 > %s'; or set "
                                    "[alerts] port = 0 for no listener)",
                               token, token);
    assert_string_equal(warnings, expected);
    g_clear_pointer(&warnings, g_free);
    warnings = warnings_of(c, HM_CONFIG_CHECK_SKIP_FILES); /* the files are not looked at */
    assert_string_equal(warnings, "");

    /* Readable: nothing to say. */
    assert_true(g_file_set_contents(token, "s3cret\n", -1, NULL));
    g_clear_pointer(&warnings, g_free);
    warnings = warnings_of(c, HM_CONFIG_CHECK_DEFAULT);
    assert_string_equal(warnings, "");
    unlink(token);

    /* No listener: the token is not needed. */
    g_clear_pointer(&c, hm_config_free);
    g_clear_pointer(&text, g_free);
    g_clear_pointer(&warnings, g_free);
    text = g_strdup_printf("%s[alerts]\nport = 0\ntoken-file = %s\n", files, token);
    c = load_ok(text);
    assert_true(hm_config_check(c, HM_CONFIG_CHECK_DEFAULT, &error));
    warnings = warnings_of(c, HM_CONFIG_CHECK_DEFAULT);
    assert_string_equal(warnings, "");
    unlink(cert);
    rmdir(dir);
}

/* This host's client certificate must carry the identity the others know it by: its NAME by
 * default (the example inventory's 403, issue 32), or its 'identity'. */
static void test_identity(void **state)
{
    const char *pki = g_getenv("HM_TEST_PKI");
    g_autofree char *dir = g_dir_make_tmp("hm-config-pki-XXXXXX", NULL);
    g_autofree char *cmd = NULL;
    g_autofree char *text = NULL;
    g_autofree char *warnings = NULL;
    g_autofree char *expected = NULL;
    g_autoptr(HmConfig) c = NULL;
    int status = 0;

    if (!pki)
        skip();
    cmd = g_strdup_printf("%s %s", pki, dir);
    assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, &status, NULL));
    assert_int_equal(status, 0);
    /* peer2.pem carries DNS:node02.test (tests/unit/test-pki.sh). */
    text = g_strdup_printf("[migrate]\nclient-cert = %s/peer2.pem\n[hotmigd]\nname = node02\n"
                           "[host node01]\nuri = qemu+tls://node01.test/system\n"
                           "[host node02]\nuri = qemu+tls://node02.test/system\n",
                           dir);
    c = load_ok(text);
    warnings = warnings_of(c, HM_CONFIG_CHECK_DEFAULT);
    expected = g_strdup_printf(
        NAME ":7: [host node02] identity (default: the host's NAME): 'node02' is not a name this "
             "host's client certificate '%s/peer2.pem' carries ('node02.test'): the other hosts' "
             "hotmigd will refuse its requests (403); set identity = node02.test",
        dir);
    if (!strstr(warnings, expected))
        fail_msg("warned \"%s\", expected \"%s\"", warnings, expected);

    g_clear_pointer(&c, hm_config_free);
    g_clear_pointer(&text, g_free);
    g_clear_pointer(&warnings, g_free);
    text = g_strdup_printf("[migrate]\nclient-cert = %s/peer2.pem\n[hotmigd]\nname = node02\n"
                           "[host node01]\nuri = qemu+tls://node01.test/system\n"
                           "[host node02]\nuri = qemu+tls://node02.test/system\n"
                           "identity = node02.test\n",
                           dir);
    c = load_ok(text);
    warnings = warnings_of(c, HM_CONFIG_CHECK_DEFAULT);
    if (strstr(warnings, "identity"))
        fail_msg("warned \"%s\"", warnings);
    g_clear_pointer(&cmd, g_free);
    cmd = g_strdup_printf("rm -rf %s", dir);
    assert_true(g_spawn_command_line_sync(cmd, NULL, NULL, NULL, NULL));
}

/* hm_config_report_open(): a syntax error does not hide what the rest of the file means, nor
 * the warnings: every problem in one report, in order. */
static void test_report_every_problem(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-config-report-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "hotmig.conf", NULL);
    g_autoptr(HmConfigReport) report = NULL;
    g_autoptr(HmConfigReport) good = NULL;
    g_autofree char *first = NULL;
    g_autofree char *second = NULL;
    g_autofree char *third = NULL;
    g_autofree char *fourth = NULL;

    assert_true(g_file_set_contents(path,
                                    "[migrate]\n"
                                    "prepare-timeout = soon\n"       /* 2: syntax (a value) */
                                    "connect = node02\n"             /* 3: meaning */
                                    "[hotmigd]\n"
                                    "listen = node01\n"              /* 5: meaning */
                                    "name = a\n"
                                    "[host a]\n"
                                    "uri = qemu+tls://a/system\n"
                                    "bogus = 1\n"                    /* 9: syntax (a key) */
                                    "[host b]\n"
                                    "uri = qemu+tls://b/system\n",
                                    -1, NULL));
    report = hm_config_report_open(path, HM_CONFIG_CHECK_SKIP_FILES);
    assert_non_null(report->config);
    assert_false(report->loaded);
    assert_int_equal(g_strv_length(report->errors), 4);
    first = g_strdup_printf("%s:2: [migrate] prepare-timeout: 'soon' is not a whole number", path);
    second = g_strdup_printf("%s:9: [host a] unknown key 'bogus'", path);
    third = g_strdup_printf("%s:3: [migrate] connect: 'node02' is not a libvirt URI", path);
    fourth = g_strdup_printf("%s:5: [hotmigd] listen: 'node01' is not an IP address", path);
    /* The lines' problems first, then the values', then what the values mean. */
    assert_true(g_str_has_prefix(report->errors[0], second));
    assert_true(g_str_has_prefix(report->errors[1], first));
    assert_true(g_str_has_prefix(report->errors[2], third));
    assert_true(g_str_has_prefix(report->errors[3], fourth));
    /* The values that loaded are the file's; the warnings are there too. */
    assert_string_equal(hm_config_get_string(report->config, HM_CONFIG_HOTMIGD_NAME), "a");
    assert_int_equal(g_strv_length(report->warnings), 0); /* listen is an error, not loopback */

    /* A good file: loaded, nothing to report. */
    assert_true(g_file_set_contents(path, "[hotmigd]\nlisten = *\n", -1, NULL));
    good = hm_config_report_open(path, HM_CONFIG_CHECK_SKIP_FILES);
    assert_true(good->loaded);
    assert_null(good->errors[0]);
    unlink(path);
    g_clear_pointer(&report, hm_config_report_free);

    /* A file that cannot be read: one error, no configuration. */
    report = hm_config_report_open(path, HM_CONFIG_CHECK_SKIP_FILES);
    assert_null(report->config);
    assert_false(report->loaded);
    assert_int_equal(g_strv_length(report->errors), 1);
    assert_non_null(strstr(report->errors[0], path));
    rmdir(dir);
}

/* hm_config_open: --config, else $HOTMIG_CONFIG, else the default path or the defaults. */
static void test_open_env(void **state)
{
    g_autofree char *dir = g_dir_make_tmp("hm-config-open-XXXXXX", NULL);
    g_autofree char *a = g_build_filename(dir, "a.conf", NULL);
    g_autofree char *b = g_build_filename(dir, "b.conf", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) c = NULL;

    assert_true(g_file_set_contents(a, "[migrate]\nresume-timeout = 11\n", -1, NULL));
    assert_true(g_file_set_contents(b, "[migrate]\nresume-timeout = 22\n", -1, NULL));
    g_setenv(HM_CONFIG_ENV, b, TRUE);
    c = hm_config_open(NULL, &error);
    assert_non_null(c);
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_RESUME_TIMEOUT), 22);
    g_clear_pointer(&c, hm_config_free);
    c = hm_config_open(a, &error); /* an explicit path wins */
    assert_int_equal(hm_config_get_uint(c, HM_CONFIG_MIGRATE_RESUME_TIMEOUT), 11);
    g_clear_pointer(&c, hm_config_free);
    unlink(b);
    c = hm_config_open(NULL, &error); /* named by the environment and missing: an error */
    assert_null(c);
    assert_true(g_error_matches(error, HM_COMMON_ERROR, HM_COMMON_ERROR_IO));
    assert_non_null(strstr(error->message, b));
    g_unsetenv(HM_CONFIG_ENV);
    unlink(a);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_values),
        cmocka_unit_test(test_empty),        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_nul_and_size), cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_sample),       cmocka_unit_test(test_trailing_comment),
        cmocka_unit_test(test_every_error),  cmocka_unit_test(test_check_meaning),
        cmocka_unit_test(test_check_files),  cmocka_unit_test(test_open_env),
        cmocka_unit_test(test_listen),       cmocka_unit_test(test_token),
        cmocka_unit_test(test_identity),     cmocka_unit_test(test_report_every_problem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
