/* inventory.c: the inventory watch (collector, view, filter, then
 * WaitForUpdatesEx after WaitForUpdatesEx into the cache). The placement
 * it watches under is resolved by placement.c. */
#include "vsphere/inventory.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/str.h"

#define MSG_MAX 768
#define REFRESH_MAX 1024 /* VMs waiting to be read again */
#define READ_TRIES 3     /* a read that fails is sent again, after a long poll, this often in all */
/* Of them, the most queued for their guest's addresses: the rest is kept
 * for disputes, whose loss rebuilds the watch. */
#define GUEST_READS_MAX (REFRESH_MAX / 2)
#define CHANGE_VERSION "config.changeVersion"

static char *dup_opt(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

/* A VM to read again. A read only to settle a dispute (vs_cache_disputed)
 * is sent once a long poll numbered after `after` has answered, which may
 * settle it first (vcsim streams a clone's VM off, then its power-on). */
struct refresh_item {
    struct vim_moref vm;
    bool dispute;
    uint64_t after;
    bool guest;           /* only for the guest's addresses: queued after the others */
    bool need;            /* a dispute's read also wanted for the guest: sent even when
                             the dispute settles */
    unsigned char failed; /* reads of it that failed: the next waits for a long
                             poll numbered after `after` to answer */
};

enum istep { I_IDLE, I_LOGIN, I_RESOLVE, I_PC, I_FILTER, I_WAIT, I_BACKOFF };

struct vs_inventory {
    uv_loop_t *loop;
    vs_session *s;
    struct vs_placement_config pcfg; /* strings owned */
    int max_wait;
    int max_updates;
    size_t max_objects;
    /* "" when none */
    struct vs_mark_names keys;
    /* What is read of a VM: vim_vm_paths without the whole extraConfig, and
     * the mark keys' entries alone (vm_paths_init). */
    char mark_paths[VIM_MARKS][VIM_MARK_PATH_MAX];
    const char *vm_paths[16];
    size_t vm_paths_n;
    /* What a read of one VM asks: the same, config.changeVersion and
     * guest.net (vm_paths_init). */
    const char *read_paths[18];
    size_t read_paths_n;
    uint64_t backoff_min_ms, backoff_max_ms;
    vs_cache_cb on_change;
    void *data;
    vs_inventory_state_cb state_cb;
    void *state_data;

    enum istep step;
    vs_req *req;
    vs_resolver *res;
    vs_cache *cache;
    bool have_placement;
    struct vs_placement placement;
    struct vim_moref pc, filter;
    bool have_pc;
    unsigned long gen; /* session generation of pc and view */
    char version[sizeof(((struct vim_update_set *)0)->version)];
    bool resyncing;
    bool synced;
    bool started;
    unsigned failures;
    bool last_transport; /* the last failure was a transport error */
    bool retry_wait;     /* the backoff ends with the same long poll */
    bool retrying;       /* synced still: the long poll is tried again (fail) */
    uint64_t late_ms;    /* the long poll is kept past its timeout (on_kept) */
    int last_err;
    char last_msg[MSG_MAX];
    uint64_t retry_in_ms;
    unsigned long rebuilds;
    /* Synced, and rebuilding the watch with the cache served meanwhile
     * (rebuild_synced): rebuild_msg says why. renewals counts the
     * rebuilds for a lost collector since the last whole build (renewed). */
    bool rebuilding;
    char rebuild_msg[MSG_MAX];
    unsigned renewals;
    bool overflow;
    bool lost_dispute; /* one could not be queued: rebuild at the next answer */
    /* Objects read again one at a time: VMs whose configuration changed
     * without its values (see queue_refresh), and VMs or folders whose
     * state the cache disputes (an older answer against an assumption). */
    struct refresh_item *refresh;
    size_t nrefresh;
    vs_req *refresh_req;
    struct vim_moref refresh_cur;   /* the object being read */
    struct refresh_item refresh_it; /* what it is read for */
    bool refresh_seen;              /* the read returned it */
    bool refresh_left;              /* the watch said it left while it was read */
    /* The requests that bring updates (long polls, reads) are numbered as
     * they are sent, for the cache's order of assumed changes (invcache.h):
     * asked is the last number given, wait_asked and refresh_asked those of
     * the long poll and the read in flight or being decoded. The rest of
     * a truncated UpdateSet may have been computed when its first part
     * was: the long polls that fetch it keep the first one's number. */
    uint64_t asked, wait_asked, refresh_asked;
    /* The number of the last long poll answered: of its UpdateSet all
     * applied, the rest of a truncated one included (note_answer). */
    uint64_t answered;
    bool wait_rest; /* the last UpdateSet was truncated */

    uv_timer_t timer;
    bool closing;
    void (*closed)(void *data);
    void *closed_data;
};

static void notify(vs_inventory *inv)
{
    const char *msg = inv->retrying     ? inv->last_msg
                      : inv->rebuilding ? inv->rebuild_msg
                      : inv->synced     ? ""
                                        : inv->last_msg;
    struct vs_inventory_status st = {
        .synced = inv->synced,
        .retrying = inv->retrying,
        .rebuilding = inv->rebuilding,
        .late_ms = inv->late_ms,
        .err = inv->synced && !inv->retrying ? 0 : inv->last_err,
        .message = msg,
        .failures = inv->failures,
        .retry_in_ms = inv->retry_in_ms,
        .rebuilds = inv->rebuilds,
        .objects = vs_cache_size(inv->cache),
    };

    if (inv->state_cb && !inv->closing)
        inv->state_cb(inv->state_data, &st);
}

static void rebuild(vs_inventory *inv);
static void start_resolve(vs_inventory *inv);
static void refresh_next(vs_inventory *inv);

/* new_cache makes the cache of the inventory under root_ref, with its mark
 * keys; NULL when out of memory. */
static vs_cache *new_cache(vs_inventory *inv, const char *root_ref)
{
    struct vs_mark_keys marks = vs_mark_names_keys(&inv->keys);

    return vs_cache_new(root_ref, inv->max_objects, &marks, inv->on_change, inv->data);
}

/* vm_paths_init sets what is read of a VM (vim_vm_paths_with_marks). */
static void vm_paths_init(vs_inventory *inv)
{
    const char *keys[VIM_MARKS] = {inv->keys.uid, inv->keys.template_key, inv->keys.instance};

    inv->vm_paths_n = vim_vm_paths_with_marks(keys, inv->mark_paths, inv->vm_paths,
                                              sizeof(inv->vm_paths) / sizeof(inv->vm_paths[0]));
    /* The same mark paths are written again, with the same text. And the
     * version that the values read are of, before guest.net: a late
     * announcement of it asks for no read (vs_cache_config_read). */
    inv->read_paths_n = vim_vm_read_paths(keys, inv->mark_paths, inv->read_paths,
                                          sizeof(inv->read_paths) / sizeof(inv->read_paths[0]) - 1);
    if (inv->read_paths_n > 0) {
        inv->read_paths[inv->read_paths_n] = inv->read_paths[inv->read_paths_n - 1];
        inv->read_paths[inv->read_paths_n - 1] = CHANGE_VERSION;
        inv->read_paths_n++;
    }
}

/* build_filter is CreateFilter over everything below the root folder: a
 * traversal of Folder.childEntity, recursive, reading VirtualMachine
 * (vim_vm_paths and config.changeVersion, by which some servers, vcsim,
 * announce a reconfiguration) and Folder (vim_folder_paths).
 *
 * A traversal rather than a ContainerView: vcsim (v0.56) can deadlock when
 * a VM is created in a watched ContainerView while its collector resyncs
 * the filter (the view's lock and the filter's are taken in opposite
 * orders); with a traversal that path is taken only when the root folder
 * itself changes. vCenter serves both alike. */
static int build_filter(const struct vim_moref *pc, const struct vim_moref *root,
                        const char *const *paths, size_t npaths, char **ret_buf, size_t *ret_len)
{
    soap_req *req = soap_req_new("CreateFilter", pc->type, pc->value);
    xmlNode *m, *spec, *ps, *os, *ts;
    int r;

    if (!req)
        return -ENOMEM;
    m = soap_req_method(req);
    spec = soap_add_text(m, "spec", "");
    ps = soap_add_text(spec, "propSet", "");
    soap_add_text(ps, "type", "VirtualMachine");
    soap_add_bool(ps, "all", false);
    for (size_t i = 0; i < npaths; i++)
        soap_add_text(ps, "pathSet", paths[i]);
    soap_add_text(ps, "pathSet", CHANGE_VERSION);
    ps = soap_add_text(spec, "propSet", "");
    soap_add_text(ps, "type", "Folder");
    soap_add_bool(ps, "all", false);
    for (size_t i = 0; i < vim_folder_paths_n; i++)
        soap_add_text(ps, "pathSet", vim_folder_paths[i]);
    os = soap_add_text(spec, "objectSet", "");
    soap_add_moref(os, "obj", root->type, root->value);
    soap_add_bool(os, "skip", true);
    ts = soap_add_typed(os, "selectSet", "TraversalSpec");
    soap_add_text(ts, "name", "folderChildren");
    soap_add_text(ts, "type", "Folder");
    soap_add_text(ts, "path", "childEntity");
    soap_add_bool(ts, "skip", false);
    soap_add_text(soap_add_typed(ts, "selectSet", "SelectionSpec"), "name", "folderChildren");
    soap_add_bool(m, "partialUpdates", false);
    r = soap_req_serialize(req, ret_buf, ret_len);
    soap_req_free(req);
    return r;
}

/* drop_last takes the last read off the full queue when it is only for the
 * guest (guest), or the last one sent again after it failed; false when
 * there is none. */
static bool drop_last(vs_inventory *inv, bool guest)
{
    for (size_t i = inv->nrefresh; i-- > 0;) {
        const struct refresh_item *it = &inv->refresh[i];
        if (guest ? it->guest : (it->failed && !it->dispute)) {
            memmove(inv->refresh + i, inv->refresh + i + 1,
                    (inv->nrefresh - i - 1) * sizeof(*inv->refresh));
            inv->nrefresh--;
            return true;
        }
        if (guest)
            return false; /* the guest's reads are the last ones */
    }
    return false;
}

/* add_item queues vm to be read again, once (see add_refresh); a read
 * only for the guest's addresses (guest) goes after the others, which go
 * before every such read; need: a dispute's read is sent even when the
 * dispute settles. */
static int add_item(vs_inventory *inv, const struct vim_moref *vm, bool dispute, uint64_t after,
                    bool guest, bool need)
{
    size_t at;

    if (dispute && inv->refresh_req && strcmp(inv->refresh_cur.value, vm->value) == 0)
        return 0;
    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, vm->value) == 0) {
            struct refresh_item it = inv->refresh[i];
            if (it.guest && !guest) {
                /* Needed for more than the guest now: moved up with the
                 * others, as what it is now asked for (a dispute waits for
                 * its long poll; the read asks for the guest anyway). */
                memmove(inv->refresh + i, inv->refresh + i + 1,
                        (inv->nrefresh - i - 1) * sizeof(*inv->refresh));
                inv->nrefresh--;
                return add_item(inv, vm, dispute, after, false, dispute);
            }
            if (it.dispute && guest)
                inv->refresh[i].need = true; /* the dispute keeps its wait */
            else
                inv->refresh[i].dispute = it.dispute && dispute;
            inv->refresh[i].failed = 0; /* asked for anew: no retry's wait */
            return 0;
        }
    if (!inv->refresh) {
        inv->refresh = calloc(REFRESH_MAX, sizeof(*inv->refresh));
        if (!inv->refresh)
            return -ENOMEM;
    }
    /* Full: a read for more than the guest takes the place of the last read
     * only for a guest, which is best-effort (the VM lists its primary
     * address until its next change), or else of the last read sent again
     * after it failed (best-effort too: a storm of failures must not make
     * a dispute's read lost, which rebuilds the watch). */
    if (inv->nrefresh >= REFRESH_MAX && !guest && !drop_last(inv, true) && !drop_last(inv, false))
        return -ENOSPC;
    at = inv->nrefresh;
    while (!guest && at > 0 && inv->refresh[at - 1].guest)
        at--;
    memmove(inv->refresh + at + 1, inv->refresh + at, (inv->nrefresh - at) * sizeof(*inv->refresh));
    inv->refresh[at].vm = *vm;
    inv->refresh[at].after = after;
    inv->refresh[at].dispute = dispute;
    inv->refresh[at].guest = guest;
    inv->refresh[at].need = need;
    inv->refresh[at].failed = 0;
    inv->nrefresh++;
    return 0;
}

