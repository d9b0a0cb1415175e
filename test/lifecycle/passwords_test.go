package lifecycle_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// passwordResource is a resource of the writeonly module (a Kubernetes Secret written through
// data_wo) whose password the controller generates, under a manual approval so that each plan is
// saved and held before it is applied.
func passwordResource(s *scenario, name, variable string) *v1alpha1.InfraResource {
	src, _ := filepath.Abs("testdata/modules/writeonly")
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"},
			Variables: v1alpha1.Variables{"namespace": js(fmt.Sprintf("%q", s.ns)), "name": js(`"db"`)},
			RunInputs: v1alpha1.RunInputs{
				KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: "conductor-tf-module-rook-minio"},
				GeneratedPasswords: []v1alpha1.GeneratedPassword{{Variable: variable, VersionVariable: "password_version",
					Length: 24, ConnectionSecretKey: "db-password"}},
			},
			WriteConnectionSecretToRef: &v1alpha1.SecretReference{Namespace: s.ns, Name: "db-conn"},
			ReclaimPolicy:              v1alpha1.ReclaimDelete,
			Operations:                 v1alpha1.Operations{Approval: v1alpha1.ApprovalManual}},
	}
}

// approveNext waits for a held plan other than the one with ID after, approves it and returns its ID.
func approveNext(s *scenario, name, after string) string {
	var id string
	Eventually(func() string {
		if pp := s.resource(name)().Status.PendingPlan; pp != nil {
			id = pp.ID
		}
		return id
	}, timeout, 200*time.Millisecond).ShouldNot(Or(BeEmpty(), Equal(after)), func() string {
		c := syncedCondition(s.resource(name)())
		return c.Reason + ": " + c.Message
	})
	Eventually(func() error {
		r := s.resource(name)()
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations[v1alpha1.AnnotationApprovePlan] = id
		return k8s.Update(s.ctx, r)
	}, timeout, time.Second).Should(Succeed())
	return id
}

