/* migrate-vm: live-migrate a libvirt domain that holds SR-IOV VFs (virsh-adjacent CLI).
 *
 * Exit status: 0 migrated; 1 failed and undone (the domain is where it was, with its VFs);
 * 2 bad usage; 3 failed and the undo failed too (the report says what the domain lacks). */
#include <stdio.h>
#include <stdlib.h>

#include "orchestrator/orchestrator.h"
#include "orchestrator/virt-priv.h"

static void print_progress(OrchPhase phase, const char *message, gpointer opaque)
{
    GDateTime *now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%H:%M:%S.%f");

    g_date_time_unref(now);
    stamp[12] = '\0'; /* milliseconds */
    fprintf(stderr, "%s %-9s %s\n", stamp, orch_phase_to_string(phase), message);
}

/* Opens the libvirt adapter, wrapped in fault injection when HOTMIG_FAULT_INJECT asks. */
static OrchVirt *open_host(const char *uri, const char *label, gpointer opaque, GError **error)
{
    const char *spec = g_getenv(ORCH_FAULT_ENV);
    OrchVirt *virt = orch_virt_libvirt_open(uri, label, NULL, error);

    if (!virt || !spec || !*spec)
        return virt;
    g_warning("Fault injection active on %s host: %s=%s", label, ORCH_FAULT_ENV, spec);
    return orch_virt_fault_wrap(virt, spec, error);
}

static gboolean seconds_to_ms(const char *name, gint seconds, guint *ret_ms, GError **error)
{
    if (seconds < 0)
        return TRUE; /* not given: keep the default */
    if (seconds == 0 || seconds > 24 * 3600) {
        g_set_error(error, ORCH_ERROR, ORCH_ERROR_INVALID,
                    "%s must be between 1 and 86400 seconds, not %d", name, seconds);
        return FALSE;
    }
    *ret_ms = (guint)seconds * 1000;
    return TRUE;
}

int main(int argc, char **argv)
{
    g_auto(OrchOptions) opts;
    g_autoptr(GOptionContext) ctx = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(OrchReport) report = NULL;
    g_auto(GStrv) args = NULL;
    gboolean verbose = FALSE;
    gboolean json = FALSE;
    gint agent_timeout = -1;
    gint prepare_timeout = -1;
    gint unplug_timeout = -1;
    gint resume_timeout = -1;
    gint plug_attempts = -1;
    gint64 bandwidth = 0;
    gboolean ok;

    orch_options_init(&opts);
    {
        GOptionEntry entries[] = {
            {"connect", 'c', 0, G_OPTION_ARG_STRING, &opts.source_uri,
             "Source hypervisor connection URI (default: libvirt's default URI)", "URI"},
            {"migrateuri", 0, 0, G_OPTION_ARG_STRING, &opts.migrate_uri,
             "Hypervisor migration data URI, e.g. tcp://10.0.0.2:49152", "URI"},
            {"bandwidth", 0, 0, G_OPTION_ARG_INT64, &bandwidth,
             "Migration bandwidth limit in MiB/s", "MIB"},
            {"persistent", 0, 0, G_OPTION_ARG_NONE, &opts.persistent,
             "Persist the domain on the destination", NULL},
            {"undefinesource", 0, 0, G_OPTION_ARG_NONE, &opts.undefine_source,
             "Undefine the domain on the source after migrating", NULL},
            {"no-agent", 0, 0, G_OPTION_ARG_NONE, &opts.no_agent,
             "Do not ask the guest agent to quiesce and resume (RDMA users see the VF vanish)",
             NULL},
            {"agent-channel", 0, 0, G_OPTION_ARG_STRING, &opts.agent_channel,
             "Name of the guest agent's virtio-serial channel (default org.hotmig.agent.0)",
             "NAME"},
            {"target-vf", 0, 0, G_OPTION_ARG_STRING, &opts.target_vf,
             "Destination VF to plug (PCI address), instead of choosing a free one", "ADDR"},
            {"vf-alias-prefix", 0, 0, G_OPTION_ARG_STRING, &opts.alias_prefix,
             "Treat NICs whose alias has this prefix as VFs (the lab's stand-ins; default ua-hmvf)",
             "PREFIX"},
            {"agent-timeout", 0, 0, G_OPTION_ARG_INT, &agent_timeout,
             "Seconds the agent has to answer the handshake (default 5)", "SEC"},
            {"prepare-timeout", 0, 0, G_OPTION_ARG_INT, &prepare_timeout,
             "Seconds processes have to quiesce (default 30)", "SEC"},
            {"unplug-timeout", 0, 0, G_OPTION_ARG_INT, &unplug_timeout,
             "Seconds the guest has to release a VF (default 30)", "SEC"},
            {"resume-timeout", 0, 0, G_OPTION_ARG_INT, &resume_timeout,
             "Seconds to wait for the new RDMA device and the processes (default 60)", "SEC"},
            {"plug-attempts", 0, 0, G_OPTION_ARG_INT, &plug_attempts,
             "Tries to plug a VF on the destination before migrating back (default 2)", "N"},
            {"verbose", 'v', 0, G_OPTION_ARG_NONE, &verbose, "Print progress on stderr", NULL},
            {"json", 0, 0, G_OPTION_ARG_NONE, &json, "Print the report as JSON", NULL},
            {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_STRING_ARRAY, &args, NULL,
             "DOMAIN DEST_URI"},
            {NULL},
        };

        ctx = g_option_context_new("- live-migrate a domain that holds VFs");
        g_option_context_set_summary(
            ctx, "Quiesces the guest's RDMA users through the hotmig agent, unplugs the domain's\n"
                 "SR-IOV VFs, live-migrates it (peer-to-peer) and plugs VFs on the destination.\n"
                 "A failed phase is undone: the domain stays on the source with its VFs.");
        g_option_context_add_main_entries(ctx, entries, NULL);
        if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
            fprintf(stderr, "migrate-vm: %s\n", error->message);
            return 2;
        }
    }
    hm_log_setup("migrate-vm", verbose);
    if (!args || g_strv_length(args) != 2) {
        fprintf(stderr, "migrate-vm: expected DOMAIN and DEST_URI (see --help)\n");
        return 2;
    }
    opts.domain = g_strdup(args[0]);
    opts.dest_uri = g_strdup(args[1]);
    if (bandwidth < 0) {
        fprintf(stderr, "migrate-vm: --bandwidth must not be negative, not %" G_GINT64_FORMAT "\n",
                bandwidth);
        return 2;
    }
    opts.bandwidth_mib = (guint64)bandwidth;
    if (!seconds_to_ms("--agent-timeout", agent_timeout, &opts.agent_timeout_ms, &error) ||
        !seconds_to_ms("--prepare-timeout", prepare_timeout, &opts.prepare_timeout_ms, &error) ||
        !seconds_to_ms("--unplug-timeout", unplug_timeout, &opts.unplug_timeout_ms, &error) ||
        !seconds_to_ms("--resume-timeout", resume_timeout, &opts.resume_timeout_ms, &error)) {
        fprintf(stderr, "migrate-vm: %s\n", error->message);
        return 2;
    }
    if (plug_attempts == 0 || plug_attempts > 100) {
        fprintf(stderr, "migrate-vm: --plug-attempts must be between 1 and 100, not %d\n",
                plug_attempts);
        return 2;
    }
    if (plug_attempts > 0)
        opts.plug_attempts = (guint)plug_attempts;
    if (verbose)
        opts.progress = print_progress;

    ok = orch_migrate(&opts, open_host, NULL, &report, &error);
    if (json) {
        g_autofree char *out = orch_report_format_json(report, TRUE);
        printf("%s\n", out);
    } else if (ok || report->phases[ORCH_PHASE_CONNECT].status == ORCH_STATUS_OK) {
        /* A run that did not get past connecting has nothing to show but its error. */
        g_autofree char *out = orch_report_format_table(report);
        fputs(out, stdout);
    }
    fflush(stdout);
    if (!ok) {
        fprintf(stderr, "migrate-vm: error: %s\n", error->message);
        if (g_error_matches(error, ORCH_ERROR, ORCH_ERROR_INVALID) &&
            report->phases[ORCH_PHASE_CONNECT].status != ORCH_STATUS_OK)
            return 2;
        return g_error_matches(error, ORCH_ERROR, ORCH_ERROR_ROLLBACK) ? 3 : 1;
    }
    return 0;
}
