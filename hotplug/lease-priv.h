/* hm-hotplug VF leases, internals for tests: the clock, the record format, the file names.
 * See docs/leases.md. */
#pragma once

#include "hotplug/hotplug.h"

G_BEGIN_DECLS

/* Files under the store directory, for VF id V (canonical, see hotplug_lease_vf_canonical):
 *   V.lock       flock()ed for each read-modify-write of V; empty; never removed
 *   V.lease      the record (GKeyFile), only ever replaced whole by rename()
 *   V.lease.tmp  the next record while it is written, under the lock */
#define HOTPLUG_LEASE_LOCK_SUFFIX ".lock"
#define HOTPLUG_LEASE_RECORD_SUFFIX ".lease"
#define HOTPLUG_LEASE_TEMP_SUFFIX ".lease.tmp"

/* A record larger than this is damaged (ours are under 4 KiB: the fields have limits). */
#define HOTPLUG_LEASE_RECORD_MAX_BYTES (16 * 1024)
#define HOTPLUG_LEASE_RECORD_VERSION 1
/* Times in a record are unix seconds from 1 to 9999-12-31T23:59:59Z. */
#define HOTPLUG_LEASE_TIME_MAX G_GINT64_CONSTANT(253402300799)

/* An unconfirmed lease created more than this many seconds after "now" is not in force: the
 * clock stepped back, or the record was forged. Bounds how long any record can block a VF. */
#define HOTPLUG_LEASE_CLOCK_SKEW_MAX 3600

/* Unix seconds. */
typedef gint64 (*HotplugLeaseClock)(gpointer user_data);

/* Replaces the store's clock (wall clock, g_get_real_time() in seconds); NULL restores it.
 * Not thread-safe: set it before the store is shared. */
void hotplug_lease_store_set_clock(HotplugLeaseStore *store, HotplugLeaseClock now,
                                   gpointer user_data);

/* Replaces the store's expiry clock (CLOCK_BOOTTIME seconds) and boot id; NULL @boot restores
 * both. hotplug_lease_store_set_clock() sets both clocks to its one; this one then tells them
 * apart (a wall clock that steps while the boot clock does not). Not thread-safe. */
void hotplug_lease_store_set_boot_clock(HotplugLeaseStore *store, HotplugLeaseClock boot,
                                        gpointer user_data, const char *boot_id);

/* Parses the record of VF @vf (canonical) from @data (@len bytes, need not be NUL-terminated).
 * Returns the lease as written (a LEASED one may have expired; the caller compares with its
 * clock), or NULL with HOTPLUG_ERROR_INVALID, the message beginning with "@name: ". Owned. */
HotplugLease *hotplug_lease_record_parse(const char *vf, const char *name, const char *data,
                                         gsize len, GError **error);

/* The text of @lease's record (owned); hotplug_lease_record_parse() reads it back equal. */
char *hotplug_lease_record_format(const HotplugLease *lease);

G_END_DECLS
