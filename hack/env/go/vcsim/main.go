// Command vcsim serves govmomi's vCenter simulator for the tests of
// vmgroup-operator: a VPX model with TLS, the vAPI REST endpoints, and a
// fixed user whose password is read from a file, so that a wrong password is
// refused. With -load it starts from an inventory saved by `govc object.save`.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"

	// The vSphere Automation REST API (sessions, tagging).
	_ "github.com/vmware/govmomi/vapi/simulator"
)

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
	flag.Parse()

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
