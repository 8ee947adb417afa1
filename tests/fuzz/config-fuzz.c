/* Fuzz target for the configuration parser (common/config.c): any bytes must be read or
 * rejected with an error that names the input, never crash, leak or trip a sanitizer.
 * A file that loads is then checked for meaning (hm_config_check, files skipped).
 *
 * libFuzzer: see tests/fuzz/config.cmake (clang, -DHM_FUZZ=ON). Without libFuzzer the corpus in
 * tests/fuzz/corpus/config/ is replayed by config-fuzz-replay as a normal CTest (label fuzz). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(HmConfig) config = NULL;
    g_autoptr(GError) error = NULL;

    config = hm_config_load_data((const char *)data, size, "fuzz.conf", &error);
    g_assert((config == NULL) == (error != NULL));
    if (error) {
        g_auto(GStrv) lines = g_strsplit(error->message, "\n", -1);

        /* Every problem reported names the input. */
        for (char **l = lines; *l; l++)
            g_assert(g_str_has_prefix(*l, "fuzz.conf:"));
        return 0;
    }
    /* The meaning checks, without touching files the input names. */
    if (!hm_config_check(config, HM_CONFIG_CHECK_SKIP_FILES, &error)) {
        g_auto(GStrv) lines = g_strsplit(error->message, "\n", -1);

        for (char **l = lines; *l; l++)
            g_assert(g_str_has_prefix(*l, "fuzz.conf:"));
    }
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        if (hm_config_key_type(k) == HM_CONFIG_TYPE_STRING ||
            hm_config_key_type(k) == HM_CONFIG_TYPE_ENUM)
            g_assert(hm_config_get_string(config, k) != NULL);
    }
    g_free(hm_config_format_effective(config));
    return 0;
}
