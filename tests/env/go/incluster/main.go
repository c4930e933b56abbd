// Command incluster is the tests' stand-in for a program that runs in a pod
// and talks to the API server the way in-cluster clients do: it reads the
// service account's token and CA from where the kubelet mounts them and
// GETs a path from https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
// It prints the answer's status line and body and exits 0 when the status is
// 200, 1 otherwise. With no token file it sends no token.
//
//	incluster PATH
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const sa = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: incluster PATH")
		os.Exit(2)
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		fmt.Fprintln(os.Stderr, "incluster: KUBERNETES_SERVICE_HOST/PORT not set")
		os.Exit(1)
	}
	ca, err := os.ReadFile(sa + "/ca.crt")
	if err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fmt.Fprintln(os.Stderr, "incluster: no certificate in ca.crt")
		os.Exit(1)
	}
	req, err := http.NewRequest("GET", "https://"+net.JoinHostPort(host, port)+os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
	if token, err := os.ReadFile(sa + "/token"); err == nil {
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	client := &http.Client{
		Timeout:   20 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("%s\n%s\n", resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
