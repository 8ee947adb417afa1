/* A cmocka check of a GError; see test-error.h. */
#include "test-error.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

void test_error_assert(const GError *error, GQuark domain, int code, const char *name)
{
    if (!error)
        fail_msg("expected %s, got no error", name);
    if (!g_error_matches(error, domain, code))
        fail_msg("expected %s, got %s %d: %s", name, g_quark_to_string(error->domain), error->code,
                 error->message);
}
