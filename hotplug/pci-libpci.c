/* hm-hotplug: the libpci adapter, the only file that includes <pci/pci.h>.
 *
 * libpci reports fatal errors through pci_access.error, which must not return (the default
 * prints and calls exit()). Ours longjmp()s back to pci_run(), the one place that calls
 * setjmp(): every libpci call that can fail runs as a PciFunc under pci_run(), and a libpci
 * error becomes a GError. Results travel in the PciFunc's data, never in locals of the frame
 * that called setjmp(), so nothing is indeterminate after the jump. The pci_access is still
 * consistent at the points where libpci reports errors (files closed, allocations linked), so
 * pci_cleanup() frees everything afterwards. */
#define G_LOG_DOMAIN "hm-hotplug"

#include "common/pci-address.h"
#include "hotplug/pci-priv.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include <pci/pci.h>

/* ---- the error handler ------------------------------------------------------------------- */

typedef struct PciGuard PciGuard;
struct PciGuard {
    jmp_buf env;
    PciGuard *prev;
    char message[512];      /* libpci's error message */
    char last_warning[256]; /* the last warning libpci gave before it, for context */
};

/* The innermost pci_run() of this thread. */
static _Thread_local PciGuard *pci_guard;

/* Copies a libpci message (printf-style) into @buf without its trailing newline. */
static void pci_format_message(char *buf, gsize size, const char *fmt, va_list ap)
    G_GNUC_PRINTF(3, 0);
static void pci_format_message(char *buf, gsize size, const char *fmt, va_list ap)
{
    gsize len;

    g_vsnprintf(buf, size, fmt, ap);
    len = strlen(buf);
    while (len > 0 && g_ascii_isspace(buf[len - 1]))
        buf[--len] = '\0';
}

