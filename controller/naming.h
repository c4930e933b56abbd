/* naming.h: the vCenter names of a VmGroup's folder and VMs, and the keys of
 * the marks the operator leaves on the VMs it creates.
 *
 * Folder: one folder per VmGroup under the operator's root folder. The map
 * (namespace, name) -> folder name is injective whatever the inputs, and the
 * result is at most NAMING_MAX_LEN bytes (vCenter's limit on a name):
 *   - "<namespace>_<name>" when both are valid Kubernetes names (namespace
 *     [a-z0-9-], name [a-z0-9.-], both non-empty, so the one '_' splits them
 *     back) and the whole fits;
 *   - otherwise "<prefix>__<hash>": prefix is "<namespace>_<name>" with upper
 *     case lowered and every other byte outside [a-z0-9.-] replaced by '-',
 *     cut to fit, and hash is the
 *     first NAMING_FOLDER_HASH_LEN hex digits of SHA-256(namespace NUL name).
 *     A plain name never holds "__", so the two forms never meet.
 *
 * VM: "<name>-<slot>", slot a non-negative int. When name is not a valid
 * Kubernetes name or the whole would exceed NAMING_MAX_LEN, the name part is
 * cut (and sanitized as above) and followed by a hash of the pair:
 * "<cut name>-<hash8>-<slot>". VM names always begin with (a prefix of) the group's name, are
 * deterministic (a clone re-issued after a crash collides by name), and different slots of one
 * group never share a name.
 *
 * No folder or VM name contains '%', '/' or '\\' (vCenter escapes them in
 * paths).
 *
 * Tag: every VM of a group carries the group's tag, in the operator's tag
 * category NAMING_TAG_CATEGORY (vsphere/rest takes both names as inputs). The
 * map (namespace, name) -> tag name is injective and the result at most
 * NAMING_MAX_LEN bytes:
 *   - "<namespace>/<name>" when both are valid Kubernetes names (neither
 *     holds '/', so the one '/' splits them back) and the whole fits;
 *   - otherwise "<prefix>~<hash>": prefix is "<namespace>/<name>" with upper
 *     case lowered and every byte outside [a-z0-9./-] made '-', cut to fit,
 *     and hash the first NAMING_TAG_HASH_LEN hex digits of SHA-256(namespace
 *     NUL name). Plain names never hold '~', so the two forms never meet.
 */
#ifndef VMG_NAMING_H
#define VMG_NAMING_H

#include <stddef.h>

#define NAMING_MAX_LEN 80                    /* vCenter's longest inventory name */
#define NAMING_BUF_SIZE (NAMING_MAX_LEN + 1) /* a buffer that fits any name */
#define NAMING_FOLDER_HASH_LEN 16            /* hex digits of the folder hash */
#define NAMING_VM_HASH_LEN 8                 /* hex digits of the VM-name hash */
#define NAMING_TAG_HASH_LEN 16               /* hex digits of the tag-name hash */
#define NAMING_K8S_NAME_MAX 253              /* longest Kubernetes name */

/* The tag category of the groups' tags, and its description. */
#define NAMING_TAG_CATEGORY "vmgroup-operator"
#define NAMING_TAG_CATEGORY_DESCRIPTION "VmGroups of vmgroup-operator: one tag per group"

/* The extraConfig keys of the marks set on every VM at clone time: the
 * owning VmGroup's UID, the template the VM was cloned from, and the
 * instanceUuid given to the VM by its clone (a copy of the VM carries the
 * marks, not that instanceUuid). */
#define NAMING_MARK_UID_KEY "vmgroup.codeconnect.vmworld.com.uid"
#define NAMING_MARK_TEMPLATE_KEY "vmgroup.codeconnect.vmworld.com.template"
#define NAMING_MARK_INSTANCE_KEY "vmgroup.codeconnect.vmworld.com.instance-uuid"

/* naming_folder writes the folder name of VmGroup ns/name into buf (NUL
 * terminated). Returns its length, -EINVAL when an argument is NULL or size
 * < NAMING_BUF_SIZE, or -EIO when OpenSSL fails to hash. */
int naming_folder(const char *ns, const char *name, char *buf, size_t size);

/* naming_vm writes the name of replica slot of VmGroup ns/name into buf.
 * Returns its length, -EINVAL for a NULL argument, slot < 0 or size <
 * NAMING_BUF_SIZE, or -EIO when OpenSSL fails to hash. */
int naming_vm(const char *ns, const char *name, int slot, char *buf, size_t size);

/* naming_vm_slot returns the slot k such that naming_vm(ns, name, k) is
 * vm_name, or -EINVAL when vm_name is not a replica name of that group
 * (including names with leading zeros or out-of-range numbers). */
int naming_vm_slot(const char *ns, const char *name, const char *vm_name);

/* naming_tag writes the tag name of VmGroup ns/name into buf. Returns its
 * length, -EINVAL (a NULL argument, ns or name empty or longer than
 * NAMING_K8S_NAME_MAX, size < NAMING_BUF_SIZE) or -EIO (OpenSSL failed). */
int naming_tag(const char *ns, const char *name, char *buf, size_t size);

/* naming_tag_description writes the description of that tag, "VMs of
 * VmGroup <ns>/<name>", into buf. Returns its length, or -EINVAL (a NULL
 * argument, or it does not fit). */
int naming_tag_description(const char *ns, const char *name, char *buf, size_t size);

#endif
