/* A test's scratch directory tree, removed at its end (test-dir.c). */
#pragma once

/* Removes @path and everything below it; a symbolic link is removed, never followed. Returns
 * g_rmdir()'s result for @path itself (0, or -1 with errno). */
int test_dir_remove(const char *path);
