/* test_soap.c: envelopes are built and escaped exactly, secrets stay out
 * of the tree, responses from a real vcsim parse, faults decode to their
 * vim25 type, and hostile or broken XML (DTDs, entities, truncation, node
 * floods) is refused without harm. Fixtures: tests/unit/fixtures/soap/,
 * recorded by hack/record-soap-fixtures; tests run from the repository root. */
#include "tests/unit/unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libxml/tree.h>

#include "lib/err.h"
#include "vsphere/soap.h"

#define MAX_RESP (1u << 20)

#define ENV_OPEN                                                                                   \
    "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "               \
    "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><soapenv:Body>"
#define ENV_CLOSE "</soapenv:Body></soapenv:Envelope>"

static char *load(const char *name, size_t *len)
{
    return unit_fixture("soap", name, len);
}

/* parse_str parses a NUL-terminated document. */
static int parse_str(const char *doc, soap_resp **ret, struct soap_fault *fault)
{
    return soap_parse(doc, strlen(doc), MAX_RESP, ret, fault);
}

static int parse_fixture(const char *name, soap_resp **ret, struct soap_fault *fault)
{
    size_t len;
    char *buf = load(name, &len);
    int r = soap_parse(buf, len, MAX_RESP, ret, fault);
    free(buf);
    return r;
}

/* serialize frees req and returns its envelope (free with soap_buf_free). */
static char *serialize(soap_req *req, size_t *len)
{
    char *buf = NULL;
    assert_non_null(req);
    assert_int_equal(soap_req_serialize(req, &buf, len), 0);
    soap_req_free(req);
    assert_int_equal(strlen(buf), *len);
    return buf;
}

/* ---- Building ---- */

static void test_envelope_exact(void **state)
{
    soap_req *req = soap_req_new("PowerOnVM_Task", "VirtualMachine", "vm-42");
    size_t len;
    char *buf;

    (void)state;
    buf = serialize(req, &len);
    assert_string_equal(
        buf, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\" "
             "xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" "
             "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">"
             "<soapenv:Body xmlns=\"urn:vim25\"><PowerOnVM_Task>"
             "<_this type=\"VirtualMachine\">vm-42</_this>"
             "</PowerOnVM_Task></soapenv:Body></soapenv:Envelope>\n");
    soap_buf_free(buf, len);
}

static void test_helpers_and_escaping(void **state)
{
    soap_req *req = soap_req_new("Test", "Folder", "group-\"1\"&");
    xmlNode *m = soap_req_method(req), *spec, *ov;
    size_t len;
    char *buf;

    (void)state;
    soap_add_text(m, "name", "a<b>&c\"d' \xc3\xa9\xe2\x82\xac\r\n\t");
    soap_add_int(m, "n", -9223372036854775807LL - 1);
    soap_add_bool(m, "yes", true);
    soap_add_bool(m, "no", false);
    soap_add_moref(m, "pool", "ResourcePool", "resgroup-<1>");
    soap_add_text(m, "empty", "");
    spec = soap_add_typed(m, "spec", "VirtualMachineConfigSpec");
    ov = soap_add_typed(spec, "extraConfig", "OptionValue");
    soap_add_text(ov, "key", "k");
    soap_add_typed_text(ov, "value", "xsd:string", "v&");
    buf = serialize(req, &len);
    assert_non_null(strstr(buf, "<_this type=\"Folder\">group-\"1\"&amp;</_this>"));
    assert_non_null(strstr(buf, "<name>a&lt;b&gt;&amp;c\"d' \xc3\xa9\xe2\x82\xac&#13;\n\t</name>"));
    assert_non_null(strstr(buf, "<n>-9223372036854775808</n><yes>true</yes><no>false</no>"));
    assert_non_null(strstr(buf, "<pool type=\"ResourcePool\">resgroup-&lt;1&gt;</pool>"));
    assert_non_null(strstr(buf, "<empty/>"));
    assert_non_null(strstr(buf, "<spec xsi:type=\"VirtualMachineConfigSpec\">"
                                "<extraConfig xsi:type=\"OptionValue\"><key>k</key>"
                                "<value xsi:type=\"xsd:string\">v&amp;</value>"
                                "</extraConfig></spec>"));

    soap_buf_free(buf, len);
}

/* A request's own envelope parses as a SOAP document: its method element
 * is the body's element and its text comes back as it went in. */
