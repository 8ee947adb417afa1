/* hm-ib-sma: the subnet management agent of an IB-mode lab guest (docs/lab.md, "InfiniBand
 * fabric mode"). On an HCA the SMA answers the SM's SMPs and configures the port; here it
 * reads the lab SM's frames (lab/hm-ib-sm, ib-emu.h) on the VF stand-in NIC and:
 *   ACTIVE lid=L   gives the NIC the address of LID L (198.18.x.y/16), which makes rxe's GID
 *                  that libhm-ib-emu.so reads as the port's LID and routes to, and bind-mounts
 *                  the port's sysfs files (link_layer, lid, sm_lid, lid_mask_count, state,
 *                  gids/0) with what an IB port shows;
 *   INIT           nothing yet (the port stays INIT to verbs until the SM activates it);
 *   node_guid=, port_guid=   (either state) the VF's GUIDs, which hotmigd set: written to
 *                  RUN_DIR/DEV/node_guid and port_guid for libhm-ib-emu.so (ibv_query_device,
 *                  ibv_get_device_guid, GID 0) and shown over sysfs's node_guid and gids/0 with
 *                  the rest of the IB view; a frame of a new NIC without them removes the two
 *                  files (the port keeps rxe's GUID, the stand-in MAC's EUI-64).
 * The sysfs view is put in place before the address, so that a port ACTIVE to verbs is ACTIVE in
 * sysfs too; an ACTIVE frame that comes before the VF driver made the RDMA device on the NIC
 * (the SM may sweep a port during the guest's boot) is applied once the device is there
 * (looked for every SMA_RETRY_MS, for at most SMA_DEVICE_WAIT_MS; then the address is given
 * without the sysfs view, and an error line says so).
 * Console lines: "HMLAB ib port IF INIT host=H slot=N", "HMLAB ib port IF ACTIVE lid=0xL
 * sm_lid=0xS", "HMLAB ib error: ...".
 *
 * Usage: hm-ib-sma --mac MAC [--rdma-dev rxe0] [--sysfs /sys] [--run-dir /run/hm-ib]
 *        [--daemonize]
 */
#include "ib-emu.h"
#include "lab/guest/hm-guest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SMA_RETRY_MS 100
#define SMA_DEVICE_WAIT_MS 30000

typedef struct {
    char mac[18]; /* as sysfs writes it: 52:54:00:48:01:05 */
    const char *rdma_dev;
    const char *sysfs;
    const char *run_dir;
    int pkt;   /* AF_PACKET, the SM's ethertype */
    int route; /* NETLINK_ROUTE requests */
    uint32_t seq;
    int ifindex;       /* the NIC the state below is of */
    HmIbPortState state;
    uint16_t lid;      /* the LID whose address the NIC has, 0 = none */
    uint64_t node_guid;   /* the VF's GUIDs, as the SM gave them (0: rxe's) */
    uint64_t port_guid;
    int pending;          /* an ACTIVE frame waits for the RDMA device */
    HmIbSmFrame pending_frame;
    int pending_ifindex;
    int64_t pending_deadline;
} Sma;

static int read_line(const char *path, char *out, size_t len)
{
    FILE *f = fopen(path, "re");
    int ok;

    if (!f)
        return -1;
    ok = fgets(out, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");

    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

/* Adds (@add) or deletes LID @lid's address on @ifindex: 0 or a negative errno. */
static int sma_addr(Sma *s, int ifindex, uint16_t lid, int add)
{
    struct {
        struct nlmsghdr nh;
        struct ifaddrmsg ifa;
        char attrs[64];
    } req = {0};
    char buf[4096] __attribute__((aligned(NLMSG_ALIGNTO)));
    struct rtattr *rta;
    uint8_t ip[4];
    ssize_t n;

    hm_ib_lid_to_ipv4(lid, ip);
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifa));
    req.nh.nlmsg_type = add ? RTM_NEWADDR : RTM_DELADDR;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0);
    req.nh.nlmsg_seq = ++s->seq;
    req.ifa.ifa_family = AF_INET;
    req.ifa.ifa_prefixlen = HM_IB_LID_PREFIX;
    req.ifa.ifa_index = (unsigned)ifindex;
    for (int t = 0; t < 2; t++) {
        rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
        rta->rta_type = t ? IFA_ADDRESS : IFA_LOCAL;
        rta->rta_len = RTA_LENGTH(4);
        memcpy(RTA_DATA(rta), ip, 4);
        req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
    }
    if (send(s->route, &req, req.nh.nlmsg_len, 0) < 0)
        return -errno;
    for (;;) {
        struct pollfd pfd = {.fd = s->route, .events = POLLIN};

        if (poll(&pfd, 1, 5000) <= 0)
            return -ETIMEDOUT;
        n = recv(s->route, buf, sizeof(buf), 0);
        if (n < 0)
            return -errno;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq == s->seq && h->nlmsg_type == NLMSG_ERROR) {
                int e = ((struct nlmsgerr *)NLMSG_DATA(h))->error;

                return e == -EEXIST || (!add && e == -EADDRNOTAVAIL) ? 0 : e;
            }
        }
    }
}

