/* soap.h: SOAP 1.1 envelopes for the vSphere Web Services API (vim25).
 *
 * No I/O here: requests are built as libxml2 trees and serialized to bytes,
 * responses are parsed from bytes into a tree that callers walk with the
 * small helpers below, and faults are decoded into a fixed-size struct.
 *
 * Building: soap_req_new() makes the envelope with the method element and
 * its _this argument; soap_req_method() is the parent of further arguments,
 * added with the soap_add_* helpers. The helpers return the new element, or
 * NULL when their parent is NULL or on failure; a failure is remembered by
 * the request and reported by soap_req_serialize(), so a builder may add a
 * run of arguments and check once at the end.
 *
 * Parsing: soap_parse() reads UTF-8 only (as vCenter sends), refuses DTDs
 * (so no entity can be declared or expanded and nothing external is
 * loaded), never touches the network, never prints anything, and
 * keeps at most SOAP_MAX_NODES element, attribute, namespace and text
 * nodes, and SOAP_MAX_TAG_ATTRS attributes and namespaces in a tag. A node costs at most about 200
 * bytes, so a parsed response takes at most about 50 MB plus twice its text, whatever its shape;
 * ordinary vim25 responses take about 10 times their size. An UpdateSet of 100 VMs, each with 100
 * extraConfig entries, is about 60,000 nodes: the watcher should cap WaitForUpdatesEx with
 * maxObjectUpdates (e.g. 100).
 */
#ifndef VMG_SOAP_H
#define VMG_SOAP_H

#include <stdbool.h>
#include <stddef.h>

#include <libxml/tree.h>

#define SOAP_NS_ENV "http://schemas.xmlsoap.org/soap/envelope/"
#define SOAP_NS_XSD "http://www.w3.org/2001/XMLSchema"
#define SOAP_NS_XSI "http://www.w3.org/2001/XMLSchema-instance"
#define SOAP_NS_VIM "urn:vim25"

/* The most element + attribute + namespace + text nodes a parsed response
 * may have. */
#define SOAP_MAX_NODES 250000

/* The most attributes and namespace declarations one tag of a response may
 * have (vim25's have a few): libxml2 2.9 spends time in the square of
 * their number, minutes for a few hundred thousand, before any callback
 * could count them. */
#define SOAP_MAX_TAG_ATTRS 64

/* A fault from vCenter, or the MethodFault of a task's TaskInfo.error.
 * type is the fault's vim25 type name ("InvalidLogin", "NotAuthenticated",
 * "DuplicateName", "InsufficientResourcesFault", ...), message its
 * human-readable text; both are NUL-terminated, truncated to fit. */
struct soap_fault {
    char type[64];
    char message[512];
};

/* ---- Requests ---- */

typedef struct soap_req soap_req;

/* soap_req_new makes an envelope calling method on the managed object
 * (this_type, this_value). Returns NULL when out of memory or when an
 * argument is NULL or not valid text. */
soap_req *soap_req_new(const char *method, const char *this_type, const char *this_value);

/* soap_req_free frees req; NULL is accepted. */
void soap_req_free(soap_req *req);

/* soap_req_method returns the method element, the parent of the arguments;
 * owned by req. NULL when req is NULL. */
xmlNode *soap_req_method(soap_req *req);

/* soap_req_serialize writes the envelope as UTF-8 XML into a new buffer
 * (NUL-terminated; *ret_len excludes the NUL). Free it with
 * soap_buf_free(). Fails with -ENOMEM, or -EINVAL when an earlier soap_add_*
 * call was refused (invalid name or text). */
int soap_req_serialize(soap_req *req, char **ret_buf, size_t *ret_len);

/* soap_buf_free wipes len bytes of buf, then frees it; for request buffers,
 * which may hold a password. NULL is accepted. */
void soap_buf_free(char *buf, size_t len);

/* soap_add_text adds <name>value</name>; value is escaped on serialization.
 * Text must be valid UTF-8 without characters XML forbids. */
xmlNode *soap_add_text(xmlNode *parent, const char *name, const char *value);
xmlNode *soap_add_int(xmlNode *parent, const char *name, long long value);
xmlNode *soap_add_bool(xmlNode *parent, const char *name, bool value);

/* soap_add_moref adds <name type="type">value</name>. */
xmlNode *soap_add_moref(xmlNode *parent, const char *name, const char *type, const char *value);

