/* libhotmig-verbs, translation layer: loopback connections: a QP whose peer is a QP of this
 * process; whether a peer request comes from a QP's connected peer (pure). */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hv_peer_is_local(const HvQp *qp, const HvQp *peer, const union ibv_gid *own_gid,
                     uint16_t own_lid)
{
    if (!qp || !peer || !qp->m_rtr || !(qp->m_rtr & IBV_QP_DEST_QPN))
        return 0;
    if (qp->init.qp_type != IBV_QPT_RC && qp->init.qp_type != IBV_QPT_UC)
        return 0;
    if (peer->init.qp_type != qp->init.qp_type || peer->pub.qp_num != qp->peer_vqpn ||
        peer->peer_vqpn != qp->pub.qp_num)
        return 0;
    /* virtual QPNs of two guests may be equal: the address must be this QP's own too */
    if (qp->a_rtr.ah_attr.is_global)
        return own_gid && memcmp(qp->a_rtr.ah_attr.grh.dgid.raw, own_gid->raw, 16) == 0;
    return qp->a_rtr.ah_attr.dlid == own_lid;
}

int hv_qp_from(const HvQp *qp, const uint8_t from[16])
{
    /* the peer's port GID recorded at RTR: a GRH's, or the directory's for a LID (IB) */
    return qp->peer_known && memcmp(qp->peer_gid.raw, from, 16) == 0;
}

void hv_local_rtr(const HvQp *qp, uint32_t peer_pqpn, const union ibv_gid *gid, uint16_t lid,
                  struct ibv_qp_attr *a)
{
    *a = qp->a_rtr;
    a->dest_qp_num = peer_pqpn;
    if (a->ah_attr.is_global && gid)
        a->ah_attr.grh.dgid = *gid;
    /* on IB the LID routes the packet, GRH or not: the old one is the old host's port */
    if (lid || !a->ah_attr.is_global)
        a->ah_attr.dlid = lid;
}

int hv_ah_local_fix(struct ibv_ah_attr *attr, const union ibv_gid *peer,
                    const union ibv_gid *own_gid, uint16_t own_lid)
{
    if (!peer || !own_gid || memcmp(peer->raw, own_gid->raw, 16) != 0)
        return 0;
    if (attr->is_global)
        attr->grh.dgid = *own_gid;
    if (own_lid)
        attr->dlid = own_lid;
    return 1;
}
