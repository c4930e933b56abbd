/* invcache.c: the inventory cache: objects by moref in a hash table, each
 * linked into the list of its parent's children (a second table, keyed by
 * the parent's moref, so that children may arrive before their parent),
 * and a list of the objects changed since the last commit. */
#include "vsphere/invcache.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vsphere/soap.h"

#include "lib/queue.h"

#define MAX_DEPTH 64  /* folders walked up to find a group */
#define TOMB_MAX 1024 /* objects remembered as assumed gone (see vs_cache_assume) */
/* Bytes of a config.changeVersion kept, NUL included (vCenter's is a time
 * in ISO 8601, vcsim's a count of nanoseconds); a longer one is not kept. */
#define VERSION_MAX 48
#define CHANGE_VERSION "config.changeVersion"
#define HARDWARE "config.hardware."

enum { D_NEW = 1, D_CHANGED = 2, D_REMOVED = 4 };
/* The properties an assumption pins, each apart (invcache.h, "Assumed
 * changes"): index into node.set_at and node.pin, bit (1u << F_*) in
 * node.pinned. */
enum {
    F_POWER,
    F_CPU,
    F_MEM,
    F_IMARK, /* the instance mark */
    F_UMARK, /* the uid mark (a clone's, which decides its group) */
    F_TMARK, /* the template mark */
    F_N
};

struct pgroup;

struct node {
    struct vs_obj o;
    struct node *hnext; /* hash chain */
    struct pgroup *pg;  /* the parent's children list it is in */
    struct lq slink;    /* in pg->children, with its siblings */
    struct pgroup *mg;  /* VMs: the list of its uid mark it is in */
    struct lq mlink;    /* in mg->children, with the VMs of the same mark */
    struct lq dlink;    /* in the cache's dirty list */
    unsigned dirty;
    bool seen;
    bool old_valid; /* old_group* hold the group before this batch */
    char old_group[VS_NAME_MAX];
    char old_group_ref[VS_REF_MAX];
    bool mark_changed;    /* a VM: this batch changed its uid mark */
    char *old_mark;       /* then, the mark it had before (NULL: none, or out of memory) */
    uint64_t set_at[F_N]; /* the cache's mark when an update last set each F_* */
    uint64_t pin[F_N];    /* while pinned: answers to requests up to pin keep it */
    unsigned pinned;      /* bits of F_* */
    unsigned disputed;    /* of pinned: the last older answer said another value */
    /* VMs: the config.changeVersion that the hardware values came with
     * (see vs_cache_config_read); "" when none is known. */
    char version[VERSION_MAX];
};

/* An object assumed gone, and the last request whose answer may still
 * show it. */
struct tomb {
    char ref[VS_REF_MAX];
    uint64_t asked;
    bool disputed; /* an older answer showed it (a server that reuses morefs) */
};

/* The nodes that share a key, newest first: the children of one parent
 * (vs_cache.groups, by the parent's ref; node.slink), or the VMs of one
 * uid mark (vs_cache.marks, by the mark; node.mlink). */
struct pgroup {
    struct pgroup *hnext;
    struct lq children;
    size_t n;
    char ref[]; /* the key */
};

/* A chained hash table of nodes or pgroups: the key (a string member) is
 * at key_off in an item, the chain pointer at chain_off. */
struct htab {
    void **b;
    size_t nb, n;
    size_t key_off, chain_off;
};

struct vs_cache {
    char root[VS_REF_MAX];
    size_t max;
    vs_cache_cb cb;
    void *data;
    struct vs_mark_names keys;
    struct htab objs;
    struct htab groups;
    struct htab marks;
    struct lq dirty;    /* of struct node (dlink): changed since the last commit, newest first */
    uint64_t mark;      /* updates applied so far */
    struct tomb *tombs; /* TOMB_MAX, oldest first; NULL until the first */
    size_t ntombs;
};

/* ---- Hash tables ---- */

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603ull;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static void **chain(const struct htab *t, void *item)
{
    return (void **)((char *)item + t->chain_off);
}

static const char *key_of(const struct htab *t, void *item)
{
    return (const char *)item + t->key_off;
}

static void *ht_get(const struct htab *t, const char *key)
{
    if (!t->nb)
        return NULL;
    for (void *it = t->b[hash(key) & (t->nb - 1)]; it; it = *chain(t, it))
        if (strcmp(key_of(t, it), key) == 0)
            return it;
    return NULL;
}

static int ht_grow(struct htab *t)
{
    size_t nb = t->nb ? t->nb * 2 : 64;
    void **b = calloc(nb, sizeof(*b));

    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < t->nb; i++) {
        void *it = t->b[i];
        while (it) {
            void *next = *chain(t, it);
            size_t k = hash(key_of(t, it)) & (nb - 1);
            *chain(t, it) = b[k];
            b[k] = it;
            it = next;
        }
    }
    free(t->b);
    t->b = b;
    t->nb = nb;
    return 0;
}

static int ht_put(struct htab *t, void *item)
{
    size_t k;

    if ((t->n + 1) * 4 > t->nb * 3 && ht_grow(t) < 0)
        return -ENOMEM;
    k = hash(key_of(t, item)) & (t->nb - 1);
    *chain(t, item) = t->b[k];
    t->b[k] = item;
    t->n++;
    return 0;
}

static void ht_del(struct htab *t, void *item)
{
    void **pp = &t->b[hash(key_of(t, item)) & (t->nb - 1)];

    while (*pp && *pp != item)
        pp = chain(t, *pp);
    if (*pp) {
        *pp = *chain(t, item);
        t->n--;
    }
}

/* ---- Helpers ---- */

/* copy writes src to dst (size bytes, NUL included), cut to fit at the
 * start of a UTF-8 character: never in the middle of one. */
