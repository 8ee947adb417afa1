/* The view plans are made on (plan-view.c): the cluster's inventory with what the daemon adds
 * (the hosts it holds in a state, the hosts being evacuated, the VMs its schedules under way
 * bring to each host, the VMs' last moves), and the planner's options. For the daemon's files
 * above it (daemon-state-priv.h). */
#pragma once

#include <glib.h>

#include "hotmigd/daemon-types.h"
#include "hotmigd/inventory.h"
#include "policies/policies.h"

G_BEGIN_DECLS

/* The inventory as plans see it. */
typedef struct {
    HotmigdInventoryView view;
    GHashTable *states; /* owned */
    GArray *arriving;   /* HotmigdInvArrival (strings borrowed from the schedules), owned */
} HotmigdPlanView;

/* Makes @v over the daemon's held and evacuating hosts and the VMs' last moves, with
 * @arriving (HotmigdInvArrival, taken: the moves the schedules under way bring to each host,
 * their strings borrowed from the schedules). */
void hotmigd_plan_view_init(Hotmigd *daemon, GArray *arriving, HotmigdPlanView *v);
void hotmigd_plan_view_clear(HotmigdPlanView *v);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(HotmigdPlanView, hotmigd_plan_view_clear)

/* The planner's options from [scheduler]. */
void hotmigd_plan_view_options(Hotmigd *daemon, PolOptions *opts);

/* @vm moved now (the planners' min-stay counts from it). */
void hotmigd_plan_view_note_moved(Hotmigd *daemon, const char *vm);

G_END_DECLS