/* noreturn as a function attribute, so that the pointer type matches libpci's member. */
static void pci_on_error(char *msg, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void pci_on_warning(char *msg, ...) __attribute__((format(printf, 1, 2)));
static void pci_on_debug(char *msg, ...) __attribute__((format(printf, 1, 2)));

static void pci_on_error(char *msg, ...)
{
    PciGuard *guard = pci_guard;
    va_list ap;

    va_start(ap, msg);
    if (!guard) {
        char text[512];

        /* A libpci call outside pci_run(): a bug in this file. Abort (with a core), never
         * exit() quietly as libpci would. */
        pci_format_message(text, sizeof(text), msg, ap);
        va_end(ap);
        g_error("libpci error outside a guarded call: %s", text);
    }
    pci_format_message(guard->message, sizeof(guard->message), msg, ap);
    va_end(ap);
    longjmp(guard->env, 1);
}

static void pci_on_warning(char *msg, ...)
{
    char text[256];
    va_list ap;

    va_start(ap, msg);
    pci_format_message(text, sizeof(text), msg, ap);
    va_end(ap);
    if (pci_guard)
        g_strlcpy(pci_guard->last_warning, text, sizeof(pci_guard->last_warning));
    g_debug("libpci: %s", text);
}

static void pci_on_debug(char *msg, ...)
{
}

typedef void (*PciFunc)(struct pci_access *acc, gpointer data);

/* Runs @func under our error handler. On a libpci error returns FALSE with @code and a message
 * "WHAT: libpci: MESSAGE". */
static gboolean pci_run(struct pci_access *acc, PciFunc func, gpointer data, int code,
                        const char *what, GError **error)
{
    PciGuard guard;

    guard.prev = pci_guard;
    guard.message[0] = '\0';
    guard.last_warning[0] = '\0';
    pci_guard = &guard;
    if (setjmp(guard.env) != 0) {
        pci_guard = guard.prev;
        if (guard.last_warning[0])
            g_set_error(error, HOTPLUG_ERROR, code, "%s: libpci: %s (after: %s)", what,
                        guard.message, guard.last_warning);
        else
            g_set_error(error, HOTPLUG_ERROR, code, "%s: libpci: %s", what, guard.message);
        return FALSE;
    }
    func(acc, data);
    pci_guard = guard.prev;
    return TRUE;
}

/* ---- access handles ---------------------------------------------------------------------- */

static char *pci_ids_path; /* tests: hotplug_pci_set_ids_path() */

void hotplug_pci_set_ids_path(const char *path)
{
    g_free(pci_ids_path);
    pci_ids_path = g_strdup(path);
}

/* A pci_access with our handlers, no name lookups beyond the local pci.ids. pci_alloc() can
 * only fail on out of memory, where libpci calls its generic handler (exit) before ours can
 * be installed; GLib aborts on out of memory anyway. */
static struct pci_access *pci_access_new(void)
{
    struct pci_access *acc = pci_alloc();

    acc->error = pci_on_error;
    acc->warning = pci_on_warning;
    acc->debug = pci_on_debug;
    acc->debugging = 0;
    /* No ~/.pciids-cache, no DNS, no udev hwdb: the names come from pci.ids alone. */
    acc->id_lookup_mode = 0;
    acc->numeric_ids = 0;
    if (pci_ids_path)
        pci_set_name_list_path(acc, strdup(pci_ids_path), 1);
    return acc;
}

struct HotplugPci {
    struct pci_access *acc;
    char *sysfs_root;
};

typedef struct {
    unsigned int method;
    const char *param; /* NULL: none */
    const char *value;
} PciInitData;

static void pci_init_func(struct pci_access *acc, gpointer data)
{
    PciInitData *init = data;

    acc->method = init->method;
    if (init->param && pci_set_param(acc, (char *)init->param, (char *)init->value) != 0)
        acc->error("no parameter '%s' in this libpci", init->param);
    pci_init(acc);
}

HotplugPci *hotplug_pci_open(const char *sysfs_root, GError **error)
{
    g_autofree char *bus_pci = NULL;
    PciInitData init = {.method = PCI_ACCESS_SYS_BUS_PCI, .param = "sysfs.path"};
    HotplugPci *pci;

    g_return_val_if_fail(sysfs_root != NULL, NULL);

    bus_pci = g_build_filename(sysfs_root, "bus", "pci", NULL);
    init.value = bus_pci;
    pci = g_new0(HotplugPci, 1);
    pci->acc = pci_access_new();
    pci->sysfs_root = g_strdup(sysfs_root);
    if (!pci_run(pci->acc, pci_init_func, &init, HOTPLUG_ERROR_FAILED,
                 "Cannot set up libpci's sysfs access", error)) {
        hotplug_pci_close(pci);
        return NULL;
    }
    return pci;
}

void hotplug_pci_close(HotplugPci *pci)
{
    if (!pci)
        return;
    /* pci_cleanup() reports no errors (it would write the network ID cache, which we never
     * fill). */
    pci_cleanup(pci->acc);
    g_free(pci->sysfs_root);
    g_free(pci);
}

/* ---- names ------------------------------------------------------------------------------- */

typedef struct {
    guint vendor_id, device_id;
    char vendor[256], device[256];
    gboolean have_vendor, have_device;
} PciNamesData;

static void pci_names_func(struct pci_access *acc, gpointer data)
{
    PciNamesData *names = data;
    int flags = PCI_LOOKUP_NO_NUMBERS | PCI_LOOKUP_NO_HWDB;

    names->have_vendor = pci_lookup_name(acc, names->vendor, sizeof(names->vendor),
                                         flags | PCI_LOOKUP_VENDOR, (int)names->vendor_id) != NULL;
    names->have_device =
        pci_lookup_name(acc, names->device, sizeof(names->device), flags | PCI_LOOKUP_DEVICE,
                        (int)names->vendor_id, (int)names->device_id) != NULL;
}

gboolean hotplug_pci_lookup_names(HotplugPci *pci, guint vendor_id, guint device_id,
                                  char **ret_vendor_name, char **ret_device_name, GError **error)
{
    g_autofree char *what = NULL;
    PciNamesData names = {.vendor_id = vendor_id, .device_id = device_id};

    g_return_val_if_fail(pci != NULL, FALSE);
    g_return_val_if_fail(vendor_id <= 0xffff && device_id <= 0xffff, FALSE);

    what = g_strdup_printf("Cannot look up the names of %04x:%04x", vendor_id, device_id);
    if (!pci_run(pci->acc, pci_names_func, &names, HOTPLUG_ERROR_FAILED, what, error)) {
        /* The parser stopped half way: drop what it had read and do not try again, so this
         * handle knows no names rather than some. */
        pci_free_name_list(pci->acc);
        pci->acc->id_load_failed = 1;
        return FALSE;
    }
    if (ret_vendor_name)
        *ret_vendor_name = names.have_vendor ? g_strdup(names.vendor) : NULL;
    if (ret_device_name)
        *ret_device_name = names.have_device ? g_strdup(names.device) : NULL;
    return TRUE;
}

/* ---- the SR-IOV capability --------------------------------------------------------------- */

/* Offsets inside the SR-IOV capability (PCI Express Base Specification, SR-IOV Extended
 * Capability); header.h has them as PCI_IOV_*. */
#define SRIOV_CAP_LEN 0x40

typedef struct {
    struct pci_dev *dev; /* owned by the caller: freed with pci_free_dev() even after an error */
    guint8 config[HOTPLUG_PCI_CONFIG_SIZE];
    HotplugPciSriovStatus status;
    HotplugPciSriov sriov;
} PciSriovData;

/* Reads the whole config space of data->dev into data->config and, when it is all there,
 * walks the capability lists (libpci's pci_find_cap) over that copy. */
static void pci_sriov_func(struct pci_access *acc, gpointer data)
{
    PciSriovData *d = data;
    struct pci_cap *cap;
    guint pos;

    memset(&d->sriov, 0, sizeof(d->sriov));
    if (!pci_read_block(d->dev, 0, d->config, sizeof(d->config))) {
        d->status = HOTPLUG_PCI_SRIOV_SHORT;
        return;
    }
    /* Every later read is answered from this copy, so what we report is one snapshot. */
    pci_setup_cache(d->dev, d->config, sizeof(d->config));
    /* From config space itself (pci_fill_info() would ask sysfs for the kernel's view). */
    d->sriov.vendor_id = pci_read_word(d->dev, PCI_VENDOR_ID);
    d->sriov.device_id = pci_read_word(d->dev, PCI_DEVICE_ID);
    cap = pci_find_cap(d->dev, PCI_EXT_CAP_ID_SRIOV, PCI_CAP_EXTENDED);
    if (!cap) {
        d->status = HOTPLUG_PCI_SRIOV_ABSENT;
        return;
    }
    pos = cap->addr;
    d->sriov.cap_offset = pos;
    if (pos < 0x100 || pos + SRIOV_CAP_LEN > sizeof(d->config)) {
        /* Reported by the caller: the capability does not fit in config space. */
        d->status = HOTPLUG_PCI_SRIOV_FOUND;
        return;
    }
    d->sriov.capabilities = pci_read_long(d->dev, pos + PCI_IOV_CAP);
    d->sriov.control = pci_read_word(d->dev, pos + PCI_IOV_CTRL);
    d->sriov.initial_vfs = pci_read_word(d->dev, pos + PCI_IOV_INITIALVF);
    d->sriov.total_vfs = pci_read_word(d->dev, pos + PCI_IOV_TOTALVF);
    d->sriov.num_vfs = pci_read_word(d->dev, pos + PCI_IOV_NUMVF);
    d->sriov.function_link = pci_read_byte(d->dev, pos + PCI_IOV_FDL);
    d->sriov.vf_offset = pci_read_word(d->dev, pos + PCI_IOV_OFFSET);
    d->sriov.vf_stride = pci_read_word(d->dev, pos + PCI_IOV_STRIDE);
    d->sriov.vf_device_id = pci_read_word(d->dev, pos + PCI_IOV_DID);
    d->status = HOTPLUG_PCI_SRIOV_FOUND;
}

/* The capability must lie inside config space; pci_sriov_func() leaves the check to us. */
static gboolean pci_sriov_check(const PciSriovData *d, const char *what, GError **error)
{
    if (d->status != HOTPLUG_PCI_SRIOV_FOUND)
        return TRUE;
    if (d->sriov.cap_offset < 0x100 ||
        d->sriov.cap_offset + SRIOV_CAP_LEN > HOTPLUG_PCI_CONFIG_SIZE) {
        g_set_error(
            error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
            "The SR-IOV capability at 0x%x in '%s' does not fit in extended config space (0x100..0x%x)",
            d->sriov.cap_offset, what, HOTPLUG_PCI_CONFIG_SIZE - SRIOV_CAP_LEN);
        return FALSE;
    }
    return TRUE;
}

typedef struct {
    PciSriovData *sriov;
    HmPciAddress addr;
} PciSysfsDevData;

static void pci_sysfs_dev_func(struct pci_access *acc, gpointer data)
{
    PciSysfsDevData *d = data;

    d->sriov->dev = pci_get_dev(acc, (int)d->addr.domain, (int)d->addr.bus, (int)d->addr.slot,
                                (int)d->addr.function);
    pci_sriov_func(acc, d->sriov);
}

gboolean hotplug_pci_read_sriov(HotplugPci *pci, const char *address,
                                HotplugPciSriovStatus *ret_status, HotplugPciSriov *ret_sriov,
                                GError **error)
{
    g_autofree char *path = NULL;
    g_autofree char *what = NULL;
    g_autofree PciSriovData *sriov = g_new0(PciSriovData, 1);
    PciSysfsDevData dev = {.sriov = sriov};
    g_autoptr(GError) local = NULL;
    struct stat st;
    gboolean ok;

    g_return_val_if_fail(pci != NULL, FALSE);
    g_return_val_if_fail(address != NULL, FALSE);
    g_return_val_if_fail(ret_status != NULL, FALSE);

    if (!hm_pci_address_parse(address, &dev.addr, &local)) {
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, local->message);
        return FALSE;
    }
    /* libpci would block on a fifo and read a device node: only a regular file goes to it. */
    path = g_build_filename(pci->sysfs_root, "bus", "pci", "devices", address, "config", NULL);
    if (stat(path, &st) != 0) {
        int errsv = errno;
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "Cannot read '%s': %s", path,
                    g_strerror(errsv));
        return FALSE;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS, "'%s' is not a regular file", path);
        return FALSE;
    }
    if (st.st_size > HOTPLUG_PCI_CONFIG_SIZE) {
        g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_SYSFS,
                    "'%s' is larger than the %d bytes of PCI Express config space", path,
                    HOTPLUG_PCI_CONFIG_SIZE);
        return FALSE;
    }

    what = g_strdup_printf("Cannot read the config space of '%s' ('%s')", address, path);
    ok = pci_run(pci->acc, pci_sysfs_dev_func, &dev, HOTPLUG_ERROR_SYSFS, what, error);
    if (sriov->dev)
        pci_free_dev(sriov->dev);
    if (!ok || !pci_sriov_check(sriov, path, error))
        return FALSE;
    *ret_status = sriov->status;
    if (ret_sriov && sriov->status == HOTPLUG_PCI_SRIOV_FOUND)
        *ret_sriov = sriov->sriov;
    return TRUE;
}