static void copy(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;

    if (n >= size) {
        n = size - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

uint64_t vs_create_order(const char *ref)
{
    const char *p;
    uint64_t v = 0;

    if (!ref)
        return 0;
    p = ref + strlen(ref);
    while (p > ref && p[-1] >= '0' && p[-1] <= '9')
        p--;
    for (; *p; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return UINT64_MAX;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    return v;
}

/* pg_link puts link in the list of key in t, made when it is the first:
 * *pg is that list; false when it cannot be made (out of memory: the
 * object is only missing from listings). */
static bool pg_link(struct htab *t, const char *key, struct pgroup **pg, struct lq *link)
{
    struct pgroup *g = ht_get(t, key);
    size_t len = strlen(key);

    if (!g) {
        g = calloc(1, sizeof(*g) + len + 1);
        if (!g)
            return false;
        lq_init(&g->children);
        memcpy(g->ref, key, len + 1);
        if (ht_put(t, g) < 0) {
            free(g);
            return false;
        }
    }
    *pg = g;
    lq_insert_head(&g->children, link);
    g->n++;
    return true;
}

/* pg_unlink takes link out of its list *pg in t, freed when it was the
 * last. */
static void pg_unlink(struct htab *t, struct pgroup **pg, struct lq *link)
{
    struct pgroup *g = *pg;

    if (!g)
        return;
    lq_remove(link);
    *pg = NULL;
    if (--g->n == 0) {
        ht_del(t, g);
        free(g);
    }
}

static void unlink_parent(vs_cache *c, struct node *n)
{
    pg_unlink(&c->groups, &n->pg, &n->slink);
}

/* link_parent puts n in its parent's list. */
static void link_parent(vs_cache *c, struct node *n)
{
    if (n->o.parent[0])
        (void)pg_link(&c->groups, n->o.parent, &n->pg, &n->slink);
}

/* relink_mark puts n in the list of its uid mark (a VM's), if it has one,
 * after taking it out of the one it was in. */
static void relink_mark(vs_cache *c, struct node *n)
{
    pg_unlink(&c->marks, &n->mg, &n->mlink);
    if (n->o.kind == VS_OBJ_VM && n->o.has_mark_uid)
        (void)pg_link(&c->marks, n->o.mark_uid, &n->mg, &n->mlink);
}

static void mark_dirty(vs_cache *c, struct node *n, unsigned flag)
{
    /* Linked once: a node that left and came back in one update set has
     * no flag left but is still on the list. */
    if (!lq_linked(&n->dlink))
        lq_insert_head(&c->dirty, &n->dlink);
    n->dirty |= flag;
}

const struct vs_obj *vs_cache_group(const vs_cache *c, const struct vs_obj *obj)
{
    const struct vs_obj *cur = obj;

    if (!c || !obj)
        return NULL;
    for (int depth = 0; depth < MAX_DEPTH; depth++) {
        if (!cur->parent[0])
            return NULL;
        if (strcmp(cur->parent, c->root) == 0)
            return cur->kind == VS_OBJ_FOLDER ? cur : NULL;
        cur = vs_cache_get(c, cur->parent);
        if (!cur)
            return NULL;
    }
    return NULL;
}

static void capture_old_group(vs_cache *c, struct node *n)
{
    const struct vs_obj *g = vs_cache_group(c, &n->o);

    n->old_valid = true;
    copy(n->old_group, sizeof(n->old_group), g ? g->name : "");
    copy(n->old_group_ref, sizeof(n->old_group_ref), g ? g->ref : "");
}

static bool obj_equal(const struct vs_obj *a, const struct vs_obj *b)
{
    return a->kind == b->kind && strcmp(a->name, b->name) == 0 &&
           strcmp(a->parent, b->parent) == 0 && strcmp(a->power_state, b->power_state) == 0 &&
           a->powered_on == b->powered_on && a->num_cpu == b->num_cpu &&
           a->memory_mb == b->memory_mb && a->is_template == b->is_template &&
           strcmp(a->instance_uuid, b->instance_uuid) == 0 && a->n_ip == b->n_ip &&
           a->ip_primary == b->ip_primary && memcmp(a->ip, b->ip, sizeof(a->ip)) == 0 &&
           a->has_mark_uid == b->has_mark_uid && strcmp(a->mark_uid, b->mark_uid) == 0 &&
           a->has_mark_template == b->has_mark_template &&
           strcmp(a->mark_template, b->mark_template) == 0 &&
           a->has_mark_instance == b->has_mark_instance &&
           strcmp(a->mark_instance, b->mark_instance) == 0;
}

static void ip_clear(struct vs_obj *o);

static void reset_props(struct vs_obj *o)
{
    o->name[0] = '\0';
    o->parent[0] = '\0';
    o->power_state[0] = '\0';
    o->powered_on = false;
    o->num_cpu = 0;
    o->memory_mb = 0;
    o->is_template = false;
    o->instance_uuid[0] = '\0';
    ip_clear(o);
    o->has_mark_uid = false;
    o->mark_uid[0] = '\0';
    o->has_mark_template = false;
    o->mark_template[0] = '\0';
    o->has_mark_instance = false;
    o->mark_instance[0] = '\0';
}

/* set_mark records one extraConfig entry if it is one of c's marks; value
 * NULL removes it. */
static void set_mark(const vs_cache *c, struct vs_obj *o, const char *key, const char *value)
{
    if (!key || !key[0])
        return;
    if (strcmp(key, c->keys.uid) == 0) {
        o->has_mark_uid = value != NULL;
        copy(o->mark_uid, sizeof(o->mark_uid), value);
    } else if (strcmp(key, c->keys.template_key) == 0) {
        o->has_mark_template = value != NULL;
        copy(o->mark_template, sizeof(o->mark_template), value);
    } else if (strcmp(key, c->keys.instance) == 0) {
        /* Kept whole or not at all: a value cut to fit could match. */
        o->has_mark_instance = value != NULL;
        copy(o->mark_instance, sizeof(o->mark_instance),
             value && strlen(value) < sizeof(o->mark_instance) ? value : "");
    }
}

/* indexed_key reads the key of a path like config.extraConfig["key"] into
 * buf; false when name is not of that form. */
static bool indexed_key(const char *name, char *buf, size_t size)
{
    static const char prefix[] = "config.extraConfig[\"";
    size_t len, pl = sizeof(prefix) - 1;

    if (strncmp(name, prefix, pl) != 0)
        return false;
    len = strlen(name + pl);
    if (len < 2 || strcmp(name + pl + len - 2, "\"]") != 0 || len - 2 >= size)
        return false;
    memcpy(buf, name + pl, len - 2);
    buf[len - 2] = '\0';
    return true;
}

/* ---- The guest addresses ---- */

#define NIC_SCAN_MAX 32 /* NICs of guest.net looked at */
#define IP_SCAN_MAX 64  /* addresses of guest.net looked at, all NICs together */

/* v4_reportable tells whether the IPv4 address a is worth reporting: not
 * loopback, unspecified (0/8), link-local nor the limited broadcast. */
static bool v4_reportable(const unsigned char a[4])
{
    static const unsigned char bcast[4] = {255, 255, 255, 255};

    return a[0] != 127 && a[0] != 0 && !(a[0] == 169 && a[1] == 254) && memcmp(a, bcast, 4) != 0;
}

/* ip_parse reads s into ip when it is an address worth reporting (see
 * invcache.h) and returns true; else false, ip family 0. */
static bool ip_parse(const char *s, struct vs_ip *ip)
{
    unsigned char a[16] = {0};

    memset(ip, 0, sizeof(*ip));
    if (!s || strnlen(s, VS_IP_LEN) >= VS_IP_LEN)
        return false;
    if (inet_pton(AF_INET, s, a) == 1) {
        if (!v4_reportable(a))
            return false;
        memcpy(ip->a, a, 4);
        ip->family = 4;
        return true;
    }
    if (inet_pton(AF_INET6, s, a) == 1) {
        static const unsigned char zero[15];
        if (memcmp(a, zero, 15) == 0 && a[15] <= 1)
            return false; /* :: and ::1 */
        if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
            return false; /* fe80::/10 */
        if (memcmp(a, zero, 10) == 0 && a[10] == 0xff && a[11] == 0xff && !v4_reportable(a + 12))
            return false; /* ::ffff:127.0.0.1 and the like */
        memcpy(ip->a, a, 16);
        ip->family = 6;
        return true;
    }
    return false;
}

static bool ip_same(const struct vs_ip *a, const struct vs_ip *b)
{
    return a->family == b->family && memcmp(a->a, b->a, sizeof(a->a)) == 0;
}

static void ip_clear(struct vs_obj *o)
{
    memset(o->ip, 0, sizeof(o->ip));
    o->n_ip = 0;
    o->ip_primary = 0;
}

void vs_obj_primary(const struct vs_obj *o, struct vs_ip *out)
{
    memset(out, 0, sizeof(*out));
    if (o && o->n_ip > 0 && o->ip_primary < o->n_ip && o->n_ip <= VS_IP_MAX)
        *out = o->ip[o->ip_primary];
}

/* ip_set_primary applies guest.ipAddress s to o: the same primary as prev's
 * keeps prev's addresses (a full state says it again), another one is the
 * only address until guest.net is read, none leaves none. */
static void ip_set_primary(struct vs_obj *o, const struct vs_obj *prev, const char *s)
{
    struct vs_ip p, old;

    vs_obj_primary(prev, &old);
    if (!ip_parse(s, &p)) {
        ip_clear(o);
    } else if (old.family && ip_same(&p, &old)) {
        if (o != prev) {
            memcpy(o->ip, prev->ip, sizeof(o->ip));
            o->n_ip = prev->n_ip;
            o->ip_primary = prev->ip_primary;
        }
    } else {
        ip_clear(o);
        o->ip[0] = p;
        o->n_ip = 1;
    }
}

/* ip_add appends ip to o's addresses unless it is there, while fewer than
 * room. */
static void ip_add(struct vs_obj *o, const struct vs_ip *ip, unsigned room)
{
    if (o->n_ip >= room || o->n_ip >= VS_IP_MAX)
        return;
    for (unsigned j = 0; j < o->n_ip; j++)
        if (ip_same(&o->ip[j], ip))
            return;
    o->ip[o->n_ip++] = *ip;
}

/* ip_from_net makes o's addresses of its primary and the ipAddress lists
 * of val, an ArrayOfGuestNicInfo (NULL: none): IPv4 first, the primary
 * first within its family and kept even when the other family fills
 * VS_IP_MAX. No primary, no address. */
static void ip_from_net(struct vs_obj *o, const xmlNode *val)
{
    struct vs_ip pri, cand[IP_SCAN_MAX];
    size_t n = 0, looked = 0, nics = 0;

    vs_obj_primary(o, &pri);
    ip_clear(o);
    if (!pri.family)
        return;
    for (const xmlNode *nic = val ? soap_child(val, "GuestNicInfo") : NULL;
         nic && nics < NIC_SCAN_MAX && looked < IP_SCAN_MAX;
         nic = soap_next(nic, "GuestNicInfo"), nics++)
        for (const xmlNode *a = soap_child(nic, "ipAddress"); a && looked < IP_SCAN_MAX;
             a = soap_next(a, "ipAddress"), looked++)
            if (ip_parse(soap_text_ref(a), &cand[n]))
                n++;
    for (unsigned char fam = 4; fam <= 6; fam += 2) {
        /* While IPv4 fills, a slot is left for an IPv6 primary. */
        unsigned room = VS_IP_MAX - (pri.family > fam ? 1u : 0u);
        if (pri.family == fam) {
            o->ip_primary = o->n_ip;
            o->ip[o->n_ip++] = pri;
        }
        for (size_t i = 0; i < n; i++)
            if (cand[i].family == fam)
                ip_add(o, &cand[i], room);
    }
}

static bool ip_text(const struct vs_ip *ip, char out[VS_IP_LEN])
{
    if (ip->family != 4 && ip->family != 6)
        return false;
    if (!inet_ntop(ip->family == 4 ? AF_INET : AF_INET6, ip->a, out, VS_IP_LEN)) {
        out[0] = '\0';
        return false;
    }
    return true;
}

bool vs_obj_ip(const struct vs_obj *o, char out[VS_IP_LEN])
{
    struct vs_ip p;

    if (!out)
        return false;
    out[0] = '\0';
    vs_obj_primary(o, &p);
    return ip_text(&p, out);
}

bool vs_obj_ip_at(const struct vs_obj *o, unsigned i, char out[VS_IP_LEN])
{
    if (!out)
        return false;
    out[0] = '\0';
    if (!o || i >= o->n_ip || i >= VS_IP_MAX)
        return false;
    return ip_text(&o->ip[i], out);
}

/* apply_change applies ch to o; prev is o before the update (the same
 * object, or a copy), whose guest addresses a primary address said again
 * keeps. */
static void apply_change(const vs_cache *c, struct vs_obj *o, const struct vs_obj *prev,
                         const struct vim_change *ch)
{
    bool unset =
        ch->op == VIM_OP_REMOVE || ch->op == VIM_OP_INDIRECT_REMOVE || ch->kind == VIM_VAL_NONE;
    const char *n = ch->name;
    char key[VS_NAME_MAX];

    if (strcmp(n, "name") == 0) {
        copy(o->name, sizeof(o->name), !unset && ch->kind == VIM_VAL_STRING ? ch->str : "");
    } else if (strcmp(n, "parent") == 0) {
        copy(o->parent, sizeof(o->parent),
             !unset && ch->kind == VIM_VAL_MOREF ? ch->ref_value : "");
    } else if (o->kind != VS_OBJ_VM) {
        return;
    } else if (strcmp(n, "runtime.powerState") == 0) {
        copy(o->power_state, sizeof(o->power_state),
             !unset && (ch->kind == VIM_VAL_ENUM || ch->kind == VIM_VAL_STRING) ? ch->str : "");
        o->powered_on = strcmp(o->power_state, "poweredOn") == 0;
    } else if (strcmp(n, "config.hardware.numCPU") == 0) {
        o->num_cpu = !unset && ch->kind == VIM_VAL_INT && ch->num > 0 && ch->num < 1000000
                         ? (int)ch->num
                         : 0;
    } else if (strcmp(n, "config.hardware.memoryMB") == 0) {
        o->memory_mb = !unset && ch->kind == VIM_VAL_INT && ch->num > 0 ? ch->num : 0;
    } else if (strcmp(n, "config.template") == 0) {
        o->is_template = !unset && ch->kind == VIM_VAL_BOOL && ch->b;
    } else if (strcmp(n, "config.instanceUuid") == 0) {
        copy(o->instance_uuid, sizeof(o->instance_uuid),
             !unset && ch->kind == VIM_VAL_STRING ? ch->str : "");
    } else if (strcmp(n, "guest.ipAddress") == 0) {
        ip_set_primary(o, prev, !unset && ch->kind == VIM_VAL_STRING ? ch->str : NULL);
    } else if (strcmp(n, "guest.net") == 0) {
        ip_from_net(o, !unset ? ch->node : NULL);
    } else if (strcmp(n, "config.extraConfig") == 0) {
        const xmlNode *ov = NULL;
        const char *k, *v;
        set_mark(c, o, c->keys.uid, NULL);
        set_mark(c, o, c->keys.template_key, NULL);
        set_mark(c, o, c->keys.instance, NULL);
        if (unset || ch->kind != VIM_VAL_OPTIONS)
            return;
        while ((ov = vim_option_next(ch->node, ov, &k, &v)) != NULL)
            if (v)
                set_mark(c, o, k, v);
    } else if (indexed_key(n, key, sizeof(key))) {
        /* A single entry, config.extraConfig["key"]: an OptionValue. */
        const char *v = NULL;
        if (!unset && ch->kind == VIM_VAL_STRING)
            v = ch->str;
        else if (!unset && ch->node)
            v = soap_text_ref(soap_child(ch->node, "value"));
        set_mark(c, o, key, v);
    }
}

/* apply_changes applies the changes of u to o (prev: see apply_change),
 * guest.net after the others: it is merged with the primary address. */
static void apply_changes(const vs_cache *c, struct vs_obj *o, const struct vs_obj *prev,
                          const struct vim_object_update *u)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < u->n_changes; i++)
            if ((strcmp(u->changes[i].name, "guest.net") == 0) == (pass == 1))
                apply_change(c, o, prev, &u->changes[i]);
}

/* ---- Public ---- */

static bool mark_key_ok(const char *key)
{
    return !key || strlen(key) < VS_NAME_MAX;
}

bool vs_mark_keys_fit(const struct vs_mark_keys *m)
{
    return mark_key_ok(m->uid) && mark_key_ok(m->template_key) && mark_key_ok(m->instance);
}

void vs_mark_names_set(struct vs_mark_names *n, const struct vs_mark_keys *m)
{
    copy(n->uid, sizeof(n->uid), m ? m->uid : NULL);
    copy(n->template_key, sizeof(n->template_key), m ? m->template_key : NULL);
    copy(n->instance, sizeof(n->instance), m ? m->instance : NULL);
}

struct vs_mark_keys vs_mark_names_keys(const struct vs_mark_names *n)
{
    return (struct vs_mark_keys){n->uid, n->template_key, n->instance};
}

vs_cache *vs_cache_new(const char *root_ref, size_t max_objects, const struct vs_mark_keys *marks,
                       vs_cache_cb cb, void *data)
{
    vs_cache *c;

    if (!root_ref || !*root_ref || strlen(root_ref) >= VS_REF_MAX)
        return NULL;
    if (marks && !vs_mark_keys_fit(marks))
        return NULL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    lq_init(&c->dirty);
    copy(c->root, sizeof(c->root), root_ref);
    vs_mark_names_set(&c->keys, marks);
    c->max = max_objects ? max_objects : VS_CACHE_DEFAULT_MAX;
    c->cb = cb;
    c->data = data;
    c->objs.key_off = offsetof(struct node, o.ref);
    c->objs.chain_off = offsetof(struct node, hnext);
    c->groups.key_off = offsetof(struct pgroup, ref);
    c->groups.chain_off = offsetof(struct pgroup, hnext);
    c->marks.key_off = offsetof(struct pgroup, ref);
    c->marks.chain_off = offsetof(struct pgroup, hnext);
    return c;
}

/* pg_free_all frees the lists of t, and t's buckets. */
static void pg_free_all(struct htab *t)
{
    for (size_t i = 0; i < t->nb; i++) {
        struct pgroup *g = t->b[i];
        while (g) {
            struct pgroup *next = g->hnext;
            free(g);
            g = next;
        }
    }
    free(t->b);
}

void vs_cache_free(vs_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->objs.nb; i++) {
        struct node *n = c->objs.b[i];
        while (n) {
            struct node *next = n->hnext;
            free(n->old_mark);
            free(n);
            n = next;
        }
    }
    pg_free_all(&c->groups);
    pg_free_all(&c->marks);
    free(c->objs.b);
    free(c->tombs);
    free(c);
}

