/* Consolidation benchmark on the PlanetLab CPU traces (docs/policies.md, "Benchmark").
 *
 *   consolidate [--placement round-robin|skewed] [--repeat N] [--write-snapshot DIR] DAY.csv...
 *                                                   one JSON line per day
 *   consolidate --scale [DAY.csv...]                10 000 hosts / 100 000 VMs, one line
 *
 * Each day becomes a cluster snapshot: one VM per trace row, cpu_util = the row's 95th
 * percentile sample / 100; flavour (vCPUs, memory) and VF count drawn from splitmix64 seeded
 * with BENCH_SEED + the day's number; identical hosts (64 CPUs, 384 GiB, 24 VFs), one per 10
 * VMs, the VMs spread round-robin. --write-snapshot also writes DIR/DAY.json in the format of
 * `migrate-vm plan --snapshot` so that a day can be replayed through the CLI.
 * A benchmark: it measures and prints, it asserts only that each plan verifies. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "policies/policies.h"

#define BENCH_SEED G_GUINT64_CONSTANT(0x686f746d6967) /* "hotmig" */
#define HOST_CPUS 64
#define HOST_MEMORY_MIB (384 * 1024)
#define HOST_VFS_DEFAULT 24
#define VMS_PER_HOST 10 /* at the start */
#define SAMPLES 288

typedef struct {
    guint vcpus;
    guint memory_gib;
    guint weight; /* percent */
} Flavour;

/* Cloud-style flavours: compute (1:2), general (1:4), memory (1:8) families. */
static const Flavour flavours[] = {
    {2, 4, 20}, {2, 8, 25}, {4, 16, 20}, {2, 16, 10}, {8, 16, 10}, {8, 32, 10}, {16, 64, 5},
};

static guint64 splitmix64(guint64 *state)
{
    guint64 z = (*state += G_GUINT64_CONSTANT(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static guint rand_below(guint64 *state, guint n)
{
    return (guint)(splitmix64(state) % n);
}

typedef struct {
    char *name;
    double cpu_util;
} TraceVm;

static void trace_vm_clear(gpointer p)
{
    g_free(((TraceVm *)p)->name);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Reads a day: a header line, then "name,s0,...,s287" in percent of one core. */
static GArray *trace_read(const char *path, GError **error)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(GArray) vms = g_array_new(FALSE, TRUE, sizeof(TraceVm));

    g_array_set_clear_func(vms, trace_vm_clear);
    if (!g_file_get_contents(path, &text, NULL, error))
        return NULL;
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 1; lines[i]; i++) {
        g_auto(GStrv) f = NULL;
        int samples[SAMPLES];
        TraceVm vm;
        guint n;

        g_strchomp(lines[i]);
        if (!*lines[i])
            continue;
        f = g_strsplit(lines[i], ",", -1);
        n = g_strv_length(f);
        if (n != SAMPLES + 1) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s:%u: %u fields, not %d", path,
                        i + 1, n, SAMPLES + 1);
            return NULL;
        }
        for (guint s = 0; s < SAMPLES; s++)
            samples[s] = CLAMP(atoi(f[s + 1]), 0, 100);
        qsort(samples, SAMPLES, sizeof(int), cmp_int);
        /* 95th percentile, nearest rank: the 274th of 288 sorted samples. */
        vm.cpu_util = samples[(95 * SAMPLES + 99) / 100 - 1] / 100.0;
        vm.name = g_strdup(f[0]);
        g_array_append_val(vms, vm);
    }
    return g_steal_pointer(&vms);
}

typedef struct {
    guint n_hosts;
    guint n_vms;
    guint *host;       /* per VM */
    guint *vcpus;
    guint64 *memory;
    guint *vfs;
    double *util;
    char **names;      /* per VM, may be NULL: "vmN" */
} Snapshot;

