/* A cmocka check of a GError (test-error.c): assert_error(err, domain, code) fails the test
 * unless @err is set with that domain and code, naming the code expected and the error got. */
#pragma once

#include <glib.h>

#define assert_error(err, domain, code) test_error_assert((err), (domain), (code), #code)

/* Fails the test unless @error matches @domain and @code (@name: the code's name, shown). */
void test_error_assert(const GError *error, GQuark domain, int code, const char *name);
