/* Unit tests for hm_log_setup()'s writer (common/common.c): --verbose prints hotmig's own
 * debug messages but not a library's (GLib-GIO's GSocketClient lines); G_MESSAGES_DEBUG, the
 * explicit debug switch, still reaches them. Each case logs in a child whose stderr is a pipe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"

/* What a child with @verbose and G_MESSAGES_DEBUG=@messages_debug (NULL: unset) prints. */
static char *logged(gboolean verbose, const char *messages_debug)
{
    int fds[2];
    pid_t pid;
    GString *out = g_string_new(NULL);
    char buf[512];
    ssize_t n;
    int status;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        if (messages_debug)
            g_setenv("G_MESSAGES_DEBUG", messages_debug, TRUE);
        else
            g_unsetenv("G_MESSAGES_DEBUG");
        hm_log_setup("log-test", verbose);
        g_log_structured_standard(NULL, G_LOG_LEVEL_DEBUG, __FILE__, G_STRINGIFY(__LINE__),
                                  G_STRFUNC, "own debug line");
        g_log_structured_standard("hm-hotplug", G_LOG_LEVEL_DEBUG, __FILE__,
                                  G_STRINGIFY(__LINE__), G_STRFUNC, "hm-hotplug debug line");
        g_log_structured_standard("GLib-GIO", G_LOG_LEVEL_DEBUG, __FILE__, G_STRINGIFY(__LINE__),
                                  G_STRFUNC, "GSocketClient: Starting new address enumeration");
        g_log_structured_standard(NULL, G_LOG_LEVEL_MESSAGE, __FILE__, G_STRINGIFY(__LINE__),
                                  G_STRFUNC, "plain message");
        _exit(0);
    }
    close(fds[1]);
    while ((n = read(fds[0], buf, sizeof(buf))) > 0)
        g_string_append_len(out, buf, n);
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return g_string_free(out, FALSE);
}

static void test_quiet(void **state)
{
    g_autofree char *out = logged(FALSE, NULL);

    (void)state;
    assert_string_equal(out, "log-test: plain message\n");
}

static void test_verbose_own_only(void **state)
{
    g_autofree char *out = logged(TRUE, NULL);

    (void)state;
    assert_non_null(strstr(out, "log-test: debug: own debug line\n"));
    assert_non_null(strstr(out, "log-test: debug: hm-hotplug debug line\n"));
    assert_null(strstr(out, "GSocketClient"));
    assert_non_null(strstr(out, "log-test: plain message\n"));
}

static void test_messages_debug_names_library(void **state)
{
    g_autofree char *gio = logged(TRUE, "GLib-GIO");
    g_autofree char *all = logged(FALSE, "all");

    (void)state;
    assert_non_null(strstr(gio, "GSocketClient: Starting new address enumeration"));
    assert_non_null(strstr(all, "GSocketClient: Starting new address enumeration"));
    assert_non_null(strstr(all, "own debug line"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet),
        cmocka_unit_test(test_verbose_own_only),
        cmocka_unit_test(test_messages_debug_names_library),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
