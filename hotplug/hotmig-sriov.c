/* hotmig-sriov: the SR-IOV PFs and VFs of this host as hotmig's discovery sees them.
 *
 *   hotmig-sriov [--sysfs-root DIR] [--address ADDR] [--pci-ids FILE] [--json] [--verbose]
 *   hotmig-sriov --version
 *
 * Text: one table row per function (PFs, each followed by its VFs). --json: one JSON object,
 * {"sysfs_root": DIR, "pfs": [PF...]} (with --address: {"sysfs_root": DIR, "function": F}),
 * strings escaped by hm_json_append_string(). The tool knows no domains: assigned_to is the
 * daemon's (it reads libvirt), so it is not shown. Exit status: 0 listed, 1 discovery failed
 * (the message names the sysfs path), 2 bad usage. See docs/sriov.md. */
#define G_LOG_DOMAIN "hotmig-sriov"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "hotplug/hotplug.h"

#define EXIT_USAGE 2

/* ---- text -------------------------------------------------------------------------------- */

static const char *link_type_name(guint type, char *buf, gsize size)
{
    switch (type) {
    case 0:
        return "-";
    case 1:
        return "ethernet";
    case 32:
        return "infiniband";
    default:
        g_snprintf(buf, size, "arphrd-%u", type);
        return buf;
    }
}

/* A field for the table: control bytes and non-ASCII escaped (sysfs names are bytes), "-"
 * for none. Owned. */
static char *text_field(const char *s)
{
    if (!s || !*s)
        return g_strdup("-");
    return g_strescape(s, NULL);
}

static char *text_int(int v)
{
    return v < 0 ? g_strdup("-") : g_strdup_printf("%d", v);
}

enum {
    COL_ADDRESS,
    COL_FUNC,
    COL_ID,
    COL_DRIVER,
    COL_NUMA,
    COL_IOMMU,
    COL_NETDEV,
    COL_LINK,
    COL_VFS,
    COL_NAME,
    N_COLS
};

static const char *const col_titles[N_COLS] = {"ADDRESS", "FUNC",   "ID",   "DRIVER", "NUMA",
                                               "IOMMU",   "NETDEV", "LINK", "VFS",    "NAME"};

static GStrv text_row(const HotplugPciFunction *fn)
{
    GStrv row = g_new0(char *, N_COLS + 1);
    char buf[32];

    row[COL_ADDRESS] = g_strdup(fn->address);
    row[COL_FUNC] = fn->pf_address ? g_strdup_printf("VF%u", fn->vf_index) : g_strdup("PF");
    row[COL_ID] = g_strdup_printf("%04x:%04x", fn->vendor_id, fn->device_id);
    row[COL_DRIVER] = text_field(fn->driver);
    row[COL_NUMA] = text_int(fn->numa_node);
    row[COL_IOMMU] = text_int(fn->iommu_group);
    row[COL_NETDEV] = text_field(fn->netdev);
    row[COL_LINK] = g_strdup(link_type_name(fn->link_type, buf, sizeof(buf)));
    row[COL_VFS] =
        fn->pf_address ? g_strdup("-") : g_strdup_printf("%u/%u", fn->num_vfs, fn->total_vfs);
    if (fn->vendor_name || fn->device_name) {
        g_autofree char *name = g_strjoin(" ", fn->vendor_name ? fn->vendor_name : "?",
                                          fn->device_name ? fn->device_name : "?", NULL);
        row[COL_NAME] = g_strescape(name, NULL);
    } else {
        row[COL_NAME] = g_strdup("-");
    }
    return row;
}

/* The last column is not padded. */
static void print_cell(int c, gsize width, const char *text)
{
    if (c + 1 < N_COLS)
        printf("%-*s  ", (int)width, text);
    else
        printf("%s\n", text);
}

