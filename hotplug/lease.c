/* hm-hotplug: VF leases. One lock file and one record file per VF in a directory; the record
 * is replaced whole by rename() while the lock is held. See docs/leases.md. */
#define G_LOG_DOMAIN "hm-hotplug"

#include "hotplug/lease-priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LEASE_GROUP "lease"
#define LEASE_ID_BYTES 16
#define LEASE_LOCK_BACKOFF_MIN_US 500
#define LEASE_LOCK_BACKOFF_MAX_US (20 * 1000)

#define lease_debug(vf, ...)                                                                       \
    g_log_structured(G_LOG_DOMAIN, G_LOG_LEVEL_DEBUG, HM_LOG_FIELD_VF, (vf), "MESSAGE", __VA_ARGS__)

HM_ENUM_IMPL(hotplug_lease_state, HotplugLeaseState, HOTPLUG_LEASE_STATE_LAST,
             HOTPLUG_LEASE_STATE_WORDS)

struct HotplugLeaseStore {
    char *dir;
    int dir_fd; /* for openat()/renameat() and fsync() of the directory */
    guint lock_timeout_ms;
    HotplugLeaseClock now; /* wall clock: what records show */
    gpointer now_data;
    HotplugLeaseClock boot; /* CLOCK_BOOTTIME: what expiry is decided on */
    gpointer boot_data;
    char *boot_id; /* this boot's /proc/sys/kernel/random/boot_id, NULL if unreadable */
};

/* The two clocks, read once per call. */
typedef struct {
    gint64 wall;
    gint64 boot;
    const char *boot_id; /* borrowed from the store */
} LeaseNow;

void hotplug_lease_free(HotplugLease *lease)
{
    if (!lease)
        return;
    g_free(lease->vf);
    g_free(lease->id);
    g_free(lease->holder);
    g_free(lease->reason);
    g_free(lease->domain);
    g_free(lease->boot_id);
    g_free(lease->identity_of);
    g_free(lease->owner);
    g_free(lease);
}

static HotplugLease *lease_copy(const HotplugLease *lease)
{
    HotplugLease *copy = g_new0(HotplugLease, 1);

    copy->vf = g_strdup(lease->vf);
    copy->state = lease->state;
    copy->id = g_strdup(lease->id);
    copy->holder = g_strdup(lease->holder);
    copy->reason = g_strdup(lease->reason);
    copy->domain = g_strdup(lease->domain);
    copy->created = lease->created;
    copy->expires = lease->expires;
    copy->boot_id = g_strdup(lease->boot_id);
    copy->expires_boot = lease->expires_boot;
    copy->node_guid = lease->node_guid;
    copy->port_guid = lease->port_guid;
    copy->identity_of = g_strdup(lease->identity_of);
    copy->owner = g_strdup(lease->owner);
    return copy;
}

/* Carries the identity fields of @from (may be NULL) over to @to. */
static void lease_keep_identity(HotplugLease *to, const HotplugLease *from)
{
    if (!from || !from->identity_of)
        return;
    to->node_guid = from->node_guid;
    to->port_guid = from->port_guid;
    g_free(to->identity_of);
    to->identity_of = g_strdup(from->identity_of);
}

static HotplugLease *lease_new_free(const char *vf)
{
    HotplugLease *lease = g_new0(HotplugLease, 1);

    lease->vf = g_strdup(vf);
    lease->state = HOTPLUG_LEASE_FREE;
    return lease;
}

/* ---- checks ------------------------------------------------------------------------------ */

/* @s made printable for a message: escaped, at most 64 bytes of it. Owned. */
static char *lease_quote(const char *s)
{
    g_autofree char *head = g_strndup(s, 64);
    g_autofree char *escaped = g_strescape(head, NULL);

    return strlen(s) > 64 ? g_strconcat(escaped, "...", NULL) : g_steal_pointer(&escaped);
}

/* A Linux network device name (dev_valid_name()), restricted to printable ASCII. */
static gboolean lease_netdev_name_valid(const char *name)
{
    gsize len = strlen(name);

    if (len == 0 || len > 15 || g_str_equal(name, ".") || g_str_equal(name, ".."))
        return FALSE;
    for (const char *p = name; *p; p++) {
        if (!g_ascii_isgraph(*p) || *p == '/' || *p == ':')
            return FALSE;
    }
    return TRUE;
}

char *hotplug_lease_vf_canonical(const char *vf, GError **error)
{
    g_autofree char *quoted = NULL;
    char *normal;

    g_return_val_if_fail(vf != NULL, NULL);

    if ((normal = hm_pci_address_normalize(vf, NULL)))
        return normal;
    if (lease_netdev_name_valid(vf))
        return g_strdup(vf);
    quoted = lease_quote(vf);
    g_set_error(
        error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
        "VF id '%s' is neither a PCI address (DDDD:BB:SS.F) nor a network device name (1-15 printable ASCII bytes without '/', ':' or space, not '.' or '..')",
        quoted);
    return NULL;
}

/* A holder, reason or domain: 1..@max bytes of UTF-8 without control characters. */
static gboolean lease_text_valid(const char *field, const char *value, gsize max, GError **error)
{
    gsize len = strlen(value);

    if (len == 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "the %s is empty", field);
        return FALSE;
    }
    if (len > max) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "the %s is %u bytes long, more than the limit of %u", field,
                    (guint)MIN(len, G_MAXUINT), (guint)max);
        return FALSE;
    }
    if (!g_utf8_validate(value, (gssize)len, NULL)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "the %s is not valid UTF-8",
                    field);
        return FALSE;
    }
    for (const char *p = value; *p; p = g_utf8_next_char(p)) {
        if (g_unichar_iscntrl(g_utf8_get_char(p))) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                        "the %s contains a control character", field);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean lease_id_valid(const char *id)
{
    if (strlen(id) != 2 * LEASE_ID_BYTES)
        return FALSE;
    for (const char *p = id; *p; p++) {
        if (!g_ascii_isxdigit(*p) || g_ascii_isupper(*p))
            return FALSE;
    }
    return TRUE;
}

