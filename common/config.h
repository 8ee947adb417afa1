/* hm-common: /etc/hotmig/hotmig.conf, a GKeyFile with a fixed schema.
 *
 * Every key is declared once, in config.c, with its type, range, default and one line of
 * documentation; the commented sample (etc/hotmig.conf.sample) is generated from that table
 * and a test keeps the two equal. A file is checked strictly: a syntax error, an unknown group
 * or key, a key set twice, a value out of range and a value ending in a '# comment' are errors
 * naming FILE:LINE and the key; loading reports every such error, one per line of the message.
 * hm_config_check() then checks what the values mean. */
#pragma once

#include <glib.h>

#include "common/common.h"

G_BEGIN_DECLS

#define HM_CONFIG_PATH_DEFAULT "/etc/hotmig/hotmig.conf"
#define HM_CONFIG_MAX_BYTES (64 * 1024)
/* The environment variable naming the file when no --config is given. */
#define HM_CONFIG_ENV "HOTMIG_CONFIG"

/* The keys, in the order of the sample file. */
typedef enum {
    HM_CONFIG_MIGRATE_CONNECT,
    HM_CONFIG_MIGRATE_AGENT_CHANNEL,
    HM_CONFIG_MIGRATE_VF_ALIAS_PREFIX,
    HM_CONFIG_MIGRATE_AGENT_TIMEOUT,
    HM_CONFIG_MIGRATE_PREPARE_TIMEOUT,
    HM_CONFIG_MIGRATE_UNPLUG_TIMEOUT,
    HM_CONFIG_MIGRATE_RESUME_TIMEOUT,
    HM_CONFIG_MIGRATE_PLUG_ATTEMPTS,
    HM_CONFIG_MIGRATE_PERSISTENT,
    HM_CONFIG_MIGRATE_UNDEFINE_SOURCE,
    HM_CONFIG_MIGRATE_BANDWIDTH,
    HM_CONFIG_MIGRATE_PARALLEL,
    HM_CONFIG_MIGRATE_AUTO_CONVERGE,
    HM_CONFIG_MIGRATE_POSTCOPY,
    HM_CONFIG_MIGRATE_POSTCOPY_AFTER,
    HM_CONFIG_MIGRATE_TIMEOUT,
    HM_CONFIG_MIGRATE_TIMEOUT_ACTION,
    HM_CONFIG_MIGRATE_HOTMIGD_PORT,
    HM_CONFIG_MIGRATE_CLIENT_CERT,
    HM_CONFIG_MIGRATE_CLIENT_KEY,
    HM_CONFIG_MIGRATE_CA_CERT,
    HM_CONFIG_HOTMIGD_LISTEN,
    HM_CONFIG_HOTMIGD_PORT,
    HM_CONFIG_HOTMIGD_SERVER_CERT,
    HM_CONFIG_HOTMIGD_SERVER_KEY,
    HM_CONFIG_HOTMIGD_CA_CERT,
    HM_CONFIG_HOTMIGD_RUN_DIR,
    HM_CONFIG_HOTMIGD_STATE_DIR,
    HM_CONFIG_HOTMIGD_SOCKET,
    HM_CONFIG_HOTMIGD_SYSFS_ROOT,
    HM_CONFIG_HOTMIGD_LEASE_TTL,
    HM_CONFIG_HOTMIGD_CONNECT,
    HM_CONFIG_HOTMIGD_NAME,
    HM_CONFIG_HOTMIGD_OPERATORS,
    HM_CONFIG_HOTMIGD_LEASE_TTL_MAX,
    HM_CONFIG_HOTMIGD_FILE_ROOTS,
    HM_CONFIG_HOTMIGD_MAX_CONNECTIONS,
    HM_CONFIG_HOTMIGD_HANDSHAKE_TIMEOUT,
    HM_CONFIG_HOTMIGD_IDLE_TIMEOUT,
    HM_CONFIG_POOL_PFS,
    HM_CONFIG_POOL_VFS,
    HM_CONFIG_POOL_STANDINS,
    HM_CONFIG_POOL_STANDIN_GUIDS,
    HM_CONFIG_SCHEDULER_PER_HOST_OUT,
    HM_CONFIG_SCHEDULER_PER_HOST_IN,
    HM_CONFIG_SCHEDULER_TOTAL,
    HM_CONFIG_SCHEDULER_MIN_STAY,
    HM_CONFIG_SCHEDULER_BANDWIDTH,
    HM_CONFIG_SCHEDULER_HOST_VALUE,
    HM_CONFIG_SCHEDULER_CPU_ALLOCATION,
    HM_CONFIG_ALERTS_LISTEN,
    HM_CONFIG_ALERTS_PORT,
    HM_CONFIG_ALERTS_TOKEN_FILE,
    HM_CONFIG_ALERTS_SOCKET,
    HM_CONFIG_ALERTS_EXEC,
    HM_CONFIG_ALERTS_EXEC_INTERVAL,
    HM_CONFIG_ALERTS_MIN_CONFIDENCE,
    HM_CONFIG_ALERTS_HOST_LABEL,
    HM_CONFIG_ALERTS_MAX_UNAVAILABLE,
    HM_CONFIG_KEY_LAST,
} HmConfigKey;

