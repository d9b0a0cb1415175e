package claim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Every outcome a user must see has a condition reason on the claim and a Warning event.
var _ = Describe("Claims that cannot bind say why", func() {
	var (
		ctx  context.Context
		ns   string
		kind string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		kind = uniqueKind()
	})

	expectPending := func(claim *v1alpha1.InfraClaim, reason string) {
		Expect(asTeam(ctx, claim.Namespace).Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(boundReason, Equal(reason)))
		got := getClaim(ctx, claim)()
		Expect(got.Status.Phase).To(Equal(v1alpha1.ClaimPending))
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionBound)
		Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		Expect(cond.Message).NotTo(BeEmpty())
		if reason != v1alpha1.ReasonNoMatchingResource {
			Eventually(func() []string { return warningReasons(ctx, got) }, timeout).Should(ContainElement(reason))
		}
	}

	It("no matching resource and no class", func() {
		expectPending(newClaim(ns, "db", kind, "5Gi"), v1alpha1.ReasonNoMatchingResource)
	})

	It("class not found", func() {
		expectPending(newClaim(ns, "db", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ClassName = "missing-" + ns }),
			v1alpha1.ReasonClassNotFound)
	})

	It("class for another kind", func() {
		Expect(k8s.Create(ctx, newClass("other-"+ns, "Other"+kind, false))).To(Succeed())
		expectPending(newClaim(ns, "db", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ClassName = "other-" + ns }),
			v1alpha1.ReasonClassKindMismatch)
	})

	It("more than one default class for a kind", func() {
		Expect(k8s.Create(ctx, newClass("d1-"+ns, kind, true))).To(Succeed())
		Expect(k8s.Create(ctx, newClass("d2-"+ns, kind, true))).To(Succeed())
		expectPending(newClaim(ns, "db", kind, "5Gi"), v1alpha1.ReasonMultipleDefaultClasses)
	})

	It("a requirement that does not parse", func() {
		expectPending(newClaim(ns, "db", kind, "5Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.Requirements = map[string]string{"version": ">= banana"}
		}), v1alpha1.ReasonInvalidRequirement)
	})

	It("resourceName naming a resource bound to another claim", func() {
		createAvailable(ctx, staticResource("taken-"+ns, kind, "10Gi"))
		first := newClaim(ns, "first", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = "taken-" + ns })
		Expect(k8s.Create(ctx, first)).To(Succeed())
		Eventually(getClaim(ctx, first), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		expectPending(newClaim(ns, "second", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = "taken-" + ns }),
			v1alpha1.ReasonResourceBoundToOtherClaim)
	})

	It("a request that is not a non-negative quantity is refused at admission", func() {
		// Issue 18: "1e1.5" passed the API server's quantity pattern but not resource.ParseQuantity,
		// and made the claims list undecodable for the controller's cache (every claim stalled).
		for _, bad := range []string{`"1e1.5"`, `"-5Gi"`, `"1e-199999999"`} {
			claim := newClaim(ns, "bad", kind, "5Gi")
			raw, err := json.Marshal(claim)
			Expect(err).NotTo(HaveOccurred())
			doc := strings.Replace(string(raw), `"storage":"5Gi"`, `"storage":`+bad, 1)
			u := &unstructured.Unstructured{}
			Expect(json.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
			u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InfraClaim"))
			err = asTeam(ctx, ns).Create(ctx, u)
			Expect(err).To(HaveOccurred(), "request %s", bad)
			Expect(err.Error()).To(Or(ContainSubstring("non-negative quantity"), ContainSubstring("should match")), "request %s", bad)
		}
		Expect(asTeam(ctx, ns).Create(ctx, newClaim(ns, "good", kind, "5Gi"))).To(Succeed())
	})

	It("a resource bound to another namespace's claim: the refused claim learns nothing of that claim", func() {
		// Issue 18: the condition said "… is bound to claim team-b/db" to the other namespace.
		held := "held-" + strings.ToLower(kind) // a name that says nothing of the owner's namespace
		createAvailable(ctx, staticResource(held, kind, "10Gi"))
		owner := newClaim(ns, "secret-project", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = held })
		Expect(asTeam(ctx, ns).Create(ctx, owner)).To(Succeed())
		Eventually(getClaim(ctx, owner), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		other := newNamespace(ctx)
		intruder := newClaim(other, "probe", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = held })
		expectPending(intruder, v1alpha1.ReasonResourceBoundToOtherClaim)
		got := getClaim(ctx, intruder)()
		for _, c := range got.Status.Conditions {
			Expect(c.Message).NotTo(Or(ContainSubstring(ns), ContainSubstring("secret-project")), "condition %s", c.Type)
		}
		Eventually(func() []string { return eventNotes(ctx, got) }, timeout).ShouldNot(BeEmpty())
		for _, note := range eventNotes(ctx, got) {
			Expect(note).NotTo(Or(ContainSubstring(ns), ContainSubstring("secret-project")))
		}
		res := getResource(ctx, held)()
		Eventually(func() []string { return eventNotes(ctx, res) }, timeout).Should(ContainElement(ContainSubstring(other+"/probe")),
			"the platform team sees on the resource which claim asked for it")
	})

	It("provisioning failed: the class template does not render", func() {
		Expect(k8s.Create(ctx, newClass("broken-"+ns, kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["name"] = apiextensionsv1.JSON{Raw: []byte(`"${claim.spec.parameters.missing}"`)}
		}))).To(Succeed())
		expectPending(newClaim(ns, "db", kind, "5Gi"), v1alpha1.ReasonProvisioningFailed)
	})
})

