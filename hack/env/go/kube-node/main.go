// Command kube-node is the upstream kubelet, kube-proxy, kube-scheduler and
// kube-controller-manager in one binary (as hyperkube was), built from the
// k8s.io/kubernetes module for the one-node cluster of vmgroup-operator's
// tests: the packages they share are compiled and stored once.
//
// The component is the name the binary is called by (a link named kubelet)
// or, failing that, its first argument (kube-node kubelet --flags...).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // for CronJob time zones, as kube-controller-manager has

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kubelet":                 kubelet.NewKubeletCommand,
	"kube-proxy":              proxy.NewProxyCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	newCommand, ok := commands[name]
	if !ok {
		fmt.Fprintln(os.Stderr, "usage: kube-node kubelet|kube-proxy|kube-scheduler|kube-controller-manager [FLAGS]")
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
