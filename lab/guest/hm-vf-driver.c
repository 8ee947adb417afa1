/* hm-vf-driver: the lab guest's stand-in for a VF driver (lab/guest/init starts it at boot).
 *
 * Whenever a NIC with the MAC of hm.vf_mac appears (at boot or hot-plugged) it brings it up,
 * gives it hm.vf_ip and creates the soft-RoCE device rxe0 on it, as a VF driver's probe would
 * create its RDMA device; when the NIC goes away it says so. It does what lab/guest/hm-hotplug
 * does, without a process per kernel event and per step: under TCG every fork+exec of a shell,
 * of busybox or of the dynamically linked 'rdma' costs 50-500 ms, more than the kernel work.
 *
 * Everything is netlink, waited on with poll():
 *   NETLINK_ROUTE, group RTMGRP_LINK   new and removed links, carrier changes
 *   NETLINK_ROUTE requests             dump links (boot scan), set the link up, add the address
 *   NETLINK_RDMA  RDMA_NLDEV_CMD_NEWLINK   what 'rdma link add rxe0 type rxe netdev IF' sends
 *
 * Console lines (docs/lab.md): "HMLAB vf up IF rxe0 PORT_ACTIVE gid=G", "HMLAB vf gone IF",
 * "HMLAB vf error: ...". The port of a new rxe device is ACTIVE at once when its netdev is up
 * with carrier; if it is not, the line waits for the link events that change it (deadline
 * 10 s, then it is printed with the state reached and the NIC's operstate, carrier and flags:
 * "HMLAB vf up IF rxe0 PORT_DOWN (IF: operstate down, carrier 0, flags 0x1003) gid=G").
 *
 * Usage: hm-vf-driver --mac MAC [--ip ADDR/LEN] [--rdma-dev rxe0] [--sysfs /sys] [--daemonize]
 * --daemonize returns (exit 0) once the boot scan is done, so the VF is up before the agent and
 * the workload start, as with the boot scan of hm-hotplug.
 */
#include "lab/guest/hm-guest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <rdma/rdma_netlink.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define VFD_BUF 32768
#define VFD_ACTIVE_WAIT_MS 10000
/* How long a new NIC waits for the RDMA device name still held by the device of a NIC that
 * went away (the kernel unregisters it asynchronously, after the processes using it let go). */
#define VFD_STALE_WAIT_MS 30000
#define VFD_RETRY_MS 100
#define VFD_REPLY_WAIT_MS 5000
#define VFD_GIDS_MAX 256

typedef struct {
    unsigned char mac[6];
    int have_ip;
    struct in_addr ip;
    unsigned prefix;
    const char *rdma_dev;
    const char *sysfs;

    int events; /* NETLINK_ROUTE, RTMGRP_LINK */
    int route;  /* NETLINK_ROUTE requests */
    int rdma;   /* NETLINK_RDMA requests */
    uint32_t seq;

    int ifindex; /* the VF NIC being handled or up; 0 = none */
    char ifname[IFNAMSIZ];
    int waiting_active; /* rxe created, "vf up" not printed yet */
    int new_ifindex;    /* a NIC with our MAC seen in the messages being read; 0 = none */
    char new_ifname[IFNAMSIZ];
    int64_t active_deadline;
    int rdma_stale;     /* our NIC went away: an rdma_dev still there is its old device */
    int retry_rxe;      /* rdma_dev is held by an old device: retry creating ours */
    int64_t retry_at, retry_deadline;
} Vfd;

/* ---- netlink plumbing --------------------------------------------------------------------- */

static int nl_open(int protocol, uint32_t groups)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = groups};
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol);
    int size = 1 << 20;

    if (fd < 0)
        return -errno;
    /* A burst of link events must not overflow the socket (ENOBUFS would need a rescan). */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;

        close(fd);
        return -e;
    }
    return fd;
}

