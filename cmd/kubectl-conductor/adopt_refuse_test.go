package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Issue 65 item 6: adopt of a provider-terraform Workspace refuses what its old controller still
// manages (not paused; deletionPolicy Delete, its default) and looks for the state Secret only in
// the namespace named. Before, it copied a state nobody stopped, and took the only labelled Secret
// of any namespace.
func TestAdoptWorkspaceRefusesWhatIsStillManaged(t *testing.T) {
	ws := &unstructured.Unstructured{}
	ws.SetGroupVersionKind(workspaceKind)
	ws.SetName("vpc")
	state := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other-team", Name: "tfstate-vpc-tf",
		Labels: map[string]string{"tfstate": "true", labelStateWorkspace: "vpc", labelStateSuffix: "tf"}}}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		paused   bool
		policy   string
		ns, want string
	}{
		{"not paused", false, "Orphan", "other-team", "workspace/vpc is not paused"},
		{"deletes on deletion", true, "", "other-team", `deletionPolicy "Delete"`},
		{"another namespace's Secret", true, "Orphan", "crossplane-system", "0 state Secrets of Terraform workspace \"vpc\" in namespace crossplane-system"},
		{"all set", true, "Orphan", "other-team", ""},
	} {
		w := ws.DeepCopy()
		if tc.paused {
			w.SetAnnotations(map[string]string{"crossplane.io/paused": "true"})
		}
		if tc.policy != "" {
			_ = unstructured.SetNestedField(w.Object, tc.policy, "spec", "deletionPolicy")
		}
		cl := &Clients{Client: fake.NewClientBuilder().WithObjects(w).Build(), Kube: kubefake.NewSimpleClientset(state), Namespace: tc.ns}
		src, err := workspaceSource(ctx, cl, "vpc")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && src.state.Secret() != "tfstate-vpc-tf":
			t.Errorf("%s: state %v", tc.name, src.state)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
