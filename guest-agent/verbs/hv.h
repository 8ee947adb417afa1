/* libhotmig-verbs: internal declarations (docs/verbs-layer.md, "The layer's files").
 *
 * Every verbs object the program holds is a shadow owned by the layer; the physical object of
 * the current RDMA device hangs off it and is replaced across a device swap (a migration).
 * The layer depends on libibverbs, libhotmig and libc/pthreads only: it is preloaded into MPI
 * processes.
 *
 * The files are laid out in layers, bottom to top; a file calls only files of its own layer or
 * of a lower one, and no two files call each other (tests/unit/calls-check.sh reads the
 * objects' symbol tables). Where a lower layer must reach up, it calls a hook the upper one
 * sets (hv_open_hook, hv_refused_hook). This header is sectioned by file in the same order:
 *
 *   base         hv-log.c hv-map.c hv-base.c
 *   peer link    hv-peer.c (and hv-proto.c, the peer protocol's parser, shared with the agent)
 *   translation  hv-local.c hv-udtab.c hv-verdict.c hv-xlate.c
 *   data path    hv-post.c hv-pause.c hv-poll.c hv-event.c hv-ops.c
 *   objects      hv-qpx.c hv-qp.c hv-device.c hv-mr.c hv-cq.c hv-srq.c hv-ah.c hv-standby.c
 *                hv-compat.c
 *                hv-exports.c
 *   swap         hv-swap.c hv-handle.c
 *   agent link   hv-agent.c */
#ifndef HV_H
#define HV_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "hv-proto.h"

#define HV_EXPORT __attribute__((visibility("default")))
/* NAME (defined in this file) is the IBVERBS_1.1 default; hv-compat.c gives NAME@IBVERBS_1.0
 * (hv-compat.def). In the defining file: the assembler versions only its own symbols. */
#define HV_DEFAULT_VERSION(name) __asm__(".symver " #name "," #name "@@IBVERBS_1.1, remove")
#define HV_FENCE_WRID 0x686d76666e636521ULL /* "hmvfnce!": the layer's drain fence */
#define HV_DRAIN_MS 15000 /* a QP's drain (quiesce, SUSPEND), a wait for our own RECONNECT */

/* ==== base ================================================================================ */

/* ---- hv-log.c: logging and refused calls ------------------------------------------------- */
void hv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hv_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int hv_unsupported(const char *call); /* logs once per call name, returns EOPNOTSUPP */
/* A limit reached (@what, at most 64 bytes: "UD sends to over 65536 (GID, QPN) targets"):
 * logged once, and handed to hv_refused_hook like a refused call, so that the agent's
 * inventory names the process as not migratable. */
void hv_not_migratable(const char *what);
/* hv_unsupported() hands each refused call's name to hv_refused_hook (set by hv-peer.c, NULL
 * in the unit tests), which reports "REFUSED <call>" to the agent (docs/protocol.md,
 * "inventory"). */
extern void (*hv_refused_hook)(const char *call);

/* ---- hv-map.c: uint32 -> uint64 open-addressing map; key 0 is stored aside. Not thread-safe. */
typedef struct {
    uint32_t *keys;
    uint64_t *vals;
    uint8_t *used;
    size_t cap, n;
} HvMap;
int hv_map_put(HvMap *m, uint32_t key, uint64_t val);
int hv_map_get(const HvMap *m, uint32_t key, uint64_t *val);
void hv_map_del(HvMap *m, uint32_t key);
void hv_map_clear(HvMap *m);

/* ---- shadow objects --------------------------------------------------------------------- */
typedef struct HvDevice HvDevice;
typedef struct HvContext HvContext;

/* Laid out as rdma-core's struct verbs_device (driver.h): the ibv_device first, then the ops
 * pointer that mlx5dv_is_supported() compares (NULL here: direct verbs are hidden). */
struct HvDevice {
    struct ibv_device dev;
    const void *ops;
    atomic_int refcount;
    void *entry_next, *entry_prev;
    void *sysfs;
    uint64_t core_support;
    /* layer part */
    uint64_t guid; /* big endian, as ibv_get_device_guid() */
    HvDevice *next;
};

/* The layer's data path (post, poll) never allocates, as libibverbs' own does not: a program's
 * signal handler may call malloc (perftest's SIGALRM handler calls fopen), and a handler that
 * interrupts malloc and calls it again deadlocks. The receive FIFO, the queue of sends
 * posted while a QP is paused, the ibv_wr_* builder and the room for translated copies
 * (HvScratch) are sized from the QP's capacities on the control path; only a program that
 * posts past them makes them grow (docs/verbs-layer.md). */

typedef struct HvRecv {
    uint64_t wr_id;
    int num_sge;
    struct ibv_sge *sge; /* a block of HvRecvFifo.sge_per entries in HvRecvFifo.sges */
} HvRecv;

typedef struct {
    HvRecv *v;
    struct ibv_sge *sges;
    size_t head, n, cap;
    int sge_per;
} HvRecvFifo;

/* Room for the translated copy of a chain of work requests (after a swap the layer posts
 * copies with physical keys and numbers): one per QP for its sends, one per QP or SRQ for its
 * receives, used under its lock and sized at its creation from its capacities (the data path
 * does not allocate, above); only a chain longer than the device takes makes it grow. */
typedef struct {
    void *wr; /* struct ibv_send_wr[] or struct ibv_recv_wr[] */
    struct ibv_sge *sge;
    size_t wr_cap, sge_cap;
} HvScratch;

typedef struct HvPd {
    struct ibv_pd pub;
    struct ibv_pd *phys;
    struct ibv_pd *sb; /* on the standby device, while one of its QPs runs there (hv-standby.c) */
    HvContext *ctx;
    struct HvPd *next;
} HvPd;

