/* bootstrap.h: a VmGroup's guest bootstrap with cloud-init
 * (spec.bootstrap.cloudInit.secretRef).
 *
 * Before each clone of a group with a bootstrap, the Secret is read (a GET,
 * no cache: a change of it applies to the clones made afterwards), its key's
 * value checked (base64, at most BOOTSTRAP_MAX_USERDATA bytes once decoded)
 * and handed to the clone as the VMware guestinfo datasource that cloud-init
 * reads, in the new VM's extraConfig:
 *
 *   guestinfo.userdata           the Secret's value, base64 (as the API gives it)
 *   guestinfo.userdata.encoding  base64
 *   guestinfo.metadata           {"instance-id":"<vm>","local-hostname":"<vm>"}, base64
 *   guestinfo.metadata.encoding  base64
 *
 * so that every VM boots with its own identity. The user data is never
 * logged nor written anywhere but into the clone; what this module held of
 * it is wiped once the clone is under way. vsphere/ knows nothing of this:
 * it only takes extraConfig entries.
 */
#ifndef VMG_BOOTSTRAP_H
#define VMG_BOOTSTRAP_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "controller/reconciler.h"
#include "controller/vmgroup.h"

/* The most bytes of user data (decoded): vCenter bounds extraConfig values. */
#define BOOTSTRAP_MAX_USERDATA (64 * 1024)
/* The extraConfig entries a bootstrap sets. */
#define BOOTSTRAP_N_KEYS 4
/* Room for the metadata of a VM, base64 (names are at most VMGROUP_MAX_NAME). */
#define BOOTSTRAP_MAX_METADATA 2048

/* The guestinfo entries of one clone. The user data value points into the
 * Secret given to bootstrap_guestinfo; the metadata is held here. */
struct bootstrap_guestinfo {
    struct rec_keyval kv[BOOTSTRAP_N_KEYS];
    char metadata[BOOTSTRAP_MAX_METADATA];
};

/* bootstrap_metadata writes into buf the base64 of the metadata JSON of the
 * VM vm, {"instance-id":"<instance_id>","local-hostname":"<vm>"}
 * (instance_id NULL or "": vm). Returns its length, or -EINVAL (a NULL or
 * empty vm, or buf too small), -ENOMEM. */
int bootstrap_metadata(const char *vm, const char *instance_id, char *buf, size_t size);

/* bootstrap_userdata finds the user data in secret (a Secret object, its
 * data.<key>: base64) and checks it: at most BOOTSTRAP_MAX_USERDATA bytes
 * once decoded. Returns 0 and *ret (pointing into secret), or VMG_ENOTFOUND
 * (no such key), VMG_EPARSE (not base64), VMG_ETOOBIG, -ENOMEM; msg says
 * which, naming the Secret (ns/name) and key, never the content. */
int bootstrap_userdata(const cJSON *secret, const char *ns, const char *name, const char *key,
                       const char **ret, char *msg, size_t msglen);

/* bootstrap_guestinfo fills *ret with the guestinfo entries of the VM vm
 * of the group whose UID is uid, for the user data userdata_b64 (base64;
 * borrowed by *ret). The metadata's instance-id is "<vm>.<uid>": unique
 * across namespaces and groups (VM names repeat: web-0 in every namespace),
 * and the same for a slot's replacement, which is a fresh clone of the
 * template. Returns 0, or what bootstrap_metadata returns (-EINVAL also for
 * a NULL or empty uid). */
int bootstrap_guestinfo(const char *userdata_b64, const char *vm, const char *uid,
                        struct bootstrap_guestinfo *ret);

/* bootstrap_clone starts the clone of vm as w->clone does, for a group with
 * or without a bootstrap: with one, it first reads the Secret with
 * w->get_secret, then clones with the guestinfo entries. cb is called once,
 * later, unless a negative code is returned. A Secret or key that is
 * missing, a Secret not readable (forbidden) and user data that is not
 * base64 or too big end in cb with a fault that outcome_bootstrap_block
 * knows (controller/outcome.h: the group blocks, phase ERROR, no clone);
 * another failure to read the Secret with OUTCOME_BOOTSTRAP_UNREADABLE,
 * and a clone that could not be started after the read with
 * OUTCOME_BOOTSTRAP_NOT_STARTED (both retried). */
int bootstrap_clone(const struct rec_world *w, const struct vmgroup *g, const char *folder,
                    const char *vm, const char *template_, int cpu, int memory_mb, rec_done_cb cb,
                    void *cbdata);

#endif
