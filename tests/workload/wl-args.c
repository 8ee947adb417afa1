/* hm-pingpong command line. */
#include "tests/workload/wl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WL_ARGS_MAX 64
#define WL_ARG_LEN_MAX 1024

static const char *const mode_names[WL_MODE_LAST] = {
    [WL_MODE_LAZY] = "lazy",
    [WL_MODE_THREADED] = "threaded",
};

const char *wl_mode_to_string(WlMode mode)
{
    return (unsigned)mode < WL_MODE_LAST ? mode_names[mode] : "unknown";
}

static const char *const fallback_names[WL_FALLBACK_LAST] = {
    [WL_FALLBACK_NONE] = "none",
    [WL_FALLBACK_TCP] = "tcp",
};

const char *wl_fallback_to_string(WlFallback fallback)
{
    return (unsigned)fallback < WL_FALLBACK_LAST ? fallback_names[fallback] : "unknown";
}

static int parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *ret,
                      char *err, size_t errlen)
{
    char *end = NULL;
    unsigned long v;

    if (*s < '0' || *s > '9') {
        wl_err_set(err, errlen, "option '%s': '%s' is not a number", opt, s);
        return -EINVAL;
    }
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        wl_err_set(err, errlen, "option '%s': '%s' is not a number", opt, s);
        return -EINVAL;
    }
    if (v < min || v > max) {
        wl_err_set(err, errlen, "option '%s': %s is out of range %u..%u", opt, s, min, max);
        return -ERANGE;
    }
    *ret = (unsigned)v;
    return 0;
}

static int has_space(const char *s)
{
    for (; *s; s++) {
        if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') {
            return 1;
        }
    }
    return 0;
}

