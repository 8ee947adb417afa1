/* hm-directory-bench: the agent's peer directory with 100, 1,000 and 10,000 simulated peers on
 * loopback (guest-agent/agent/directory.c). One real directory instance, bound to 127.0.0.1;
 * the simulated agents are announcements sent to it from one socket, each with its own boot
 * id, control address, GID and LID. Per size it prints:
 *   fill       the time until the file lists every peer (all announced at once)
 *   change     a peer announces a new LID (its move): the time until the file shows it, from
 *              the datagram's send to the rename of the new file (median, p90, max of 25)
 *   load       the layer's first lookup after the file was replaced: it reads and parses the
 *              whole file (guest-agent/verbs/hv-dir.c, compiled in)
 *   lookup     then one GID (hv_dir_lookup_gid()) and one LID (hv_dir_lookup_lid()): the
 *              layer's check that the file is the same (open, fstat) and its linear scan
 *   memory     the agent's heap per peer (mallinfo2: the table, its indexes, the file text)
 * It measures and prints; it asserts nothing about the figures. */
#include <arpa/inet.h>
#include <glib/gstdio.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest-agent/agent/directory.h"
#include "hv.h" /* the layer's reader, hv-dir.c */

#define BENCH_CHANGES 25
#define BENCH_LOOKUPS 2000

static GPtrArray *bench_own_ports(gpointer data, GError **error)
{
    GPtrArray *devices = g_ptr_array_new_with_free_func((GDestroyNotify)agent_rdma_device_free);
    AgentRdmaDevice *dev = agent_rdma_device_new("mlx5_0", "0002:c903:0000:0001");
    AgentRdmaPort *port = agent_rdma_device_add_port(dev, 1, "ACTIVE", "InfiniBand", 1);

    g_ptr_array_add(port->gids, g_strdup("fe80::2:c903:0:1"));
    g_ptr_array_add(devices, dev);
    return devices;
}

static const AgentVerbsOps bench_verbs = {.list_devices = bench_own_ports};

/* Simulated peer @i (1..n): boot id, control address 10.x.y.z, GID fe80::1:<i>, LID i + 1. */
static AgentDirMsg bench_peer(guint i, guint64 seq, guint16 lid)
{
    AgentDirMsg m = {.via = AGENT_DIR_VIA_GROUP,
                     .since_ms = 1000 + seq,
                     .seq = seq,
                     .refresh_s = 60,
                     .port = 7475,
                     .n_ports = 1};

    memset(m.boot_id, 0xb0, 16);
    memcpy(m.boot_id, &i, sizeof(i));
    g_snprintf(m.addr, sizeof(m.addr), "10.%u.%u.%u", (i >> 16) & 0xff, (i >> 8) & 0xff,
               (i & 0xff) | 1);
    m.port = (guint16)(7475 + (i & 0xff));
    m.ports[0].gid[0] = 0xfe;
    m.ports[0].gid[1] = 0x80;
    m.ports[0].gid[8] = 0x01;
    memcpy(m.ports[0].gid + 12, &i, sizeof(i));
    m.ports[0].lid = lid;
    return m;
}

static void bench_send(int fd, const struct sockaddr_in *to, const AgentDirMsg *m)
{
    char buf[AGENT_DIR_MSG_MAX + 1];
    gsize len = agent_dir_msg_format(m, buf, sizeof(buf));

    if (sendto(fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to)) < 0)
        perror("sendto");
}

static gboolean bench_stat(const char *path, struct stat *st)
{
    return stat(path, st) == 0;
}

/* Iterates the main context until @path was replaced (another inode than @old). */
static void bench_wait_replaced(const char *path, ino_t old)
{
    struct stat st;

    while (!bench_stat(path, &st) || st.st_ino == old)
        g_main_context_iteration(NULL, TRUE);
}

static void bench_idle(guint ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

    while (g_get_monotonic_time() < end)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
}

/* hv-dir.c logs through the layer's hv_debug() (hv-log.c, not linked here). */
void hv_debug(const char *fmt, ...)
{
}

static int bench_cmp(const void *a, const void *b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;

    return x < y ? -1 : x > y;
}

/* Sends every peer once (in batches, the main loop reading between them) and waits for the
 * file to list them all: the time it took. */
static gint64 bench_fill(AgentDir *dir, int fd, const struct sockaddr_in *to, guint n)
{
    gint64 start = g_get_monotonic_time();

    for (guint i = 1; i <= n; i++) {
        AgentDirMsg m = bench_peer(i, 1, (guint16)(i + 1));

        bench_send(fd, to, &m);
        if (i % 128 == 0)
            while (agent_dir_table_n_announcers(agent_dir_get_table(dir)) < i)
                g_main_context_iteration(NULL, TRUE);
    }
    while (agent_dir_table_n_announcers(agent_dir_get_table(dir)) < n + 1)
        g_main_context_iteration(NULL, TRUE);
    return g_get_monotonic_time() - start;
}

