/* Replays a fuzz corpus through LLVMFuzzerTestOneInput as a normal test, one cmocka
 * test per file so a failure names its input. Shared by every fuzz target: link it with the
 * target's LLVMFuzzerTestOneInput. Usage: NAME-fuzz-replay CORPUS_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <glib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_BYTES (16 * 1024 * 1024)

static void replay_file(void **state)
{
    const char *path = *state;
    g_autoptr(GError) error = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;

    if (!g_file_get_contents(path, &data, &len, &error))
        fail_msg("%s", error->message);
    if (len > REPLAY_MAX_BYTES)
        fail_msg("'%s' is larger than %d bytes", path, REPLAY_MAX_BYTES);
    assert_int_equal(LLVMFuzzerTestOneInput((const uint8_t *)data, len), 0);
}

/* g_ptr_array_sort() passes pointers to the elements. */
static gint replay_compare(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(const char *const *)a, *(const char *const *)b);
}

int main(int argc, char **argv)
{
    g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = NULL;
    g_autofree struct CMUnitTest *tests = NULL;
    const char *entry;

    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    dir = g_dir_open(argv[1], 0, &error);
    if (!dir) {
        fprintf(stderr, "%s: %s\n", argv[0], error->message);
        return 1;
    }
    while ((entry = g_dir_read_name(dir)))
        g_ptr_array_add(paths, g_build_filename(argv[1], entry, NULL));
    if (paths->len == 0) {
        fprintf(stderr, "%s: the corpus '%s' is empty\n", argv[0], argv[1]);
        return 1;
    }
    g_ptr_array_sort(paths, replay_compare); /* stable order */
    tests = g_new0(struct CMUnitTest, paths->len);
    for (guint i = 0; i < paths->len; i++) {
        tests[i].name = g_ptr_array_index(paths, i);
        tests[i].test_func = replay_file;
        tests[i].initial_state = g_ptr_array_index(paths, i);
    }
    return _cmocka_run_group_tests("fuzz-replay", tests, paths->len, NULL, NULL);
}