int vs_cache_set_root(vs_cache *c, const char *root_ref)
{
    if (!c || !root_ref || !*root_ref || strlen(root_ref) >= VS_REF_MAX)
        return -EINVAL;
    copy(c->root, sizeof(c->root), root_ref);
    return 0;
}

const char *vs_cache_root(const vs_cache *c)
{
    return c ? c->root : "";
}

/* ---- Applying updates ---- */

static int kind_of(const struct vim_object_update *u, enum vs_obj_kind *ret)
{
    if (strcmp(u->obj.type, "VirtualMachine") == 0)
        *ret = VS_OBJ_VM;
    else if (strcmp(u->obj.type, "Folder") == 0)
        *ret = VS_OBJ_FOLDER;
    else
        return -1;
    return strlen(u->obj.value) < VS_REF_MAX ? 0 : -1;
}

/* fields_of: the pinnable properties (bits of F_*) u sets; an ENTER that
 * replaces the object (all) sets them all. */
static unsigned fields_of(const vs_cache *c, const struct vim_object_update *u, bool all)
{
    unsigned f = all && u->kind == VIM_ENTER ? (1u << F_N) - 1 : 0;
    char key[VS_NAME_MAX];

    for (size_t i = 0; i < u->n_changes; i++) {
        const char *n = u->changes[i].name;
        if (strcmp(n, "runtime.powerState") == 0)
            f |= 1u << F_POWER;
        else if (strcmp(n, "config.hardware.numCPU") == 0)
            f |= 1u << F_CPU;
        else if (strcmp(n, "config.hardware.memoryMB") == 0)
            f |= 1u << F_MEM;
        else if (strcmp(n, "config.extraConfig") == 0)
            f |= (c->keys.instance[0] ? 1u << F_IMARK : 0) | (c->keys.uid[0] ? 1u << F_UMARK : 0) |
                 (c->keys.template_key[0] ? 1u << F_TMARK : 0);
        else if (indexed_key(n, key, sizeof(key))) {
            if (c->keys.instance[0] && strcmp(key, c->keys.instance) == 0)
                f |= 1u << F_IMARK;
            else if (c->keys.uid[0] && strcmp(key, c->keys.uid) == 0)
                f |= 1u << F_UMARK;
            else if (c->keys.template_key[0] && strcmp(key, c->keys.template_key) == 0)
                f |= 1u << F_TMARK;
        }
    }
    return f;
}