typedef struct HvMr {
    struct ibv_mr pub;
    struct ibv_mr *phys;
    struct ibv_mr *sb; /* registered on the standby device too (double registration) */
    HvPd *pd;
    uint64_t iova;
    int access;
    int kind; /* 0 ibv_reg_mr, 1 iova */
    struct HvMr *next;
} HvMr;

typedef struct HvChan HvChan;

typedef struct HvCq {
    struct ibv_cq pub;
    struct ibv_cq *phys;
    struct ibv_cq *sb; /* the standby device's: polled after phys while it exists */
    HvContext *ctx;
    HvChan *chan;
    int cqe, comp_vector;
    pthread_mutex_t lock;
    struct ibv_wc *buf; /* completions the layer polled (drain) before the program did */
    size_t head, n, cap;
    int armed, armed_solicited;
    struct HvCq *next;
} HvCq;

struct HvChan {
    struct ibv_comp_channel pub; /* fd: a layer-owned eventfd (EFD_SEMAPHORE) */
    struct ibv_comp_channel *phys;
    struct ibv_comp_channel *sb; /* the standby device's (the event thread watches both) */
    HvContext *ctx;
    pthread_mutex_t lock;
    HvCq **events; /* FIFO of CQs that fired */
    size_t head, n, cap;
    struct HvChan *next;
};

typedef struct HvSrq {
    struct ibv_srq pub;
    struct ibv_srq *phys;
    HvPd *pd;
    struct ibv_srq_init_attr init;
    pthread_mutex_t lock;
    HvRecvFifo recvs; /* posted, not yet completed */
    HvScratch xr;     /* translated receives */
    /* the standby device's twin while a QP of it runs there for a moving peer (hv-standby.c):
     * its receives are in sb_recvs; the program's new ones go to the side that holds fewer, and
     * a side left with none of the SRQ's QPs hands its receives to the other (hv_srq_gather).
     * phys is NULL while every QP of it is on the standby device. */
    struct ibv_srq *sb;
    HvRecvFifo sb_recvs;
    struct HvSrq *next;
} HvSrq;

typedef struct HvAh {
    struct ibv_ah pub;
    struct ibv_ah *phys;
    HvPd *pd;
    struct ibv_ah_attr attr;
    struct ibv_ah *stale; /* replaced when its peer moved (UDMAP); a post may still read it */
    union ibv_gid peer;   /* whom it addresses (hv_av_peer): the UD tables' key */
    int peer_known;
    struct HvAh *next;
} HvAh;

/* A send posted while its QP was paused, with the program's virtual values; its SGEs (and
 * inline data, copied) live in the queue's blocks. */
typedef struct HvSendWr {
    struct ibv_send_wr wr;
    struct ibv_sge *sge;
    char *inl;
} HvSendWr;

/* The sends posted while a QP is paused, in order: a ring as deep as the QP's send queue
 * (allocated when the QP is first paused, kept for the next swap). Full means what a full
 * send queue means: ENOMEM. */
typedef struct {
    HvSendWr *v;
    struct ibv_sge *sges;
    char *inl;
    size_t head, n, cap, inl_per;
    int sge_per;
} HvSendQueue;

/* ---- hv-udtab.c's growable sets (declared here: a QP holds one) -------------------------
 * Entries keyed by (GID, QPN), found through an open-addressing index; a set grows by doubling
 * up to its max (memory per entry: 28 bytes and an index of 8) and refuses a new key past it
 * (the caller reports the process as not migratable: docs/verbs-layer.md, "Limits"). */
typedef struct {
    uint8_t gid[16];
    uint32_t qpn;             /* targets: the remote QPN; per-GID counts: 0 */
    uint32_t n;               /* counts: UD sends posted to the GID (modulo 2^32) */
    uint8_t port, sgid_index; /* targets: the AH's port and source GID index */
} HvUdEntry;
typedef struct {
    HvUdEntry *v;
    uint32_t *slot; /* 0 free, else an index + 1 into v; twice as many as v's capacity */
    size_t n, cap, nslot;
    size_t max; /* the most entries; 0: HV_UD_SENT_MAX */
    int full;   /* a new key found it at max */
} HvUdSet;
#define HV_UD_SENT_MAX 4096 /* per UD QP: destination GIDs counted (a peer guest's port each) */
#define HV_UD_HOLD_MS 60000 /* a peer's UDHOLD lapses after this without its UDMAP */
/* One work request built through the ibv_wr_* API (ibv_qp_ex), posted by wr_complete. */
#define HV_WX_SGE_MAX 16
typedef struct HvWxWr {
    struct ibv_send_wr wr;
    struct ibv_sge sge[HV_WX_SGE_MAX];
    char *inl; /* its block of the QP's wx_inl: inline data copied at wr_set_inline_data* */
} HvWxWr;