/* add_refresh queues vm to be read again, once. A read to settle a
 * dispute (an answer older than an assumption said another value) waits
 * for the answer of a later long poll, and is not queued while a read of
 * the VM is out: if that read is older than the assumption too, the cache
 * says so again at its answer. */
static int add_refresh(vs_inventory *inv, const struct vim_moref *vm, bool dispute, uint64_t after)
{
    return add_item(inv, vm, dispute, after, false, false);
}

/* queue_dispute queues a read to settle a dispute of vm, sent once a long
 * poll numbered after `after` has answered; when the queue is full, the
 * dispute would be lost: the watch is rebuilt at its next answer instead,
 * and the full state it reads again decides. */
static void queue_dispute(vs_inventory *inv, const struct vim_moref *vm, uint64_t after)
{
    if (add_refresh(inv, vm, true, after) < 0)
        inv->lost_dispute = true;
}

/* queue_refresh notes a VM to read again: its configuration changed
 * (config.changeVersion) but the update carried none of the values, and
 * the cache does not hold that version's already (vs_cache_config_read). */
static void queue_refresh(vs_inventory *inv, const struct vim_object_update *u)
{
    if (vs_cache_config_read(inv->cache, u))
        (void)add_refresh(inv, &u->obj, false, inv->wait_asked);
}

