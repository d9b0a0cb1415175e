package secrets

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// writeTextSecret writes text under key in the Secret name of the controller's namespace,
// labelled with the resource: plans and run logs, for admins (Secrets, because a plan or a log
// may show values that are not marked sensitive but are still private).
func (r *Keeper) writeTextSecret(ctx context.Context, name string, res *v1alpha1.InfraResource, key, text string) error {
	s := &corev1.Secret{}
	s.Namespace, s.Name = r.namespace, name
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
		return fmt.Errorf("writing Secret %s/%s: %w", r.namespace, name, err)
	}
	return nil
}

// WritePlan writes a held plan's rendering (text, already sealed when state is encrypted) to the
// resource's plan Secret, key plan.txt, and returns the Secret's name (status.pendingPlan.secret).
// Errors as writeTextSecret's.
func (r *Keeper) WritePlan(ctx context.Context, res *v1alpha1.InfraResource, text string) (secret string, err error) {
	secret = planSecretName(res)
	return secret, r.writeTextSecret(ctx, secret, res, "plan.txt", text)
}

// RecordRun keeps the ended last run's log, when keepRunLog says so, in a Secret of the
// controller's namespace (status.lastRun.logSecret).
func (r *Keeper) RecordRun(ctx context.Context, res *v1alpha1.InfraResource, log string) {
	last := res.Status.LastRun
	if last == nil || log == "" || !keepRunLog(res, r.keepRunLogs) {
		return
	}
	name := logSecretName(res)
	if err := r.writeTextSecret(ctx, name, res, "log", log); err == nil {
		last.LogSecret = name
	}
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
	return "tfplan-" + statebackend.SecretName(statebackend.DefaultWorkspace, state.Suffix(res))
}

func logSecretName(res *v1alpha1.InfraResource) string {
	return "tflog-" + statebackend.SecretName(statebackend.DefaultWorkspace, state.Suffix(res))
}

// DeleteRunRecords deletes the resource's plan and log Secrets (they are also owned by the
// resource, so the garbage collector removes any a crash left behind).
func (r *Keeper) DeleteRunRecords(ctx context.Context, res *v1alpha1.InfraResource) error {
	for _, name := range []string{planSecretName(res), logSecretName(res)} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
		if err := r.api.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Secret %s/%s: %w", r.namespace, name, err)
		}
	}
	return nil
}
