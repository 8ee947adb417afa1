/* hm-hotplug's error domain, in a file of its own: a program that uses SR-IOV discovery only
 * (hotmig-sriov) then links neither hotplug.c nor, through it, hm-xml and libxml2. */
#include "hotplug/hotplug.h"

G_DEFINE_QUARK(hm - hotplug - error - quark, hotplug_error)
