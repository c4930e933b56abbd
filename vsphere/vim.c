/* vim.c: request builders and response decoders for the vim25 methods the
 * operator uses. Element order follows the vim25 schema's sequences, which
 * vCenter enforces. */
#include "vsphere/vim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/err.h"

const char *const vim_vm_paths[] = {
    "name",
    "parent",
    "runtime.powerState",
    "config.hardware.numCPU",
    "config.hardware.memoryMB",
    "config.template",
    "config.instanceUuid",
    /* The guest's primary address, as VMware Tools reports it: a short
     * string. Not guest.net, which alone lists every address: it is an
     * array of data objects (each NIC's network, MAC, DNS and prefix data)
     * sent whole at each change, and in a watch that a server re-collects
     * per change (vcsim does, for every VM) it is about a fifth of what is
     * copied of a VM. It is read instead (vim_vm_read_paths), once when the
     * primary address changes. No other guest.* path: they change all the
     * time (heartbeat, tools status, disks' free space). */
    "guest.ipAddress",
    "config.extraConfig",
};
const size_t vim_vm_paths_n = sizeof(vim_vm_paths) / sizeof(vim_vm_paths[0]);

size_t vim_vm_paths_with_marks(const char *const keys[VIM_MARKS],
                               char mark_paths[VIM_MARKS][VIM_MARK_PATH_MAX], const char **paths,
                               size_t max)
{
    static const char whole_ec[] = "config.extraConfig";
    bool whole = false;
    size_t n = 0, k = 0;

    for (size_t i = 0; i < VIM_MARKS; i++)
        if (keys[i] && (strpbrk(keys[i], "\"\\") || strlen(keys[i]) + 24 > VIM_MARK_PATH_MAX))
            whole = true;
    for (size_t i = 0; i < vim_vm_paths_n && n < max; i++)
        if (whole || strcmp(vim_vm_paths[i], whole_ec) != 0)
            paths[n++] = vim_vm_paths[i];
    for (size_t i = 0; i < VIM_MARKS && !whole && n < max; i++) {
        if (!keys[i] || !keys[i][0])
            continue;
        snprintf(mark_paths[k], VIM_MARK_PATH_MAX, "%s[\"%s\"]", whole_ec, keys[i]);
        paths[n++] = mark_paths[k++];
    }
    return n;
}

size_t vim_vm_read_paths(const char *const keys[VIM_MARKS],
                         char mark_paths[VIM_MARKS][VIM_MARK_PATH_MAX], const char **paths,
                         size_t max)
{
    size_t n;

    if (max == 0)
        return 0;
    n = vim_vm_paths_with_marks(keys, mark_paths, paths, max - 1);
    paths[n++] = "guest.net";
    return n;
}

const char *const vim_folder_paths[] = {"name", "parent"};
const size_t vim_folder_paths_n = sizeof(vim_folder_paths) / sizeof(vim_folder_paths[0]);

const char *const vim_task_paths[] = {"info.state", "info.error", "info.result"};
const size_t vim_task_paths_n = sizeof(vim_task_paths) / sizeof(vim_task_paths[0]);

int vim_moref_set(struct vim_moref *ref, const char *type, const char *value)
{
    size_t tl, vl;

    if (!ref || !type || !value)
        return -EINVAL;
    tl = strlen(type);
    vl = strlen(value);
    if (tl == 0 || vl == 0 || tl >= sizeof(ref->type) || vl >= sizeof(ref->value))
        return -EINVAL;
    memcpy(ref->type, type, tl + 1);
    memcpy(ref->value, value, vl + 1);
    return 0;
}

/* ---- Builders ---- */

/* ref_ok: ref is set, both parts non-empty and terminated. */
static bool ref_ok(const struct vim_moref *ref)
{
    return ref && ref->type[0] && ref->value[0] && memchr(ref->type, 0, sizeof(ref->type)) &&
           memchr(ref->value, 0, sizeof(ref->value));
}

static soap_req *start(const char *method, const struct vim_moref *this)
{
    return soap_req_new(method, this->type, this->value);
}