static void snapshot_clear(Snapshot *s)
{
    g_free(s->host);
    g_free(s->vcpus);
    g_free(s->memory);
    g_free(s->vfs);
    g_free(s->util);
    g_strfreev(s->names);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(Snapshot, snapshot_clear)

/* VFs per host (--host-vfs): fewer make VFs bind before memory. */
static guint host_vfs = HOST_VFS_DEFAULT;
/* The skewed placement's exponent (--skew): host floor(H u^skew). */
static double skew_exponent = 2.0;

/* Where the VMs start (docs/policies.md, "Benchmark"). */
typedef enum {
    PLACE_ROUND_ROBIN, /* VM i on host i mod H: every host at about the same load */
    PLACE_SKEWED,      /* host floor(H u^2), u uniform in [0, 1): the first hosts full, the last
                        * nearly empty */
} Placement;

/* Sizes from @seed, VMs placed by @placement over @n_hosts (the next host with room when the
 * chosen host is full). The skewed draws come from a second stream (@seed ^ SKEW_STREAM) so
 * that both placements have the same VMs. */
#define SKEW_STREAM G_GUINT64_CONSTANT(0x736b6577) /* "skew" */
static gboolean snapshot_make(Snapshot *s, guint n_hosts, guint n_vms, guint64 seed,
                              Placement placement, const double *utils, char **names,
                              GError **error)
{
    guint64 state = seed, skew = seed ^ SKEW_STREAM;
    g_autofree gint64 *used = g_new0(gint64, (gsize)n_hosts * 3);

    s->n_hosts = n_hosts;
    s->n_vms = n_vms;
    s->host = g_new(guint, n_vms);
    s->vcpus = g_new(guint, n_vms);
    s->memory = g_new(guint64, n_vms);
    s->vfs = g_new(guint, n_vms);
    s->util = g_new(double, n_vms);
    s->names = names;
    for (guint i = 0; i < n_vms; i++) {
        guint r = rand_below(&state, 100), acc = 0, f = 0, v = rand_below(&state, 100);
        gboolean placed = FALSE;

        for (f = 0; f < G_N_ELEMENTS(flavours) - 1; f++) {
            acc += flavours[f].weight;
            if (r < acc)
                break;
        }
        s->vcpus[i] = flavours[f].vcpus;
        s->memory[i] = (guint64)flavours[f].memory_gib * 1024;
        s->vfs[i] = v < 40 ? 0 : v < 90 ? 1 : 2; /* MPI ranks hold one VF, a few two */
        s->util[i] = utils ? utils[i] : (5 + rand_below(&state, 41)) / 100.0;
        guint first = i % n_hosts;
        if (placement == PLACE_SKEWED) {
            double u = (double)(splitmix64(&skew) >> 11) / (double)(G_GUINT64_CONSTANT(1) << 53);
            first = MIN((guint)(n_hosts * pow(u, skew_exponent)), n_hosts - 1);
        }
        for (guint t = 0; t < n_hosts && !placed; t++) {
            guint h = (first + t) % n_hosts;
            gint64 *u = used + (gsize)h * 3;
            gint64 cpu = (gint64)(s->vcpus[i] * s->util[i] * 1000.0 + 0.999);
            if (u[0] + cpu <= HOST_CPUS * 1000 && u[1] + (gint64)s->memory[i] <= HOST_MEMORY_MIB &&
                u[2] + s->vfs[i] <= host_vfs) {
                u[0] += cpu;
                u[1] += (gint64)s->memory[i];
                u[2] += s->vfs[i];
                s->host[i] = h;
                placed = TRUE;
            }
        }
        if (!placed) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "VM %u fits on no host", i);
            return FALSE;
        }
    }
    return TRUE;
}

static PolCluster *snapshot_cluster(const Snapshot *s, GError **error)
{
    g_autoptr(PolCluster) c = pol_cluster_new();

    for (guint h = 0; h < s->n_hosts; h++) {
        g_autofree char *name = g_strdup_printf("host%05u", h);
        if (!pol_cluster_add_host(c, name, HOST_CPUS, HOST_MEMORY_MIB, POL_HOST_OK, error) ||
            !pol_cluster_set_host_vfs(c, name, NULL, host_vfs, -1, error))
            return NULL;
    }
    for (guint i = 0; i < s->n_vms; i++) {
        g_autofree char *name = s->names ? g_strdup(s->names[i]) : g_strdup_printf("vm%06u", i);
        g_autofree char *host = g_strdup_printf("host%05u", s->host[i]);
        PolVmSpec spec = {.name = name,
                          .host = host,
                          .vcpus = s->vcpus[i],
                          .memory_mib = s->memory[i],
                          .cpu_util = s->util[i],
                          .vfs = s->vfs[i],
                          .moved_ago_s = -1};
        if (!pol_cluster_add_vm(c, &spec, error))
            return NULL;
    }
    return g_steal_pointer(&c);
}

