/* Fault injection rules: the spec both fault-injecting adapters read (the engine's libvirt
 * adapter, hotplug's netlink adapter; HOTMIG_FAULT_INJECT), parsed and matched in one place. */
#include "common/common.h"

#include <string.h>

void hm_fault_rule_free(HmFaultRule *rule)
{
    if (!rule)
        return;
    g_free(rule->op);
    g_free(rule->label);
    g_free(rule);
}

HmFaultRule *hm_fault_rule_parse(const char *text, gboolean (*known)(const char *op),
                                 const char *ops_hint, GError **error)
{
    g_autofree char *rule_text = g_strstrip(g_strdup(text));
    g_autofree char *op = g_strdup(rule_text);
    HmFaultRule *rule;
    char *hash;
    char *at;
    guint64 nth = 0;

    g_return_val_if_fail(text != NULL && known != NULL, NULL);

    hash = strchr(op, '#');
    if (hash) {
        *hash++ = '\0';
        if (!g_ascii_string_to_unsigned(hash, 10, 1, G_MAXUINT, &nth, NULL)) {
            g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                        "Fault spec '%s': call count '%s' is not a positive number", rule_text,
                        hash);
            return NULL;
        }
    }
    at = strchr(op, '@');
    if (at)
        *at++ = '\0';
    if (!known(op)) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "Fault spec '%s': unknown operation '%s'%s%s%s", rule_text, op,
                    ops_hint ? " (" : "", ops_hint ? ops_hint : "", ops_hint ? ")" : "");
        return NULL;
    }
    if (at && !g_str_equal(at, "source") && !g_str_equal(at, "destination")) {
        g_set_error(error, HM_COMMON_ERROR, HM_COMMON_ERROR_INVALID,
                    "Fault spec '%s': host must be 'source' or 'destination', not '%s'", rule_text,
                    at);
        return NULL;
    }
    rule = g_new0(HmFaultRule, 1);
    rule->op = g_strdup(op);
    rule->label = g_strdup(at);
    rule->nth = (guint)nth;
    return rule;
}

HmFaultRule *hm_fault_rules_hit(GPtrArray *rules, const char *op, const char *label)
{
    HmFaultRule *hit = NULL;

    for (guint i = 0; i < rules->len; i++) {
        HmFaultRule *rule = g_ptr_array_index(rules, i);

        if (!g_str_equal(rule->op, op))
            continue;
        if (rule->label && g_strcmp0(rule->label, label) != 0)
            continue;
        rule->seen++;
        if (!hit && (rule->nth == 0 || rule->nth == rule->seen))
            hit = rule;
    }
    return hit;
}
