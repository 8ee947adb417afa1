/* What the lab's guest daemons share (hm-vf-driver, lab/ib-emu/hm-ib-sma): the monotonic clock
 * in milliseconds and the "HMLAB ..." console line (docs/lab.md), printed whole and flushed. */
#ifndef HM_LAB_GUEST_H
#define HM_LAB_GUEST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static inline int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void hm_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static inline void hm_log(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("HMLAB ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    va_end(ap);
}

#endif