static gboolean snapshot_write(const Snapshot *s, const char *path, GError **error)
{
    g_autoptr(GString) out = g_string_new("{\"hosts\":[\n");

    for (guint h = 0; h < s->n_hosts; h++)
        g_string_append_printf(out,
                               "{\"name\":\"host%05u\",\"cpus\":%d,\"memory_mib\":%d,\"vfs\":%d}%s\n",
                               h, HOST_CPUS, HOST_MEMORY_MIB, host_vfs,
                               h + 1 < s->n_hosts ? "," : "");
    g_string_append(out, "],\"vms\":[\n");
    for (guint i = 0; i < s->n_vms; i++) {
        char util[G_ASCII_DTOSTR_BUF_SIZE];
        g_ascii_formatd(util, sizeof(util), "%.2f", s->util[i]);
        if (s->names)
            g_string_append_printf(out, "{\"name\":\"%s\"", s->names[i]);
        else
            g_string_append_printf(out, "{\"name\":\"vm%06u\"", i);
        g_string_append_printf(out,
                               ",\"host\":\"host%05u\",\"vcpus\":%u,\"memory_mib\":%" G_GUINT64_FORMAT ",\"cpu_util\":%s,\"vfs\":%u}%s\n",
                               s->host[i], s->vcpus[i], s->memory[i], util, s->vfs[i],
                               i + 1 < s->n_vms ? "," : "");
    }
    g_string_append(out, "]}\n");
    return g_file_set_contents(path, out->str, (gssize)out->len, error);
}

static gboolean run(const char *label, const Snapshot *s, guint repeat, GError **error)
{
    g_autoptr(PolCluster) c = snapshot_cluster(s, error);
    g_autoptr(PolPlan) plan = NULL;
    PolOptions opts;
    gboolean ok;
    char ratio[G_ASCII_DTOSTR_BUF_SIZE], mratio[G_ASCII_DTOSTR_BUF_SIZE];

    if (!c)
        return FALSE;
    pol_options_init(&opts);
    /* The best of @repeat runs: the machine is shared; the plans are identical. */
    for (guint r = 0; r < repeat; r++) {
        g_autoptr(PolPlan) again = pol_plan_consolidate(c, &opts, error);
        if (!again)
            return FALSE;
        if (!plan || again->plan_ms < plan->plan_ms) {
            g_clear_pointer(&plan, pol_plan_free);
            plan = g_steal_pointer(&again);
        }
    }
    ok = pol_plan_verify(c, plan, &opts, error);
    g_ascii_formatd(ratio, sizeof(ratio), "%.4f",
                    plan->lower_bound ? (double)plan->hosts_used / plan->lower_bound : 0.0);
    g_ascii_formatd(mratio, sizeof(mratio), "%.4f",
                    plan->migration_bound ? (double)plan->migrations->len / plan->migration_bound
                                          : 1.0);
    printf("{\"day\":\"%s\",\"vms\":%u,\"hosts\":%u,\"hosts_before\":%u,\"hosts_used\":%u,"
           "\"lower_bound\":%u,\"ratio\":%s,\"migrations\":%u,\"migration_bound\":%u,"
           "\"migration_ratio\":%s,\"moved_mib\":%" G_GUINT64_FORMAT ",\"extra_moves\":%u,"
           "\"front\":%u,\"plan_ms\":%.1f,\"verified\":%s}\n",
           label, s->n_vms, s->n_hosts, plan->hosts_before, plan->hosts_used, plan->lower_bound,
           ratio, plan->migrations->len, plan->migration_bound, mratio, plan->moved_mib,
           plan->extra_moves, plan->front ? plan->front->len : 0, plan->plan_ms,
           ok ? "true" : "false");
    fflush(stdout);
    return ok;
}

static guint64 day_seed(const char *path)
{
    g_autofree char *base = g_path_get_basename(path);
    return BENCH_SEED + g_ascii_strtoull(base, NULL, 10);
}

