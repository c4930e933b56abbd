/* rest.h: the vSphere Automation REST API client (/rest/com/vmware/cis/...):
 * a session, and the tagging of VMs with tags of one tag category.
 *
 * The caller names the category (vs_rest_options) and each tag (the
 * operations' arguments), so that vSphere-side tools (backup policies,
 * reports) see which VMs belong together; this client makes no names.
 * Tagging is a courtesy, not part of managing VMs: a vCenter that refuses
 * it (no REST endpoint, a login or a privilege refused, nothing listening)
 * turns this client "unavailable", stickily, with a reason, so that the
 * caller logs one warning and goes on without tags.
 *
 * Session: POST /rest/com/vmware/cis/session with HTTP basic auth gives a
 * session id, sent as header vmware-api-session-id on every later call. A
 * call answered 401 logs in again and is retried once; a 401 after a fresh
 * login makes the client unavailable. Closing deletes the session.
 *
 * TLS and connection settings belong to the vCenter session module: the
 * prepare callback of the options is called on every easy handle before it
 * starts (CA file, pinned key, or verification off), after this module set
 * URL, method, headers, body and timeouts.
 *
 * Operations are asynchronous on the loop: each takes a callback, called
 * exactly once, later, from the loop (never from inside the call that
 * started it), unless the call fails, in which case it is never called.
 * Category and tag ids are cached in memory; a tag deleted behind the
 * client's back is found missing (404), forgotten and made again.
 *
 * The HTTP calls used exist both in vCenter (6.5 and later) and in govmomi's vcsim:
 *   POST   session                                  login
 *   POST   session?~action=get                      check the session
 *   DELETE session                                  logout
 *   POST   tagging/category                         create (400 already_exists)
 *   GET    tagging/category, tagging/category/id:C  list, get
 *   POST   tagging/tag                              create (400 already_exists)
 *   POST   tagging/tag/id:C?~action=list-tags-for-category  {"category_id":C}
 *   GET    tagging/tag/id:T; DELETE tagging/tag/id:T
 *   POST   tagging/tag-association/id:T?~action=attach|detach  {"object_id":{..}}
 *   POST   tagging/tag-association/id:T?~action=list-attached-objects  {}
 *          (vcsim refuses an empty body there)
 * Finding an existing category or tag reads the list one GET at a time;
 * every tag read is remembered, so one pass serves every group.
 */
#ifndef VMG_REST_H
#define VMG_REST_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <uv.h>

#include "lib/http.h"

/* The code of every operation refused because tagging is unavailable (see
 * vs_rest_available()); vmg_strerror() says "Operation not supported". */
#define VS_REST_EUNAVAILABLE (-EOPNOTSUPP)

#define VS_REST_ID_MAX 256          /* longest category or tag id accepted */
#define VS_REST_NAME_MAX 256        /* longest category name accepted */
#define VS_REST_TAG_NAME_MAX 80     /* longest tag name accepted (vCenter's limit) */
#define VS_REST_DESCRIPTION_MAX 600 /* longest category or tag description accepted */
#define VS_REST_MSG_MAX 512         /* longest message of a result or a reason */
#define VS_REST_MAX_IDS 20000       /* most ids a list may hold */
/* Most JSON values an answer may make once parsed (a list of
 * VS_REST_MAX_IDS objects makes three each): a body within the size bound
 * that would make more is refused unparsed (VMG_ETOOBIG). */
#define VS_REST_MAX_VALUES (4 * VS_REST_MAX_IDS + 1024)
#define VS_REST_MAX_OPS 4096   /* most operations at once (else -EBUSY) */
#define VS_REST_CACHE_MAX 8192 /* most tag ids kept in memory */

/* A vSphere object, e.g. {"VirtualMachine", "vm-42"} (a moref). */
struct vs_rest_object {
    char type[64];
    char id[128];
};

struct vs_rest_options {
    /* "https://host:port", or with a path before /rest; no trailing '/'
     * needed. Required. */
    const char *base_url;
    const char *user;     /* required */
    const char *password; /* required; copied, wiped on close, never logged */
    /* Called on every easy handle just before it starts (TLS settings);
     * may be NULL. It must not start, cancel or clean up the handle.
     * prepare_data must outlive the client: the logout of vs_rest_close is
     * prepared too, and a handshake may read it (vs_session_prepare_tls's
     * pin). release, when not NULL, is called once with prepare_data when
     * the client is freed, before its closed callback (vs_session_unref of
     * a vs_session_ref taken for it); not when vs_rest_new fails. */
    void (*prepare)(void *data, CURL *easy);
    void *prepare_data;
    void (*release)(void *data);
    const char *category; /* the tag category's name; required */
    /* The description of the category when this client makes it; NULL: "". */
    const char *category_description;
    bool multiple;           /* a new category's cardinality MULTIPLE, else SINGLE */
    long timeout_ms;         /* per request; 0: 30 s */
    long connect_timeout_ms; /* 0: 10 s */
    size_t max_body;         /* bound of a response body; 0: 4 MiB */
    int max_inflight;        /* requests at once; 0: 4 */
};