/* forget_reads: the watch said vm left (deleted, or moved out of the root
 * folder): the reads queued for it go, and the answer of one out is not
 * to bring it back (see in_sight). */
static void forget_reads(vs_inventory *inv, const struct vim_moref *vm)
{
    size_t k = 0;

    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, vm->value) != 0)
            inv->refresh[k++] = inv->refresh[i];
    inv->nrefresh = k;
    /* The last read sent, out or being answered: its flag is cleared when
     * the next one is sent. */
    if (strcmp(inv->refresh_cur.value, vm->value) == 0)
        inv->refresh_left = true;
}

/* in_sight: u, a read's answer for an object the cache does not hold (a
 * clone's VM the watch has yet to show, a moref given again), is of an
 * object the watch covers: not one the watch said left while it was read
 * (the answer may have been computed before), and with a parent, when it
 * says one, that is the root folder or an object under it. A VM read after
 * it was moved out of the root folder would otherwise stay in the cache
 * for good, since no update of the watch ever covers it again. */
static bool in_sight(const vs_inventory *inv, const struct vim_object_update *u)
{
    if (inv->refresh_left && strcmp(u->obj.value, inv->refresh_cur.value) == 0)
        return false;
    for (size_t i = 0; i < u->n_changes; i++) {
        const struct vim_change *ch = &u->changes[i];

        if (strcmp(ch->name, "parent") == 0 && ch->kind == VIM_VAL_MOREF && ch->ref_value)
            return strcmp(ch->ref_value, vs_cache_root(inv->cache)) == 0 ||
                   vs_cache_get(inv->cache, ch->ref_value) != NULL;
    }
    return true;
}

static void forget_refresh(vs_inventory *inv)
{
    inv->nrefresh = 0;
    if (inv->refresh_req) {
        vs_req *q = inv->refresh_req;
        inv->refresh_req = NULL;
        vs_req_cancel(q);
    }
}

/* settle tells the cache which answers may still come: none to a request
 * numbered below the oldest one in flight, or below the long poll to be
 * sent again after a failure when it fetches the rest of a truncated
 * UpdateSet (it keeps the set's number: number_wait). */
static void settle(vs_inventory *inv)
{
    uint64_t floor = inv->asked + 1;

    if (((inv->req && inv->step == I_WAIT) || (inv->retry_wait && inv->wait_rest)) &&
        inv->wait_asked < floor)
        floor = inv->wait_asked;
    if (inv->refresh_req && inv->refresh_asked < floor)
        floor = inv->refresh_asked;
    vs_cache_settle(inv->cache, floor);
}

/* applied acts on what the cache said of update u: a pinned property
 * another value (read the object again, numbered after the pin, so that
 * its answer decides), or a VM reconfigured without its values. */
static void applied(vs_inventory *inv, const struct vim_object_update *u, int e)
{
    if (e == VS_CACHE_READ_BACK)
        queue_dispute(inv, &u->obj, inv->wait_asked);
    /* Also with a dispute: its read, merged into this one, is then sent
     * even if a newer answer settles the dispute first, since the
     * configuration it announced is to be read anyway. */
    if (e >= 0)
        queue_refresh(inv, u);
}

/* next_answer is the number after which a long poll's answer is a new one:
 * while the rest of a truncated UpdateSet is fetched (numbered as its
 * first part, and maybe computed with it), the answer after that set. */
static uint64_t next_answer(const vs_inventory *inv)
{
    return inv->wait_rest ? inv->wait_asked : inv->answered;
}

static int refresh_cb(void *arg, const struct vim_object_update *u)
{
    vs_inventory *inv = arg;
    int e;

    if (strcmp(u->obj.value, inv->refresh_cur.value) == 0)
        inv->refresh_seen = true;
    if (u->kind != VIM_LEAVE && !vs_cache_get(inv->cache, u->obj.value) && !in_sight(inv, u))
        return 0;
    e = vs_cache_apply_from(inv->cache, u, inv->refresh_asked);
    if (e == VS_CACHE_READ_BACK)
        applied(inv, u, e);
    return e == -ENOMEM ? e : 0;
}

/* read_failed: the read out, not a dispute's (a VM's configuration or
 * guest addresses the watch did not carry, a VM an operation found gone),
 * failed: it is sent again once the long poll out now has answered, up to
 * READ_TRIES reads in all; then the VM keeps what the cache holds until
 * its next change. A read queued for it meanwhile is that read. */
