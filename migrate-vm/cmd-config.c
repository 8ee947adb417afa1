/* `migrate-vm config check [--skip-files] [FILE]` (FILE, else $HOTMIG_CONFIG, else
 * /etc/hotmig/hotmig.conf): loads a configuration file, checks what its values mean
 * (hm_config_check: files, URIs, addresses, names; --skip-files: not the files) and that its
 * migration settings go together, reports every problem, and prints the effective configuration; `migrate-vm config sample`: the
 * commented sample. */
#include <stdio.h>

#include "common/config.h"
#include "migrate-vm/commands.h"

int cmd_config_main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) meaning = NULL;
    g_autoptr(HmConfig) config = NULL;
    g_autofree char *effective = NULL;
    HmConfigCheckFlags flags = HM_CONFIG_CHECK_DEFAULT;
    const char *path = NULL;
    gboolean ok;
    int i = 2;

    if (argc == 2 && g_str_equal(argv[1], "sample")) {
        g_autofree char *sample = hm_config_format_sample();

        fputs(sample, stdout);
        return EXIT_OK;
    }
    if (argc >= 2 && g_str_equal(argv[1], "check")) {
        if (i < argc && g_str_equal(argv[i], "--skip-files")) {
            flags |= HM_CONFIG_CHECK_SKIP_FILES;
            i++;
        }
        if (i < argc && argv[i][0] != '-')
            path = argv[i++];
    }
    if (argc < 2 || !g_str_equal(argv[1], "check") || i != argc) {
        fprintf(stderr, "usage: migrate-vm config check [--skip-files] [FILE]\n"
                        "       migrate-vm config sample\n");
        return EXIT_USAGE;
    }
    if (!path && !(g_getenv(HM_CONFIG_ENV) && *g_getenv(HM_CONFIG_ENV)) &&
        !g_file_test(HM_CONFIG_PATH_DEFAULT, G_FILE_TEST_EXISTS))
        fprintf(stderr, "migrate-vm: no '%s': the defaults apply\n", HM_CONFIG_PATH_DEFAULT);
    config = hm_config_open(path, &error);
    if (!config) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_CONFIG;
    }
    /* What the values mean (files, URIs, addresses, names), every problem. */
    ok = hm_config_check(config, flags, &meaning);
    if (!ok)
        fprintf(stderr, "migrate-vm: %s\n", meaning->message);
    /* The combinations libvirt refuses, as a migration would find them. */
    if (!cmd_migrate_check_config(config, &error)) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        ok = FALSE;
    }
    if (!ok)
        return EXIT_CONFIG;
    effective = hm_config_format_effective(config);
    fputs(effective, stdout);
    if (hm_config_get_path(config))
        fprintf(stderr, "migrate-vm: '%s' is valid\n", hm_config_get_path(config));
    return EXIT_OK;
}