/* Whether the RDMA device is there and sits on @ifname (not the device of a NIC that went). */
static int sma_device_ready(const Sma *s, const char *ifname)
{
    char path[300], ndev[IF_NAMESIZE + 2];

    snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", s->sysfs,
             s->rdma_dev);
    return read_line(path, ndev, sizeof(ndev)) == 0 && strcmp(ndev, ifname) == 0;
}

/* Writes @text to @path through a temporary file and a rename (a reader sees the old file or
 * the new one): 0 or -1. */
static int write_file_atomic(const char *path, const char *text)
{
    char tmp[600];

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (write_file(tmp, text) < 0)
        return -1;
    return rename(tmp, path);
}

/* The VF's GUIDs for the wrapper (RUN_DIR/DEV/node_guid, port_guid), or none: the two files
 * removed when the frame gives none. */
static void sma_guids(Sma *s, const HmIbSmFrame *f)
{
    char dir[300], path[400], text[32];
    const uint64_t guids[2] = {f->node_guid, f->port_guid};
    const char *names[2] = {"node_guid", "port_guid"};

    snprintf(dir, sizeof(dir), "%s/%s", s->run_dir, s->rdma_dev);
    mkdir(s->run_dir, 0755);
    mkdir(dir, 0755);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (!f->node_guid) {
            if (unlink(path) < 0 && errno != ENOENT)
                hm_log("ib error: cannot remove %s: %s", path, strerror(errno));
            continue;
        }
        hm_ib_guid_format(guids[i], text, sizeof(text) - 1);
        strcat(text, "\n");
        if (write_file_atomic(path, text) < 0)
            hm_log("ib error: cannot write %s: %s", path, strerror(errno));
    }
    s->node_guid = f->node_guid;
    s->port_guid = f->port_guid;
}

