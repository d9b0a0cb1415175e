//go:build modules

package modules_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

// gcs is fake-gcs-server behind a proxy that keeps every bucket insert the provider sends: the
// emulator stores only a bucket's name and versioning (its location is the server's -location), so
// the rest of what the module asked for is checked in the request itself.
type gcs struct {
	url     string // the proxy: what the provider's storage endpoint names
	mu      sync.Mutex
	inserts []map[string]any
}

// startGCS starts fake-gcs-server (in memory, plain HTTP, location location) and the proxy.
func startGCS(location string) *gcs {
	backend := apiserver.FreeAddr(GinkgoT())
	host, port, _ := net.SplitHostPort(backend)
	cmd := exec.Command(workload("fake-gcs-server"), "-scheme", "http", "-host", host, "-port", port,
		"-backend", "memory", "-location", location, "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	g := &gcs{}
	target, _ := url.Parse("http://" + backend)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/storage/v1/b" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var insert map[string]any
			if json.Unmarshal(body, &insert) == nil {
				g.mu.Lock()
				g.inserts = append(g.inserts, insert)
				g.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	addr := apiserver.FreeAddr(GinkgoT())
	l, err := net.Listen("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	g.url = "http://" + addr
	Eventually(func() error { _, err := g.bucket("none"); return err }, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	return g
}

// bucket GETs a bucket from the emulator's JSON API: nil when it does not exist.
func (g *gcs) bucket(name string) (map[string]any, error) {
	resp, err := http.Get(g.url + "/storage/v1/b/" + url.PathEscape(name))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, nil
	case http.StatusOK:
		var b map[string]any
		return b, json.NewDecoder(resp.Body).Decode(&b)
	}
	return nil, fmt.Errorf("GET bucket %s: %s", name, resp.Status)
}

// insertOf is the insert request the provider sent for bucket name.
func (g *gcs) insertOf(name string) map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, in := range g.inserts {
		if in["name"] == name {
			return in
		}
	}
	return nil
}

// googleEnv is what the class's runs get: a fake access token and the emulator as the storage
// endpoint (the provider reads both from the environment).
func (g *gcs) googleEnv(secret string) []v1alpha1.SecretInput {
	return envSecret(secret, map[string]string{
		"GOOGLE_OAUTH_ACCESS_TOKEN":      "fake-token",
		"GOOGLE_STORAGE_CUSTOM_ENDPOINT": g.url + "/storage/v1/",
		// Read after a create asks compute for the project's number; the emulator answers 404,
		// which the provider only logs.
		"GOOGLE_COMPUTE_CUSTOM_ENDPOINT": g.url + "/compute/v1/",
	})
}

var _ = Describe("gcs-bucket through a claim, against fake-gcs-server", Ordered, func() {
	var g *gcs
	BeforeAll(func() { g = startGCS("EUROPE-WEST1") })

	It("applies the bucket with the claim's settings and destroys it with reclaim Delete", func() {
		class, claim := sampleClass("gcs-standard", "uploads")
		class.Name = "gcs-delete"
		class.Spec.Default = false
		class.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		class.Spec.Env = g.googleEnv("gcs-delete-env")
		createClass(class)
		claim.Namespace = newNamespace("gcs-")
		claim.Spec.ClassName = class.Name
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		start := time.Now()
		Eventually(func() string { return conditionOf(claim, v1alpha1.ConditionReady) }, timeout, time.Second).Should(HavePrefix("True"))
		GinkgoWriter.Printf("claim Ready in %s\n", time.Since(start).Round(time.Second))
		name := "conductor-" + claim.Namespace + "-uploads"

		By("the emulator holds the bucket, versioned, in the claim's location")
		b, err := g.bucket(name)
		Expect(err).NotTo(HaveOccurred())
		Expect(b).To(HaveKeyWithValue("versioning", HaveKeyWithValue("enabled", true)))
		Expect(b).To(HaveKeyWithValue("location", "EUROPE-WEST1"))

		By("the provider asked for what the class and the claim say")
		in := g.insertOf(name)
		Expect(in).NotTo(BeNil())
		Expect(in).To(HaveKeyWithValue("location", "EUROPE-WEST1"), "from the claim's parameters")
		Expect(in).To(HaveKeyWithValue("storageClass", "STANDARD"))
		Expect(in).To(HaveKeyWithValue("versioning", HaveKeyWithValue("enabled", true)))
		Expect(in).To(HaveKeyWithValue("labels", HaveKeyWithValue("managed-by", "conductor-tf")))
		Expect(in).To(HaveKeyWithValue("iamConfiguration", HaveKeyWithValue("uniformBucketLevelAccess", HaveKeyWithValue("enabled", true))))
		Expect(in).To(HaveKeyWithValue("lifecycle", HaveKeyWithValue("rule", ConsistOf(
			And(HaveKeyWithValue("action", HaveKeyWithValue("type", "SetStorageClass")), HaveKeyWithValue("action", HaveKeyWithValue("storageClass", "NEARLINE")),
				HaveKeyWithValue("condition", HaveKeyWithValue("age", BeNumerically("==", 30)))),
			And(HaveKeyWithValue("action", HaveKeyWithValue("type", "Delete")), HaveKeyWithValue("condition", HaveKeyWithValue("age", BeNumerically("==", 365)))),
		))))

		By("the connection Secret names the bucket")
		conn := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: "uploads-bucket"}, conn)).To(Succeed())
		Expect(string(conn.Data["name"])).To(Equal(name))
		Expect(string(conn.Data["url"])).To(Equal("gs://" + name))

		By("deleting the claim destroys the bucket")
		res := resourceOf(claim)
		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		Eventually(gone(res), timeout, time.Second).Should(BeTrue())
		Expect(g.bucket(name)).To(BeNil())
	})

	It("keeps the bucket with reclaim Retain (the sample class's policy)", func() {
		class, claim := sampleClass("gcs-standard", "uploads")
		class.Spec.Env = g.googleEnv("gcs-retain-env")
		createClass(class)
		claim.Namespace = newNamespace("gcs-")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(func() string { return conditionOf(claim, v1alpha1.ConditionReady) }, timeout, time.Second).Should(HavePrefix("True"))
		name := "conductor-" + claim.Namespace + "-uploads"
		Expect(g.bucket(name)).NotTo(BeNil())

		res := resourceOf(claim)
		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		Eventually(func() v1alpha1.ResourcePhase {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(res), res)).To(Succeed())
			return res.Status.Phase
		}, timeout, time.Second).Should(Equal(v1alpha1.ResourceReleased))
		Consistently(func() (map[string]any, error) { return g.bucket(name) }, 5*time.Second, time.Second).ShouldNot(BeNil())
		// The Released resource keeps the bucket; deleting it orphans the state, not the bucket.
		Expect(k8s.Delete(ctx, res)).To(Succeed())
		Eventually(gone(res), timeout, time.Second).Should(BeTrue())
		Expect(g.bucket(name)).NotTo(BeNil())
	})
})