static void test_round_trip(void **state)
{
    const char *name = "x<&>\"' \xf0\x9f\x98\x80 \r\n";
    soap_req *req = soap_req_new("CreateFolder", "Folder", "group-v3");
    xmlNode *m = soap_req_method(req), *n;
    soap_resp *resp = NULL;
    size_t len;
    char *buf, text[64];

    (void)state;
    soap_add_text(m, "name", name);
    buf = serialize(req, &len);
    assert_int_equal(soap_parse(buf, len, len, &resp, NULL), 0);
    assert_true(soap_is(soap_resp_body(resp), "CreateFolder"));
    assert_null(soap_resp_returnval(resp));
    n = soap_child(soap_resp_body(resp), "name");
    assert_int_equal(soap_text(n, text, sizeof(text)), (int)strlen(name));
    assert_string_equal(text, name);
    assert_string_equal(soap_text_ref(soap_child(soap_resp_body(resp), "_this")), "group-v3");
    soap_resp_free(resp);
    soap_buf_free(buf, len);
}

static void test_invalid_arguments_refused(void **state)
{
    static const char *bad_text[] = {
        "\x01",             /* control character */
        "a\x7f\xff",        /* not UTF-8 */
        "\xc0\xaf",         /* overlong '/' */
        "\xed\xa0\x80",     /* a UTF-16 surrogate */
        "\xef\xbf\xbe",     /* U+FFFE */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xe2\x82",         /* cut short */
    };
    char *buf = NULL;
    size_t len = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(bad_text) / sizeof(bad_text[0]); i++) {
        soap_req *req = soap_req_new("M", "T", "v");
        assert_null(soap_add_text(soap_req_method(req), "x", bad_text[i]));
        assert_int_equal(soap_req_serialize(req, &buf, &len), -EINVAL);
        assert_null(buf);
        soap_req_free(req);
        assert_null(soap_req_new("M", "T", bad_text[i]));
    }

    /* Bad names and types; the first refusal sticks, later calls on a NULL
     * parent are no-ops. */
    soap_req *req = soap_req_new("M", "T", "v");
    xmlNode *m = soap_req_method(req);
    assert_null(soap_add_text(m, "a b", "x"));
    assert_null(soap_add_text(soap_add_text(NULL, "a", "b"), "c", "d"));
    assert_null(soap_add_typed(m, "spec", "xsd:"));
    assert_null(soap_add_typed(m, "spec", "a:b:c"));
    assert_null(soap_add_moref(m, "obj", "", "v"));
    assert_null(soap_add_text(m, "x", NULL));
    assert_int_equal(soap_req_serialize(req, &buf, &len), -EINVAL);
    soap_req_free(req);

    assert_null(soap_req_new("1abc", "T", "v"));
    assert_null(soap_req_new("M", NULL, "v"));
    assert_null(soap_req_new(NULL, "T", "v"));
    assert_int_equal(soap_req_serialize(NULL, &buf, &len), -EINVAL);
    soap_req_free(NULL);
    soap_buf_free(NULL, 0);
    assert_null(soap_req_method(NULL));
}

static void test_secret_never_in_tree(void **state)
{
    soap_req *req = soap_req_new("Login", "SessionManager", "SessionManager");
    xmlNode *m = soap_req_method(req);
    xmlChar *tree = NULL;
    int tree_len = 0;
    size_t len;
    char *buf;

    (void)state;
    soap_add_text(m, "userName", "admin");
    assert_non_null(soap_add_secret(m, "password", "pa<ss>&w\"rd\r"));
    xmlDocDumpMemory(m->doc, &tree, &tree_len);
    assert_non_null(tree);
    assert_null(strstr((char *)tree, "pa<ss"));
    assert_null(strstr((char *)tree, "pa&lt;ss"));
    xmlFree(tree);
    /* A second secret is refused. */
    assert_null(soap_add_secret(m, "other", "x"));
    assert_int_equal(soap_req_serialize(req, &buf, &len), -EINVAL);
    soap_req_free(req);

    req = soap_req_new("Login", "SessionManager", "SessionManager");
    m = soap_req_method(req);
    soap_add_text(m, "userName", "<!--vmg-secret-->");
    soap_add_secret(m, "password", "pa<ss>&w\"rd\r");
    soap_add_text(m, "locale", "en");
    buf = serialize(req, &len);
    assert_non_null(strstr(buf, "<userName>&lt;!--vmg-secret--&gt;</userName>"
                                "<password>pa&lt;ss&gt;&amp;w\"rd&#13;</password>"
                                "<locale>en</locale></Login>"));

    /* The server reads back exactly the password. */
    soap_resp *resp = NULL;
    char text[64];
    assert_int_equal(soap_parse(buf, len, len, &resp, NULL), 0);
    assert_int_equal(soap_text(soap_child(soap_resp_body(resp), "password"), text, sizeof(text)),
                     12);
    assert_string_equal(text, "pa<ss>&w\"rd\r");
    soap_resp_free(resp);
    soap_buf_free(buf, len);

    /* A secret with a character XML cannot carry is refused. */
    req = soap_req_new("Login", "SessionManager", "SessionManager");
    assert_null(soap_add_secret(soap_req_method(req), "password", "a\x02"));
    assert_int_equal(soap_req_serialize(req, &buf, &len), -EINVAL);
    soap_req_free(req);
}