typedef struct HvQp {
    union {
        struct ibv_qp pub;
        struct ibv_qp_ex pubx; /* created by ibv_create_qp_ex with send_ops_flags (ex = 1) */
    };
    int ex;
    /* between wr_start and wr_complete/wr_abort: wx_n of wx_cap (the QP's send queue depth,
     * made at ibv_create_qp_ex: building a batch does not allocate, hv.h) */
    HvWxWr *wx;
    char *wx_inl;
    size_t wx_n, wx_cap, wx_inl_per;
    int wx_err;
    struct ibv_qp *phys;
    HvPd *pd;
    HvCq *scq, *rcq;
    HvSrq *srq;
    struct ibv_qp_init_attr init;
    /* the program's transitions, replayed on a new device */
    struct ibv_qp_attr a_init, a_rtr, a_rts;
    int m_init, m_rtr, m_rts;
    enum ibv_qp_state state;
    pthread_mutex_t lock;
    int paused;         /* posts are queued (quiesce, or the peer's swap) */
    int64_t paused_at;  /* CLOCK_MONOTONIC ms when the peer's swap paused it */
    int64_t suspend_until; /* a peer's SUSPEND: its RECONNECT due by then, else the QP fails */
    atomic_int refs;       /* peer requests using it (hv_qp_hold): ibv_destroy_qp waits for 0 */
    HvSendQueue queued; /* sends posted while paused */
    HvRecvFifo recvs;   /* posted, not yet completed (non-SRQ) */
    HvScratch xs, xr;   /* translated sends, receives (non-SRQ) */
    uint64_t sig_out;   /* signaled sends posted, not completed */
    int unsig_tail;     /* the last send posted was unsignaled */
    int fence_out;
    uint64_t sent_msgs; /* posted sends that consume a peer receive */
    uint64_t recv_done; /* receive completions polled */
    /* the connected peer (RC/UC) */
    uint32_t peer_vqpn, peer_pqpn;
    union ibv_gid peer_gid;  /* the peer's port GID (hv_av_peer at RTR): who it is after moves */
    int peer_known;          /* peer_gid is known (a GRH, or the directory had its LID) */
    HvMap peer_rkeys;     /* the peer's virtual rkey -> its physical rkey */
    HvMap peer_rkeys_vf;  /* while switched: the peer's rkeys on its own device, for after */
    uint32_t routed_vqpn; /* the registration file written for this QP (0: none) */
    /* UD: sends held while a peer moves (its UDHOLD until its UDMAP or this deadline, ms) */
    int64_t ud_held_until;
    uint8_t ud_held_gid[16];
    HvUdSet ud_sent; /* per destination GID (qpn 0): UD sends posted, a moving peer's drain */
    /* both ends moving (docs/verbs-layer.md): */
    int reconnected;     /* reconnected to the peer's new QP since the last SUSPEND/quiesce */
    int await_peer;      /* the peer reconnects it (it answered DEFER moving): stays paused */
    int calling;         /* our RECONNECT to the peer is out (hv_reconnect) */
    int64_t await_until; /* ms: then the QP goes to the error state (a clear failure) */
    /* the standby path (docs/design.md "Standby path"): on_sb, its physical QP is on the
     * context's standby device (this end switched for a moving peer); the traffic it carried */
    int on_sb;
    union ibv_gid own_gid; /* the mover's: its port GID on the VF, its identity while away */
    int own_known;
    int switched;        /* the mover's side: connected over the standby devices (SWITCH) */
    int sb_loop;         /* a loopback QP that followed its SRQ there (hv-sbloop.c) */
    uint64_t sb_sends, sb_recvs;
    struct HvQp *next;
} HvQp;

struct HvContext {
    struct verbs_context vctx; /* the program sees &vctx.context */
    struct ibv_context *phys;
    HvDevice *dev;
    pthread_mutex_t lock;
    int swapped; /* translation on: a device swap happened */
    HvMap lkey;  /* virtual lkey -> physical */
    HvMap qpn;   /* physical QPN -> HvQp* */
    HvMap vqpn;  /* virtual QPN -> HvQp* */
    HvPd *pds;
    HvMr *mrs;
    HvCq *cqs;
    HvChan *chans;
    HvSrq *srqs;
    HvAh *ahs;
    HvQp *qps;
    /* the standby device (hv-standby.c): opened while a QP of this context runs there */
    struct ibv_context *sb;
    int sb_lease;     /* the agent's lease on it (hotmig_standby_acquire), -1 none */
    int ahead;        /* sb holds twins made ahead of this process's device change (hv-swap.c) */
    HvMap sb_lkey;    /* virtual lkey -> the standby registration's */
    HvMap sb_qpn;     /* the standby device's physical QPN -> HvQp* */
    HvMap retired, sb_retired; /* physical QPNs a QP left when it changed devices (of each
                                * device): their completions go */
    int cmd_efd;                 /* ibv_context.cmd_fd the program sees */
    struct ibv_async_event *aev; /* async events FIFO, context->async_fd is an eventfd */
    size_t aev_head, aev_n, aev_cap;
    HvContext *next;
};

/* ---- hv-base.c: the layer's state, the real functions, the clock ------------------------- */
typedef struct {
    pthread_mutex_t lock; /* contexts list, device list, swaps */
    HvContext *ctxs;
    HvDevice *devs;
    int swapping;    /* between quiesce and resume */
    int evt_wake[2]; /* pipe waking the event thread */
    pthread_t evt_thread;
    int evt_started;
} HvLayer;
extern HvLayer hv;

/* The real libibverbs, resolved with dlvsym(hv_real_lib, ...): RTLD_NEXT, or the layer's own
 * handle on libibverbs.so.1 when none is in the global scope (hv_init, after which it is set). */
extern void *hv_real_lib;
typedef struct {
#define HV_REAL(ret, name, ver, args) ret(*r_##name) args;
#include "hv-real.def"
#undef HV_REAL
} HvReal;
extern HvReal hv_real;
void hv_init(void);
struct ibv_device **hv_phys_list(const char *name, struct ibv_device **found);
struct ibv_context *hv_open_phys(const char *name); /* the real device @name, opened */
int64_t hv_now_ms(void); /* CLOCK_MONOTONIC */
/* Waits while a swap is under way (control calls need a physical object): 0, or ENODEV when
 * @ctx has none after it. */
int hv_wait_phys(HvContext *ctx);
void hv_swap_ended(void); /* wakes hv_wait_phys() */
/* Progress a swap waits for (a completion accounted on a paused QP, a UD receive counted while
 * swapping, the answer to our own RECONNECT): hv_progress_signal() wakes every
 * hv_progress_wait(@seen, @until) whose @seen (hv_progress_gen(), read before the waiter
 * checked its condition) is out of date. @until is CLOCK_MONOTONIC ms (hv_now_ms()); returns
 * ETIMEDOUT when it passed without a signal, else 0. A leaf lock: callable under any other. */
uint64_t hv_progress_gen(void);
void hv_progress_signal(void);
int hv_progress_wait(uint64_t seen, int64_t until);
/* The QP whose virtual QPN is @vqpn in any context (and its context); NULL when none. */
HvQp *hv_find_vqpn(uint32_t vqpn, HvContext **ctx);
/* The same, referenced: ibv_destroy_qp does not free it (it waits) until hv_qp_release(). A
 * peer's request holds the QP it is about for as long as it runs (up to a drain). */