/* ---- the record -------------------------------------------------------------------------- */

/* The integer @key of the record, which must be in @min..@max. */
static gboolean lease_record_int(GKeyFile *kf, const char *name, const char *key, gint64 min,
                                 gint64 max, gint64 *ret_value, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *value = g_key_file_get_value(kf, LEASE_GROUP, key, &local);
    g_autofree char *quoted = NULL;
    gint64 v;

    if (!value) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name, local->message);
        return FALSE;
    }
    if (!g_ascii_string_to_signed(value, 10, min, max, &v, NULL)) {
        quoted = lease_quote(value);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "%s: [lease] %s '%s' is not an integer from %lld to %lld", name, key, quoted,
                    (long long)min, (long long)max);
        return FALSE;
    }
    *ret_value = v;
    return TRUE;
}

/* The optional keys of a record: the identity the VF carries (any state), and for a LEASED one
 * its expiry on this boot's CLOCK_BOOTTIME. */
static gboolean lease_record_optional(GKeyFile *kf, const char *name, HotplugLease *lease,
                                      GError **error)
{
    g_autoptr(GError) local = NULL;
    static const char *const guid_keys[] = {"node-guid", "port-guid"};
    guint64 *guids[] = {&lease->node_guid, &lease->port_guid};

    if (g_key_file_has_key(kf, LEASE_GROUP, "identity-of", NULL)) {
        lease->identity_of = g_key_file_get_string(kf, LEASE_GROUP, "identity-of", &local);
        if (!lease->identity_of ||
            !lease_text_valid("identity-of", lease->identity_of, HOTPLUG_LEASE_DOMAIN_MAX,
                              &local)) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name,
                        local->message);
            return FALSE;
        }
        /* Both GUIDs, or neither (hotplug_lease_mark_identity(): GUIDs unknown). */
        for (gsize i = 0; i < G_N_ELEMENTS(guid_keys); i++) {
            g_autofree char *value = g_key_file_get_value(kf, LEASE_GROUP, guid_keys[i], NULL);

            if (!g_key_file_has_key(kf, LEASE_GROUP, guid_keys[0], NULL) &&
                !g_key_file_has_key(kf, LEASE_GROUP, guid_keys[1], NULL))
                break;

            if (!value || !g_str_has_prefix(value, "0x") ||
                !g_ascii_string_to_unsigned(value + 2, 16, 1, G_MAXUINT64, guids[i], NULL)) {
                g_autofree char *quoted = value ? lease_quote(value) : g_strdup("");

                g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                            "%s: [lease] %s '%s' is not a non-zero 0x-prefixed hex GUID", name,
                            guid_keys[i], quoted);
                return FALSE;
            }
        }
    }
    if (lease->state != HOTPLUG_LEASE_FREE && g_key_file_has_key(kf, LEASE_GROUP, "owner", NULL)) {
        lease->owner = g_key_file_get_string(kf, LEASE_GROUP, "owner", &local);
        if (!lease->owner ||
            !lease_text_valid("owner", lease->owner, HOTPLUG_LEASE_HOLDER_MAX, &local)) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name,
                        local ? local->message : "bad owner");
            return FALSE;
        }
    }
    if (lease->state == HOTPLUG_LEASE_LEASED &&
        g_key_file_has_key(kf, LEASE_GROUP, "boot-id", NULL)) {
        lease->boot_id = g_key_file_get_string(kf, LEASE_GROUP, "boot-id", &local);
        if (!lease->boot_id || !lease_text_valid("boot-id", lease->boot_id, 64, &local)) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name,
                        local ? local->message : "bad boot-id");
            return FALSE;
        }
        if (!lease_record_int(kf, name, "expires-boot", 1, HOTPLUG_LEASE_TIME_MAX,
                              &lease->expires_boot, error))
            return FALSE;
    }
    return TRUE;
}

/* Loads record @name (@data, @len) into @kf: bounded, no NUL, UTF-8, a key file of our
 * version. */
static gboolean lease_record_keyfile(GKeyFile *kf, const char *name, const char *data,
                                     gsize len, GError **error)
{
    g_autoptr(GError) local = NULL;
    gint64 version;

    if (len > HOTPLUG_LEASE_RECORD_MAX_BYTES) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "%s: larger than the limit of %d bytes", name, HOTPLUG_LEASE_RECORD_MAX_BYTES);
        return FALSE;
    }
    if (len > 0 && memchr(data, '\0', len)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: contains a NUL byte", name);
        return FALSE;
    }
    if (!g_utf8_validate(data, (gssize)len, NULL)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: not valid UTF-8", name);
        return FALSE;
    }
    if (!g_key_file_load_from_data(kf, len > 0 ? data : "", len, G_KEY_FILE_NONE, &local)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name, local->message);
        return FALSE;
    }
    return lease_record_int(kf, name, "version", HOTPLUG_LEASE_RECORD_VERSION,
                            HOTPLUG_LEASE_RECORD_VERSION, &version, error);
}

/* The record's VF is @vf and its state one we know (*@ret_state). */
static gboolean lease_record_state(GKeyFile *kf, const char *vf, const char *name,
                                   HotplugLeaseState *ret_state, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *file_vf = g_key_file_get_string(kf, LEASE_GROUP, "vf", &local);
    g_autofree char *state = NULL;
    int st;

    if (!file_vf) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name, local->message);
        return FALSE;
    }
    if (!g_str_equal(file_vf, vf)) {
        g_autofree char *quoted = lease_quote(file_vf);

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "%s: the record is for VF '%s', not '%s'", name, quoted, vf);
        return FALSE;
    }
    state = g_key_file_get_string(kf, LEASE_GROUP, "state", &local);
    if (!state) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name, local->message);
        return FALSE;
    }
    st = hotplug_lease_state_from_string(state);
    if (st < 0) {
        g_autofree char *quoted = lease_quote(state);

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "%s: [lease] state '%s' is not free, leased or assigned", name, quoted);
        return FALSE;
    }
    *ret_state = (HotplugLeaseState)st;
    return TRUE;
}

