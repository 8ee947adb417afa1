/* hm-xml internals shared by xml.c and nodedev.c, and reachable from tests. Only hm-xml talks
 * to libxml2; nothing outside xml/ and tests/ includes this header. */
#pragma once

#include <glib.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "xml/xml.h"

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlDoc, xmlFreeDoc)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlParserCtxt, xmlFreeParserCtxt)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlBuffer, xmlBufferFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(xmlNode, xmlFreeNode)

/* Parses @len bytes of @xml hardened: no network, no DTD (a <!DOCTYPE> stops the parser, so
 * no entity can be declared, let alone expanded), no entity substitution, at most @max bytes,
 * libxml2's default depth limit, nothing printed. @what names the input in messages
 * ("domain XML"). Returns a new document (owned) or NULL with XML_ERROR_PARSE. */
xmlDoc *xml_doc_parse(const char *what, const char *xml, gsize len, gsize max, GError **error);

/* The first child element of @node named @name, or NULL. Borrowed. */
xmlNode *xml_node_child(const xmlNode *node, const char *name);

/* The next element sibling of @node named @name, or NULL. Borrowed. */
xmlNode *xml_node_next(const xmlNode *node, const char *name);

/* TRUE if @node is an element named @name. */
gboolean xml_node_is(const xmlNode *node, const char *name);

/* Attribute @name of @node as a new string (owned), or NULL when absent. */
char *xml_node_prop(const xmlNode *node, const char *name);

/* The text content of @node, surrounding whitespace stripped, as a new string (owned). */
char *xml_node_text(const xmlNode *node);

/* Serializes @node as it is (no reformatting) into a new string (owned). */
char *xml_node_dump(xmlNode *node);

/* Parses an unsigned number the way libvirt reads PCI address attributes (strtoul base 0:
 * "0x3b" hex, "073" octal, "59" decimal), without sign, whitespace or trailing characters,
 * and at most @max. Returns FALSE on any of those. */
gboolean xml_uint_parse_auto(const char *str, guint max, guint *ret);

/* Same for a fixed @base (10 or 16; base 16 accepts an optional "0x"). */
gboolean xml_uint_parse_base(const char *str, guint base, guint max, guint *ret);

/* Reads a libvirt PCI <address domain= bus= slot= function=/> element (libvirt's number syntax,
 * domain defaults to 0, type must be 'pci' if given) into "0000:3b:02.1" (owned). @what and
 * @where name the input in messages: "<what> has a bad <where> bus='0x1ff' ...". */
char *xml_pci_address_from_node(const xmlNode *addr, const char *what, const char *where,
                                GError **error);

G_END_DECLS