static void test_soap_action(void **state)
{
    char buf[64];

    (void)state;
    assert_int_equal(soap_action(buf, sizeof(buf), "8.0.2.0"), 17);
    assert_string_equal(buf, "urn:vim25/8.0.2.0");
    assert_int_equal(soap_action(buf, sizeof(buf), "6.5"), 13);
    assert_string_equal(buf, "urn:vim25/6.5");
    assert_int_equal(soap_action(buf, 17, "8.0.2.0"), -ENOSPC);
    assert_int_equal(soap_action(buf, sizeof(buf), "8.0\r\nX-Evil: 1"), -EINVAL);
    assert_int_equal(soap_action(buf, sizeof(buf), ""), -EINVAL);
    assert_int_equal(soap_action(buf, sizeof(buf), NULL), -EINVAL);
}

/* ---- Parsing real responses ---- */

static void test_parse_login_response(void **state)
{
    soap_resp *resp = NULL;
    xmlNode *rv;
    char key[64];

    (void)state;
    assert_int_equal(parse_fixture("login.resp.xml", &resp, NULL), 0);
    assert_true(soap_is(soap_resp_body(resp), "LoginResponse"));
    rv = soap_resp_returnval(resp);
    assert_non_null(rv);
    assert_null(soap_next(rv, "returnval"));
    assert_string_equal(soap_text_ref(soap_child(rv, "userName")), "user");
    assert_int_equal(soap_text(soap_child(rv, "key"), key, sizeof(key)), 36);
    assert_int_equal(soap_text(soap_child(rv, "key"), key, 36), VMG_ETOOBIG);
    assert_string_equal(key, "");

    long long calls = 0;
    bool ext = true;
    assert_int_equal(soap_int(soap_child(rv, "callCount"), &calls), 0);
    assert_int_equal(calls, 1);
    assert_int_equal(soap_bool(soap_child(rv, "extensionSession"), &ext), 0);
    assert_false(ext);
    /* Walking: children in order, by name or any. */
    xmlNode *first = soap_child(rv, NULL);
    assert_true(soap_is(first, "key"));
    assert_true(soap_is(soap_next(first, NULL), "userName"));
    assert_true(soap_is(soap_next(first, "locale"), "locale"));
    assert_null(soap_child(rv, "nope"));
    assert_null(soap_child(NULL, "key"));
    assert_null(soap_next(NULL, NULL));
    soap_resp_free(resp);
    soap_resp_free(NULL);
    assert_null(soap_resp_body(NULL));
    assert_null(soap_resp_returnval(NULL));
}

/* vcsim spells xsi as "_XMLSchema-instance"; the namespace decides. */
static void test_xsi_type_by_namespace(void **state)
{
    soap_resp *resp = NULL;
    xmlNode *fs, *os, *cs;

    (void)state;
    assert_int_equal(parse_fixture("wait_initial.resp.xml", &resp, NULL), 0);
    fs = soap_child(soap_resp_returnval(resp), "filterSet");
    os = soap_child(fs, "objectSet");
    cs = soap_child(os, "changeSet");
    assert_string_equal(soap_xsi_type(soap_child(cs, "val")), "string");
    cs = soap_next(cs, "changeSet");
    assert_string_equal(soap_xsi_type(soap_child(cs, "val")), "ManagedObjectReference");
    assert_null(soap_xsi_type(soap_child(cs, "name")));
    soap_resp_free(resp);

    assert_int_equal(parse_str(ENV_OPEN "<R xmlns:a=\"urn:other\"><returnval a:type=\"x:int\" "
                                        "type=\"y\">1</returnval></R>" ENV_CLOSE,
                               &resp, NULL),
                     0);
    assert_null(soap_xsi_type(soap_resp_returnval(resp)));
    soap_resp_free(resp);
}