/* A peer's move: its new LID reaches the file. Microseconds, @rounds times. */
static void bench_changes(AgentDir *dir, int fd, const struct sockaddr_in *to, const char *path,
                          guint n, gint64 *us)
{
    for (guint r = 0; r < BENCH_CHANGES; r++) {
        guint i = 1 + (guint)g_random_int_range(0, (gint32)n);
        AgentDirMsg m = bench_peer(i, 2 + r, (guint16)(n + 2 + r));
        struct stat st;
        gint64 t0;

        bench_idle(AGENT_DIR_WRITE_MIN_MS + 50); /* not within the writes' minimum interval */
        bench_stat(path, &st);
        t0 = g_get_monotonic_time();
        bench_send(fd, to, &m);
        bench_wait_replaced(path, st.st_ino);
        us[r] = g_get_monotonic_time() - t0;
    }
    qsort(us, BENCH_CHANGES, sizeof(*us), bench_cmp);
}

static void bench_lookups(const char *path, guint n, double *load_us, double *gid_us,
                          double *lid_us)
{
    AgentDirMsg first = bench_peer(1, 1, 0);
    guint found = 0, loads = 0;
    HvDirEntry e;
    gint64 t0, spent = 0;

    /* the first lookup after a replacement loads the file: replace it by a copy each time */
    for (guint k = 0; k < 10; k++, loads++) {
        g_autofree char *text = NULL;
        gsize len = 0;

        if (!g_file_get_contents(path, &text, &len, NULL) ||
            !g_file_set_contents(path, text, (gssize)len, NULL))
            break;
        t0 = g_get_monotonic_time();
        found += hv_dir_lookup_gid(path, first.ports[0].gid, &e) == 1;
        spent += g_get_monotonic_time() - t0;
    }
    *load_us = loads ? (double)spent / loads : 0;
    t0 = g_get_monotonic_time();
    for (guint k = 0; k < BENCH_LOOKUPS; k++) {
        AgentDirMsg m = bench_peer(1 + (guint)g_random_int_range(0, (gint32)n), 1, 0);

        found += hv_dir_lookup_gid(path, m.ports[0].gid, &e) == 1;
    }
    *gid_us = (double)(g_get_monotonic_time() - t0) / BENCH_LOOKUPS;
    t0 = g_get_monotonic_time();
    for (guint k = 0; k < BENCH_LOOKUPS; k++)
        found += hv_dir_lookup_lid(path, (guint16)(2 + g_random_int_range(0, (gint32)n)), &e) == 1;
    *lid_us = (double)(g_get_monotonic_time() - t0) / BENCH_LOOKUPS;
    if (found < 2 * BENCH_LOOKUPS + loads)
        fprintf(stderr, "hm-directory-bench: only %u of %u lookups found\n", found,
                2 * BENCH_LOOKUPS + loads);
}

static void bench_size(guint n)
{
    g_autofree char *tmp = g_dir_make_tmp("hm-directory-bench.XXXXXX", NULL);
    g_autofree char *path = g_build_filename(tmp, AGENT_DIR_FILE, NULL);
    g_autoptr(GError) error = NULL;
    struct mallinfo2 before = mallinfo2(), after;
    AgentDirConfig config = {.group = "127.0.0.1:0",
                             .peer_listen = "127.0.0.1:7475",
                             .run_dir = tmp,
                             .refresh_s = 60,
                             .verbs = &bench_verbs};
    AgentDir *dir = agent_dir_new(&config, &error);
    struct sockaddr_in to = {.sin_family = AF_INET};
    gint64 fill, us[BENCH_CHANGES];
    double load_us, gid_us, lid_us;
    struct stat st;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (!dir || fd < 0) {
        fprintf(stderr, "hm-directory-bench: %s\n", error ? error->message : "socket");
        exit(1);
    }
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(agent_dir_get_port(dir));
    fill = bench_fill(dir, fd, &to, n);
    bench_idle(AGENT_DIR_WRITE_MIN_MS + 50);
    after = mallinfo2();
    bench_lookups(path, n, &load_us, &gid_us, &lid_us); /* before the LIDs change */
    bench_changes(dir, fd, &to, path, n, us);
    bench_stat(path, &st);
    printf("%6u peers  fill %8.1f ms  change p50 %6.2f p90 %6.2f max %6.2f ms  file %7.1f KiB  "
           "load %8.1f us  lookup gid %6.2f us lid %6.2f us  memory %5.0f B/peer\n",
           n, fill / 1000.0, us[BENCH_CHANGES / 2] / 1000.0, us[BENCH_CHANGES * 9 / 10] / 1000.0,
           us[BENCH_CHANGES - 1] / 1000.0, st.st_size / 1024.0, load_us, gid_us, lid_us,
           (double)(after.uordblks - before.uordblks) / n);
    fflush(stdout);
    close(fd);
    agent_dir_free(dir);
    g_unlink(path);
    g_rmdir(tmp);
}

/* Warnings and errors only: the agent's messages would be timed too. */
static GLogWriterOutput bench_log(GLogLevelFlags level, const GLogField *fields, gsize n,
                                  gpointer data)
{
    if (level & (G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG))
        return G_LOG_WRITER_HANDLED;
    return g_log_writer_default(level, fields, n, data);
}

int main(int argc, char **argv)
{
    static const guint sizes[] = {100, 1000, 10000};

    g_log_set_writer_func(bench_log, NULL, NULL);
    printf("hm-directory-bench: one agent's directory, simulated peers on loopback (one GID "
           "each); change = a peer's new LID from its datagram to the file replaced\n");
    for (guint i = 0; i < G_N_ELEMENTS(sizes); i++)
        bench_size(argc > 1 ? (guint)atoi(argv[1]) * (i + 1) : sizes[i]);
    return 0;
}