int main(int argc, char **argv)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *write_dir = NULL;
    g_autofree char *placement_str = NULL;
    Placement placement = PLACE_ROUND_ROBIN;
    gboolean scale = FALSE;
    gint repeat = 5, vfs_opt = HOST_VFS_DEFAULT;
    double skew_opt = 2.0;
    int status = 0;
    GOptionEntry entries[] = {
        {"scale", 0, 0, G_OPTION_ARG_NONE, &scale, "Plan 10 000 hosts / 100 000 VMs", NULL},
        {"write-snapshot", 0, 0, G_OPTION_ARG_FILENAME, &write_dir,
         "Also write each day's snapshot as DIR/DAY.json", "DIR"},
        {"repeat", 0, 0, G_OPTION_ARG_INT, &repeat,
         "Plan each day N times and print the fastest (default 5; --scale: 1)", "N"},
        {"host-vfs", 0, 0, G_OPTION_ARG_INT, &vfs_opt, "VFs per host (default 24)", "N"},
        {"skew", 0, 0, G_OPTION_ARG_DOUBLE, &skew_opt,
         "--placement skewed: VM on host floor(H u^X) (default 2)", "X"},
        {"placement", 0, 0, G_OPTION_ARG_STRING, &placement_str,
         "Where the VMs start: round-robin (default) or skewed", "HOW"},
        {NULL}};
    g_autoptr(GOptionContext) ctx = g_option_context_new("DAY.csv...");

    g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_set_summary(ctx, "Consolidation benchmark on PlanetLab days.");
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "consolidate: %s\n", error->message);
        return 2;
    }
    if (placement_str && g_str_equal(placement_str, "skewed")) {
        placement = PLACE_SKEWED;
    } else if (placement_str && !g_str_equal(placement_str, "round-robin")) {
        fprintf(stderr, "consolidate: --placement must be round-robin or skewed, not '%s'\n",
                placement_str);
        return 2;
    }
    if (repeat < 1 || repeat > 1000 || vfs_opt < 1 || vfs_opt > 1000 || !(skew_opt >= 1.0) ||
        skew_opt > 100.0) {
        fprintf(stderr, "consolidate: --repeat and --host-vfs must be between 1 and 1000, --skew between 1 and 100\n");
        return 2;
    }
    host_vfs = (guint)vfs_opt;
    skew_exponent = skew_opt;
    if (!scale && argc < 2) {
        fprintf(stderr, "usage: consolidate [--write-snapshot DIR] DAY.csv... | --scale [DAY.csv...]\n");
        return 2;
    }

    if (scale) {
        const guint n_vms = 100000, n_hosts = 10000;
        g_autofree double *utils = NULL;
        g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
        guint n_trace = 0;
        g_auto(Snapshot) s = {0};

        for (int i = 1; i < argc; i++) {
            GArray *day = trace_read(argv[i], &error);
            if (!day) {
                fprintf(stderr, "consolidate: %s\n", error->message);
                return 1;
            }
            n_trace += day->len;
            g_ptr_array_add(all, day);
        }
        if (n_trace > 0) {
            /* The days' VMs one after the other, cycled. */
            guint k = 0;
            utils = g_new(double, n_vms);
            while (k < n_vms) {
                for (guint d = 0; d < all->len && k < n_vms; d++) {
                    GArray *day = g_ptr_array_index(all, d);
                    for (guint i = 0; i < day->len && k < n_vms; i++)
                        utils[k++] = g_array_index(day, TraceVm, i).cpu_util;
                }
            }
        }
        if (!snapshot_make(&s, n_hosts, n_vms, BENCH_SEED, placement, utils, NULL, &error) ||
            !run("scale", &s, 1, &error)) {
            fprintf(stderr, "consolidate: %s\n", error ? error->message : "plan does not verify");
            return 1;
        }
        return 0;
    }

    for (int i = 1; i < argc; i++) {
        g_autoptr(GArray) day = trace_read(argv[i], &error);
        g_autofree char *base = g_path_get_basename(argv[i]);
        g_autofree double *utils = NULL;
        g_auto(Snapshot) s = {0};
        char **names;

        if (!day) {
            fprintf(stderr, "consolidate: %s\n", error->message);
            return 1;
        }
        if (g_str_has_suffix(base, ".csv"))
            base[strlen(base) - 4] = '\0';
        utils = g_new(double, day->len + 1);
        names = g_new0(char *, day->len + 1);
        for (guint j = 0; j < day->len; j++) {
            utils[j] = g_array_index(day, TraceVm, j).cpu_util;
            names[j] = g_strdup(g_array_index(day, TraceVm, j).name);
        }
        if (!snapshot_make(&s, (day->len + VMS_PER_HOST - 1) / VMS_PER_HOST, day->len,
                           day_seed(argv[i]), placement, utils, names, &error)) {
            fprintf(stderr, "consolidate: %s: %s\n", argv[i], error->message);
            return 1;
        }
        if (write_dir) {
            g_autofree char *file = g_strdup_printf("%s.json", base);
            g_autofree char *path = g_build_filename(write_dir, file, NULL);
            if (!snapshot_write(&s, path, &error)) {
                fprintf(stderr, "consolidate: %s\n", error->message);
                return 1;
            }
        }
        if (!run(base, &s, (guint)repeat, &error)) {
            fprintf(stderr, "consolidate: %s: %s\n", argv[i], error ? error->message : "plan does not verify");
            g_clear_error(&error);
            status = 1;
        }
    }
    return status;
}
