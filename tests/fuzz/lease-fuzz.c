/* Fuzz target for the VF lease record parser (hotplug/lease.c): any bytes in a record file must
 * be read or rejected with an error that names the file, never crash, leak or trip a
 * sanitizer; what it reads, the formatter writes back the same.
 *
 * libFuzzer: see tests/fuzz/lease.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the corpus in
 * tests/fuzz/corpus/lease/ is replayed by lease-fuzz-replay as a normal CTest (label fuzz). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hotplug/lease-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(HotplugLease) lease = NULL;
    g_autoptr(HotplugLease) back = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;

    lease =
        hotplug_lease_record_parse("0000:3b:00.2", "fuzz.lease", (const char *)data, size, &error);
    g_assert((lease == NULL) == (error != NULL));
    if (error) {
        g_assert(g_str_has_prefix(error->message, "fuzz.lease: "));
        g_assert(g_utf8_validate(error->message, -1, NULL));
        return 0;
    }
    g_assert_cmpstr(lease->vf, ==, "0000:3b:00.2");
    g_assert((lease->state == HOTPLUG_LEASE_FREE) == (lease->id == NULL));
    g_assert(lease->state != HOTPLUG_LEASE_LEASED ||
             (lease->expires > lease->created &&
              lease->expires - lease->created <= HOTPLUG_LEASE_TTL_MAX));

    text = hotplug_lease_record_format(lease);
    back = hotplug_lease_record_parse(lease->vf, "fuzz.lease", text, strlen(text), &error);
    g_assert_no_error(error);
    g_assert_cmpint(back->state, ==, lease->state);
    g_assert_cmpstr(back->id, ==, lease->id);
    g_assert_cmpstr(back->holder, ==, lease->holder);
    g_assert_cmpstr(back->reason, ==, lease->reason);
    g_assert_cmpstr(back->domain, ==, lease->domain);
    g_assert_cmpint(back->created, ==, lease->created);
    g_assert_cmpint(back->expires, ==, lease->expires);
    return 0;
}
