// Command etcd is the upstream etcd server, built from the etcd v3.5
// modules for the tests of vmgroup-operator.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
