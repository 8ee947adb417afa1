/* `migrate-vm config check [--skip-files] [FILE]` (FILE, else $HOTMIG_CONFIG, else
 * /etc/hotmig/hotmig.conf): loads a configuration file, checks what its values mean
 * (hm_config_report_open(): files, URIs, addresses, names; --skip-files: not the files; the
 * values that load are checked even when other lines are wrong) and that its migration settings
 * go together, reports every problem and warning, and prints the effective configuration; `migrate-vm config sample`: the
 * commented sample. */
#include <stdio.h>

#include "common/config.h"
#include "migrate-vm/commands.h"

int cmd_config_main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(HmConfigReport) report = NULL;
    const HmConfig *config;
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
    /* Every problem: the syntax's, what the values that loaded mean (files, URIs, addresses,
     * names), the warnings; each line of the report its own "migrate-vm:" line. */
    report = hm_config_report_open(path, flags);
    for (char **e = report->errors; *e; e++)
        fprintf(stderr, "migrate-vm: %s\n", *e);
    for (char **w = report->warnings; *w; w++)
        fprintf(stderr, "migrate-vm: warning: %s\n", *w);
    ok = report->loaded && !report->errors[0];
    /* The combinations libvirt refuses, as a migration would find them. */
    if (report->loaded && !cmd_migrate_check_config(report->config, &error)) {
        cmd_print_lines("migrate-vm", error->message);
        ok = FALSE;
    }
    if (!ok)
        return EXIT_CONFIG;
    config = report->config;
    effective = hm_config_format_effective(config);
    fputs(effective, stdout);
    if (hm_config_get_path(config))
        fprintf(stderr, "migrate-vm: '%s' is valid\n", hm_config_get_path(config));
    return EXIT_OK;
}
