/* Checks shared by the alert fuzz targets: the events a parser read must be valid for the
 * alert book, and the book's answers must agree with its state. Define NOW first. */
#pragma once

#include <math.h>
#include <string.h>

#include "hotmigd/alert-parse.h"

static void fuzz_alert_check_events(const GPtrArray *events, const char *source)
{
    g_autoptr(PolAlertBook) book = pol_alert_book_new(0.5);

    for (guint i = 0; i < events->len; i++) {
        const PolAlertEvent *ev = g_ptr_array_index(events, i);
        g_autoptr(PolAlertAction) action = NULL;
        g_autoptr(GError) error = NULL;

        g_assert(ev->host && *ev->host && ev->key && *ev->key);
        g_assert(g_str_equal(ev->source, source));
        g_assert((int)ev->severity >= 0 && ev->severity < POL_SEVERITY_LAST);
        g_assert(isfinite(ev->confidence) && ev->confidence >= 0.0 && ev->confidence <= 1.0);
        g_assert(ev->deadline >= 0 && ev->received == NOW);
        if (!pol_alert_book_apply(book, ev, NOW, &action, &error)) {
            /* Only the per-host limit may refuse what the parser read. */
            g_assert(strstr(error->message, "active alerts already"));
            continue;
        }
        g_assert(action->reason && g_str_equal(action->host, ev->host));
        g_assert(action->state == pol_alert_book_get_state(book, ev->host));
        if (action->kind == POL_ALERT_ACTION_EVACUATE)
            g_assert(action->state == POL_HOST_EVACUATING);
        if (action->kind == POL_ALERT_ACTION_LIFT)
            g_assert(action->state == POL_HOST_OK);
    }
    /* End every evacuation: each host is then ok or quarantined. */
    for (guint i = 0; i < events->len; i++) {
        const PolAlertEvent *ev = g_ptr_array_index(events, i);
        g_autoptr(PolAlertAction) action = NULL;

        if (pol_alert_book_get_state(book, ev->host) == POL_HOST_EVACUATING) {
            g_assert(pol_alert_book_evacuation_done(book, ev->host, i % 2, NOW, &action, NULL));
            g_assert(pol_alert_book_get_state(book, ev->host) != POL_HOST_EVACUATING);
        }
    }
    g_ptr_array_unref(pol_alert_book_list(book, NULL));
}
