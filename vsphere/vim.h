/* vim.h: the vim25 methods the operator calls, as request builders and
 * response decoders over soap.h.
 *
 * Builders write a whole SOAP envelope into a new buffer (*ret_buf,
 * *ret_len; free it with soap_buf_free()) and return 0, -EINVAL for a
 * missing or invalid argument, or -ENOMEM; they write nothing on failure.
 * The session layer sends the buffer with SOAPAction soap_action(version)
 * and hands the reply to soap_parse(), then to a decoder below.
 *
 * Decoders read a parsed response and return 0 or VMG_EPARSE (the response
 * lacks what the method returns, or a value does not fit its bounds).
 */
#ifndef VMG_VIM_H
#define VMG_VIM_H

#include <stdbool.h>
#include <stddef.h>

#include "vsphere/soap.h"

/* A ManagedObjectReference, e.g. {"VirtualMachine", "vm-42"}. */
struct vim_moref {
    char type[64];
    char value[128];
};

/* vim_moref_set fills ref; -EINVAL when a part is empty or too long. */
int vim_moref_set(struct vim_moref *ref, const char *type, const char *value);

/* What RetrieveServiceContent returns that the operator uses. */
struct vim_service_content {
    struct vim_moref root_folder;
    struct vim_moref property_collector;
    struct vim_moref view_manager;
    struct vim_moref search_index;
    struct vim_moref session_manager;
    char api_version[32];   /* about.apiVersion, e.g. "8.0.2.0" */
    char api_type[32];      /* about.apiType: "VirtualCenter" or "HostAgent" */
    char instance_uuid[64]; /* about.instanceUuid; "" on ESX */
};

struct vim_user_session {
    char key[128];
    char user_name[256];
};

/* ---- Request builders ---- */

/* The ServiceInstance's ServiceContent; needs no session. */
int vim_req_retrieve_service_content(char **ret_buf, size_t *ret_len);

/* Login(userName, password) on the SessionManager. The password goes from
 * the caller's memory straight into the escaped output buffer, nowhere
 * else; wipe-and-free the buffer with soap_buf_free(). */
int vim_req_login(const struct vim_moref *session_manager, const char *user, const char *password,
                  char **ret_buf, size_t *ret_len);
int vim_req_logout(const struct vim_moref *session_manager, char **ret_buf, size_t *ret_len);

/* CurrentTime on the ServiceInstance: the cheap call that keeps a session
 * alive and tells whether it still is (NotAuthenticated when not). */
int vim_req_current_time(char **ret_buf, size_t *ret_len);

/* FindByInventoryPath on the SearchIndex, e.g. "DC0/vm/templates/t1". */
int vim_req_find_by_inventory_path(const struct vim_moref *search_index, const char *path,
                                   char **ret_buf, size_t *ret_len);

/* CreateContainerView over container listing the n types (e.g.
 * "VirtualMachine", "Folder"), recursively or not. */
int vim_req_create_container_view(const struct vim_moref *view_manager,
                                  const struct vim_moref *container, const char *const *types,
                                  size_t n, bool recursive, char **ret_buf, size_t *ret_len);
int vim_req_destroy_view(const struct vim_moref *view, char **ret_buf, size_t *ret_len);

/* CreatePropertyCollector: a collector of the session's own, so its filters
 * and versions are not shared with anyone else. */
int vim_req_create_property_collector(const struct vim_moref *pc, char **ret_buf, size_t *ret_len);
int vim_req_destroy_property_collector(const struct vim_moref *pc, char **ret_buf, size_t *ret_len);
/* CancelWaitForUpdates: the collector's long poll answers RequestCanceled. */
int vim_req_cancel_wait_for_updates(const struct vim_moref *pc, char **ret_buf, size_t *ret_len);

/* The property paths the inventory filter watches. */
extern const char *const vim_vm_paths[];
extern const size_t vim_vm_paths_n;

/* vim_vm_paths_with_marks fills paths (room for max) with what a watch
 * reads of a VM: vim_vm_paths, but of its extraConfig only the entries of
 * the mark keys (config.extraConfig["key"], written into mark_paths), not
 * the whole: other entries can be large or secret (a guest's cloud-init
 * user data) and would come back with every update of the VM. Empty keys
 * are skipped; a key that cannot be written in that form (a quote, a
 * backslash, too long) keeps the whole extraConfig. Returns the count. */
#define VIM_MARK_PATH_MAX 300
#define VIM_MARKS 3 /* the most mark keys */
size_t vim_vm_paths_with_marks(const char *const keys[VIM_MARKS],
                               char mark_paths[VIM_MARKS][VIM_MARK_PATH_MAX], const char **paths,
                               size_t max);
/* vim_vm_read_paths is vim_vm_paths_with_marks for a read of one VM
 * (RetrievePropertiesEx): the same and, last, guest.net (every NIC's
 * addresses), which is read, not watched. Returns the count. */
size_t vim_vm_read_paths(const char *const keys[VIM_MARKS],
                         char mark_paths[VIM_MARKS][VIM_MARK_PATH_MAX], const char **paths,
                         size_t max);