/* What a held (leased or assigned) lease has: its id, holder, reason, domain, creation. */
static gboolean lease_record_held(GKeyFile *kf, const char *name, HotplugLease *lease,
                                  GError **error)
{
    g_autoptr(GError) local = NULL;
    static const struct {
        const char *key;
        gsize max;
        gsize offset;
    } texts[] = {
        {"holder", HOTPLUG_LEASE_HOLDER_MAX, G_STRUCT_OFFSET(HotplugLease, holder)},
        {"reason", HOTPLUG_LEASE_REASON_MAX, G_STRUCT_OFFSET(HotplugLease, reason)},
        {"domain", HOTPLUG_LEASE_DOMAIN_MAX, G_STRUCT_OFFSET(HotplugLease, domain)},
    };

    lease->id = g_key_file_get_string(kf, LEASE_GROUP, "id", &local);
    if (!lease->id) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name, local->message);
        return FALSE;
    }
    if (!lease_id_valid(lease->id)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "%s: [lease] id is not %d lowercase hex digits", name, 2 * LEASE_ID_BYTES);
        return FALSE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(texts); i++) {
        char **field = G_STRUCT_MEMBER_P(lease, texts[i].offset);

        *field = g_key_file_get_string(kf, LEASE_GROUP, texts[i].key, &local);
        if (!*field || !lease_text_valid(texts[i].key, *field, texts[i].max, &local)) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "%s: %s", name,
                        local->message);
            return FALSE;
        }
    }
    return lease_record_int(kf, name, "created", 1, HOTPLUG_LEASE_TIME_MAX, &lease->created,
                            error);
}

HotplugLease *hotplug_lease_record_parse(const char *vf, const char *name, const char *data,
                                         gsize len, GError **error)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(HotplugLease) lease = NULL;
    HotplugLeaseState state;

    g_return_val_if_fail(vf != NULL, NULL);
    g_return_val_if_fail(name != NULL, NULL);
    g_return_val_if_fail(data != NULL || len == 0, NULL);

    if (!lease_record_keyfile(kf, name, data, len, error) ||
        !lease_record_state(kf, vf, name, &state, error))
        return NULL;
    lease = lease_new_free(vf);
    lease->state = state;
    if (!lease_record_optional(kf, name, lease, error))
        return NULL;
    if (lease->state == HOTPLUG_LEASE_FREE)
        return g_steal_pointer(&lease);
    if (!lease_record_held(kf, name, lease, error))
        return NULL;
    if (lease->state == HOTPLUG_LEASE_ASSIGNED)
        return g_steal_pointer(&lease);

    if (!lease_record_int(kf, name, "expires", 1, HOTPLUG_LEASE_TIME_MAX, &lease->expires, error))
        return NULL;
    if (lease->expires <= lease->created ||
        lease->expires - lease->created > HOTPLUG_LEASE_TTL_MAX) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "%s: [lease] expires is not 1 to %d s after created", name,
                    HOTPLUG_LEASE_TTL_MAX);
        return NULL;
    }
    return g_steal_pointer(&lease);
}

char *hotplug_lease_record_format(const HotplugLease *lease)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();

    g_return_val_if_fail(lease != NULL && lease->vf != NULL, NULL);

    g_key_file_set_int64(kf, LEASE_GROUP, "version", HOTPLUG_LEASE_RECORD_VERSION);
    g_key_file_set_comment(kf, LEASE_GROUP, NULL, " hotmig VF lease (docs/leases.md)", NULL);
    g_key_file_set_string(kf, LEASE_GROUP, "vf", lease->vf);
    g_key_file_set_string(kf, LEASE_GROUP, "state", hotplug_lease_state_to_string(lease->state));
    if (lease->state != HOTPLUG_LEASE_FREE) {
        g_key_file_set_string(kf, LEASE_GROUP, "id", lease->id);
        g_key_file_set_string(kf, LEASE_GROUP, "holder", lease->holder);
        g_key_file_set_string(kf, LEASE_GROUP, "reason", lease->reason);
        g_key_file_set_string(kf, LEASE_GROUP, "domain", lease->domain);
        g_key_file_set_int64(kf, LEASE_GROUP, "created", lease->created);
        if (lease->owner)
            g_key_file_set_string(kf, LEASE_GROUP, "owner", lease->owner);
    }
    if (lease->state == HOTPLUG_LEASE_LEASED) {
        g_key_file_set_int64(kf, LEASE_GROUP, "expires", lease->expires);
        if (lease->boot_id) {
            g_key_file_set_string(kf, LEASE_GROUP, "boot-id", lease->boot_id);
            g_key_file_set_int64(kf, LEASE_GROUP, "expires-boot", lease->expires_boot);
        }
    }
    if (lease->identity_of) {
        g_autofree char *node = g_strdup_printf("0x%016" G_GINT64_MODIFIER "x", lease->node_guid);
        g_autofree char *port = g_strdup_printf("0x%016" G_GINT64_MODIFIER "x", lease->port_guid);

        g_key_file_set_string(kf, LEASE_GROUP, "identity-of", lease->identity_of);
        if (lease->node_guid && lease->port_guid) {
            g_key_file_set_string(kf, LEASE_GROUP, "node-guid", node);
            g_key_file_set_string(kf, LEASE_GROUP, "port-guid", port);
        }
    }
    return g_key_file_to_data(kf, NULL, NULL);
}

/* ---- the store --------------------------------------------------------------------------- */

static gint64 lease_clock_real(gpointer user_data)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

/* Seconds since boot, suspend included: never steps, shared by every process of the host. */
static gint64 lease_clock_boot(gpointer user_data)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
        return g_get_monotonic_time() / G_USEC_PER_SEC;
    return (gint64)ts.tv_sec;
}

/* This boot's id, NULL when it cannot be read (expiry then falls back to the wall clock). */
static char *lease_read_boot_id(void)
{
    g_autofree char *text = NULL;

    if (!g_file_get_contents("/proc/sys/kernel/random/boot_id", &text, NULL, NULL))
        return NULL;
    g_strstrip(text);
    return strlen(text) == 36 ? g_steal_pointer(&text) : NULL;
}

