// Command vcsim serves govmomi's vCenter simulator for the tests of
// vmgroup-operator: a VPX model with TLS, the vAPI REST endpoints, and a
// fixed user whose password is read from a file, so that a wrong password is
// refused. With -load it starts from an inventory saved by `govc object.save`.
//
// For the fault tests: -login-fault-file answers the operator's Logins
// with a SOAP fault (a vCenter still starting answers SystemError), and
// -method-delays-file delays calls as -method-delays does, while the file
// exists (a vCenter slow to answer a long poll: tests/e2e/30-vsphere.bats).
//
// For the benchmarks: -task-delays and -method-delays make tasks and calls
// take time as on a real vCenter, and -debug-addr serves Go's pprof
// (/debug/pprof/) and the count of SOAP requests by method
// (/debug/soap-methods) on a plain HTTP listener, the count of
// RetrievePropertiesEx requests by what they read (/debug/soap-reads, e.g.
// "VirtualMachine:guest.net"), and the count of changes to managed objects
// by kind and type (/debug/updates).
package main

import (
	"bytes"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	// The vSphere Automation REST API (sessions, tagging).
	_ "github.com/vmware/govmomi/vapi/simulator"
)

// taskNames maps the SOAP methods that start a task to the name the
// simulator gives the task (simulator.TaskDelay is keyed by the latter).
var taskNames = map[string]string{
	"CloneVM_Task":    "CloneVm",
	"PowerOnVM_Task":  "PowerOn",
	"PowerOffVM_Task": "PowerOff",
	"Destroy_Task":    "Destroy",
	"ReconfigVM_Task": "ReconfigVm",
	"ResetVM_Task":    "Reset",
	"SuspendVM_Task":  "Suspend",
	"RelocateVM_Task": "RelocateVm",
}

// parseDelays reads "Name=ms,Name=ms".
func parseDelays(s string) (map[string]int, error) {
	m := map[string]int{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		ms, err := strconv.Atoi(v)
		if !ok || k == "" || err != nil || ms < 0 {
			return nil, fmt.Errorf("%q: want Name=milliseconds", kv)
		}
		m[k] = ms
	}
	return m, nil
}

// methods counts SOAP requests by method and delays those asked for.
// counts is a set of named counters served as "name count" lines, sorted.
type counts struct {
	mu    sync.Mutex
	count map[string]int64
}

func (c *counts) inc(name string) {
	c.mu.Lock()
	c.count[name]++
	c.mu.Unlock()
}

func (c *counts) serve(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	names := make([]string, 0, len(c.count))
	for k := range c.count {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "%s %d\n", k, c.count[k])
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, b.String())
}

type methods struct {
	counts
	reads      counts // RetrievePropertiesEx by what it reads
	delay      map[string]int
	jitter     float64
	loginFault string // a file naming the fault the operator's Logins get
	delayFile  string // a file of more delays ("Method=ms,..."), read per call
	faultFile  string // a file of faults ("Method=FaultType,..."), read per call
}

// faultOf is the fault type -method-faults-file names for a call of method
// of the operator (its User-Agent names it) while the file exists; ""
// otherwise. A vCenter refuses a call this way when its arguments are
// wrong (InvalidArgument), or the user may not make it (NoPermission).
func (m *methods) faultOf(r *http.Request, method string) string {
	if !strings.Contains(r.UserAgent(), "vmgroup-operator") {
		return ""
	}
	text, ok := whileExists(m.faultFile)
	if !ok {
		return ""
	}
	for _, kv := range strings.Split(text, ",") {
		if name, fault, found := strings.Cut(strings.TrimSpace(kv), "="); found && name == method {
			return fault
		}
	}
	return ""
}

// delayOf is how long a call of method waits before it is served: the
// delays of -method-delays-file while it exists and names the method,
// else those of -method-delays.
func (m *methods) delayOf(method string) int {
	if text, ok := whileExists(m.delayFile); ok {
		if d, err := parseDelays(text); err == nil && d[method] > 0 {
			return d[method]
		}
	}
	return m.delay[method]
}