/* ---- lspci dumps ------------------------------------------------------------------------- */

typedef struct {
    const char *dump_path;
    gboolean any; /* no address given: the first device of the dump */
    HmPciAddress addr;
    PciSriovData *sriov; /* ->dev borrowed from the access's device list */
    gboolean found;
} PciDumpData;

static void pci_dump_func(struct pci_access *acc, gpointer data)
{
    PciDumpData *d = data;
    struct pci_dev *dev, *first = NULL;

    acc->method = PCI_ACCESS_DUMP;
    if (pci_set_param(acc, "dump.name", (char *)d->dump_path) != 0)
        acc->error("no parameter 'dump.name' in this libpci");
    pci_init(acc); /* parses the whole dump */
    pci_scan_bus(acc);
    /* The dump method links devices in reverse order of the file. */
    for (dev = acc->devices; dev; dev = dev->next) {
        if (d->any) {
            first = dev;
            continue;
        }
        if ((guint)dev->domain == d->addr.domain && dev->bus == d->addr.bus &&
            dev->dev == d->addr.slot && dev->func == d->addr.function) {
            first = dev;
            break;
        }
    }
    if (!first)
        return;
    d->found = TRUE;
    d->addr.domain = (guint)first->domain;
    d->addr.bus = first->bus;
    d->addr.slot = first->dev;
    d->addr.function = first->func;
    d->sriov->dev = first;
    pci_sriov_func(acc, d->sriov);
}

