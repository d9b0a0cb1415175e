//go:build e2e

package e2e_test

import (
	"bufio"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// portForward forwards a local port to the metrics Service and returns https://127.0.0.1:PORT.
func portForward() string {
	bin := filepath.Join(os.Getenv("CONDUCTOR_TF_K8S_BIN"), "kubectl")
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "-n", system, "port-forward",
		"service/conductor-tf-controller-manager-metrics-service", "0:8443")
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`127\.0\.0\.1:(\d+)`).FindStringSubmatch(line)
	Expect(m).NotTo(BeNil(), "port-forward said %q", line)
	return "https://127.0.0.1:" + m[1]
}

// token is a token of the ServiceAccount system/name (created if missing), from the TokenRequest API.
func token(name string) string {
	_ = k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: name}})
	return strings.TrimSpace(kubectl("create", "token", name, "-n", system, "--duration=1h"))
}

var _ = Describe("Access from outside the manager", func() {
	It("metrics through the Service: 200 with a token bound to the metrics reader, 401 or 403 otherwise", func() {
		base := portForward()
		scraper := token("e2e-scraper")
		_, _ = kubectlErr("create", "clusterrolebinding", "e2e-scraper", "--clusterrole=conductor-tf-metrics-reader", "--serviceaccount="+system+":e2e-scraper")
		stranger := token("e2e-stranger")
		httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		status := func(tok string) int {
			req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := httpc.Do(req)
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		eventually(func() int { return status(scraper) }).Should(Equal(http.StatusOK))
		Expect(status("")).To(Equal(http.StatusUnauthorized))
		Expect(status(stranger)).To(Equal(http.StatusForbidden))
	})

	It("a namespace's ServiceAccount with the edit role claims and reads its connection Secret, and reads no state, no class Secret and no other namespace's claims", func() {
		kind := "E2EEditor"
		slowClass("e2e-editor", kind)
		ns := newNamespace("e2e-team-")
		other := newNamespace("e2e-other-")
		// The class's Secret input, in a namespace of the platform team.
		Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "e2e-class-input"},
			StringData: map[string]string{"token": "s3cr3t"}})).To(Succeed())
		teamCfg, err := harness.ServiceAccountConfig(ctx, cfg, ns, "deployer", "edit")
		Expect(err).NotTo(HaveOccurred())
		team, err := harness.NewClient(teamCfg)
		Expect(err).NotTo(HaveOccurred())

		claim := slowClaim(ns, "app", kind, "hello")
		eventually(func() error { return team.Create(ctx, claim) }).Should(Succeed())
		eventually(converged(claim, "hello")).Should(HavePrefix("True"))
		conn := &corev1.Secret{}
		Expect(team.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app-conn"}, conn)).To(Succeed())
		Expect(conn.Data).To(HaveKey("password"))

		res := resourceOf(claim)
		Expect(team.Get(ctx, client.ObjectKey{Namespace: system, Name: res.Status.State.SecretName}, &corev1.Secret{})).To(Satisfy(apierrors.IsForbidden))
		Expect(team.Get(ctx, client.ObjectKey{Namespace: system, Name: "e2e-class-input"}, &corev1.Secret{})).To(Satisfy(apierrors.IsForbidden))
		Expect(team.List(ctx, &v1alpha1.InfraClaimList{}, client.InNamespace(other))).To(Satisfy(apierrors.IsForbidden))
		Expect(team.Get(ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{})).To(Satisfy(apierrors.IsForbidden))
	})
})
