/* finder.h: finding vCenter objects by inventory path or by listing a
 * container, the way an administrator names them (govc's finder, in
 * spirit), and finding the VM template a user names, within bounds.
 *
 * vs_find_path resolves "/DC0/vm/templates/t1" (absolute: SearchIndex
 * FindByInventoryPath) or "templates/t1" relative to a start object
 * (SearchIndex FindChild, one call per component). vs_find_list lists the
 * objects of one kind below a container (a recursive ContainerView read
 * with RetrievePropertiesEx, paged, then destroyed), with the few
 * properties the placement and template lookups need. vs_find_get reads
 * those properties of one object.
 *
 * Each returns at once; the callback runs once, later, on the loop. A
 * finder handle is valid until its callback returns; vs_find_cancel ends
 * it early (the callback runs then with VMG_ECANCELED).
 */
#ifndef VMG_VS_FINDER_H
#define VMG_VS_FINDER_H

#include <stdbool.h>
#include <stddef.h>

#include "vsphere/invcache.h"
#include "vsphere/session.h"
#include "vsphere/vim.h"

#define VS_PATH_MAX 1024           /* bytes of an inventory path, NUL included */
#define VS_FIND_MAX_DEFAULT 100000 /* objects one listing may return */

typedef struct vs_find vs_find;

enum vs_list_kind {
    VS_LIST_DATACENTERS, /* Datacenter: name, parent, vmFolder, hostFolder */
    VS_LIST_POOLS,       /* ResourcePool and ComputeResource: name, parent */
    VS_LIST_DATASTORES,  /* Datastore: name */
    VS_LIST_VMS,         /* VirtualMachine: name, parent, config.template */
    VS_LIST_VM_TREE,     /* VS_LIST_VMS's, and Folder: name, parent */
};

/* One object found, with what its kind reads ("" / false otherwise). */
struct vs_found {
    struct vim_moref ref;
    char name[VS_NAME_MAX];
    struct vim_moref parent;
    struct vim_moref vm_folder;
    struct vim_moref host_folder;
    bool is_template;
};

/* err 0: ref found. VMG_ENOTFOUND: nothing there. Others: the call failed
 * (msg says why). ref is valid during the call. */
typedef void (*vs_path_cb)(void *data, int err, const char *msg, const struct vim_moref *ref);

/* err 0: found[0..n) (valid during the call). */
typedef void (*vs_list_cb)(void *data, int err, const char *msg, const struct vs_found *found,
                           size_t n);

/* vs_find_path resolves path: absolute when it begins with '/', else
 * relative to start (which must then be given). Empty components ("a//b")
 * are skipped. Returns 0, or -EINVAL / -ENOMEM / a vs_call error (the
 * callback is then never called). */
int vs_find_path(vs_session *s, const struct vim_moref *start, const char *path, vs_path_cb cb,
                 void *data, vs_find **ret);

/* vs_find_list lists the objects of kind below container (recursively),
 * at most max (0: VS_FIND_MAX_DEFAULT; more fails with VMG_ETOOBIG). */
int vs_find_list(vs_session *s, const struct vim_moref *container, enum vs_list_kind kind,
                 size_t max, vs_list_cb cb, void *data, vs_find **ret);

/* vs_find_get reads the properties of kind of the one object ref; the
 * callback gets n == 1, or VMG_ENOTFOUND. */
int vs_find_get(vs_session *s, const struct vim_moref *ref, enum vs_list_kind kind, vs_list_cb cb,
                void *data, vs_find **ret);

void vs_find_cancel(vs_find *f);

/* ---- Templates ----
 *
 * vs_find_template finds the VM template a user names, only within one
 * datacenter's VM folder tree and never inside one folder of it (exclude:
 * the operator's own, where the VMs it made live). q->name is
 *   - a path, "sub/t1" below the VM folder or "/DC0/vm/sub/t1": walked
 *     down from the VM folder with FindChild, one component at a time (an
 *     absolute path must begin with the datacenter's path and "vm"); the
 *     walk stops, refused, where it would enter exclude;
 *   - a name, "t1": the VM folder's child of that name when it is a
 *     template, else the one template of that name in the VM folder tree
 *     outside exclude (a VS_LIST_VM_TREE listing, which vs_template_choose
 *     decides on).
 * What is found must be a VirtualMachine whose config.template is true.
 * The callback's err: 0 (ref is the template); VMG_ENOTFOUND (nothing of
 * that name or path in the datacenter); VMG_EAMBIGUOUS (several templates
 * of that name); VMG_ECONFIG (refused: msg says what was found and why,
 * e.g. "template \"x\" is a virtual machine, not a template"); or a
 * request's error. */
struct vs_template_query {
    const char *name;                  /* a name, or a path (relative to vm_folder, or absolute) */
    const struct vim_moref *vm_folder; /* the datacenter's VM folder: the bounds of the search */
    const char *dc_path;               /* the datacenter's inventory path, "/DC0" */
    const struct vim_moref *exclude;   /* NULL, or a folder whose subtree is refused */
    const char *exclude_label;         /* exclude in messages: "the operator's folder /DC0/vm/x" */
};

/* vs_find_template starts the lookup. Returns 0; VMG_ECONFIG when q->name
 * is refused as it is written (an absolute path outside the datacenter's
 * VM folder, any path when exclude is the VM folder itself, or a name or
 * path component longer than vCenter allows), with a sentence in err; or
 * -EINVAL / -ENOMEM / a vs_call error. The callback is never called when
 * it returns an error. */
int vs_find_template(vs_session *s, const struct vs_template_query *q, vs_path_cb cb, void *data,
                     vs_find **ret, char *err, size_t errlen);

/* vs_template_choose picks the template named q->name (a name, not a path)
 * among found[0..n), a VS_LIST_VM_TREE listing below q->vm_folder: the one
 * template of that name whose folders lead up to the VM folder without
 * passing q->exclude. Else, with a sentence in msg: VMG_EAMBIGUOUS
 * (several), VMG_ECONFIG (only virtual machines that are not templates, or
 * VMs inside exclude, or outside any folder, have that name) or
 * VMG_ENOTFOUND. A pure function; -ENOMEM / -EINVAL too. */
int vs_template_choose(const struct vs_template_query *q, const struct vs_found *found, size_t n,
                       struct vim_moref *ret_ref, char *msg, size_t msglen);

/* ---- Request builders beyond vim.h ---- */

/* FindChild(entity, name) on the SearchIndex. */
int vs_build_find_child(const struct vim_moref *search_index, const struct vim_moref *entity,
                        const char *name, char **ret_buf, size_t *ret_len);

/* RetrievePropertiesEx over every object a ContainerView lists, reading
 * the paths of kind. */
int vs_build_retrieve_view(const struct vim_moref *pc, const struct vim_moref *view,
                           enum vs_list_kind kind, char **ret_buf, size_t *ret_len);

/* vs_fire_and_forget sends buf and ignores the answer (for DestroyView and
 * the like). Returns vs_call's code. */
int vs_fire_and_forget(vs_session *s, const char *method, char *buf, size_t len);

#endif
