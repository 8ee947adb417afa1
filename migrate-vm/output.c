/* What the subcommands print the same way: a multi-line message, each line with the program's
 * name (cmd_print_lines(), commands.h). Below every cmd-*.c file: they call it, it calls none. */
#include <stdio.h>

#include "migrate-vm/commands.h"

void cmd_print_lines(const char *prefix, const char *text)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    for (char **l = lines; *l; l++)
        fprintf(stderr, "%s: %s\n", prefix, *l);
}
