package resource

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// Adopter vouches for the runs a runner resumes to this manager after its predecessor started
// them (runners.DispatcherOptions.Adopt): it reads the resource from the API server and issues
// the run state credentials, and needs nothing of the Reconciler, so the manager builds it before
// the run protocol starts. The zero value is not usable: use NewAdopter.
type Adopter struct {
	reader     client.Reader
	state      *statebackend.Server
	recorder   events.EventRecorder
	controller string
}

// NewAdopter returns the Adopter of a manager whose runs' state state serves: reader reads
// resources from the API server (not a cache: a predecessor's last status write may not be in
// it), recorder records RunAdopted events, controller names this pod in them. It fails when
// reader, state or recorder is nil.
func NewAdopter(reader client.Reader, state *statebackend.Server, recorder events.EventRecorder, controller string) (*Adopter, error) {
	if reader == nil || state == nil || recorder == nil {
		return nil, errors.New("resource.NewAdopter needs an API reader, the state server and a recorder")
	}
	return &Adopter{reader: reader, state: state, recorder: recorder, controller: controller}, nil
}

// Vouch is runners.DispatcherOptions.Adopt: it vouches for a run a runner resumed to this
// manager, which did not start it, only when the resource req.Key's status (read from the API
// server) records it as its last run, still Running, an apply, on the runner pool req.Pool, and
// the resource is not being deleted. It then issues the run new state credentials that take over
// the lock the run holds (statebackend.Server.IssueAdoptedRun) and records a RunAdopted event.
// Any other run is refused with an error saying why (the runner kills it).
func (a *Adopter) Vouch(ctx context.Context, req runners.AdoptRequest) (*runners.Adoption, error) {
	if req.Operation != "apply" {
		return nil, fmt.Errorf("only applies are adopted, not %s", req.Operation)
	}
	res := &v1alpha1.InfraResource{}
	if err := a.reader.Get(ctx, types.NamespacedName{Name: req.Key}, res); err != nil {
		return nil, fmt.Errorf("resource %s: %w", req.Key, err)
	}
	last := res.Status.LastRun
	switch {
	case !res.DeletionTimestamp.IsZero():
		return nil, fmt.Errorf("resource %s is being deleted", req.Key)
	case res.Spec.RunnerPool != req.Pool:
		return nil, fmt.Errorf("resource %s runs on pool %q, not %q", req.Key, res.Spec.RunnerPool, req.Pool)
	case last == nil || last.ID != req.RunID || !adoptable(last):
		return nil, fmt.Errorf("run %s is not the last run of %s recorded Running", req.RunID, req.Key)
	case res.Status.State == nil || state.Suffix(res) == "":
		return nil, fmt.Errorf("resource %s has no state name", req.Key)
	}
	creds, revoke, lockID, err := a.state.IssueAdoptedRun(ctx, req.RunID, state.Suffix(res), state.Labels(res))
	if err != nil {
		return nil, err
	}
	lock := "it holds no lock now"
	if lockID != "" {
		lock = "its lock " + lockID + " is taken over"
	}
	a.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonRunAdopted, "AdoptRun",
		"%s run %s started by %s on runner %s goes on under %s with new state credentials; %s",
		last.Operation, last.ID, orUnknown(last.Controller), req.Runner, orUnknown(a.controller), lock)
	return &runners.Adoption{Username: creds.Username, Password: creds.Password, Revoke: revoke}, nil
}
