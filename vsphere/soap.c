/* soap.c: SOAP 1.1 envelopes for vim25: building, parsing, fault decoding. */
#include "vsphere/soap.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>

#include "lib/err.h"

/* The comment that stands in for a secret in the tree; serialization output
 * can hold "<!--" only where a comment node is, so it cannot be forged by
 * any text a caller adds. */
#define SECRET_MARK "<!--vmg-secret-->"
#define SECRET_COMMENT "vmg-secret"

/* The longest text an argument may hold. */
#define MAX_ARG_TEXT (1u << 20)

struct soap_req {
    xmlDoc *doc;
    xmlNode *method;
    xmlNs *xsi;
    int err;            /* the first refused soap_add_* call, sticky */
    const char *secret; /* borrowed, see soap_add_secret */
};

struct soap_resp {
    xmlDoc *doc;
    xmlNode *body; /* the body's element, e.g. <LoginResponse> */
};

/* ---- Text validation ---- */

/* xml_text_ok: s is valid UTF-8 (no overlong forms, no surrogates) made of
 * characters XML 1.0 allows, and at most MAX_ARG_TEXT bytes. */
static bool xml_text_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;

    while (*p) {
        uint32_t c;
        int len;
        if (p[0] < 0x80) {
            c = p[0];
            len = 1;
        } else if ((p[0] & 0xe0) == 0xc0) {
            c = p[0] & 0x1f;
            len = 2;
        } else if ((p[0] & 0xf0) == 0xe0) {
            c = p[0] & 0x0f;
            len = 3;
        } else if ((p[0] & 0xf8) == 0xf0) {
            c = p[0] & 0x07;
            len = 4;
        } else {
            return false;
        }
        for (int i = 1; i < len; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            c = (c << 6) | (p[i] & 0x3f);
        }
        if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000))
            return false;
        if (c < 0x20 && c != 0x9 && c != 0xa && c != 0xd)
            return false;
        if ((c >= 0xd800 && c <= 0xdfff) || c == 0xfffe || c == 0xffff || c > 0x10ffff)
            return false;
        p += len;
        n += (size_t)len;
        if (n > MAX_ARG_TEXT)
            return false;
    }
    return true;
}

/* name_ok: name is a plain element name (an NCName, ASCII here). */
static bool name_ok(const char *name)
{
    if (!name || !*name || strlen(name) > 128)
        return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        bool other = (c >= '0' && c <= '9') || c == '-' || c == '.';
        if (!alpha && !(other && p != name))
            return false;
    }
    return true;
}

/* xsi_type_ok: an optionally prefixed type name, e.g. "xsd:string". */
static bool xsi_type_ok(const char *t)
{
    char pre[129];
    const char *colon;

    if (!t)
        return false;
    colon = strchr(t, ':');
    if (!colon)
        return name_ok(t);
    if ((size_t)(colon - t) >= sizeof(pre))
        return false;
    memcpy(pre, t, (size_t)(colon - t));
    pre[colon - t] = '\0';
    return name_ok(pre) && name_ok(colon + 1);
}

/* ---- Building ---- */

static soap_req *req_of(xmlNode *node)
{
    return node && node->doc ? node->doc->_private : NULL;
}

static void req_fail(xmlNode *parent, int err)
{
    soap_req *req = req_of(parent);
    if (req && req->err == 0)
        req->err = err;
}

/* new_elem appends an empty <name> in the vim25 namespace to parent. */
static xmlNode *new_elem(xmlNode *parent, const char *name)
{
    xmlNode *n;

    if (!parent)
        return NULL;
    if (!name_ok(name)) {
        req_fail(parent, -EINVAL);
        return NULL;
    }
    n = xmlNewDocNode(parent->doc, parent->ns, BAD_CAST name, NULL);
    if (!n) {
        req_fail(parent, -ENOMEM);
        return NULL;
    }
    xmlAddChild(parent, n);
    return n;
}

