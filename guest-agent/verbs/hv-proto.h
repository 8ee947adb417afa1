/* The layer <-> layer peer protocol (docs/protocol.md, "Verbs layer peer protocol"): one
 * text line per message, parsed by one typed parser with size limits. libc only: it is part
 * of the preloaded library and of its fuzz target. */
#ifndef HV_PROTO_H
#define HV_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define HV_PROTO_LINE_MAX 16384 /* bytes, newline excluded */
#define HV_PROTO_KEYS_MAX 512   /* key pairs in one RECONNECT */
#define HV_PROTO_TEXT_MAX 200   /* ERROR / NOROUTE text */
#define HV_PROTO_UDQPS_MAX 64   /* QPN pairs in one UDMAP */

/* The hand-off between a guest's agent and the layers of its processes (docs/protocol.md): a
 * process that serves peers listens on RUN_DIR/<pid>.sock and registers each QP as
 * RUN_DIR/qp-<vqpn> holding its pid; the agent routes "ROUTE <vqpn>" from its peer port to
 * that socket. Written here once, for both sides. */
#define HV_RUN_DIR_DEFAULT "/run/hotmig/verbs" /* HOTMIG_VERBS_RUN_DIR, --verbs-run-dir */
#define HV_ROUTE_FILE_FMT "qp-%u"                /* RUN_DIR/qp-<vqpn>: "<pid> <tag>" */
#define HV_ROUTE_FILE_MAX 64                     /* bytes of a route record */
#define HV_SOCKET_FILE_FMT "%ld.sock"            /* RUN_DIR/<pid>.sock */
#define HV_PEER_PORT_DEFAULT 7475                /* the agent's peer port */
/* A route's tag: HMAC-SHA256(job key, "hotmig-verbs-route 1", vqpn) cut to 16 bytes
 * (hv_auth_route_tag()). A ROUTE names it beside the QP number, the record holds it: the agent
 * routes only a caller that could compute it, and answers any other ROUTE as it answers one for
 * a QP nobody registered (docs/security.md, "The verbs peer protocol"). */
#define HV_ROUTE_TAG_LEN 16

typedef enum {
    HV_MSG_ROUTE = 1,   /* ROUTE <vqpn> <tag>                 client -> agent */
    HV_MSG_ROUTED,      /* ROUTED                             agent -> client */
    HV_MSG_NOROUTE,     /* NOROUTE <text>                     agent -> client */
    HV_MSG_SUSPEND,     /* SUSPEND <target> <sender> <sent>  */
    HV_MSG_SUSPENDED,   /* SUSPENDED <sent> */
    HV_MSG_RECONNECT,   /* RECONNECT <target> <sender> <sender_pqpn> <sender_psn> <target_psn>
                         *           <gid> <lid> <nkeys> [<vkey>:<pkey>]... */
    HV_MSG_RECONNECTED, /* RECONNECTED <target_pqpn> <lid>  (the answering port's LID now) */
    HV_MSG_ERROR,       /* ERROR <text> */
    HV_MSG_UDMAP,       /* UDMAP <target> <gid> <lid> <n> [<vqpn>:<pqpn>]...  (pairs in keys[];
                         * <lid> the mover's LID now, 0 on RoCE) */
    HV_MSG_UDMAPPED,    /* UDMAPPED */
    HV_MSG_UDHOLD,      /* UDHOLD <target> <gid>: hold UD sends to <gid> until its UDMAP */
    HV_MSG_DEFER,       /* DEFER moving|reconnected: a RECONNECT not applied, nothing changed
                         * (both ends moving: the other end reconnects, or already did) */
    HV_MSG_KEYMAP,      /* KEYMAP <target> <sender> <n> [<vkey>:<pkey>]...: more of the
                         * sender's virtual -> physical rkeys (n 1..HV_PROTO_KEYS_MAX) */
    HV_MSG_KEYMAPPED,   /* KEYMAPPED */
    HV_MSG_UDHELD,      /* UDHELD <n> [<pqpn>:<count>]...  sends so far to the holder's GID per
                         * sending physical QP (count modulo 2^32; pairs in keys[], n may be 0) */
    HV_MSG_LOOKUP,      /* LOOKUP <target> <sender> <gid>: sender (at <gid>) connects to target
                         * (RTR): what are target's physical QPN and its process's changed
                         * rkeys? */
    HV_MSG_LOOKEDUP,    /* LOOKEDUP <target_pqpn> <lid> <n> [<vkey>:<pkey>]...  (n may be 0;
                         * the physical QPN in .target, the target port's LID now in .lid) */
    HV_MSG_FROM,        /* FROM <text>: agent -> layer, the first line on RUN_DIR/<pid>.sock:
                         * the remote address the agent took the connection from */
    HV_MSG_SWITCH,      /* SWITCH <target> <sender> <sender_pqpn> <sender_psn> <target_psn>
                         *        <gid> <lid> <nkeys> [<vkey>:<pkey>]...: the mover runs the
                         * connection over its standby device now (<gid> its standby GID, <lid>
                         * 0): the target's end goes to its own standby device */
    HV_MSG_SWITCHED,    /* SWITCHED <target_pqpn> <gid> <lid> <nkeys> [<vkey>:<pkey>]...: the
                         * target's standby QPN, GID and rkeys there */
} HvMsgType;

typedef struct {
    uint32_t v, p;
} HvKeyPair;

typedef enum {
    HV_DEFER_MOVING = 1,  /* "moving": the called end is moving too and reconnects itself */
    HV_DEFER_RECONNECTED, /* "reconnected": already reconnected to the caller's new QP */
} HvDefer;

typedef struct {
    HvMsgType type;
    uint32_t target, sender;    /* virtual QPNs (24 bits) */
    uint32_t sender_pqpn;       /* physical QPN (24 bits) */
    uint32_t sender_psn, target_psn; /* 24 bits */
    uint64_t sent;
    uint8_t gid[16];
    uint16_t lid;
    HvDefer defer;
    char text[HV_PROTO_TEXT_MAX + 1];
    uint8_t tag[HV_ROUTE_TAG_LEN]; /* ROUTE */
    uint32_t nkeys;
    HvKeyPair keys[HV_PROTO_KEYS_MAX]; /* last: not cleared by the parser beyond nkeys */
} HvMsg;

/* Parses one line (no newline; @len bytes, not NUL-terminated needed). 0 or -EINVAL. */
int hv_proto_parse(const char *line, size_t len, HvMsg *msg);
/* Formats @msg with a trailing newline into @buf. Returns the length or -ENOSPC/-EINVAL. */
int hv_proto_format(const HvMsg *msg, char *buf, size_t size);

#endif
