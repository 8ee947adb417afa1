/* hm-policies internals: the indexed best-fit packer shared by the policies. */
#pragma once

#include "policies/policies-priv.h"

G_BEGIN_DECLS

/* Hosts opened as bins, kept in a sorted sequence by their free room in one "dominant"
 * dimension (the tightest one), so that a best fit is a binary search plus a short forward
 * scan for the other dimensions: O(log hosts) per placement in the usual case. */
typedef struct {
    const PolProblem *p;
    guint dom;
    gint64 *res;           /* n_hosts * dims: free room of each open bin */
    guint8 *open;          /* n_hosts */
    GSequence *seq;        /* open bins by (res[dom], index) */
    GSequenceIter **iter;  /* n_hosts */
    gint *assign;          /* n_units: the bin, or -1 */
    guint8 *locked;        /* n_units: placed and never moved by ejection */
    gint *head;            /* n_hosts: first unit in the bin, or -1 */
    gint *next, *prev;     /* n_units: the bin's list */
    gint64 probe;
} PolPacker;

PolPacker *pol_packer_new(const PolProblem *p, guint dom);
void pol_packer_free(PolPacker *pk);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(PolPacker, pol_packer_free)

/* Opens host @h as an empty bin (its full capacity). */
void pol_packer_open(PolPacker *pk, guint h);
gboolean pol_packer_fits(const PolPacker *pk, guint u, guint h);
/* Puts unit @u into open bin @h (the caller checked that it fits, or accepts that it does not). */
void pol_packer_put(PolPacker *pk, guint u, guint h, gboolean locked);
void pol_packer_take(PolPacker *pk, guint u);
/* The open bin, other than @skip (-1: none), with the least room in the dominant dimension
 * that still fits @u in every dimension; -1 when none does. */
gint pol_packer_find(PolPacker *pk, guint u, gint skip);
/* Makes room for @u by moving one unlocked unit of some bin to another bin, then puts @u
 * there. Returns FALSE (changing nothing) when no single move does it. */
gboolean pol_packer_eject(PolPacker *pk, guint u);
/* Why no host of @p other than @skip (-1: none) takes unit @u, each host with its reason: its
 * state, or the dimensions where the room left in @pk (open bins) or its whole capacity (the
 * others) is short, as "B: CPU 0.62 needed, 0.41 free". Owned. */
char *pol_packer_why_no_room(const PolPacker *pk, guint u, gint skip);

/* Sort keys for "decreasing" orders. */
typedef enum {
    POL_KEY_WEIGHTED, /* sum over dimensions of size / capacity x tightness of the dimension */
    POL_KEY_DOMINANT, /* size in the tightest dimension */
    POL_KEY_MAX,      /* largest size / capacity over the dimensions */
    POL_KEY_LAST,
} PolKey;

/* Sorts @units[0..n) by decreasing key, ties by index. @weight and @ref have dims entries. */
void pol_units_sort(const PolProblem *p, guint *units, guint n, PolKey key, guint dom,
                    const double *weight, const gint64 *ref);

G_END_DECLS
