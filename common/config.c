#include "common/config.h"
#include "common/cert.h"
#include "common/pci-address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the schema ---------------------------------------------------------------------------- */

typedef struct {
    const char *group;
    const char *name;
    HmConfigType type;
    guint64 min, max;         /* UINT */
    gboolean nonempty;        /* STRING */
    const char *const *words; /* ENUM, NULL-terminated */
    const char *def;          /* the default, as written in the file */
    const char *doc;          /* one or two sentences for the sample file and the man page */
} HmConfigKeyInfo;

/* A value's length bound: room for a [pool] vfs list of 256 PCI addresses (13 bytes each with
 * its comma), or the lab's 99 stand-in taps. */
#define HM_CONFIG_STRING_MAX 4096
#define HM_CONFIG_SECONDS_MAX (24 * 3600)

static const char *const timeout_actions[] = {"suspend", "postcopy", "abort", NULL};

static const HmConfigKeyInfo keys[] = {
    [HM_CONFIG_MIGRATE_CONNECT] =
        {"migrate", "connect", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Source hypervisor URI when --connect is not given; empty: libvirt's default URI."},
    [HM_CONFIG_MIGRATE_AGENT_CHANNEL] =
        {"migrate", "agent-channel", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "org.hotmig.agent.0",
         .doc = "Name of the guest agent's virtio-serial channel (--agent-channel)."},
    [HM_CONFIG_MIGRATE_VF_ALIAS_PREFIX] =
        {"migrate", "vf-alias-prefix", HM_CONFIG_TYPE_STRING, .nonempty = TRUE, .def = "ua-hmvf",
         .doc =
             "NICs whose alias starts with this are treated as VFs: the lab's stand-ins (--vf-alias-prefix)."},
    [HM_CONFIG_MIGRATE_AGENT_TIMEOUT] =
        {"migrate", "agent-timeout", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "5",
         .doc = "Seconds the guest agent has to answer the handshake (--agent-timeout)."},
    [HM_CONFIG_MIGRATE_PREPARE_TIMEOUT] =
        {"migrate", "prepare-timeout", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "30",
         .doc = "Seconds the guest's processes have to quiesce (--prepare-timeout)."},
    [HM_CONFIG_MIGRATE_UNPLUG_TIMEOUT] =
        {"migrate", "unplug-timeout", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "30",
         .doc =
             "Seconds the guest has to release a VF after the unplug request (--unplug-timeout)."},
    [HM_CONFIG_MIGRATE_RESUME_TIMEOUT] =
        {"migrate", "resume-timeout", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "60",
         .doc =
             "Seconds to wait for the new RDMA device and the processes' answers (--resume-timeout)."},
    [HM_CONFIG_MIGRATE_PLUG_ATTEMPTS] =
        {"migrate", "plug-attempts", HM_CONFIG_TYPE_UINT, 1, 100, .def = "2",
         .doc = "Tries to plug a VF on the destination before migrating back (--plug-attempts)."},
    [HM_CONFIG_MIGRATE_PERSISTENT] = {"migrate", "persistent", HM_CONFIG_TYPE_BOOL, .def = "false",
                                      .doc =
                                          "Define the domain on the destination (--persistent; --no-persistent: not this time)."},
    [HM_CONFIG_MIGRATE_UNDEFINE_SOURCE] =
        {"migrate", "undefinesource", HM_CONFIG_TYPE_BOOL, .def = "false",
         .doc = "Undefine the domain on the source once migrated (--undefinesource; --no-undefinesource: not this time)."},
    [HM_CONFIG_MIGRATE_BANDWIDTH] =
        {"migrate", "bandwidth", HM_CONFIG_TYPE_UINT, 0, G_MAXUINT32, .def = "0",
         .doc = "Migration bandwidth limit in MiB/s; 0: unlimited (--bandwidth)."},
    [HM_CONFIG_MIGRATE_PARALLEL] =
        {"migrate", "parallel", HM_CONFIG_TYPE_UINT, 0, 255, .def = "0",
         .doc =
             "Parallel migration connections (QEMU multifd); 0: one connection, no multifd (--parallel)."},
    [HM_CONFIG_MIGRATE_AUTO_CONVERGE] =
        {"migrate", "auto-converge", HM_CONFIG_TYPE_BOOL, .def = "false",
         .doc =
             "Throttle the guest's vCPUs when memory is dirtied faster than it moves (--auto-converge; --no-auto-converge: not this time)."},
    [HM_CONFIG_MIGRATE_POSTCOPY] =
        {"migrate", "postcopy", HM_CONFIG_TYPE_BOOL, .def = "false",
         .doc =
             "Allow switching to post-copy (--postcopy; --no-postcopy: not this time, nor postcopy-after). After the switch a failure cannot be undone: the domain is lost on both hosts."},
    [HM_CONFIG_MIGRATE_POSTCOPY_AFTER] =
        {"migrate", "postcopy-after", HM_CONFIG_TYPE_UINT, 0, HM_CONFIG_SECONDS_MAX, .def = "0",
         .doc =
             "Seconds of pre-copy before switching to post-copy; 0: switch only on timeout (--postcopy-after, needs postcopy)."},
    [HM_CONFIG_MIGRATE_TIMEOUT] =
        {"migrate", "timeout", HM_CONFIG_TYPE_UINT, 0, HM_CONFIG_SECONDS_MAX, .def = "0",
         .doc =
             "Seconds the memory copy may take before timeout-action applies; 0: no limit (--timeout)."},
    [HM_CONFIG_MIGRATE_TIMEOUT_ACTION] =
        {"migrate", "timeout-action", HM_CONFIG_TYPE_ENUM, .words = timeout_actions,
         .def = "suspend",
         .doc =
             "What a timeout does: suspend (pause the guest so the copy completes, as virsh), postcopy (switch to post-copy, needs postcopy), abort (cancel the migration and undo)."},
    [HM_CONFIG_MIGRATE_HOTMIGD_PORT] =
        {"migrate", "hotmigd-port", HM_CONFIG_TYPE_UINT, 1, 65535, .def = "16680",
         .doc = "TCP port of the destination's hotmigd when neither --hotmigd nor a [host NAME] group gives its URL; the host is the destination URI's server."},
    [HM_CONFIG_MIGRATE_CLIENT_CERT] =
        {"migrate", "client-cert", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/etc/pki/libvirt/clientcert.pem",
         .doc = "Client certificate (PEM) presented to other hosts' hotmigd; the libvirt client certificate by default."},
    [HM_CONFIG_MIGRATE_CLIENT_KEY] =
        {"migrate", "client-key", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/etc/pki/libvirt/private/clientkey.pem",
         .doc = "Private key (PEM) of client-cert."},
    [HM_CONFIG_MIGRATE_CA_CERT] =
        {"migrate", "ca-cert", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/etc/pki/CA/cacert.pem",
         .doc = "CA certificate (PEM) that other hosts' hotmigd certificates must chain to."},
    [HM_CONFIG_HOTMIGD_LISTEN] =
        {"hotmigd", "listen", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Address hotmigd's HTTPS API listens on; empty: the address of this host's own [host NAME] hotmigd URL when it is an IP address, else 127.0.0.1; '*': every address."},
    [HM_CONFIG_HOTMIGD_PORT] =
        {"hotmigd", "port", HM_CONFIG_TYPE_UINT, 1, 65535, .def = "16680",
         .doc = "TCP port of hotmigd's HTTPS API (mutual TLS)."},
    [HM_CONFIG_HOTMIGD_SERVER_CERT] =
        {"hotmigd", "server-cert", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/etc/pki/libvirt/servercert.pem",
         .doc = "Server certificate (PEM) of hotmigd; the libvirt server certificate by default."},
    [HM_CONFIG_HOTMIGD_SERVER_KEY] =
        {"hotmigd", "server-key", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/etc/pki/libvirt/private/serverkey.pem",
         .doc = "Private key (PEM) of server-cert."},
    [HM_CONFIG_HOTMIGD_CA_CERT] =
        {"hotmigd", "ca-cert", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/etc/pki/CA/cacert.pem",
         .doc = "CA certificate (PEM) that client certificates must chain to; clients without one are refused."},
    [HM_CONFIG_HOTMIGD_RUN_DIR] =
        {"hotmigd", "run-dir", HM_CONFIG_TYPE_STRING, .nonempty = TRUE, .def = "/run/hotmig",
         .doc = "Directory of the VF lease store (run-dir/leases: a lock file and a record per VF, kept across restarts of hotmigd, not reboots)."},
    [HM_CONFIG_HOTMIGD_STATE_DIR] =
        {"hotmigd", "state-dir", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/var/lib/hotmig",
         .doc = "Directory of hotmigd's lasting state: the journals of the migrations it runs (migrate-vm --recover). Leases are in run-dir."},
    [HM_CONFIG_HOTMIGD_SOCKET] =
        {"hotmigd", "socket", HM_CONFIG_TYPE_STRING, .nonempty = TRUE,
         .def = "/run/hotmig/hotmigd.sock",
         .doc = "Unix socket of hotmigd's local API (root only), used by migrate-vm."},
    [HM_CONFIG_HOTMIGD_SYSFS_ROOT] =
        {"hotmigd", "sysfs-root", HM_CONFIG_TYPE_STRING, .nonempty = TRUE, .def = "/sys",
         .doc = "Where sysfs is mounted; tests point it at a fixture tree."},
    [HM_CONFIG_HOTMIGD_LEASE_TTL] =
        {"hotmigd", "lease-ttl", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "300",
         .doc = "Seconds an unconfirmed VF lease lives; after that the VF is free again."},
    [HM_CONFIG_HOTMIGD_CONNECT] =
        {"hotmigd", "connect", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "This host's libvirt URI, for the domains that hold VFs; empty: libvirt's default URI."},
    [HM_CONFIG_HOTMIGD_NAME] =
        {"hotmigd", "name", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "This host's name among the [host NAME] groups; empty: the system's host name."},
    [HM_CONFIG_HOTMIGD_OPERATORS] =
        {"hotmigd", "operators", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Comma-separated certificate identities (a DNS or IP subject alternative name, else the common name) with the operator role: lease VFs, start migrations, check files; the [host NAME] groups' identities are the cluster's hosts. Any other certificate of the CA is refused (403) (docs/security.md)."},
    [HM_CONFIG_HOTMIGD_LEASE_TTL_MAX] =
        {"hotmigd", "lease-ttl-max", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "1800",
         .doc = "Longest time to live, in seconds, a client may ask for a VF lease (longer migrations renew theirs)."},
    [HM_CONFIG_HOTMIGD_FILE_ROOTS] =
        {"hotmigd", "file-roots", HM_CONFIG_TYPE_STRING, .def = "/var/lib/libvirt/images",
         .doc = "Comma-separated directories under which POST /v1/files may tell whether a path exists (a migration's disk images); any other path is refused."},
    [HM_CONFIG_HOTMIGD_MAX_CONNECTIONS] =
        {"hotmigd", "max-connections", HM_CONFIG_TYPE_UINT, 1, 65536, .def = "256",
         .doc = "HTTPS connections hotmigd keeps open at once; more are closed as they arrive."},
    [HM_CONFIG_HOTMIGD_HANDSHAKE_TIMEOUT] =
        {"hotmigd", "handshake-timeout", HM_CONFIG_TYPE_UINT, 1, 300, .def = "10",
         .doc = "Seconds a client has to complete the TLS handshake and send its first request."},
    [HM_CONFIG_HOTMIGD_IDLE_TIMEOUT] =
        {"hotmigd", "idle-timeout", HM_CONFIG_TYPE_UINT, 1, 3600, .def = "60",
         .doc = "Seconds an HTTPS connection may stay idle before hotmigd closes it."},
    [HM_CONFIG_POOL_PFS] =
        {"pool", "pfs", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Comma-separated PCI addresses of PFs whose VFs hotmigd may hand out."},
    [HM_CONFIG_POOL_VFS] =
        {"pool", "vfs", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Comma-separated PCI addresses of single VFs hotmigd may hand out (in addition to pfs)."},
    [HM_CONFIG_POOL_STANDINS] =
        {"pool", "standins", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Comma-separated network devices that stand in for VFs (the emulated lab's taps); leased by name."},
    [HM_CONFIG_POOL_STANDIN_GUIDS] =
        {"pool", "standin-guids", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Directory that stands in for the stand-ins' PF driver: DIR/NETDEV/node and port hold the GUIDs of stand-in NETDEV, an InfiniBand VF when DIR/NETDEV exists (the emulated lab's IB fabric; docs/ib-identity.md); empty: stand-ins have no IB identity."},
    [HM_CONFIG_SCHEDULER_PER_HOST_OUT] =
        {"scheduler", "per-host-out", HM_CONFIG_TYPE_UINT, 0, 64, .def = "1",
         .doc = "Migrations a plan runs at once out of one host; 0: no limit."},
    [HM_CONFIG_SCHEDULER_PER_HOST_IN] =
        {"scheduler", "per-host-in", HM_CONFIG_TYPE_UINT, 0, 64, .def = "1",
         .doc = "Migrations a plan runs at once into one host; 0: no limit."},
    [HM_CONFIG_SCHEDULER_TOTAL] =
        {"scheduler", "total", HM_CONFIG_TYPE_UINT, 0, 1024, .def = "4",
         .doc = "Migrations a plan runs at once in the whole cluster; 0: no limit."},
    [HM_CONFIG_SCHEDULER_MIN_STAY] =
        {"scheduler", "min-stay", HM_CONFIG_TYPE_UINT, 0, 7 * 24 * 3600, .def = "600",
         .doc = "Seconds a migrated VM stays put before a consolidation or balance plan moves it again (drains and evacuations ignore it)."},
    [HM_CONFIG_SCHEDULER_BANDWIDTH] =
        {"scheduler", "bandwidth", HM_CONFIG_TYPE_UINT, 1, 1000000, .def = "1250",
         .doc = "MiB/s a migration is assumed to move, for the predicted durations of plans and evacuation deadlines."},
    [HM_CONFIG_SCHEDULER_HOST_VALUE] =
        {"scheduler", "host-value", HM_CONFIG_TYPE_UINT, 0, 1000000, .def = "64",
         .doc = "Migrations a consolidation may spend to free one host: it frees a host only when that costs at most this many more migrations (--host-value)."},
    [HM_CONFIG_SCHEDULER_CPU_ALLOCATION] =
        {"scheduler", "cpu-allocation", HM_CONFIG_TYPE_UINT, 10, 1600, .def = "100",
         .doc = "CPU demand the planner lets one host take, in percent of the CPUs its libvirt reports (OpenStack Nova's cpu_allocation_ratio x 100); 100: no more than its CPUs."},
    [HM_CONFIG_ALERTS_LISTEN] =
        {"alerts", "listen", HM_CONFIG_TYPE_STRING, .def = "127.0.0.1",
         .doc = "Address of the plain-HTTP listener for the Alertmanager webhook (POST /v1/alerts/alertmanager) and /metrics."},
    [HM_CONFIG_ALERTS_PORT] =
        {"alerts", "port", HM_CONFIG_TYPE_UINT, 0, 65535, .def = "16681",
         .doc = "Port of that listener; 0: no listener."},
    [HM_CONFIG_ALERTS_TOKEN_FILE] =
        {"alerts", "token-file", HM_CONFIG_TYPE_STRING, .def = "/etc/hotmig/alert-token",
         .doc = "File holding the bearer token the webhook must present (Alertmanager http_config.authorization)."},
    [HM_CONFIG_ALERTS_SOCKET] =
        {"alerts", "socket", HM_CONFIG_TYPE_STRING, .def = "/run/hotmig/alerts.sock",
         .doc = "Unix socket taking failure predictions as JSON lines; empty: none."},
    [HM_CONFIG_ALERTS_EXEC] =
        {"alerts", "exec", HM_CONFIG_TYPE_STRING, .def = "",
         .doc = "Command run for this host every exec-interval seconds; each stdout line is a JSON event (docs/alerts.md); empty: none."},
    [HM_CONFIG_ALERTS_EXEC_INTERVAL] =
        {"alerts", "exec-interval", HM_CONFIG_TYPE_UINT, 1, HM_CONFIG_SECONDS_MAX, .def = "60",
         .doc = "Seconds between two runs of the exec command."},
    [HM_CONFIG_ALERTS_MIN_CONFIDENCE] =
        {"alerts", "min-confidence", HM_CONFIG_TYPE_UINT, 0, 100, .def = "50",
         .doc = "Events below this confidence (percent) are logged and ignored."},
    [HM_CONFIG_ALERTS_HOST_LABEL] =
        {"alerts", "host-label", HM_CONFIG_TYPE_STRING, .nonempty = TRUE, .def = "instance",
         .doc = "Alert label naming the host ('instance' has its :port removed)."},
    [HM_CONFIG_ALERTS_MAX_UNAVAILABLE] =
        {"alerts", "max-unavailable", HM_CONFIG_TYPE_UINT, 0, 100000, .def = "1",
         .doc = "Hosts alerts may hold quarantined or evacuating at once; more are held back. 0: no limit."},
};
G_STATIC_ASSERT(G_N_ELEMENTS(keys) == HM_CONFIG_KEY_LAST);

static const char *const groups[] = {"migrate", "hotmigd", "pool", "scheduler", "alerts", NULL};

struct HmConfig {
    char *path;
    GPtrArray *hosts; /* HmConfigHost, file order */
    char *strings[HM_CONFIG_KEY_LAST];   /* STRING and ENUM */
    guint64 numbers[HM_CONFIG_KEY_LAST]; /* UINT and BOOL */
    guint lines[HM_CONFIG_KEY_LAST];
};

const char *hm_config_key_group(HmConfigKey key)
{
    g_return_val_if_fail(key < HM_CONFIG_KEY_LAST, NULL);
    return keys[key].group;
}

const char *hm_config_key_name(HmConfigKey key)
{
    g_return_val_if_fail(key < HM_CONFIG_KEY_LAST, NULL);
    return keys[key].name;
}

HmConfigType hm_config_key_type(HmConfigKey key)
{
    g_return_val_if_fail(key < HM_CONFIG_KEY_LAST, HM_CONFIG_TYPE_LAST);
    return keys[key].type;
}

/* ---- values -------------------------------------------------------------------------------- */

/* Checks @text for @key and stores it. On failure sets @error with the reason only (the caller
 * adds FILE:LINE and the key). */
static gboolean config_set(HmConfig *config, HmConfigKey key, const char *text, GError **error)
{
    const HmConfigKeyInfo *info = &keys[key];

    switch (info->type) {
    case HM_CONFIG_TYPE_STRING:
        if (info->nonempty && !*text) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "must not be empty");
            return FALSE;
        }
        if (strlen(text) > HM_CONFIG_STRING_MAX) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "longer than %d bytes",
                        HM_CONFIG_STRING_MAX);
            return FALSE;
        }
        for (const char *p = text; *p; p++) {
            if (g_ascii_iscntrl(*p)) {
                g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                            "contains a control character");
                return FALSE;
            }
        }
        break;
    case HM_CONFIG_TYPE_UINT: {
        guint64 n;

        if (!g_ascii_string_to_unsigned(text, 10, info->min, info->max, &n, NULL)) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "'%s' is not a whole number from %" G_GUINT64_FORMAT
                        " to %" G_GUINT64_FORMAT,
                        text, info->min, info->max);
            return FALSE;
        }
        config->numbers[key] = n;
        return TRUE;
    }
    case HM_CONFIG_TYPE_BOOL:
        if (g_str_equal(text, "true")) {
            config->numbers[key] = TRUE;
        } else if (g_str_equal(text, "false")) {
            config->numbers[key] = FALSE;
        } else {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "'%s' is neither 'true' nor 'false'", text);
            return FALSE;
        }
        return TRUE;
    case HM_CONFIG_TYPE_ENUM:
        if (!g_strv_contains(info->words, text)) {
            g_autofree char *list = g_strjoinv(", ", (char **)info->words);

            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "'%s' is not one of %s",
                        text, list);
            return FALSE;
        }
        break;
    default:
        g_assert_not_reached();
    }
    g_free(config->strings[key]);
    config->strings[key] = g_strdup(text);
    return TRUE;
}

