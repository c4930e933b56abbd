// Command kube-apiserver is the upstream API server, built from the
// k8s.io/kubernetes module for the tests of vmgroup-operator.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