static void test_void_response(void **state)
{
    soap_resp *resp = NULL;

    (void)state;
    assert_int_equal(parse_fixture("logout.resp.xml", &resp, NULL), 0);
    assert_true(soap_is(soap_resp_body(resp), "LogoutResponse"));
    assert_null(soap_resp_returnval(resp));
    soap_resp_free(resp);
}

/* ---- Faults ---- */

static void expect_fault(const char *fixture, const char *type, const char *message)
{
    soap_resp *resp = NULL;
    struct soap_fault f;

    memset(&f, 'x', sizeof(f));
    assert_int_equal(parse_fixture(fixture, &resp, &f), VMG_EFAULT);
    assert_null(resp);
    assert_string_equal(f.type, type);
    assert_string_equal(f.message, message);
}

static void test_faults_from_vcsim(void **state)
{
    (void)state;
    expect_fault("fault_invalid_login.resp.xml", "InvalidLogin", "Login failure");
    expect_fault("fault_not_authenticated.resp.xml", "NotAuthenticated", "NotAuthenticated");
    expect_fault("fault_after_logout.resp.xml", "NotAuthenticated", "NotAuthenticated");
    expect_fault("fault_duplicate_name.resp.xml", "DuplicateName", "DuplicateName");
    expect_fault("fault_managed_object_not_found.resp.xml", "ManagedObjectNotFound",
                 "managed object not found: VirtualMachine:vm-999");
    expect_fault("fault_invalid_state.resp.xml", "InvalidState", "InvalidState");

    /* The fault struct may be NULL. */
    soap_resp *resp = NULL;
    assert_int_equal(parse_fixture("fault_invalid_login.resp.xml", &resp, NULL), VMG_EFAULT);
}

static void fault_of(const char *doc, struct soap_fault *f)
{
    soap_resp *resp = NULL;
    assert_int_equal(parse_str(doc, &resp, f), VMG_EFAULT);
}

static void test_fault_type_rules(void **state)
{
    struct soap_fault f;
    char doc[2048], msg[1200];

    (void)state;
    /* Without xsi:type, the element name less its "Fault". */
    fault_of(ENV_OPEN "<soapenv:Fault><faultcode>ServerFaultCode</faultcode>"
                      "<faultstring> Cannot complete login </faultstring><detail>"
                      "<InvalidLoginFault xmlns=\"urn:vim25\"/></detail></soapenv:Fault>" ENV_CLOSE,
             &f);
    assert_string_equal(f.type, "InvalidLogin");
    assert_string_equal(f.message, "Cannot complete login");
    /* A type whose own name ends in Fault keeps it. */
    fault_of(ENV_OPEN "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>no "
                      "room</faultstring><detail><InsufficientResourcesFaultFault "
                      "xmlns=\"urn:vim25\"/></detail></soapenv:Fault>" ENV_CLOSE,
             &f);
    assert_string_equal(f.type, "InsufficientResourcesFault");
    fault_of(ENV_OPEN "<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>no "
                      "room</faultstring><detail><InsufficientResourcesFaultFault "
                      "xmlns=\"urn:vim25\" xsi:type=\"InsufficientResourcesFault\"/></detail>"
                      "</soapenv:Fault>" ENV_CLOSE,
             &f);
    assert_string_equal(f.type, "InsufficientResourcesFault");
    assert_string_equal(f.message, "no room");
    /* xsi:type wins over the element name. */
    fault_of(ENV_OPEN "<soapenv:Fault><faultstring>busy</faultstring><detail><x "
                      "xsi:type=\"vim25:TaskInProgress\"/></detail></soapenv:Fault>" ENV_CLOSE,
             &f);
    assert_string_equal(f.type, "TaskInProgress");
    /* No detail: the faultcode's local part. */
    fault_of(ENV_OPEN "<soapenv:Fault><faultcode>soapenv:Client</faultcode><faultstring>bad "
                      "request</faultstring></soapenv:Fault>" ENV_CLOSE,
             &f);
    assert_string_equal(f.type, "Client");
    assert_string_equal(f.message, "bad request");
    fault_of(ENV_OPEN "<soapenv:Fault/>" ENV_CLOSE, &f);
    assert_string_equal(f.type, "SoapFault");
    assert_string_equal(f.message, "SoapFault");

    /* A long message is cut to fit, at a character boundary. */
    memset(msg, 0, sizeof(msg));
    for (size_t i = 0; i + 2 < 1100; i += 2)
        memcpy(msg + i, "\xc3\xa9", 2);
    snprintf(doc, sizeof(doc),
             ENV_OPEN "<soapenv:Fault><faultstring>%s</faultstring><detail><FileFault "
                      "xsi:type=\"FileFault\"/></detail></soapenv:Fault>" ENV_CLOSE,
             msg);
    fault_of(doc, &f);
    assert_string_equal(f.type, "FileFault");
    assert_int_equal(strlen(f.message), 510); /* 255 two-byte characters, not 255.5 */
    assert_memory_equal(f.message + 508, "\xc3\xa9", 2);
}

