package resource

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// newReconciler is New for a spec's options, failing the spec on an error.
func newReconciler(t *testing.T, o Options) *Reconciler {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// New refuses options it cannot build a reconciler from, naming each field, and builds every
// collaborator at once: the state backend is chosen then, by whether a state server was given.
func TestNewValidatesAndBuildsEveryPart(t *testing.T) {
	c := fakeclient.NewClientBuilder().Build()
	rec := events.NewFakeRecorder(1)
	kube := fake.NewClientset()
	for _, tc := range []struct {
		name      string
		o         Options
		want      []string // each in the error; none: no error
		provision bool     // the provisioner chosen runs Terraform (provisioning, not bindingOnly)
	}{
		{"nothing", Options{}, []string{"Options.Client", "Options.Recorder"}, false},
		{"runs without their clients", Options{Client: c, Recorder: rec, Runs: &recordingRuns{}},
			[]string{"Options.Kube", "Options.APIReader", "Options.State.Namespace"}, false},
		{"a state server without runs", Options{Client: c, Recorder: rec, StateServer: statebackend.NewServer(kube, "ns", 0)},
			[]string{"StateServer is set without Runs"}, false},
		{"no runs: the binding alone", Options{Client: c, Recorder: rec}, nil, false},
		{"runs on the kubernetes backend", Options{Client: c, APIReader: c, Kube: kube, Recorder: rec, Runs: &recordingRuns{},
			State: statebackend.Config{Namespace: "ns"}}, nil, true},
	} {
		r, err := New(tc.o)
		if len(tc.want) == 0 {
			p := r.parts()
			if err != nil || p.keeper == nil || p.sync == nil || p.drift == nil || p.reclaim == nil || p.secrets == nil || p.provision == nil {
				t.Errorf("%s: %v; want every part built", tc.name, err)
				continue
			}
			// One phase list whichever the provisioner: without runs it adds no phase and keeps
			// only the finalizers' phases of a reclaim.
			_, provisioning := p.provision.(*provisioning)
			if provisioning != tc.provision || p.provision.provisions() != tc.provision ||
				(len(p.provision.phases()) > 0) != tc.provision || len(p.provision.reclaimPhases()) != map[bool]int{false: 2, true: 5}[tc.provision] {
				t.Errorf("%s: provisioner %T with %d phases and %d reclaim phases; want provisioning=%v",
					tc.name, p.provision, len(p.provision.phases()), len(p.provision.reclaimPhases()), tc.provision)
			}
			continue
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v; want it to name %s", tc.name, err, w)
			}
		}
	}
	server := statebackend.NewServer(kube, "ns", 0)
	withServer := newReconciler(t, Options{Client: c, APIReader: c, Kube: kube, Recorder: rec, Runs: &recordingRuns{},
		State: statebackend.Config{Namespace: "ns"}, StateServer: server})
	// The backend chosen is the one a run is pointed at: the server's http backend, with the
	// server's store, or Terraform's kubernetes backend.
	backendOf := func(r *Reconciler) string {
		spec := tfrunner.Spec{Env: map[string]string{}}
		r.keeper().UseBackend(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, &spec)()
		return spec.Backend.Type
	}
	if k := withServer.keeper(); backendOf(withServer) != "http" || k.Store() != server.Store() {
		t.Errorf("with a state server runs use backend %q, store the server's: %v; want http and the server's", backendOf(withServer), k.Store() == server.Store())
	}
	without := newReconciler(t, Options{Client: c, APIReader: c, Kube: kube, Recorder: rec, Runs: &recordingRuns{},
		State: statebackend.Config{Namespace: "ns"}})
	if got := backendOf(without); got != "kubernetes" {
		t.Errorf("without a state server runs use backend %q; want Terraform's kubernetes backend", got)
	}
}