static void config_host_free(HmConfigHost *host)
{
    if (!host)
        return;
    g_free(host->name);
    g_free(host->uri);
    g_free(host->hotmigd);
    g_free(host->identity);
    g_free(host);
}

HmConfig *hm_config_new(void)
{
    HmConfig *config = g_new0(HmConfig, 1);

    config->hosts = g_ptr_array_new_with_free_func((GDestroyNotify)config_host_free);
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        gboolean ok = config_set(config, k, keys[k].def, NULL);

        g_assert(ok); /* the table's defaults are valid */
    }
    return config;
}

void hm_config_free(HmConfig *config)
{
    if (!config)
        return;
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++)
        g_free(config->strings[k]);
    g_ptr_array_unref(config->hosts);
    g_free(config->path);
    g_free(config);
}

const char *hm_config_get_string(const HmConfig *config, HmConfigKey key)
{
    g_return_val_if_fail(config && key < HM_CONFIG_KEY_LAST, NULL);
    g_return_val_if_fail(
        keys[key].type == HM_CONFIG_TYPE_STRING || keys[key].type == HM_CONFIG_TYPE_ENUM, NULL);
    return config->strings[key];
}

guint64 hm_config_get_uint(const HmConfig *config, HmConfigKey key)
{
    g_return_val_if_fail(config && key < HM_CONFIG_KEY_LAST, 0);
    g_return_val_if_fail(keys[key].type == HM_CONFIG_TYPE_UINT, 0);
    return config->numbers[key];
}