/* soap_add_typed adds an empty <name xsi:type="xsi_type"/>, the parent of a
 * polymorphic data object's fields (e.g. "VirtualMachineConfigSpec"). */
xmlNode *soap_add_typed(xmlNode *parent, const char *name, const char *xsi_type);

/* soap_add_typed_text adds <name xsi:type="xsi_type">value</name>, for a
 * value of type anyType (e.g. OptionValue.value as "xsd:string"). */
xmlNode *soap_add_typed_text(xmlNode *parent, const char *name, const char *xsi_type,
                             const char *value);

/* soap_add_secret adds <name>secret</name> where the secret never enters
 * the tree: soap_req_serialize() writes it, escaped, straight into the
 * output buffer. secret is borrowed and must stay valid until then. One
 * secret per request. */
xmlNode *soap_add_secret(xmlNode *parent, const char *name, const char *secret);

/* soap_add_typed_secret is soap_add_secret for a value of type anyType:
 * <name xsi:type="xsi_type">secret</name>. */
xmlNode *soap_add_typed_secret(xmlNode *parent, const char *name, const char *xsi_type,
                               const char *secret);

/* soap_action formats the SOAPAction header value, "urn:vim25/<version>",
 * for the apiVersion the server reports. Returns the length written, or
 * -EINVAL (bad version) or -ENOSPC (buf too small). */
int soap_action(char *buf, size_t size, const char *api_version);

/* ---- Responses ---- */

typedef struct soap_resp soap_resp;

/* soap_parse parses a response of len bytes. Returns 0 and *ret, VMG_ETOOBIG
 * when len > max or the document has more than SOAP_MAX_NODES nodes,
 * VMG_EPARSE for malformed XML, a DTD or anything that is not a SOAP
 * envelope with a body, VMG_EFAULT for a SOAP fault (then *fault, when
 * fault is not NULL, says which), -ENOMEM or -EINVAL. */
int soap_parse(const char *buf, size_t len, size_t max, soap_resp **ret, struct soap_fault *fault);

/* soap_resp_free frees resp and the tree; NULL is accepted. */
void soap_resp_free(soap_resp *resp);

/* soap_resp_body returns the body's element, e.g. <LoginResponse>. */
xmlNode *soap_resp_body(const soap_resp *resp);

/* soap_resp_returnval returns the first <returnval> of the body's element,
 * or NULL when there is none (a void method, or WaitForUpdatesEx that timed
 * out). Further ones follow with soap_next(node, "returnval"). */
xmlNode *soap_resp_returnval(const soap_resp *resp);

/* ---- Walking a tree ---- */

/* soap_child returns node's first child element whose local name is
 * localname (any element when localname is NULL), or NULL. */
xmlNode *soap_child(const xmlNode *node, const char *localname);

/* soap_next returns the next sibling element of node whose local name is
 * localname (any element when NULL), or NULL. */
xmlNode *soap_next(const xmlNode *node, const char *localname);

/* soap_text copies node's text (its text children, not descendants') into
 * buf, NUL-terminated, and returns its length. VMG_ETOOBIG when it does not
 * fit (buf then holds ""), -EINVAL for a NULL node or buffer. */
int soap_text(const xmlNode *node, char *buf, size_t size);

/* soap_text_ref returns node's text without copying, valid as long as the
 * tree: "" for an empty element, NULL when node is NULL or its content is
 * not a single piece of text (it has child elements, or comments). */
const char *soap_text_ref(const xmlNode *node);

/* soap_xsi_type returns the local part of node's xsi:type ("string" for
 * "xsd:string"), valid as long as the tree, or NULL when it has none. */
const char *soap_xsi_type(const xmlNode *node);

/* soap_int parses node's text as a decimal integer. 0 or VMG_EPARSE. */
int soap_int(const xmlNode *node, long long *out);

/* soap_bool parses node's text as xsd:boolean. 0 or VMG_EPARSE. */
int soap_bool(const xmlNode *node, bool *out);

/* soap_is parses nothing: true when node is an element named localname. */
bool soap_is(const xmlNode *node, const char *localname);

/* ---- Faults ---- */

/* soap_method_fault decodes a LocalizedMethodFault (e.g. TaskInfo.error):
 * type from its <fault>'s xsi:type, message from <localizedMessage> (the
 * type when that is absent). Returns 0, or VMG_EPARSE when node has no
 * typed <fault>; out is written only on success. */
int soap_method_fault(const xmlNode *node, struct soap_fault *out);

#endif