// secretData reads one key of a Secret, "" when the Secret or key is missing.
func secretData(s *scenario, ns, name, key string) func() string {
	return func() string {
		sec, err := kube.CoreV1().Secrets(ns).Get(s.ctx, name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(sec.Data[key])
	}
}

// savedPlans returns the entries of every saved plan file under the suite's runs directory,
// decrypted with the suite's key and unzipped: what a plan file holds, whichever resource's.
func savedPlans() [][]byte {
	keys := stateServer.Store().Keyring()
	var out [][]byte
	Expect(filepath.WalkDir(runsDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "conductor.tfplan" {
			return nil // a workspace removed while walking
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		if statebackend.IsEncrypted(data) {
			data, err = keys.Open(data)
			Expect(err).NotTo(HaveOccurred(), path)
		}
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		Expect(err).NotTo(HaveOccurred(), path)
		for _, f := range zr.File {
			rc, err := f.Open()
			Expect(err).NotTo(HaveOccurred())
			b, err := io.ReadAll(rc)
			Expect(err).NotTo(HaveOccurred())
			rc.Close()
			out = append(out, b)
		}
		return nil
	})).To(Succeed())
	return out
}

// planHolds reports whether some saved plan entry holds all of subs.
func planHolds(subs ...string) bool {
	for _, entry := range savedPlans() {
		all := true
		for _, sub := range subs {
			all = all && bytes.Contains(entry, []byte(sub))
		}
		if all {
			return true
		}
	}
	return false
}

var _ = Describe("Generated passwords", func() {
	It("reach the module's write-only attribute and the connection Secret, never a plan or the state; rotate on request; go with the state", func() {
		s := newScenario()
		name := "pw-" + s.ns
		Expect(k8s.Create(s.ctx, passwordResource(s, name, "password"))).To(Succeed())
		DeferCleanup(deleteInBackground, s, name)

		// The first plan is held: the password exists, and no saved plan holds it.
		first := approveNext(s, name, "")
		pwSecret := "tfpassword-" + statebackend.SecretName(statebackend.DefaultWorkspace, statebackend.SuffixFor(name))
		password := secretData(s, stateNamespace, pwSecret, "password.password")()
		Expect(password).To(MatchRegexp(`^[A-Za-z0-9]{24}$`))
		version := secretData(s, stateNamespace, pwSecret, "version.password")()
		Expect(strconv.ParseInt(version, 10, 64)).To(BeNumerically(">=", time.Now().Add(-time.Hour).Unix()))
		Expect(planHolds("kubernetes_secret_v1", s.ns)).To(BeTrue(), "the held plan is among the saved plans")
		Expect(planHolds(password)).To(BeFalse(), "a saved plan holds the password")

		// Applied: the password is where the module wrote it and in the connection Secret, and
		// nowhere in the state (read through the key).
		readyAt(s, name)
		Expect(secretData(s, s.ns, "db", "password")()).To(Equal(password), "data_wo reached the object")
		Expect(secretData(s, s.ns, "db-conn", "db-password")()).To(Equal(password))
		Expect(secretData(s, s.ns, "db-conn", "secret")()).To(Equal(s.ns+"/db"), "the outputs are there too")
		plain, err := stateServer.Store().Keyring().Open(readStateSecrets(s, stateSecrets(s, name)))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(plain)).To(MatchRegexp(`"data_wo_revision":\s*`+version+`\b`), "the version is in state")
		Expect(string(plain)).NotTo(ContainSubstring(password), "the state holds the password")

		// Rotation on request: new password and version, held as a plan, applied to the object
		// and the connection Secret; still in no plan and no state.
		Eventually(func() error {
			r := s.resource(name)()
			if r.Annotations == nil {
				r.Annotations = map[string]string{}
			}
			r.Annotations[v1alpha1.AnnotationRotatePasswords] = "2026-11-29T16:00:00Z"
			return k8s.Update(s.ctx, r)
		}, timeout, time.Second).Should(Succeed())
		approveNext(s, name, first)
		rotated := secretData(s, stateNamespace, pwSecret, "password.password")()
		Expect(rotated).NotTo(Equal(password))
		Expect(secretData(s, stateNamespace, pwSecret, "version.password")()).NotTo(Equal(version))
		Expect(planHolds(rotated)).To(BeFalse(), "a saved plan holds the rotated password")
		Eventually(secretData(s, s.ns, "db", "password"), timeout, time.Second).Should(Equal(rotated))
		Eventually(secretData(s, s.ns, "db-conn", "db-password"), timeout, time.Second).Should(Equal(rotated))
		Expect(eventReasons(s, name)).To(ContainElement(HavePrefix(v1alpha1.ReasonPasswordsRotated + ":")))
		plain, err = stateServer.Store().Keyring().Open(readStateSecrets(s, stateSecrets(s, name)))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(plain)).NotTo(Or(ContainSubstring(password), ContainSubstring(rotated)))

		// Reclaim Delete: the object, the state and the password Secret go.
		Expect(k8s.Delete(s.ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		Eventually(func() bool {
			_, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, pwSecret, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, timeout, time.Second).Should(BeTrue(), "the password Secret outlives a Delete reclaim")
		_, err = kube.CoreV1().Secrets(s.ns).Get(s.ctx, "db", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the module's object was destroyed")
	})

	It("refuses a password for a variable the module does not declare ephemeral, before anything is planned", func() {
		s := newScenario()
		name := "pw-plain-" + s.ns
		res := passwordResource(s, name, "plain")
		res.Spec.Variables["password"] = js(`"given"`) // the module's ephemeral input, set plainly: no password is generated for it
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, name)
		Eventually(func() metav1.Condition { return syncedCondition(s.resource(name)()) }, timeout, time.Second).Should(And(
			HaveField("Reason", v1alpha1.ReasonInvalidVariables),
			HaveField("Message", ContainSubstring(`variable "plain" gets a generated password but the module does not declare it ephemeral = true`))))
		Expect(s.resource(name)().Status.PendingPlan).To(BeNil(), "nothing was planned")
		_, err := kube.CoreV1().Secrets(s.ns).Get(s.ctx, "db", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})
})
