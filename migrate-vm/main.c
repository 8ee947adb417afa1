/* migrate-vm: live-migrate a libvirt domain that holds SR-IOV VFs (virsh-adjacent CLI).
 *
 *   migrate-vm [OPTION...] DOMAIN DEST        migrate (cmd-migrate.c)
 *   migrate-vm --recover [DOMAIN]             finish or undo interrupted migrations
 *   migrate-vm config check [--skip-files] [FILE]   check a configuration file (cmd-config.c)
 *   migrate-vm config sample                  print the commented sample configuration
 *   migrate-vm plan ...                       plans (cmd-plan.c)
 *   migrate-vm drain|run|status ...           asking this host's hotmigd (cmd-*.c, local.c)
 *
 * Exit status (man/migrate-vm.1, docs/operations.md): 0 migrated; 1 failed otherwise; 2 bad
 * usage; 3 failed and the undo (or a recovery) failed too; 4 bad configuration file; 5 cancelled
 * (SIGINT, SIGTERM, SIGHUP) and undone; 6 another migration of the domain runs; 7 an interrupted
 * migration of the domain needs --recover; 10 + the failed phase's number (10 connect ..
 * 17 resume) when a phase failed and was undone. */
#include <signal.h>

#include "migrate-vm/commands.h"
#include "xml/xml.h"

/* The subcommands, by the first argument; anything else is a migration (cmd_migrate_main()). */
static const struct {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the subcommand's name */
} commands[] = {
    {"plan", cmd_plan_main},     {"config", cmd_config_main}, {"drain", cmd_drain_main},
    {"status", cmd_status_main}, {"run", cmd_run_main},
};

int main(int argc, char **argv)
{
    /* libvirt writes its sockets with write(): once a daemon has closed our connection (seen:
     * "connection closed due to keepalive timeout" on a loaded host) the next write killed
     * migrate-vm with SIGPIPE (exit 141) without a report, rollback or journal entry. Ignored,
     * the write fails with EPIPE and the phase fails like any libvirt error. */
    signal(SIGPIPE, SIG_IGN);
    xml_init(); /* before the connections' threads */
    for (guint i = 0; argc > 1 && i < G_N_ELEMENTS(commands); i++)
        if (g_str_equal(argv[1], commands[i].name))
            return commands[i].main(argc - 1, argv + 1);
    return cmd_migrate_main(argc, argv);
}