static void read_failed(vs_inventory *inv)
{
    const struct refresh_item *it = &inv->refresh_it;

    if (strcmp(it->vm.value, inv->refresh_cur.value) != 0 ||
        strcmp(it->vm.type, "VirtualMachine") != 0 || (it->dispute && !it->need) ||
        it->failed + 1 >= READ_TRIES || (it->guest && inv->nrefresh >= GUEST_READS_MAX) ||
        inv->nrefresh >= REFRESH_MAX) /* not in another's place */
        return;
    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, it->vm.value) == 0)
            return;
    if (add_item(inv, &it->vm, false, next_answer(inv), it->guest, false) < 0)
        return; /* full: as when the queue refuses a read */
    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, it->vm.value) == 0)
            inv->refresh[i].failed = (unsigned char)(it->failed + 1);
}

static void on_refresh(void *data, const struct vs_reply *r)
{
    vs_inventory *inv = data;
    char token[512];
    bool gone = false, read = false;

    if (!inv->refresh_req || inv->closing)
        return; /* canceled */
    inv->refresh_req = NULL;
    inv->refresh_seen = false;
    if (r->err == 0 &&
        vim_decode_retrieve_result(r->resp, refresh_cb, inv, token, sizeof(token)) >= 0) {
        read = true;
        gone = !inv->refresh_seen;
    } else if (vs_reply_fault_is(r, "ManagedObjectNotFound"))
        gone = true;
    if (gone) {
        /* Gone from vCenter: normally the watch says so too, but a read is
         * asked for when the watch has not shown a change in time. */
        struct vim_object_update u = {.kind = VIM_LEAVE, .obj = inv->refresh_cur};
        (void)vs_cache_apply_from(inv->cache, &u, inv->refresh_asked);
    }
    vs_cache_commit(inv->cache);
    if (!read && !gone && vs_cache_disputed(inv->cache, inv->refresh_cur.value)) {
        /* Failed: again after the long poll out now answers, and then even
         * if that answer settles the dispute when the read was for more. */
        const struct refresh_item *it = &inv->refresh_it;
        bool more = strcmp(it->vm.value, inv->refresh_cur.value) == 0 && (!it->dispute || it->need);
        if (add_item(inv, &inv->refresh_cur, true, next_answer(inv), false, more) < 0)
            inv->lost_dispute = true;
    } else if (!read && !gone && !inv->refresh_left) {
        read_failed(inv);
    }
    refresh_next(inv);
    settle(inv);
}

/* held: a dispute's read waits until a long poll numbered after `after`
 * has answered, all of its UpdateSet (whose rest may settle it); so does a
 * read sent again after it failed (not at once: vCenter may be busy). */
static bool held(const vs_inventory *inv, const struct refresh_item *it)
{
    if (it->failed && inv->answered <= it->after)
        return true;
    return it->dispute && inv->answered <= it->after && vs_cache_disputed(inv->cache, it->vm.value);
}

/* needed: a dispute the answers since have settled needs no read. */
static bool needed(const vs_inventory *inv, const struct refresh_item *it)
{
    return !it->dispute || it->need || vs_cache_disputed(inv->cache, it->vm.value);
}

static void refresh_next(vs_inventory *inv)
{
    const struct vim_service_content *sc = vs_session_content(inv->s);
    struct refresh_item it;
    struct vim_moref vm;
    bool folder;
    char *buf = NULL;
    size_t len = 0;

    size_t i = 0;

    if (inv->refresh_req || !sc || inv->closing || !inv->synced || inv->resyncing)
        return; /* a resync's end sends what is queued */
    for (;;) {
        if (i >= inv->nrefresh)
            return;
        it = inv->refresh[i];
        if (held(inv, &it)) {
            i++; /* not yet */
            continue;
        }
        memmove(inv->refresh + i, inv->refresh + i + 1,
                (inv->nrefresh - i - 1) * sizeof(*inv->refresh));
        inv->nrefresh--;
        if (needed(inv, &it))
            break;
    }
    vm = it.vm;
    inv->refresh_cur = vm;
    inv->refresh_it = it;
    inv->refresh_left = false;
    inv->refresh_asked = ++inv->asked;
    /* A folder is read only to settle a dispute (a moref given again). */
    folder = strcmp(vm.type, "Folder") == 0;
    if (vim_req_retrieve_properties_ex(
            &sc->property_collector, &vm, folder ? vim_folder_paths : inv->read_paths,
            folder ? vim_folder_paths_n : inv->read_paths_n, 0, &buf, &len) < 0 ||
        vs_call(inv->s, "RetrievePropertiesEx", buf, len, NULL, on_refresh, inv,
                &inv->refresh_req) < 0) {
        /* Not sent: kept at the head (it was taken off this call, so it
         * fits), for the next try, instead of losing its dispute. */
        inv->refresh_req = NULL;
        memmove(inv->refresh + 1, inv->refresh, inv->nrefresh * sizeof(*inv->refresh));
        inv->refresh[0] = it;
        inv->nrefresh++;
    }
}

int vs_inventory_reread(vs_inventory *inv, const char *vm_ref)
{
    struct vim_moref vm;
    int e;

    if (!inv || !vm_ref || inv->closing)
        return -EINVAL;
    if (!inv->synced || !inv->cache)
        return -EAGAIN;
    e = vim_moref_set(&vm, "VirtualMachine", vm_ref);
    if (e == 0)
        e = add_refresh(inv, &vm, false, inv->wait_asked);
    if (e == 0)
        refresh_next(inv);
    return e;
}

static void send_wait(vs_inventory *inv);
static void on_i_reply(void *data, const struct vs_reply *r);

static void on_timer(uv_timer_t *t)
{
    vs_inventory *inv = t->data;

    if (inv->closing)
        return;
    if (inv->retry_wait && inv->have_pc && inv->gen == vs_session_generation(inv->s)) {
        inv->retry_wait = false;
        send_wait(inv);
    } else {
        rebuild(inv);
    }
}

/* fail records a failure and schedules the next try: a fault right after
 * vCenter answered again rebuilds at once; otherwise after the backoff.
 *
 * A synced watch whose long poll is lost to the transport (a network blip,
 * an answer slower than the call's timeout) stays synced while the same
 * long poll, with the same version, is tried once more after the backoff:
 * vCenter then sends every change since that version (or the full state
 * again, when the lost one was a rebuild's first), so nothing is lost, and
 * the cache is served meanwhile as while any long poll is out. Only a
 * second failure in a row (vCenter still unreachable) makes it unsynced,
 * and the groups say so: a blip costs no flap of every group's status. */
