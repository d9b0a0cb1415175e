// Command pause is the pod sandbox process of the kind node image hack/kind-node-image.sh
// assembles (containerd's sandbox_image): it holds a pod's namespaces open, reaps the children it
// inherits as PID 1 of a pod that shares its process namespace, and exits 0 on SIGINT or SIGTERM,
// as Kubernetes' own pause does. It is ours because that one is C and no registry is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