static xmlNode *add_ref(xmlNode *parent, const char *name, const struct vim_moref *ref)
{
    return soap_add_moref(parent, name, ref->type, ref->value);
}

/* finish serializes req (NULL: it could not be made) and frees it. */
static int finish(soap_req *req, char **ret_buf, size_t *ret_len)
{
    int r;

    if (!req)
        return -ENOMEM;
    r = soap_req_serialize(req, ret_buf, ret_len);
    soap_req_free(req);
    return r;
}

/* call_this builds a method whose only argument is _this. */
static int call_this(const char *method, const struct vim_moref *this, char **ret_buf,
                     size_t *ret_len)
{
    if (!ref_ok(this) || !ret_buf || !ret_len)
        return -EINVAL;
    return finish(start(method, this), ret_buf, ret_len);
}

static const struct vim_moref service_instance = {"ServiceInstance", "ServiceInstance"};

int vim_req_retrieve_service_content(char **ret_buf, size_t *ret_len)
{
    return call_this("RetrieveServiceContent", &service_instance, ret_buf, ret_len);
}

int vim_req_current_time(char **ret_buf, size_t *ret_len)
{
    return call_this("CurrentTime", &service_instance, ret_buf, ret_len);
}

int vim_req_login(const struct vim_moref *session_manager, const char *user, const char *password,
                  char **ret_buf, size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(session_manager) || !user || !*user || !password || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("Login", session_manager);
    soap_add_text(soap_req_method(req), "userName", user);
    soap_add_secret(soap_req_method(req), "password", password);
    return finish(req, ret_buf, ret_len);
}

int vim_req_logout(const struct vim_moref *session_manager, char **ret_buf, size_t *ret_len)
{
    return call_this("Logout", session_manager, ret_buf, ret_len);
}

int vim_req_find_by_inventory_path(const struct vim_moref *search_index, const char *path,
                                   char **ret_buf, size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(search_index) || !path || !*path || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("FindByInventoryPath", search_index);
    soap_add_text(soap_req_method(req), "inventoryPath", path);
    return finish(req, ret_buf, ret_len);
}