static void fail(vs_inventory *inv, int err, const char *msg, bool transport)
{
    uint64_t delay;

    if (!transport && inv->last_transport)
        inv->failures = 0;
    inv->failures++;
    inv->last_transport = transport;
    inv->last_err = err;
    vmg_putf(inv->last_msg, sizeof(inv->last_msg), "%s", msg);
    inv->retry_wait = transport && inv->step == I_WAIT && inv->have_pc;
    if (!transport && inv->failures == 1)
        delay = 0;
    else
        delay = vs_backoff_ms(transport ? inv->failures : inv->failures - 1, inv->backoff_min_ms,
                              inv->backoff_max_ms);
    inv->retry_in_ms = delay;
    inv->retrying = inv->retry_wait && inv->synced && !inv->retrying;
    if (!inv->retrying) {
        inv->synced = false;
        inv->rebuilding = false;
    }
    inv->step = I_BACKOFF;
    uv_timer_start(&inv->timer, on_timer, delay, 0);
    notify(inv);
}

/* on_kept: the long poll is late, vCenter answering meanwhile: said for
 * the caller's log, the watch's state otherwise the same. */
static void on_kept(void *data, uint64_t waited_ms)
{
    vs_inventory *inv = data;

    inv->late_ms = waited_ms ? waited_ms : 1;
    notify(inv);
}

static int i_send(vs_inventory *inv, enum istep step, const char *method, char *buf, size_t len,
                  bool long_poll)
{
    struct vs_call_opts o = long_poll
                                ? vs_long_poll_opts(inv->s, inv->max_wait)
                                : (struct vs_call_opts){.max_response = VS_CALL_MAX_RESPONSE_LARGE};

    if (long_poll)
        o.kept = on_kept;
    inv->step = step;
    return vs_call(inv->s, method, buf, len, &o, on_i_reply, inv, &inv->req);
}

/* drop_collector forgets the collector of the last build (its filter goes
 * with it), and destroys it when it still exists (same session) and no
 * long poll of it may still run at vCenter (vcsim mishandles that). */
static void drop_collector(vs_inventory *inv, bool polling)
{
    bool same = inv->gen == vs_session_generation(inv->s);
    char *buf = NULL;
    size_t len = 0;

    if (inv->have_pc && same && !polling &&
        vim_req_destroy_property_collector(&inv->pc, &buf, &len) == 0)
        (void)vs_fire_and_forget(inv->s, "DestroyPropertyCollector", buf, len);
    inv->have_pc = false;
}

static void on_resolved(void *data, int err, const char *msg, const struct vs_placement *p)
{
    vs_inventory *inv = data;
    const struct vim_service_content *sc = vs_session_content(inv->s);
    char *buf = NULL;
    size_t len = 0;
    int e;

    inv->res = NULL;
    if (inv->closing)
        return;
    if (err) {
        fail(inv, err, msg, err == VMG_ETRANSPORT);
        return;
    }
    if (!inv->cache) {
        inv->cache = new_cache(inv, p->root_folder.value);
        if (!inv->cache) {
            fail(inv, -ENOMEM, "out of memory", false);
            return;
        }
    } else if (strcmp(vs_cache_root(inv->cache), p->root_folder.value) != 0) {
        vs_cache_set_root(inv->cache, p->root_folder.value);
    }
    inv->placement = *p;
    inv->have_placement = true;
    e = sc ? vim_req_create_property_collector(&sc->property_collector, &buf, &len)
           : VMG_ETRANSPORT;
    if (e == 0)
        e = i_send(inv, I_PC, "CreatePropertyCollector", buf, len, false);
    if (e < 0)
        fail(inv, e, "could not send CreatePropertyCollector", false);
}

static void rebuild(vs_inventory *inv)
{
    bool polling = inv->req && inv->step == I_WAIT;
    int e;

    if (inv->req) {
        vs_req *q = inv->req;
        inv->req = NULL;
        inv->step = I_IDLE; /* the cancel's reply is ignored */
        vs_req_cancel(q);
    }
    drop_collector(inv, polling);
    forget_refresh(inv);
    inv->lost_dispute = false;
    inv->rebuilds++;
    inv->retry_wait = false;
    if (inv->retrying) {
        /* The long poll was to be tried again, and the collector went
         * meanwhile (a new session): a full state follows, not synced. */
        inv->retrying = false;
        inv->synced = false;
        inv->rebuilding = false;
        notify(inv);
        if (inv->closing)
            return; /* its callback closed the watch */
    }
    if (!vs_session_content(inv->s)) {
        /* Not logged in yet: a first call waits for the login (and
         * reports its failure). */
        char *buf = NULL;
        size_t len = 0;
        e = vim_req_current_time(&buf, &len);
        if (e == 0)
            e = i_send(inv, I_LOGIN, "CurrentTime", buf, len, false);
        if (e < 0)
            fail(inv, e, "could not send a first request to vCenter", false);
        return;
    }
    start_resolve(inv);
}

/* rebuild_synced rebuilds a synced watch and serves its cache meanwhile:
 * the state callback hears that it is rebuilding and why, and hears again
 * once the new full state has come. (A watch retrying its long poll has
 * lost it already: rebuild makes it unsynced.) */
static void rebuild_synced(vs_inventory *inv, const char *why)
{
    if (inv->synced && !inv->retrying) {
        inv->rebuilding = true;
        vmg_putf(inv->rebuild_msg, sizeof(inv->rebuild_msg), "%s", why);
        notify(inv);
        if (inv->closing)
            return;
    }
    rebuild(inv);
}

/* renewed says whether the fault r answered to a CreateFilter or a long
 * poll means only that the session was renewed meanwhile: the collector
 * went with the old session, and the call the session sent again after
 * its login names it no more (ManagedObjectNotFound). A synced watch then
 * rebuilds on the new session with its cache served, as when an answer
 * finds the session renewed (on_wait): a lost session is one outage, not
 * a second one after the login. At most VS_INV_RENEWALS_MAX times before
 * a whole build: sessions lost faster than a build ends go by fail(),
 * unsynced and with its backoff. */
