/* hm-pingpong's messages on stderr ("hm-pingpong: ..."), for the program and its verbs adapter
 * (wl-log.c; the pure parts, wl.h, write none). */
#ifndef HM_WORKLOAD_WL_LOG_H
#define HM_WORKLOAD_WL_LOG_H

/* One line on stderr: "hm-pingpong: " and @fmt's text. */
void wl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
