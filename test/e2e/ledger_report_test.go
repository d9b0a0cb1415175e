//go:build e2e

package e2e_test

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// doubledReport says, for a claim whose object the ledger counts more than once without a held
// plan, what tells which runs made them: each ledger ConfigMap with its creation time, the
// resource's runs (newest first: operation, result, the pod that ran it, start and end, creates in
// doubt and how they were decided), its creates still pending, its events, and the lines of every
// live manager pod's log that name the resource. The pod of a replica deleted without grace is
// gone with its log; the runs' Controller fields still name it.
func doubledReport(c *v1alpha1.InfraClaim) string {
	var b strings.Builder
	list := &corev1.ConfigMapList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{"conductor.io/ledger": c.Namespace + "-" + c.Name}); err == nil {
		sort.Slice(list.Items, func(i, j int) bool {
			return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
		})
		for _, cm := range list.Items {
			fmt.Fprintf(&b, "  ledger %s created %s\n", cm.Name, cm.CreationTimestamp.UTC().Format("15:04:05"))
		}
	}
	res := boundResource(c)
	if res == nil {
		return b.String() + "  (no bound resource)\n"
	}
	fmt.Fprintf(&b, "  resource %s: createsPending %v (run %s)\n", res.Name, res.Status.CreatesPending, res.Status.CreatesPendingRun)
	for _, run := range res.Status.RunHistory() {
		fmt.Fprintf(&b, "  run %s %s %s by %s, queued %s started %s ended %s, plan %s: %s; resolutions %v\n",
			run.ID, run.Operation, run.Result, run.Controller, clock(run.QueuedTime), clock(run.StartTime), clock(run.CompletionTime),
			run.PlanID, run.Message, run.Resolutions)
	}
	events := &corev1.EventList{}
	if err := k8s.List(ctx, events, client.MatchingFields{"involvedObject.name": res.Name}); err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "  event %s %s %s: %s\n", e.LastTimestamp.UTC().Format("15:04:05"), e.Type, e.Reason, e.Message)
		}
	}
	for _, p := range managerPods() {
		data, err := kube.CoreV1().Pods(system).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, res.Name) {
				fmt.Fprintf(&b, "  log %s: %s\n", p.Name, line)
			}
		}
	}
	return b.String()
}

// clock is t's time of day in UTC, "-" for none.
func clock(t *metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05.000")
}