#define VS_INV_RENEWALS_MAX 2
/* What a rebuild for a renewed session says, from either path. */
static const char RENEWED[] = "the vCenter session was renewed";
static bool renewed(const vs_inventory *inv, enum istep step, const struct vs_reply *r)
{
    return (step == I_WAIT || step == I_FILTER) && inv->have_pc && inv->synced && !inv->retrying &&
           inv->renewals < VS_INV_RENEWALS_MAX && inv->gen != vs_session_generation(inv->s) &&
           vs_reply_fault_is(r, "ManagedObjectNotFound");
}

static void start_resolve(vs_inventory *inv)
{
    char msg[MSG_MAX];
    int e;

    inv->step = I_RESOLVE;
    e = vs_placement_resolve(inv->s, &inv->pcfg, on_resolved, inv, &inv->res);
    if (e < 0) {
        vmg_putf(msg, sizeof(msg), "could not start resolving the placement: %s", vmg_strerror(e));
        fail(inv, e, msg, e == VMG_ETRANSPORT);
    }
}

/* number_wait numbers the long poll about to be sent; one that fetches
 * the rest of a truncated UpdateSet keeps the set's number. */
static void number_wait(vs_inventory *inv)
{
    if (!inv->wait_rest || !inv->wait_asked)
        inv->wait_asked = ++inv->asked;
}

/* note_answer notes the long poll's answer applied (e and us from
 * vim_decode_update_set): a truncated UpdateSet's rest comes next, with
 * the same number, and the set is answered once all of it is applied. A
 * dispute's read waits for that (held): vcsim pages a lagging stream's
 * backlog, a VM's older state in one page and the change that settles
 * its dispute in a later one. */
static void note_answer(vs_inventory *inv, int e, const struct vim_update_set *us)
{
    inv->wait_rest = e == 1 && us->truncated;
    if (!inv->wait_rest)
        inv->answered = inv->wait_asked;
}

static void send_wait(vs_inventory *inv)
{
    char *buf = NULL;
    size_t len = 0;
    int e;

    number_wait(inv);
    e = vim_req_wait_for_updates_ex(&inv->pc, inv->version, inv->max_wait, inv->max_updates, &buf,
                                    &len);
    if (e == 0)
        e = i_send(inv, I_WAIT, "WaitForUpdatesEx", buf, len, true);
    if (e < 0)
        fail(inv, e, "could not send WaitForUpdatesEx", false);
}

static int apply_cb(void *arg, const struct vim_object_update *u)
{
    vs_inventory *inv = arg;
    struct vs_ip before;
    const struct vs_ip none = {0};
    int e;

    vs_obj_primary(vs_cache_get(inv->cache, u->obj.value), &before);
    if (u->kind == VIM_LEAVE)
        forget_reads(inv, &u->obj);
    e = vs_cache_apply_from(inv->cache, u, inv->wait_asked);
    if (e == -ENOSPC)
        inv->overflow = true;
    applied(inv, u, e);
    /* A primary guest address that is new, or said again by a full state:
     * the others (guest.net, not watched) are read once. Beyond
     * GUEST_READS_MAX queued, a VM shows its primary address alone until
     * the next change of it or the next full state. */
    if (e >= 0 && inv->nrefresh < GUEST_READS_MAX &&
        vs_cache_guest_read(inv->cache, u,
                            inv->resyncing && u->kind == VIM_ENTER ? &none : &before))
        (void)add_item(inv, &u->obj, false, inv->wait_asked, true, false);
    return e == -ENOMEM ? e : 0;
}

static void on_wait(vs_inventory *inv, const struct vs_reply *r, bool was_late)
{
    struct vim_update_set us;
    bool was_synced = inv->synced, was_retrying = inv->retrying, was_rebuilding = inv->rebuilding;
    int e;

    e = vim_decode_update_set(r->resp, apply_cb, inv, &us);
    if (e < 0) {
        /* A half-applied set is committed: what it changed is real. */
        vs_cache_commit(inv->cache);
        fail(inv, e, "vCenter sent an unreadable UpdateSet; rebuilding the inventory watch", false);
        return;
    }
    if (inv->overflow) {
        /* The cache would miss objects: a view missing VMs could make the
         * planner clone twice or see a folder empty. Not synced, and
         * rebuilt after the backoff, which works once vCenter holds fewer. */
        char msg[MSG_MAX];

        vs_cache_commit(inv->cache);
        inv->overflow = false;
        vmg_putf(msg, sizeof(msg),
                 "vCenter's inventory holds more than %zu objects under the root folder, the most "
                 "this operator keeps; waiting for fewer",
                 inv->max_objects ? inv->max_objects : (size_t)VS_CACHE_DEFAULT_MAX);
        fail(inv, VMG_ETOOBIG, msg, false);
        return;
    }
    if (e == 1)
        vmg_putf(inv->version, sizeof(inv->version), "%s", us.version);
    note_answer(inv, e, &us);
    if (inv->resyncing && (e == 0 || !us.truncated)) {
        inv->resyncing = false;
        vs_cache_end_resync(inv->cache);
        inv->synced = true;
        inv->rebuilding = false;
        inv->renewals = 0;
    } else if (!inv->resyncing) {
        vs_cache_commit(inv->cache);
        inv->synced = true;
    } else {
        vs_cache_commit(inv->cache);
    }
    if (inv->synced) {
        inv->failures = 0;
        inv->last_transport = false;
        inv->last_err = 0;
        inv->last_msg[0] = '\0';
        inv->retry_in_ms = 0;
        inv->retrying = false;
    }
    if (inv->synced &&
        (!was_synced || was_retrying || was_late || (was_rebuilding && !inv->rebuilding)))
        notify(inv);
    if (inv->closing)
        return;
    refresh_next(inv);
    if (inv->gen != vs_session_generation(inv->s)) {
        /* The session was renewed: the collector is gone with the old one. */
        rebuild_synced(inv, RENEWED);
        return;
    }
    if (inv->lost_dispute) {
        rebuild_synced(inv, "a VM whose state was in dispute could not be queued for a read");
        return;
    }
    send_wait(inv);
    settle(inv);
}