static void test_method_fault(void **state)
{
    soap_resp *resp = NULL;
    struct soap_fault f;
    xmlNode *rv;

    (void)state;
    assert_int_equal(
        parse_str(ENV_OPEN "<R><returnval><fault xsi:type=\"InvalidPowerState\"><requestedState>"
                           "poweredOff</requestedState></fault><localizedMessage>The attempted "
                           "operation cannot be performed</localizedMessage></returnval>"
                           "<returnval><fault xsi:type=\"TaskInProgress\"/></returnval>"
                           "<returnval><fault/><localizedMessage>x</localizedMessage></returnval>"
                           "</R>" ENV_CLOSE,
                  &resp, NULL),
        0);
    rv = soap_resp_returnval(resp);
    assert_int_equal(soap_method_fault(rv, &f), 0);
    assert_string_equal(f.type, "InvalidPowerState");
    assert_string_equal(f.message, "The attempted operation cannot be performed");
    rv = soap_next(rv, "returnval");
    assert_int_equal(soap_method_fault(rv, &f), 0);
    assert_string_equal(f.type, "TaskInProgress");
    assert_string_equal(f.message, "TaskInProgress");
    rv = soap_next(rv, "returnval");
    memset(&f, 'z', sizeof(f));
    assert_int_equal(soap_method_fault(rv, &f), VMG_EPARSE);
    assert_int_equal(f.type[0], 'z'); /* untouched on failure */
    assert_int_equal(soap_method_fault(NULL, &f), VMG_EPARSE);
    soap_resp_free(resp);
}

/* ---- Refusing bad input ---- */

static void test_size_bound(void **state)
{
    size_t len;
    char *buf = load("login.resp.xml", &len);
    soap_resp *resp = NULL;

    (void)state;
    assert_int_equal(soap_parse(buf, len, len - 1, &resp, NULL), VMG_ETOOBIG);
    assert_null(resp);
    assert_int_equal(soap_parse(buf, len, len, &resp, NULL), 0);
    soap_resp_free(resp);
    assert_int_equal(soap_parse(buf, 0, len, &resp, NULL), VMG_EPARSE);
    assert_int_equal(soap_parse(NULL, 1, len, &resp, NULL), -EINVAL);
    assert_int_equal(soap_parse(buf, len, len, NULL, NULL), -EINVAL);
    free(buf);
}

/* Every proper prefix of a real response is malformed, and says so. */
static void test_every_truncation_refused(void **state)
{
    size_t len;
    char *buf = load("wait_task_error.resp.xml", &len);
    soap_resp *resp = NULL;

    (void)state;
    /* The document ends with a newline or not; without it, it is whole. */
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    for (size_t n = 1; n < len; n++) {
        int r = soap_parse(buf, n, MAX_RESP, &resp, NULL);
        if (r != VMG_EPARSE)
            fail_msg("prefix of %zu bytes: %d", n, r);
    }
    assert_int_equal(soap_parse(buf, len, MAX_RESP, &resp, NULL), 0);
    soap_resp_free(resp);
    free(buf);
}

