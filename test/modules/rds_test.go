//go:build modules

package modules_test

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// awsAPI stands on loopback for every AWS endpoint the provider is given (AWS_ENDPOINT_URL): it
// answers STS GetCallerIdentity, which the provider calls when it is configured (no environment
// variable skips it), and records every other call, so that a spec can say a plan called nothing
// else. It is not an AWS emulator: no AWS API emulator builds from the Go module proxy.
type awsAPI struct {
	url   string
	mu    sync.Mutex
	calls []string
}

func startAWSAPI() *awsAPI {
	a := &awsAPI{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		action := r.Form.Get("Action")
		if action == "" {
			action = r.Header.Get("X-Amz-Target")
		}
		a.mu.Lock()
		a.calls = append(a.calls, action)
		a.mu.Unlock()
		if action != "GetCallerIdentity" {
			http.Error(w, "not served by the test's AWS stand-in: "+action, http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprint(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<GetCallerIdentityResult><Arn>arn:aws:iam::123456789012:user/conductor</Arn><UserId>AIDACONDUCTOR</UserId><Account>123456789012</Account></GetCallerIdentityResult>
<ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000000</RequestId></ResponseMetadata>
</GetCallerIdentityResponse>`)
	})}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	a.url = "http://" + l.Addr().String()
	return a
}

func (a *awsAPI) Calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

var _ = Describe("aws-rds through a claim, planned with fake credentials and endpoints on loopback", func() {
	It("plans the instance, subnet group, parameter group and security group the class and claim say, with the generated password write-only: in no plan file", func() {
		api := startAWSAPI()
		class, claim := sampleClass("standard", "wordpress-db")
		class.Name = "rds-planned"
		class.Spec.Default = false
		// The plan is held for a person: nothing is applied (there is no AWS to apply to).
		class.Spec.Approval = v1alpha1.ApprovalManual
		class.Spec.Env = envSecret("rds-env", map[string]string{
			"AWS_ACCESS_KEY_ID": "AKIAFAKECONDUCTOR00", "AWS_SECRET_ACCESS_KEY": "fake-secret-access-key",
			"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": api.url, "AWS_EC2_METADATA_DISABLED": "true",
		})
		createClass(class)
		claim.Namespace = newNamespace("rds-")
		claim.Spec.ClassName = class.Name
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		res := resourceOf(claim)
		Eventually(func() *v1alpha1.PendingPlan {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(res), res)).To(Succeed())
			return res.Status.PendingPlan
		}, timeout, time.Second).ShouldNot(BeNil(), "the plan waits for approval")
		plan := res.Status.PendingPlan
		Expect(plan.Reason).To(Equal("Manual"))
		Expect(plan.Changes).To(ContainElements(
			"module.main.aws_db_instance.this: create",
			"module.main.aws_db_subnet_group.this: create",
			"module.main.aws_db_parameter_group.this: create",
			"module.main.aws_security_group.this: create",
		))
		Expect(plan.Summary.Add).To(BeNumerically(">=", 4))
		Expect(plan.Changes).NotTo(ContainElement(ContainSubstring("random_password")), "the password is the controller's, not in state")

		By("the plan's rendering has the claim's sizes and the class's choices, and no password")
		pw := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: stateNamespace, Name: "tfpassword-" + res.Status.State.SecretName}, pw)).To(Succeed())
		password, version := string(pw.Data["password.master_password"]), string(pw.Data["version.master_password"])
		Expect(password).To(HaveLen(32))
		sec := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: stateNamespace, Name: plan.Secret}, sec)).To(Succeed())
		text := string(sec.Data["plan.txt"])
		GinkgoWriter.Printf("plan.txt:\n%s\n", text)
		for _, want := range []string{
			`instance_class                        = "db.t3.medium"`,
			`allocated_storage                     = 25`,
			`engine_version                        = "8.0"`,
			`backup_window                         = "02:00-03:00"`,
			`family      = "mysql8.0"`,
			`db_subnet_group_name                  = "` + res.Name + `"`, // the class names every object after ${resource.name}
			`password_wo                           = (write-only attribute)`,
			`password_wo_version                   = ` + version,
		} {
			Expect(squash(text)).To(ContainSubstring(squash(want)))
		}
		Expect(text).NotTo(ContainSubstring(password))
		entries := planEntries(filepath.Join(suiteDir, "work"))
		Expect(entries).NotTo(BeEmpty(), "the saved plan is in the run's workspace")
		for _, e := range entries {
			Expect(string(e)).NotTo(ContainSubstring(password), "a saved plan file holds the password")
		}
		By("no Secret of the controller's but the password's own holds it: state, plan rendering, run log")
		secrets := &corev1.SecretList{}
		Expect(k8s.List(ctx, secrets, client.InNamespace(stateNamespace))).To(Succeed())
		for _, sec := range secrets.Items {
			if sec.Name == pw.Name {
				continue
			}
			for key, v := range sec.Data {
				if r, err := gzip.NewReader(bytes.NewReader(v)); err == nil {
					if plain, err := io.ReadAll(r); err == nil {
						v = plain
					}
				}
				Expect(string(v)).NotTo(ContainSubstring(password), "Secret %s, key %s", sec.Name, key)
			}
		}
		Expect(api.Calls()).To(HaveEach("GetCallerIdentity"), "planning new objects calls no AWS API but STS")
		Expect(api.Calls()).NotTo(BeEmpty(), "the provider reached the loopback endpoints")

		By("no connection Secret before an apply; deleting the claim removes the unapplied resource")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: "wordpress-db-conn"}, &corev1.Secret{})).NotTo(Succeed())
		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		Eventually(gone(res), timeout, time.Second).Should(BeTrue())
	})
})

// planEntries returns the unzipped entries of every saved plan file (conductor.tfplan) under dir.
func planEntries(dir string) [][]byte {
	var out [][]byte
	Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "conductor.tfplan" {
			return nil
		}
		zr, err := zip.OpenReader(path)
		Expect(err).NotTo(HaveOccurred(), path)
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			Expect(err).NotTo(HaveOccurred())
			b, err := io.ReadAll(rc)
			Expect(err).NotTo(HaveOccurred())
			_ = rc.Close()
			out = append(out, b)
		}
		return nil
	})).To(Succeed())
	return out
}

// squash collapses runs of spaces, so that Terraform's column alignment does not matter.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }
