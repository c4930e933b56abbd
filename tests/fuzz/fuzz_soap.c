/* fuzz_soap.c: libFuzzer target for the SOAP parser and the vim25
 * decoders. Each input is parsed as a response and handed to every decoder
 * (a crash, a leak or a sanitizer report is a finding), the objects it
 * updates to an inventory cache (the guest addresses of guest.net); then it
 * is used as the text of a request, whose envelope must parse back to that
 * same text.
 *
 * fuzz-sources: vsphere/soap.c vsphere/vim.c vsphere/invcache.c lib/err.c
 * fuzz-sources: lib/buf.c lib/backoff.c lib/bucket.c lib/clock.c
 * fuzz-seeds: tests/unit/fixtures/soap/*.resp.xml tests/unit/fixtures/soap/clone_vm.req.xml
 * fuzz-seeds: tests/unit/fixtures/soap/create_filter_view.req.xml
 * fuzz-seeds: tests/unit/fixtures/soap/login.req.xml
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "vsphere/invcache.h"
#include "vsphere/soap.h"
#include "vsphere/vim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The largest response the fuzzer parses; the session uses a few MiB. */
#define MAX_RESP (1u << 20)

static volatile size_t sink;
static vs_cache *cache; /* of each input, root group-1 */

static void touch(const char *s)
{
    if (s)
        sink += strlen(s);
}

static int on_object(void *arg, const struct vim_object_update *u)
{
    size_t *objects = arg;

    if (u->n_changes > VIM_CHANGES_PER_CALL || u->kind > VIM_LEAVE)
        abort();
    touch(u->filter.type);
    touch(u->obj.type);
    touch(u->obj.value);
    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *c = &u->changes[i];
        struct soap_fault f;
        struct vim_moref fo;
        const char *k, *v;

        if (!c->name || !*c->name)
            abort();
        touch(c->xsi_type);
        switch (c->kind) {
        case VIM_VAL_STRING:
        case VIM_VAL_ENUM:
            if (!c->str)
                abort();
            touch(c->str);
            break;
        case VIM_VAL_MOREF:
            if (!c->ref_type || !c->ref_value)
                abort();
            touch(c->ref_type);
            touch(c->ref_value);
            break;
        case VIM_VAL_OPTIONS:
            for (const xmlNode *o = vim_option_next(c->node, NULL, &k, &v); o;
                 o = vim_option_next(c->node, o, &k, &v)) {
                touch(k);
                touch(v);
            }
            break;
        case VIM_VAL_FAULT:
            /* The decoder checked it; it must decode. */
            if (soap_method_fault(c->node, &f) != 0)
                abort();
            if (strnlen(f.type, sizeof(f.type)) == sizeof(f.type) ||
                strnlen(f.message, sizeof(f.message)) == sizeof(f.message))
                abort();
            if (vim_fault_object(c->node, &fo) == 0 &&
                (!fo.type[0] || !fo.value[0] ||
                 strnlen(fo.value, sizeof(fo.value)) == sizeof(fo.value)))
                abort();
            break;
        default:
            break;
        }
    }
    if (cache) {
        const struct vs_obj *o;
        char ip[VS_IP_LEN];
        (void)vs_cache_apply(cache, u);
        o = vs_cache_get(cache, u->obj.value);
        if (o && o->n_ip > VS_IP_MAX)
            abort();
        for (unsigned i = 0; o && i < o->n_ip; i++)
            if (!vs_obj_ip_at(o, i, ip) || strnlen(ip, sizeof(ip)) == sizeof(ip))
                abort();
    }
    ++*objects;
    /* Stop some walks early, as a consumer's error would. */
    return *objects > 1000 ? -ECANCELED : 0;
}