gboolean hm_config_get_bool(const HmConfig *config, HmConfigKey key)
{
    g_return_val_if_fail(config && key < HM_CONFIG_KEY_LAST, FALSE);
    g_return_val_if_fail(keys[key].type == HM_CONFIG_TYPE_BOOL, FALSE);
    return config->numbers[key] != 0;
}

char **hm_config_get_list(const HmConfig *config, HmConfigKey key)
{
    g_auto(GStrv) items = NULL;
    g_autoptr(GStrvBuilder) out = g_strv_builder_new();

    g_return_val_if_fail(config && key < HM_CONFIG_KEY_LAST, NULL);
    g_return_val_if_fail(keys[key].type == HM_CONFIG_TYPE_STRING, NULL);
    items = g_strsplit(config->strings[key], ",", -1);
    for (char **p = items; *p; p++) {
        g_strstrip(*p);
        if (**p)
            g_strv_builder_add(out, *p);
    }
    return g_strv_builder_end(out);
}

GPtrArray *hm_config_get_hosts(const HmConfig *config)
{
    g_return_val_if_fail(config != NULL, NULL);
    return config->hosts;
}

const HmConfigHost *hm_config_find_host(const HmConfig *config, const char *name)
{
    g_return_val_if_fail(config && name, NULL);
    for (guint i = 0; i < config->hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(config->hosts, i);

        if (g_str_equal(host->name, name))
            return host;
    }
    return NULL;
}

gboolean hm_config_key_equal(const HmConfig *a, const HmConfig *b, HmConfigKey key)
{
    g_return_val_if_fail(a && b && key < HM_CONFIG_KEY_LAST, FALSE);
    if (keys[key].type == HM_CONFIG_TYPE_STRING || keys[key].type == HM_CONFIG_TYPE_ENUM)
        return g_str_equal(a->strings[key], b->strings[key]);
    return a->numbers[key] == b->numbers[key];
}

gboolean hm_config_hosts_equal(const HmConfig *a, const HmConfig *b)
{
    g_return_val_if_fail(a && b, FALSE);
    if (a->hosts->len != b->hosts->len)
        return FALSE;
    for (guint i = 0; i < a->hosts->len; i++) {
        const HmConfigHost *x = g_ptr_array_index(a->hosts, i);
        const HmConfigHost *y = g_ptr_array_index(b->hosts, i);

        if (!g_str_equal(x->name, y->name) || !g_str_equal(x->uri, y->uri) ||
            g_strcmp0(x->hotmigd, y->hotmigd) != 0)
            return FALSE;
    }
    return TRUE;
}

guint hm_config_get_line(const HmConfig *config, HmConfigKey key)
{
    g_return_val_if_fail(config && key < HM_CONFIG_KEY_LAST, 0);
    return config->lines[key];
}

const char *hm_config_get_path(const HmConfig *config)
{
    g_return_val_if_fail(config, NULL);
    return config->path;
}

/* ---- parsing ------------------------------------------------------------------------------- */

