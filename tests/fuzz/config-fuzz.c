/* Fuzz target for the configuration parser (common/config.c): any bytes must be read or
 * rejected with an error that names the input, never crash, leak or trip a sanitizer.
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
        g_assert(g_str_has_prefix(error->message, "fuzz.conf:"));
        return 0;
    }
    for (int k = 0; k < HM_CONFIG_KEY_LAST; k++) {
        if (hm_config_key_type(k) == HM_CONFIG_TYPE_STRING ||
            hm_config_key_type(k) == HM_CONFIG_TYPE_ENUM)
            g_assert(hm_config_get_string(config, k) != NULL);
    }
    g_free(hm_config_format_effective(config));
    return 0;
}