HvQp *hv_qp_hold(uint32_t vqpn, HvContext **ctx);
void hv_qp_release(HvQp *qp); /* NULL-safe */
/* ibv_destroy_qp's side: waits (no lock held) until no request holds @qp. */
void hv_qp_wait_unheld(HvQp *qp);

/* ==== peer link ============================================================================ */

/* ---- hv-dir.c: the agents' directory (RUN_DIR/directory, docs/protocol.md "Directory") ---- */
#define HV_DIR_FILE "directory"
#define HV_DIR_LINE_MAX 128
#define HV_DIR_BYTES_MAX (8 << 20)
typedef struct {
    uint8_t gid[16];
    uint16_t lid; /* 0: none (RoCE) */
    struct sockaddr_storage addr; /* the agent's peer port */
    socklen_t alen;
} HvDirEntry;
/* One line "<gid hex> <lid> <address> <port>" into @e: 0 or -EINVAL. */
int hv_dir_parse_line(const char *line, HvDirEntry *e);
/* The newest entry for @gid, or for the port holding @lid now: 1 found, 0 not, -errno when
 * the file cannot be read (the file is read again only after the agent replaced it). */
int hv_dir_lookup_gid(const char *path, const uint8_t gid[16], HvDirEntry *out);
int hv_dir_lookup_lid(const char *path, uint16_t lid, HvDirEntry *out);

/* ---- hv-peer.c ------------------------------------------------------------------------------
 * A peer is known by its port GID (on IB subnet prefix + port GUID: it survives a move);
 * HOTMIG_VERBS_PEERS names peers explicitly and wins, the directory knows the others. */
int hv_peer_known(const union ibv_gid *gid);
/* The GID of the port that holds @lid now (the directory): 1 found, 0 not. */
int hv_peer_gid_of_lid(uint16_t lid, union ibv_gid *gid);
size_t hv_peer_count(void);
void hv_peers_parse(void); /* HOTMIG_VERBS_PEERS, once at the registration */
/* Asks the layer owning @vqpn at @gid; @req a full line; @reply gets a line. */
int hv_peer_call(const union ibv_gid *gid, uint32_t vqpn, const char *req, char *reply,
                 size_t reply_max);
int hv_write_all(int fd, const char *s, size_t n);
/* Reads one line (without its newline) of at most @max - 1 bytes before @deadline. */
int hv_read_line(int fd, char *buf, size_t max, int64_t deadline);
/* The route records: RUN_DIR made once (NULL when it cannot be), records written once the
 * agent link's server listens (hv_routes_enable). */
const char *hv_routes_dir(void);
void hv_routes_enable(void);
int hv_qp_route_add(HvQp *qp);
int hv_route_taken(uint32_t vqpn);
void hv_qp_route_del(HvQp *qp);
/* Reports to the agent (the job inventory): refused calls, kept until the registration hands
 * the client over (hv_report_attach), and "PEER <gid>/<qpn>" at a connected QP's RTR. */
struct HotmigClient;
void hv_report_attach(struct HotmigClient *c);
void hv_report_peer(const uint8_t gid[16], uint32_t qpn);
/* What the standby path did in the move under way (hv-swap.c fills it at the quiesce and the
 * resume, hv-agent.c hands it over): at the quiesce whether a standby device was had, how many
 * connected QPs switched to it and how many stay paused, the pause of the switch; at the resume
 * what the standby path carried and the pause of the switch back. */
typedef struct {
    int used;
    uint32_t switched, paused;
    uint64_t sends, recvs;
    int64_t switch_ms, back_ms;
} HvSbReport;
/* "STATS ..." to the agent (hotmig_client_report_standby()), before the answer to a quiesce
 * (@back 0: the switch) or a resume (@back 1: the switch back and what it carried); the figures
 * clamped to libhotmig's bounds. Nothing when not registered. */
void hv_report_standby(const HvSbReport *r, int back);
/* The agent's lease on the standby device (hv-standby.c): its fd, its name in @name; -errno */
#define HV_STANDBY_LEASE_MS 10000
int hv_standby_lease(char *name, size_t size);
/* The authenticated channel (hv-auth.h; docs/security.md, "The verbs peer protocol"): the job's
 * key from HOTMIG_VERBS_KEY_FILE or HOTMIG_VERBS_KEY (hv_key_load, at the registration; none:
 * logged, peers refused, nothing asked); hv_key_set() for the tests (0 or -EINVAL). */
void hv_key_load(void);
int hv_key_set(const void *key, size_t len);
/* The tag of @vqpn's route under this process's key (hv_auth_route_tag()), and its route record
 * "<pid> <tag hex>\n" into @buf: its length or -ENOSPC. */
void hv_route_tag(uint32_t vqpn, uint8_t tag[HV_ROUTE_TAG_LEN]);
int hv_route_record(char *buf, size_t size, uint32_t vqpn);
/* The caller's side on a routed connection @fd: the challenge, @req sealed, the reply opened
 * into @reply (the message alone). 0, or -errno (logged: -ENOKEY, -EACCES refused). */
int hv_channel_call(int fd, uint32_t vqpn, const char *req, char *reply, size_t reply_max,
                    int64_t deadline);
/* The called side: the challenge (or, without a key, an ERROR: -ENOKEY); each request read and
 * opened into @m with its sender's GID @from (a refused one is answered with an ERROR, logged,
 * and returns -errno: the connection ends); each reply sealed. */
struct HvAuthSession;
int hv_channel_accept(int fd, struct HvAuthSession *s);
int hv_channel_read(int fd, struct HvAuthSession *s, char *line, size_t max, HvMsg *m,
                    uint8_t from[16], int64_t deadline);
