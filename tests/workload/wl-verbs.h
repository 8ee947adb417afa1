/* hm-pingpong verbs adapter: the only file that talks to libibverbs.
 *
 * One WlVerbs holds everything opened on one RDMA device for one RC connection: the device
 * context, PD, one MR (a send and a receive buffer of the message size), a completion
 * channel, a CQ and the QP. It is created together and destroyed together, because a
 * quiesce must close all of it (rxe blocks the unplug while the device is open).
 *
 * Errors are reported on stderr here (this is a program, not a library) and returned as a
 * negative errno value.
 */
#ifndef HM_WORKLOAD_WL_VERBS_H
#define HM_WORKLOAD_WL_VERBS_H

#include <stddef.h>
#include <stdint.h>

#include "tests/workload/wl.h"

typedef struct WlVerbs WlVerbs;

typedef struct {
    int is_recv;
    int ok;                 /* status == success */
    const char *status_str; /* static string */
    uint32_t byte_len;
} WlCompletion;

/* Finds a device with an ACTIVE port: @want (NULL or "" = the first one found). Writes its
 * name into @ret_name. -ENODEV when there is none (yet); other negative errno values when
 * the device list cannot be read at all. Quiet: callers retry. */
int wl_verbs_find_active(const char *want, char *ret_name, size_t len);

/* Opens @want (NULL or "" = the first device found with an ACTIVE port), picks its first
 * ACTIVE port and the GID to use (RoCE v2 IPv4-mapped on Ethernet ports), creates PD, MR,
 * channel, CQ and an RC QP in INIT with one receive posted; the device is opened once.
 * Returns 0 and a new WlVerbs (owned; free with wl_verbs_close()). Quietly, for callers that
 * retry: -ENODEV when there is no such device with an ACTIVE port (yet), -EADDRNOTAVAIL when
 * its Ethernet port has no RoCE v2 IPv4-mapped GID (yet). */
int wl_verbs_open(const char *want, size_t msg_size, WlVerbs **ret);

/* Destroys everything and closes the device. NULL-safe. */
void wl_verbs_close(WlVerbs *v);

/* Our side's QP info to send to the peer. */
void wl_verbs_get_info(const WlVerbs *v, WlQpInfo *ret_info);

/* The GID in use, formatted as an IPv6 address. Borrowed. */
const char *wl_verbs_gid_string(const WlVerbs *v);
const char *wl_verbs_device_name(const WlVerbs *v);

/* INIT -> RTR -> RTS towards @peer. */
int wl_verbs_connect(WlVerbs *v, const WlQpInfo *peer);

/* The registered buffers, each of the message size. Borrowed. */
uint8_t *wl_verbs_send_buf(WlVerbs *v);
const uint8_t *wl_verbs_recv_buf(const WlVerbs *v);

int wl_verbs_post_recv(WlVerbs *v);
int wl_verbs_post_send(WlVerbs *v, size_t len);

/* Non-blocking fds to poll: the completion channel and the device's async event fd. */
int wl_verbs_cq_fd(const WlVerbs *v);
int wl_verbs_async_fd(const WlVerbs *v);

/* Consumes completion channel events, re-arms the CQ and takes up to @max completions.
 * Returns how many were stored, or a negative errno value. */
int wl_verbs_poll(WlVerbs *v, WlCompletion *wc, int max);

/* Reads pending async events, logs them, sets *ret_fatal when the device is gone
 * (IBV_EVENT_DEVICE_FATAL) or the port went down. Returns 0 or a negative errno value. */
int wl_verbs_read_async(WlVerbs *v, int *ret_fatal);

#endif /* HM_WORKLOAD_WL_VERBS_H */