extern const char *const vim_folder_paths[];
extern const size_t vim_folder_paths_n;
extern const char *const vim_task_paths[];
extern const size_t vim_task_paths_n;

/* CreateFilter over a ContainerView: every VirtualMachine (vim_vm_paths)
 * and Folder (vim_folder_paths) the view lists, partialUpdates false. */
int vim_req_create_filter_view(const struct vim_moref *pc, const struct vim_moref *view,
                               char **ret_buf, size_t *ret_len);

/* CreateFilter over one Task: vim_task_paths (info.state, info.error,
 * info.result). */
int vim_req_create_filter_task(const struct vim_moref *pc, const struct vim_moref *task,
                               char **ret_buf, size_t *ret_len);
/* CreateListView of the n objs (none: an empty view), and
 * ModifyListView adding and removing objects; ModifyListView returns the
 * added objects the server could not find (vim_decode_morefs). */
int vim_req_create_list_view(const struct vim_moref *view_manager, const struct vim_moref *objs,
                             size_t n, char **ret_buf, size_t *ret_len);
int vim_req_modify_list_view(const struct vim_moref *view, const struct vim_moref *add, size_t nadd,
                             const struct vim_moref *remove, size_t nremove, char **ret_buf,
                             size_t *ret_len);

/* CreateFilter over the Tasks a ListView lists (the view itself skipped):
 * vim_task_paths of each. */
int vim_req_create_filter_task_view(const struct vim_moref *pc, const struct vim_moref *view,
                                    char **ret_buf, size_t *ret_len);
int vim_req_destroy_property_filter(const struct vim_moref *filter, char **ret_buf,
                                    size_t *ret_len);

/* WaitForUpdatesEx(version, {maxWaitSeconds, maxObjectUpdates}). version ""
 * or NULL asks for the full initial state; max_wait_seconds < 0 leaves the
 * wait unbounded (0 is a poll); max_object_updates <= 0 leaves it out. */
int vim_req_wait_for_updates_ex(const struct vim_moref *pc, const char *version,
                                int max_wait_seconds, int max_object_updates, char **ret_buf,
                                size_t *ret_len);

/* RetrievePropertiesEx of the n paths of one object (all of them when
 * n == 0), at most max_objects per page (0: server's choice). */
int vim_req_retrieve_properties_ex(const struct vim_moref *pc, const struct vim_moref *obj,
                                   const char *const *paths, size_t n, int max_objects,
                                   char **ret_buf, size_t *ret_len);
int vim_req_continue_retrieve_properties_ex(const struct vim_moref *pc, const char *token,
                                            char **ret_buf, size_t *ret_len);

int vim_req_create_folder(const struct vim_moref *parent, const char *name, char **ret_buf,
                          size_t *ret_len);

/* An extraConfig entry, OptionValue {key, value as xsd:string}. A secret
 * value never enters the request's XML tree (soap_add_secret); at most one
 * per request. */
struct vim_option {
    const char *key;
    const char *value;
    bool secret;
};

/* What a clone or a reconfigure sets. num_cpus and memory_mb of 0 are left
 * out; extra_config may be NULL when n_extra is 0. */
struct vim_config {
    /* The VM's instanceUuid (a clone's: vCenter keeps it unless another VM
     * has it); NULL: vCenter's choice, or unchanged. */
    const char *instance_uuid;
    int num_cpus;
    long long memory_mb;
    const struct vim_option *extra_config;
    size_t n_extra;
};

/* CloneVM_Task of template into folder as name, placed in pool (and on
 * datastore when not NULL), with config applied, powered on, not a
 * template. */
int vim_req_clone_vm(const struct vim_moref *template_vm, const struct vim_moref *folder,
                     const char *name, const struct vim_moref *pool,
                     const struct vim_moref *datastore, const struct vim_config *config,
                     char **ret_buf, size_t *ret_len);
int vim_req_power_on(const struct vim_moref *vm, char **ret_buf, size_t *ret_len);
int vim_req_power_off(const struct vim_moref *vm, char **ret_buf, size_t *ret_len);
int vim_req_reconfigure(const struct vim_moref *vm, const struct vim_config *config, char **ret_buf,
                        size_t *ret_len);

/* Destroy_Task on any managed entity (a VM, or a Folder with all it holds). */
int vim_req_destroy(const struct vim_moref *entity, char **ret_buf, size_t *ret_len);
int vim_req_cancel_task(const struct vim_moref *task, char **ret_buf, size_t *ret_len);

/* ---- Response decoders ---- */

int vim_decode_service_content(const soap_resp *resp, struct vim_service_content *ret);
int vim_decode_user_session(const soap_resp *resp, struct vim_user_session *ret);

/* vim_decode_moref reads a returnval that is a ManagedObjectReference: the
 * task of a *_Task method, or the result of FindByInventoryPath,
 * CreateFolder, CreateContainerView, CreatePropertyCollector, CreateFilter.
 * VMG_ENOTFOUND when there is no returnval (FindByInventoryPath found
 * nothing). */
int vim_decode_moref(const soap_resp *resp, struct vim_moref *ret);