int hv_channel_reply(int fd, const struct HvAuthSession *s, const uint8_t from[16],
                     const HvMsg *rep);

/* ==== translation ========================================================================= */

/* ---- hv-local.c: loopback connections (pure) ----------------------------------------------
 * @qp's peer is @peer, a QP of this process, when they name each other and @qp's destination
 * is its own address (@own_gid, or @own_lid without GRH): UCX connects RC QPs to themselves
 * and to each other. */
int hv_peer_is_local(const HvQp *qp, const HvQp *peer, const union ibv_gid *own_gid,
                     uint16_t own_lid);
/* @qp's recorded RTR attributes aimed at its local peer's new QPN and address: its GID when
 * the QP has a GRH, its LID (when known) whether or not. */
void hv_local_rtr(const HvQp *qp, uint32_t peer_pqpn, const union ibv_gid *gid, uint16_t lid,
                  struct ibv_qp_attr *a);
/* @from (a peer request's sender GID, from its authenticated frame) is the peer @qp is
 * connected to: the destination GID its RTR recorded. */
int hv_qp_from(const HvQp *qp, const uint8_t from[16]);
/* An address handle's @attr to @peer aimed at this port's address now (@own_gid, @own_lid)
 * when @peer is this port (UCX's UD endpoint to its own interface): 1 when it is. */
int hv_ah_local_fix(struct ibv_ah_attr *attr, const union ibv_gid *peer,
                    const union ibv_gid *own_gid, uint16_t own_lid);

/* ---- hv-udtab.c: UD peers that moved (pure; the layer's instance is hv-xlate.c's) ----------
 * A peer's UDMAP gives, for its GID, its UD QPs' virtual -> new physical QPNs: the program's
 * wr.ud.remote_qpn to that GID is translated on every post, wc.src_qp back on receives. The
 * targets are the (GID, remote QPN) pairs this process posted UD sends to: after its own move
 * it sends them its UDMAP. */
/* Sized for a 1,000-guest job (docs/verbs-layer.md, "Limits"): peers that moved (learned from
 * their UDMAP, so peer-controlled: bounded, the oldest evicted), (GID, QPN) targets this process
 * sent to (its own posts: a set up to HV_UD_TARGETS_MAX). */
#define HV_UD_PEERS_MAX 4096
#define HV_UD_TARGETS_MAX 65536
typedef struct {
    uint8_t gid[16];
    HvMap v2p, p2v;
} HvUdPeer;
typedef HvUdEntry HvUdTarget; /* gid, qpn, port, sgid_index */
typedef struct {
    HvUdPeer peers[HV_UD_PEERS_MAX];
    size_t npeers;
    HvUdSet peer_ix; /* (GID, 0) -> n: the index of its peers[] entry */
    HvUdSet targets; /* max HV_UD_TARGETS_MAX */
    size_t evict;    /* the next peer replaced when the table is full (the oldest learned) */
    size_t evicted;  /* peers replaced so far (their translation lost: reported) */
} HvUdTable;
/* The set's entry for (@gid, @qpn), NULL when none. */
HvUdEntry *hv_ud_set_find(const HvUdSet *s, const uint8_t gid[16], uint32_t qpn);
/* The same, added (zeroed but for its key) when new (*@added 1): NULL when the set holds its max
 * (s->full set) or memory ran out. Grows on the call that finds it full. */
HvUdEntry *hv_ud_set_add(HvUdSet *s, const uint8_t gid[16], uint32_t qpn, int *added);
/* Room for @n entries now (capped at the max): 0 or -ENOMEM. */
int hv_ud_set_reserve(HvUdSet *s, size_t n);
void hv_ud_set_clear(HvUdSet *s); /* empty; keeps its memory and its max */
void hv_ud_set_free(HvUdSet *s);
/* Replaces @gid's translation by the @n pairs (v = virtual, p = physical); a new GID in a full
 * table replaces the peer learned longest ago (t->evicted counts them). 0 or -ENOMEM. */
int hv_ud_learn(HvUdTable *t, const uint8_t gid[16], const uint32_t *v, const uint32_t *p,
                uint32_t n);
/* @vqpn at @gid -> the physical QPN to post to; returns 1 when translated. */
int hv_ud_out(const HvUdTable *t, const uint8_t gid[16], uint32_t vqpn, uint32_t *pqpn);
/* A received src_qp -> the sender's virtual QPN, when exactly one peer has that physical QPN. */
int hv_ud_in(const HvUdTable *t, uint32_t pqpn, uint32_t *vqpn);
/* Notes a UD send target; returns 1 when new, 0 when known, -ENOSPC when the table holds
 * HV_UD_TARGETS_MAX already (not noted: the caller reports it), -ENOMEM. */
int hv_ud_target_note(HvUdTable *t, const uint8_t gid[16], uint32_t qpn, uint8_t port,
                      uint8_t sgid_index);
void hv_ud_clear(HvUdTable *t); /* empty; keeps the sets' memory */

/* ---- hv-verdict.c: both ends of a connection moving at once (pure) ------------------------
 * What a RECONNECT does at the called end. Exactly one RECONNECT takes effect per connection
 * and event: the end with the lower (GID, virtual QPN) drives when both are back; an end whose
 * device is not back yet, or that already reconnected, defers. */
typedef enum {
    HV_VERDICT_ACCEPT = 0,
    HV_VERDICT_MOVING,      /* answer DEFER moving: the caller awaits our RECONNECT */
    HV_VERDICT_RECONNECTED, /* answer DEFER reconnected: nothing to do */
    HV_VERDICT_WAIT,        /* ask again once our own RECONNECT (@calling) is answered */
} HvVerdict;
HvVerdict hv_reconnect_verdict(int reconnected, int have_phys, int swapping, int drives,
                               int awaiting, int calling);
/* 1 when the end (own_gid, own_vqpn) drives a reconnection with (peer_gid, peer_vqpn). */
int hv_drives(const uint8_t own_gid[16], uint32_t own_vqpn, const uint8_t peer_gid[16],
              uint32_t peer_vqpn);
