/* libhotmig-verbs, base layer: logging (stderr, HOTMIG_VERBS_DEBUG) and the calls the layer
 * refuses (hv_unsupported, reported through hv_refused_hook). */
#include "hv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hv_debug_on = -1;

static void hv_vlog(const char *fmt, va_list ap)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "hotmig-verbs[%ld]: ", (long)getpid());

    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    n = (int)strlen(line);
    /* A line may hold what a peer or its agent sent (a reply quoted in a refusal): nothing but
     * printable ASCII reaches the terminal or the log (no escapes, no bidirectional overrides) */
    for (int i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || (unsigned char)line[i] >= 0x7f)
            line[i] = '?';
    line[n++] = '\n';
    /* One write, so lines of several threads do not interleave. */
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

void hv_log(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    hv_vlog(fmt, ap);
    va_end(ap);
}

void hv_debug(const char *fmt, ...)
{
    va_list ap;

    if (hv_debug_on < 0) {
        const char *e = getenv("HOTMIG_VERBS_DEBUG");

        hv_debug_on = e && *e && strcmp(e, "0") != 0;
    }
    if (!hv_debug_on)
        return;
    va_start(ap, fmt);
    hv_vlog(fmt, ap);
    va_end(ap);
}

void (*hv_refused_hook)(const char *call); /* jobs: see hv.h */

/* 1 the first time @what is seen (kept by pointer: a string literal); at most 64 are told apart. */
static int hv_first_time(const char *what)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static const char *seen[64];
    static size_t n_seen;
    int first = 1;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_seen; i++)
        if (strcmp(seen[i], what) == 0)
            first = 0;
    if (first && n_seen < 64)
        seen[n_seen++] = what;
    pthread_mutex_unlock(&lock);
    return first;
}

int hv_unsupported(const char *call)
{
    int first = hv_first_time(call);

    if (first)
        hv_log("%s is not supported by the hotmig verbs layer (EOPNOTSUPP)", call);
    if (first && hv_refused_hook)
        hv_refused_hook(call);
    errno = EOPNOTSUPP;
    return EOPNOTSUPP;
}

void hv_not_migratable(const char *what)
{
    int e = errno;

    if (hv_first_time(what)) {
        hv_log("%s: a limit of the hotmig verbs layer, this process's connections will not all "
               "survive a migration (reported to the agent)",
               what);
        if (hv_refused_hook)
            hv_refused_hook(what);
    }
    errno = e;
}