static void decode_all(const soap_resp *resp)
{
    struct vim_service_content sc;
    struct vim_user_session us;
    struct vim_moref ref;
    struct vim_update_set set;
    struct soap_fault f;
    char text[256], token[128];
    size_t objects = 0;
    long long n;
    bool b;

    if (vim_decode_service_content(resp, &sc) == 0) {
        touch(sc.root_folder.value);
        touch(sc.api_version);
    }
    if (vim_decode_user_session(resp, &us) == 0)
        touch(us.key);
    if (vim_decode_moref(resp, &ref) == 0)
        touch(ref.value);
    if (vim_decode_text(resp, text, sizeof(text)) == 0)
        touch(text);
    int r = vim_decode_update_set(resp, on_object, &objects, &set);
    if (r == 1 && strnlen(set.version, sizeof(set.version)) == sizeof(set.version))
        abort();
    /* All or nothing: a set that does not decode delivers no object. */
    if (r == VMG_EPARSE && objects != 0)
        abort();
    objects = 0;
    r = vim_decode_retrieve_result(resp, on_object, &objects, token, sizeof(token));
    if (r == VMG_EPARSE && objects != 0)
        abort();

    /* The generic walkers over everything under the body. */
    const xmlNode *body = soap_resp_body(resp);
    for (const xmlNode *rv = soap_child(body, NULL); rv; rv = soap_next(rv, NULL)) {
        for (const xmlNode *c = soap_child(rv, NULL); c; c = soap_next(c, NULL)) {
            if (soap_text(c, text, sizeof(text)) >= 0 && strlen(text) >= sizeof(text))
                abort();
            touch(soap_text_ref(c));
            touch(soap_xsi_type(c));
            (void)soap_int(c, &n);
            (void)soap_bool(c, &b);
            if (soap_method_fault(c, &f) == 0)
                touch(f.message);
        }
    }
}

/* round_trip uses s as a folder name and as a password: a request that
 * builds must carry exactly s. */
static void round_trip(const char *s)
{
    struct vim_moref parent, sm;
    soap_resp *resp = NULL;
    char *buf = NULL, text[4096];
    size_t len = 0;

    if (vim_moref_set(&parent, "Folder", "group-v3") < 0 ||
        vim_moref_set(&sm, "SessionManager", "SessionManager") < 0)
        abort();
    if (vim_req_create_folder(&parent, s, &buf, &len) == 0) {
        if (soap_parse(buf, len, len, &resp, NULL) != 0)
            abort();
        if (soap_text(soap_child(soap_resp_body(resp), "name"), text, sizeof(text)) < 0 ||
            strcmp(text, s) != 0)
            abort();
        soap_resp_free(resp);
        soap_buf_free(buf, len);
    }
    if (vim_req_login(&sm, "user", s, &buf, &len) == 0) {
        if (soap_parse(buf, len, len, &resp, NULL) != 0)
            abort();
        if (soap_text(soap_child(soap_resp_body(resp), "password"), text, sizeof(text)) < 0 ||
            strcmp(text, s) != 0)
            abort();
        soap_resp_free(resp);
        soap_buf_free(buf, len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    soap_resp *resp = NULL;
    struct soap_fault fault;
    int r;

    r = soap_parse((const char *)data, size, MAX_RESP, &resp, &fault);
    if (r == 0) {
        if (!resp || !soap_resp_body(resp))
            abort();
        cache = vs_cache_new("group-1", 1000, NULL, NULL, NULL);
        decode_all(resp);
        vs_cache_commit(cache);
        vs_cache_free(cache);
        cache = NULL;
        soap_resp_free(resp);
    } else if (r == VMG_EFAULT) {
        if (resp || strnlen(fault.type, sizeof(fault.type)) == sizeof(fault.type) ||
            strnlen(fault.message, sizeof(fault.message)) == sizeof(fault.message) ||
            !fault.type[0])
            abort();
    } else if (r != VMG_EPARSE && r != VMG_ETOOBIG) {
        abort();
    }

    if (size > 0 && size < 2048) {
        char s[2048];
        memcpy(s, data, size);
        s[size] = '\0';
        round_trip(s);
    }
    return 0;
}