static void nl_put_attr(struct nlmsghdr *nlh, size_t max, unsigned short type, const void *data,
                        size_t len)
{
    struct rtattr *rta = (struct rtattr *)((char *)nlh + NLMSG_ALIGN(nlh->nlmsg_len));
    size_t need = NLMSG_ALIGN(nlh->nlmsg_len) + RTA_ALIGN(RTA_LENGTH(len));

    if (need > max)
        abort(); /* the requests are built from fixed sizes below */
    rta->rta_type = type;
    rta->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(rta), data, len);
    nlh->nlmsg_len = (uint32_t)need;
}

/* Sends @nlh (NLM_F_ACK set by the caller) and waits for its ACK: 0 or a negative errno. */
static int nl_request(Vfd *vfd, int fd, struct nlmsghdr *nlh)
{
    char buf[VFD_BUF] __attribute__((aligned(NLMSG_ALIGNTO)));
    int64_t deadline = now_ms() + VFD_REPLY_WAIT_MS;
    uint32_t seq = ++vfd->seq;

    nlh->nlmsg_seq = seq;
    if (send(fd, nlh, nlh->nlmsg_len, 0) < 0)
        return -errno;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - now_ms();
        ssize_t n;

        if (left <= 0)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
            return -errno;
        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return -errno;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq != seq || h->nlmsg_type != NLMSG_ERROR)
                continue;
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr)))
                return -EBADMSG;
            return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
        }
    }
}

/* ---- the VF ------------------------------------------------------------------------------- */

static int link_set_up(Vfd *vfd, int ifindex)
{
    char buf[256] __attribute__((aligned(NLMSG_ALIGNTO))) = {0};
    struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
    struct ifinfomsg *ifi = NLMSG_DATA(nlh);

    nlh->nlmsg_len = NLMSG_LENGTH(sizeof(*ifi));
    nlh->nlmsg_type = RTM_NEWLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = ifindex;
    ifi->ifi_flags = IFF_UP;
    ifi->ifi_change = IFF_UP;
    return nl_request(vfd, vfd->route, nlh);
}

static int addr_add(Vfd *vfd, int ifindex)
{
    char buf[256] __attribute__((aligned(NLMSG_ALIGNTO))) = {0};
    struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
    struct ifaddrmsg *ifa = NLMSG_DATA(nlh);
    struct in_addr brd = vfd->ip;
    int r;

    if (vfd->prefix < 32)
        brd.s_addr |= htonl(0xffffffffu >> vfd->prefix);
    nlh->nlmsg_len = NLMSG_LENGTH(sizeof(*ifa));
    nlh->nlmsg_type = RTM_NEWADDR;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)vfd->prefix;
    ifa->ifa_index = (unsigned)ifindex;
    nl_put_attr(nlh, sizeof(buf), IFA_LOCAL, &vfd->ip, sizeof(vfd->ip));
    nl_put_attr(nlh, sizeof(buf), IFA_ADDRESS, &vfd->ip, sizeof(vfd->ip));
    nl_put_attr(nlh, sizeof(buf), IFA_BROADCAST, &brd, sizeof(brd));
    r = nl_request(vfd, vfd->route, nlh);
    return r == -EEXIST ? 0 : r;
}

/* What 'rdma link add NAME type rxe netdev IF' sends. */
static int rxe_add(Vfd *vfd, const char *ifname)
{
    char buf[512] __attribute__((aligned(NLMSG_ALIGNTO))) = {0};
    struct nlmsghdr *nlh = (struct nlmsghdr *)buf;

    nlh->nlmsg_len = NLMSG_LENGTH(0);
    nlh->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_NEWLINK);
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nl_put_attr(nlh, sizeof(buf), RDMA_NLDEV_ATTR_DEV_NAME, vfd->rdma_dev,
                strlen(vfd->rdma_dev) + 1);
    nl_put_attr(nlh, sizeof(buf), RDMA_NLDEV_ATTR_LINK_TYPE, "rxe", 4);
    nl_put_attr(nlh, sizeof(buf), RDMA_NLDEV_ATTR_NDEV_NAME, ifname, strlen(ifname) + 1);
    return nl_request(vfd, vfd->rdma, nlh);
}