// whileExists reads the file at path, its blanks around trimmed; ok is
// false when path is "" or the file cannot be read (it does not exist).
func whileExists(path string) (text string, ok bool) {
	if path == "" {
		return "", false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// faultOfLogin is the fault type that loginFault names while it exists,
// for a Login of the operator (its User-Agent names it); "" otherwise.
func (m *methods) faultOfLogin(r *http.Request) string {
	if !strings.Contains(r.UserAgent(), "vmgroup-operator") {
		return ""
	}
	text, _ := whileExists(m.loginFault)
	return text
}

// writeFault answers with a SOAP fault of the given type, as vCenter does.
func writeFault(w http.ResponseWriter, typ string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+
		`<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" `+
		`xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault>`+
		`<faultcode>ServerFaultCode</faultcode><faultstring>%s (vcsim test fault)</faultstring>`+
		`<detail><%sFault xmlns="urn:vim25" xsi:type="%s"></%sFault></detail>`+
		`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`, typ, typ, typ, typ)
}

var (
	reType = regexp.MustCompile(`<(?:\w+:)?type>([^<]*)</`)
	rePath = regexp.MustCompile(`<(?:\w+:)?pathSet>([^<]*)</`)
	reAll  = regexp.MustCompile(`<(?:\w+:)?all>true</`)
)

// readOf says what a RetrievePropertiesEx reads: the types of its property
// specs and their paths ("*" for all), e.g. "VirtualMachine:guest.net".
func readOf(body []byte) string {
	var types, paths []string
	for _, m := range reType.FindAllSubmatch(body, -1) {
		types = append(types, string(m[1]))
	}
	for _, m := range rePath.FindAllSubmatch(body, -1) {
		paths = append(paths, string(m[1]))
	}
	if reAll.Match(body) {
		paths = append(paths, "*")
	}
	return strings.Join(types, "+") + ":" + strings.Join(paths, ",")
}

// methodOf finds the first element inside the SOAP Body: the method's name.
func methodOf(body []byte) string {
	i := bytes.Index(body, []byte("Body"))
	if i < 0 {
		return "?"
	}
	j := bytes.IndexByte(body[i:], '<')
	if j < 0 {
		return "?"
	}
	rest := body[i+j+1:]
	end := bytes.IndexAny(rest, " />")
	if end < 0 {
		return "?"
	}
	name := rest[:end]
	if k := bytes.IndexByte(name, ':'); k >= 0 {
		name = name[k+1:]
	}
	return string(name)
}

func (m *methods) wrap(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		name := methodOf(body)
		m.inc(name)
		if name == "RetrievePropertiesEx" {
			m.reads.inc(readOf(body))
		}
		if name == "Login" {
			if f := m.faultOfLogin(r); f != "" {
				writeFault(w, f)
				return
			}
		}
		if f := m.faultOf(r, name); f != "" {
			writeFault(w, f)
			return
		}
		if d := m.delayOf(name); d > 0 {
			d += int(rand.NormFloat64() * m.jitter * float64(d))
			time.Sleep(time.Duration(max(d, 0)) * time.Millisecond)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next(w, r)
	}
}

// updates counts the changes the simulator makes to its managed objects
// (the events each pending WaitForUpdatesEx re-collects its filters for),
// by kind and object type, e.g. "modify/Task 12".
type updates struct {
	counts
}

func (u *updates) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "UpdateCounter", Value: "debug-updates"}
}

func (u *updates) add(kind string, ref types.ManagedObjectReference) {
	u.inc(kind + "/" + ref.Type)
}

func (u *updates) PutObject(_ *simulator.Context, o mo.Reference) { u.add("enter", o.Reference()) }
func (u *updates) UpdateObject(_ *simulator.Context, o mo.Reference, _ []types.PropertyChange) {
	u.add("modify", o.Reference())
}
func (u *updates) RemoveObject(_ *simulator.Context, ref types.ManagedObjectReference) {
	u.add("leave", ref)
}