#define HV_AWAIT_PEER_MS 120000 /* an awaiting QP whose peer never reconnects: error after */

/* ---- hv-xlate.c: what the data path reads after a swap ------------------------------------ */
/* a UD post's remote QPN translated (and its target noted); a UD receive's src_qp back (also
 * counted per physical src_qp) */
uint32_t hv_ud_send_qpn(const HvAh *ah, uint32_t remote_qpn);
uint32_t hv_ud_recv_qpn(uint32_t src_qp);
void hv_ud_count_send(HvQp *qp, const HvAh *ah); /* qp lock held */
/* The UD peers this process sent to (malloc'd, *@n of them), NULL when none or no memory. */
HvUdTarget *hv_ud_targets_copy(size_t *n);
/* How many of @n (sending physical QPN, count) pairs have not all arrived yet; *@ret_got: the
 * receives counted from those QPNs (it grows while datagrams arrive). */
size_t hv_ud_missing(const HvKeyPair *want, size_t n, uint64_t *ret_got);
/* A UD peer at @gid moved: its @n virtual -> physical QPNs (UDMAP). 0 or -ENOMEM. */
int hv_ud_peer_moved(const uint8_t gid[16], const uint32_t *v, const uint32_t *p, uint32_t n);
/* @ah's physical AH, made now when the swap could not (its peer was away); NULL with errno
 * set while it still cannot be. */
struct ibv_ah *hv_ah_phys(HvAh *ah);
/* A new physical AH for @ah (its peer moved); the old one is kept as stale. 0, or -1 with
 * errno. */
int hv_ah_renew(HvAh *ah);
int hv_qp_connected(const HvQp *qp); /* RC/UC at RTR or RTS: GRH or LID-routed */
/* The peer an address vector names, by its port GID: the GRH's DGID; without a GRH (an IB
 * LID-routed connection) this port's own GID when the DLID is its own LID (loopback), else the
 * directory's GID for the port that holds the DLID now. 1 known, 0 not. No lock held. */
int hv_av_peer(HvContext *ctx, const struct ibv_ah_attr *ah, union ibv_gid *gid);
uint16_t hv_port_lid(HvContext *ctx, uint8_t port); /* its LID now; 0 on RoCE or unknown */
/* @ctx's memory regions whose physical rkey differs from the virtual one, into @m's keys. */
void hv_ctx_keys(HvContext *ctx, HvMsg *m);
void hv_keymap_push(HvContext *ctx, uint32_t vkey, uint32_t pkey); /* no lock held */
/* At RTR of a RC/UC QP to a new peer (@peer, hv_av_peer): the physical QPN of the peer's virtual
 * attr->dest_qp_num, its changed rkeys added to @keys; asked of this process's own QPs, or of
 * the peer's layer (LOOKUP) when HOTMIG_VERBS_PEERS names its GID, waiting while it moves (at
 * most HV_LOOKUP_WAIT_MS). The numbers as given when the peer is outside the layer. No lock held.
 */
uint32_t hv_lookup_peer(HvQp *qp, const struct ibv_qp_attr *attr, const union ibv_gid *peer,
                        HvMap *keys, uint16_t *lid); /* @lid: the peer port's LID now, or 0 */
#define HV_LOOKUP_WAIT_MS 60000

/* ==== data path =========================================================================== */