/* Reads a small sysfs file of the RDMA device into @out (trailing newline removed). */
static int rdma_sysfs_read(const Vfd *vfd, const char *rel, char *out, size_t len)
{
    char path[512];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "%s/class/infiniband/%s/%s", vfd->sysfs, vfd->rdma_dev, rel);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    n = read(fd, out, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    out[n] = '\0';
    if (n > 0 && out[n - 1] == '\n')
        out[n - 1] = '\0';
    return 0;
}

/* "4: ACTIVE" -> "ACTIVE"; "" when unreadable. */
static void port_state(const Vfd *vfd, char *out, size_t len)
{
    char raw[64];
    const char *s;

    if (rdma_sysfs_read(vfd, "ports/1/state", raw, sizeof(raw)) < 0) {
        snprintf(out, len, "UNKNOWN");
        return;
    }
    s = strchr(raw, ':');
    s = s ? s + 1 : raw;
    while (*s == ' ')
        s++;
    snprintf(out, len, "%s", s);
}

static int port_readable(const Vfd *vfd)
{
    char raw[64];

    return rdma_sysfs_read(vfd, "ports/1/state", raw, sizeof(raw)) == 0;
}

/* Index of the RoCE v2 GID carrying the IPv4 address (::ffff:a.b.c.d), or -1. */
static int ipv4_gid_index(const Vfd *vfd)
{
    for (int i = 0; i < VFD_GIDS_MAX; i++) {
        char rel[64];
        char gid[64];

        snprintf(rel, sizeof(rel), "ports/1/gids/%d", i);
        if (rdma_sysfs_read(vfd, rel, gid, sizeof(gid)) == -ENOENT)
            break;
        if (strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30) == 0)
            return i;
    }
    return -1;
}

/* Reads /sys/class/net/@ifname/@rel into @out ("?" when unreadable). */
static void net_sysfs_read(const Vfd *vfd, const char *ifname, const char *rel, char *out,
                           size_t len)
{
    char path[512];
    ssize_t n;
    int fd;

    snprintf(out, len, "?");
    snprintf(path, sizeof(path), "%s/class/net/%s/%s", vfd->sysfs, ifname, rel);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, out, len - 1);
    close(fd);
    if (n <= 0) {
        snprintf(out, len, "?");
        return;
    }
    out[n] = '\0';
    if (out[n - 1] == '\n')
        out[n - 1] = '\0';
}

/* Prints "vf up" once the port is ACTIVE, or at the deadline with the state reached and, then,
 * what the NIC's link was (a port that stays DOWN is a NIC without carrier or not running). */
static void check_active(Vfd *vfd)
{
    char state[64];
    char gid[16] = "";
    char operstate[32], carrier[8], flags[16];
    int idx;

    if (!vfd->waiting_active)
        return;
    port_state(vfd, state, sizeof(state));
    if (strcmp(state, "ACTIVE") != 0 && now_ms() < vfd->active_deadline)
        return;
    vfd->waiting_active = 0;
    idx = ipv4_gid_index(vfd);
    if (idx >= 0)
        snprintf(gid, sizeof(gid), "%d", idx);
    if (strcmp(state, "ACTIVE") == 0) {
        hm_log("vf up %s %s PORT_%s gid=%s", vfd->ifname, vfd->rdma_dev, state, gid);
        return;
    }
    net_sysfs_read(vfd, vfd->ifname, "operstate", operstate, sizeof(operstate));
    net_sysfs_read(vfd, vfd->ifname, "carrier", carrier, sizeof(carrier));
    net_sysfs_read(vfd, vfd->ifname, "flags", flags, sizeof(flags));
    hm_log("vf up %s %s PORT_%s (%s: operstate %s, carrier %s, flags %s) gid=%s", vfd->ifname,
           vfd->rdma_dev, state, vfd->ifname, operstate, carrier, flags, gid);
}

/* The RDMA device was created on our NIC: "vf up" once its port is ACTIVE. */
static void rxe_created(Vfd *vfd)
{
    vfd->rdma_stale = 0;
    vfd->retry_rxe = 0;
    vfd->waiting_active = 1;
    vfd->active_deadline = now_ms() + VFD_ACTIVE_WAIT_MS;
    check_active(vfd);
}

