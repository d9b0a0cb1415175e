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
		s.Labels[statebackend.LabelResource] = statebackend.LabelValue(res.Name)
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

// recordRun keeps the finished last run in status.runs (newest first, at most maxRuns) and, when
// keepRunLog says so, its log in a Secret of the controller's namespace.
func (r *resourceSecrets) recordRun(ctx context.Context, res *v1alpha1.InfraResource, log string) {
	last := res.Status.LastRun
	if last == nil {
		return
	}
	if log != "" && keepRunLog(res, r.keepRunLogs) {
		name := logSecretName(res)
		if err := r.writeTextSecret(ctx, name, res, "log", log); err == nil {
			last.LogSecret = name
		}
	}
	runs := []v1alpha1.RunStatus{*last.DeepCopy()}
	for _, old := range res.Status.Runs {
		if len(runs) == maxRunHistory {
			break
		}
		if old.ID != "" && old.ID == last.ID {
			continue
		}
		runs = append(runs, old)
	}
	res.Status.Runs = runs
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
	case last.Result != RunSucceeded:
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

// maxRunHistory is how many runs status.runs keeps.
const maxRunHistory = 5