typedef enum {
    HM_CONFIG_TYPE_STRING,
    HM_CONFIG_TYPE_UINT,
    HM_CONFIG_TYPE_BOOL,
    HM_CONFIG_TYPE_ENUM, /* one of a fixed list of words; read with hm_config_get_string() */
    HM_CONFIG_TYPE_LAST,
} HmConfigType;

typedef struct HmConfig HmConfig;

/* A configuration holding every default (no file). Never NULL. */
HmConfig *hm_config_new(void);

/* Reads and checks @path (at most HM_CONFIG_MAX_BYTES). Owned result, NULL with @error
 * (HM_COMMON_ERROR_INVALID, _TOO_LARGE or _IO) naming "PATH:LINE" and the key. */
HmConfig *hm_config_load(const char *path, GError **error);

/* The same for @len bytes of @data; @name stands for the file in messages. */
HmConfig *hm_config_load_data(const char *data, gsize len, const char *name, GError **error);

/* The configuration a program uses: @path when not NULL, else $HOTMIG_CONFIG when set and not
 * empty, else HM_CONFIG_PATH_DEFAULT when it exists, else the defaults. Owned; NULL with
 * @error when the file named or present cannot be used. */
HmConfig *hm_config_open(const char *path, GError **error);

typedef enum {
    HM_CONFIG_CHECK_DEFAULT = 0,
    HM_CONFIG_CHECK_SKIP_FILES = 1 << 0, /* do not open the certificate, key and token files */
} HmConfigCheckFlags;

/* Checks what a loaded @config means, beyond its syntax: the certificate, key and CA files
 * (set or default) exist and are readable regular files; libvirt URIs parse
 * (driver[+transport]://[server]/path, a known transport; a [host NAME] uri names a server);
 * [pool] addresses are PCI addresses; each listen is an IP address ([hotmigd] listen may also
 * be '*'); [hotmigd] name names a [host NAME] group; no two hosts share a uri; a host's
 * hotmigd is a URL with a server.
 * TRUE when all hold; else FALSE with one HM_COMMON_ERROR_INVALID listing every problem, one
 * "FILE:LINE: [group] key: ..." per line. */
gboolean hm_config_check(const HmConfig *config, HmConfigCheckFlags flags, GError **error);

/* What is allowed but likely wrong, one "FILE:LINE: [group] key: ..." each (owned,
 * NULL-terminated, empty when none): hotmigd listening on loopback while the file names a host
 * reached elsewhere (its hotmigd URL neither loopback nor localhost); its listen address or port other than this host's own [host NAME] hotmigd URL's (the
 * address compared when the URL holds an IP address); and, unless @flags skip the files, an
 * alert token file that cannot be read while the alert listener is on (hotmigd runs, the
 * webhook refuses every request) and a client certificate that does not carry this host's
 * identity (the other hosts' hotmigd refuse it). */
char **hm_config_warnings(const HmConfig *config, HmConfigCheckFlags flags);

/* What `config check` reports about the file a program would read (@path, else
 * $HOTMIG_CONFIG, else HM_CONFIG_PATH_DEFAULT when it exists, else the defaults): every
 * problem at once, the syntax's and the meaning's (the values that loaded are checked for
 * meaning even when other lines are wrong), and the warnings. */
