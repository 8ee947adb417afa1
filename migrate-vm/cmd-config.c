/* `migrate-vm config check [FILE]`: loads a configuration file, checks that its migration
 * settings go together and prints the effective configuration; `migrate-vm config sample`: the
 * commented sample. */
#include <stdio.h>

#include "common/config.h"
#include "migrate-vm/commands.h"

int cmd_config_main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfig) config = NULL;
    g_autofree char *effective = NULL;

    if (argc == 2 && g_str_equal(argv[1], "sample")) {
        g_autofree char *sample = hm_config_format_sample();

        fputs(sample, stdout);
        return EXIT_OK;
    }
    if (argc < 2 || argc > 3 || !g_str_equal(argv[1], "check")) {
        fprintf(stderr, "usage: migrate-vm config check [FILE]\n"
                        "       migrate-vm config sample\n");
        return EXIT_USAGE;
    }
    if (argc == 3) {
        config = hm_config_load(argv[2], &error);
    } else if (g_file_test(HM_CONFIG_PATH_DEFAULT, G_FILE_TEST_EXISTS)) {
        config = hm_config_load(HM_CONFIG_PATH_DEFAULT, &error);
    } else {
        fprintf(stderr, "migrate-vm: no '%s': the defaults apply\n", HM_CONFIG_PATH_DEFAULT);
        config = hm_config_new();
    }
    if (!config) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_CONFIG;
    }
    /* The combinations libvirt refuses, as a migration would find them. */
    if (!cmd_migrate_check_config(config, &error)) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return EXIT_CONFIG;
    }
    effective = hm_config_format_effective(config);
    fputs(effective, stdout);
    if (hm_config_get_path(config))
        fprintf(stderr, "migrate-vm: '%s' is valid\n", hm_config_get_path(config));
    return EXIT_OK;
}
