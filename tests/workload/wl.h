/* hm-pingpong: the pure parts (no I/O), unit-tested in tests/unit/workload-test.c.
 *
 * - message: the data message sent over the RC QP (header + payload derived from the seq),
 * - control: the line-based text protocol on the TCP control connection,
 * - args: the command line, including the comma-separated single-argument form.
 *
 * libc only. Functions that can fail return 0 or a negative errno value and, when @err is
 * non-NULL, write a one-line reason into it.
 */
#ifndef HM_WORKLOAD_WL_H
#define HM_WORKLOAD_WL_H

#include <stddef.h>
#include <stdint.h>

/* ---- errors ----------------------------------------------------------------------------- */

/* Writes the one-line reason of a failure into @err (@errlen bytes, cut to fit); nothing when
 * @err is NULL or @errlen 0. */
void wl_err_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- data messages ---------------------------------------------------------------------- */

#define WL_MSG_MAGIC 0x4c574d48u /* "HMWL" little endian */
#define WL_MSG_HEADER_SIZE 24u   /* magic u32, length u32, seq u64, checksum u64 */
#define WL_MSG_SIZE_MIN 64u
#define WL_MSG_SIZE_MAX (1u << 20)

typedef enum {
    WL_MSG_OK = 0,
    WL_MSG_BAD_MAGIC,
    WL_MSG_BAD_LENGTH,
    WL_MSG_BAD_SEQ,
    WL_MSG_BAD_CHECKSUM,
    WL_MSG_BAD_PAYLOAD,
    WL_MSG_LAST,
} WlMsgStatus;

/* FNV-1a 64 over @len bytes. */
uint64_t wl_fnv1a64(const void *data, size_t len);

/* Writes a message of @size bytes (WL_MSG_SIZE_MIN..WL_MSG_SIZE_MAX) for @seq into @buf. */
void wl_msg_encode(uint8_t *buf, size_t size, uint64_t seq);

/* Reads the seq field of @buf (@len >= WL_MSG_HEADER_SIZE) without checking anything else. */
uint64_t wl_msg_peek_seq(const uint8_t *buf, size_t len);

/* Checks a received message of @len bytes against the expected @size: magic, length,
 * checksum and the payload pattern of its own seq; if @want_seq is non-NULL, also the seq.
 * The seq found is stored in @ret_seq (if non-NULL) whenever the header could be read. */
WlMsgStatus wl_msg_verify(const uint8_t *buf, size_t len, size_t size, const uint64_t *want_seq,
                          uint64_t *ret_seq);

const char *wl_msg_status_to_string(WlMsgStatus status);

/* ---- control protocol -------------------------------------------------------------------- */

#define WL_CTL_LINE_MAX 256 /* including the newline */
#define WL_CTL_PROTO "hm-pingpong"
#define WL_CTL_VERSION 1
#define WL_DEV_NAME_MAX 64 /* including the NUL */

typedef enum {
    WL_CTL_HELLO = 0, /* HELLO hm-pingpong <version> <role> */
    WL_CTL_QP,        /* QP <dev> <lid> <qpn> <psn> <gid hex32> <mtu bytes> */
    WL_CTL_RTS,       /* RTS: my QP is connected to the QP you sent last */
    WL_CTL_PAUSE,     /* PAUSE <cycle> <kind>: I am going down, destroy your QP */
    WL_CTL_PAUSED,    /* PAUSED <cycle>: done, my QP is gone */
    WL_CTL_DONE,      /* DONE: client finished, send your result */
    WL_CTL_RESULT,    /* RESULT <received> <duplicates> <corrupt> <cycles> <verbs_errors> */
    WL_CTL_LAST,
} WlCtlType;

typedef enum {
    WL_ROLE_SERVER = 0,
    WL_ROLE_CLIENT,
    WL_ROLE_LAST,
} WlRole;

/* Why a side goes down: a quiesce from the agent, a device that vanished (fatal async
 * event), or a reset after verbs errors. The first two are migration cycles. */
typedef enum {
    WL_PAUSE_QUIESCE = 0,
    WL_PAUSE_FATAL,
    WL_PAUSE_RESET,
    WL_PAUSE_LAST,
} WlPauseKind;