typedef struct {
    HmConfig *config; /* what loaded, the rest at its default; NULL when the file cannot be
                         read at all (owned) */
    gboolean loaded;  /* the file's syntax held: @config is the file's */
    char **errors;    /* "FILE:LINE: ...", NULL-terminated, empty when none (owned) */
    char **warnings;  /* hm_config_warnings() (owned) */
} HmConfigReport;

/* Never NULL; owned. */
HmConfigReport *hm_config_report_open(const char *path, HmConfigCheckFlags flags);
void hm_config_report_free(HmConfigReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HmConfigReport, hm_config_report_free)

void hm_config_free(HmConfig *config);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(HmConfig, hm_config_free)

/* Values: the file's, or the default. The getter must match the key's type (g_return). */
const char *hm_config_get_string(const HmConfig *config, HmConfigKey key); /* borrowed */
guint64 hm_config_get_uint(const HmConfig *config, HmConfigKey key);
gboolean hm_config_get_bool(const HmConfig *config, HmConfigKey key);

/* A STRING key holding a comma-separated list ("a, b,c"): the items, trimmed, empty ones
 * dropped (owned, NULL-terminated; empty for an empty value). */
char **hm_config_get_list(const HmConfig *config, HmConfigKey key);

/* ---- [host NAME] groups: the cluster's hosts ----------------------------------------------
 * Any number of groups '[host NAME]' (NAME: letters, digits, '-', '_', '.') may follow the
 * fixed groups, each with the keys 'uri' (libvirt URI of that host, required), 'hotmigd'
 * (its hotmigd URL, https://HOST:PORT; default: the URI's server with [migrate] hotmigd-port)
 * and 'identity' (the name its client certificate carries, a DNS or IP subject alternative
 * name or else its common name, by which the other hotmigds know it; default: NAME). */
typedef struct {
    char *name;
    char *uri;
    char *hotmigd;  /* NULL when not set */
    char *identity; /* NULL when not set: the host is known by its NAME */
    guint line;     /* the line of the group header */
    guint uri_line; /* the line of its 'uri' key */
} HmConfigHost;

/* This host's name among them: [hotmigd] name, else the machine's host name (borrowed). */
const char *hm_config_host_name(const HmConfig *config);
/* @host's hotmigd URL: its 'hotmigd', else https://SERVER:PORT with its uri's server and
 * [migrate] hotmigd-port. Owned; NULL when the uri names no server. */
char *hm_config_host_hotmigd_url(const HmConfig *config, const HmConfigHost *host);
/* The address hotmigd's HTTPS API listens on: [hotmigd] listen; "" (every address) for '*';
 * when empty, the address of this host's own [host NAME] hotmigd URL if it is an IP address,
 * else 127.0.0.1. Owned. */
char *hm_config_listen_address(const HmConfig *config);

/* Borrowed array of HmConfigHost, in file order; never NULL. */
GPtrArray *hm_config_get_hosts(const HmConfig *config);
/* The [host NAME] entry, or NULL (borrowed). */
const HmConfigHost *hm_config_find_host(const HmConfig *config, const char *name);

/* Whether @a and @b hold the same value for @key; the same [host NAME] groups (names, uris,
 * hotmigd URLs, in order). Lines do not count. */
gboolean hm_config_key_equal(const HmConfig *a, const HmConfig *b, HmConfigKey key);
gboolean hm_config_hosts_equal(const HmConfig *a, const HmConfig *b);

/* The line of the file that set @key, 0 when it holds the default. */
guint hm_config_get_line(const HmConfig *config, HmConfigKey key);
/* The file read, or NULL for hm_config_new() (borrowed). */
const char *hm_config_get_path(const HmConfig *config);

/* About the schema. */
const char *hm_config_key_group(HmConfigKey key);
const char *hm_config_key_name(HmConfigKey key);
HmConfigType hm_config_key_type(HmConfigKey key);

/* "[group] key = value  # FILE:LINE | default" for every key, one per line (owned). */
char *hm_config_format_effective(const HmConfig *config);

/* The commented sample file: every key with its documentation and its default, commented
 * out (owned). */
char *hm_config_format_sample(void);

G_END_DECLS
