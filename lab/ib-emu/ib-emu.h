/* The lab's InfiniBand fabric emulation (hotmig-lab up --fabric ib, docs/lab.md "InfiniBand
 * fabric mode"): what the subnet manager stand-in (lab/hm-ib-sm, on the host), the guest's
 * subnet management agent (hm-ib-sma) and the provider wrapper (libhm-ib-emu.so) agree on.
 * Lab-only: nothing of lab/ib-emu/ is installed by the product's packages.
 *
 * Routing. A LID is carried by an IPv4 address of the port that holds it: LID L is
 * 198.18.(L >> 8).(L & 255) (benchmarking range, RFC 2544; a /16 on the VF NIC). The SMA adds
 * that address to the VF NIC when the SM assigns the LID, and it goes with the NIC when the VF
 * is unplugged. rxe makes a RoCE v2 GID of it, so the device's GID table says which LID the
 * port holds; the wrapper turns an address vector's DLID into a GRH to that address, and
 * ARP and rxe's destination-GID check deliver it to whichever port holds the LID now, or to
 * none. A GRH's DGID given by the program is not used to route (IB semantics).
 *
 * SM frames: Ethernet type HM_IB_ETHERTYPE, sent by the SM into the VF stand-in's tap towards
 * the guest, payload one text line (at most HM_IB_FRAME_MAX bytes):
 *   "HMIBSM1 state=INIT|ACTIVE lid=0xLLLL sm_lid=0xSSSS host=H slot=N"
 *   and, when the SM has the VF's GUIDs, " node_guid=0xGGGGGGGGGGGGGGGG port_guid=0xGGGG..."
 * The GUIDs are the VF's (what hotmigd gave host H's slot N through its stand-in PF driver,
 * [pool] standin-guids: docs/ib-identity.md "Stand-ins"); without them the port keeps rxe's
 * (the EUI-64 of the stand-in's MAC). The SMA hands them to the wrapper as two files of
 * HM_IB_RUN_DIR/DEVICE, node_guid and port_guid, in sysfs's form (0002:c903:00a1:b2c3), and
 * shows node_guid over the device's sysfs file too.
 */
#ifndef HM_IB_EMU_H
#define HM_IB_EMU_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define HM_IB_ETHERTYPE 0x88b5 /* IEEE 802 local experimental */
#define HM_IB_FRAME_MAX 200
#define HM_IB_SM_LID 0x0001
#define HM_IB_LID_NET_A 198
#define HM_IB_LID_NET_B 18
#define HM_IB_LID_PREFIX 16
#define HM_IB_LID_MAX 0xbfff /* unicast LIDs 0x0001-0xbfff */
/* The subnet prefix of every port GID: the default (link-local) one, fe80::/64. */
#define HM_IB_SUBNET_PREFIX 0xfe80000000000000ULL
/* Where the SMA keeps the port's files (the sysfs view's sources, the VF's GUIDs). */
#define HM_IB_RUN_DIR "/run/hm-ib"

typedef enum { HM_IB_PORT_INIT, HM_IB_PORT_ACTIVE, HM_IB_PORT_LAST } HmIbPortState;

typedef struct {
    HmIbPortState state;
    uint16_t lid;
    uint16_t sm_lid;
    char host[8];
    unsigned slot;
    uint64_t node_guid; /* the VF's GUIDs; both 0: none given (the port keeps rxe's) */
    uint64_t port_guid;
} HmIbSmFrame;

/* The IPv4 address (network byte order, as 4 bytes) that carries LID @lid. */
static inline void hm_ib_lid_to_ipv4(uint16_t lid, uint8_t ip[4])
{
    ip[0] = HM_IB_LID_NET_A;
    ip[1] = HM_IB_LID_NET_B;
    ip[2] = (uint8_t)(lid >> 8);
    ip[3] = (uint8_t)(lid & 0xff);
}

/* The LID an IPv4 address carries, 0 when it carries none. */
static inline uint16_t hm_ib_ipv4_to_lid(const uint8_t ip[4])
{
    unsigned lid = (unsigned)ip[2] << 8 | ip[3];

    if (ip[0] != HM_IB_LID_NET_A || ip[1] != HM_IB_LID_NET_B || lid == 0 || lid > HM_IB_LID_MAX)
        return 0;
    return (uint16_t)lid;
}

/* The RoCE v2 GID (::ffff:a.b.c.d) rxe makes of LID @lid's address. */
static inline void hm_ib_lid_to_gid(uint16_t lid, uint8_t gid[16])
{
    memset(gid, 0, 10);
    gid[10] = 0xff;
    gid[11] = 0xff;
    hm_ib_lid_to_ipv4(lid, gid + 12);
}

/* The LID a GID carries (an IPv4-mapped GID of the LID range), 0 for any other GID. */
static inline uint16_t hm_ib_gid_to_lid(const uint8_t gid[16])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (memcmp(gid, mapped, sizeof(mapped)) != 0)
        return 0;
    return hm_ib_ipv4_to_lid(gid + 12);
}

/* Parses an SM frame's payload (@len bytes, not NUL-terminated): 0, or -1 when it is not one. */
static inline int hm_ib_sm_frame_parse(const char *buf, size_t len, HmIbSmFrame *ret)
{
    char line[HM_IB_FRAME_MAX + 1], state[8];
    unsigned lid, sm_lid, slot;
    unsigned long long node = 0, port = 0;
    HmIbSmFrame f = {0};
    int end = 0;

    if (len > HM_IB_FRAME_MAX)
        len = HM_IB_FRAME_MAX;
    memcpy(line, buf, len);
    line[len] = '\0';
    if (sscanf(line, "HMIBSM1 state=%7s lid=%x sm_lid=%x host=%7s slot=%u%n", state, &lid, &sm_lid,
               f.host, &slot, &end) != 5)
        return -1;
    /* The VF's GUIDs, when the SM has them: both, neither zero. */
    if (strncmp(line + end, " node_guid=", 11) == 0 &&
        (sscanf(line + end, " node_guid=0x%16llx port_guid=0x%16llx", &node, &port) != 2 || !node ||
         !port))
        return -1;
    if (strcmp(state, "INIT") == 0)
        f.state = HM_IB_PORT_INIT;
    else if (strcmp(state, "ACTIVE") == 0)
        f.state = HM_IB_PORT_ACTIVE;
    else
        return -1;
    if (lid == 0 || lid > HM_IB_LID_MAX || sm_lid == 0 || sm_lid > HM_IB_LID_MAX)
        return -1;
    f.lid = (uint16_t)lid;
    f.sm_lid = (uint16_t)sm_lid;
    f.slot = slot;
    f.node_guid = node;
    f.port_guid = port;
    *ret = f;
    return 0;
}

/* GUID @guid in sysfs's form, 0002:c903:00a1:b2c3 (@out: at least 20 bytes). */
static inline void hm_ib_guid_format(uint64_t guid, char *out, size_t len)
{
    snprintf(out, len, "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
             (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
             (unsigned)guid & 0xffff);
}

/* Parses sysfs's form (a trailing newline allowed): 0, or -1. */
static inline int hm_ib_guid_parse(const char *text, uint64_t *ret)
{
    unsigned g[4];
    int end = 0;

    if (sscanf(text, "%4x:%4x:%4x:%4x%n", &g[0], &g[1], &g[2], &g[3], &end) != 4 ||
        (text[end] != '\0' && strcmp(text + end, "\n") != 0))
        return -1;
    *ret = (uint64_t)g[0] << 48 | (uint64_t)g[1] << 32 | (uint64_t)g[2] << 16 | g[3];
    return 0;
}

#endif
