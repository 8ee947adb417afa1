/* Fuzz target for the Alertmanager webhook parser (hotmigd/alert-parse.c): whatever a
 * client POSTs must be rejected with an error or read without crashing, leaking or tripping
 * a sanitizer, and every event read must be one the alert book accepts as it is.
 *
 * libFuzzer: see tests/fuzz/alert-webhook.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the
 * corpus in tests/fuzz/corpus/alert-webhook/ is replayed by alert-webhook-fuzz-replay. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hotmigd/alert-parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 1700000000

#include "alert-fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const OrchAlertOptions custom = {"host", "severity", "confidence", "deadline"};
    g_autoptr(GPtrArray) events = NULL;
    g_autoptr(GPtrArray) again = NULL;
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) error2 = NULL;

    if (size > ORCH_ALERT_WEBHOOK_MAX_BYTES + 1)
        return 0;
    events = orch_alert_webhook_parse((const char *)data, size, NULL, NOW, &error);
    g_assert((events == NULL) == (error != NULL));
    if (error)
        g_assert(g_str_has_prefix(error->message, "webhook: "));
    if (events)
        fuzz_alert_check_events(events, "alertmanager");
    /* The configured names, no fallbacks. */
    again = orch_alert_webhook_parse((const char *)data, size, &custom, NOW, &error2);
    g_assert((again == NULL) == (error2 != NULL));
    if (again)
        fuzz_alert_check_events(again, "alertmanager");
    return 0;
}
