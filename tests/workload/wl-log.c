/* hm-pingpong's messages on stderr; see wl-log.h. */
#include "tests/workload/wl-log.h"

#include <stdarg.h>
#include <stdio.h>

void wl_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hm-pingpong: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