static LeaseNow lease_now(const HotplugLeaseStore *store)
{
    return (LeaseNow){
        .wall = store->now(store->now_data),
        .boot = store->boot(store->boot_data),
        .boot_id = store->boot_id,
    };
}

HotplugLeaseStore *hotplug_lease_store_open(const char *dir, GError **error)
{
    HotplugLeaseStore *store;
    int fd;

    g_return_val_if_fail(dir != NULL, NULL);

    if (!*dir) {
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                            "The lease directory is an empty path");
        return NULL;
    }
    if (g_mkdir_with_parents(dir, 0700) < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot create lease directory '%s': %s", dir, g_strerror(errno));
        return NULL;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot open lease directory '%s': %s", dir, g_strerror(errno));
        return NULL;
    }
    store = g_new0(HotplugLeaseStore, 1);
    store->dir = g_strdup(dir);
    store->dir_fd = fd;
    store->lock_timeout_ms = HOTPLUG_LEASE_LOCK_TIMEOUT_MS_DEFAULT;
    store->now = lease_clock_real;
    store->boot = lease_clock_boot;
    store->boot_id = lease_read_boot_id();
    return store;
}

void hotplug_lease_store_free(HotplugLeaseStore *store)
{
    if (!store)
        return;
    if (store->dir_fd >= 0)
        close(store->dir_fd);
    g_free(store->dir);
    g_free(store->boot_id);
    g_free(store);
}

void hotplug_lease_store_set_lock_timeout(HotplugLeaseStore *store, guint timeout_ms)
{
    g_return_if_fail(store != NULL);
    store->lock_timeout_ms = timeout_ms;
}

void hotplug_lease_store_set_clock(HotplugLeaseStore *store, HotplugLeaseClock now,
                                   gpointer user_data)
{
    g_return_if_fail(store != NULL);
    store->now = now ? now : lease_clock_real;
    store->now_data = now ? user_data : NULL;
    store->boot = now ? now : lease_clock_boot;
    store->boot_data = now ? user_data : NULL;
}

void hotplug_lease_store_set_boot_clock(HotplugLeaseStore *store, HotplugLeaseClock boot,
                                        gpointer user_data, const char *boot_id)
{
    g_return_if_fail(store != NULL);
    store->boot = boot ? boot : lease_clock_boot;
    store->boot_data = boot ? user_data : NULL;
    g_free(store->boot_id);
    store->boot_id = boot ? g_strdup(boot_id) : lease_read_boot_id();
}

/* "DIR/NAME" for messages. Owned. */
static char *lease_path(HotplugLeaseStore *store, const char *vf, const char *suffix)
{
    return g_strconcat(store->dir, G_DIR_SEPARATOR_S, vf, suffix, NULL);
}

static char *lease_time_string(gint64 t)
{
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(t);

    if (!dt)
        return g_strdup_printf("@%" G_GINT64_FORMAT, t);
    return g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ");
}

/* Whether @record (as written; NULL for none) holds its VF at @now. A lease taken on this boot
 * expires by CLOCK_BOOTTIME, which a step of the wall clock does not move; one from another
 * boot has expired (no migration outlives a reboot); one without a boot id (written by an
 * older hotmig, or where the boot id is unreadable) by the wall clock. */
static gboolean lease_in_force(const HotplugLease *record, const LeaseNow *now)
{
    if (!record)
        return FALSE;
    switch (record->state) {
    case HOTPLUG_LEASE_ASSIGNED:
        return TRUE;
    case HOTPLUG_LEASE_LEASED:
        /* Bounded like the wall clock's case: no record blocks longer than its TTL and the
         * skew allowance, however far ahead it was written. */
        if (record->boot_id && now->boot_id)
            return g_str_equal(record->boot_id, now->boot_id) && now->boot < record->expires_boot &&
                   record->expires_boot - now->boot <=
                       record->expires - record->created + HOTPLUG_LEASE_CLOCK_SKEW_MAX;
        return now->wall < record->expires &&
               record->created <= now->wall + HOTPLUG_LEASE_CLOCK_SKEW_MAX;
    default:
        return FALSE;
    }
}

/* What holds the VF, for messages: "leased by 'H' for 'R' ..." (@record in force). Owned. */
static char *lease_describe(const HotplugLease *record, const LeaseNow *now)
{
    gint64 left = record->boot_id && now->boot_id ? record->expires_boot - now->boot
                                                   : record->expires - now->wall;

    g_autofree char *created = lease_time_string(record->created);
    g_autofree char *expires = NULL;

    if (record->state == HOTPLUG_LEASE_ASSIGNED)
        return g_strdup_printf(
            "assigned to domain '%s' (holder '%s', reason '%s', lease %s, since %s)",
            record->domain, record->holder, record->reason, record->id, created);
    expires = lease_time_string(record->expires);
    return g_strdup_printf(
        "leased by '%s' for '%s' (domain '%s', lease %s) until %s, %" G_GINT64_FORMAT " s from now",
        record->holder, record->reason, record->domain, record->id, expires, left);
}

/* Reads the record of @vf. TRUE with *ret_record set to the lease as written, or to NULL when
 * there is none or it is damaged (logged at debug: it counts as free and the next write
 * replaces it). FALSE when the file cannot be read at all. */