typedef struct {
    char dev[WL_DEV_NAME_MAX];
    uint32_t lid;
    uint32_t qpn;
    uint32_t psn;
    uint8_t gid[16];
    uint32_t mtu; /* bytes: 256, 512, 1024, 2048 or 4096 */
} WlQpInfo;

typedef struct {
    uint64_t received;
    uint64_t duplicates;
    uint64_t corrupt;
    uint64_t cycles;
    uint64_t verbs_errors;
} WlResultCounts;

typedef struct {
    WlCtlType type;
    union {
        struct {
            unsigned version;
            WlRole role;
        } hello;
        WlQpInfo qp;
        struct {
            uint64_t cycle;
            WlPauseKind kind;
        } pause;
        WlResultCounts result;
    } u;
} WlCtlMsg;

/* Parses one line (without its newline). Rejects unknown commands, missing or extra fields,
 * out-of-range numbers, bad characters and over-long input. */
int wl_ctl_parse(const char *line, WlCtlMsg *ret_msg, char *err, size_t errlen);

/* Formats @msg as one line ending in '\n' into @buf (at least WL_CTL_LINE_MAX bytes).
 * Returns the length, or -EINVAL for an invalid message. */
int wl_ctl_format(const WlCtlMsg *msg, char *buf, size_t buflen);

/* Buffers bytes from a stream and splits them into lines. */
typedef struct {
    char buf[4 * WL_CTL_LINE_MAX];
    size_t len;
} WlLineBuf;

/* Appends @len bytes. -ENOBUFS if they do not fit (the peer sent an over-long line). */
int wl_linebuf_push(WlLineBuf *lb, const char *data, size_t len);

/* Takes the next complete line into @line (NUL-terminated, newline removed). Returns 1 if a
 * line was taken, 0 if none is complete, -EMSGSIZE for a line longer than WL_CTL_LINE_MAX,
 * -EBADMSG for a line holding a NUL byte. */
int wl_linebuf_next(WlLineBuf *lb, char *line, size_t linelen);

const char *wl_role_to_string(WlRole role);
int wl_role_from_string(const char *s); /* -1 if unknown */
const char *wl_pause_kind_to_string(WlPauseKind kind);
int wl_pause_kind_from_string(const char *s);

/* Validates an RDMA device name: 1..63 characters of [A-Za-z0-9_.-]. */
int wl_dev_name_valid(const char *name);

/* ---- arguments ----------------------------------------------------------------------------- */

typedef enum {
    WL_MODE_LAZY = 0,
    WL_MODE_THREADED,
    WL_MODE_LAST,
} WlMode;

/* What carries the traffic while the RDMA device is away (quiesced or lost). */
typedef enum {
    WL_FALLBACK_NONE = 0, /* nothing: traffic stops until the device is back */
    WL_FALLBACK_TCP,      /* a TCP connection to port + 1 over the control (migratable) NIC */
    WL_FALLBACK_LAST,
} WlFallback;

typedef struct {
    WlRole role;
    char peer[64];          /* IPv4 address; required for the client */
    unsigned port;          /* default 7471 */
    WlMode mode;            /* default lazy */
    unsigned size;          /* default 4096 */
    unsigned cycles;        /* 0 = until max_seconds */
    unsigned tail;          /* seconds, default 3 */
    unsigned max_seconds;   /* default 600 */
    unsigned quiesce_delay; /* ms a quiesce is held up before it starts (tests), default 0 */
    WlFallback fallback;    /* default none */
    int no_agent;
    int help;
} WlArgs;

/* Parses argv (argv[0] is the program name). A single argument holding commas and no white
 * space is split at the commas first (the kernel command line form). Options: --role,
 * --peer, --port, --mode, --fallback, --size, --cycles, --tail, --max-seconds,
 * --quiesce-delay, --no-agent, --help;
 * "--opt value" and "--opt=value" both work. */
int wl_args_parse(int argc, char **argv, WlArgs *ret_args, char *err, size_t errlen);

const char *wl_mode_to_string(WlMode mode);
const char *wl_fallback_to_string(WlFallback fallback);

#endif /* HM_WORKLOAD_WL_H */
