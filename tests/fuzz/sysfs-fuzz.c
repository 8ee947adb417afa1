/* Fuzz target for what SR-IOV discovery parses (hotplug/sysfs.c, hotplug/pci-libpci.c): the
 * sysfs attribute parsers, PCI addresses, lspci dumps through libpci's dump method (whose
 * errors must come back as GErrors, never exit()), and the JSON strings of hotmig-sriov. The
 * first byte picks the parser, the rest is its input. Any input must parse or fail with an
 * error, never crash, leak or trip a sanitizer.
 *
 * libFuzzer: see tests/fuzz/sysfs.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the corpus in
 * tests/fuzz/corpus/sysfs/ is replayed by sysfs-fuzz-replay as a normal CTest (label fuzz). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hotplug/pci-priv.h"
#include "hotplug/sysfs-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One lspci dump through libpci, from a memfd (libpci opens it by name). */
static void fuzz_dump(const char *text, size_t len)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;
    HotplugPciSriovStatus status;
    HotplugPciSriov sriov;
    gboolean ok;
    int fd = memfd_create("hm-fuzz-dump", MFD_CLOEXEC);

    g_assert(fd >= 0);
    g_assert(write(fd, text, len) == (ssize_t)len);
    path = g_strdup_printf("/proc/self/fd/%d", fd);
    ok = hotplug_pci_read_sriov_dump(path, NULL, &status, &sriov, &error);
    g_assert(ok == (error == NULL));
    if (ok && status == HOTPLUG_PCI_SRIOV_FOUND)
        g_assert(sriov.cap_offset >= 0x100 && sriov.cap_offset + 0x40 <= 4096);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;
    const char *in;
    size_t len;
    guint u = 0;
    int i = 0;
    gboolean ok = TRUE;

    if (size == 0)
        return 0;
    in = (const char *)data + 1;
    len = size - 1;
    text = g_strndup(in, len); /* NUL-terminated, cut at a NUL inside */
    switch (data[0] % 7) {
    case 0:
        ok = hotplug_sysfs_parse_uint("fuzz", in, len, 65535, &u, &error);
        g_assert(!ok || u <= 65535);
        break;
    case 1:
        ok = hotplug_sysfs_parse_int("fuzz", in, len, -1, 65535, &i, &error);
        g_assert(!ok || (i >= -1 && i <= 65535));
        break;
    case 2:
    case 3:
        ok = hotplug_sysfs_parse_id("fuzz", in, len, data[0] % 7 == 2, &u, &error);
        g_assert(!ok || u <= 0xffff);
        break;
    case 4: {
        g_autofree char *normal = hm_pci_address_normalize(text, &error);

        ok = normal != NULL;
        if (normal) { /* normalizing is idempotent */
            g_autofree char *again = hm_pci_address_normalize(normal, NULL);
            g_assert(again && g_str_equal(again, normal));
        }
        break;
    }
    case 5:
        fuzz_dump(in, len);
        return 0;
    case 6: {
        g_autoptr(GString) out = g_string_new(NULL);

        hm_json_append_string(out, text);
        g_assert(g_utf8_validate(out->str, (gssize)out->len, NULL));
        g_assert(out->len >= 2 && out->str[0] == '"' && out->str[out->len - 1] == '"');
        return 0;
    }
    }
    g_assert(ok == (error == NULL));
    if (error)
        g_assert(strstr(error->message, "fuzz") || strstr(error->message, "PCI address"));
    return 0;
}