static gboolean lease_record_load(HotplugLeaseStore *store, const char *vf,
                                  HotplugLease **ret_record, GError **error)
{
    g_autofree char *name = g_strconcat(vf, HOTPLUG_LEASE_RECORD_SUFFIX, NULL);
    g_autofree char *path = lease_path(store, vf, HOTPLUG_LEASE_RECORD_SUFFIX);
    g_autofree char *data = NULL;
    g_autoptr(GError) local = NULL;
    HotplugLease *record;
    struct stat st;
    gsize len = 0;
    int fd;

    /* O_NONBLOCK: a FIFO put there must not hang us. */
    fd = openat(store->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) {
        *ret_record = NULL;
        return TRUE;
    }
    if (fd < 0 && errno == ELOOP) {
        lease_debug(vf, "Lease record '%s' is a symbolic link; VF '%s' counts as free", path, vf);
        *ret_record = NULL;
        return TRUE;
    }
    if (fd < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot open lease record '%s': %s",
                    path, g_strerror(errno));
        return FALSE;
    }
    if (fstat(fd, &st) < 0) {
        int errsv = errno;

        close(fd);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot read lease record '%s': %s",
                    path, g_strerror(errsv));
        return FALSE;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        lease_debug(vf, "Lease record '%s' is not a regular file; VF '%s' counts as free", path,
                    vf);
        *ret_record = NULL;
        return TRUE;
    }
    /* One byte more than the limit tells "at the limit" from "over it". */
    data = g_malloc(HOTPLUG_LEASE_RECORD_MAX_BYTES + 1);
    while (len <= HOTPLUG_LEASE_RECORD_MAX_BYTES) {
        ssize_t n = read(fd, data + len, HOTPLUG_LEASE_RECORD_MAX_BYTES + 1 - len);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int errsv = errno;

            close(fd);
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                        "Cannot read lease record '%s': %s", path, g_strerror(errsv));
            return FALSE;
        }
        if (n == 0)
            break;
        len += (gsize)n;
    }
    close(fd);

    record = hotplug_lease_record_parse(vf, path, data, len, &local);
    if (!record)
        lease_debug(vf, "Damaged lease record, VF '%s' counts as free: %s", vf, local->message);
    *ret_record = record;
    return TRUE;
}

static gboolean lease_write_all(int fd, const char *data, gsize len)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return FALSE;
        done += (gsize)n;
    }
    return TRUE;
}

/* Replaces the record of @lease->vf with @lease, durably: V.lease.tmp is written and synced,
 * renamed over V.lease, and the directory synced. The caller holds the VF's lock, so the
 * temporary name is ours alone. When this fails before the rename the record is unchanged. */
static gboolean lease_record_store(HotplugLeaseStore *store, const HotplugLease *lease,
                                   GError **error)
{
    g_autofree char *tmp_name = g_strconcat(lease->vf, HOTPLUG_LEASE_TEMP_SUFFIX, NULL);
    g_autofree char *name = g_strconcat(lease->vf, HOTPLUG_LEASE_RECORD_SUFFIX, NULL);
    g_autofree char *tmp_path = lease_path(store, lease->vf, HOTPLUG_LEASE_TEMP_SUFFIX);
    g_autofree char *path = lease_path(store, lease->vf, HOTPLUG_LEASE_RECORD_SUFFIX);
    g_autofree char *data = hotplug_lease_record_format(lease);
    int fd;

    fd = openat(store->dir_fd, tmp_name,
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    if (fd < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot create '%s': %s", tmp_path,
                    g_strerror(errno));
        return FALSE;
    }
    if (!lease_write_all(fd, data, strlen(data)) || fdatasync(fd) < 0) {
        int errsv = errno;

        close(fd);
        unlinkat(store->dir_fd, tmp_name, 0);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot write '%s': %s", tmp_path,
                    g_strerror(errsv));
        return FALSE;
    }
    if (close(fd) < 0) {
        int errsv = errno;

        unlinkat(store->dir_fd, tmp_name, 0);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot write '%s': %s", tmp_path,
                    g_strerror(errsv));
        return FALSE;
    }
    if (renameat(store->dir_fd, tmp_name, store->dir_fd, name) < 0) {
        int errsv = errno;

        unlinkat(store->dir_fd, tmp_name, 0);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot replace '%s': %s", path,
                    g_strerror(errsv));
        return FALSE;
    }
    if (fsync(store->dir_fd) < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot sync lease directory '%s' after replacing '%s': %s", store->dir, path,
                    g_strerror(errno));
        return FALSE;
    }
    return TRUE;
}

/* ---- one read-modify-write --------------------------------------------------------------- */

typedef struct {
    int lock_fd;          /* flock()ed V.lock; closing it unlocks */
    HotplugLease *record; /* as written, NULL when none or damaged */
    LeaseNow now;         /* read once the lock is held */
} LeaseTxn;

static void lease_txn_clear(LeaseTxn *txn)
{
    if (txn->lock_fd >= 0)
        close(txn->lock_fd);
    txn->lock_fd = -1;
    g_clear_pointer(&txn->record, hotplug_lease_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(LeaseTxn, lease_txn_clear)

/* Takes the lock of @vf (waiting at most the store's lock timeout: flock() has no timed wait,
 * so a busy lock is retried with a backoff of 0.5 to 20 ms) and reads its record. */
static gboolean lease_txn_begin(HotplugLeaseStore *store, const char *vf, LeaseTxn *txn,
                                GError **error)
{
    g_autofree char *name = g_strconcat(vf, HOTPLUG_LEASE_LOCK_SUFFIX, NULL);
    g_autofree char *path = lease_path(store, vf, HOTPLUG_LEASE_LOCK_SUFFIX);
    HmDeadline deadline = hm_deadline_in_ms(store->lock_timeout_ms);
    gulong backoff_us = LEASE_LOCK_BACKOFF_MIN_US;

    txn->lock_fd =
        openat(store->dir_fd, name,
               O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, 0600);
    if (txn->lock_fd < 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot open lock file '%s': %s",
                    path, g_strerror(errno));
        return FALSE;
    }
    for (;;) {
        guint left_ms;

        if (flock(txn->lock_fd, LOCK_EX | LOCK_NB) == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED, "Cannot lock '%s': %s", path,
                        g_strerror(errno));
            return FALSE;
        }
        left_ms = hm_deadline_remaining_ms(deadline);
        if (left_ms == 0) {
            g_set_error(
                error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                "Timed out after %u ms waiting for the lock '%s' (a process holding it is stopped?)",
                store->lock_timeout_ms, path);
            return FALSE;
        }
        g_usleep(MIN(backoff_us, (gulong)left_ms * 1000));
        backoff_us = MIN(backoff_us * 2, LEASE_LOCK_BACKOFF_MAX_US);
    }
    txn->now = lease_now(store);
    return lease_record_load(store, vf, &txn->record, error);
}

