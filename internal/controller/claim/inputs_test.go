package claim_test

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// Claims that read other claims' outputs (spec.parametersFrom): the controller's decisions, with
// upstream resources whose status the spec writes as a run would. test/lifecycle runs the same
// graph on real tofu.

// upstream is a claim bound to a static resource of its own kind, Ready with outputs once
// makeReady is called.
type upstream struct {
	ctx   context.Context
	claim *v1alpha1.InfraClaim
	res   string
}

func newUpstream(ctx context.Context, ns, name string) *upstream {
	kind := uniqueKind()
	res := "up-" + name + "-" + ns
	Expect(k8s.Create(ctx, staticResource(res, kind, "10Gi"))).To(Succeed())
	c := newClaim(ns, name, kind, "1Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = res })
	Expect(k8s.Create(ctx, c)).To(Succeed())
	Eventually(getClaim(ctx, c), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
	return &upstream{ctx: ctx, claim: c, res: res}
}

// outputs makes the upstream's resource Ready with these non-sensitive outputs.
func (u *upstream) outputs(outs map[string]string) {
	updateResourceStatus(u.ctx, u.res, func(r *v1alpha1.InfraResource) {
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, Message: "applied"})
		r.Status.Outputs = v1alpha1.Variables{}
		for k, v := range outs {
			r.Status.Outputs[k] = apiextensionsv1.JSON{Raw: []byte(`"` + v + `"`)}
		}
	})
}

// dependentClass is a class of kind over a module declaring network_id (set by the template from
// inputs.vpc_id), region and password (left to the claim's inputs), made Ready as the class
// controller would.
func dependentClass(ctx context.Context, kind string) *v1alpha1.InfraClass {
	class := newClass("dep-"+strings.ToLower(kind), kind, true, func(c *v1alpha1.InfraClass) {
		c.Spec.Variables = v1alpha1.Variables{
			"name":       {Raw: []byte(`"${claim.name}"`)},
			"network_id": {Raw: []byte(`"net-${inputs.vpc_id}"`)},
		}
	})
	Expect(k8s.Create(ctx, class)).To(Succeed())
	Eventually(func() error {
		got := &v1alpha1.InfraClass{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(class), got); err != nil {
			return err
		}
		got.Status.Inputs = []v1alpha1.ModuleInput{{Name: "name", Required: true}, {Name: "network_id", Required: true}, {Name: "region"}, {Name: "password", Sensitive: true}}
		meta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Checked", Message: "checked"})
		return k8s.Status().Update(ctx, got)
	}, timeout).Should(Succeed())
	return class
}

func reads(ns, claim string, pairs ...string) func(*v1alpha1.InfraClaim) {
	return func(c *v1alpha1.InfraClaim) {
		for i := 0; i+1 < len(pairs); i += 2 {
			c.Spec.ParametersFrom = append(c.Spec.ParametersFrom, v1alpha1.ParameterFrom{Parameter: pairs[i], Claim: claim, Namespace: ns, Output: pairs[i+1]})
		}
	}
}

func inputsReason(c *v1alpha1.InfraClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionInputsReady); cond != nil {
		return cond.Reason
	}
	return ""
}

func inputsMessage(c *v1alpha1.InfraClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionInputsReady); cond != nil {
		return cond.Message
	}
	return ""
}

func variable(res *v1alpha1.InfraResource, name string) string {
	return string(res.Spec.Variables[name].Raw)
}