/* set_text gives the empty element n the text value. */
static xmlNode *set_text(xmlNode *n, const char *value)
{
    xmlNode *t;

    if (!n)
        return NULL;
    if (!value || !xml_text_ok(value)) {
        req_fail(n, -EINVAL);
        return NULL;
    }
    if (!*value)
        return n;
    t = xmlNewDocText(n->doc, BAD_CAST value);
    if (!t) {
        req_fail(n, -ENOMEM);
        return NULL;
    }
    xmlAddChild(n, t);
    return n;
}

static xmlNode *set_attr(xmlNode *n, xmlNs *ns, const char *name, const char *value)
{
    if (!n)
        return NULL;
    if (!value || !xml_text_ok(value)) {
        req_fail(n, -EINVAL);
        return NULL;
    }
    if (!xmlNewNsProp(n, ns, BAD_CAST name, BAD_CAST value)) {
        req_fail(n, -ENOMEM);
        return NULL;
    }
    return n;
}

soap_req *soap_req_new(const char *method, const char *this_type, const char *this_value)
{
    soap_req *req;
    xmlNode *env, *body;
    xmlNs *ns_env, *ns_vim;

    if (!name_ok(method) || !this_type || !this_value || !xml_text_ok(this_type) ||
        !xml_text_ok(this_value))
        return NULL;
    req = calloc(1, sizeof(*req));
    if (!req)
        return NULL;
    req->doc = xmlNewDoc(BAD_CAST "1.0");
    if (!req->doc)
        goto fail;
    req->doc->_private = req;
    env = xmlNewDocNode(req->doc, NULL, BAD_CAST "Envelope", NULL);
    if (!env)
        goto fail;
    xmlDocSetRootElement(req->doc, env);
    ns_env = xmlNewNs(env, BAD_CAST SOAP_NS_ENV, BAD_CAST "soapenv");
    if (!ns_env || !xmlNewNs(env, BAD_CAST SOAP_NS_XSD, BAD_CAST "xsd"))
        goto fail;
    req->xsi = xmlNewNs(env, BAD_CAST SOAP_NS_XSI, BAD_CAST "xsi");
    if (!req->xsi)
        goto fail;
    xmlSetNs(env, ns_env);
    body = xmlNewDocNode(req->doc, ns_env, BAD_CAST "Body", NULL);
    if (!body)
        goto fail;
    xmlAddChild(env, body);
    /* The vim25 namespace is the default from the body down, so the method
     * and its arguments are unprefixed. */
    ns_vim = xmlNewNs(body, BAD_CAST SOAP_NS_VIM, NULL);
    if (!ns_vim)
        goto fail;
    req->method = xmlNewDocNode(req->doc, ns_vim, BAD_CAST method, NULL);
    if (!req->method)
        goto fail;
    xmlAddChild(body, req->method);
    soap_add_moref(req->method, "_this", this_type, this_value);
    if (req->err)
        goto fail;
    return req;
fail:
    soap_req_free(req);
    return NULL;
}

void soap_req_free(soap_req *req)
{
    if (!req)
        return;
    xmlFreeDoc(req->doc);
    free(req);
}

xmlNode *soap_req_method(soap_req *req)
{
    return req ? req->method : NULL;
}

xmlNode *soap_add_text(xmlNode *parent, const char *name, const char *value)
{
    return set_text(new_elem(parent, name), value);
}

xmlNode *soap_add_int(xmlNode *parent, const char *name, long long value)
{
    char num[32];
    snprintf(num, sizeof(num), "%lld", value);
    return soap_add_text(parent, name, num);
}

xmlNode *soap_add_bool(xmlNode *parent, const char *name, bool value)
{
    return soap_add_text(parent, name, value ? "true" : "false");
}

xmlNode *soap_add_moref(xmlNode *parent, const char *name, const char *type, const char *value)
{
    xmlNode *n = soap_add_text(parent, name, value);
    if (n && (!type || !*type)) {
        req_fail(n, -EINVAL);
        return NULL;
    }
    return set_attr(n, NULL, "type", type);
}