/* Bind-mounts the IB view of the port over rxe's sysfs files: 0, or -1 (said why). */
static int sma_sysfs(Sma *s, const HmIbSmFrame *f)
{
    char port[256], guid[64], path[512], src[512], text[128], cur[64];
    unsigned g[4];
    struct {
        const char *name;
        char text[96];
    } files[7];
    size_t nf = 0;

    snprintf(port, sizeof(port), "%s/class/infiniband/%s/ports/1", s->sysfs, s->rdma_dev);
    snprintf(path, sizeof(path), "%s/link_layer", port);
    if (read_line(path, cur, sizeof(cur)) < 0) {
        hm_log("ib error: cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (strcmp(cur, "InfiniBand") == 0)
        return 0; /* this device has it already */
    snprintf(path, sizeof(path), "%s/class/infiniband/%s/node_guid", s->sysfs, s->rdma_dev);
    if (s->port_guid) {
        /* The VF's GUIDs (hotmigd's): GID 0 of the port GUID, node_guid shown too. */
        hm_ib_guid_format(s->port_guid, guid, sizeof(guid));
    } else if (read_line(path, guid, sizeof(guid)) < 0) {
        hm_log("ib error: cannot read the node GUID of %s", s->rdma_dev);
        return -1;
    }
    if (sscanf(guid, "%4x:%4x:%4x:%4x", &g[0], &g[1], &g[2], &g[3]) != 4) {
        hm_log("ib error: '%s' is not a GUID", guid);
        return -1;
    }
    snprintf(files[nf].text, sizeof(files[nf].text), "InfiniBand\n");
    files[nf++].name = "link_layer";
    snprintf(files[nf].text, sizeof(files[nf].text), "0x%x\n", f->lid);
    files[nf++].name = "lid";
    snprintf(files[nf].text, sizeof(files[nf].text), "0x%x\n", f->sm_lid);
    files[nf++].name = "sm_lid";
    snprintf(files[nf].text, sizeof(files[nf].text), "0\n");
    files[nf++].name = "lid_mask_count";
    snprintf(files[nf].text, sizeof(files[nf].text), "4: ACTIVE\n");
    files[nf++].name = "state";
    snprintf(files[nf].text, sizeof(files[nf].text), "fe80:0000:0000:0000:%04x:%04x:%04x:%04x\n",
             g[0], g[1], g[2], g[3]);
    files[nf++].name = "gids/0";
    if (s->node_guid) {
        hm_ib_guid_format(s->node_guid, files[nf].text, sizeof(files[nf].text) - 1);
        strcat(files[nf].text, "\n");
        files[nf++].name = "node_guid";
    }
    snprintf(src, sizeof(src), "%s/%s", s->run_dir, s->rdma_dev);
    mkdir(s->run_dir, 0755);
    mkdir(src, 0755);
    for (size_t i = 0; i < nf; i++) {
        int node = strcmp(files[i].name, "node_guid") == 0;

        snprintf(src, sizeof(src), "%s/%s/%s", s->run_dir, s->rdma_dev,
                 strcmp(files[i].name, "gids/0") == 0 ? "gid0" : files[i].name);
        if (node) /* the device's file (sma_guids() wrote its source) */
            snprintf(path, sizeof(path), "%s/class/infiniband/%s/node_guid", s->sysfs,
                     s->rdma_dev);
        else
            snprintf(path, sizeof(path), "%s/%s", port, files[i].name);
        snprintf(text, sizeof(text), "%s", files[i].text);
        if ((!node && write_file(src, text) < 0) || mount(src, path, NULL, MS_BIND, NULL) < 0) {
            hm_log("ib error: cannot show %s over %s: %s", src, path, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void sma_frame(Sma *s, int ifindex, const HmIbSmFrame *f)
{
    char ifname[IF_NAMESIZE] = "?", path[300], mac[32];
    int r;

    if (!if_indextoname((unsigned)ifindex, ifname))
        return;
    snprintf(path, sizeof(path), "%s/class/net/%s/address", s->sysfs, ifname);
    if (read_line(path, mac, sizeof(mac)) < 0 || strcasecmp(mac, s->mac) != 0)
        return; /* not the VF stand-in */
    if (ifindex != s->ifindex) {
        /* A new NIC (the VF was plugged again): its port starts over. */
        s->ifindex = ifindex;
        s->state = HM_IB_PORT_LAST;
        s->lid = 0;
        s->pending = 0;
        s->node_guid = s->port_guid = 0;
        sma_guids(s, f); /* before any program sees the port ACTIVE */
    } else if (f->node_guid != s->node_guid || f->port_guid != s->port_guid) {
        sma_guids(s, f);
    }
    if (f->state == HM_IB_PORT_INIT) {
        if (s->state != HM_IB_PORT_INIT)
            hm_log("ib port %s INIT host=%s slot=%u", ifname, f->host, f->slot);
        s->state = HM_IB_PORT_INIT;
        s->pending = 0;
        return;
    }
    if (s->state == HM_IB_PORT_ACTIVE && s->lid == f->lid)
        return;
    if (!sma_device_ready(s, ifname)) {
        if (!s->pending)
            s->pending_deadline = now_ms() + SMA_DEVICE_WAIT_MS;
        s->pending = 1;
        s->pending_frame = *f;
        s->pending_ifindex = ifindex;
        if (now_ms() < s->pending_deadline)
            return;
        hm_log("ib error: no %s on %s %d ms after the SM activated it: LID without sysfs view",
                s->rdma_dev, ifname, SMA_DEVICE_WAIT_MS);
    } else {
        sma_sysfs(s, f);
    }
    s->pending = 0;
    if (s->lid != f->lid) {
        if (s->lid && (r = sma_addr(s, ifindex, s->lid, 0)) < 0)
            hm_log("ib error: cannot remove LID 0x%04x from %s: %s", s->lid, ifname, strerror(-r));
        if ((r = sma_addr(s, ifindex, f->lid, 1)) < 0) {
            hm_log("ib error: cannot give %s LID 0x%04x: %s", ifname, f->lid, strerror(-r));
            return;
        }
        s->lid = f->lid;
    }
    hm_log("ib port %s ACTIVE lid=0x%04x sm_lid=0x%04x host=%s slot=%u", ifname, f->lid,
            f->sm_lid, f->host, f->slot);
    s->state = HM_IB_PORT_ACTIVE;
}

static void usage(void)
{
    fputs("usage: hm-ib-sma --mac MAC [--rdma-dev rxe0] [--sysfs /sys] [--run-dir /run/hm-ib] "
          "[--daemonize]\n",
          stderr);
}

int main(int argc, char **argv)
{
    Sma s = {.rdma_dev = "rxe0", .sysfs = "/sys", .run_dir = "/run/hm-ib", .state = HM_IB_PORT_LAST};
    struct sockaddr_nl nl = {.nl_family = AF_NETLINK};
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_protocol = htons(HM_IB_ETHERTYPE)};
    int daemonize = 0;

    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(argv[i], "--daemonize") == 0) {
            daemonize = 1;
            continue;
        }
        if (!val) {
            usage();
            return 2;
        }
        if (strcmp(argv[i], "--mac") == 0 && strlen(val) == 17)
            snprintf(s.mac, sizeof(s.mac), "%s", val);
        else if (strcmp(argv[i], "--rdma-dev") == 0 && val[0] && strlen(val) < 64)
            s.rdma_dev = val;
        else if (strcmp(argv[i], "--sysfs") == 0)
            s.sysfs = val;
        else if (strcmp(argv[i], "--run-dir") == 0)
            s.run_dir = val;
        else {
            fprintf(stderr, "hm-ib-sma: bad option or value: %s '%s'\n", argv[i], val);
            usage();
            return 2;
        }
        i++;
    }
    if (!s.mac[0]) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    s.pkt = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(HM_IB_ETHERTYPE));
    s.route = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (s.pkt < 0 || s.route < 0 || bind(s.pkt, (struct sockaddr *)&ll, sizeof(ll)) < 0 ||
        bind(s.route, (struct sockaddr *)&nl, sizeof(nl)) < 0) {
        hm_log("ib error: hm-ib-sma cannot open its sockets: %s", strerror(errno));
        return 1;
    }
    if (daemonize) {
        pid_t pid = fork();

        if (pid < 0)
            return 1;
        if (pid > 0)
            return 0;
        setsid();
    }
    for (;;) {
        char buf[HM_IB_FRAME_MAX + 64];
        struct sockaddr_ll from;
        socklen_t fl = sizeof(from);
        HmIbSmFrame f;
        struct pollfd pfd = {.fd = s.pkt, .events = POLLIN};
        ssize_t n;

        if (poll(&pfd, 1, s.pending ? SMA_RETRY_MS : -1) < 0 && errno != EINTR) {
            hm_log("ib error: hm-ib-sma: poll: %s", strerror(errno));
            return 1;
        }
        if (!(pfd.revents & POLLIN)) {
            if (s.pending) {
                f = s.pending_frame;
                sma_frame(&s, s.pending_ifindex, &f);
            }
            continue;
        }
        n = recvfrom(s.pkt, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            hm_log("ib error: hm-ib-sma: recv: %s", strerror(errno));
            return 1;
        }
        if (from.sll_pkttype == PACKET_OUTGOING || hm_ib_sm_frame_parse(buf, (size_t)n, &f) < 0)
            continue;
        sma_frame(&s, from.sll_ifindex, &f);
    }
}
