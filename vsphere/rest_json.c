/* rest_json.c: the JSON of the vSphere Automation REST client (see rest.h,
 * "Request and response shaping"): request bodies made with cJSON, and
 * response bodies read with bounds on every string and list. No I/O. */
#include "vsphere/rest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lib/buf.h"
#include "lib/err.h"
#include "lib/jsonbound.h"
#include "lib/jsonwipe.h"

bool vs_rest_valid_id(const char *id)
{
    size_t n = 0;

    if (!id || !id[0])
        return false;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++, n++) {
        unsigned char c = *p;

        if (n >= VS_REST_ID_MAX)
            return false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == ':' || c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* print_free prints root as compact JSON into *ret and frees root. */
static int print_free(cJSON *root, char **ret)
{
    char *s = cJSON_PrintUnformatted(root);

    cJSON_Delete(root);
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

int vs_rest_body_category(const char *name, const char *description, bool multiple, char **ret)
{
    cJSON *root, *spec, *types;

    if (!name || !name[0] || !description || !ret)
        return -EINVAL;
    root = cJSON_CreateObject();
    spec = cJSON_AddObjectToObject(root, "create_spec");
    if (!spec || !cJSON_AddStringToObject(spec, "name", name) ||
        !cJSON_AddStringToObject(spec, "description", description) ||
        !cJSON_AddStringToObject(spec, "cardinality", multiple ? "MULTIPLE" : "SINGLE"))
        goto fail;
    types = cJSON_AddArrayToObject(spec, "associable_types");
    if (!types || !cJSON_AddItemToArray(types, cJSON_CreateString("VirtualMachine")))
        goto fail;
    return print_free(root, ret);
fail:
    cJSON_Delete(root);
    return -ENOMEM;
}

int vs_rest_body_tag(const char *name, const char *description, const char *category_id, char **ret)
{
    cJSON *root, *spec;

    if (!name || !name[0] || !description || !ret || !vs_rest_valid_id(category_id))
        return -EINVAL;
    root = cJSON_CreateObject();
    spec = cJSON_AddObjectToObject(root, "create_spec");
    if (!spec || !cJSON_AddStringToObject(spec, "name", name) ||
        !cJSON_AddStringToObject(spec, "description", description) ||
        !cJSON_AddStringToObject(spec, "category_id", category_id)) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    return print_free(root, ret);
}

int vs_rest_body_list_tags(const char *category_id, char **ret)
{
    cJSON *root;

    if (!ret || !vs_rest_valid_id(category_id))
        return -EINVAL;
    root = cJSON_CreateObject();
    if (!cJSON_AddStringToObject(root, "category_id", category_id)) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    return print_free(root, ret);
}

int vs_rest_body_object(const struct vs_rest_object *obj, char **ret)
{
    cJSON *root, *o;

    if (!obj || !ret || !obj->type[0] || !obj->id[0] ||
        !memchr(obj->type, '\0', sizeof(obj->type)) || !memchr(obj->id, '\0', sizeof(obj->id)))
        return -EINVAL;
    root = cJSON_CreateObject();
    o = cJSON_AddObjectToObject(root, "object_id");
    if (!o || !cJSON_AddStringToObject(o, "type", obj->type) ||
        !cJSON_AddStringToObject(o, "id", obj->id)) {
        cJSON_Delete(root);
        return -ENOMEM;
    }
    return print_free(root, ret);
}

/* parse_value parses body and returns its "value" member through
 * *ret_value (NULL when absent), and the root to free through *ret_root. */
static int parse_value(const char *body, size_t len, cJSON **ret_root, cJSON **ret_value)
{
    cJSON *root;

    if (!body)
        return VMG_EPARSE;
    if (!json_values_within(body, len, VS_REST_MAX_VALUES))
        return VMG_ETOOBIG;
    root = json_parse_secret(body, len); /* a session id, say */
    if (!root)
        return VMG_EPARSE;
    if (!cJSON_IsObject(root)) {
        json_wipe(root);
        cJSON_Delete(root);
        return VMG_EPARSE;
    }
    *ret_root = root;
    *ret_value = cJSON_GetObjectItemCaseSensitive(root, "value");
    return 0;
}

/* copy_str copies a JSON string into buf; VMG_EPARSE when item is not a
 * string or does not fit. */
static int copy_str(const cJSON *item, char *buf, size_t size)
{
    size_t n;

    if (!cJSON_IsString(item) || !item->valuestring)
        return VMG_EPARSE;
    n = strlen(item->valuestring);
    if (n >= size)
        return VMG_EPARSE;
    memcpy(buf, item->valuestring, n + 1);
    return 0;
}

int vs_rest_parse_string(const char *body, size_t len, char *buf, size_t size)
{
    cJSON *root = NULL, *value = NULL;
    char tmp[VS_REST_ID_MAX + 1];
    int r;

    if (!buf || size == 0)
        return -EINVAL;
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    r = copy_str(value, tmp, sizeof(tmp) < size ? sizeof(tmp) : size);
    if (r == 0 && !vs_rest_valid_id(tmp))
        r = VMG_EPARSE;
    if (r == 0)
        memcpy(buf, tmp, strlen(tmp) + 1);
    /* The string may be a session id. */
    vmg_wipe(tmp, sizeof(tmp));
    json_wipe(root);
    cJSON_Delete(root);
    return r;
}

void vs_rest_ids_free(char **ids, size_t n)
{
    if (!ids)
        return;
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

int vs_rest_parse_ids(const char *body, size_t len, char ***ret, size_t *ret_n)
{
    cJSON *root = NULL, *value = NULL, *item;
    char **ids = NULL;
    size_t n = 0, cap;
    int r;

    if (!ret || !ret_n)
        return -EINVAL;
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    if (!value || cJSON_IsNull(value))
        goto done;
    if (!cJSON_IsArray(value)) {
        r = VMG_EPARSE;
        goto out;
    }
    cap = (size_t)cJSON_GetArraySize(value);
    if (cap > VS_REST_MAX_IDS) {
        r = VMG_EPARSE;
        goto out;
    }
    if (cap > 0) {
        ids = calloc(cap, sizeof(*ids));
        if (!ids) {
            r = -ENOMEM;
            goto out;
        }
    }
    cJSON_ArrayForEach(item, value)
    {
        if (!cJSON_IsString(item) || !vs_rest_valid_id(item->valuestring)) {
            r = VMG_EPARSE;
            goto out;
        }
        ids[n] = strdup(item->valuestring);
        if (!ids[n]) {
            r = -ENOMEM;
            goto out;
        }
        n++;
    }
done:
    *ret = ids;
    *ret_n = n;
    ids = NULL;
    n = 0;
    r = 0;
out:
    vs_rest_ids_free(ids, n);
    cJSON_Delete(root);
    return r;
}

int vs_rest_parse_category(const char *body, size_t len, struct vs_rest_category *ret)
{
    cJSON *root = NULL, *value = NULL, *types, *t;
    struct vs_rest_category c;
    int r;

    if (!ret)
        return -EINVAL;
    memset(&c, 0, sizeof(c));
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    r = VMG_EPARSE;
    if (!cJSON_IsObject(value) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "id"), c.id, sizeof(c.id)) < 0 ||
        !vs_rest_valid_id(c.id) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "name"), c.name, sizeof(c.name)) < 0)
        goto out;
    t = cJSON_GetObjectItemCaseSensitive(value, "cardinality");
    if (t && copy_str(t, c.cardinality, sizeof(c.cardinality)) < 0)
        goto out;
    types = cJSON_GetObjectItemCaseSensitive(value, "associable_types");
    if (types && !cJSON_IsNull(types) && !cJSON_IsArray(types))
        goto out;
    c.vm_associable = !types || cJSON_GetArraySize(types) == 0;
    cJSON_ArrayForEach(t, types)
    {
        if (cJSON_IsString(t) && strcmp(t->valuestring, "VirtualMachine") == 0)
            c.vm_associable = true;
    }
    *ret = c;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int vs_rest_parse_tag(const char *body, size_t len, struct vs_rest_tag *ret)
{
    cJSON *root = NULL, *value = NULL;
    struct vs_rest_tag t;
    int r;

    if (!ret)
        return -EINVAL;
    memset(&t, 0, sizeof(t));
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    r = VMG_EPARSE;
    if (!cJSON_IsObject(value) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "id"), t.id, sizeof(t.id)) < 0 ||
        !vs_rest_valid_id(t.id) ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "name"), t.name, sizeof(t.name)) < 0 ||
        copy_str(cJSON_GetObjectItemCaseSensitive(value, "category_id"), t.category_id,
                 sizeof(t.category_id)) < 0)
        goto out;
    *ret = t;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