/* rdma link add answered EEXIST. TRUE when the device there is ours (hm-vf-driver restarted with
 * our NIC up: its parent is our NIC); else the name is held by the device of a NIC that went
 * away (or another NIC's): creating ours is retried until that one is gone. Taking the old
 * device for ours printed "vf up IF rxe0 PORT_DOWN" and never created the new one once the old
 * one went (a kill inside the unplug, the plug coming before the old device was unregistered). */
static int rxe_exists_is_ours(Vfd *vfd, const char *ifname)
{
    char parent[IFNAMSIZ + 2];

    if (vfd->rdma_stale)
        return 0;
    return rdma_sysfs_read(vfd, "parent", parent, sizeof(parent)) == 0 &&
           strcmp(parent, ifname) == 0 && port_readable(vfd);
}

static void rxe_retry(Vfd *vfd)
{
    char parent[IFNAMSIZ + 2] = "?";
    int r;

    if (!vfd->retry_rxe || now_ms() < vfd->retry_at)
        return;
    r = rxe_add(vfd, vfd->ifname);
    if (r == 0) {
        fprintf(stderr, "hm-vf-driver: %s created on %s once the old device let go of the name\n",
                vfd->rdma_dev, vfd->ifname);
        rxe_created(vfd);
        return;
    }
    if ((r == -EEXIST || r == -ENFILE) && now_ms() < vfd->retry_deadline) {
        vfd->retry_at = now_ms() + VFD_RETRY_MS;
        return;
    }
    vfd->retry_rxe = 0;
    if (r == -EEXIST || r == -ENFILE) {
        rdma_sysfs_read(vfd, "parent", parent, sizeof(parent));
        hm_log("vf error: rdma link add %s on %s failed: the %s there, on '%s', did not go "
               "within %d s", vfd->rdma_dev, vfd->ifname, vfd->rdma_dev, parent,
               VFD_STALE_WAIT_MS / 1000);
        return;
    }
    hm_log("vf error: rdma link add %s on %s failed: %s", vfd->rdma_dev, vfd->ifname,
           strerror(-r));
}

static void vf_up(Vfd *vfd, int ifindex, const char *ifname)
{
    int r;

    vfd->ifindex = ifindex;
    snprintf(vfd->ifname, sizeof(vfd->ifname), "%s", ifname);
    r = link_set_up(vfd, ifindex);
    if (r < 0) {
        hm_log("vf error: setting %s up failed: %s", ifname, strerror(-r));
        return;
    }
    if (vfd->have_ip && (r = addr_add(vfd, ifindex)) < 0) {
        hm_log("vf error: adding the address to %s failed: %s", ifname, strerror(-r));
        return;
    }
    /* After the address: the RoCE v2 IPv4 GID is then in the table when the device registers. */
    r = rxe_add(vfd, ifname);
    if (r == -EEXIST && rxe_exists_is_ours(vfd, ifname))
        r = 0; /* already there (hm-vf-driver restarted): report it */
    /* EEXIST: a device is there that is not ours; ENFILE: the kernel's answer when the name is
     * taken by a device on another (or a vanished) NIC. Both go once that device is gone. */
    if (r == -EEXIST || r == -ENFILE) {
        fprintf(stderr, "hm-vf-driver: %s is still the device of a NIC that went away: waiting\n",
                vfd->rdma_dev);
        vfd->retry_rxe = 1;
        vfd->retry_at = now_ms() + VFD_RETRY_MS;
        vfd->retry_deadline = now_ms() + VFD_STALE_WAIT_MS;
        return;
    }
    if (r < 0) {
        hm_log("vf error: rdma link add %s on %s failed: %s", vfd->rdma_dev, ifname, strerror(-r));
        return;
    }
    rxe_created(vfd);
}