static void on_i_reply(void *data, const struct vs_reply *r)
{
    vs_inventory *inv = data;
    const struct vim_service_content *sc = vs_session_content(inv->s);
    char msg[MSG_MAX], *buf = NULL;
    size_t len = 0;
    enum istep step = inv->step;
    bool was_late = inv->late_ms != 0;
    int e;

    inv->req = NULL;
    inv->late_ms = 0;
    if (inv->closing || step == I_IDLE)
        return;
    if (r->err) {
        bool transport = r->err == VMG_ETRANSPORT || r->err == VMG_EHTTP;
        if (renewed(inv, step, r)) {
            inv->renewals++;
            rebuild_synced(inv, RENEWED);
            return;
        }
        if (step == I_WAIT && r->err == VMG_EFAULT)
            vmg_putf(msg, sizeof(msg), "the inventory watch stopped (%s); rebuilding it",
                     r->message);
        else
            vmg_putf(msg, sizeof(msg), "%s", r->message);
        fail(inv, r->err, msg, transport);
        return;
    }
    switch (step) {
    case I_LOGIN:
        start_resolve(inv);
        return;
    case I_PC:
        if (vim_decode_moref(r->resp, &inv->pc) < 0 || !sc) {
            fail(inv, VMG_EPARSE, "vCenter sent an unreadable PropertyCollector", false);
            return;
        }
        inv->have_pc = true;
        inv->gen = vs_session_generation(inv->s);
        e = build_filter(&inv->pc, &inv->placement.root_folder, inv->vm_paths, inv->vm_paths_n,
                         &buf, &len);
        if (e == 0)
            e = i_send(inv, I_FILTER, "CreateFilter", buf, len, false);
        if (e < 0)
            fail(inv, e, "could not send CreateFilter", false);
        return;
    case I_FILTER:
        if (vim_decode_moref(r->resp, &inv->filter) < 0) {
            fail(inv, VMG_EPARSE, "vCenter sent an unreadable PropertyFilter", false);
            return;
        }
        inv->version[0] = '\0';
        inv->wait_rest = false;
        inv->resyncing = true;
        vs_cache_begin_resync(inv->cache);
        send_wait(inv);
        return;
    case I_WAIT:
        on_wait(inv, r, was_late);
        return;
    default:
        return;
    }
}

/* ---- Public ---- */

vs_inventory *vs_inventory_new(uv_loop_t *loop, vs_session *s,
                               const struct vs_inventory_config *cfg, vs_cache_cb on_change,
                               void *data, int *ret_err)
{
    vs_inventory *inv;

    if (!loop || !s || !cfg || !vs_mark_keys_fit(&cfg->marks)) {
        if (ret_err)
            *ret_err = -EINVAL;
        return NULL;
    }
    inv = calloc(1, sizeof(*inv));
    if (!inv)
        goto nomem;
    inv->loop = loop;
    inv->s = s;
    inv->pcfg.datacenter = dup_opt(cfg->placement.datacenter);
    inv->pcfg.root_folder = dup_opt(cfg->placement.root_folder);
    inv->pcfg.resource_pool = dup_opt(cfg->placement.resource_pool);
    inv->pcfg.datastore = dup_opt(cfg->placement.datastore);
    inv->max_wait = cfg->max_wait_seconds > 0 ? cfg->max_wait_seconds : VS_DEFAULT_MAX_WAIT_SECONDS;
    inv->max_updates =
        cfg->max_object_updates > 0 ? cfg->max_object_updates : VS_DEFAULT_MAX_OBJECT_UPDATES;
    inv->max_objects = cfg->max_objects;
    vs_mark_names_set(&inv->keys, &cfg->marks);
    vm_paths_init(inv);
    inv->backoff_min_ms = cfg->backoff_min_ms ? cfg->backoff_min_ms : VS_DEFAULT_BACKOFF_MIN_MS;
    inv->backoff_max_ms = cfg->backoff_max_ms ? cfg->backoff_max_ms : VS_DEFAULT_BACKOFF_MAX_MS;
    inv->on_change = on_change;
    inv->data = data;
    vmg_putf(inv->last_msg, sizeof(inv->last_msg), "the inventory watch is starting");
    inv->last_err = -EAGAIN;
    uv_timer_init(loop, &inv->timer);
    inv->timer.data = inv;
    return inv;
nomem:
    if (ret_err)
        *ret_err = -ENOMEM;
    return NULL;
}

void vs_inventory_set_state_cb(vs_inventory *inv, vs_inventory_state_cb cb, void *data)
{
    if (!inv)
        return;
    inv->state_cb = cb;
    inv->state_data = data;
}

int vs_inventory_start(vs_inventory *inv)
{
    if (!inv)
        return -EINVAL;
    if (inv->closing)
        return VMG_ECANCELED;
    if (inv->started)
        return 0;
    inv->started = true;
    inv->rebuilds = 0;
    /* The first build runs from the loop, once the session has logged in
     * or failed to: the resolver needs the ServiceContent. */
    inv->step = I_BACKOFF;
    uv_timer_start(&inv->timer, on_timer, 0, 0);
    return 0;
}

const struct vs_placement *vs_inventory_placement(const vs_inventory *inv)
{
    return inv && inv->have_placement ? &inv->placement : NULL;
}

const vs_cache *vs_inventory_cache(const vs_inventory *inv)
{
    return inv ? inv->cache : NULL;
}

uint64_t vs_inventory_mark(const vs_inventory *inv)
{
    return inv ? vs_cache_mark(inv->cache) : 0;
}

int vs_inventory_assume(vs_inventory *inv, const struct vim_object_update *u, uint64_t since)
{
    int e;

    if (!inv || !u || inv->closing)
        return -EINVAL;
    /* While a resync's full state is out, what exists is what it says:
     * the caller reads the VM back instead (vs_inventory_reread). */
    if (!inv->synced || !inv->cache || inv->resyncing)
        return -EAGAIN;
    settle(inv);
    /* Every request numbered up to inv->asked was sent before the task's
     * end was learned: its answer may be older than the result. */
    e = vs_cache_assume(inv->cache, u, since, inv->asked);
    vs_cache_commit(inv->cache);
    /* A clone's VM the watch showed otherwise before the end was learned:
     * read once the stream has had its say (see vs_cache_assume). */
    if (e == 1 && u->kind == VIM_ENTER && vs_cache_disputed(inv->cache, u->obj.value))
        queue_dispute(inv, &u->obj, next_answer(inv)); /* after the long poll out now */
    return e;
}