/* differ: the pinnable properties that differ between a and b. */
static unsigned differ(const struct vs_obj *a, const struct vs_obj *b)
{
    unsigned f = 0;

    if (strcmp(a->power_state, b->power_state) != 0 || a->powered_on != b->powered_on)
        f |= 1u << F_POWER;
    if (a->num_cpu != b->num_cpu)
        f |= 1u << F_CPU;
    if (a->memory_mb != b->memory_mb)
        f |= 1u << F_MEM;
    if (a->has_mark_instance != b->has_mark_instance ||
        strcmp(a->mark_instance, b->mark_instance) != 0)
        f |= 1u << F_IMARK;
    if (a->has_mark_uid != b->has_mark_uid || strcmp(a->mark_uid, b->mark_uid) != 0)
        f |= 1u << F_UMARK;
    if (a->has_mark_template != b->has_mark_template ||
        strcmp(a->mark_template, b->mark_template) != 0)
        f |= 1u << F_TMARK;
    return f;
}

/* keep_fields puts back in o the properties of keep that old has. */
static void keep_fields(struct vs_obj *o, const struct vs_obj *old, unsigned keep)
{
    if (keep & (1u << F_POWER)) {
        memcpy(o->power_state, old->power_state, sizeof(o->power_state));
        o->powered_on = old->powered_on;
    }
    if (keep & (1u << F_CPU))
        o->num_cpu = old->num_cpu;
    if (keep & (1u << F_MEM))
        o->memory_mb = old->memory_mb;
    if (keep & (1u << F_IMARK)) {
        o->has_mark_instance = old->has_mark_instance;
        memcpy(o->mark_instance, old->mark_instance, sizeof(o->mark_instance));
    }
    if (keep & (1u << F_UMARK)) {
        o->has_mark_uid = old->has_mark_uid;
        memcpy(o->mark_uid, old->mark_uid, sizeof(o->mark_uid));
    }
    if (keep & (1u << F_TMARK)) {
        o->has_mark_template = old->has_mark_template;
        memcpy(o->mark_template, old->mark_template, sizeof(o->mark_template));
    }
}

