#include "common/config.h"

#include <string.h>

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

#define HM_CONFIG_STRING_MAX 1024
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
                                          "Define the domain on the destination (--persistent)."},
    [HM_CONFIG_MIGRATE_UNDEFINE_SOURCE] =
        {"migrate", "undefinesource", HM_CONFIG_TYPE_BOOL, .def = "false",
         .doc = "Undefine the domain on the source once migrated (--undefinesource)."},
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
             "Throttle the guest's vCPUs when memory is dirtied faster than it moves (--auto-converge)."},
    [HM_CONFIG_MIGRATE_POSTCOPY] =
        {"migrate", "postcopy", HM_CONFIG_TYPE_BOOL, .def = "false",
         .doc =
             "Allow switching to post-copy (--postcopy). After the switch a failure cannot be undone: the domain is lost on both hosts."},
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
};
G_STATIC_ASSERT(G_N_ELEMENTS(keys) == HM_CONFIG_KEY_LAST);

static const char *const groups[] = {"migrate", NULL};

struct HmConfig {
    char *path;
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

HmConfig *hm_config_new(void)
{
    HmConfig *config = g_new0(HmConfig, 1);

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

static gboolean config_fail(GError **error, const char *name, guint line, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
static gboolean config_fail(GError **error, const char *name, guint line, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "%s:%u: %s", name, line, msg);
    return FALSE;
}

/* The line-level pass: every line is blank, a comment, a known [group] or a known key of the
 * current group, each set once. GKeyFile is more lenient and does not say where it failed,
 * so this pass finds the line; GKeyFile then reads the values (escapes). Fills @key_lines. */
static gboolean config_scan(const char *data, gsize len, const char *name, guint *key_lines,
                            GError **error)
{
    g_autoptr(GHashTable) seen_groups = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree char *group = NULL;
    gsize pos = 0;
    guint lineno = 0;

    if (memchr(data, '\0', len)) {
        gsize at = (const char *)memchr(data, '\0', len) - data;
        guint nul_line = 1;

        for (gsize i = 0; i < at; i++)
            nul_line += data[i] == '\n';
        return config_fail(error, name, nul_line, "contains a NUL byte");
    }
    while (pos < len) {
        const char *start = data + pos;
        const char *nl = memchr(start, '\n', len - pos);
        gsize n = nl ? (gsize)(nl - start) : len - pos;
        g_autofree char *line = g_strndup(start, n);
        char *s;
        char *eq;

        pos += n + (nl ? 1 : 0);
        lineno++;
        if (!g_utf8_validate(line, -1, NULL))
            return config_fail(error, name, lineno, "not valid UTF-8");
        s = g_strstrip(line);
        if (!*s || *s == '#')
            continue;
        if (*s == '[') {
            char *end = strchr(s, ']');

            if (!end || end[1] != '\0' || end == s + 1 || strchr(s + 1, '['))
                return config_fail(error, name, lineno,
                                   "'%s' is not a group header like '[migrate]'", s);
            *end = '\0';
            if (!g_strv_contains(groups, s + 1)) {
                g_autofree char *list = g_strjoinv("], [", (char **)groups);

                return config_fail(error, name, lineno, "unknown group '[%s]' (known: [%s])", s + 1,
                                   list);
            }
            if (g_hash_table_contains(seen_groups, s + 1))
                return config_fail(error, name, lineno, "group '[%s]' appears twice", s + 1);
            g_free(group);
            group = g_strdup(s + 1);
            for (int g = 0; groups[g]; g++) {
                if (g_str_equal(groups[g], group))
                    g_hash_table_add(seen_groups, (gpointer)groups[g]);
            }
            continue;
        }
        eq = strchr(s, '=');
        if (!eq)
            return config_fail(error, name, lineno,
                               "'%s' is not 'key = value', a '[group]' or a '#' comment", s);
        *eq = '\0';
        g_strchomp(s);
        if (!group)
            return config_fail(error, name, lineno, "key '%s' comes before any '[group]'", s);
        if (strchr(s, '['))
            return config_fail(error, name, lineno, "[%s] %s: localized keys are not supported",
                               group, s);
        {
            int key = config_find_key(group, s);

            if (key < 0) {
                g_autofree char *list = config_group_keys(group);

                return config_fail(error, name, lineno, "[%s] unknown key '%s' (known: %s)", group,
                                   s, list);
            }
            if (key_lines[key])
                return config_fail(error, name, lineno, "[%s] %s: set twice (first on line %u)",
                                   group, s, key_lines[key]);
            key_lines[key] = lineno;
        }
    }
    return TRUE;
}

HmConfig *hm_config_load_data(const char *data, gsize len, const char *name, GError **error)
{
    g_autoptr(HmConfig) config = hm_config_new();
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) local = NULL;
    guint key_lines[HM_CONFIG_KEY_LAST] = {0};

    g_return_val_if_fail(data != NULL || len == 0, NULL);
    g_return_val_if_fail(name != NULL, NULL);

    if (len > HM_CONFIG_MAX_BYTES) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_TOO_LARGE,
                    "%s: larger than the limit of %d bytes", name, HM_CONFIG_MAX_BYTES);
        return NULL;
    }
    if (!config_scan(data ? data : "", len, name, key_lines, error))
        return NULL;
    if (len && !g_key_file_load_from_data(kf, data, len, G_KEY_FILE_NONE, &local)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID, "%s: %s", name,
                    local->message);
        return NULL;
    }
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        g_autofree char *value = NULL;

        if (!key_lines[k])
            continue;
        /* GKeyFile returns the raw text and sets the error for a bad escape sequence. */
        value = g_key_file_get_string(kf, keys[k].group, keys[k].name, &local);
        if (!value || local) {
            config_fail(error, name, key_lines[k], "[%s] %s: %s", keys[k].group, keys[k].name,
                        local->message);
            return NULL;
        }
        if (!config_set(config, k, value, &local)) {
            config_fail(error, name, key_lines[k], "[%s] %s: %s", keys[k].group, keys[k].name,
                        local->message);
            return NULL;
        }
        config->lines[k] = key_lines[k];
    }
    config->path = g_strdup(name);
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
    return g_string_free(g_steal_pointer(&out), FALSE);
}