/* One RTM_NEWLINK / RTM_DELLINK message (an event or a dump entry). */
static void on_link(Vfd *vfd, const struct nlmsghdr *h)
{
    const struct ifinfomsg *ifi = NLMSG_DATA(h);
    int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*ifi));
    const unsigned char *mac = NULL;
    char ifname[IFNAMSIZ] = "";

    if (len < 0)
        return;
    for (const struct rtattr *rta = IFLA_RTA(ifi); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
        if (rta->rta_type == IFLA_ADDRESS && RTA_PAYLOAD(rta) == 6)
            mac = RTA_DATA(rta);
        else if (rta->rta_type == IFLA_IFNAME && RTA_PAYLOAD(rta) > 0)
            snprintf(ifname, sizeof(ifname), "%.*s", (int)RTA_PAYLOAD(rta),
                     (const char *)RTA_DATA(rta));
    }
    if (h->nlmsg_type == RTM_DELLINK) {
        if (ifi->ifi_index == vfd->new_ifindex)
            vfd->new_ifindex = 0;
        if (ifi->ifi_index == vfd->ifindex) {
            hm_log("vf gone %s", vfd->ifname);
            vfd->ifindex = 0;
            vfd->waiting_active = 0;
            vfd->retry_rxe = 0;
            vfd->rdma_stale = 1; /* its RDMA device goes too, asynchronously */
        }
        return;
    }
    if (ifi->ifi_index == vfd->ifindex) {
        check_active(vfd); /* a carrier or state change of our NIC */
        return;
    }
    /* Brought up once the messages at hand are read: the requests share the route socket
     * with a dump under way. */
    if (mac && memcmp(mac, vfd->mac, 6) == 0 && ifname[0]) {
        vfd->new_ifindex = ifi->ifi_index;
        snprintf(vfd->new_ifname, sizeof(vfd->new_ifname), "%s", ifname);
    }
}

static void handle_new(Vfd *vfd)
{
    int ifindex = vfd->new_ifindex;

    vfd->new_ifindex = 0;
    if (ifindex && ifindex != vfd->ifindex)
        vf_up(vfd, ifindex, vfd->new_ifname);
}

/* Reads what is queued on @fd and handles the link messages. Returns 1 when a dump ended,
 * 0 otherwise, a negative errno on error. */
static int drain(Vfd *vfd, int fd)
{
    char buf[VFD_BUF] __attribute__((aligned(NLMSG_ALIGNTO)));
    int done = 0;

    for (;;) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return done;
        if (n < 0)
            return -errno;
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE)
                done = 1;
            else if (h->nlmsg_type == RTM_NEWLINK || h->nlmsg_type == RTM_DELLINK)
                on_link(vfd, h);
        }
    }
}

/* Boot scan: every link, as a dump on the request socket. */
static int scan(Vfd *vfd)
{
    char buf[128] __attribute__((aligned(NLMSG_ALIGNTO))) = {0};
    struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
    struct ifinfomsg *ifi = NLMSG_DATA(nlh);
    int64_t deadline = now_ms() + VFD_REPLY_WAIT_MS;

    nlh->nlmsg_len = NLMSG_LENGTH(sizeof(*ifi));
    nlh->nlmsg_type = RTM_GETLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    nlh->nlmsg_seq = ++vfd->seq;
    ifi->ifi_family = AF_UNSPEC;
    if (send(vfd->route, nlh, nlh->nlmsg_len, 0) < 0)
        return -errno;
    for (;;) {
        struct pollfd pfd = {.fd = vfd->route, .events = POLLIN};
        int64_t left = deadline - now_ms();
        int r;

        if (left <= 0)
            return -ETIMEDOUT;
        if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
            return -errno;
        r = drain(vfd, vfd->route);
        if (r != 0) {
            handle_new(vfd);
            return r < 0 ? r : 0;
        }
    }
}

static int parse_mac(const char *s, unsigned char *mac)
{
    unsigned v[6];
    char end;

    if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6)
        return -1;
    for (int i = 0; i < 6; i++)
        mac[i] = (unsigned char)v[i];
    return 0;
}