func main() {
	model := simulator.VPX()
	model.Datacenter = 1
	model.Cluster = 1
	model.ClusterHost = 2
	model.Host = 0
	model.Machine = 0
	model.Datastore = 1
	model.Pool = 0
	model.App = 0
	model.Pod = 0

	listen := flag.String("l", "127.0.0.1:0", "listen address")
	user := flag.String("username", "", "the only user name accepted")
	passFile := flag.String("password-file", "", "file holding the only password accepted")
	cert := flag.String("tlscert", "", "TLS certificate file")
	key := flag.String("tlskey", "", "TLS key file")
	load := flag.String("load", "", "load the inventory from this directory (govc object.save)")
	urlFile := flag.String("url-file", "", "write the SDK URL to this file once serving")
	taskDelays := flag.String("task-delays", "", "Method=ms,...: how long each task of these "+
		"methods (CloneVM_Task, PowerOnVM_Task, PowerOffVM_Task, Destroy_Task, ...) runs")
	methodDelays := flag.String("method-delays", "", "Method=ms,...: how long each call of "+
		"these methods takes before it is served")
	jitter := flag.Float64("delay-jitter", 0, "the delays' coefficient of variation (stddev/mean)")
	loginFault := flag.String("login-fault-file", "", "while this file exists, the operator's "+
		"Logins (User-Agent vmgroup-operator) are answered with the SOAP fault it names, e.g. SystemError")
	delayFile := flag.String("method-delays-file", "", "while this file exists, the calls of "+
		"the methods it names (Method=ms,...) take that long before they are served")
	faultFile := flag.String("method-faults-file", "", "while this file exists, the operator's "+
		"calls of the methods it names (Method=FaultType,..., e.g. ReconfigVM_Task=InvalidArgument) "+
		"are answered with that SOAP fault")
	debugAddr := flag.String("debug-addr", "", "serve /debug/pprof/, /debug/soap-methods, /debug/soap-reads and /debug/updates here (plain HTTP)")
	flag.Parse()

	mc := &methods{counts: counts{count: map[string]int64{}},
		reads: counts{count: map[string]int64{}}, jitter: *jitter, loginFault: *loginFault,
		delayFile: *delayFile, faultFile: *faultFile}
	var err error
	if mc.delay, err = parseDelays(*methodDelays); err != nil {
		log.Fatalf("vcsim: -method-delays: %v", err)
	}
	td, err := parseDelays(*taskDelays)
	if err != nil {
		log.Fatalf("vcsim: -task-delays: %v", err)
	}
	if len(td) > 0 {
		// The task takes the entity's lock after its delay, not before:
		// otherwise clones of one template would run one at a time.
		simulator.TaskDelay.MethodDelay = map[string]int{"LockHandoff": 0}
		simulator.TaskDelay.DelayJitter = *jitter
		for k, v := range td {
			if n, ok := taskNames[k]; ok {
				k = n
			}
			simulator.TaskDelay.MethodDelay[k] = v
		}
	}

	if *user == "" || *passFile == "" {
		log.Fatal("vcsim: -username and -password-file are required")
	}
	pass, err := os.ReadFile(*passFile)
	if err != nil {
		log.Fatalf("vcsim: reading password: %v", err)
	}
	u := &url.URL{Host: *listen, User: url.UserPassword(*user, strings.TrimSpace(string(pass)))}

	host, port, err := net.SplitHostPort(*listen)
	if err != nil {
		log.Fatalf("vcsim: -l %q: %v", *listen, err)
	}
	esx.HostSystem.Summary.ManagementServerIp = host
	if n, err := strconv.Atoi(port); err == nil && n != 0 {
		esx.HostSystem.Summary.Config.Port = int32(n)
	}

	if *load == "" {
		err = model.Create()
	} else {
		err = model.Load(*load)
	}
	if err != nil {
		log.Fatalf("vcsim: building the inventory: %v", err)
	}

	// Every SOAP call goes through the counter (and the delays) first; a
	// pattern with a method is more specific than the simulator's "/sdk".
	if model.Service.ServeMux == nil {
		model.Service.ServeMux = http.NewServeMux()
	}
	model.Service.ServeMux.HandleFunc("POST /sdk", mc.wrap(model.Service.ServeSDK))
	if *debugAddr != "" {
		dm := http.NewServeMux()
		dm.HandleFunc("/debug/pprof/", pprof.Index)
		dm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		dm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		dm.HandleFunc("/debug/pprof/trace", pprof.Trace)
		dm.HandleFunc("/debug/soap-methods", mc.serve)
		dm.HandleFunc("/debug/soap-reads", mc.reads.serve)
		uc := &updates{counts{count: map[string]int64{}}}
		model.Map().AddHandler(uc)
		dm.HandleFunc("/debug/updates", uc.serve)
		ln, err := net.Listen("tcp", *debugAddr)
		if err != nil {
			log.Fatalf("vcsim: -debug-addr: %v", err)
		}
		go func() { log.Print(http.Serve(ln, dm)) }()
	}

	model.Service.RegisterEndpoints = true
	model.Service.Listen = u
	model.Service.TLS = new(tls.Config)
	if *cert != "" {
		c, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			log.Fatalf("vcsim: loading the TLS key pair: %v", err)
		}
		model.Service.TLS.Certificates = []tls.Certificate{c}
	}

	s := model.Service.NewServer()
	sdk := *s.URL
	sdk.User = nil
	fmt.Printf("vcsim: serving %s\n", sdk.String())
	if *urlFile != "" {
		tmp := *urlFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(sdk.String()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(tmp, *urlFile); err != nil {
			log.Fatal(err)
		}
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.Close()
	model.Remove()
}
