/* libhotmig-verbs, objects layer: the IBVERBS_1.0 compat symbols, refused. */
#include "hv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Each name of hv-compat.def gets a refusal as NAME@IBVERBS_1.0 (the pre-1.1 structures);
 * the default NAME@@IBVERBS_1.1 is the object file's that defines NAME, versioned by
 * libhotmig-verbs.map. */
#define HV_COMPAT(name)                                                                            \
    void *hv_compat_##name(void);                                                                  \
    HV_EXPORT void *hv_compat_##name(void)                                                         \
    {                                                                                              \
        hv_unsupported(#name "@IBVERBS_1.0");                                                      \
        return NULL;                                                                               \
    }                                                                                              \
    __asm__(".symver hv_compat_" #name "," #name "@IBVERBS_1.0");
#include "hv-compat.def"
#undef HV_COMPAT