int wl_args_parse(int argc, char **argv, WlArgs *ret_args, char *err, size_t errlen)
{
    char split[WL_ARG_LEN_MAX];
    char *list[WL_ARGS_MAX];
    int n = 0;
    int have_role = 0;
    WlArgs a = {
        .role = WL_ROLE_CLIENT,
        .port = 7471,
        .mode = WL_MODE_LAZY,
        .size = 4096,
        .cycles = 0,
        .tail = 3,
        .max_seconds = 600,
    };

    if (argc == 2 && strchr(argv[1], ',') && !has_space(argv[1])) {
        if (strlen(argv[1]) >= sizeof(split)) {
            wl_err_set(err, errlen, "argument list longer than %d bytes", WL_ARG_LEN_MAX - 1);
            return -E2BIG;
        }
        snprintf(split, sizeof(split), "%s", argv[1]);
        char *p = split;
        for (;;) {
            char *c = strchr(p, ',');
            if (n == WL_ARGS_MAX) {
                wl_err_set(err, errlen, "more than %d arguments", WL_ARGS_MAX);
                return -E2BIG;
            }
            list[n++] = p;
            if (!c) {
                break;
            }
            *c = '\0';
            p = c + 1;
        }
    } else {
        if (argc - 1 > WL_ARGS_MAX) {
            wl_err_set(err, errlen, "more than %d arguments", WL_ARGS_MAX);
            return -E2BIG;
        }
        for (int i = 1; i < argc; i++) {
            list[n++] = argv[i];
        }
    }

    for (int i = 0; i < n; i++) {
        char opt[64];
        const char *val = NULL;
        const char *arg = list[i];
        const char *eq;

        if (strncmp(arg, "--", 2) != 0) {
            wl_err_set(err, errlen, "unexpected argument '%s'", arg);
            return -EINVAL;
        }
        eq = strchr(arg, '=');
        if (eq) {
            if ((size_t)(eq - arg) >= sizeof(opt)) {
                wl_err_set(err, errlen, "unknown option '%.40s...'", arg);
                return -EINVAL;
            }
            memcpy(opt, arg, (size_t)(eq - arg));
            opt[eq - arg] = '\0';
            val = eq + 1;
        } else {
            if (strlen(arg) >= sizeof(opt)) {
                wl_err_set(err, errlen, "unknown option '%.40s...'", arg);
                return -EINVAL;
            }
            snprintf(opt, sizeof(opt), "%s", arg);
        }

        if (strcmp(opt, "--no-agent") == 0 || strcmp(opt, "--help") == 0) {
            if (val) {
                wl_err_set(err, errlen, "option '%s' takes no value", opt);
                return -EINVAL;
            }
            if (opt[2] == 'n') {
                a.no_agent = 1;
            } else {
                a.help = 1;
            }
            continue;
        }
        if (!val) {
            if (i + 1 >= n) {
                wl_err_set(err, errlen, "option '%s' needs a value", opt);
                return -EINVAL;
            }
            val = list[++i];
        }

        int r = 0;
        if (strcmp(opt, "--role") == 0) {
            int role = wl_role_from_string(val);
            if (role < 0) {
                wl_err_set(err, errlen, "option '--role': '%s' is not 'server' or 'client'", val);
                return -EINVAL;
            }
            a.role = (WlRole)role;
            have_role = 1;
        } else if (strcmp(opt, "--peer") == 0) {
            struct in_addr addr;
            if (strlen(val) >= sizeof(a.peer) || inet_pton(AF_INET, val, &addr) != 1) {
                wl_err_set(err, errlen, "option '--peer': '%s' is not an IPv4 address", val);
                return -EINVAL;
            }
            snprintf(a.peer, sizeof(a.peer), "%s", val);
        } else if (strcmp(opt, "--port") == 0) {
            r = parse_uint(opt, val, 1, 65535, &a.port, err, errlen);
        } else if (strcmp(opt, "--mode") == 0) {
            if (strcmp(val, "lazy") == 0) {
                a.mode = WL_MODE_LAZY;
            } else if (strcmp(val, "threaded") == 0) {
                a.mode = WL_MODE_THREADED;
            } else {
                wl_err_set(err, errlen, "option '--mode': '%s' is not 'lazy' or 'threaded'", val);
                return -EINVAL;
            }
        } else if (strcmp(opt, "--fallback") == 0) {
            if (strcmp(val, "none") == 0) {
                a.fallback = WL_FALLBACK_NONE;
            } else if (strcmp(val, "tcp") == 0) {
                a.fallback = WL_FALLBACK_TCP;
            } else {
                wl_err_set(err, errlen, "option '--fallback': '%s' is not 'none' or 'tcp'", val);
                return -EINVAL;
            }
        } else if (strcmp(opt, "--size") == 0) {
            r = parse_uint(opt, val, WL_MSG_SIZE_MIN, WL_MSG_SIZE_MAX, &a.size, err, errlen);
        } else if (strcmp(opt, "--cycles") == 0) {
            r = parse_uint(opt, val, 0, 100000, &a.cycles, err, errlen);
        } else if (strcmp(opt, "--tail") == 0) {
            r = parse_uint(opt, val, 0, 86400, &a.tail, err, errlen);
        } else if (strcmp(opt, "--max-seconds") == 0) {
            r = parse_uint(opt, val, 1, 7 * 86400, &a.max_seconds, err, errlen);
        } else if (strcmp(opt, "--quiesce-delay") == 0) {
            r = parse_uint(opt, val, 0, 60000, &a.quiesce_delay, err, errlen);
        } else {
            wl_err_set(err, errlen, "unknown option '%s'", opt);
            return -EINVAL;
        }
        if (r < 0) {
            return r;
        }
    }

    if (!a.help) {
        if (!have_role) {
            wl_err_set(err, errlen, "option '--role' is required");
            return -EINVAL;
        }
        if (a.fallback == WL_FALLBACK_TCP && a.port == 65535) {
            wl_err_set(err, errlen, "'--fallback tcp' uses port + 1: '--port' must be below 65535");
            return -EINVAL;
        }
        if (a.role == WL_ROLE_CLIENT && a.peer[0] == '\0') {
            wl_err_set(err, errlen, "the client needs '--peer' (the server's control address)");
            return -EINVAL;
        }
    }
    *ret_args = a;
    return 0;
}