/* get_node finds u's object, or makes it (reported as new). */
static int get_node(vs_cache *c, const struct vim_object_update *u, enum vs_obj_kind kind,
                    struct node **ret)
{
    struct node *n = ht_get(&c->objs, u->obj.value);

    if (!n) {
        if (c->objs.n >= c->max)
            return -ENOSPC;
        n = calloc(1, sizeof(*n));
        if (!n)
            return -ENOMEM;
        n->o.kind = kind;
        copy(n->o.ref, sizeof(n->o.ref), u->obj.value);
        n->o.create_order = vs_create_order(n->o.ref);
        if (ht_put(&c->objs, n) < 0) {
            free(n);
            return -ENOMEM;
        }
        mark_dirty(c, n, D_NEW);
    } else if (!n->dirty) {
        capture_old_group(c, n);
    }
    n->seen = true;
    if (n->dirty & D_REMOVED)
        n->dirty &= ~(unsigned)D_REMOVED; /* it came back in the same batch */
    *ret = n;
    return 0;
}

/* update_node applies the changes of u to n (after clearing every property
 * when reset), but for the properties in keep, which it leaves as they
 * were; returns those of keep that u set to another value. */
static unsigned update_node(vs_cache *c, struct node *n, const struct vim_object_update *u,
                            bool reset, unsigned keep)
{
    struct vs_obj before = n->o;
    unsigned set = fields_of(c, u, reset), lost;
    bool mark_differs;

    c->mark++;
    if (reset)
        reset_props(&n->o);
    apply_changes(c, &n->o, &before, u);
    lost = differ(&n->o, &before) & set & keep;
    n->disputed = (n->disputed & ~(set & keep)) | lost;
    keep_fields(&n->o, &before, keep);
    for (int f = 0; f < F_N; f++)
        if (set & ~keep & (1u << f))
            n->set_at[f] = c->mark;
    if (strcmp(before.parent, n->o.parent) != 0 || !n->pg) {
        unlink_parent(c, n);
        link_parent(c, n);
    }
    mark_differs =
        before.has_mark_uid != n->o.has_mark_uid || strcmp(before.mark_uid, n->o.mark_uid) != 0;
    if (mark_differs || (n->o.has_mark_uid && !n->mg))
        relink_mark(c, n);
    if (mark_differs && !n->mark_changed) {
        /* The mark before the batch: kept at its first change. */
        n->mark_changed = true;
        n->old_mark = before.has_mark_uid ? strdup(before.mark_uid) : NULL;
    }
    if (!obj_equal(&before, &n->o))
        mark_dirty(c, n, D_CHANGED);
    return lost;
}