// warningReasons lists the reasons of Warning events about obj.
func warningReasons(ctx context.Context, obj client.Object) []string {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() && e.Type == "Warning" {
			out = append(out, e.Reason)
		}
	}
	return out
}

var _ = Describe("Admission rejects malformed objects", func() {
	ctx := context.Background()

	It("rejects a class without module version or with an unknown reclaim policy", func() {
		c := newClass("noversion", "Kind", false)
		c.Spec.Module.Version = ""
		Expect(apierrors.IsInvalid(k8s.Create(ctx, c))).To(BeTrue())
		c = newClass("badpolicy", "Kind", false)
		c.Spec.ReclaimPolicy = "Recycle"
		Expect(apierrors.IsInvalid(k8s.Create(ctx, c))).To(BeTrue())
	})

	It("rejects a runner pool that would mount over, or grant its runs, the runner's own token, CA or working space", func() {
		for i, bad := range []func(*v1alpha1.InfraRunnerPoolSpec){
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/var/run"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) {
				s.RunReadPaths = []v1alpha1.RunPath{"/var/run/conductor-tf/token"}
			},
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/work/x"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/etc/../var/run"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"relative"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) {
				s.VolumeMounts = []v1alpha1.RunnerVolumeMount{{Name: "x", MountPath: "/var/run/conductor-tf"}}
			},
			func(s *v1alpha1.InfraRunnerPoolSpec) {
				s.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.Env = []corev1.EnvVar{{Name: "POD_NAME", Value: "x"}} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"//work"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/./tmp"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/run/conductor-tf"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) { s.RunReadPaths = []v1alpha1.RunPath{"/proc/net"} },
			func(s *v1alpha1.InfraRunnerPoolSpec) {
				s.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			},
		} {
			p := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d", i)}}
			bad(&p.Spec)
			Expect(apierrors.IsInvalid(k8s.Create(ctx, p))).To(BeTrue(), "%+v", p.Spec)
		}
		ok := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: "wellformed"}, Spec: v1alpha1.InfraRunnerPoolSpec{
			Replicas:     ptr.To[int32](0),
			RunReadPaths: []v1alpha1.RunPath{"/var/run/secrets/eks.amazonaws.com/serviceaccount", "/var/runner"},
			Volumes: []corev1.Volume{{Name: "aws-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "sts.amazonaws.com", Path: "t"}}}}}}},
			VolumeMounts: []v1alpha1.RunnerVolumeMount{{Name: "aws-token", MountPath: "/etc/corp-ca"}}}}
		Expect(k8s.Create(ctx, ok)).To(Succeed())
		Expect(k8s.Delete(ctx, ok)).To(Succeed())
	})

	It("rejects an invalid connection Secret name", func() {
		ns := newNamespace(ctx)
		c := newClaim(ns, "db", "Kind", "1Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.WriteConnectionSecretToRef = &v1alpha1.LocalSecretReference{Name: "Not_A_Name"}
		})
		Expect(apierrors.IsInvalid(k8s.Create(ctx, c))).To(BeTrue())
	})

	It("keeps a claim's kind, class and bound resource immutable", func() {
		ns := newNamespace(ctx)
		c := newClaim(ns, "db", "Kind", "1Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = "r1"; c.Spec.ClassName = "a" })
		Expect(k8s.Create(ctx, c)).To(Succeed())
		for _, mutate := range []func(*v1alpha1.InfraClaim){
			func(c *v1alpha1.InfraClaim) { c.Spec.ResourceKind = "Other" },
			func(c *v1alpha1.InfraClaim) { c.Spec.ClassName = "b" },
			func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = "r2" },
		} {
			// Retried on conflicts with the controller's own writes (the finalizer).
			Eventually(func() error {
				got := getClaim(ctx, c)()
				mutate(got)
				return k8s.Update(ctx, got)
			}, timeout).Should(Satisfy(apierrors.IsInvalid))
		}
	})
})

// eventNotes lists the notes of the events about obj (in any namespace: a cluster-scoped object's
// events are in "default").
func eventNotes(ctx context.Context, obj client.Object) []string {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.UID == obj.GetUID() {
			out = append(out, e.Note)
		}
	}
	return out
}