/* set_type sets n's xsi:type (n NULL: a failure already recorded). */
static xmlNode *set_type(xmlNode *n, const char *xsi_type)
{
    soap_req *req = req_of(n);

    if (!n)
        return NULL;
    if (!req || !xsi_type_ok(xsi_type)) {
        req_fail(n, -EINVAL);
        return NULL;
    }
    return set_attr(n, req->xsi, "type", xsi_type);
}

xmlNode *soap_add_typed(xmlNode *parent, const char *name, const char *xsi_type)
{
    return set_type(new_elem(parent, name), xsi_type);
}

xmlNode *soap_add_typed_text(xmlNode *parent, const char *name, const char *xsi_type,
                             const char *value)
{
    return set_text(soap_add_typed(parent, name, xsi_type), value);
}

xmlNode *soap_add_secret(xmlNode *parent, const char *name, const char *secret)
{
    xmlNode *n = new_elem(parent, name), *c;
    soap_req *req = req_of(n);

    if (!n)
        return NULL;
    if (!req || req->secret || !secret || !xml_text_ok(secret)) {
        req_fail(n, -EINVAL);
        return NULL;
    }
    c = xmlNewDocComment(n->doc, BAD_CAST SECRET_COMMENT);
    if (!c) {
        req_fail(n, -ENOMEM);
        return NULL;
    }
    xmlAddChild(n, c);
    req->secret = secret;
    return n;
}

xmlNode *soap_add_typed_secret(xmlNode *parent, const char *name, const char *xsi_type,
                               const char *secret)
{
    return set_type(soap_add_secret(parent, name, secret), xsi_type);
}

/* escaped_len is the length of s once '&', '<', '>' and CR are escaped. */
static size_t escaped_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++) {
        switch (*s) {
        case '&':
            n += 5;
            break;
        case '<':
        case '>':
            n += 4;
            break;
        case '\r':
            n += 5;
            break;
        default:
            n++;
        }
    }
    return n;
}

static char *put_escaped(char *out, const char *s)
{
    for (; *s; s++) {
        const char *e = NULL;
        switch (*s) {
        case '&':
            e = "&amp;";
            break;
        case '<':
            e = "&lt;";
            break;
        case '>':
            e = "&gt;";
            break;
        case '\r':
            e = "&#13;";
            break;
        default:
            *out++ = *s;
            continue;
        }
        size_t n = strlen(e);
        memcpy(out, e, n);
        out += n;
    }
    return out;
}

int soap_req_serialize(soap_req *req, char **ret_buf, size_t *ret_len)
{
    xmlChar *mem = NULL;
    int size = 0, r;
    size_t pre, post, slen = 0, total;
    const char *mark = NULL;
    char *out, *p;

    if (!req || !ret_buf || !ret_len)
        return -EINVAL;
    if (req->err)
        return req->err;
    xmlDocDumpMemoryEnc(req->doc, &mem, &size, "UTF-8");
    if (!mem || size <= 0) {
        r = -ENOMEM;
        goto out;
    }
    pre = (size_t)size;
    post = 0;
    if (req->secret) {
        mark = memmem(mem, (size_t)size, SECRET_MARK, strlen(SECRET_MARK));
        if (!mark) {
            r = -EINVAL;
            goto out;
        }
        pre = (size_t)(mark - (const char *)mem);
        post = (size_t)size - pre - strlen(SECRET_MARK);
        slen = escaped_len(req->secret);
    }
    total = pre + slen + post;
    out = malloc(total + 1);
    if (!out) {
        r = -ENOMEM;
        goto out;
    }
    memcpy(out, mem, pre);
    p = out + pre;
    if (mark) {
        p = put_escaped(p, req->secret);
        memcpy(p, mark + strlen(SECRET_MARK), post);
        p += post;
    }
    *p = '\0';
    *ret_buf = out;
    *ret_len = total;
    r = 0;
out:
    xmlFree(mem);
    return r;
}

void soap_buf_free(char *buf, size_t len)
{
    if (!buf)
        return;
    explicit_bzero(buf, len);
    free(buf);
}