static void print_table(GPtrArray *rows)
{
    gsize width[N_COLS];

    for (int c = 0; c < N_COLS; c++)
        width[c] = strlen(col_titles[c]);
    for (guint r = 0; r < rows->len; r++) {
        GStrv row = g_ptr_array_index(rows, r);

        for (int c = 0; c < N_COLS; c++)
            width[c] = MAX(width[c], strlen(row[c]));
    }
    for (int c = 0; c < N_COLS; c++)
        print_cell(c, width[c], col_titles[c]);
    for (guint r = 0; r < rows->len; r++) {
        GStrv row = g_ptr_array_index(rows, r);

        for (int c = 0; c < N_COLS; c++)
            print_cell(c, width[c], row[c]);
    }
}

static void add_rows(GPtrArray *rows, const HotplugPciFunction *fn)
{
    g_ptr_array_add(rows, text_row(fn));
    for (guint i = 0; i < fn->vfs->len; i++)
        add_rows(rows, g_ptr_array_index(fn->vfs, i));
}

/* ---- JSON -------------------------------------------------------------------------------- */

static void json_key(GString *out, const char *key)
{
    hm_json_append_string(out, key);
    g_string_append_c(out, ':');
}

static void json_id(GString *out, const char *key, guint id)
{
    char buf[8];

    json_key(out, key);
    g_snprintf(buf, sizeof(buf), "%04x", id);
    hm_json_append_string(out, buf);
    g_string_append_c(out, ',');
}

static void json_str(GString *out, const char *key, const char *value)
{
    json_key(out, key);
    hm_json_append_string(out, value);
    g_string_append_c(out, ',');
}

static void json_int(GString *out, const char *key, gint64 value, gboolean null_if_negative)
{
    json_key(out, key);
    if (null_if_negative && value < 0)
        g_string_append(out, "null");
    else
        g_string_append_printf(out, "%" G_GINT64_FORMAT, value);
    g_string_append_c(out, ',');
}

static void json_function(GString *out, const HotplugPciFunction *fn)
{
    g_string_append_c(out, '{');
    json_str(out, "address", fn->address);
    json_str(out, "kind", fn->pf_address ? "vf" : "pf");
    if (fn->pf_address) {
        json_str(out, "pf_address", fn->pf_address);
        json_int(out, "vf_index", fn->vf_index, FALSE);
    }
    json_id(out, "vendor_id", fn->vendor_id);
    json_id(out, "device_id", fn->device_id);
    json_str(out, "vendor_name", fn->vendor_name);
    json_str(out, "device_name", fn->device_name);
    json_str(out, "driver", fn->driver);
    json_int(out, "iommu_group", fn->iommu_group, TRUE);
    json_int(out, "numa_node", fn->numa_node, TRUE);
    json_str(out, "netdev", fn->netdev);
    json_int(out, "link_type", fn->link_type, FALSE);
    if (!fn->pf_address) {
        json_int(out, "total_vfs", fn->total_vfs, FALSE);
        json_int(out, "num_vfs", fn->num_vfs, FALSE);
        if (fn->vf_device_id)
            json_id(out, "vf_device_id", fn->vf_device_id);
        else
            json_str(out, "vf_device_id", NULL);
        json_int(out, "vf_offset", fn->vf_offset, FALSE);
        json_int(out, "vf_stride", fn->vf_stride, FALSE);
        json_key(out, "config_checked");
        g_string_append(out, fn->config_checked ? "true," : "false,");
    }
    json_key(out, "vfs");
    g_string_append_c(out, '[');
    for (guint i = 0; i < fn->vfs->len; i++) {
        if (i > 0)
            g_string_append_c(out, ',');
        json_function(out, g_ptr_array_index(fn->vfs, i));
    }
    g_string_append(out, "]}");
}

/* One JSON object: @one when given, else @pfs. */
static void print_json(const char *sysfs_root, const HotplugPciFunction *one, GPtrArray *pfs)
{
    g_autoptr(GString) out = g_string_new("{");

    json_str(out, "sysfs_root", sysfs_root);
    if (one) {
        json_key(out, "function");
        json_function(out, one);
    } else {
        json_key(out, "pfs");
        g_string_append_c(out, '[');
        for (guint i = 0; i < pfs->len; i++) {
            if (i > 0)
                g_string_append_c(out, ',');
            json_function(out, g_ptr_array_index(pfs, i));
        }
        g_string_append_c(out, ']');
    }
    g_string_append(out, "}\n");
    fputs(out->str, stdout);
}

