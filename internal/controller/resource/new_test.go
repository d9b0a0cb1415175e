package resource

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
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
		name string
		o    Options
		want []string // each in the error; none: no error
	}{
		{"nothing", Options{}, []string{"Options.Client", "Options.Recorder"}},
		{"runs without their clients", Options{Client: c, Recorder: rec, Runs: &recordingRuns{}},
			[]string{"Options.Kube", "Options.APIReader", "Options.State.Namespace"}},
		{"a state server without runs", Options{Client: c, Recorder: rec, StateServer: statebackend.NewServer(kube, "ns", 0)},
			[]string{"StateServer is set without Runs"}},
		{"no runs: the binding alone", Options{Client: c, Recorder: rec}, nil},
		{"runs on the kubernetes backend", Options{Client: c, APIReader: c, Kube: kube, Recorder: rec, Runs: &recordingRuns{},
			State: statebackend.Config{Namespace: "ns"}}, nil},
	} {
		r, err := New(tc.o)
		if len(tc.want) == 0 {
			if err != nil || r.parts() == nil || r.keeper() == nil || r.syncer() == nil || r.reclaimer() == nil || r.secrets() == nil {
				t.Errorf("%s: %v; want every part built", tc.name, err)
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
	if k := withServer.keeper(); !k.UsesServer() || k.Store() != server.Store() {
		t.Errorf("with a state server the keeper uses the server: %v, its store: %v; want both", k.UsesServer(), k.Store() == server.Store())
	}
	without := newReconciler(t, Options{Client: c, APIReader: c, Kube: kube, Recorder: rec, Runs: &recordingRuns{},
		State: statebackend.Config{Namespace: "ns"}})
	if without.keeper().UsesServer() {
		t.Error("without a state server the keeper uses a server; want Terraform's kubernetes backend")
	}
}