static int config_find_key(const char *group, const char *name)
{
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        if (g_str_equal(keys[k].group, group) && g_str_equal(keys[k].name, name))
            return k;
    }
    return -1;
}

static char *config_group_keys(const char *group)
{
    g_autoptr(GString) list = g_string_new(NULL);

    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        if (g_str_equal(keys[k].group, group))
            g_string_append_printf(list, "%s%s", list->len ? ", " : "", keys[k].name);
    }
    return g_string_free(g_steal_pointer(&list), FALSE);
}

/* Every problem found in a file, so that one run of 'config check' reports them all. */
#define HM_CONFIG_PROBLEMS_MAX 50

typedef struct {
    const char *name; /* the file, in messages */
    GPtrArray *messages;
    guint more; /* problems beyond HM_CONFIG_PROBLEMS_MAX */
} ConfigProblems;

static void config_problems_clear(ConfigProblems *problems)
{
    g_clear_pointer(&problems->messages, g_ptr_array_unref);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(ConfigProblems, config_problems_clear)

static void config_problems_init(ConfigProblems *problems, const char *name)
{
    problems->name = name;
    problems->messages = g_ptr_array_new_with_free_func(g_free);
    problems->more = 0;
}

/* Notes "NAME:LINE: message" (LINE 0: "NAME: message"). */
static void config_problem(ConfigProblems *problems, guint line, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
static void config_problem(ConfigProblems *problems, guint line, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    if (problems->messages->len >= HM_CONFIG_PROBLEMS_MAX) {
        problems->more++;
        return;
    }
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_ptr_array_add(problems->messages,
                    line ? g_strdup_printf("%s:%u: %s", problems->name, line, msg)
                         : g_strdup_printf("%s: %s", problems->name, msg));
}

/* FALSE with one HM_COMMON_ERROR_INVALID listing every problem, one per line; TRUE when none. */
static gboolean config_problems_report(const ConfigProblems *problems, GError **error)
{
    g_autoptr(GString) text = NULL;

    if (!problems->messages->len)
        return TRUE;
    text = g_string_new(NULL);
    for (guint i = 0; i < problems->messages->len; i++)
        g_string_append_printf(text, "%s%s", i ? "\n" : "",
                               (const char *)g_ptr_array_index(problems->messages, i));
    if (problems->more)
        g_string_append_printf(text, "\n%s: %u more problems not shown", problems->name,
                               problems->more);
    g_set_error_literal(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, text->str);
    return FALSE;
}

/* The line-level pass: every line is blank, a comment, a known [group] or a known key of the
 * current group, each set once. GKeyFile is more lenient and does not say where it failed,
 * so this pass finds the line; GKeyFile then reads the values (escapes). Fills @key_lines.
 * A bad line is noted in @problems and the scan goes on; @clean receives the file with every
 * bad line (and every key of a bad group) blanked, line numbers kept, for GKeyFile. */
#define HM_CONFIG_HOST_PREFIX "host "
#define HM_CONFIG_HOSTS_MAX 4096

static gboolean config_host_name_valid(const char *name)
{
    if (!*name || strlen(name) > 253)
        return FALSE;
    for (const char *p = name; *p; p++) {
        if (!g_ascii_isalnum(*p) && !strchr("-_.", *p))
            return FALSE;
    }
    return TRUE;
}

/* A [host NAME] key: 'uri', 'hotmigd' or 'identity'. Sets the field or fails (reason only). */
static gboolean config_host_set(HmConfigHost *host, const char *key, const char *value,
                                GError **error)
{
    char **field = g_str_equal(key, "uri")       ? &host->uri
                   : g_str_equal(key, "hotmigd") ? &host->hotmigd
                                                 : &host->identity;

    if (!*value) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "must not be empty");
        return FALSE;
    }
    if (strlen(value) > HM_CONFIG_STRING_MAX) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "longer than %d bytes",
                    HM_CONFIG_STRING_MAX);
        return FALSE;
    }
    for (const char *p = value; field == &host->identity && *p; p++) {
        if (g_ascii_iscntrl(*p) || *p == ',') {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "'%s' holds a control character or a comma", value);
            return FALSE;
        }
    }
    if (field == &host->hotmigd && !g_str_has_prefix(value, "https://")) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s' is not an https:// URL", value);
        return FALSE;
    }
    g_free(*field);
    *field = g_strdup(value);
    return TRUE;
}

/* A '#' after white space inside a value: an operator's trailing comment, which GKeyFile would
 * keep as part of the value ('name = node01 # this host' names 'node01 # this host'). Refused
 * rather than stripped: a '#' is data in a URL or a command, and a silent cut is worse. */
static const char *config_trailing_comment(const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '#' && p > value && g_ascii_isspace(p[-1]))
            return p;
    }
    return NULL;
}

/* The scanner's state while it reads a file line by line. */
typedef struct {
    guint *key_lines;          /* per HmConfigKey: the line that set it, 0: none */
    GPtrArray *hosts;          /* HmConfigHost, as the [host NAME] groups come */
    ConfigProblems *problems;
    HmConfigHost *host;        /* the current [host NAME] group, borrowed from @hosts */
    guint host_key_lines[3];   /* its uri, hotmigd, identity lines */
    GHashTable *seen_groups;   /* the fixed groups met so far */
    char *group;               /* the current group's name, NULL before any */
    gboolean bad_group;        /* the current group's header was refused: skip its keys */
} ConfigScan;

/* A NUL byte: reported with its line; the lines cannot be told apart after it. */
static gboolean config_scan_nul(const char *data, gsize len, ConfigProblems *problems)
{
    gsize at;
    guint nul_line = 1;

    if (!memchr(data, '\0', len))
        return FALSE;
    at = (const char *)memchr(data, '\0', len) - data;
    for (gsize i = 0; i < at; i++)
        nul_line += data[i] == '\n';
    config_problem(problems, nul_line, "contains a NUL byte");
    return TRUE;
}

/* The header '[host NAME]' (@hname: NAME; @header: "host NAME") on @lineno: a new host, or a
 * problem (FALSE). */
static gboolean config_scan_host_header(ConfigScan *sc, const char *header, const char *hname,
                                        guint lineno)
{
    const HmConfigHost *twin = NULL;

    if (!config_host_name_valid(hname)) {
        config_problem(sc->problems, lineno,
                       "'[%s]': host name '%s' may hold only letters, digits, '-', '_' and '.'",
                       header, hname);
        return FALSE;
    }
    for (guint i = 0; i < sc->hosts->len && !twin; i++) {
        if (g_str_equal(((const HmConfigHost *)g_ptr_array_index(sc->hosts, i))->name, hname))
            twin = g_ptr_array_index(sc->hosts, i);
    }
    if (twin) {
        config_problem(sc->problems, lineno, "group '[%s]' appears twice (first on line %u)",
                       header, twin->line);
        return FALSE;
    }
    if (sc->hosts->len >= HM_CONFIG_HOSTS_MAX) {
        config_problem(sc->problems, lineno, "more than %d [host NAME] groups",
                       HM_CONFIG_HOSTS_MAX);
        return FALSE;
    }
    sc->host = g_new0(HmConfigHost, 1);
    sc->host->name = g_strdup(hname);
    sc->host->line = lineno;
    g_ptr_array_add(sc->hosts, sc->host);
    sc->host_key_lines[0] = sc->host_key_lines[1] = sc->host_key_lines[2] = 0;
    return TRUE;
}

/* A fixed group's header '[@name]' on @lineno: known and met once, or a problem (FALSE). */
static gboolean config_scan_group_header(ConfigScan *sc, const char *name, guint lineno)
{
    if (!g_strv_contains(groups, name)) {
        g_autofree char *list = g_strjoinv("], [", (char **)groups);

        config_problem(sc->problems, lineno, "unknown group '[%s]' (known: [%s], [host NAME])",
                       name, list);
        return FALSE;
    }
    if (g_hash_table_contains(sc->seen_groups, name)) {
        config_problem(sc->problems, lineno, "group '[%s]' appears twice", name);
        return FALSE;
    }
    for (int g = 0; groups[g]; g++) {
        if (g_str_equal(groups[g], name))
            g_hash_table_add(sc->seen_groups, (gpointer)groups[g]);
    }
    return TRUE;
}