static gboolean lease_new_id(char **ret_id, GError **error)
{
    guint8 bytes[LEASE_ID_BYTES];
    gsize done = 0;
    GString *id;

    while (done < sizeof(bytes)) {
        ssize_t n = getrandom(bytes + done, sizeof(bytes) - done, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                        "Cannot make a lease id: getrandom: %s", g_strerror(errno));
            return FALSE;
        }
        done += (gsize)n;
    }
    id = g_string_sized_new(2 * LEASE_ID_BYTES + 1);
    for (gsize i = 0; i < sizeof(bytes); i++)
        g_string_append_printf(id, "%02x", bytes[i]);
    *ret_id = g_string_free(id, FALSE);
    return TRUE;
}

/* ---- the calls --------------------------------------------------------------------------- */

HotplugLease *hotplug_lease_acquire(HotplugLeaseStore *store, const char *vf, const char *holder,
                                    const char *reason, const char *domain, guint ttl_s,
                                    GError **error)
{
    return hotplug_lease_acquire_owned(store, vf, NULL, holder, reason, domain, ttl_s, error);
}

HotplugLease *hotplug_lease_acquire_owned(HotplugLeaseStore *store, const char *vf,
                                          const char *owner, const char *holder,
                                          const char *reason, const char *domain, guint ttl_s,
                                          GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autoptr(HotplugLease) lease = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, NULL);
    g_return_val_if_fail(vf != NULL, NULL);
    g_return_val_if_fail(holder != NULL, NULL);
    g_return_val_if_fail(reason != NULL, NULL);
    g_return_val_if_fail(domain != NULL, NULL);

    canon = hotplug_lease_vf_canonical(vf, error);
    if (!canon)
        return NULL;
    if ((owner && !lease_text_valid("owner", owner, HOTPLUG_LEASE_HOLDER_MAX, &local)) ||
        !lease_text_valid("holder", holder, HOTPLUG_LEASE_HOLDER_MAX, &local) ||
        !lease_text_valid("reason", reason, HOTPLUG_LEASE_REASON_MAX, &local) ||
        !lease_text_valid("domain", domain, HOTPLUG_LEASE_DOMAIN_MAX, &local)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, "Cannot lease VF '%s': %s", canon,
                    local->message);
        return NULL;
    }
    if (ttl_s == 0 || ttl_s > HOTPLUG_LEASE_TTL_MAX) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "Cannot lease VF '%s': the time to live %u s is not 1 to %d s", canon, ttl_s,
                    HOTPLUG_LEASE_TTL_MAX);
        return NULL;
    }

    if (!lease_txn_begin(store, canon, &txn, error)) {
        g_prefix_error(error, "Cannot lease VF '%s': ", canon);
        return NULL;
    }
    if (lease_in_force(txn.record, &txn.now)) {
        g_autofree char *what = lease_describe(txn.record, &txn.now);

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_BUSY, "VF '%s' is %s", canon, what);
        return NULL;
    }

    lease = lease_new_free(canon);
    lease->state = HOTPLUG_LEASE_LEASED;
    if (!lease_new_id(&lease->id, error)) {
        g_prefix_error(error, "Cannot lease VF '%s': ", canon);
        return NULL;
    }
    lease->holder = g_strdup(holder);
    lease->owner = g_strdup(owner);
    lease->reason = g_strdup(reason);
    lease->domain = g_strdup(domain);
    lease->created = txn.now.wall;
    lease->expires = txn.now.wall + ttl_s;
    lease->boot_id = g_strdup(txn.now.boot_id);
    lease->expires_boot = txn.now.boot + ttl_s;
    lease_keep_identity(lease, txn.record);
    if (!lease_record_store(store, lease, error)) {
        g_prefix_error(error, "Cannot lease VF '%s': ", canon);
        return NULL;
    }
    lease_debug(canon, "VF '%s' leased by '%s' for '%s' (domain '%s', lease %s, %u s)", canon,
                holder, reason, domain, lease->id, ttl_s);
    return g_steal_pointer(&lease);
}

/* The STALE error for @lease_id on a VF whose record is @txn's. */
static void lease_set_stale(GError **error, const char *what, const char *vf, const char *lease_id,
                            const LeaseTxn *txn)
{
    const HotplugLease *record = txn->record;
    g_autofree char *quoted = lease_quote(lease_id);

    if (lease_in_force(record, &txn->now)) {
        g_autofree char *holder = lease_describe(record, &txn->now);

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_STALE,
                    "Cannot %s lease %s of VF '%s': it is not the current lease; the VF is %s",
                    what, quoted, vf, holder);
    } else if (record && record->state == HOTPLUG_LEASE_LEASED &&
               g_str_equal(record->id, lease_id)) {
        g_autofree char *expired = lease_time_string(record->expires);

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_STALE,
                    "Cannot %s lease %s of VF '%s': it expired at %s", what, quoted, vf, expired);
    } else {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_STALE,
            "Cannot %s lease %s of VF '%s': it is not the current lease; the VF is free (the lease expired or was released)",
            what, quoted, vf);
    }
}

/* Begins a read-modify-write of @vf for the holder of lease @lease_id: canonical id in
 * *ret_canon (owned), the record in @txn. STALE when @lease_id is not the current lease; errors
 * say "Cannot @what VF '...': " or name @what in the stale message. */
static gboolean lease_txn_current(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                                  const char *what, char **ret_canon, LeaseTxn *txn,
                                  GError **error)
{
    g_autofree char *canon = hotplug_lease_vf_canonical(vf, error);

    if (!canon)
        return FALSE;
    if (!lease_txn_begin(store, canon, txn, error)) {
        g_prefix_error(error, "Cannot %s lease %s of VF '%s': ", what, lease_id, canon);
        return FALSE;
    }
    if (!lease_in_force(txn->record, &txn->now) || !g_str_equal(txn->record->id, lease_id)) {
        lease_set_stale(error, what, canon, lease_id, txn);
        return FALSE;
    }
    *ret_canon = g_steal_pointer(&canon);
    return TRUE;
}