int soap_action(char *buf, size_t size, const char *api_version)
{
    int n;

    if (!buf || !api_version || !*api_version || strlen(api_version) > 32)
        return -EINVAL;
    for (const char *p = api_version; *p; p++) {
        char c = *p;
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '.' || c == '_' || c == '-'))
            return -EINVAL;
    }
    n = snprintf(buf, size, "urn:vim25/%s", api_version);
    if (n < 0 || (size_t)n >= size)
        return -ENOSPC;
    return n;
}

/* ---- Walking ---- */

bool soap_is(const xmlNode *node, const char *localname)
{
    return node && node->type == XML_ELEMENT_NODE && node->name &&
           strcmp((const char *)node->name, localname) == 0;
}

static xmlNode *first_from(xmlNode *n, const char *localname)
{
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (!localname || soap_is(n, localname))
            return n;
    }
    return NULL;
}

xmlNode *soap_child(const xmlNode *node, const char *localname)
{
    if (!node || node->type != XML_ELEMENT_NODE)
        return NULL;
    return first_from(node->children, localname);
}

xmlNode *soap_next(const xmlNode *node, const char *localname)
{
    if (!node)
        return NULL;
    return first_from(node->next, localname);
}

static bool is_text(const xmlNode *n)
{
    return n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE;
}

const char *soap_text_ref(const xmlNode *node)
{
    const xmlNode *c;

    if (!node || node->type != XML_ELEMENT_NODE)
        return NULL;
    c = node->children;
    if (!c)
        return "";
    if (c->next || !is_text(c))
        return NULL;
    return c->content ? (const char *)c->content : "";
}

int soap_text(const xmlNode *node, char *buf, size_t size)
{
    size_t n = 0;

    if (!node || !buf || size == 0)
        return -EINVAL;
    for (const xmlNode *c = node->children; c; c = c->next) {
        size_t len;
        if (!is_text(c) || !c->content)
            continue;
        len = strlen((const char *)c->content);
        if (len >= size - n || n + len > INT_MAX) {
            buf[0] = '\0';
            return VMG_ETOOBIG;
        }
        memcpy(buf + n, c->content, len);
        n += len;
    }
    buf[n] = '\0';
    return (int)n;
}

/* trimmed copies node's text without the XML white space around it. */
static int trimmed(const xmlNode *node, char *buf, size_t size)
{
    int n = soap_text(node, buf, size);
    size_t start = 0, end;

    if (n < 0)
        return n;
    end = (size_t)n;
    while (start < end && strchr(" \t\r\n", buf[start]))
        start++;
    while (end > start && strchr(" \t\r\n", buf[end - 1]))
        end--;
    memmove(buf, buf + start, end - start);
    buf[end - start] = '\0';
    return (int)(end - start);
}

int soap_int(const xmlNode *node, long long *out)
{
    char buf[32], *end;
    long long v;

    if (!out || trimmed(node, buf, sizeof(buf)) <= 0)
        return VMG_EPARSE;
    errno = 0;
    v = strtoll(buf, &end, 10);
    if (errno || *end || end == buf)
        return VMG_EPARSE;
    *out = v;
    return 0;
}

int soap_bool(const xmlNode *node, bool *out)
{
    char buf[8];

    if (!out || trimmed(node, buf, sizeof(buf)) <= 0)
        return VMG_EPARSE;
    if (strcmp(buf, "true") == 0 || strcmp(buf, "1") == 0)
        *out = true;
    else if (strcmp(buf, "false") == 0 || strcmp(buf, "0") == 0)
        *out = false;
    else
        return VMG_EPARSE;
    return 0;
}

const char *soap_xsi_type(const xmlNode *node)
{
    xmlAttr *a;
    const char *v, *colon;

    if (!node || node->type != XML_ELEMENT_NODE)
        return NULL;
    a = xmlHasNsProp(node, BAD_CAST "type", BAD_CAST SOAP_NS_XSI);
    if (!a || a->type != XML_ATTRIBUTE_NODE || !a->children || a->children->next ||
        a->children->type != XML_TEXT_NODE || !a->children->content)
        return NULL;
    v = (const char *)a->children->content;
    colon = strrchr(v, ':');
    if (colon)
        v = colon + 1;
    return *v ? v : NULL;
}