bool vs_inventory_synced(const vs_inventory *inv)
{
    return inv && inv->synced;
}

int vs_inventory_folder(const vs_inventory *inv, const char *name, struct vim_moref *ret)
{
    const struct vs_obj *o;

    if (!inv || !name || !ret)
        return -EINVAL;
    if (!inv->synced || !inv->cache)
        return -EAGAIN;
    o = vs_cache_folder(inv->cache, name);
    if (!o)
        return VMG_ENOTFOUND;
    return vim_moref_set(ret, "Folder", o->ref);
}

int vs_inventory_folder_vms(const vs_inventory *inv, const char *name, const struct vs_obj **out,
                            size_t max, size_t *ret_others)
{
    const struct vs_obj *f;
    size_t n;

    if (!inv || !name || (max && !out))
        return -EINVAL;
    if (!inv->synced || !inv->cache)
        return -EAGAIN;
    f = vs_cache_folder(inv->cache, name);
    if (!f)
        return VMG_ENOTFOUND;
    n = vs_cache_children(inv->cache, f->ref, true, out, max);
    if (ret_others)
        *ret_others = vs_cache_children(inv->cache, f->ref, false, NULL, 0);
    return n > INT32_MAX ? INT32_MAX : (int)n;
}

static void on_timer_closed(uv_handle_t *h)
{
    vs_inventory *inv = h->data;
    void (*closed)(void *) = inv->closed;
    void *closed_data = inv->closed_data;

    vs_cache_free(inv->cache);
    free(inv->refresh);
    free((char *)inv->pcfg.datacenter);
    free((char *)inv->pcfg.root_folder);
    free((char *)inv->pcfg.resource_pool);
    free((char *)inv->pcfg.datastore);
    free(inv);
    if (closed)
        closed(closed_data);
}

void vs_inventory_close(vs_inventory *inv, void (*closed)(void *data), void *data)
{
    if (!inv || inv->closing)
        return;
    inv->closing = true;
    inv->closed = closed;
    inv->closed_data = data;
    uv_timer_stop(&inv->timer);
    if (inv->res)
        vs_resolver_cancel(inv->res);
    if (inv->req)
        vs_req_cancel(inv->req);
    forget_refresh(inv);
    uv_close((uv_handle_t *)&inv->timer, on_timer_closed);
}

#ifdef VMG_TESTING
bool vs_inventory_testing_dispute(vs_inventory *inv, const char *vm_ref)
{
    struct vim_moref vm;

    if (vim_moref_set(&vm, "VirtualMachine", vm_ref) == 0)
        queue_dispute(inv, &vm, inv->wait_asked);
    return inv->lost_dispute;
}

int vs_inventory_testing_poll(vs_inventory *inv, const soap_resp *resp)
{
    struct vim_update_set us;
    int e;

    if (!inv->cache)
        return -EINVAL;
    number_wait(inv);
    e = vim_decode_update_set(resp, apply_cb, inv, &us);
    if (e < 0)
        return e;
    vs_cache_commit(inv->cache);
    note_answer(inv, e, &us);
    inv->synced = true;
    return 0;
}

bool vs_inventory_testing_read_failed(vs_inventory *inv, const char *vm_ref)
{
    if (vim_moref_set(&inv->refresh_cur, "VirtualMachine", vm_ref) < 0)
        return false;
    inv->refresh_it = (struct refresh_item){.vm = inv->refresh_cur};
    inv->refresh_left = false;
    read_failed(inv);
    return vs_inventory_testing_position(inv, vm_ref) != SIZE_MAX;
}

int vs_inventory_testing_read_sent(vs_inventory *inv, const char *vm_ref)
{
    int e = vim_moref_set(&inv->refresh_cur, "VirtualMachine", vm_ref);

    inv->refresh_asked = ++inv->asked;
    inv->refresh_left = false;
    return e;
}

int vs_inventory_testing_read_answer(vs_inventory *inv, const soap_resp *resp)
{
    char token[512];
    int e;

    if (!inv->cache)
        return -EINVAL;
    inv->refresh_seen = false;
    e = vim_decode_retrieve_result(resp, refresh_cb, inv, token, sizeof(token));
    vs_cache_commit(inv->cache);
    return e < 0 ? e : 0;
}

bool vs_inventory_testing_due(const vs_inventory *inv, const char *vm_ref)
{
    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, vm_ref) == 0)
            return !held(inv, &inv->refresh[i]) && needed(inv, &inv->refresh[i]);
    return false;
}

int vs_inventory_testing_watch(vs_inventory *inv, const soap_resp *resp, const char *root_ref,
                               bool full)
{
    struct vim_update_set us;
    int e;

    if (!inv->cache) {
        inv->cache = new_cache(inv, root_ref);
        if (!inv->cache)
            return -ENOMEM;
    }
    inv->resyncing = full;
    e = vim_decode_update_set(resp, apply_cb, inv, &us);
    inv->resyncing = false;
    vs_cache_commit(inv->cache);
    return e < 0 ? e : 0;
}

size_t vs_inventory_testing_position(const vs_inventory *inv, const char *vm_ref)
{
    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, vm_ref) == 0)
            return i;
    return SIZE_MAX;
}

size_t vs_inventory_testing_queued(vs_inventory *inv, const char *vm_ref)
{
    size_t n = 0, k = 0;

    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, vm_ref) == 0)
            n++;
        else
            inv->refresh[k++] = inv->refresh[i];
    inv->nrefresh = k;
    return n;
}

int vs_inventory_testing_kind(const vs_inventory *inv, const char *vm_ref)
{
    for (size_t i = 0; i < inv->nrefresh; i++)
        if (strcmp(inv->refresh[i].vm.value, vm_ref) == 0)
            return (inv->refresh[i].dispute ? 1 : 0) | (inv->refresh[i].need ? 2 : 0) |
                   (inv->refresh[i].guest ? 4 : 0);
    return -1;
}

size_t vs_inventory_testing_read_paths(const vs_inventory *inv, const char *const **paths)
{
    *paths = inv->read_paths;
    return inv->read_paths_n;
}

const vs_cache *vs_inventory_testing_cache(const vs_inventory *inv)
{
    return inv->cache;
}
#endif
