package lifecycle_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

var _ = Describe("State encryption", func() {
	It("keeps states as ciphertext, writes the connection Secret through the key, and moves a state to a new passphrase at its next apply", func() {
		s := newScenario()
		class := fileClass("enc-"+s.ns, s.kind, v1alpha1.ReclaimDelete)
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
		claim := fileClaim(s.ns, "secretive", s.kind, s.dir, "world")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		conn := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "secretive-conn"}, conn)).To(Succeed())
		password := string(conn.Data["password"])
		Expect(password).To(HaveLen(20), "the module's generated password, in the connection Secret")

		keys := stateServer.Store().Keyring()
		names := stateSecrets(s, res.Name)
		raw := string(readStateSecrets(s, names))
		Expect(statebackend.IsEncrypted([]byte(raw))).To(BeTrue())
		Expect(raw).To(ContainSubstring(keys.KeyID()))
		Expect(raw).NotTo(ContainSubstring(password), "the state Secret holds the password in plain")
		Expect(raw).NotTo(ContainSubstring("random_password"))
		Expect(res.Status.State.Serial).To(BeNumerically(">", 0), "serial read beside the ciphertext")

		// The connection Secret deleted by hand is written again from the state's outputs, which
		// the controller reads through the key.
		Expect(k8s.Delete(s.ctx, conn)).To(Succeed())
		Eventually(func() string {
			got := &corev1.Secret{}
			if err := k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "secretive-conn"}, got); err != nil {
				return ""
			}
			return string(got.Data["password"])
		}, timeout, time.Second).Should(Equal(password))

		// Rotation: the passphrase becomes the previous one, a new one is current.
		sec, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, stateKeySecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		old := string(sec.Data[statebackend.KeyPassphrase])
		if prev := string(sec.Data[statebackend.KeyPreviousPassphrase]); prev != "" {
			Skip("the suite's key was rotated already: a second rotation would leave states of the first passphrase unreadable")
		}
		sec.Data[statebackend.KeyPreviousPassphrase] = []byte(old)
		sec.Data[statebackend.KeyPassphrase] = []byte(statebackend.NewPassphrase())
		_, err = kube.CoreV1().Secrets(stateNamespace).Update(s.ctx, sec, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		rotated, err := statebackend.NewKeyring(string(sec.Data[statebackend.KeyPassphrase]), old)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return stateServer.Store().Keyring().KeyID() }, timeout, 500*time.Millisecond).Should(Equal(rotated.KeyID()),
			"the controller reads the Secret again")

		// An apply (the greeting changes the file) writes the state under the new passphrase only.
		Eventually(func() error {
			c := s.claim(claim)()
			c.Spec.Parameters["greeting"] = js(`"rotated"`)
			return k8s.Update(s.ctx, c)
		}, timeout, time.Second).Should(Succeed())
		Eventually(func() string { return fileContent(s.dir + "/" + s.ns + "-secretive.txt") }, timeout, time.Second).Should(HavePrefix("hello rotated"))
		Eventually(func() string { return string(readStateSecrets(s, stateSecrets(s, res.Name))) }, timeout, time.Second).Should(
			And(ContainSubstring(rotated.KeyID()), Not(ContainSubstring(keys.KeyID()))))
		readyAt(s, res.Name)
		after := string(readStateSecrets(s, stateSecrets(s, res.Name)))
		Expect(strings.Contains(after, password)).To(BeFalse())
		plain, err := rotated.Open([]byte(after))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(plain)).To(ContainSubstring(password), "the same password, under the new passphrase")
	})
})

// readStateSecrets returns the stored document of a state kept in the Secrets names (chunk 0 and
// its -part-N chunks, in any order): their "tfstate" data joined in order and gunzipped.
func readStateSecrets(s *scenario, names []string) []byte {
	parts := map[int][]byte{}
	for _, n := range names {
		sec, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, n, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		idx := 0
		if _, after, ok := strings.Cut(n, "-part-"); ok {
			idx, err = strconv.Atoi(after)
			Expect(err).NotTo(HaveOccurred())
		}
		parts[idx] = sec.Data["tfstate"]
	}
	var gz []byte
	for i := range len(parts) {
		Expect(parts).To(HaveKey(i))
		gz = append(gz, parts[i]...)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	Expect(err).NotTo(HaveOccurred())
	doc, err := io.ReadAll(r)
	Expect(err).NotTo(HaveOccurred())
	return doc
}