/* A line '[...]' (@s, stripped): TRUE to keep it for GKeyFile. */
static gboolean config_scan_header(ConfigScan *sc, char *s, guint lineno)
{
    char *end = strchr(s, ']');
    gboolean ok;

    sc->host = NULL;
    sc->bad_group = TRUE;
    g_clear_pointer(&sc->group, g_free);
    if (!end || end[1] != '\0' || end == s + 1 || strchr(s + 1, '[')) {
        config_problem(sc->problems, lineno, "'%s' is not a group header like '[migrate]'", s);
        return FALSE;
    }
    *end = '\0';
    if (g_str_has_prefix(s + 1, HM_CONFIG_HOST_PREFIX))
        ok = config_scan_host_header(sc, s + 1, s + 1 + strlen(HM_CONFIG_HOST_PREFIX), lineno);
    else
        ok = config_scan_group_header(sc, s + 1, lineno);
    if (!ok)
        return FALSE;
    sc->group = g_strdup(s + 1);
    sc->bad_group = FALSE;
    return TRUE;
}

/* Key @s of the current [host NAME] group on @lineno: TRUE to keep it. */
static gboolean config_scan_host_key(ConfigScan *sc, const char *s, guint lineno)
{
    int hk = g_str_equal(s, "uri")        ? 0
             : g_str_equal(s, "hotmigd")  ? 1
             : g_str_equal(s, "identity") ? 2
                                          : -1;

    if (hk < 0) {
        config_problem(sc->problems, lineno,
                       "[%s] unknown key '%s' (known: uri, hotmigd, identity)", sc->group, s);
        return FALSE;
    }
    if (sc->host_key_lines[hk]) {
        config_problem(sc->problems, lineno, "[%s] %s: set twice (first on line %u)", sc->group,
                       s, sc->host_key_lines[hk]);
        return FALSE;
    }
    sc->host_key_lines[hk] = lineno;
    if (hk == 0)
        sc->host->uri_line = lineno;
    return TRUE;
}

/* Key @s of the current fixed group on @lineno: TRUE to keep it. */
static gboolean config_scan_group_key(ConfigScan *sc, const char *s, guint lineno)
{
    int key = config_find_key(sc->group, s);

    if (key < 0) {
        g_autofree char *list = config_group_keys(sc->group);

        config_problem(sc->problems, lineno, "[%s] unknown key '%s' (known: %s)", sc->group, s,
                       list);
        return FALSE;
    }
    if (sc->key_lines[key]) {
        config_problem(sc->problems, lineno, "[%s] %s: set twice (first on line %u)", sc->group,
                       s, sc->key_lines[key]);
        return FALSE;
    }
    sc->key_lines[key] = lineno;
    return TRUE;
}

/* A line 'key = value' (@s, stripped, with its '=' at @eq): TRUE to keep it. */
static gboolean config_scan_key(ConfigScan *sc, char *s, char *eq, guint lineno)
{
    const char *value = eq + 1;
    const char *hash;

    *eq = '\0';
    g_strchomp(s);
    if (sc->bad_group)
        return FALSE; /* the header's problem is reported; its keys would only repeat it */
    if (!sc->group) {
        config_problem(sc->problems, lineno, "key '%s' comes before any '[group]'", s);
        return FALSE;
    }
    if (strchr(s, '[')) {
        config_problem(sc->problems, lineno, "[%s] %s: localized keys are not supported",
                       sc->group, s);
        return FALSE;
    }
    hash = config_trailing_comment(value);
    if (hash) {
        g_autofree char *whole = g_strstrip(g_strdup(value));
        g_autofree char *bare = g_strstrip(g_strndup(value, hash - value));

        config_problem(sc->problems, lineno,
                       "[%s] %s: '%s' ends in a comment: '#' starts a comment only at the start of a line (write '%s = %s' and the comment above it)",
                       sc->group, s, whole, s, bare);
        return FALSE;
    }
    return sc->host ? config_scan_host_key(sc, s, lineno) : config_scan_group_key(sc, s, lineno);
}

/* One line (@line, owned by the caller, changed) on @lineno: TRUE to keep it for GKeyFile. */
static gboolean config_scan_line(ConfigScan *sc, char *line, guint lineno)
{
    char *s;
    char *eq;

    if (!g_utf8_validate(line, -1, NULL)) {
        config_problem(sc->problems, lineno, "not valid UTF-8");
        return FALSE;
    }
    s = g_strstrip(line);
    if (!*s || *s == '#')
        return FALSE;
    if (*s == '[')
        return config_scan_header(sc, s, lineno);
    eq = strchr(s, '=');
    if (!eq) {
        config_problem(sc->problems, lineno,
                       "'%s' is not 'key = value', a '[group]' or a '#' comment", s);
        return FALSE;
    }
    return config_scan_key(sc, s, eq, lineno);
}

static gboolean config_scan(const char *data, gsize len, guint *key_lines, GPtrArray *hosts,
                            GString *clean, ConfigProblems *problems)
{
    g_autoptr(GHashTable) seen_groups = g_hash_table_new(g_str_hash, g_str_equal);
    ConfigScan sc = {
        .key_lines = key_lines,
        .hosts = hosts,
        .problems = problems,
        .seen_groups = seen_groups,
    };
    gsize pos = 0;
    guint lineno = 0;

    if (config_scan_nul(data, len, problems))
        return FALSE; /* the lines cannot be told apart: nothing more to say */
    while (pos < len) {
        const char *start = data + pos;
        const char *nl = memchr(start, '\n', len - pos);
        gsize n = nl ? (gsize)(nl - start) : len - pos;
        g_autofree char *line = g_strndup(start, n);

        pos += n + (nl ? 1 : 0);
        lineno++;
        if (config_scan_line(&sc, line, lineno))
            g_string_append_len(clean, start, n);
        g_string_append_c(clean, '\n');
    }
    g_free(sc.group);
    return TRUE;
}

/* The values of @len bytes of @data (@name in messages): every value that holds is set, every
 * problem noted in @problems. NULL when the lines cannot be told apart (a NUL byte) or GKeyFile
 * refuses what the scan kept: then nothing of the file means anything. Owned. */
static HmConfig *config_parse(const char *data, gsize len, const char *name,
                              ConfigProblems *problems)
{
    g_autoptr(HmConfig) config = hm_config_new();
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) local = NULL;
    g_autoptr(GString) clean = g_string_new(NULL);
    guint key_lines[HM_CONFIG_KEY_LAST] = {0};

    if (!config_scan(data ? data : "", len, key_lines, config->hosts, clean, problems))
        return NULL;
    /* Only the lines the scan accepted: GKeyFile then reads every value it kept. */
    if (clean->len && !g_key_file_load_from_data(kf, clean->str, clean->len, G_KEY_FILE_NONE,
                                                 &local)) {
        config_problem(problems, 0, "%s", local->message);
        return NULL;
    }
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        g_autofree char *value = NULL;

        if (!key_lines[k])
            continue;
        /* GKeyFile returns the raw text and sets the error for a bad escape sequence. */
        value = g_key_file_get_string(kf, keys[k].group, keys[k].name, &local);
        if (!value || local) {
            config_problem(problems, key_lines[k], "[%s] %s: %s", keys[k].group, keys[k].name,
                           local->message);
            g_clear_error(&local);
            continue;
        }
        if (!config_set(config, k, value, &local)) {
            config_problem(problems, key_lines[k], "[%s] %s: %s", keys[k].group, keys[k].name,
                           local->message);
            g_clear_error(&local);
            continue;
        }
        config->lines[k] = key_lines[k];
    }
    for (guint i = 0; i < config->hosts->len; i++) {
        HmConfigHost *host = g_ptr_array_index(config->hosts, i);
        g_autofree char *group = g_strconcat(HM_CONFIG_HOST_PREFIX, host->name, NULL);
        static const char *const host_keys[] = {"uri", "hotmigd", "identity"};

        for (guint k = 0; k < G_N_ELEMENTS(host_keys); k++) {
            g_autofree char *value = NULL;

            if (!g_key_file_has_key(kf, group, host_keys[k], NULL))
                continue;
            value = g_key_file_get_string(kf, group, host_keys[k], &local);
            if (!value || !config_host_set(host, host_keys[k], value, &local)) {
                config_problem(problems, k == 0 ? host->uri_line : host->line, "[%s] %s: %s",
                               group, host_keys[k], local->message);
                g_clear_error(&local);
            }
        }
        if (!host->uri_line)
            config_problem(problems, host->line, "[%s] has no 'uri' key", group);
    }
    config->path = g_strdup(name);
    return g_steal_pointer(&config);
}