/* tomb_find finds the tomb of ref, or NULL. */
static struct tomb *tomb_find(const vs_cache *c, const char *ref)
{
    for (size_t i = 0; i < c->ntombs; i++)
        if (strcmp(c->tombs[i].ref, ref) == 0)
            return &c->tombs[i];
    return NULL;
}

static void tomb_del(vs_cache *c, struct tomb *t)
{
    size_t i = (size_t)(t - c->tombs);

    memmove(&c->tombs[i], &c->tombs[i + 1], (c->ntombs - i - 1) * sizeof(*c->tombs));
    c->ntombs--;
}

/* tomb_holds returns the tomb of ref, an object assumed gone, when an
 * answer to request asked is older than that assumption; a newer one ends
 * it (NULL). */
static struct tomb *tomb_holds(vs_cache *c, const char *ref, uint64_t asked)
{
    struct tomb *t = tomb_find(c, ref);

    if (t && asked > t->asked) {
        tomb_del(c, t);
        t = NULL;
    }
    return t;
}

/* tomb_add remembers ref as assumed gone while requests up to asked are
 * out; beyond TOMB_MAX the oldest is forgotten. */
static int tomb_add(vs_cache *c, const char *ref, uint64_t asked)
{
    if (!c->tombs && !(c->tombs = calloc(TOMB_MAX, sizeof(*c->tombs))))
        return -ENOMEM;
    for (size_t i = 0; i < c->ntombs; i++)
        if (strcmp(c->tombs[i].ref, ref) == 0) {
            c->tombs[i].asked = asked;
            return 0;
        }
    if (c->ntombs == TOMB_MAX) {
        memmove(&c->tombs[0], &c->tombs[1], (TOMB_MAX - 1) * sizeof(*c->tombs));
        c->ntombs--;
    }
    copy(c->tombs[c->ntombs].ref, sizeof(c->tombs[0].ref), ref);
    c->tombs[c->ntombs].disputed = false;
    c->tombs[c->ntombs++].asked = asked;
    return 0;
}

/* version_of finds u's config.changeVersion (NULL when it has none) and
 * tells whether u carries hardware values too (an ENTER carries all). */
static const struct vim_change *version_of(const struct vim_object_update *u, bool *hardware)
{
    const struct vim_change *v = NULL;

    *hardware = u->kind == VIM_ENTER;
    for (size_t i = 0; i < u->n_changes; i++) {
        const char *n = u->changes[i].name;
        if (strcmp(n, CHANGE_VERSION) == 0)
            v = &u->changes[i];
        else if (strncmp(n, HARDWARE, sizeof(HARDWARE) - 1) == 0)
            *hardware = true;
    }
    return v;
}

/* note_version keeps the config.changeVersion of VM n that u says with
 * the hardware values: an ENTER (the watch's or a read's, all of the VM at
 * once; without one, none is known) or an update that carries both. One
 * that announces a version alone leaves the known one, until the read it
 * asks for (vs_cache_config_read) answers. */
static void note_version(struct node *n, const struct vim_object_update *u)
{
    bool hardware;
    const struct vim_change *v = version_of(u, &hardware);

    if (n->o.kind != VS_OBJ_VM || !hardware)
        return;
    if (u->kind == VIM_ENTER || v)
        n->version[0] = '\0';
    /* While the size is pinned by an assumption, the cache may hold other
     * values than the version's (an older answer's were kept): none known. */
    if (n->pinned & (1u << F_CPU | 1u << F_MEM))
        return;
    if (v && v->kind == VIM_VAL_STRING && v->str && strlen(v->str) < sizeof(n->version))
        copy(n->version, sizeof(n->version), v->str);
}

