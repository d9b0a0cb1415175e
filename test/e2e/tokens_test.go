//go:build e2e

package e2e_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// huntTokens applies the tokenhunt module through a class of its own (on runnerPool, or in the
// manager's pod when empty) and returns what the run read: "path token" lines, each checked
// against the API server with `kubectl auth can-i --list`, whose answers are returned too, and
// what its attempt to dial the run protocol as a runner of runnerPool printed.
func huntTokens(className, runnerPool string) (found, canI, dialed string) {
	kind := "E2EHunt" + strings.ToUpper(className[:1]) + className[1:]
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-hunt-" + className},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete, RunInputs: v1alpha1.RunInputs{RunnerPool: runnerPool},
			Module:    v1alpha1.ModuleSource{Source: modulesURL + "//modules/tokenhunt", Version: "v0.1.0"},
			Variables: v1alpha1.Variables{"name": {Raw: []byte(`"${claim.name}"`)}, "pool": {Raw: []byte(`"` + runnerPool + `"`)}}},
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
	claim, data := readyClaimSecret(newNamespace("e2e-hunt-"), "hunt", kind)
	if runnerPool != "" {
		Expect(resourceOf(claim).Spec.RunnerPool).To(Equal(runnerPool))
	}
	secret := &corev1.Secret{Data: data}
	Expect(string(secret.Data["looked"])).NotTo(BeElementOf("", "0"), "the hunt looked at no path: it did not run")
	found = string(secret.Data["found"])
	var answers []string
	for _, line := range strings.Split(strings.TrimSpace(found), "\n") {
		path, tok, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		answers = append(answers, path+": "+rulesOf(tok))
	}
	return found, strings.Join(answers, "\n"), string(secret.Data["dialed"])
}

// rulesOf is what `kubectl auth can-i --list -n conductor-system` answers for token alone (a
// SelfSubjectRulesReview with no other credential), or why it failed.
func rulesOf(token string) string {
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	rr, err := kubernetes.NewForConfigOrDie(c).AuthorizationV1().SelfSubjectRulesReviews().Create(ctx,
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: system}}, metav1.CreateOptions{})
	if err != nil {
		return "refused: " + err.Error()
	}
	return fmt.Sprintf("%+v", rr.Status.ResourceRules)
}

var _ = Describe("Runs cannot reach the manager's credentials", func() {
	It("a run in the manager's pod finds no token to read, by any path, the manager's through /proc included", func() {
		found, canI, _ := huntTokens("manager", "")
		Expect(found).To(BeEmpty(), "the run read tokens; with them the API server allows:\n%s", canI)
	})
})