var _ = Describe("A claim that reads another claim's outputs", func() {
	It("waits for its upstream, is provisioned with the values, and is rendered again only when one it reads changes", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		up := newUpstream(ctx, ns, "network")
		kind := uniqueKind()
		dependentClass(ctx, kind)
		db := newClaim(ns, "db", kind, "1Gi", reads("", "network", "vpc_id", "vpc_id", "region", "region"))
		Expect(k8s.Create(ctx, db)).To(Succeed())

		By("the upstream is not Ready: the dependent is Pending, WaitingForUpstream, and nothing is provisioned")
		Eventually(getClaim(ctx, db), timeout).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonWaitingForUpstream)))
		Expect(getClaim(ctx, db)()).To(WithTransform(boundReason, Equal(v1alpha1.ReasonWaitingForUpstream)))
		Expect(inputsMessage(getClaim(ctx, db)())).To(ContainSubstring(ns + "/network"))
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKey{Name: provision.ResourceName(getClaim(ctx, db)())}, &v1alpha1.InfraResource{})
		}, 2*time.Second).Should(Satisfy(apierrors.IsNotFound))

		By("the upstream turns Ready with its outputs: the dependent is provisioned from them at once (no resync)")
		up.outputs(map[string]string{"vpc_id": "vpc-1", "region": "eu-west-1", "arn": "arn:1"})
		Eventually(getClaim(ctx, db), 10*time.Second).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		got := getClaim(ctx, db)()
		Expect(inputsReason(got)).To(Equal(v1alpha1.ReasonInputsResolved))
		res := getResource(ctx, got.Spec.ResourceName)()
		Expect(variable(res, "network_id")).To(Equal(`"net-vpc-1"`), "the template reads inputs.vpc_id")
		Expect(variable(res, "region")).To(Equal(`"eu-west-1"`), "a module variable the class leaves unset takes the value")
		Expect(res.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationReadsFrom, ns+"/network"))
		Expect(res.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationInputsDigest, got.Status.Inputs.Digest))
		Expect(got.Status.Inputs.Reads).To(HaveLen(2))
		generation := res.Generation

		By("the upstream lists who reads it")
		Eventually(func() []v1alpha1.ClaimDependent {
			c := getClaim(ctx, up.claim)()
			if c.Status.Inputs == nil {
				return nil
			}
			return c.Status.Inputs.ReadBy
		}, timeout).Should(ConsistOf(v1alpha1.ClaimDependent{Namespace: ns, Name: "db", ResourceName: res.Name}))

		By("an upstream sync that changes no value read (another output) renders nothing")
		up.outputs(map[string]string{"vpc_id": "vpc-1", "region": "eu-west-1", "arn": "arn:2"})
		Consistently(func() int64 { return getResource(ctx, res.Name)().Generation }, 3*time.Second).Should(Equal(generation))

		By("a value read changes: the resource is rendered again, once")
		up.outputs(map[string]string{"vpc_id": "vpc-2", "region": "eu-west-1", "arn": "arn:2"})
		Eventually(func() string { return variable(getResource(ctx, res.Name)(), "network_id") }, 10*time.Second).Should(Equal(`"net-vpc-2"`))
		Expect(getResource(ctx, res.Name)().Generation).To(Equal(generation + 1))
		Consistently(func() int64 { return getResource(ctx, res.Name)().Generation }, 2*time.Second).Should(Equal(generation + 1))

		By("the upstream is deleted: its deletion waits for the claim that reads it")
		Expect(k8s.Delete(ctx, up.claim)).To(Succeed())
		Eventually(func() string {
			c := getClaim(ctx, up.claim)()
			if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionInUse); cond != nil {
				return cond.Reason + ": " + cond.Message
			}
			return ""
		}, timeout).Should(And(HavePrefix(v1alpha1.ReasonInUseByDependents), ContainSubstring("claim "+ns+"/db")))
		Consistently(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(up.claim), &v1alpha1.InfraClaim{}) }, 2*time.Second).Should(Succeed())
		Expect(getResource(ctx, up.res)().Status.Phase).To(Equal(v1alpha1.ResourceBound), "the upstream's resource is not released while it is read")

		By("the dependent keeps its resource and values and says the upstream is going")
		Eventually(getClaim(ctx, db), timeout).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonUpstreamNotFound)))
		Expect(variable(getResource(ctx, res.Name)(), "network_id")).To(Equal(`"net-vpc-2"`))
		Expect(inputsMessage(getClaim(ctx, db)())).To(ContainSubstring("keeps its infrastructure"))

		By("the dependent is deleted: the upstream still waits while the dependent's resource is being reclaimed")
		Expect(k8s.Delete(ctx, db)).To(Succeed())
		Eventually(func() string {
			c := &v1alpha1.InfraClaim{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(up.claim), c); err != nil {
				return "gone"
			}
			return meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionInUse).Message
		}, timeout).Should(Or(ContainSubstring("resource "+res.Name), Equal("gone")))

		By("once the dependent's resource is gone, the upstream is released")
		Eventually(func() error {
			r := &v1alpha1.InfraResource{}
			if err := k8s.Get(ctx, client.ObjectKey{Name: res.Name}, r); err != nil {
				return err
			}
			r.Finalizers = nil
			if err := k8s.Update(ctx, r); err != nil {
				return err
			}
			return k8s.Delete(ctx, r)
		}, timeout).Should(Satisfy(apierrors.IsNotFound))
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(up.claim), &v1alpha1.InfraClaim{}) }, timeout).Should(Satisfy(apierrors.IsNotFound))
	})

	It("passes a sensitive output as a reference to the upstream's connection Secret, never as a value", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		up := newUpstream(ctx, ns, "store")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "store-conn",
			Labels: map[string]string{statebackend.LabelResource: v1alpha1.LabelValue(up.res)}},
			Data: map[string][]byte{"password": []byte("s3cr3t-value")}}
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		up.outputs(map[string]string{"vpc_id": "vpc-9"})
		updateResourceStatus(ctx, up.res, func(r *v1alpha1.InfraResource) {
			r.Status.ConnectionSecret = &v1alpha1.SecretReference{Namespace: ns, Name: "store-conn"}
		})
		kind := uniqueKind()
		dependentClass(ctx, kind)
		app := newClaim(ns, "app", kind, "1Gi", reads("", "store", "vpc_id", "vpc_id", "password", "password"))
		Expect(k8s.Create(ctx, app)).To(Succeed())
		Eventually(getClaim(ctx, app), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		got := getClaim(ctx, app)()
		res := getResource(ctx, got.Spec.ResourceName)()
		Expect(res.Spec.VariablesFrom).To(ContainElement(v1alpha1.SecretInput{Name: "password",
			SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: ns, Name: "store-conn", Key: "password"}}))
		Expect(res.Spec.Variables).NotTo(HaveKey("password"))
		for _, obj := range []client.Object{got, res} {
			Expect(obj).NotTo(WithTransform(func(o client.Object) string { return toJSON(o) }, ContainSubstring("s3cr3t-value")))
		}
		digest := got.Status.Inputs.Digest
		generation := res.Generation

		By("the sensitive value changes: the digest changes and the resource is woken (annotation), its variables unchanged")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
		Expect(secret.Finalizers).To(ContainElement(v1alpha1.FinalizerReadByClaims), "kept while a claim reads it")
		secret.Data["password"] = []byte("rotated-value")
		Expect(k8s.Update(ctx, secret)).To(Succeed())
		// A Secret is not watched: the upstream resource's next status write (its run) wakes the readers.
		updateResourceStatus(ctx, up.res, func(r *v1alpha1.InfraResource) { r.Status.ModuleVersion = "v2" })
		Eventually(func() string { return getResource(ctx, res.Name)().Annotations[v1alpha1.AnnotationInputsDigest] }, 10*time.Second).ShouldNot(Equal(digest))
		Expect(getResource(ctx, res.Name)().Generation).To(Equal(generation))
		Expect(toJSON(getClaim(ctx, app)())).NotTo(ContainSubstring("rotated-value"))
	})

	It("refuses a cycle by name, and a claim reading itself at admission", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		kind := uniqueKind()
		dependentClass(ctx, kind)
		self := newClaim(ns, "self", kind, "1Gi", reads("", "self", "vpc_id", "vpc_id"))
		err := k8s.Create(ctx, self)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("cannot read its own outputs"))

		a := newClaim(ns, "a", kind, "1Gi", reads("", "b", "vpc_id", "vpc_id"))
		b := newClaim(ns, "b", kind, "1Gi", reads("", "c", "vpc_id", "vpc_id"))
		c := newClaim(ns, "c", kind, "1Gi", reads("", "a", "vpc_id", "vpc_id"))
		for _, x := range []*v1alpha1.InfraClaim{a, b, c} {
			Expect(k8s.Create(ctx, x)).To(Succeed())
		}
		for _, x := range []*v1alpha1.InfraClaim{a, b, c} {
			Eventually(getClaim(ctx, x), timeout).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonDependencyCycle)))
			Expect(getClaim(ctx, x)()).To(WithTransform(phaseOf, Equal(v1alpha1.ClaimPending)))
		}
		Expect(inputsMessage(getClaim(ctx, a)())).To(ContainSubstring(ns + "/a → " + ns + "/b → " + ns + "/c → " + ns + "/a"))
	})

	It("deletes bound claims that were edited into a cycle of three, none waiting for the next", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		var ups []*upstream
		for _, name := range []string{"a", "b", "c"} {
			u := newUpstream(ctx, ns, name)
			u.outputs(map[string]string{"id": name})
			ups = append(ups, u)
		}
		for i, u := range ups {
			next := ups[(i+1)%3].claim.Name
			Eventually(func() error {
				c := getClaim(ctx, u.claim)()
				c.Spec.ParametersFrom = []v1alpha1.ParameterFrom{{Parameter: "id", Claim: next, Output: "id"}}
				return k8s.Update(ctx, c)
			}, timeout).Should(Succeed())
		}
		for _, u := range ups {
			Eventually(getClaim(ctx, u.claim), timeout).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonDependencyCycle)))
			Expect(getClaim(ctx, u.claim)()).To(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)), "a bound claim stays bound")
		}
		for _, u := range ups {
			Expect(k8s.Delete(ctx, u.claim)).To(Succeed())
		}
		for _, u := range ups {
			Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(u.claim), &v1alpha1.InfraClaim{}) }, timeout).Should(Satisfy(apierrors.IsNotFound))
		}
	})

	It("is not held back by a claim of another namespace that no grant lets read it", func() {
		ctx := context.Background()
		owner, other := newNamespace(ctx), newNamespace(ctx)
		up := newUpstream(ctx, owner, "db")
		up.outputs(map[string]string{"vpc_id": "vpc-1"})
		kind := uniqueKind()
		dependentClass(ctx, kind)
		squatter := newClaim(other, "squatter", kind, "1Gi", reads(owner, "db", "vpc_id", "vpc_id"))
		Expect(k8s.Create(ctx, squatter)).To(Succeed())
		Eventually(getClaim(ctx, squatter), timeout).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonReferenceNotGranted)))
		Consistently(func() *v1alpha1.ClaimInputs { return getClaim(ctx, up.claim)().Status.Inputs }, 2*time.Second).Should(BeNil(), "not listed as a reader")
		Expect(k8s.Delete(ctx, up.claim)).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(up.claim), &v1alpha1.InfraClaim{}) }, timeout).Should(Satisfy(apierrors.IsNotFound))
	})

	It("reads another namespace's claim only where that namespace grants it", func() {
		ctx := context.Background()
		platform, team := newNamespace(ctx), newNamespace(ctx)
		up := newUpstream(ctx, platform, "shared-network")
		up.outputs(map[string]string{"vpc_id": "vpc-shared"})
		kind := uniqueKind()
		dependentClass(ctx, kind)
		db := newClaim(team, "db", kind, "1Gi", reads(platform, "shared-network", "vpc_id", "vpc_id"))
		Expect(k8s.Create(ctx, db)).To(Succeed())
		Eventually(getClaim(ctx, db), timeout).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonReferenceNotGranted)))
		Expect(getClaim(ctx, db)()).To(WithTransform(phaseOf, Equal(v1alpha1.ClaimPending)))

		By("a grant for another claim of that namespace does not do")
		other := &v1alpha1.InfraOutputGrant{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "other"},
			Spec: v1alpha1.InfraOutputGrantSpec{From: []v1alpha1.GrantFrom{{Namespace: team}}, Claims: []string{"dns"}}}
		Expect(k8s.Create(ctx, other)).To(Succeed())
		Consistently(getClaim(ctx, db), 2*time.Second).Should(WithTransform(inputsReason, Equal(v1alpha1.ReasonReferenceNotGranted)))

		By("the grant arrives: the claim is provisioned with the value at once")
		grant := &v1alpha1.InfraOutputGrant{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "team"},
			Spec: v1alpha1.InfraOutputGrantSpec{From: []v1alpha1.GrantFrom{{Namespace: team}}, Claims: []string{"shared-network"}}}
		Expect(k8s.Create(ctx, grant)).To(Succeed())
		Eventually(getClaim(ctx, db), 10*time.Second).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(variable(getResource(ctx, getClaim(ctx, db)().Spec.ResourceName)(), "network_id")).To(Equal(`"net-vpc-shared"`))
	})
})

func toJSON(o any) string {
	b, err := json.Marshal(o)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}
