/* A test's scratch directory tree; see test-dir.h. */
#include "test-dir.h"

#include <glib.h>
#include <glib/gstdio.h>

int test_dir_remove(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;

    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *child = g_build_filename(path, name, NULL);

        if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
            test_dir_remove(child);
        else
            g_unlink(child);
    }
    return g_rmdir(path);
}