gboolean hotplug_pci_read_sriov_dump(const char *dump_path, const char *address,
                                     HotplugPciSriovStatus *ret_status, HotplugPciSriov *ret_sriov,
                                     GError **error)
{
    g_autofree char *what = NULL;
    g_autofree PciSriovData *sriov = g_new0(PciSriovData, 1);
    PciDumpData dump = {.dump_path = dump_path, .any = address == NULL, .sriov = sriov};
    g_autoptr(GError) local = NULL;
    struct pci_access *acc;
    gboolean ok;

    g_return_val_if_fail(dump_path != NULL, FALSE);
    g_return_val_if_fail(ret_status != NULL, FALSE);

    if (address && !hm_pci_address_parse(address, &dump.addr, &local)) {
        g_set_error_literal(error, HOTPLUG_ERROR, HOTPLUG_ERROR_INVALID, local->message);
        return FALSE;
    }

    what = g_strdup_printf("Cannot read the lspci dump '%s'", dump_path);
    acc = pci_access_new();
    ok = pci_run(acc, pci_dump_func, &dump, HOTPLUG_ERROR_INVALID, what, error);
    pci_cleanup(acc); /* frees the dump's devices, sriov->dev among them */
    if (!ok)
        return FALSE;
    if (!dump.found) {
        if (address)
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                        "The lspci dump '%s' has no device '%s'", dump_path, address);
        else
            g_set_error(error, HOTPLUG_ERROR, HOTPLUG_ERROR_NOT_FOUND,
                        "The lspci dump '%s' has no device", dump_path);
        return FALSE;
    }
    if (!pci_sriov_check(sriov, dump_path, error))
        return FALSE;
    *ret_status = sriov->status;
    if (ret_sriov && sriov->status == HOTPLUG_PCI_SRIOV_FOUND)
        *ret_sriov = sriov->sriov;
    return TRUE;
}
