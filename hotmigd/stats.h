/* The daemon's figures for /metrics (HotmigdStats, daemon-types.h), made from the moves of its
 * schedules (stats.c). */
#pragma once

#include "hotmigd/daemon-types.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* A move of a schedule ended in @state (done, failed, else skipped) with @report (migrate-vm's
 * JSON report, NULL: none): its count, and the seconds of each phase the report gives with
 * status ok, failed or undone (anything else in it is passed over). */
void hotmigd_stats_add_move(HotmigdStats *stats, PolMoveState state, const char *report);

G_END_DECLS
