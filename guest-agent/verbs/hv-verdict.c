/* libhotmig-verbs, translation layer: both ends of a connection moving at once: what a RECONNECT
 * does at the called end, and which end drives (pure). */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

HvVerdict hv_reconnect_verdict(int reconnected, int have_phys, int swapping, int drives,
                               int awaiting, int calling)
{
    if (reconnected)
        return HV_VERDICT_RECONNECTED; /* the caller's RECONNECT came second */
    if (!have_phys)
        return HV_VERDICT_MOVING; /* our device is not back: we reconnect when it is */
    if (swapping && drives && calling)
        return HV_VERDICT_WAIT; /* our own RECONNECT is out: its answer decides */
    if (swapping && drives && !awaiting)
        return HV_VERDICT_MOVING; /* both back, we drive: our resume sends ours */
    return HV_VERDICT_ACCEPT;
}

int hv_drives(const uint8_t own_gid[16], uint32_t own_vqpn, const uint8_t peer_gid[16],
              uint32_t peer_vqpn)
{
    int c = memcmp(own_gid, peer_gid, 16);

    return c < 0 || (c == 0 && own_vqpn < peer_vqpn);
}