/* ---- Faults ---- */

/* copy_trunc copies s into buf, cut at a UTF-8 character boundary when it
 * does not fit. */
static void copy_trunc(char *buf, size_t size, const char *s, size_t len)
{
    if (len >= size) {
        len = size - 1;
        while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
            len--;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
}

/* text_trunc copies node's text, truncated to fit, with white space around
 * it removed. */
static void text_trunc(const xmlNode *node, char *buf, size_t size)
{
    size_t n = 0;

    buf[0] = '\0';
    if (!node)
        return;
    for (const xmlNode *c = node->children; c && n + 1 < size; c = c->next) {
        if (!is_text(c) || !c->content)
            continue;
        copy_trunc(buf + n, size - n, (const char *)c->content, strlen((const char *)c->content));
        n += strlen(buf + n);
    }
    size_t start = 0;
    while (start < n && strchr(" \t\r\n", buf[start]))
        start++;
    while (n > start && strchr(" \t\r\n", buf[n - 1]))
        n--;
    memmove(buf, buf + start, n - start);
    buf[n - start] = '\0';
}

/* fault_type_of names a fault's detail element: its xsi:type, or its
 * element name without the "Fault" suffix vim25 adds to element names. */
static void fault_type_of(const xmlNode *d, char *buf, size_t size)
{
    const char *t = soap_xsi_type(d);
    size_t len;

    if (t) {
        copy_trunc(buf, size, t, strlen(t));
        return;
    }
    t = (const char *)d->name;
    len = strlen(t);
    if (len > 5 && strcmp(t + len - 5, "Fault") == 0)
        len -= 5;
    copy_trunc(buf, size, t, len);
}

static void decode_soap_fault(const xmlNode *fault, struct soap_fault *out)
{
    const xmlNode *d = soap_child(soap_child(fault, "detail"), NULL);

    memset(out, 0, sizeof(*out));
    text_trunc(soap_child(fault, "faultstring"), out->message, sizeof(out->message));
    if (d) {
        fault_type_of(d, out->type, sizeof(out->type));
    } else {
        /* No detail: the faultcode's local part ("ServerFaultCode"). */
        char code[64];
        const char *colon;
        text_trunc(soap_child(fault, "faultcode"), code, sizeof(code));
        colon = strrchr(code, ':');
        copy_trunc(out->type, sizeof(out->type), colon ? colon + 1 : code,
                   strlen(colon ? colon + 1 : code));
    }
    if (!out->type[0])
        copy_trunc(out->type, sizeof(out->type), "SoapFault", 9);
    /* vCenter leaves faultstring empty for many faults; the type is then
     * the best message there is. */
    if (!out->message[0])
        copy_trunc(out->message, sizeof(out->message), out->type, strlen(out->type));
}

int soap_method_fault(const xmlNode *node, struct soap_fault *out)
{
    const xmlNode *f = soap_child(node, "fault");
    const char *t = soap_xsi_type(f);

    if (!t || !out)
        return VMG_EPARSE;
    memset(out, 0, sizeof(*out));
    copy_trunc(out->type, sizeof(out->type), t, strlen(t));
    text_trunc(soap_child(node, "localizedMessage"), out->message, sizeof(out->message));
    if (!out->message[0])
        copy_trunc(out->message, sizeof(out->message), t, strlen(t));
    return 0;
}

/* ---- Parsing ---- */

/* The guard sits in front of libxml2's SAX2 tree builder: it stops the
 * parser at any DTD or entity declaration and when the tree grows past
 * SOAP_MAX_NODES element, attribute, namespace and text nodes. */
struct guard {
    startElementNsSAX2Func start;
    charactersSAXFunc text, blank;
    size_t nodes;
    int err;
};

static void guard_stop(void *ctx, int err)
{
    xmlParserCtxt *ctxt = ctx;
    struct guard *g = ctxt->_private;
    if (g->err == 0)
        g->err = err;
    xmlStopParser(ctxt);
}

static void guard_start(void *ctx, const xmlChar *localname, const xmlChar *prefix,
                        const xmlChar *uri, int nb_namespaces, const xmlChar **namespaces,
                        int nb_attributes, int nb_defaulted, const xmlChar **attributes)
{
    xmlParserCtxt *ctxt = ctx;
    struct guard *g = ctxt->_private;

    if (g->err)
        return;
    g->nodes += 1 + (size_t)(nb_namespaces > 0 ? nb_namespaces : 0) +
                (size_t)(nb_attributes > 0 ? nb_attributes : 0);
    if (g->nodes > SOAP_MAX_NODES) {
        guard_stop(ctx, VMG_ETOOBIG);
        return;
    }
    g->start(ctx, localname, prefix, uri, nb_namespaces, namespaces, nb_attributes, nb_defaulted,
             attributes);
}

/* guard_text counts a text node each time the tree builder will start one
 * (it appends to the node's last child when that is text already). */
static bool guard_count_text(xmlParserCtxt *ctxt)
{
    struct guard *g = ctxt->_private;
    const xmlNode *last = ctxt->node ? ctxt->node->last : NULL;

    if (g->err)
        return false;
    if (!last || last->type != XML_TEXT_NODE) {
        if (++g->nodes > SOAP_MAX_NODES) {
            guard_stop(ctxt, VMG_ETOOBIG);
            return false;
        }
    }
    return true;
}

static void guard_text(void *ctx, const xmlChar *ch, int len)
{
    xmlParserCtxt *ctxt = ctx;
    struct guard *g = ctxt->_private;

    if (guard_count_text(ctxt))
        g->text(ctx, ch, len);
}

static void guard_blank(void *ctx, const xmlChar *ch, int len)
{
    xmlParserCtxt *ctxt = ctx;
    struct guard *g = ctxt->_private;

    if (guard_count_text(ctxt))
        g->blank(ctx, ch, len);
}

static void guard_dtd(void *ctx, const xmlChar *name, const xmlChar *external_id,
                      const xmlChar *system_id)
{
    guard_stop(ctx, VMG_EPARSE);
}

static void guard_entity(void *ctx, const xmlChar *name, int type, const xmlChar *public_id,
                         const xmlChar *system_id, xmlChar *content)
{
    guard_stop(ctx, VMG_EPARSE);
}

static void silent(void *data, xmlError *error)
{
}

static int check_envelope(xmlDoc *doc, xmlNode **ret_first)
{
    xmlNode *env = xmlDocGetRootElement(doc), *body, *first;

    if (!soap_is(env, "Envelope") || !env->ns || !env->ns->href ||
        strcmp((const char *)env->ns->href, SOAP_NS_ENV) != 0)
        return VMG_EPARSE;
    body = soap_child(env, "Body");
    if (!body || !body->ns || !body->ns->href ||
        strcmp((const char *)body->ns->href, SOAP_NS_ENV) != 0)
        return VMG_EPARSE;
    first = soap_child(body, NULL);
    if (!first)
        return VMG_EPARSE;
    *ret_first = first;
    return 0;
}

/* skip_to returns the end of the first needle in [p, end) past it, or end. */
static const char *skip_to(const char *p, const char *end, const char *needle)
{
    size_t n = strlen(needle);

    for (; (size_t)(end - p) >= n; p++)
        if (memcmp(p, needle, n) == 0)
            return p + n;
    return end;
}

/* tags_within tells whether no tag of buf[0..len) has more than max
 * attributes and namespace declarations (its '=' outside quotes), in one
 * pass: comments, CDATA, processing instructions and declarations are
 * skipped whole; what is not well-formed is left to the parser. */
static bool tags_within(const char *buf, size_t len, size_t max)
{
    const char *p = buf, *end = buf + len;

    while ((p = memchr(p, '<', (size_t)(end - p))) != NULL) {
        size_t eq = 0;
        char quote = 0;

        p++;
        if (end - p >= 3 && memcmp(p, "!--", 3) == 0) {
            p = skip_to(p + 3, end, "-->");
            continue;
        }
        if (end - p >= 8 && memcmp(p, "![CDATA[", 8) == 0) {
            p = skip_to(p + 8, end, "]]>");
            continue;
        }
        if (p < end && (*p == '?' || *p == '!')) {
            p = skip_to(p, end, *p == '?' ? "?>" : ">");
            continue;
        }
        for (; p < end && (quote || *p != '>'); p++) {
            if (quote) {
                if (*p == quote)
                    quote = 0;
            } else if (*p == '"' || *p == '\'') {
                quote = *p;
            } else if (*p == '=' && ++eq > max) {
                return false;
            }
        }
    }
    return true;
}

int soap_parse(const char *buf, size_t len, size_t max, soap_resp **ret, struct soap_fault *fault)
{
    xmlParserCtxt *ctxt = NULL;
    xmlDoc *doc = NULL;
    xmlNode *first = NULL;
    soap_resp *resp;
    struct guard g = {0};
    int r;

    if (!buf || !ret)
        return -EINVAL;
    if (len > max || len > INT_MAX)
        return VMG_ETOOBIG;
    if (len == 0)
        return VMG_EPARSE;
    if (!tags_within(buf, len, SOAP_MAX_TAG_ATTRS))
        return VMG_ETOOBIG;
    ctxt = xmlNewParserCtxt();
    if (!ctxt || !ctxt->sax) {
        r = -ENOMEM;
        goto out;
    }
    g.start = ctxt->sax->startElementNs;
    if (!g.start) {
        r = -EINVAL;
        goto out;
    }
    g.text = ctxt->sax->characters;
    g.blank = ctxt->sax->ignorableWhitespace;
    if (!g.text) {
        r = -EINVAL;
        goto out;
    }
    ctxt->_private = &g;
    ctxt->sax->startElementNs = guard_start;
    ctxt->sax->characters = guard_text;
    if (g.blank)
        ctxt->sax->ignorableWhitespace = guard_blank;
    ctxt->sax->internalSubset = guard_dtd;
    ctxt->sax->externalSubset = guard_dtd;
    ctxt->sax->entityDecl = guard_entity;
    /* Comments and processing instructions stay out of the tree, and CDATA
     * arrives as ordinary text, so text is always one node per run. */
    ctxt->sax->comment = NULL;
    ctxt->sax->processingInstruction = NULL;
    ctxt->sax->cdataBlock = NULL;
    ctxt->sax->serror = silent;
    /* UTF-8 only, whatever the document declares: vCenter speaks nothing
     * else, and no other decoder (iconv, which reports errors on stderr)
     * ever runs. */
    doc = xmlCtxtReadMemory(ctxt, buf, (int)len, NULL, "UTF-8",
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                                XML_PARSE_NOCDATA | XML_PARSE_IGNORE_ENC);
    if (g.err) {
        r = g.err;
        goto out;
    }
    if (!doc || !ctxt->wellFormed) {
        r = ctxt->errNo == XML_ERR_NO_MEMORY ? -ENOMEM : VMG_EPARSE;
        goto out;
    }
    r = check_envelope(doc, &first);
    if (r < 0)
        goto out;
    if (soap_is(first, "Fault") && first->ns && first->ns->href &&
        strcmp((const char *)first->ns->href, SOAP_NS_ENV) == 0) {
        if (fault)
            decode_soap_fault(first, fault);
        r = VMG_EFAULT;
        goto out;
    }
    resp = calloc(1, sizeof(*resp));
    if (!resp) {
        r = -ENOMEM;
        goto out;
    }
    resp->doc = doc;
    resp->body = first;
    doc = NULL;
    *ret = resp;
    r = 0;
out:
    xmlFreeDoc(doc);
    if (ctxt)
        ctxt->_private = NULL;
    xmlFreeParserCtxt(ctxt);
    return r;
}

void soap_resp_free(soap_resp *resp)
{
    if (!resp)
        return;
    xmlFreeDoc(resp->doc);
    free(resp);
}

xmlNode *soap_resp_body(const soap_resp *resp)
{
    return resp ? resp->body : NULL;
}

xmlNode *soap_resp_returnval(const soap_resp *resp)
{
    return resp ? soap_child(resp->body, "returnval") : NULL;
}