static void test_dtd_and_entities_refused(void **state)
{
    static const char *docs[] = {
        /* A DTD of any kind. */
        "<!DOCTYPE soapenv:Envelope>" ENV_OPEN "<R/>" ENV_CLOSE,
        /* Billion laughs. */
        "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
        "<!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
        "<!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">"
        "<!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">"
        "<!ENTITY lol4 \"&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;\">"
        "<!ENTITY lol5 \"&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;\">"
        "<!ENTITY lol6 \"&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;\">"
        "<!ENTITY lol7 \"&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;\">"
        "<!ENTITY lol8 \"&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;\">"
        "<!ENTITY lol9 \"&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;\">"
        "]>" ENV_OPEN "<R><returnval>&lol9;</returnval></R>" ENV_CLOSE,
        /* An external entity (XXE). */
        "<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>" ENV_OPEN
        "<R><returnval>&e;</returnval></R>" ENV_CLOSE,
        /* An external DTD over the network. */
        "<!DOCTYPE x SYSTEM \"http://127.0.0.1:9/x.dtd\">" ENV_OPEN "<R/>" ENV_CLOSE,
        /* An entity never declared. */
        ENV_OPEN "<R><returnval>&e;</returnval></R>" ENV_CLOSE,
    };
    soap_resp *resp = NULL;
    struct soap_fault f;

    (void)state;
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        int r = parse_str(docs[i], &resp, &f);
        if (r != VMG_EPARSE)
            fail_msg("document %zu: %d", i, r);
        assert_null(resp);
    }
    /* The predefined entities and character references are plain text. */
    assert_int_equal(parse_str(ENV_OPEN
                               "<R><returnval>&lt;&amp;&#x41;&#66;</returnval></R>" ENV_CLOSE,
                               &resp, NULL),
                     0);
    assert_string_equal(soap_text_ref(soap_resp_returnval(resp)), "<&AB");
    soap_resp_free(resp);
}

static void test_not_an_envelope(void **state)
{
    static const char *docs[] = {
        "<Envelope><Body><R/></Body></Envelope>",
        "<e:Envelope xmlns:e=\"http://www.w3.org/2003/05/soap-envelope\"><e:Body><R/></e:Body>"
        "</e:Envelope>",
        "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\"/>",
        ENV_OPEN ENV_CLOSE,
        "<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/soap/envelope/\"><Body><R/>"
        "</Body></soapenv:Envelope>",
        "not xml at all",
        "<a>\xff\xfe</a>",
        ENV_OPEN "<R>" ENV_CLOSE,
    };
    soap_resp *resp = NULL;

    (void)state;
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        int r = parse_str(docs[i], &resp, NULL);
        if (r != VMG_EPARSE)
            fail_msg("document %zu: %d", i, r);
    }
    /* A Header before the Body is fine. */
    assert_int_equal(parse_str("<soapenv:Envelope xmlns:soapenv=\"http://schemas.xmlsoap.org/"
                               "soap/envelope/\"><soapenv:Header><h/></soapenv:Header>"
                               "<soapenv:Body><R><returnval>1</returnval></R></soapenv:Body>"
                               "</soapenv:Envelope>",
                               &resp, NULL),
                     0);
    soap_resp_free(resp);
}

/* A flood of tiny elements stops at SOAP_MAX_NODES instead of building a
 * tree hundreds of megabytes large. */
static void test_node_flood_refused(void **state)
{
    const char *open = ENV_OPEN "<R><returnval>", *close = "</returnval></R>" ENV_CLOSE;
    size_t n = SOAP_MAX_NODES + 10, len = strlen(open) + 4 * n + strlen(close);
    char *doc = malloc(len + 1), *p = doc;
    soap_resp *resp = NULL;

    (void)state;
    assert_non_null(doc);
    memcpy(p, open, strlen(open));
    p += strlen(open);
    for (size_t i = 0; i < n; i++, p += 4)
        memcpy(p, "<a/>", 4);
    memcpy(p, close, strlen(close) + 1);
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), VMG_ETOOBIG);
    assert_null(resp);
    free(doc);

    /* Text nodes count too. */
    n = SOAP_MAX_NODES / 2 + 10;
    len = strlen(open) + 8 * n + strlen(close);
    doc = malloc(len + 1);
    assert_non_null(doc);
    p = doc;
    memcpy(p, open, strlen(open));
    p += strlen(open);
    for (size_t i = 0; i < n; i++, p += 8)
        memcpy(p, "<a>x</a>", 8);
    memcpy(p, close, strlen(close) + 1);
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), VMG_ETOOBIG);
    free(doc);

    /* Attributes count too: elements of two attributes each, fewer than
     * SOAP_MAX_NODES elements but more nodes in all. */
    n = SOAP_MAX_NODES / 3 + 10;
    len = strlen(open) + 14 * n + strlen(close);
    doc = malloc(len + 1);
    assert_non_null(doc);
    p = doc;
    memcpy(p, open, strlen(open));
    p += strlen(open);
    for (size_t i = 0; i < n; i++, p += 14)
        memcpy(p, "<a b=\"\" c=\"\"/>", 14);
    memcpy(p, close, strlen(close) + 1);
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), VMG_ETOOBIG);
    /* Just under the bound is fine. */
    n = SOAP_MAX_NODES / 3 - 10;
    p = doc + strlen(open) + 14 * n;
    memcpy(p, close, strlen(close) + 1);
    assert_int_equal(soap_parse(doc, strlen(doc), len, &resp, NULL), 0);
    soap_resp_free(resp);
    free(doc);
}