HmConfig *hm_config_load_data(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(HmConfig) config = NULL;
    g_auto(ConfigProblems) problems = {0};

    g_return_val_if_fail(data != NULL || len == 0, NULL);
    g_return_val_if_fail(name != NULL, NULL);

    if (len > HM_CONFIG_MAX_BYTES) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TOO_LARGE,
                    "%s: larger than the limit of %d bytes", name, HM_CONFIG_MAX_BYTES);
        return NULL;
    }
    config_problems_init(&problems, name);
    config = config_parse(data, len, name, &problems);
    if (!config_problems_report(&problems, error))
        return NULL;
    return g_steal_pointer(&config);
}

HmConfig *hm_config_load(const char *path, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    g_return_val_if_fail(path != NULL, NULL);

    if (!hm_file_read_limited(path, HM_CONFIG_MAX_BYTES, &data, &len, error))
        return NULL;
    return hm_config_load_data(data, len, path, error);
}

HmConfig *hm_config_open(const char *path, GError **error)
{
    const char *env = g_getenv(HM_CONFIG_ENV);

    if (path)
        return hm_config_load(path, error);
    if (env && *env)
        return hm_config_load(env, error);
    if (g_file_test(HM_CONFIG_PATH_DEFAULT, G_FILE_TEST_EXISTS))
        return hm_config_load(HM_CONFIG_PATH_DEFAULT, error);
    return hm_config_new();
}

/* ---- meaning ------------------------------------------------------------------------------- */

/* The keys naming a file the programs read: they must exist and be readable (the alert token
 * is apart: without it only the webhook is refused, hm_config_warnings()). */
static const HmConfigKey file_keys[] = {
    HM_CONFIG_MIGRATE_CLIENT_CERT, HM_CONFIG_MIGRATE_CLIENT_KEY, HM_CONFIG_MIGRATE_CA_CERT,
    HM_CONFIG_HOTMIGD_SERVER_CERT, HM_CONFIG_HOTMIGD_SERVER_KEY, HM_CONFIG_HOTMIGD_CA_CERT,
};

/* The keys holding a libvirt URI (empty: libvirt's default); the keys holding comma-separated
 * PCI addresses. */
static const HmConfigKey uri_keys[] = {HM_CONFIG_MIGRATE_CONNECT, HM_CONFIG_HOTMIGD_CONNECT};
static const HmConfigKey pci_keys[] = {HM_CONFIG_POOL_PFS, HM_CONFIG_POOL_VFS};

/* libvirt's remote transports (virConnectOpen: "driver[+transport]://[user@][host][:port]/path"). */
static const char *const uri_transports[] = {"tls",  "tcp", "unix", "ssh", "libssh",
                                             "libssh2", "ext", NULL};

/* Where @key was set, for a message: "FILE:LINE: [group] key" or "FILE: [group] key (default)". */
static void config_key_problem(ConfigProblems *problems, const HmConfig *config, HmConfigKey key,
                               const char *fmt, ...) G_GNUC_PRINTF(4, 5);
static void config_key_problem(ConfigProblems *problems, const HmConfig *config, HmConfigKey key,
                               const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    config_problem(problems, config->lines[key], "[%s] %s%s: %s", keys[key].group, keys[key].name,
                   config->lines[key] ? "" : " (default)", msg);
}

/* Checks that @uri is a libvirt URI, "driver[+transport]://[host]/path"; with @need_server,
 * that it names a server. FALSE with the reason only. */
static gboolean config_uri_check(const char *uri, gboolean need_server, GError **error)
{
    g_autoptr(GUri) parsed = NULL;
    g_autoptr(GError) local = NULL;
    const char *scheme, *plus;

    parsed = g_uri_parse(uri, G_URI_FLAGS_NONE, &local);
    if (!parsed || !g_uri_get_host(parsed)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s' is not a libvirt URI like 'qemu+tls://HOST/system'", uri);
        return FALSE;
    }
    scheme = g_uri_get_scheme(parsed);
    plus = strchr(scheme, '+');
    if (plus && !g_strv_contains(uri_transports, plus + 1)) {
        g_autofree char *list = g_strjoinv(", ", (char **)uri_transports);

        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s': unknown transport '%s' (libvirt knows %s)", uri, plus + 1, list);
        return FALSE;
    }
    if (need_server && !*g_uri_get_host(parsed)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "'%s' names no server (a cluster host is reached over the network: 'qemu+tls://HOST/system')",
                    uri);
        return FALSE;
    }
    return TRUE;
}

/* Why @path cannot be read as a regular file (owned), NULL when it can. */
static char *config_file_problem(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

    if (fd < 0) {
        int errsv = errno;

        return g_strdup_printf("cannot read '%s': %s", path, g_strerror(errsv));
    }
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        close(fd);
        return g_strdup_printf("'%s' is not a regular file", path);
    }
    close(fd);
    return NULL;
}

static void config_check_file(ConfigProblems *problems, const HmConfig *config, HmConfigKey key)
{
    g_autofree char *why = NULL;

    if (!*config->strings[key])
        return; /* an optional file, not set */
    why = config_file_problem(config->strings[key]);
    if (why)
        config_key_problem(problems, config, key, "%s", why);
}

/* An IP address (owned, in its canonical form), NULL when @text is none. */
static char *config_ip_address(const char *text)
{
    g_autoptr(GInetAddress) inet = NULL;

    if (!text || !*text || strchr(text, '%'))
        return NULL;
    inet = g_inet_address_new_from_string(text);
    return inet ? g_inet_address_to_string(inet) : NULL;
}

static void config_check_listen(ConfigProblems *problems, const HmConfig *config)
{
    const char *addr = config->strings[HM_CONFIG_HOTMIGD_LISTEN];
    const char *alerts = config->strings[HM_CONFIG_ALERTS_LISTEN];
    g_autofree char *ip = config_ip_address(addr);
    g_autofree char *alerts_ip = config_ip_address(alerts);

    if (*addr && !g_str_equal(addr, "*") && !ip)
        config_key_problem(problems, config, HM_CONFIG_HOTMIGD_LISTEN,
                           "'%s' is not an IP address (IPv4 or IPv6; '*': every address; empty: the address of this host's own [host NAME] hotmigd URL, else 127.0.0.1)",
                           addr);
    if (*alerts && !alerts_ip)
        config_key_problem(problems, config, HM_CONFIG_ALERTS_LISTEN,
                           "'%s' is not an IP address (IPv4 or IPv6; empty: every address)",
                           alerts);
}

static void config_check_hosts(ConfigProblems *problems, const HmConfig *config)
{
    for (guint i = 0; i < config->hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(config->hosts, i);
        g_autoptr(GError) local = NULL;

        if (!config_uri_check(host->uri, TRUE, &local)) {
            config_problem(problems, host->uri_line, "[host %s] uri: %s", host->name,
                           local->message);
            continue;
        }
        for (guint j = 0; j < i; j++) {
            const HmConfigHost *other = g_ptr_array_index(config->hosts, j);

            if (g_str_equal(other->uri, host->uri)) {
                config_problem(problems, host->uri_line,
                               "[host %s] uri: '%s' is also the uri of [host %s] (line %u): two hosts cannot share one",
                               host->name, host->uri, other->name, other->uri_line);
                break;
            }
        }
        if (host->hotmigd) {
            g_autoptr(GUri) url = g_uri_parse(host->hotmigd, G_URI_FLAGS_NONE, NULL);

            if (!url || !g_uri_get_host(url) || !*g_uri_get_host(url))
                config_problem(problems, host->line,
                               "[host %s] hotmigd: '%s' is not a URL like 'https://HOST:16680'",
                               host->name, host->hotmigd);
        }
    }
}

