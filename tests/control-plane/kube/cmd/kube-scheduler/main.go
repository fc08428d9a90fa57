// Command kube-scheduler is upstream's scheduler entry point, built from the
// k8s.io/kubernetes module at the version pinned in ../../go.mod. It binds the
// pods of Deployments to the simulated (KWOK) node of the local control plane.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
