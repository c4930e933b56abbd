// Command incluster is the tests' stand-in for a program that runs in a pod
// and talks to the API server the way in-cluster clients do: it reads the
// service account's token and CA from where the kubelet mounts them and
// GETs a path from https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
// It prints the URL, the answer's status line and body, and exits 0 when
// the status is 200, 1 otherwise. With no token file it sends no token.
//
// Given a whole https:// URL instead, it GETs that with no token, trusting
// the CA in the file $CA_FILE: a pod reaching a server of the host (vcsim).
//
//	incluster PATH|URL
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
	url, caFile, withToken := os.Args[1], sa+"/ca.crt", true
	if strings.HasPrefix(url, "https://") {
		caFile, withToken = os.Getenv("CA_FILE"), false
	} else {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			fmt.Fprintln(os.Stderr, "incluster: KUBERNETES_SERVICE_HOST/PORT not set")
			os.Exit(1)
		}
		url = "https://" + net.JoinHostPort(host, port) + url
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fmt.Fprintln(os.Stderr, "incluster: no certificate in ca.crt")
		os.Exit(1)
	}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "incluster:", err)
		os.Exit(1)
	}
	if token, err := os.ReadFile(sa + "/token"); err == nil && withToken {
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
	fmt.Printf("GET %s\n%s\n%s\n", url, resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		os.Exit(1)
	}
}
