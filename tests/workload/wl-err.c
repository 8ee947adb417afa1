/* hm-pingpong: the one-line reasons of the pure parts' failures; see wl.h. */
#include "tests/workload/wl.h"

#include <stdarg.h>
#include <stdio.h>

void wl_err_set(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