/* doc_with returns ENV_OPEN <R><returnval TAG...> ENV_CLOSE with n
 * attributes (or namespace declarations, ns) in returnval's tag. */
static char *doc_with(size_t n, bool ns, size_t *ret_len)
{
    const char *open = ENV_OPEN "<R><returnval", *close = ">x</returnval></R>" ENV_CLOSE;
    size_t cap = strlen(open) + 24 * n + strlen(close) + 1, len;
    char *doc = malloc(cap);

    assert_non_null(doc);
    len = (size_t)snprintf(doc, cap, "%s", open);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(doc + len, cap - len, ns ? " xmlns:p%zu='u%zu'" : " a%zu=''", i, i);
    len += (size_t)snprintf(doc + len, cap - len, "%s", close);
    *ret_len = len;
    return doc;
}

/* A tag with more attributes or namespace declarations than any vim25
 * tag has is refused before libxml2 reads it: 200,000 of them took
 * libxml2 2.9 a minute and more of the loop's time. Quoted values, comments
 * and CDATA hold '=' freely. */
static void test_attribute_flood_refused(void **state)
{
    soap_resp *resp = NULL;
    size_t len;
    char *doc;
    clock_t t0;

    (void)state;
    doc = doc_with(200000, false, &len);
    t0 = clock();
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), VMG_ETOOBIG);
    assert_true((double)(clock() - t0) / CLOCKS_PER_SEC < 0.5);
    assert_null(resp);
    free(doc);
    doc = doc_with(200000, true, &len);
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), VMG_ETOOBIG);
    free(doc);
    /* The bound: the envelope's tag has two, returnval's 64 or 65. */
    doc = doc_with(SOAP_MAX_TAG_ATTRS, false, &len);
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), 0);
    soap_resp_free(resp);
    free(doc);
    doc = doc_with(SOAP_MAX_TAG_ATTRS + 1, false, &len);
    assert_int_equal(soap_parse(doc, len, len, &resp, NULL), VMG_ETOOBIG);
    free(doc);
    {
        static const char ok[] =
            ENV_OPEN "<R><returnval a='x=y>z=w' b=\"=\"><!-- = = = = --><![CDATA[= = =]]>"
                     "</returnval></R>" ENV_CLOSE;
        char many[4096];
        size_t k = (size_t)snprintf(many, sizeof(many), "%s", ENV_OPEN "<R><!--");
        for (int i = 0; i < 100; i++)
            k += (size_t)snprintf(many + k, sizeof(many) - k, " a%d=''", i);
        snprintf(many + k, sizeof(many) - k, "%s", "--><returnval>x</returnval></R>" ENV_CLOSE);
        assert_int_equal(soap_parse(ok, strlen(ok), sizeof(ok), &resp, NULL), 0);
        soap_resp_free(resp);
        assert_int_equal(soap_parse(many, strlen(many), sizeof(many), &resp, NULL), 0);
        soap_resp_free(resp);
    }
}

