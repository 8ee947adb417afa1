/* hm-memck: a lab guest program that finds guest writes a live migration lost.
 *
 * It keeps PAGES pages (anonymous memory) and, every PERIOD_MS, writes generation g into the
 * first word of each page after checking that the page still holds g-1. On one host nothing
 * can break that; after a migration, a page the destination received older than the source
 * last wrote it shows as a mismatch, printed on stdout as one line per pass:
 *
 *   HMLAB memck started pages=64 period=10ms
 *   HMLAB memck LOST 50 of 64 pages (first page 0 holds 3312, want 3322) pass=3323 total=50
 *   HMLAB memck alive pass=3400 lost=50        (every 2 s: the program still runs)
 *
 * tests/e2e/migrate-memory.sh runs it (docs/reliability.md, "Guest kernel crashes on the lab":
 * QEMU 7.2's TCG loses such writes unless the lab's emulator sizes the RAM around it).
 *
 * Usage: hm-memck [PAGES [PERIOD_MS]]   (defaults 64 and 10; 1-65536 pages, 0-10000 ms)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define MEMCK_PAGE 4096
#define MEMCK_WORDS (MEMCK_PAGE / sizeof(uint64_t))

static int parse(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long pages = 64, period = 10;
    volatile uint64_t *buf;
    uint64_t g = 1, total = 0;
    struct timespec last, now;

    if (argc > 3 || (argc > 1 && parse(argv[1], 1, 65536, &pages) < 0) ||
        (argc > 2 && parse(argv[2], 0, 10000, &period) < 0)) {
        fprintf(stderr, "usage: hm-memck [PAGES (1-65536) [PERIOD_MS (0-10000)]]\n");
        return 2;
    }
    buf = mmap(NULL, (size_t)pages * MEMCK_PAGE, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (buf == MAP_FAILED) {
        perror("hm-memck: mmap");
        return 1;
    }
    printf("HMLAB memck started pages=%ld period=%ldms\n", pages, period);
    fflush(stdout);
    clock_gettime(CLOCK_MONOTONIC, &last);
    for (;;) {
        const struct timespec ts = {period / 1000, (period % 1000) * 1000000L};
        long bad = 0, first = 0;
        uint64_t first_have = 0;

        for (long i = 0; i < pages; i++) {
            volatile uint64_t *p = buf + (size_t)i * MEMCK_WORDS;
            uint64_t have = *p;

            if (have != g - 1 && bad++ == 0) {
                first = i;
                first_have = have;
            }
            *p = g;
        }
        if (bad) {
            total += (uint64_t)bad;
            printf("HMLAB memck LOST %ld of %ld pages (first page %ld holds %" PRIu64
                   ", want %" PRIu64 ") pass=%" PRIu64 " total=%" PRIu64 "\n",
                   bad, pages, first, first_have, g - 1, g, total);
            fflush(stdout);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - last.tv_sec >= 2) {
            printf("HMLAB memck alive pass=%" PRIu64 " lost=%" PRIu64 "\n", g, total);
            fflush(stdout);
            last = now;
        }
        g++;
        if (period)
            nanosleep(&ts, NULL);
    }
}
