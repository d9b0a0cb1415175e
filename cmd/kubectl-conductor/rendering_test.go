package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// An encrypted plan rendering (the controller stores it so when states are encrypted) is opened
// with the state key Secret; a plain one is shown as it is; without the key Secret, the error says
// which Secret it read.
func TestPlanOpensAnEncryptedRendering(t *testing.T) {
	const pass = "0123456789abcdef-rendering-key"
	keys, err := statebackend.NewKeyring(pass, "")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := keys.SealDocument([]byte("  # module.main.local_file.this will be created\n"))
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultControllerNamespace, Name: DefaultStateKeySecret},
		Data:       map[string][]byte{statebackend.KeyPassphrase: []byte(pass)}})
	cl := &Clients{Kube: kube, ControllerNamespace: DefaultControllerNamespace, StateKeySecret: DefaultStateKeySecret}
	ctx := context.Background()
	if got, err := openRendering(ctx, cl, sealed); err != nil || !strings.Contains(got, "will be created") {
		t.Fatalf("an encrypted rendering: %q, %v", got, err)
	}
	if got, err := openRendering(ctx, cl, []byte("plain text")); err != nil || got != "plain text" {
		t.Fatalf("a plain rendering: %q, %v", got, err)
	}
	cl.StateKeySecret = "nope"
	if _, err := openRendering(ctx, cl, sealed); err == nil || !strings.Contains(err.Error(), "conductor-system/nope") {
		t.Fatalf("without the key Secret: %v", err)
	}
}