int vs_rest_parse_objects(const char *body, size_t len, struct vs_rest_object **ret, size_t *ret_n)
{
    cJSON *root = NULL, *value = NULL, *item;
    struct vs_rest_object *objs = NULL;
    size_t n = 0, cap;
    int r;

    if (!ret || !ret_n)
        return -EINVAL;
    r = parse_value(body, len, &root, &value);
    if (r < 0)
        return r;
    if (!value || cJSON_IsNull(value))
        goto done;
    r = VMG_EPARSE;
    if (!cJSON_IsArray(value))
        goto out;
    cap = (size_t)cJSON_GetArraySize(value);
    if (cap > VS_REST_MAX_IDS)
        goto out;
    if (cap > 0) {
        objs = calloc(cap, sizeof(*objs));
        if (!objs) {
            r = -ENOMEM;
            goto out;
        }
    }
    cJSON_ArrayForEach(item, value)
    {
        if (!cJSON_IsObject(item) ||
            copy_str(cJSON_GetObjectItemCaseSensitive(item, "type"), objs[n].type,
                     sizeof(objs[n].type)) < 0 ||
            copy_str(cJSON_GetObjectItemCaseSensitive(item, "id"), objs[n].id, sizeof(objs[n].id)) <
                0)
            goto out;
        n++;
    }
done:
    *ret = objs;
    *ret_n = n;
    objs = NULL;
    r = 0;
out:
    free(objs);
    cJSON_Delete(root);
    return r;
}