/* The meaning checks, into @problems. */
static void config_check_into(ConfigProblems *problems, const HmConfig *config,
                              HmConfigCheckFlags flags)
{
    const char *name = config->strings[HM_CONFIG_HOTMIGD_NAME];

    if (!(flags & HM_CONFIG_CHECK_SKIP_FILES)) {
        for (gsize i = 0; i < G_N_ELEMENTS(file_keys); i++)
            config_check_file(problems, config, file_keys[i]);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(uri_keys); i++) {
        g_autoptr(GError) local = NULL;
        const char *uri = config->strings[uri_keys[i]];

        if (*uri && !config_uri_check(uri, FALSE, &local))
            config_key_problem(problems, config, uri_keys[i], "%s", local->message);
    }
    config_check_listen(problems, config);
    for (gsize i = 0; i < G_N_ELEMENTS(pci_keys); i++) {
        g_auto(GStrv) items = hm_config_get_list(config, pci_keys[i]);

        for (char **p = items; *p; p++) {
            g_autoptr(GError) local = NULL;

            if (!hm_pci_address_parse(*p, NULL, &local))
                config_key_problem(problems, config, pci_keys[i], "%s", local->message);
        }
    }
    config_check_hosts(problems, config);
    if (*name && !hm_config_find_host(config, name)) {
        g_autoptr(GString) known = g_string_new(NULL);

        for (guint i = 0; i < config->hosts->len; i++)
            g_string_append_printf(known, "%s%s", i ? ", " : "",
                                   ((const HmConfigHost *)g_ptr_array_index(config->hosts, i))->name);
        config_key_problem(problems, config, HM_CONFIG_HOTMIGD_NAME,
                           "'%s' names no [host NAME] group (%s%s)", name,
                           known->len ? "known: " : "the file has none", known->str);
    }
}

gboolean hm_config_check(const HmConfig *config, HmConfigCheckFlags flags, GError **error)
{
    g_auto(ConfigProblems) problems = {0};

    g_return_val_if_fail(config != NULL, FALSE);

    config_problems_init(&problems, config->path ? config->path : "defaults");
    config_check_into(&problems, config, flags);
    return config_problems_report(&problems, error);
}

/* ---- this host ----------------------------------------------------------------------------- */

const char *hm_config_host_name(const HmConfig *config)
{
    const char *name;

    g_return_val_if_fail(config != NULL, NULL);
    name = config->strings[HM_CONFIG_HOTMIGD_NAME];
    return *name ? name : g_get_host_name();
}

char *hm_config_host_hotmigd_url(const HmConfig *config, const HmConfigHost *host)
{
    g_autoptr(GUri) uri = NULL;
    const char *server;

    g_return_val_if_fail(config && host, NULL);
    if (host->hotmigd)
        return g_strdup(host->hotmigd);
    uri = g_uri_parse(host->uri, G_URI_FLAGS_NONE, NULL);
    server = uri && g_uri_get_host(uri) ? g_uri_get_host(uri) : NULL;
    if (!server || !*server)
        return NULL;
    return g_strdup_printf("https://%s%s%s:%" G_GUINT64_FORMAT, strchr(server, ':') ? "[" : "",
                           server, strchr(server, ':') ? "]" : "",
                           config->numbers[HM_CONFIG_MIGRATE_HOTMIGD_PORT]);
}

/* This host's hotmigd URL as the others reach it, parsed; NULL when it has no [host NAME]. */
static GUri *config_own_url(const HmConfig *config, const HmConfigHost **ret_host)
{
    const HmConfigHost *own = hm_config_find_host(config, hm_config_host_name(config));
    g_autofree char *url = own ? hm_config_host_hotmigd_url(config, own) : NULL;

    if (!url)
        return NULL;
    *ret_host = own;
    return g_uri_parse(url, G_URI_FLAGS_NONE, NULL);
}

char *hm_config_listen_address(const HmConfig *config)
{
    const char *listen;
    const HmConfigHost *own = NULL;
    g_autoptr(GUri) url = NULL;
    char *ip;

    g_return_val_if_fail(config != NULL, NULL);
    listen = config->strings[HM_CONFIG_HOTMIGD_LISTEN];
    if (g_str_equal(listen, "*"))
        return g_strdup("");
    if (*listen)
        return g_strdup(listen);
    url = config_own_url(config, &own);
    ip = url ? config_ip_address(g_uri_get_host(url)) : NULL;
    return ip ? ip : g_strdup("127.0.0.1");
}

/* ---- warnings ------------------------------------------------------------------------------ */

/* Whether a [host NAME] other than @own is reached elsewhere than on this machine: its hotmigd
 * URL names neither a loopback address nor localhost (a cluster on one machine, the lab, is
 * all loopback). */
static gboolean config_remote_hosts(const HmConfig *config, const HmConfigHost *own)
{
    for (guint i = 0; i < config->hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(config->hosts, i);
        g_autofree char *url = host == own ? NULL : hm_config_host_hotmigd_url(config, host);
        g_autoptr(GUri) parsed = url ? g_uri_parse(url, G_URI_FLAGS_NONE, NULL) : NULL;
        const char *server = parsed ? g_uri_get_host(parsed) : NULL;
        g_autofree char *ip = server ? config_ip_address(server) : NULL;
        g_autoptr(GInetAddress) inet = ip ? g_inet_address_new_from_string(ip) : NULL;

        if (server && g_ascii_strcasecmp(server, "localhost") != 0 &&
            !(inet && g_inet_address_get_is_loopback(inet)))
            return TRUE;
    }
    return FALSE;
}

/* hotmigd's listen address against what the other hosts are told: loopback while another
 * host is elsewhere; another address or port than this host's own [host NAME] hotmigd URL. */
static void config_warn_listen(ConfigProblems *warnings, const HmConfig *config)
{
    g_autofree char *addr = hm_config_listen_address(config);
    g_autoptr(GInetAddress) inet = *addr ? g_inet_address_new_from_string(addr) : NULL;
    const char *name = hm_config_host_name(config);
    const HmConfigHost *own = NULL;
    g_autoptr(GUri) url = config_own_url(config, &own);
    g_autofree char *url_ip = url ? config_ip_address(g_uri_get_host(url)) : NULL;
    guint64 port = config->numbers[HM_CONFIG_HOTMIGD_PORT];

    if (inet && g_inet_address_get_is_loopback(inet) && config_remote_hosts(config, own))
        config_key_problem(warnings, config, HM_CONFIG_HOTMIGD_LISTEN,
                           "hotmigd listens on %s, loopback only: the other hosts cannot reach it (lease its VFs, ask it for migrations); set listen to this host's address or '*'%s",
                           addr,
                           !config->lines[HM_CONFIG_HOTMIGD_LISTEN] && !url_ip
                               ? " (empty takes the address of this host's own [host NAME] hotmigd URL only when that is an IP address)"
                               : "");
    if (!url)
        return;
    if (inet && url_ip && !g_inet_address_get_is_loopback(inet) && !g_str_equal(addr, url_ip))
        config_key_problem(warnings, config, HM_CONFIG_HOTMIGD_LISTEN,
                           "hotmigd listens on %s, but the other hosts reach this host '%s' at %s ([host %s] hotmigd)",
                           addr, name, g_uri_get_host(url), own->name);
    if (g_uri_get_port(url) > 0 && (guint64)g_uri_get_port(url) != port)
        config_key_problem(warnings, config, HM_CONFIG_HOTMIGD_PORT,
                           "hotmigd listens on port %" G_GUINT64_FORMAT
                           ", but the other hosts reach this host '%s' on port %d ([host %s] hotmigd%s)",
                           port, name, g_uri_get_port(url), own->name,
                           own->hotmigd ? "" : ": its uri's server with [migrate] hotmigd-port");
}

/* The alert token: without it hotmigd runs and its webhook refuses every request. */
static void config_warn_token(ConfigProblems *warnings, const HmConfig *config)
{
    const char *path = config->strings[HM_CONFIG_ALERTS_TOKEN_FILE];
    g_autofree char *why = NULL;

    if (!config->numbers[HM_CONFIG_ALERTS_PORT])
        return; /* no listener */
    if (!*path) {
        config_key_problem(warnings, config, HM_CONFIG_ALERTS_TOKEN_FILE,
                           "empty: the alert webhook refuses every request (set a token file, or [alerts] port = 0 for no listener)");
        return;
    }
    why = config_file_problem(path);
    if (why)
        config_key_problem(warnings, config, HM_CONFIG_ALERTS_TOKEN_FILE,
                           "%s: the alert webhook refuses every request until it can be read (write one line of random text there, mode 0600: 'umask 077; openssl rand -hex 32 > %s'; or set [alerts] port = 0 for no listener)",
                           why, path);
}