bool vs_cache_config_read(const vs_cache *c, const struct vim_object_update *u)
{
    const struct node *n;
    const struct vim_change *v;
    bool hardware;

    if (!c || !u || u->kind != VIM_MODIFY || strcmp(u->obj.type, "VirtualMachine") != 0)
        return false;
    v = version_of(u, &hardware);
    if (!v)
        return false;
    n = ht_get(&c->objs, u->obj.value);
    /* With the size pinned, the update's values may have been kept out:
     * the read unpins them. */
    if (hardware)
        return n && n->o.kind == VS_OBJ_VM && (n->pinned & (1u << F_CPU | 1u << F_MEM));
    return !n || n->o.kind != VS_OBJ_VM || !n->version[0] || v->kind != VIM_VAL_STRING || !v->str ||
           strcmp(v->str, n->version) != 0;
}

bool vs_cache_guest_read(const vs_cache *c, const struct vim_object_update *u,
                         const struct vs_ip *before)
{
    struct vs_ip now;

    if (!c || !u || !before || u->kind == VIM_LEAVE || strcmp(u->obj.type, "VirtualMachine") != 0)
        return false;
    for (size_t i = 0; i < u->n_changes; i++)
        if (strcmp(u->changes[i].name, "guest.net") == 0)
            return false;
    vs_obj_primary(vs_cache_get(c, u->obj.value), &now);
    return now.family && !ip_same(&now, before);
}

int vs_cache_apply(vs_cache *c, const struct vim_object_update *u)
{
    int e = vs_cache_apply_from(c, u, UINT64_MAX);

    return e < 0 ? e : 0;
}

int vs_cache_apply_from(vs_cache *c, const struct vim_object_update *u, uint64_t asked)
{
    enum vs_obj_kind kind;
    struct node *n;
    unsigned keep = 0, set, lost;
    int e;

    if (!c || !u)
        return -EINVAL;
    if (kind_of(u, &kind) < 0)
        return 0;
    n = ht_get(&c->objs, u->obj.value);
    if (n && n->o.kind != kind)
        return 0;
    if (!n) {
        struct tomb *t = tomb_holds(c, u->obj.value, asked);
        /* Older than its assumed removal, which is final, unless the
         * server gave the moref to a new object (vcsim does after a
         * restart): read it back to know. */
        if (t && u->kind != VIM_LEAVE)
            t->disputed = true;
        if (t)
            return u->kind != VIM_LEAVE ? VS_CACHE_READ_BACK : 0;
    }
    if (u->kind == VIM_LEAVE) {
        /* Believed whatever its age: an object seen gone does not come
         * back (a moref is never used again). */
        if (n) {
            n->seen = true;
            mark_dirty(c, n, D_REMOVED);
        }
        return 0;
    }
    e = get_node(c, u, kind, &n);
    if (e < 0)
        return e;
    set = fields_of(c, u, u->kind == VIM_ENTER);
    for (int f = 0; f < F_N; f++) {
        if (!(n->pinned & (1u << f)))
            continue;
        /* A newer answer ends the assumption of what it sets; one that
         * does not set a property leaves its pin, and its dispute, until
         * an answer or a read-back says it. */
        if (asked > n->pin[f] && (set & (1u << f)))
            n->pinned &= ~(1u << f);
        else
            keep |= 1u << f;
    }
    lost = update_node(c, n, u, u->kind == VIM_ENTER, keep);
    note_version(n, u);
    return lost ? VS_CACHE_READ_BACK : 0;
}

bool vs_cache_disputed(const vs_cache *c, const char *ref)
{
    const struct node *n = c && ref ? ht_get(&c->objs, ref) : NULL;
    const struct tomb *t;

    if (n)
        return (n->disputed & n->pinned) != 0;
    t = c && ref ? tomb_find(c, ref) : NULL;
    return t && t->disputed;
}

uint64_t vs_cache_mark(const vs_cache *c)
{
    return c ? c->mark : 0;
}

int vs_cache_assume(vs_cache *c, const struct vim_object_update *u, uint64_t since, uint64_t asked)
{
    enum vs_obj_kind kind;
    struct node *n;
    struct vs_obj want;
    struct tomb *t;
    unsigned skip = 0, set, lost;
    bool seen;
    int e;

    if (!c || !u || kind_of(u, &kind) < 0)
        return -EINVAL;
    n = ht_get(&c->objs, u->obj.value);
    if (n && n->o.kind != kind)
        return -EINVAL;
    if (u->kind == VIM_LEAVE) {
        e = tomb_add(c, u->obj.value, asked);
        if (e < 0)
            return e;
        if (n) {
            n->seen = true;
            mark_dirty(c, n, D_REMOVED);
        }
        return 1;
    }
    if (!n && u->kind != VIM_ENTER)
        return 0; /* not known: nothing to change, the watch will tell */
    if (!n && (t = tomb_find(c, u->obj.value)) != NULL)
        tomb_del(c, t); /* a moref given again (vcsim after a restart) */
    seen = n && n->seen;
    e = get_node(c, u, kind, &n);
    if (e < 0)
        return e;
    /* Only the watch's full state says what still exists during a resync:
     * an assumption does not keep an object it lacks. */
    n->seen = seen;
    set = fields_of(c, u, false);
    for (int f = 0; f < F_N; f++)
        if (n->set_at[f] > since)
            skip |= 1u << f;
    /* Merged into what is known, never replacing it (an ENTER of an object
     * the watch has shown keeps what the watch said of the rest). */
    want = n->o;
    apply_changes(c, &want, &n->o, u);
    lost = differ(&want, &n->o) & skip & set;
    if (u->kind == VIM_ENTER) {
        /* A new object: what the watch said of it came after the operation
         * started, and most likely before its end (vCenter ends a clone
         * once the VM is on, vcsim just before). The result is assumed,
         * and what the watch said otherwise is disputed: read back once
         * the stream has had its say (vs_cache_disputed). */
        skip = 0;
    }
    (void)update_node(c, n, u, false, skip);
    for (int f = 0; f < F_N; f++)
        if (set & ~skip & (1u << f)) {
            n->pin[f] = asked;
            n->pinned |= 1u << f;
            n->disputed &= ~(1u << f);
            if (lost & (1u << f))
                n->disputed |= 1u << f;
        }
    return lost && u->kind != VIM_ENTER ? 0 : 1;
}