gboolean hotplug_lease_confirm(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                               GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);
    g_return_val_if_fail(lease_id != NULL, FALSE);

    if (!lease_txn_current(store, vf, lease_id, "confirm", &canon, &txn, error))
        return FALSE;
    if (txn.record->state == HOTPLUG_LEASE_ASSIGNED)
        return TRUE;

    lease = lease_copy(txn.record);
    lease->state = HOTPLUG_LEASE_ASSIGNED;
    lease->expires = 0;
    if (!lease_record_store(store, lease, error)) {
        g_prefix_error(error, "Cannot confirm the lease of VF '%s': ", canon);
        return FALSE;
    }
    lease_debug(canon, "VF '%s' assigned to domain '%s' (lease %s)", canon, lease->domain,
                lease->id);
    return TRUE;
}

gboolean hotplug_lease_renew(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                             guint ttl_s, GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);
    g_return_val_if_fail(lease_id != NULL, FALSE);

    if (ttl_s == 0 || ttl_s > HOTPLUG_LEASE_TTL_MAX) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "Cannot renew the lease of VF '%s': the time to live %u s is not 1 to %d s",
                    vf, ttl_s, HOTPLUG_LEASE_TTL_MAX);
        return FALSE;
    }
    if (!lease_txn_current(store, vf, lease_id, "renew", &canon, &txn, error))
        return FALSE;
    if (txn.record->state == HOTPLUG_LEASE_ASSIGNED)
        return TRUE;
    lease = lease_copy(txn.record);
    lease->expires = txn.now.wall + ttl_s;
    g_free(lease->boot_id);
    lease->boot_id = g_strdup(txn.now.boot_id);
    lease->expires_boot = txn.now.boot + ttl_s;
    if (!lease_record_store(store, lease, error)) {
        g_prefix_error(error, "Cannot renew the lease of VF '%s': ", canon);
        return FALSE;
    }
    lease_debug(canon, "VF '%s': lease %s renewed for %u s", canon, lease_id, ttl_s);
    return TRUE;
}

gboolean hotplug_lease_set_identity(HotplugLeaseStore *store, const char *vf,
                                    const char *lease_id, guint64 node_guid, guint64 port_guid,
                                    GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);
    g_return_val_if_fail(lease_id != NULL, FALSE);

    if (node_guid == 0 || port_guid == 0) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID,
                    "Cannot record the identity of VF '%s': a GUID is zero", vf);
        return FALSE;
    }
    if (!lease_txn_current(store, vf, lease_id, "record the identity under", &canon, &txn,
                           error))
        return FALSE;
    lease = lease_copy(txn.record);
    lease->node_guid = node_guid;
    lease->port_guid = port_guid;
    g_free(lease->identity_of);
    lease->identity_of = g_strdup(lease->domain);
    if (!lease_record_store(store, lease, error)) {
        g_prefix_error(error, "Cannot record the identity of VF '%s': ", canon);
        return FALSE;
    }
    return TRUE;
}

gboolean hotplug_lease_clear_identity(HotplugLeaseStore *store, const char *vf, GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);

    canon = hotplug_lease_vf_canonical(vf, error);
    if (!canon)
        return FALSE;
    if (!lease_txn_begin(store, canon, &txn, error)) {
        g_prefix_error(error, "Cannot clear the identity of VF '%s': ", canon);
        return FALSE;
    }
    if (!txn.record || !txn.record->identity_of)
        return TRUE;
    lease = lease_copy(txn.record);
    lease->node_guid = lease->port_guid = 0;
    g_clear_pointer(&lease->identity_of, g_free);
    if (!lease_record_store(store, lease, error)) {
        g_prefix_error(error, "Cannot clear the identity of VF '%s': ", canon);
        return FALSE;
    }
    return TRUE;
}

gboolean hotplug_lease_mark_identity(HotplugLeaseStore *store, const char *vf, const char *domain,
                                     GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autoptr(HotplugLease) lease = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);
    g_return_val_if_fail(domain != NULL, FALSE);

    canon = hotplug_lease_vf_canonical(vf, error);
    if (!canon)
        return FALSE;
    if (!lease_text_valid("domain", domain, HOTPLUG_LEASE_DOMAIN_MAX, error) ||
        !lease_txn_begin(store, canon, &txn, error)) {
        g_prefix_error(error, "Cannot record the identity of VF '%s': ", canon);
        return FALSE;
    }
    if (txn.record && g_strcmp0(txn.record->identity_of, domain) == 0)
        return TRUE; /* recorded already, GUIDs kept */
    lease = txn.record ? lease_copy(txn.record) : lease_new_free(canon);
    lease->node_guid = lease->port_guid = 0;
    g_free(lease->identity_of);
    lease->identity_of = g_strdup(domain);
    if (!lease_record_store(store, lease, error)) {
        g_prefix_error(error, "Cannot record the identity of VF '%s': ", canon);
        return FALSE;
    }
    return TRUE;
}

/* Writes a free record for @vf (its lock held); the identity the VF carries stays recorded
 * until hotplug_lease_clear_identity(). */
static gboolean lease_txn_store_free(HotplugLeaseStore *store, const char *vf,
                                     const HotplugLease *record, GError **error)
{
    g_autoptr(HotplugLease) lease = lease_new_free(vf);

    lease_keep_identity(lease, record);
    return lease_record_store(store, lease, error);
}