static int parse_ip(const char *s, struct in_addr *ip, unsigned *prefix)
{
    char addr[INET_ADDRSTRLEN];
    const char *slash = strchr(s, '/');
    char *end = NULL;
    unsigned long p = 32;

    if (slash) {
        if ((size_t)(slash - s) >= sizeof(addr))
            return -1;
        memcpy(addr, s, (size_t)(slash - s));
        addr[slash - s] = '\0';
        p = strtoul(slash + 1, &end, 10);
        if (end == slash + 1 || *end || p > 32)
            return -1;
    } else {
        snprintf(addr, sizeof(addr), "%s", s);
    }
    if (inet_pton(AF_INET, addr, ip) != 1)
        return -1;
    *prefix = (unsigned)p;
    return 0;
}

static void usage(void)
{
    fputs("usage: hm-vf-driver --mac MAC [--ip ADDR/LEN] [--rdma-dev rxe0] [--sysfs /sys] "
          "[--daemonize]\n",
          stderr);
}

int main(int argc, char **argv)
{
    Vfd vfd = {.rdma_dev = "rxe0", .sysfs = "/sys"};
    int have_mac = 0;
    int daemonize = 0;
    int r;

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(opt, "--daemonize") == 0) {
            daemonize = 1;
            continue;
        }
        if (!val) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(opt, "--mac") == 0 && parse_mac(val, vfd.mac) == 0) {
            have_mac = 1;
        } else if (strcmp(opt, "--ip") == 0 && parse_ip(val, &vfd.ip, &vfd.prefix) == 0) {
            vfd.have_ip = 1;
        } else if (strcmp(opt, "--rdma-dev") == 0 && val[0] && strlen(val) < 64) {
            vfd.rdma_dev = val;
        } else if (strcmp(opt, "--sysfs") == 0) {
            vfd.sysfs = val;
        } else {
            fprintf(stderr, "hm-vf-driver: bad option or value: %s '%s'\n", opt, val);
            usage();
            return 2;
        }
    }
    if (!have_mac) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* Subscribe before the scan, so that no NIC falls between the two. */
    vfd.events = nl_open(NETLINK_ROUTE, RTMGRP_LINK);
    vfd.route = nl_open(NETLINK_ROUTE, 0);
    vfd.rdma = nl_open(NETLINK_RDMA, 0);
    if (vfd.events < 0 || vfd.route < 0 || vfd.rdma < 0) {
        hm_log("vf error: hm-vf-driver cannot open its netlink sockets: %s",
               strerror(-(vfd.events < 0  ? vfd.events
                          : vfd.route < 0 ? vfd.route
                                          : vfd.rdma)));
        return 1;
    }
    r = scan(&vfd);
    if (r < 0)
        hm_log("vf error: hm-vf-driver cannot list the links: %s", strerror(-r));
    if (daemonize) {
        pid_t pid = fork();

        if (pid < 0) {
            fprintf(stderr, "hm-vf-driver: fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid > 0)
            return 0;
        setsid();
    }
    for (;;) {
        struct pollfd pfd = {.fd = vfd.events, .events = POLLIN};
        int timeout = -1;

        if (vfd.waiting_active) {
            int64_t left = vfd.active_deadline - now_ms();

            timeout = left > 0 ? (int)left : 0;
        }
        if (vfd.retry_rxe) {
            int64_t left = vfd.retry_at - now_ms();

            if (left < 0)
                left = 0;
            if (timeout < 0 || left < timeout)
                timeout = (int)left;
        }
        if (poll(&pfd, 1, timeout) < 0 && errno != EINTR) {
            fprintf(stderr, "hm-vf-driver: poll: %s\n", strerror(errno));
            return 1;
        }
        r = drain(&vfd, vfd.events);
        if (r == -ENOBUFS) {
            /* Events were lost: look at the links again. */
            fprintf(stderr, "hm-vf-driver: link events overflowed; rescanning\n");
            if ((r = scan(&vfd)) < 0)
                fprintf(stderr, "hm-vf-driver: rescan: %s\n", strerror(-r));
        } else if (r < 0) {
            fprintf(stderr, "hm-vf-driver: reading link events: %s\n", strerror(-r));
            return 1;
        }
        handle_new(&vfd);
        rxe_retry(&vfd);
        check_active(&vfd);
    }
}