/* What an operation's callback gets; valid during the call only. */
struct vs_rest_result {
    int err;         /* 0 or a negative code, see below */
    const char *msg; /* one sentence when err != 0, else "" */
    /* vs_rest_ensure_category, vs_rest_ensure_tag: the id; else NULL. */
    const char *id;
    /* vs_rest_list_attached: the objects the tag is attached to. */
    const struct vs_rest_object *objects;
    size_t n_objects;
};

/* Codes a result may carry:
 *   VS_REST_EUNAVAILABLE  tagging is unavailable now (vs_rest_disabled_reason)
 *   VMG_ETRANSPORT        connection failure or timeout (after a first
 *                         successful login; before it, one makes the client
 *                         unavailable)
 *   VMG_EHTTP             another HTTP error (5xx, 400 invalid_argument);
 *                         msg has the status and vCenter's message
 *   VMG_EFORBIDDEN        attach or detach refused (403): the VM is gone, or
 *                         the user may not tag it
 *   VMG_EPARSE, VMG_ETOOBIG  a response that is not what the API returns,
 *                         or larger than max_body
 *   VMG_ENOTFOUND         a tag or category vanished during the operation
 *   VMG_ECANCELED         the client was closed
 *   -ENOMEM
 */
typedef void (*vs_rest_cb)(void *data, const struct vs_rest_result *res);

typedef struct vs_rest vs_rest;

/* vs_rest_new makes a client sending its requests through http (which must
 * outlive it, until the closed callback of vs_rest_close). It registers the
 * password with vmg_log_add_secret(). Does no I/O. Returns NULL and sets
 * *ret_err on failure: -EINVAL (a required option missing, a base URL that
 * is not http(s)://, a category name too long), -ENOMEM. */
vs_rest *vs_rest_new(uv_loop_t *loop, vmg_http *http, const struct vs_rest_options *opts,
                     int *ret_err);

/* vs_rest_close cancels every operation (each callback runs, with
 * VMG_ECANCELED, before vs_rest_close returns), deletes the session when
 * there is one (bounded by a 5 s timeout), then frees r and calls
 * closed(data) from the loop. NULL is accepted (closed is not called). May
 * be called from an operation's callback. */
void vs_rest_close(vs_rest *r, void (*closed)(void *data), void *data);

/* vs_rest_available is false once tagging was found unavailable; then
 * vs_rest_disabled_reason says why, as one sentence ("" while available),
 * and every operation fails with VS_REST_EUNAVAILABLE. */
bool vs_rest_available(const vs_rest *r);
const char *vs_rest_disabled_reason(const vs_rest *r);

/* vs_rest_logins counts the logins that gave a session (for metrics and
 * tests: more than one means sessions were lost and made again). */
unsigned long vs_rest_logins(const vs_rest *r);

/* vs_rest_reset makes r available again (e.g. after the vCenter session
 * module logged in anew): the next operation logs in and tries. */
void vs_rest_reset(vs_rest *r);

/* vs_rest_set_password replaces the password of the next logins (a rotated
 * secret) and registers it with vmg_log_add_secret(). 0; 1 when it is the
 * password in use; -EINVAL (NULL or empty) or -ENOMEM (the old password is
 * kept). */
int vs_rest_set_password(vs_rest *r, const char *password);

/* Operations. Each returns 0 and calls cb later with the result, or fails
 * with VS_REST_EUNAVAILABLE, VMG_ECANCELED (closing), -EINVAL (bad
 * argument), -EBUSY (VS_REST_MAX_OPS in progress) or -ENOMEM and never
 * calls cb. tag is a tag's name (1..VS_REST_TAG_NAME_MAX bytes) in the
 * category; description (NULL: "") describes a tag made on the way; vm is a
 * VM's moref value ("vm-42"). Strings are copied. */

/* vs_rest_login makes sure of a session: logs in when there is none, then
 * checks it with session?~action=get. */