gboolean hotplug_lease_release(HotplugLeaseStore *store, const char *vf, const char *lease_id,
                               GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);
    g_return_val_if_fail(lease_id != NULL, FALSE);

    canon = hotplug_lease_vf_canonical(vf, error);
    if (!canon)
        return FALSE;
    if (!lease_txn_begin(store, canon, &txn, error)) {
        g_prefix_error(error, "Cannot release the lease of VF '%s': ", canon);
        return FALSE;
    }
    if (!lease_in_force(txn.record, &txn.now)) {
        lease_debug(canon, "VF '%s' is already free (releasing lease %s)", canon, lease_id);
        return TRUE;
    }
    if (!g_str_equal(txn.record->id, lease_id)) {
        lease_set_stale(error, "release", canon, lease_id, &txn);
        return FALSE;
    }
    if (!lease_txn_store_free(store, canon, txn.record, error)) {
        g_prefix_error(error, "Cannot release the lease of VF '%s': ", canon);
        return FALSE;
    }
    lease_debug(canon, "VF '%s' released (lease %s)", canon, lease_id);
    return TRUE;
}

gboolean hotplug_lease_forget(HotplugLeaseStore *store, const char *vf, GError **error)
{
    g_auto(LeaseTxn) txn = {.lock_fd = -1};
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, FALSE);
    g_return_val_if_fail(vf != NULL, FALSE);

    canon = hotplug_lease_vf_canonical(vf, error);
    if (!canon)
        return FALSE;
    if (!lease_txn_begin(store, canon, &txn, error)) {
        g_prefix_error(error, "Cannot forget the assignment of VF '%s': ", canon);
        return FALSE;
    }
    if (!lease_in_force(txn.record, &txn.now))
        return TRUE;
    if (txn.record->state != HOTPLUG_LEASE_ASSIGNED) {
        g_autofree char *what = lease_describe(txn.record, &txn.now);

        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_BUSY,
                    "Cannot forget the assignment of VF '%s': it is not assigned but %s", canon,
                    what);
        return FALSE;
    }
    if (!lease_txn_store_free(store, canon, txn.record, error)) {
        g_prefix_error(error, "Cannot forget the assignment of VF '%s': ", canon);
        return FALSE;
    }
    lease_debug(canon, "VF '%s' forgotten: it was assigned to domain '%s' (lease %s)", canon,
                txn.record->domain, txn.record->id);
    return TRUE;
}

/* The lease of @vf as seen at @now, from @record (as written; NULL for none). Owned. */
static HotplugLease *lease_effective(const char *vf, const HotplugLease *record,
                                     const LeaseNow *now)
{
    HotplugLease *lease;

    if (lease_in_force(record, now))
        return lease_copy(record);
    lease = lease_new_free(vf);
    lease_keep_identity(lease, record);
    return lease;
}

HotplugLease *hotplug_lease_get(HotplugLeaseStore *store, const char *vf, GError **error)
{
    g_autoptr(HotplugLease) record = NULL;
    g_autofree char *canon = NULL;

    g_return_val_if_fail(store != NULL, NULL);
    g_return_val_if_fail(vf != NULL, NULL);

    canon = hotplug_lease_vf_canonical(vf, error);
    if (!canon)
        return NULL;
    /* No lock: the record is only ever replaced whole, so any read sees a whole record. */
    if (!lease_record_load(store, canon, &record, error))
        return NULL;
    {
        LeaseNow now = lease_now(store);

        return lease_effective(canon, record, &now);
    }
}

static int lease_compare_vf(gconstpointer a, gconstpointer b)
{
    const HotplugLease *la = *(const HotplugLease *const *)a;
    const HotplugLease *lb = *(const HotplugLease *const *)b;

    return strcmp(la->vf, lb->vf);
}

/* The names in the store directory (owned strings). */
static GPtrArray *lease_dir_names(HotplugLeaseStore *store, GError **error)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    struct dirent *entry;
    DIR *dir;
    int fd;

    fd = openat(store->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        int errsv = errno;

        if (fd >= 0)
            close(fd);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot list lease directory '%s': %s", store->dir, g_strerror(errsv));
        return NULL;
    }
    for (;;) {
        errno = 0;
        entry = readdir(dir);
        if (!entry)
            break;
        g_ptr_array_add(names, g_strdup(entry->d_name));
    }
    if (errno != 0) {
        int errsv = errno;

        closedir(dir);
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_FAILED,
                    "Cannot list lease directory '%s': %s", store->dir, g_strerror(errsv));
        return NULL;
    }
    closedir(dir);
    return g_steal_pointer(&names);
}

GPtrArray *hotplug_lease_list(HotplugLeaseStore *store, gboolean with_free, GError **error)
{
    g_autoptr(GPtrArray) leases =
        g_ptr_array_new_with_free_func((GDestroyNotify)hotplug_lease_free);
    g_autoptr(GPtrArray) names = NULL;
    LeaseNow now;

    g_return_val_if_fail(store != NULL, NULL);

    names = lease_dir_names(store, error);
    if (!names)
        return NULL;
    now = lease_now(store);
    for (guint i = 0; i < names->len; i++) {
        const char *name = g_ptr_array_index(names, i);
        g_autofree char *vf = NULL;
        g_autofree char *canon = NULL;
        g_autoptr(HotplugLease) record = NULL;
        g_autoptr(HotplugLease) lease = NULL;

        if (!g_str_has_suffix(name, HOTPLUG_LEASE_RECORD_SUFFIX))
            continue;
        vf = g_strndup(name, strlen(name) - strlen(HOTPLUG_LEASE_RECORD_SUFFIX));
        canon = hotplug_lease_vf_canonical(vf, NULL);
        if (!canon || !g_str_equal(canon, vf)) {
            g_autofree char *quoted = lease_quote(name);

            g_debug("Ignoring '%s/%s': not the record of a VF id in canonical form", store->dir,
                    quoted);
            continue;
        }
        if (!lease_record_load(store, vf, &record, error)) {
            g_prefix_error(error, "Cannot list leases: ");
            return NULL;
        }
        lease = lease_effective(vf, record, &now);
        if (lease->state == HOTPLUG_LEASE_FREE && !with_free)
            continue;
        g_ptr_array_add(leases, g_steal_pointer(&lease));
    }
    g_ptr_array_sort(leases, lease_compare_vf);
    return g_steal_pointer(&leases);
}