/* This host's client certificate against the identity the other hosts know it by. */
static void config_warn_identity(ConfigProblems *warnings, const HmConfig *config)
{
    const HmConfigHost *own = hm_config_find_host(config, hm_config_host_name(config));
    const char *cert_path = config->strings[HM_CONFIG_MIGRATE_CLIENT_CERT];
    const char *identity;
    g_autoptr(GTlsCertificate) cert = NULL;
    g_autoptr(GPtrArray) ids = NULL;
    g_autofree char *list = NULL;

    if (!own)
        return;
    identity = own->identity ? own->identity : own->name;
    cert = g_tls_certificate_new_from_file(cert_path, NULL);
    if (!cert)
        return; /* unreadable: an error of its own; no TLS backend: nothing to say */
    ids = hm_cert_identities(cert);
    for (guint i = 0; i < ids->len; i++) {
        if (g_str_equal(g_ptr_array_index(ids, i), identity))
            return;
    }
    g_ptr_array_add(ids, NULL);
    list = g_strjoinv("', '", (char **)ids->pdata);
    config_problem(warnings, own->line,
                   "[host %s] identity%s: '%s' is not a name this host's client certificate '%s' carries ('%s'): the other hosts' hotmigd will refuse its requests (403); set identity = %s",
                   own->name, own->identity ? "" : " (default: the host's NAME)", identity,
                   cert_path, list, ids->len > 1 ? (char *)g_ptr_array_index(ids, 0) : "NAME");
}

char **hm_config_warnings(const HmConfig *config, HmConfigCheckFlags flags)
{
    g_auto(ConfigProblems) warnings = {0};

    g_return_val_if_fail(config != NULL, NULL);
    config_problems_init(&warnings, config->path ? config->path : "defaults");
    config_warn_listen(&warnings, config);
    if (!(flags & HM_CONFIG_CHECK_SKIP_FILES)) {
        config_warn_token(&warnings, config);
        config_warn_identity(&warnings, config);
    }
    g_ptr_array_add(warnings.messages, NULL);
    return (char **)g_ptr_array_steal(warnings.messages, NULL);
}

/* ---- the whole report ---------------------------------------------------------------------- */

void hm_config_report_free(HmConfigReport *report)
{
    if (!report)
        return;
    hm_config_free(report->config);
    g_strfreev(report->errors);
    g_strfreev(report->warnings);
    g_free(report);
}

HmConfigReport *hm_config_report_open(const char *path, HmConfigCheckFlags flags)
{
    g_autoptr(HmConfigReport) report = g_new0(HmConfigReport, 1);
    g_auto(ConfigProblems) problems = {0};
    g_autoptr(GError) local = NULL;
    g_autofree char *data = NULL;
    const char *env = g_getenv(HM_CONFIG_ENV);
    gsize len = 0;

    if (!path && env && *env)
        path = env;
    else if (!path && g_file_test(HM_CONFIG_PATH_DEFAULT, G_FILE_TEST_EXISTS))
        path = HM_CONFIG_PATH_DEFAULT;
    config_problems_init(&problems, path ? path : "defaults");
    if (!path) {
        report->config = hm_config_new();
        report->loaded = TRUE;
    } else if (!hm_file_read_limited(path, HM_CONFIG_MAX_BYTES, &data, &len, &local)) {
        config_problem(&problems, 0, "%s", local->message);
    } else {
        guint syntax;

        report->config = config_parse(data, len, path, &problems);
        syntax = problems.messages->len + problems.more;
        report->loaded = report->config && syntax == 0;
    }
    if (report->config) {
        config_check_into(&problems, report->config, flags);
        report->warnings = hm_config_warnings(report->config, flags);
    } else {
        report->warnings = g_new0(char *, 1);
    }
    if (problems.more)
        g_ptr_array_add(problems.messages, g_strdup_printf("%s: %u more problems not shown",
                                                           problems.name, problems.more));
    g_ptr_array_add(problems.messages, NULL);
    report->errors = (char **)g_ptr_array_steal(problems.messages, NULL);
    return g_steal_pointer(&report);
}

/* ---- output -------------------------------------------------------------------------------- */

static char *config_value_text(const HmConfig *config, HmConfigKey key)
{
    switch (keys[key].type) {
    case HM_CONFIG_TYPE_STRING:
    case HM_CONFIG_TYPE_ENUM:
        return g_strdup(config->strings[key]);
    case HM_CONFIG_TYPE_UINT:
        return g_strdup_printf("%" G_GUINT64_FORMAT, config->numbers[key]);
    case HM_CONFIG_TYPE_BOOL:
        return g_strdup(config->numbers[key] ? "true" : "false");
    default:
        g_assert_not_reached();
    }
}

char *hm_config_format_effective(const HmConfig *config)
{
    g_autoptr(GString) out = g_string_new(NULL);

    g_return_val_if_fail(config != NULL, NULL);
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        g_autofree char *value = config_value_text(config, k);
        g_autofree char *where = config->lines[k]
                                     ? g_strdup_printf("%s:%u", config->path, config->lines[k])
                                     : g_strdup("default");
        g_autofree char *left = g_strdup_printf("[%s] %s = %s", keys[k].group, keys[k].name, value);

        g_string_append_printf(out, "%-48s # %s\n", left, where);
    }
    for (guint i = 0; i < config->hosts->len; i++) {
        const HmConfigHost *host = g_ptr_array_index(config->hosts, i);

        g_string_append_printf(out, "[host %s] uri = %s%s%s%s%s  # %s:%u\n", host->name,
                               host->uri, host->hotmigd ? ", hotmigd = " : "",
                               host->hotmigd ? host->hotmigd : "",
                               host->identity ? ", identity = " : "",
                               host->identity ? host->identity : "", config->path, host->line);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

char *hm_config_format_sample(void)
{
    g_autoptr(GString) out = g_string_new(NULL);
    const char *group = NULL;

    g_string_append(
        out, "# hotmig configuration, read from /etc/hotmig/hotmig.conf (GKeyFile format:\n"
             "# '[group]' headers, 'key = value' lines, '#' comments).\n"
             "#\n"
             "# Every key is listed below, commented out, with its default. Uncomment and\n"
             "# change what you need; command-line options override these values.\n"
             "# Unknown keys, keys set twice and values out of range are errors.\n"
             "# Check a file with: migrate-vm config check [FILE]\n"
             "#\n"
             "# This file is generated by 'migrate-vm config sample' from common/config.c.\n");
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        const HmConfigKeyInfo *info = &keys[k];

        if (!group || !g_str_equal(group, info->group)) {
            group = info->group;
            g_string_append_printf(out, "\n[%s]\n", group);
        }
        g_string_append_printf(out, "\n# %s\n", info->doc);
        switch (info->type) {
        case HM_CONFIG_TYPE_UINT:
            g_string_append_printf(
                out, "# A whole number from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT ".\n",
                info->min, info->max);
            break;
        case HM_CONFIG_TYPE_BOOL:
            g_string_append(out, "# true or false.\n");
            break;
        case HM_CONFIG_TYPE_ENUM: {
            g_autofree char *list = g_strjoinv(", ", (char **)info->words);

            g_string_append_printf(out, "# One of: %s.\n", list);
            break;
        }
        default:
            break;
        }
        g_string_append_printf(out, "#%s = %s\n", info->name, info->def);
    }
    g_string_append(
        out, "\n# The cluster's hosts, one group each, for hotmigd's cluster model and for\n"
             "# finding a destination's hotmigd. NAME: letters, digits, '-', '_', '.'.\n"
             "# uri: the host's libvirt URI (required). hotmigd: its hotmigd URL, default\n"
             "# https://SERVER:HOTMIGD-PORT with SERVER taken from uri. identity: the name\n"
             "# its client certificate carries (DNS or IP subject alternative name, else\n"
             "# common name), by which the other hotmigds authorize it; default: NAME.\n"
             "#[host node01]\n"
             "#uri = qemu+tls://node01/system\n"
             "#hotmigd = https://node01:16680\n"
             "#identity = node01.cluster.example\n");
    return g_string_free(g_steal_pointer(&out), FALSE);
}