/* vim_fault_object reads the managed object that a LocalizedMethodFault's
 * fault names in its <object> (DuplicateName: the object that holds the
 * name). VMG_ENOTFOUND when it names none, VMG_EPARSE when that is not a
 * valid reference. */
int vim_fault_object(const xmlNode *node, struct vim_moref *ret);

/* vim_decode_morefs calls cb for each ManagedObjectReference of an array
 * returnval (ModifyListView's objects not found), none when there is no
 * returnval. Returns the count, VMG_EPARSE (cb never called: the whole
 * array is checked first) or cb's negative return. */
int vim_decode_morefs(const soap_resp *resp, int (*cb)(void *arg, const struct vim_moref *ref),
                      void *arg);

/* vim_decode_text copies a returnval of a simple type (CurrentTime's
 * dateTime, SessionIsActive's boolean); VMG_ENOTFOUND when there is none. */
int vim_decode_text(const soap_resp *resp, char *buf, size_t size);

/* ---- UpdateSet (WaitForUpdatesEx) and RetrieveResult ---- */

enum vim_kind { VIM_ENTER, VIM_MODIFY, VIM_LEAVE };

enum vim_op { VIM_OP_ASSIGN, VIM_OP_ADD, VIM_OP_REMOVE, VIM_OP_INDIRECT_REMOVE };

enum vim_val {
    VIM_VAL_NONE,    /* no value: removed, or unset (e.g. info.error of a task that worked) */
    VIM_VAL_STRING,  /* xsd:string: str */
    VIM_VAL_INT,     /* xsd:int, long, short, byte: num */
    VIM_VAL_BOOL,    /* xsd:boolean: b */
    VIM_VAL_MOREF,   /* ManagedObjectReference: ref_type, ref_value */
    VIM_VAL_OPTIONS, /* ArrayOfOptionValue: walk node with vim_option_next() */
    VIM_VAL_FAULT,   /* LocalizedMethodFault: soap_method_fault(node, ...) */
    VIM_VAL_ENUM,    /* other text: enums (TaskInfoState, VirtualMachinePowerState), dates */
    VIM_VAL_OTHER,   /* another data object: node */
};

/* One PropertyChange (or a DynamicProperty of a RetrieveResult). Strings
 * point into the parsed response and live as long as it. */
struct vim_change {
    const char *name; /* property path, e.g. "runtime.powerState" */
    enum vim_op op;
    enum vim_val kind;
    const char *xsi_type; /* local part of the value's xsi:type, NULL if none */
    const char *str;      /* STRING, ENUM */
    long long num;        /* INT */
    bool b;               /* BOOL */
    const char *ref_type; /* MOREF */
    const char *ref_value;
    const xmlNode *node; /* the <val> element, NULL for VIM_VAL_NONE */
};

/* The changes of one object are delivered at most this many per callback;
 * an object with more comes in several calls, the later ones as
 * VIM_MODIFY. */
#define VIM_CHANGES_PER_CALL 16

/* One ObjectUpdate (or ObjectContent, as VIM_ENTER). */
struct vim_object_update {
    struct vim_moref filter; /* the PropertyFilter; empty for a RetrieveResult */
    enum vim_kind kind;
    struct vim_moref obj;
    const struct vim_change *changes;
    size_t n_changes;
};

/* Called once per object; a negative return stops the walk and is
 * returned by the decoder. */
typedef int (*vim_object_cb)(void *arg, const struct vim_object_update *update);

struct vim_update_set {
    char version[512]; /* pass to the next WaitForUpdatesEx */
    bool truncated;    /* more updates are waiting: call again at once */
};

/* vim_decode_update_set walks a WaitForUpdatesEx response: calls cb for
 * every object of every filterSet, then fills *ret. Returns 1 when there
 * was an UpdateSet, 0 when the wait ended without one (*ret untouched, cb
 * never called), VMG_EPARSE (cb never called: the whole set is checked
 * first), or cb's negative return (*ret untouched). The tree is walked in
 * place: memory use is the parsed response's plus a fixed ~4 KiB. */
int vim_decode_update_set(const soap_resp *resp, vim_object_cb cb, void *arg,
                          struct vim_update_set *ret);

/* vim_decode_retrieve_result walks a RetrievePropertiesEx or
 * ContinueRetrievePropertiesEx response: cb once per object (VIM_ENTER,
 * each property as a VIM_OP_ASSIGN change), then copies the paging token
 * into token ("" on the last page). Returns the number of objects,
 * VMG_ETOOBIG when the token does not fit, VMG_EPARSE (cb never called),
 * or cb's negative return. */
int vim_decode_retrieve_result(const soap_resp *resp, vim_object_cb cb, void *arg, char *token,
                               size_t token_size);

/* vim_option_next walks an ArrayOfOptionValue value (a change's node):
 * prev NULL gives the first OptionValue. Returns the OptionValue element
 * and sets *key and *value (each NULL when absent or not text), or NULL
 * at the end. */
const xmlNode *vim_option_next(const xmlNode *array, const xmlNode *prev, const char **key,
                               const char **value);

#endif