int vs_rest_login(vs_rest *r, vs_rest_cb cb, void *data);

/* vs_rest_ensure_category finds the category by name, or creates it
 * (cardinality per opts, associable with VirtualMachine). An existing one
 * whose tags cannot go on VMs makes the client unavailable. res->id. */
int vs_rest_ensure_category(vs_rest *r, vs_rest_cb cb, void *data);

/* vs_rest_ensure_tag finds or creates the tag (and the category). res->id
 * is its id. */
int vs_rest_ensure_tag(vs_rest *r, const char *tag, const char *description, vs_rest_cb cb,
                       void *data);

/* vs_rest_attach attaches the tag (made when missing) to VM vm. Attaching
 * twice is no error. */
int vs_rest_attach(vs_rest *r, const char *tag, const char *description, const char *vm,
                   vs_rest_cb cb, void *data);

/* vs_rest_detach detaches the tag from vm; success when the tag or the
 * category does not exist. */
int vs_rest_detach(vs_rest *r, const char *tag, const char *vm, vs_rest_cb cb, void *data);

/* vs_rest_list_attached lists the objects the tag is attached to (none when
 * there is no such tag). */
int vs_rest_list_attached(vs_rest *r, const char *tag, vs_rest_cb cb, void *data);

/* vs_rest_delete_tag deletes the tag (which detaches it from every object);
 * success when it does not exist. */
int vs_rest_delete_tag(vs_rest *r, const char *tag, vs_rest_cb cb, void *data);

/* ---- Request and response shaping (no I/O; rest_json.c), used above and by tests ---- */

/* vs_rest_valid_id tells whether id may be put in a URL: 1..VS_REST_ID_MAX
 * bytes of [A-Za-z0-9:._-] (vCenter's ids are "urn:vmomi:...:GLOBAL"). */
bool vs_rest_valid_id(const char *id);

/* Request bodies, as new NUL-terminated JSON text (free with free()).
 * Return 0, -EINVAL or -ENOMEM; *ret is written on success only.
 *   {"create_spec":{"name","description","cardinality","associable_types":["VirtualMachine"]}}
 *   {"create_spec":{"name","description","category_id"}}
 *   {"category_id"}  (list-tags-for-category)
 *   {"object_id":{"type","id"}} */
int vs_rest_body_category(const char *name, const char *description, bool multiple, char **ret);
int vs_rest_body_tag(const char *name, const char *description, const char *category_id,
                     char **ret);
int vs_rest_body_list_tags(const char *category_id, char **ret);
int vs_rest_body_object(const struct vs_rest_object *obj, char **ret);

/* A category or tag as GET returns it. */
struct vs_rest_category {
    char id[VS_REST_ID_MAX + 1];
    char name[VS_REST_NAME_MAX + 1];
    char cardinality[16];
    bool vm_associable; /* associable_types is empty (any) or has VirtualMachine */
};
struct vs_rest_tag {
    char id[VS_REST_ID_MAX + 1];
    char name[VS_REST_NAME_MAX + 1];
    char category_id[VS_REST_ID_MAX + 1];
};

/* Response decoders of len bytes of body (need not be NUL-terminated).
 * Return 0, VMG_EPARSE (not JSON, not the shape, a value too long or an id
 * that vs_rest_valid_id refuses) or -ENOMEM; outputs are written on
 * success only. Lists: a missing or null "value" is an empty list (vcsim
 * leaves it out), *ret (free with free(), or vs_rest_ids_free) may then be
 * NULL. */
int vs_rest_parse_string(const char *body, size_t len, char *buf, size_t size); /* {"value":"s"} */
int vs_rest_parse_ids(const char *body, size_t len, char ***ret, size_t *ret_n);
void vs_rest_ids_free(char **ids, size_t n);
int vs_rest_parse_category(const char *body, size_t len, struct vs_rest_category *ret);
int vs_rest_parse_tag(const char *body, size_t len, struct vs_rest_tag *ret);
int vs_rest_parse_objects(const char *body, size_t len, struct vs_rest_object **ret, size_t *ret_n);

/* vs_rest_parse_error reads a vAPI error body, {"type":"com.vmware.vapi.std.errors.X",
 * "value":{"messages":[{"default_message":"..."}]}}: the type's last part
 * ("already_exists", "not_found", ...) into type and the first message into
 * msg (each "" when absent, cut to fit). Never fails: a body that is not
 * such JSON gives "" and "". */
void vs_rest_parse_error(const char *body, size_t len, char *type, size_t tsize, char *msg,
                         size_t msize);

#endif
