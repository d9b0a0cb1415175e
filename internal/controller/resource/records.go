package resource

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// Run records people read besides status: the plan and log Secrets, and the run history.

// writeTextSecret writes text under key in the Secret name of the controller's namespace,
// labelled with the resource: plans and run logs, for admins (Secrets, because a plan or a log
// may show values that are not marked sensitive but are still private).
func (r *resourceSecrets) writeTextSecret(ctx context.Context, name string, res *v1alpha1.InfraResource, key, text string) error {
	s := &corev1.Secret{}
	s.Namespace, s.Name = r.config.Namespace, name
	_, err := controllerutil.CreateOrUpdate(ctx, r.api, s, func() error {
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[statebackend.LabelResource] = v1alpha1.LabelValue(res.Name)
		s.Type = corev1.SecretTypeOpaque
		s.Data = map[string][]byte{key: []byte(text)}
		// Owned by the resource: deleted with it (a cluster-scoped owner of a namespaced object).
		return controllerutil.SetOwnerReference(res, s, r.api.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", r.config.Namespace, name, err)
	}
	return nil
}

// recordRun keeps the ended last run's log, when keepRunLog says so, in a Secret of the
// controller's namespace (status.lastRun.logSecret).
func (r *resourceSecrets) recordRun(ctx context.Context, res *v1alpha1.InfraResource, log string) {
	last := res.Status.LastRun
	if last == nil || log == "" || !keepRunLog(res, r.keepRunLogs) {
		return
	}
	name := logSecretName(res)
	if err := r.writeTextSecret(ctx, name, res, "log", log); err == nil {
		last.LogSecret = name
	}
}

// beginRun makes run status.lastRun and moves the run it replaces to the head of status.runs
// (newest first, at most maxRunHistory-1 there, so lastRun and runs hold maxRunHistory runs; a
// run is kept once by its id, which also drops the copy of lastRun an earlier controller kept in
// runs[0]). undo puts both fields back as they were: a drift check that failed records nothing.
func beginRun(st *v1alpha1.InfraResourceStatus, run *v1alpha1.RunStatus) (undo func()) {
	prevLast, prevRuns := st.LastRun, st.Runs
	undo = func() { st.LastRun, st.Runs = prevLast, prevRuns }
	st.LastRun = run
	if prevLast == nil {
		return undo
	}
	runs := make([]v1alpha1.RunStatus, 0, maxRunHistory-1)
	runs = append(runs, *prevLast.DeepCopy())
	for _, old := range prevRuns {
		if len(runs) == maxRunHistory-1 {
			break
		}
		if old.ID != "" && (old.ID == prevLast.ID || old.ID == run.ID) {
			continue
		}
		runs = append(runs, old)
	}
	st.Runs = runs
	return undo
}

// keepRunLog reports whether the last run's log is worth a Secret (two API requests and the log's
// size in etcd): always with keepAll (--keep-run-logs); otherwise only for a run that did not
// succeed (failed, invalid, waiting for approval) and for a drift check that found drift. A
// successful run's summary stays in status.lastRun either way.
func keepRunLog(res *v1alpha1.InfraResource, keepAll bool) bool {
	last := res.Status.LastRun
	switch {
	case keepAll:
		return true
	case last.Result != v1alpha1.RunSucceeded:
		return true
	case last.Operation == "drift":
		return res.Status.Drift != nil && res.Status.Drift.Drifted
	}
	return false
}

// planSecretName and logSecretName are the Secrets, in the controller's namespace, of a
// resource's waiting plan (key plan.txt) and last run's log (key log).
func planSecretName(res *v1alpha1.InfraResource) string {
	return "tfplan-" + statebackend.SecretName(statebackend.DefaultWorkspace, suffix(res))
}

func logSecretName(res *v1alpha1.InfraResource) string {
	return "tflog-" + statebackend.SecretName(statebackend.DefaultWorkspace, suffix(res))
}

// maxRunHistory is how many runs status.lastRun and status.runs keep together.
const maxRunHistory = 5
