/* Fuzz target for our event lines (hotmigd/alert-parse.c), what an exec'd command prints
 * and what the Unix socket takes: the input is split into lines, each read on its own; every
 * line must be rejected with an error or give an event the alert book accepts, and the
 * events of the whole input go through one book.
 *
 * libFuzzer: see tests/fuzz/alert-line.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the
 * corpus in tests/fuzz/corpus/alert-line/ is replayed by alert-line-fuzz-replay. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hotmigd/alert-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 1700000000
#define FUZZ_MAX_BYTES (256 * 1024)

#include "alert-fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GPtrArray) events = g_ptr_array_new_with_free_func((GDestroyNotify)pol_alert_event_free);
    const char *p = (const char *)data, *end = p + size;

    if (size > FUZZ_MAX_BYTES)
        return 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        g_autoptr(GError) error = NULL;
        PolAlertEvent *ev = orch_alert_line_parse(p, len, "socket", NOW, &error);

        g_assert((ev == NULL) == (error != NULL));
        if (ev)
            g_ptr_array_add(events, ev);
        else
            g_assert(g_str_has_prefix(error->message, "event: "));
        p += len;
    }
    fuzz_alert_check_events(events, "socket");
    return 0;
}