/* A table: @one when given, else @pfs. */
static void print_text(const char *sysfs_root, const HotplugPciFunction *one, GPtrArray *pfs)
{
    g_autoptr(GPtrArray) rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);

    if (one)
        add_rows(rows, one);
    else
        for (guint i = 0; i < pfs->len; i++)
            add_rows(rows, g_ptr_array_index(pfs, i));
    if (rows->len == 0)
        printf("No SR-IOV physical function under '%s/bus/pci/devices'.\n", sysfs_root);
    else
        print_table(rows);
}

/* ---- main -------------------------------------------------------------------------------- */

/* The command line. */
typedef struct {
    char *sysfs_root; /* --sysfs-root, or NULL */
    char *address;    /* --address, or NULL */
    char *pci_ids;    /* --pci-ids, or NULL */
    gboolean json, verbose, version;
} Cli;

static void cli_clear(Cli *cli)
{
    g_clear_pointer(&cli->sysfs_root, g_free);
    g_clear_pointer(&cli->address, g_free);
    g_clear_pointer(&cli->pci_ids, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Cli, cli_clear)

/* Parses the command line into @cli: -1 to go on, else the exit status (the error printed). */
static int cli_parse(int *argc, char ***argv, Cli *cli)
{
    GOptionEntry entries[] = {
        {"sysfs-root", 0, 0, G_OPTION_ARG_FILENAME, &cli->sysfs_root,
         "Read the sysfs tree under DIR (default /sys)", "DIR"},
        {"address", 0, 0, G_OPTION_ARG_STRING, &cli->address,
         "Show one PF (with its VFs) or one VF", "ADDR"},
        {"pci-ids", 0, 0, G_OPTION_ARG_FILENAME, &cli->pci_ids,
         "Look names up in FILE instead of libpci's pci.ids", "FILE"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &cli->json, "Print one JSON object", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &cli->verbose, "Print debug messages", NULL},
        {"version", 0, 0, G_OPTION_ARG_NONE, &cli->version, "Print the version", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) context =
        g_option_context_new("- list SR-IOV PFs and VFs as hotmig sees them");
    g_autoptr(GError) error = NULL;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_description(
        context, "Exit status: 0 listed, 1 discovery failed, 2 bad usage. See docs/sriov.md.");
    if (!g_option_context_parse(context, argc, argv, &error)) {
        fprintf(stderr, "hotmig-sriov: %s\n", error->message);
        return EXIT_USAGE;
    }
    if (*argc > 1) {
        fprintf(stderr, "hotmig-sriov: unexpected argument '%s'\n", (*argv)[1]);
        return EXIT_USAGE;
    }
    return -1;
}

int main(int argc, char **argv)
{
    g_auto(Cli) cli = {0};
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) pfs = NULL;
    g_autoptr(HotplugPciFunction) one = NULL;
    const char *sysfs_root;
    int rc;

    setlocale(LC_ALL, "");
    rc = cli_parse(&argc, &argv, &cli);
    if (rc >= 0)
        return rc;
    if (cli.version) {
        printf("hotmig-sriov %s\n", HOTMIG_VERSION);
        return EXIT_SUCCESS;
    }
    hm_log_setup("hotmig-sriov", cli.verbose);
    sysfs_root = cli.sysfs_root ? cli.sysfs_root : "/sys";
    if (cli.pci_ids)
        hotplug_sysfs_set_pci_ids(cli.pci_ids);

    if (cli.address)
        one = hotplug_sysfs_read(sysfs_root, cli.address, &error);
    else
        pfs = hotplug_sysfs_list_pfs(sysfs_root, &error);
    if (!one && !pfs) {
        fprintf(stderr, "hotmig-sriov: %s\n", error->message);
        return EXIT_FAILURE;
    }

    if (cli.json)
        print_json(sysfs_root, one, pfs);
    else
        print_text(sysfs_root, one, pfs);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "hotmig-sriov: cannot write the output\n");
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