int vim_req_create_container_view(const struct vim_moref *view_manager,
                                  const struct vim_moref *container, const char *const *types,
                                  size_t n, bool recursive, char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    xmlNode *m;

    if (!ref_ok(view_manager) || !ref_ok(container) || (n && !types) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CreateContainerView", view_manager);
    m = soap_req_method(req);
    add_ref(m, "container", container);
    for (size_t i = 0; i < n; i++) {
        if (!types[i] || !*types[i]) {
            soap_req_free(req);
            return -EINVAL;
        }
        soap_add_text(m, "type", types[i]);
    }
    soap_add_bool(m, "recursive", recursive);
    return finish(req, ret_buf, ret_len);
}

int vim_req_destroy_view(const struct vim_moref *view, char **ret_buf, size_t *ret_len)
{
    return call_this("DestroyView", view, ret_buf, ret_len);
}

int vim_req_create_property_collector(const struct vim_moref *pc, char **ret_buf, size_t *ret_len)
{
    return call_this("CreatePropertyCollector", pc, ret_buf, ret_len);
}

int vim_req_destroy_property_collector(const struct vim_moref *pc, char **ret_buf, size_t *ret_len)
{
    return call_this("DestroyPropertyCollector", pc, ret_buf, ret_len);
}

int vim_req_cancel_wait_for_updates(const struct vim_moref *pc, char **ret_buf, size_t *ret_len)
{
    return call_this("CancelWaitForUpdates", pc, ret_buf, ret_len);
}

/* add_prop_spec adds a PropertySpec: type, all, pathSet... (all when n is
 * 0). */
static void add_prop_spec(xmlNode *spec, const char *type, const char *const *paths, size_t n)
{
    xmlNode *ps = soap_add_text(spec, "propSet", "");

    soap_add_text(ps, "type", type);
    soap_add_bool(ps, "all", n == 0);
    for (size_t i = 0; i < n; i++)
        soap_add_text(ps, "pathSet", paths[i]);
}

/* add_view_set adds the ObjectSpec of a filter over a view (of
 * view_type): the view skipped, the objects it lists (path "view"). */
static void add_view_set(xmlNode *spec, const struct vim_moref *view, const char *name,
                         const char *view_type)
{
    xmlNode *os = soap_add_text(spec, "objectSet", ""), *ts;

    add_ref(os, "obj", view);
    soap_add_bool(os, "skip", true);
    ts = soap_add_typed(os, "selectSet", "TraversalSpec");
    soap_add_text(ts, "name", name);
    soap_add_text(ts, "type", view_type);
    soap_add_text(ts, "path", "view");
    soap_add_bool(ts, "skip", false);
}

int vim_req_create_filter_view(const struct vim_moref *pc, const struct vim_moref *view,
                               char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    xmlNode *m, *spec;

    if (!ref_ok(pc) || !ref_ok(view) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CreateFilter", pc);
    m = soap_req_method(req);
    spec = soap_add_text(m, "spec", "");
    add_prop_spec(spec, "VirtualMachine", vim_vm_paths, vim_vm_paths_n);
    add_prop_spec(spec, "Folder", vim_folder_paths, vim_folder_paths_n);
    add_view_set(spec, view, "traverseView", "ContainerView");
    soap_add_bool(m, "partialUpdates", false);
    return finish(req, ret_buf, ret_len);
}

int vim_req_create_filter_task(const struct vim_moref *pc, const struct vim_moref *task,
                               char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    xmlNode *m, *spec, *os;

    if (!ref_ok(pc) || !ref_ok(task) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CreateFilter", pc);
    m = soap_req_method(req);
    spec = soap_add_text(m, "spec", "");
    add_prop_spec(spec, task->type, vim_task_paths, vim_task_paths_n);
    os = soap_add_text(spec, "objectSet", "");
    add_ref(os, "obj", task);
    soap_add_bool(os, "skip", false);
    soap_add_bool(m, "partialUpdates", false);
    return finish(req, ret_buf, ret_len);
}

/* add_refs adds each of the n refs as an element name. */
static int add_refs(xmlNode *parent, const char *name, const struct vim_moref *refs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!ref_ok(&refs[i]))
            return -EINVAL;
        add_ref(parent, name, &refs[i]);
    }
    return 0;
}

int vim_req_create_list_view(const struct vim_moref *view_manager, const struct vim_moref *objs,
                             size_t n, char **ret_buf, size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(view_manager) || (n && !objs) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CreateListView", view_manager);
    if (req && add_refs(soap_req_method(req), "obj", objs, n) < 0) {
        soap_req_free(req);
        return -EINVAL;
    }
    return finish(req, ret_buf, ret_len);
}

int vim_req_modify_list_view(const struct vim_moref *view, const struct vim_moref *add, size_t nadd,
                             const struct vim_moref *remove, size_t nremove, char **ret_buf,
                             size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(view) || (nadd && !add) || (nremove && !remove) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("ModifyListView", view);
    if (req && (add_refs(soap_req_method(req), "add", add, nadd) < 0 ||
                add_refs(soap_req_method(req), "remove", remove, nremove) < 0)) {
        soap_req_free(req);
        return -EINVAL;
    }
    return finish(req, ret_buf, ret_len);
}

int vim_req_create_filter_task_view(const struct vim_moref *pc, const struct vim_moref *view,
                                    char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    xmlNode *m, *spec;

    if (!ref_ok(pc) || !ref_ok(view) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CreateFilter", pc);
    m = soap_req_method(req);
    spec = soap_add_text(m, "spec", "");
    add_prop_spec(spec, "Task", vim_task_paths, vim_task_paths_n);
    add_view_set(spec, view, "traverseTasks", "ListView");
    soap_add_bool(m, "partialUpdates", false);
    return finish(req, ret_buf, ret_len);
}

int vim_req_destroy_property_filter(const struct vim_moref *filter, char **ret_buf, size_t *ret_len)
{
    return call_this("DestroyPropertyFilter", filter, ret_buf, ret_len);
}

int vim_req_wait_for_updates_ex(const struct vim_moref *pc, const char *version,
                                int max_wait_seconds, int max_object_updates, char **ret_buf,
                                size_t *ret_len)
{
    soap_req *req;
    xmlNode *m, *opt;

    if (!ref_ok(pc) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("WaitForUpdatesEx", pc);
    m = soap_req_method(req);
    if (version && *version)
        soap_add_text(m, "version", version);
    opt = soap_add_text(m, "options", "");
    if (max_wait_seconds >= 0)
        soap_add_int(opt, "maxWaitSeconds", max_wait_seconds);
    if (max_object_updates > 0)
        soap_add_int(opt, "maxObjectUpdates", max_object_updates);
    return finish(req, ret_buf, ret_len);
}

int vim_req_retrieve_properties_ex(const struct vim_moref *pc, const struct vim_moref *obj,
                                   const char *const *paths, size_t n, int max_objects,
                                   char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    xmlNode *m, *spec, *os, *opt;

    if (!ref_ok(pc) || !ref_ok(obj) || (n && !paths) || !ret_buf || !ret_len)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!paths[i] || !*paths[i])
            return -EINVAL;
    req = start("RetrievePropertiesEx", pc);
    m = soap_req_method(req);
    spec = soap_add_text(m, "specSet", "");
    add_prop_spec(spec, obj->type, paths, n);
    os = soap_add_text(spec, "objectSet", "");
    add_ref(os, "obj", obj);
    soap_add_bool(os, "skip", false);
    opt = soap_add_text(m, "options", "");
    if (max_objects > 0)
        soap_add_int(opt, "maxObjects", max_objects);
    return finish(req, ret_buf, ret_len);
}

int vim_req_continue_retrieve_properties_ex(const struct vim_moref *pc, const char *token,
                                            char **ret_buf, size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(pc) || !token || !*token || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("ContinueRetrievePropertiesEx", pc);
    soap_add_text(soap_req_method(req), "token", token);
    return finish(req, ret_buf, ret_len);
}

int vim_req_create_folder(const struct vim_moref *parent, const char *name, char **ret_buf,
                          size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(parent) || !name || !*name || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CreateFolder", parent);
    soap_add_text(soap_req_method(req), "name", name);
    return finish(req, ret_buf, ret_len);
}

static bool config_ok(const struct vim_config *c)
{
    if (!c)
        return true;
    if (c->num_cpus < 0 || c->memory_mb < 0 || (c->n_extra && !c->extra_config) ||
        (c->instance_uuid && !*c->instance_uuid))
        return false;
    for (size_t i = 0; i < c->n_extra; i++)
        if (!c->extra_config[i].key || !*c->extra_config[i].key || !c->extra_config[i].value)
            return false;
    return true;
}

/* add_config_spec adds a VirtualMachineConfigSpec named name with what c
 * sets: instanceUuid, numCPUs, memoryMB, extraConfig, in the schema's
 * order. */
static void add_config_spec(xmlNode *parent, const char *name, const struct vim_config *c)
{
    xmlNode *spec = soap_add_typed(parent, name, "VirtualMachineConfigSpec");

    if (c->instance_uuid)
        soap_add_text(spec, "instanceUuid", c->instance_uuid);
    if (c->num_cpus > 0)
        soap_add_int(spec, "numCPUs", c->num_cpus);
    if (c->memory_mb > 0)
        soap_add_int(spec, "memoryMB", c->memory_mb);
    for (size_t i = 0; i < c->n_extra; i++) {
        xmlNode *ov = soap_add_typed(spec, "extraConfig", "OptionValue");
        soap_add_text(ov, "key", c->extra_config[i].key);
        if (c->extra_config[i].secret)
            soap_add_typed_secret(ov, "value", "xsd:string", c->extra_config[i].value);
        else
            soap_add_typed_text(ov, "value", "xsd:string", c->extra_config[i].value);
    }
}

int vim_req_clone_vm(const struct vim_moref *template_vm, const struct vim_moref *folder,
                     const char *name, const struct vim_moref *pool,
                     const struct vim_moref *datastore, const struct vim_config *config,
                     char **ret_buf, size_t *ret_len)
{
    soap_req *req;
    xmlNode *m, *spec, *loc;

    if (!ref_ok(template_vm) || !ref_ok(folder) || !name || !*name || !ref_ok(pool) ||
        (datastore && !ref_ok(datastore)) || !config_ok(config) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("CloneVM_Task", template_vm);
    m = soap_req_method(req);
    add_ref(m, "folder", folder);
    soap_add_text(m, "name", name);
    spec = soap_add_text(m, "spec", "");
    loc = soap_add_text(spec, "location", "");
    if (datastore)
        add_ref(loc, "datastore", datastore);
    add_ref(loc, "pool", pool);
    soap_add_bool(spec, "template", false);
    if (config)
        add_config_spec(spec, "config", config);
    soap_add_bool(spec, "powerOn", true);
    return finish(req, ret_buf, ret_len);
}

int vim_req_power_on(const struct vim_moref *vm, char **ret_buf, size_t *ret_len)
{
    return call_this("PowerOnVM_Task", vm, ret_buf, ret_len);
}

int vim_req_power_off(const struct vim_moref *vm, char **ret_buf, size_t *ret_len)
{
    return call_this("PowerOffVM_Task", vm, ret_buf, ret_len);
}

int vim_req_reconfigure(const struct vim_moref *vm, const struct vim_config *config, char **ret_buf,
                        size_t *ret_len)
{
    soap_req *req;

    if (!ref_ok(vm) || !config || !config_ok(config) || !ret_buf || !ret_len)
        return -EINVAL;
    req = start("ReconfigVM_Task", vm);
    add_config_spec(soap_req_method(req), "spec", config);
    return finish(req, ret_buf, ret_len);
}

int vim_req_destroy(const struct vim_moref *entity, char **ret_buf, size_t *ret_len)
{
    return call_this("Destroy_Task", entity, ret_buf, ret_len);
}

int vim_req_cancel_task(const struct vim_moref *task, char **ret_buf, size_t *ret_len)
{
    return call_this("CancelTask", task, ret_buf, ret_len);
}

/* ---- Decoders ---- */

/* attr_ref returns the value of node's unqualified attribute name, or
 * NULL. */
static const char *attr_ref(const xmlNode *node, const char *name)
{
    xmlAttr *a;

    if (!node || node->type != XML_ELEMENT_NODE)
        return NULL;
    a = xmlHasNsProp(node, BAD_CAST name, NULL);
    if (!a || a->type != XML_ATTRIBUTE_NODE || !a->children || a->children->next ||
        a->children->type != XML_TEXT_NODE || !a->children->content)
        return NULL;
    return (const char *)a->children->content;
}

/* moref_of reads a ManagedObjectReference element. */
static int moref_of(const xmlNode *node, struct vim_moref *ret)
{
    const char *type = attr_ref(node, "type"), *value = soap_text_ref(node);

    if (!type || !value || vim_moref_set(ret, type, value) < 0)
        return VMG_EPARSE;
    return 0;
}

int vim_fault_object(const xmlNode *node, struct vim_moref *ret)
{
    const xmlNode *obj = soap_child(soap_child(node, "fault"), "object");

    return obj ? moref_of(obj, ret) : VMG_ENOTFOUND;
}

/* text_of copies a required text child named name into buf. */
static int text_of(const xmlNode *parent, const char *name, char *buf, size_t size)
{
    const xmlNode *n = soap_child(parent, name);
    const char *t = soap_text_ref(n);
    size_t len;

    if (!t)
        return VMG_EPARSE;
    len = strlen(t);
    if (len >= size)
        return VMG_EPARSE;
    memcpy(buf, t, len + 1);
    return 0;
}

int vim_decode_service_content(const soap_resp *resp, struct vim_service_content *ret)
{
    const xmlNode *rv = soap_resp_returnval(resp), *about;
    struct vim_service_content sc;

    if (!rv || !ret)
        return VMG_EPARSE;
    memset(&sc, 0, sizeof(sc));
    about = soap_child(rv, "about");
    if (moref_of(soap_child(rv, "rootFolder"), &sc.root_folder) < 0 ||
        moref_of(soap_child(rv, "propertyCollector"), &sc.property_collector) < 0 ||
        moref_of(soap_child(rv, "viewManager"), &sc.view_manager) < 0 ||
        moref_of(soap_child(rv, "searchIndex"), &sc.search_index) < 0 ||
        moref_of(soap_child(rv, "sessionManager"), &sc.session_manager) < 0 ||
        text_of(about, "apiVersion", sc.api_version, sizeof(sc.api_version)) < 0 ||
        !sc.api_version[0])
        return VMG_EPARSE;
    if (soap_child(about, "apiType") &&
        text_of(about, "apiType", sc.api_type, sizeof(sc.api_type)) < 0)
        return VMG_EPARSE;
    if (soap_child(about, "instanceUuid") &&
        text_of(about, "instanceUuid", sc.instance_uuid, sizeof(sc.instance_uuid)) < 0)
        return VMG_EPARSE;
    *ret = sc;
    return 0;
}

int vim_decode_user_session(const soap_resp *resp, struct vim_user_session *ret)
{
    const xmlNode *rv = soap_resp_returnval(resp);
    struct vim_user_session us;

    if (!rv || !ret)
        return VMG_EPARSE;
    memset(&us, 0, sizeof(us));
    if (text_of(rv, "key", us.key, sizeof(us.key)) < 0 ||
        text_of(rv, "userName", us.user_name, sizeof(us.user_name)) < 0 || !us.key[0])
        return VMG_EPARSE;
    *ret = us;
    return 0;
}

int vim_decode_moref(const soap_resp *resp, struct vim_moref *ret)
{
    const xmlNode *rv = soap_resp_returnval(resp);
    struct vim_moref ref;

    if (!resp || !ret)
        return VMG_EPARSE;
    if (!rv)
        return VMG_ENOTFOUND;
    if (moref_of(rv, &ref) < 0)
        return VMG_EPARSE;
    *ret = ref;
    return 0;
}

int vim_decode_morefs(const soap_resp *resp, int (*cb)(void *arg, const struct vim_moref *ref),
                      void *arg)
{
    const xmlNode *rv = soap_resp_returnval(resp);
    struct vim_moref ref;
    int n = 0, r;

    if (!resp || !cb)
        return VMG_EPARSE;
    /* Checked whole first, so that cb sees a valid list or nothing. */
    for (const xmlNode *x = rv; x; x = soap_next(x, "returnval"))
        if (moref_of(x, &ref) < 0)
            return VMG_EPARSE;
    for (const xmlNode *x = rv; x; x = soap_next(x, "returnval")) {
        (void)moref_of(x, &ref);
        r = cb(arg, &ref);
        if (r < 0)
            return r;
        n++;
    }
    return n;
}

int vim_decode_text(const soap_resp *resp, char *buf, size_t size)
{
    const xmlNode *rv = soap_resp_returnval(resp);
    int r;

    if (!resp || !buf || size == 0)
        return -EINVAL;
    if (!rv)
        return VMG_ENOTFOUND;
    r = soap_text(rv, buf, size);
    return r < 0 ? r : 0;
}

/* ---- UpdateSet and RetrieveResult ---- */

static int op_of(const xmlNode *node, enum vim_op *ret)
{
    const char *t = soap_text_ref(node);

    if (!t)
        return VMG_EPARSE;
    if (strcmp(t, "assign") == 0)
        *ret = VIM_OP_ASSIGN;
    else if (strcmp(t, "add") == 0)
        *ret = VIM_OP_ADD;
    else if (strcmp(t, "remove") == 0)
        *ret = VIM_OP_REMOVE;
    else if (strcmp(t, "indirectRemove") == 0)
        *ret = VIM_OP_INDIRECT_REMOVE;
    else
        return VMG_EPARSE;
    return 0;
}

static int kind_of(const xmlNode *node, enum vim_kind *ret)
{
    const char *t = soap_text_ref(node);

    if (!t)
        return VMG_EPARSE;
    if (strcmp(t, "enter") == 0)
        *ret = VIM_ENTER;
    else if (strcmp(t, "modify") == 0)
        *ret = VIM_MODIFY;
    else if (strcmp(t, "leave") == 0)
        *ret = VIM_LEAVE;
    else
        return VMG_EPARSE;
    return 0;
}

/* val_of decodes a change's <val> (NULL: no value) into c. */
static int val_of(const xmlNode *val, struct vim_change *c)
{
    const char *t;
    struct soap_fault f;

    c->node = val;
    c->xsi_type = soap_xsi_type(val);
    if (!val) {
        c->kind = VIM_VAL_NONE;
        return 0;
    }
    t = c->xsi_type;
    if (!t || strcmp(t, "string") == 0) {
        c->kind = VIM_VAL_STRING;
        c->str = soap_text_ref(val);
        if (!c->str) {
            if (t)
                return VMG_EPARSE;
            c->kind = VIM_VAL_OTHER; /* untyped and structured */
        }
    } else if (strcmp(t, "int") == 0 || strcmp(t, "long") == 0 || strcmp(t, "short") == 0 ||
               strcmp(t, "byte") == 0) {
        c->kind = VIM_VAL_INT;
        if (soap_int(val, &c->num) < 0)
            return VMG_EPARSE;
    } else if (strcmp(t, "boolean") == 0) {
        c->kind = VIM_VAL_BOOL;
        if (soap_bool(val, &c->b) < 0)
            return VMG_EPARSE;
    } else if (strcmp(t, "ManagedObjectReference") == 0) {
        c->kind = VIM_VAL_MOREF;
        c->ref_type = attr_ref(val, "type");
        c->ref_value = soap_text_ref(val);
        if (!c->ref_type || !*c->ref_type || !c->ref_value || !*c->ref_value)
            return VMG_EPARSE;
    } else if (strcmp(t, "ArrayOfOptionValue") == 0) {
        c->kind = VIM_VAL_OPTIONS;
    } else if (strcmp(t, "LocalizedMethodFault") == 0) {
        c->kind = VIM_VAL_FAULT;
        if (soap_method_fault(val, &f) < 0)
            return VMG_EPARSE;
    } else if ((c->str = soap_text_ref(val)) != NULL) {
        c->kind = VIM_VAL_ENUM;
    } else {
        c->kind = VIM_VAL_OTHER;
    }
    return 0;
}

/* walk_object decodes one ObjectUpdate (changes in <changeSet>) or
 * ObjectContent (properties in <propSet>) and calls cb, in batches of
 * VIM_CHANGES_PER_CALL changes; with cb NULL it only decodes. */
static int walk_object(const xmlNode *os, const struct vim_moref *filter, bool content,
                       vim_object_cb cb, void *arg)
{
    struct vim_change changes[VIM_CHANGES_PER_CALL];
    struct vim_object_update u;
    const char *set = content ? "propSet" : "changeSet";
    const xmlNode *cs;
    size_t n = 0;
    int r;

    memset(&u, 0, sizeof(u));
    if (filter)
        u.filter = *filter;
    if (content)
        u.kind = VIM_ENTER;
    else if (kind_of(soap_child(os, "kind"), &u.kind) < 0)
        return VMG_EPARSE;
    if (moref_of(soap_child(os, "obj"), &u.obj) < 0)
        return VMG_EPARSE;
    u.changes = changes;
    for (cs = soap_child(os, set); cs; cs = soap_next(cs, set)) {
        struct vim_change *c;
        if (n == VIM_CHANGES_PER_CALL) {
            u.n_changes = n;
            r = cb ? cb(arg, &u) : 0;
            if (r < 0)
                return r;
            if (u.kind == VIM_ENTER)
                u.kind = VIM_MODIFY;
            n = 0;
        }
        c = &changes[n];
        memset(c, 0, sizeof(*c));
        c->name = soap_text_ref(soap_child(cs, "name"));
        if (!c->name || !*c->name)
            return VMG_EPARSE;
        if (content)
            c->op = VIM_OP_ASSIGN;
        else if (op_of(soap_child(cs, "op"), &c->op) < 0)
            return VMG_EPARSE;
        if (val_of(soap_child(cs, "val"), c) < 0)
            return VMG_EPARSE;
        n++;
    }
    u.n_changes = n;
    r = cb ? cb(arg, &u) : 0;
    return r < 0 ? r : 0;
}

/* walk_update_set runs walk_object over every object of the UpdateSet rv;
 * with cb NULL it only checks that all of them decode. */
static int walk_update_set(const xmlNode *rv, vim_object_cb cb, void *arg)
{
    struct vim_moref filter;

    for (const xmlNode *fs = soap_child(rv, "filterSet"); fs; fs = soap_next(fs, "filterSet")) {
        if (moref_of(soap_child(fs, "filter"), &filter) < 0)
            return VMG_EPARSE;
        for (const xmlNode *os = soap_child(fs, "objectSet"); os; os = soap_next(os, "objectSet")) {
            int r = walk_object(os, &filter, false, cb, arg);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

int vim_decode_update_set(const soap_resp *resp, vim_object_cb cb, void *arg,
                          struct vim_update_set *ret)
{
    const xmlNode *rv = soap_resp_returnval(resp), *tr;
    const char *version;
    bool truncated = false;
    int r;

    if (!resp || !cb || !ret)
        return -EINVAL;
    if (!rv)
        return 0;
    version = soap_text_ref(soap_child(rv, "version"));
    if (!version || !*version || strlen(version) >= sizeof(ret->version))
        return VMG_EPARSE;
    tr = soap_child(rv, "truncated");
    if (tr && soap_bool(tr, &truncated) < 0)
        return VMG_EPARSE;
    /* All or nothing: the callbacks run only for a set that decodes
     * completely, so a consumer never applies half of one. */
    r = walk_update_set(rv, NULL, NULL);
    if (r < 0)
        return r;
    r = walk_update_set(rv, cb, arg);
    if (r < 0)
        return r;
    memcpy(ret->version, version, strlen(version) + 1);
    ret->truncated = truncated;
    return 1;
}

int vim_decode_retrieve_result(const soap_resp *resp, vim_object_cb cb, void *arg, char *token,
                               size_t token_size)
{
    const xmlNode *rv = soap_resp_returnval(resp);
    const char *tok = "";
    int n = 0;

    if (!resp || !cb || !token || token_size == 0)
        return -EINVAL;
    if (rv) {
        if (soap_child(rv, "token")) {
            tok = soap_text_ref(soap_child(rv, "token"));
            if (!tok)
                return VMG_EPARSE;
        }
        if (strlen(tok) >= token_size)
            return VMG_ETOOBIG;
        /* Two passes, as for an UpdateSet: check all, then deliver. */
        for (int pass = 0; pass < 2; pass++) {
            n = 0;
            for (const xmlNode *obj = soap_child(rv, "objects"); obj;
                 obj = soap_next(obj, "objects")) {
                int r = walk_object(obj, NULL, true, pass ? cb : NULL, arg);
                if (r < 0)
                    return r;
                if (n < INT32_MAX)
                    n++;
            }
        }
    }
    memcpy(token, tok, strlen(tok) + 1);
    return n;
}

const xmlNode *vim_option_next(const xmlNode *array, const xmlNode *prev, const char **key,
                               const char **value)
{
    const xmlNode *ov = prev ? soap_next(prev, NULL) : soap_child(array, NULL);

    if (!ov)
        return NULL;
    if (key)
        *key = soap_text_ref(soap_child(ov, "key"));
    if (value)
        *value = soap_text_ref(soap_child(ov, "value"));
    return ov;
}