/* Comments and CDATA do not split text: it stays one reference. */
static void test_text_forms(void **state)
{
    soap_resp *resp = NULL;
    xmlNode *rv;
    char buf[32];
    long long v;
    bool b;

    (void)state;
    assert_int_equal(parse_str(ENV_OPEN "<R><returnval>a<!-- c -->b<![CDATA[<c>]]><?pi x?>d"
                                        "</returnval><returnval> -42 </returnval>"
                                        "<returnval>9223372036854775808</returnval>"
                                        "<returnval>12abc</returnval><returnval/>"
                                        "<returnval> true </returnval><returnval>0</returnval>"
                                        "<returnval>yes</returnval><returnval><x/></returnval>"
                                        "</R>" ENV_CLOSE,
                               &resp, NULL),
                     0);
    rv = soap_resp_returnval(resp);
    assert_string_equal(soap_text_ref(rv), "ab<c>d");
    assert_int_equal(soap_text(rv, buf, sizeof(buf)), 6);
    rv = soap_next(rv, "returnval");
    assert_int_equal(soap_int(rv, &v), 0);
    assert_int_equal(v, -42);
    rv = soap_next(rv, "returnval");
    v = 7;
    assert_int_equal(soap_int(rv, &v), VMG_EPARSE); /* overflow */
    assert_int_equal(v, 7);
    rv = soap_next(rv, "returnval");
    assert_int_equal(soap_int(rv, &v), VMG_EPARSE);
    rv = soap_next(rv, "returnval");
    assert_string_equal(soap_text_ref(rv), "");
    assert_int_equal(soap_int(rv, &v), VMG_EPARSE);
    rv = soap_next(rv, "returnval");
    assert_int_equal(soap_bool(rv, &b), 0);
    assert_true(b);
    rv = soap_next(rv, "returnval");
    assert_int_equal(soap_bool(rv, &b), 0);
    assert_false(b);
    rv = soap_next(rv, "returnval");
    assert_int_equal(soap_bool(rv, &b), VMG_EPARSE);
    rv = soap_next(rv, "returnval");
    assert_null(soap_text_ref(rv)); /* structured, not text */
    assert_int_equal(soap_text(rv, buf, sizeof(buf)), 0);
    assert_int_equal(soap_text(NULL, buf, sizeof(buf)), -EINVAL);
    assert_null(soap_text_ref(NULL));
    soap_resp_free(resp);
}

/* Library code does not print: whatever libxml2 finds wrong comes back as
 * a code, and nothing reaches stderr. */
static void test_nothing_printed(void **state)
{
    static const char ucs4[] = {0, 0, 0, '<', 0, 0, 0, 'a', 0, 0, 0, '/', 0, 0, 0, '>'};
    static const char utf16[] = {(char)0xff, (char)0xfe, '<', 0, 'a', 0, '/', 0, '>', 0};
    static const char *docs[] = {
        "<?xml version=\"1.0\" encoding=\"EBCDIC-XX\"?><a/>",
        "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>" ENV_OPEN "<R>\xe9</R>" ENV_CLOSE,
        "<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>",
        ENV_OPEN "<R>&nope;</R>" ENV_CLOSE,
        "<a><b></a>",
        "<a>\xc3</a>",
    };
    char path[] = "/tmp/test_soap_stderr.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    soap_resp *resp = NULL;
    char c;

    (void)state;
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    assert_true(dup2(fd, 2) >= 0);
    assert_int_equal(soap_parse(ucs4, sizeof(ucs4), 100, &resp, NULL), VMG_EPARSE);
    assert_int_equal(soap_parse(utf16, sizeof(utf16), 100, &resp, NULL), VMG_EPARSE);
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
        assert_int_equal(parse_str(docs[i], &resp, NULL), VMG_EPARSE);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(read(fd, &c, 1), 0);
    close(fd);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_exact),
        cmocka_unit_test(test_helpers_and_escaping),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_invalid_arguments_refused),
        cmocka_unit_test(test_secret_never_in_tree),
        cmocka_unit_test(test_soap_action),
        cmocka_unit_test(test_parse_login_response),
        cmocka_unit_test(test_xsi_type_by_namespace),
        cmocka_unit_test(test_void_response),
        cmocka_unit_test(test_faults_from_vcsim),
        cmocka_unit_test(test_fault_type_rules),
        cmocka_unit_test(test_method_fault),
        cmocka_unit_test(test_size_bound),
        cmocka_unit_test(test_every_truncation_refused),
        cmocka_unit_test(test_dtd_and_entities_refused),
        cmocka_unit_test(test_not_an_envelope),
        cmocka_unit_test(test_node_flood_refused),
        cmocka_unit_test(test_attribute_flood_refused),
        cmocka_unit_test(test_text_forms),
        cmocka_unit_test(test_nothing_printed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
