/* libhotmig-verbs, peer link layer: the agents' directory of peers (docs/protocol.md,
 * "Directory"): which guest's agent answers for a GID, and which GID holds a LID now. The
 * guest's agent keeps it from the other agents' announcements and writes it for the layers as
 * RUN_DIR/directory; the layer reads it again whenever the file was replaced. libc only. */
#include "hv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HV_DIR_HEADER "# hotmig-directory 1"

static pthread_mutex_t hv_dir_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char path[160];
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    HvDirEntry *v;
    size_t n;
} hv_dir;

static int hv_dir_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static int hv_dir_uint(const char *s, unsigned long max, unsigned long *out)
{
    char *end;

    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1]))
        return -EINVAL;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return *end || errno || *out > max ? -EINVAL : 0;
}

int hv_dir_parse_line(const char *line, HvDirEntry *e)
{
    char gid[40], lid[8], addr[INET6_ADDRSTRLEN + 1], port[8], extra;
    unsigned long v;

    memset(e, 0, sizeof(*e));
    if (strlen(line) > HV_DIR_LINE_MAX ||
        sscanf(line, "%39s %7s %46s %7s %c", gid, lid, addr, port, &extra) != 4 ||
        strlen(gid) != 32)
        return -EINVAL;
    for (int i = 0; i < 16; i++) {
        int hi = hv_dir_hex(gid[2 * i]), lo = hv_dir_hex(gid[2 * i + 1]);

        if (hi < 0 || lo < 0)
            return -EINVAL;
        e->gid[i] = (uint8_t)(hi << 4 | lo);
    }
    if (hv_dir_uint(lid, 0xffff, &v))
        return -EINVAL;
    e->lid = (uint16_t)v;
    if (hv_dir_uint(port, 65535, &v) || v == 0)
        return -EINVAL;
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&e->addr;

        if (inet_pton(AF_INET6, addr, &a->sin6_addr) != 1)
            return -EINVAL;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)v);
        e->alen = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&e->addr;

        if (inet_pton(AF_INET, addr, &a->sin_addr) != 1)
            return -EINVAL;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)v);
        e->alen = sizeof(*a);
    }
    return 0;
}

/* Reads @path whole (at most HV_DIR_BYTES_MAX) into entries; a line that does not parse is
 * skipped and counted. -errno when the file cannot be read or has no header. */
static int hv_dir_load(int fd, off_t size, HvDirEntry **ret, size_t *ret_n)
{
    char *buf, *line, *save = NULL;
    HvDirEntry *v;
    size_t n = 0, bad = 0, got = 0, cap;
    ssize_t r;

    if (size < 0 || size > HV_DIR_BYTES_MAX)
        return -EFBIG;
    buf = malloc((size_t)size + 1);
    cap = (size_t)size / 44 + 1; /* the shortest line: 32 + 1 + 1 + 1 + 7 + 1 + 1 */
    v = calloc(cap, sizeof(*v));
    if (!buf || !v) {
        free(buf);
        free(v);
        return -ENOMEM;
    }
    while (got < (size_t)size && (r = read(fd, buf + got, (size_t)size - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    if (strncmp(buf, HV_DIR_HEADER "\n", sizeof(HV_DIR_HEADER)) != 0) {
        free(buf);
        free(v);
        return -EPROTO;
    }
    for (line = strtok_r(buf + sizeof(HV_DIR_HEADER), "\n", &save); line && n < cap;
         line = strtok_r(NULL, "\n", &save))
        if (hv_dir_parse_line(line, &v[n]) == 0)
            n++;
        else
            bad++;
    free(buf);
    if (bad)
        hv_debug("directory: %zu lines that do not parse were skipped", bad);
    *ret = v;
    *ret_n = n;
    return 0;
}

/* The cache of @path, read again when the file was replaced. hv_dir_lock held. */
static int hv_dir_fresh(const char *path)
{
    struct stat st;
    HvDirEntry *v = NULL;
    size_t n = 0;
    int fd, r;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    if (!strcmp(hv_dir.path, path) && st.st_dev == hv_dir.dev && st.st_ino == hv_dir.ino &&
        st.st_size == hv_dir.size && st.st_mtim.tv_sec == hv_dir.mtime.tv_sec &&
        st.st_mtim.tv_nsec == hv_dir.mtime.tv_nsec) {
        close(fd);
        return 0;
    }
    r = hv_dir_load(fd, st.st_size, &v, &n);
    close(fd);
    if (r)
        return r;
    free(hv_dir.v);
    hv_dir.v = v;
    hv_dir.n = n;
    snprintf(hv_dir.path, sizeof(hv_dir.path), "%s", path);
    hv_dir.dev = st.st_dev;
    hv_dir.ino = st.st_ino;
    hv_dir.size = st.st_size;
    hv_dir.mtime = st.st_mtim;
    return 0;
}

/* The entry @match accepts (the last in the file: the agent writes the newest claim last). */
static int hv_dir_find(const char *path, int (*match)(const HvDirEntry *, const void *),
                       const void *key, HvDirEntry *out)
{
    int r, found = 0;

    pthread_mutex_lock(&hv_dir_lock);
    r = hv_dir_fresh(path);
    for (size_t i = hv_dir.n; r == 0 && i-- > 0;)
        if (match(&hv_dir.v[i], key)) {
            *out = hv_dir.v[i];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&hv_dir_lock);
    return r < 0 ? r : found;
}

static int hv_dir_match_gid(const HvDirEntry *e, const void *gid)
{
    return memcmp(e->gid, gid, 16) == 0;
}

static int hv_dir_match_lid(const HvDirEntry *e, const void *lid)
{
    return e->lid != 0 && e->lid == *(const uint16_t *)lid;
}

int hv_dir_lookup_gid(const char *path, const uint8_t gid[16], HvDirEntry *out)
{
    return hv_dir_find(path, hv_dir_match_gid, gid, out);
}

int hv_dir_lookup_lid(const char *path, uint16_t lid, HvDirEntry *out)
{
    return lid ? hv_dir_find(path, hv_dir_match_lid, &lid, out) : 0;
}
