package secrets

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// testNamespace is the controller's namespace in the password specs.
const testNamespace = "conductor-system"

// newTestKeeper is a Keeper on a fake client (core and conductor types), reading and writing the
// same objects, with a recorder of 10 events: the password specs test what the Keeper writes, not
// the API server.
func newTestKeeper() (*Keeper, client.Client, *events.FakeRecorder) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	rec := events.NewFakeRecorder(10)
	return New(Options{Client: c, Reader: c, Recorder: rec, Namespace: testNamespace}), c, rec
}

// passwordResource is resource name with the given generated passwords and a state name.
func passwordResource(name string, passwords ...v1alpha1.GeneratedPassword) *v1alpha1.InfraResource {
	res := &v1alpha1.InfraResource{Status: v1alpha1.InfraResourceStatus{State: &v1alpha1.StateStatus{
		SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, statebackend.SuffixFor(name))}}}
	res.Name = name
	res.Spec.GeneratedPasswords = passwords
	return res
}