void vs_cache_settle(vs_cache *c, uint64_t floor)
{
    size_t k = 0;

    if (!c)
        return;
    for (size_t i = 0; i < c->ntombs; i++)
        if (c->tombs[i].asked >= floor || c->tombs[i].disputed)
            c->tombs[k++] = c->tombs[i];
    c->ntombs = k;
}

static void free_node(vs_cache *c, struct node *n)
{
    unlink_parent(c, n);
    pg_unlink(&c->marks, &n->mg, &n->mlink);
    ht_del(&c->objs, n);
    free(n->old_mark);
    free(n);
}

size_t vs_cache_commit(vs_cache *c)
{
    struct lq list, *l;
    size_t events = 0;

    if (!c)
        return 0;
    lq_foreach(l, &c->dirty)
    {
        struct node *n = lq_entry(l, struct node, dlink);
        struct vs_cache_event ev = {0};
        const struct vs_obj *g;
        if ((n->dirty & D_NEW) && (n->dirty & D_REMOVED))
            continue;
        if (n->dirty & D_REMOVED)
            ev.change = VS_CHANGE_REMOVED;
        else if (n->dirty & D_NEW)
            ev.change = VS_CHANGE_ADDED;
        else if (n->dirty & D_CHANGED)
            ev.change = VS_CHANGE_UPDATED;
        else
            continue;
        ev.obj = &n->o;
        g = vs_cache_group(c, &n->o);
        if (g) {
            ev.group = g->name;
            ev.group_ref = g->ref;
        }
        if (ev.change == VS_CHANGE_UPDATED && n->old_valid && n->old_group_ref[0] &&
            (!g || strcmp(g->ref, n->old_group_ref) != 0 || strcmp(g->name, n->old_group) != 0)) {
            ev.old_group = n->old_group;
            ev.old_group_ref = n->old_group_ref;
        }
        if ((ev.change == VS_CHANGE_UPDATED || ev.change == VS_CHANGE_REMOVED) && n->old_mark &&
            (!n->o.has_mark_uid || strcmp(n->old_mark, n->o.mark_uid) != 0))
            ev.old_mark_uid = n->old_mark;
        events++;
        if (c->cb)
            c->cb(c->data, &ev);
    }
    lq_move(&c->dirty, &list);
    while ((l = lq_pop_head(&list)) != NULL) {
        struct node *n = lq_entry(l, struct node, dlink);
        n->old_valid = false;
        free(n->old_mark);
        n->old_mark = NULL;
        n->mark_changed = false;
        if (n->dirty & D_REMOVED)
            free_node(c, n);
        else
            n->dirty = 0;
    }
    return events;
}

void vs_cache_begin_resync(vs_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->objs.nb; i++)
        for (struct node *n = c->objs.b[i]; n; n = n->hnext)
            n->seen = false;
}

size_t vs_cache_end_resync(vs_cache *c)
{
    if (!c)
        return 0;
    for (size_t i = 0; i < c->objs.nb; i++)
        for (struct node *n = c->objs.b[i]; n; n = n->hnext)
            if (!n->seen)
                mark_dirty(c, n, D_REMOVED);
    return vs_cache_commit(c);
}

size_t vs_cache_size(const vs_cache *c)
{
    return c ? c->objs.n : 0;
}

const struct vs_obj *vs_cache_get(const vs_cache *c, const char *ref)
{
    struct node *n;

    if (!c || !ref)
        return NULL;
    n = ht_get(&c->objs, ref);
    return n ? &n->o : NULL;
}

const struct vs_obj *vs_cache_folder(const vs_cache *c, const char *name)
{
    const struct pgroup *g;
    struct lq *l;

    if (!c || !name)
        return NULL;
    g = ht_get(&c->groups, c->root);
    if (!g)
        return NULL;
    lq_foreach(l, &g->children)
    {
        const struct node *n = lq_entry(l, struct node, slink);
        if (n->o.kind == VS_OBJ_FOLDER && strcmp(n->o.name, name) == 0)
            return &n->o;
    }
    return NULL;
}

size_t vs_cache_children(const vs_cache *c, const char *folder_ref, bool vms,
                         const struct vs_obj **out, size_t max)
{
    const struct pgroup *g;
    struct lq *l;
    size_t count = 0;

    if (!c || !folder_ref)
        return 0;
    g = ht_get(&c->groups, folder_ref);
    if (!g)
        return 0;
    lq_foreach(l, &g->children)
    {
        const struct node *n = lq_entry(l, struct node, slink);
        if ((n->o.kind == VS_OBJ_VM) != vms)
            continue;
        if (out && count < max)
            out[count] = &n->o;
        count++;
    }
    return count;
}

size_t vs_cache_marked(const vs_cache *c, const char *uid, const struct vs_obj **out, size_t max)
{
    const struct pgroup *g;
    struct lq *l;
    size_t count = 0;

    if (!c || !uid)
        return 0;
    g = ht_get(&c->marks, uid);
    if (!g)
        return 0;
    lq_foreach(l, &g->children)
    {
        const struct node *n = lq_entry(l, struct node, mlink);
        if (out && count < max)
            out[count] = &n->o;
        count++;
    }
    return count;
}
