package access_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 45: workload identity per class. The API server that issued the run's token is the one
// that verifies it here (TokenReview with the audience the cloud's STS would ask for), as AWS STS
// verifies an IRSA token against the cluster's issuer.
var _ = Describe("A run's cloud identity", func() {
	ctx := context.Background()

	review := func(token string, audiences ...string) authenticationv1.TokenReviewStatus {
		kube, err := kubernetes.NewForConfig(env.Config)
		Expect(err).NotTo(HaveOccurred())
		tr, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return tr.Status
	}

	It("a class that names a ServiceAccount and a role: the run gets a token of that account for STS's audience in its workspace, and the role's variables", func() {
		t := newTeam(ctx)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: "cloud-" + rand.String(5)}}
		Expect(admin.Create(ctx, sa)).To(Succeed())
		role := "arn:aws:iam::123456789012:role/objectstores"
		kind := classWith(ctx, "identity", func(s *v1alpha1.InfraClassSpec) {
			s.WorkloadIdentity = &v1alpha1.WorkloadIdentity{ServiceAccountName: sa.Name, AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: role}}
		}, "report")
		report := reportDir()
		c := t.claim(ctx, "cloud", kind, map[string]string{"report": report})
		Eventually(t.resourceOf(ctx, c), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))
		res := t.resourceOf(ctx, c)()
		Expect(res.Spec.WorkloadIdentity).NotTo(BeNil(), "copied from the class")

		environ, err := os.ReadFile(filepath.Join(report, "env"))
		Expect(err).NotTo(HaveOccurred())
		vars := map[string]string{}
		for _, line := range strings.Split(string(environ), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				vars[k] = v
			}
		}
		Expect(vars).To(HaveKeyWithValue("AWS_ROLE_ARN", role))
		Expect(vars).To(HaveKeyWithValue("AWS_ROLE_SESSION_NAME", "conductor-tf-"+res.Name))
		Expect(vars["AWS_WEB_IDENTITY_TOKEN_FILE"]).To(HavePrefix(workDir+"/"), "inside the run's workspace")
		Expect(vars["AWS_WEB_IDENTITY_TOKEN_FILE"]).To(HaveSuffix("/conductor.identity-token"))
		token, err := os.ReadFile(filepath.Join(report, "token"))
		Expect(err).NotTo(HaveOccurred())

		By("the API server verifies the token for STS's audience as the ServiceAccount, and refuses it for its own")
		st := review(string(token), "sts.amazonaws.com")
		Expect(st.Error).To(BeEmpty())
		Expect(st.Authenticated).To(BeTrue())
		Expect(st.User.Username).To(Equal("system:serviceaccount:" + stateNamespace + ":" + sa.Name))
		Expect(st.Audiences).To(ConsistOf("sts.amazonaws.com"))
		Expect(review(string(token)).Authenticated).To(BeFalse(), "not a token for the API server: the run gets no Kubernetes access from it")

		By("the token is gone from the workspace once the run ends")
		_, err = os.Stat(vars["AWS_WEB_IDENTITY_TOKEN_FILE"])
		Expect(os.IsNotExist(err)).To(BeTrue(), "%v", err)
	})

	It("a class that names the controller's ServiceAccount, or one that does not exist, runs nothing and says why", func() {
		t := newTeam(ctx)
		for account, reason := range map[string]string{
			controllerAccount: v1alpha1.ReasonServiceAccountForbidden,
			"nobody":          v1alpha1.ReasonServiceAccountNotFound,
		} {
			kind := classWith(ctx, "identity", func(s *v1alpha1.InfraClassSpec) {
				s.WorkloadIdentity = &v1alpha1.WorkloadIdentity{ServiceAccountName: account,
					Azure: &v1alpha1.AzureWorkloadIdentity{ClientID: "c", TenantID: "t"}}
			}, "report")
			report := reportDir()
			c := t.claim(ctx, "refused-"+rand.String(4), kind, map[string]string{"report": report})
			Eventually(t.resourceOf(ctx, c), timeout, time.Second).Should(WithTransform(ready, Equal(reason)), account)
			Expect(readyMessage(t.resourceOf(ctx, c)())).To(ContainSubstring("workloadIdentity: ServiceAccount " + stateNamespace + "/" + account))
			_, err := os.Stat(filepath.Join(report, "env"))
			Expect(os.IsNotExist(err)).To(BeTrue(), "nothing ran")
		}

		By("admission refuses the installation's names and a class naming two clouds")
		for _, wi := range []v1alpha1.WorkloadIdentity{
			{ServiceAccountName: "conductor-tf-controller-manager", AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: "arn:aws:iam::123456789012:role/x"}},
			{ServiceAccountName: "fine", AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: "arn:aws:iam::123456789012:role/x"},
				Azure: &v1alpha1.AzureWorkloadIdentity{ClientID: "c", TenantID: "t"}},
		} {
			c := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "refused-" + rand.String(6)},
				Spec: v1alpha1.InfraClassSpec{ResourceKind: "Refused", Module: v1alpha1.ModuleSource{Source: filepath.Join(modules, "identity"), Version: "v1"},
					RunInputs: v1alpha1.RunInputs{WorkloadIdentity: &wi}}}
			err := admin.Create(ctx, c)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(Or(ContainSubstring("cannot be granted to runs"), ContainSubstring("exactly one cloud")))
		}
	})
})