/* ---- hv-post.c: posting on the physical objects ------------------------------------------- */
int hv_fifo_reserve(HvRecvFifo *f, size_t cap, int sge_per);
void hv_fifo_push(HvRecvFifo *f, const struct ibv_recv_wr *wr);
void hv_fifo_consume(HvRecvFifo *f, uint64_t wr_id);
void hv_fifo_free(HvRecvFifo *f);
int hv_scratch_reserve(HvScratch *x, size_t nwr, size_t wr_size, size_t nsge); /* 0 or ENOMEM */
void hv_scratch_free(HvScratch *x);
int hv_recvs_reserve(HvRecvFifo *f, HvScratch *x, uint32_t max_wr, uint32_t max_sge);
int hv_qp_post_send_phys(HvQp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int hv_qp_post_recv_phys(HvQp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int hv_srq_post_recv_phys(HvSrq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int hv_srq_post_recv_sb(HvSrq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad); /* twin */
/* The receives recorded in @from posted on @dst (NULL: none, the next rebuild posts them) with
 * their keys through @lkeys, and recorded in @to; the SRQ's lock held. 0, or the post's errno
 * (those not moved stay in @from). */
int hv_recvs_move(const HvMap *lkeys, HvRecvFifo *from, HvRecvFifo *to, struct ibv_srq *dst);
int hv_sendq_reserve(HvQp *qp);                           /* qp lock held; 0 or ENOMEM */
int hv_sendq_push(HvQp *qp, const struct ibv_send_wr *w); /* qp lock held; 0 or an errno */
void hv_sendq_free(HvSendQueue *q);

/* ---- hv-pause.c: a paused QP (qp lock held unless said) ----------------------------------- */
int hv_qp_modify(HvQp *qp, struct ibv_qp_attr *a, int mask); /* the physical QP; logs */
/* RTR with @rtr (the program's mask), then RTS with the program's attributes and @sq_psn when
 * it went there; qp->state follows. 0 or the failed modify's errno. */
int hv_qp_connect(HvQp *qp, struct ibv_qp_attr *rtr, uint32_t sq_psn);
int hv_qp_fence(HvQp *qp);
void hv_qp_flush_queued(HvQp *qp);
void hv_qp_sendq_ready(HvQp *qp);
void hv_qp_unpause(HvQp *qp);      /* no lock held */
/* 1 when its peer did not reconnect in time (moving too, or it suspended the QP): the QP is
 * put in the error state, logged */
int hv_qp_await_expired(HvQp *qp);
int hv_ud_held(HvQp *qp);          /* 1 while its UD sends are held */

/* ---- hv-poll.c: completions ---------------------------------------------------------------- */
int hv_poll_into(HvCq *cq, int n, struct ibv_wc *wc); /* CQ lock held: physical poll + fixups */
int hv_cq_pull(HvCq *cq);                             /* drain helper: physical -> buffer */
void hv_qp_cqs_pull(HvQp *qp); /* hv_cq_pull() of @qp's send CQ and receive CQ, each once */
void hv_chan_signal(HvChan *ch, HvCq *cq);
void hv_wake_cqs(HvContext *ctx, int all_armed); /* hv.lock held */

/* ---- hv-event.c: the event thread ----------------------------------------------------------- */
void hv_evt_start(void); /* hv.lock held */
void hv_evt_kick(void);
void hv_nonblock(int fd);

/* ---- hv-ops.c: the ops of a shadow context ----------------------------------------------------
 */
HvContext *hv_ctx_of(struct ibv_context *c); /* NULL when @c is not a shadow */
void hv_ops_install(HvContext *ctx);
int hv_op_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);

/* ==== objects ============================================================================= */

#define HV_CTX(obj) hv_ctx_of((obj) ? (obj)->context : NULL)
/* A query on @c: the real call for a physical context, ENODEV when the shadow has none. */
#define HV_PHYS_CTX(c, fallback)                                                                   \
    HvContext *ctx = hv_ctx_of(c);                                                                 \
    if (!ctx)                                                                                      \
        return fallback;                                                                           \
    if (hv_wait_phys(ctx))                                                                         \
        return ENODEV;

/* A context's lists of shadows (singly linked through ->next; hv.lock held). */
#define HV_LINK(head, obj)                                                                         \
    do {                                                                                           \
        (obj)->next = (head);                                                                      \
        (head) = (obj);                                                                            \
    } while (0)
#define HV_UNLINK(head, obj)                                                                       \
    do {                                                                                           \
        __typeof__(obj) *pp_;                                                                      \
        for (pp_ = &(head); *pp_; pp_ = &(*pp_)->next)                                             \
            if (*pp_ == (obj)) {                                                                   \
                *pp_ = (obj)->next;                                                                \
                break;                                                                             \
            }                                                                                      \
    } while (0)
/* What ibv_destroy_X / ibv_dealloc_pd share for a shadow: the physical object goes (when there
 * is one), then the shadow leaves its context's list; @r gets 0 or the real call's error. */
#define HV_DESTROY(ctx, head, obj, realfn, r)                                                      \
    do {                                                                                           \
        hv_wait_phys(ctx);                                                                         \
        pthread_mutex_lock(&hv.lock);                                                              \
        (r) = (obj)->phys ? realfn((obj)->phys) : 0;                                               \
        if (!(r))                                                                                  \
            HV_UNLINK(head, obj);                                                                  \
        pthread_mutex_unlock(&hv.lock);                                                            \
    } while (0)

/* ---- hv-qpx.c: the ibv_wr_* API ----------------------------------------------------------- */
/* the send_ops_flags the layer's ibv_wr_* serve */
#define HV_WX_OPS                                                                                  \
    (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |              \
     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                               \
     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
int hv_qp_ex_init(HvQp *qp); /* its ibv_qp_ex: the layer's wr_* ops; 0 or ENOMEM */
void hv_wx_free(HvQp *qp);

/* ---- hv-qp.c -------------------------------------------------------------------------------- */
int hv_qp_make(HvQp *qp, struct ibv_qp_init_attr *report); /* its physical QP */
uint32_t hv_qpn_pick(HvContext *ctx, uint32_t phys);       /* a virtual QPN for a new QP */
struct ibv_qp *hv_op_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a);

/* ---- hv-device.c ---------------------------------------------------------------------------- */
int hv_ctx_attach(HvContext *ctx, const char *name); /* @ctx's physical context on @name */
/* Called at the first ibv_open_device of a shadow device (set by hv-agent.c: the
 * registration with the agent; NULL in the unit tests). */
extern void (*hv_open_hook)(void);


/* ---- hv-standby.c: the standby device's objects (docs/design.md "Standby path") -----------
 * A QP whose peer moves runs on the standby device (soft-RoCE on the control NIC) until the
 * peer is back: its context opens the device (the agent's lease), its PD, CQs and channels get
 * a twin there, every MR of its PD a second registration; the data path polls both CQs. All
 * of it goes once no QP of the context runs there. hv.lock held for each. */
int hv_sb_open(HvContext *ctx);   /* the device (0, or an errno) */
int hv_sb_prepare(HvQp *qp);      /* its PD, CQs, channels and the PD's MRs there: 0 or errno */
/* @qp's physical QP made again on the standby device (@to_sb) or back on the context's own,
 * in INIT with the program's attributes (port 1 on the standby); the old one destroyed, its
 * completions dropped from then on. qp lock held. 0 or an errno. */
int hv_sb_qp_move(HvQp *qp, int to_sb);
void hv_sb_close_unused(HvContext *ctx); /* everything there goes when no QP runs there */
void hv_sb_close(HvContext *ctx);        /* everything there goes (no QP runs there) */
/* Make before break, for a process that changes devices (the mover: onto the standby device
 * at quiesce, onto the new VF at resume): hv_sb_ahead opens device @name into ctx->sb and
 * makes there, while the program's traffic still runs on ctx->phys, the twins of every PD,
 * MR, channel and CQ (0 or an errno, nothing left there on failure; EBUSY: ctx->sb is in
 * use; ctx->ahead set meanwhile; hv_sb_ahead takes hv.lock itself, where needed: the
 * registrations run without it). Once the QPs, SRQs and AHs are destroyed (the drain),
 * hv_sb_swap makes the twins the context's own objects and the old ones the side hv_sb_close
 * then removes; hv_rebuild makes only what is missing. */
int hv_sb_ahead(HvContext *ctx, const char *name);
void hv_sb_swap(HvContext *ctx);
/* Each SRQ of @ctx whose QPs all run on one device gets its receives there: the other side's
 * are posted again on it (the phys SRQ destroyed, or the twin). */
void hv_srq_gather(HvContext *ctx);
void hv_sb_mr_reg(HvMr *mr);             /* ibv_reg_mr while its PD has a twin */
void hv_sb_mr_dereg(HvMr *mr);
/* The standby device's RoCE v2 GID of an IPv4 address on port 1 (how the control network
 * reaches it) and its index; 0 or ENOENT. */
int hv_sb_gid(struct ibv_context *dev, union ibv_gid *gid, uint8_t *index);
/* The attributes of an RTR over the standby devices: the program's @rtr with the peer's
 * standby @dgid and QPN, from our GID @sgid_index on port 1, the MTU both sides take. */
void hv_sb_rtr_attr(struct ibv_context *dev, const struct ibv_qp_attr *rtr, const uint8_t dgid[16],
                    uint8_t sgid_index, uint32_t dest_qpn, uint32_t rq_psn, struct ibv_qp_attr *out);

/* ---- hv-cq.c, hv-srq.c: the physical CQ, SRQ of a shadow ------------------------------------ */
int hv_cq_make(HvCq *cq);
int hv_srq_make(HvSrq *srq);

/* ==== swap ================================================================================ */

/* ---- hv-swap.c: quiesce and resume (libhotmig's callbacks) -------------------------------- */
/* The standby path's figures of the move under way (HvSbReport), zeroed at each quiesce */
extern HvSbReport hv_sb_report;
int hv_quiesce(void *opaque);
int hv_resume(const char *device, void *opaque);
/* @qp's own address on its current device: the GID at its RTR sgid_index, the port's LID. */
int hv_own_addr(HvQp *qp, union ibv_gid *gid, uint16_t *lid);
/* A random 24-bit PSN for a QP's new connection */
uint32_t hv_psn(void);
/* @qp's map of its local peer's rkeys (@pctx's MRs): the virtual rkey -> the physical one on
 * the own device, or (@sb) on the standby device. qp->lock held. */
void hv_local_rkeys(HvQp *qp, HvContext *pctx, int sb);
/* hv-sbloop.c: a peer's loopback QPs sharing an SRQ with a QP that switches for its moving
 * peer at @from follow it onto the standby device, both ends (hv.lock not held) */
/* a QP of @qp's SRQ that stays and cannot follow (its peer elsewhere, not connected), or NULL */
const HvQp *hv_sb_loop_keeps(HvContext *ctx, const HvQp *qp, const uint8_t from[16]);
/* they follow (paused, drained, moved, reconnected to each other): 0, EOPNOTSUPP with *keeps
 * (one that cannot), or an errno (those moved stay paused, logged) */
int hv_sb_loop_follow(HvContext *ctx, const HvQp *qp, const uint8_t from[16], const HvQp **keeps);
/* once no QP of @ctx for a moving peer is left on the standby device: they come back */
void hv_sb_loop_back(HvContext *ctx);
/* Waits until @qp's sends completed (and, when @want_recv, @want_recv receives did). */
int hv_qp_drain(HvQp *qp, uint64_t want_recv, int64_t deadline);
int hv_repost(HvRecvFifo *f, HvQp *qp, HvSrq *srq); /* recorded receives on the new device */
/* The UD drain of a quiesce: waits until the receives of @want (sending physical QPN, count:
 * the held peers' UDHELD) all arrived, until none of them arrived for @quiet_ms (the rest was
 * lost: held peers post nothing new and UD does not retransmit), or until @until. Returns how
 * many of @want are still missing. The quiet time: HV_UD_QUIET_RTTS times the slowest UDHOLD
 * round trip (a datagram a peer's device sent before it answered flies less long than that
 * answer through two agents), at least HV_UD_QUIET_MIN_MS; the wait at most HV_UD_DRAIN_MS. */
#define HV_UD_DRAIN_MS 3000
#define HV_UD_QUIET_MIN_MS 100
#define HV_UD_QUIET_RTTS 4
size_t hv_ud_drain_wait(const HvKeyPair *want, size_t nwant, int64_t quiet_ms, int64_t until);

/* ---- hv-handle.c: the layer's handler of one peer request. Fills @reply; 0 or -errno. ----
 * @from: the sender's GID, from its authenticated frame: a request about a QP is taken only
 * from the peer that QP is connected to (docs/security.md, "The verbs peer protocol"). */
int hv_peer_handle(const HvMsg *m, const uint8_t from[16], HvMsg *reply);

/* ---- hv-agent.c: the server peers' requests reach (RUN_DIR/<pid>.sock) ----------------------
 * Serves the listening socket @fd from a thread of its own: the agent's FROM, the channel, the
 * requests (hv_peer_handle). At most HV_SERVER_CONNS_MAX connections (a thread each), of one
 * address (FROM) HV_SERVER_PER_PEER_MAX; past either a newcomer closes the oldest one not yet
 * authenticated that has had HV_SERVER_GRACE_MS (docs/security.md, "Resources"). 0 or -errno. */
#define HV_SERVER_CONNS_MAX 32
#define HV_SERVER_PER_PEER_MAX 8
#define HV_SERVER_GRACE_MS 500
int hv_server_listen(int fd);

/* libibverbs exports that verbs.h does not declare (driver.h / the old ABI). */
int ibv_dontfork_range(void *b, size_t s);
int ibv_dofork_range(void *b, size_t s);
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
void ibv_copy_qp_attr_from_kern(void *dst, void *src);
void ibv_copy_ah_attr_from_kern(void *dst, void *src);
void ibv_copy_path_rec_from_kern(void *dst, void *src);
void ibv_copy_path_rec_to_kern(void *dst, void *src);
void ibv_register_driver(const char *name, void *init_func);

#endif /* HV_H */