/* cut_copy copies s into buf, cut to fit. */
static void cut_copy(char *buf, size_t size, const char *s)
{
    if (size == 0)
        return;
    snprintf(buf, size, "%s", s ? s : "");
}

void vs_rest_parse_error(const char *body, size_t len, char *type, size_t tsize, char *msg,
                         size_t msize)
{
    cJSON *root, *t, *value, *msgs, *m;
    const char *last;

    cut_copy(type, tsize, "");
    cut_copy(msg, msize, "");
    if (!body || len == 0 || !json_values_within(body, len, VS_REST_MAX_VALUES))
        return;
    root = cJSON_ParseWithLength(body, len);
    if (!root)
        return;
    t = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (cJSON_IsString(t)) {
        last = strrchr(t->valuestring, '.');
        cut_copy(type, tsize, last ? last + 1 : t->valuestring);
    }
    /* /api errors put error_type and messages at the top. */
    t = cJSON_GetObjectItemCaseSensitive(root, "error_type");
    if (cJSON_IsString(t) && type && tsize > 0 && !type[0])
        cut_copy(type, tsize, t->valuestring);
    value = cJSON_GetObjectItemCaseSensitive(root, "value");
    msgs = cJSON_GetObjectItemCaseSensitive(cJSON_IsObject(value) ? value : root, "messages");
    m = cJSON_IsArray(msgs) ? cJSON_GetArrayItem(msgs, 0) : NULL;
    if (cJSON_IsObject(m)) {
        t = cJSON_GetObjectItemCaseSensitive(m, "default_message");
        if (cJSON_IsString(t))
            cut_copy(msg, msize, t->valuestring);
    } else if (cJSON_IsString(m)) {
        cut_copy(msg, msize, m->valuestring);
    }
    cJSON_Delete(root);
}
