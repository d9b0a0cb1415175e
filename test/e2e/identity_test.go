//go:build e2e

package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 45 item 2: workload identity exchanged for real on kind. MinIO's STS trusts the cluster's
// service-account issuer (its OpenID settings read the API server's discovery document and keys)
// and maps a token's subject to the policy of that name (claim_name = sub), so only the one
// ServiceAccount given a policy gets credentials, and only for MinIO's client ID as audience. A
// class names that ServiceAccount and audience; each run's AWS provider, given nothing but the
// token file and a role ARN, calls AssumeRoleWithWebIdentity and creates (then destroys) a bucket
// with the temporary credentials. The runs go to a runner pool whose image holds the aws provider
// (make test-e2e builds it only where hack/tools.sh aws-provider has built the provider).
var _ = Describe("Workload identity on the cluster: MinIO's STS verifies each run's token against the cluster's issuer", Ordered, func() {
	const (
		stsNS      = "e2e-sts"
		minioImage = "conductor-tf/minio:2026-02-12"
		audience   = "minio.e2e-sts"
		granted    = "e2e-sts-buckets"
		other      = "e2e-sts-other"
		pool       = "e2e-aws"
		// MinIO ignores the role with a claim-based OpenID provider; the AWS SDK needs one.
		roleARN = "arn:aws:iam::000000000000:role/e2e-sts"
	)
	endpoint := "http://sts." + stsNS + ".svc:9000"
	var rootUser, rootPassword string

	// bucketExists asks MinIO as its root user whether bucket exists.
	bucketExists := func(bucket string) bool {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "root-", Namespace: stsNS},
			StringData: map[string]string{"endpoint": endpoint, "bucket": bucket, "access_key": rootUser, "secret_key": rootPassword}}
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		defer func() { _ = k8s.Delete(ctx, secret) }()
		return strings.TrimSpace(s3(stsNS, secret.Name, "bucket-exists")) == "true"
	}

	// stsClass publishes the stsbucket module on the aws pool as kind, with wi as its identity.
	stsClass := func(name, kind string, wi *v1alpha1.WorkloadIdentity) {
		c := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
				Module:    v1alpha1.ModuleSource{Source: modulesURL + "//modules/stsbucket", Version: "v0.1.0"},
				RunInputs: v1alpha1.RunInputs{RunnerPool: pool, WorkloadIdentity: wi},
				Variables: v1alpha1.Variables{
					"endpoint": {Raw: []byte(`"` + endpoint + `"`)},
					"bucket":   {Raw: []byte(`"${claim.namespace}"`)},
				}}}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
	}

	BeforeAll(func() {
		awsImage := os.Getenv("E2E_AWS_IMG")
		if awsImage == "" {
			Skip("the aws provider is not built here: hack/tools.sh aws-provider builds it, and make test-e2e then an image with it")
		}
		rootUser, rootPassword = "sts-root", randomHex(16)

		By("letting anyone read the cluster's OpenID discovery document and keys, as a cloud reads an EKS cluster's")
		discovery := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-sts-oidc-discovery"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}}}
		Expect(k8s.Create(ctx, discovery)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, discovery) })

		By("MinIO, its OpenID settings pointed at the cluster's service-account issuer, trusting the cluster's CA")
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stsNS}})).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stsNS}}) })
		labels := map[string]string{"app": "sts"}
		env := []corev1.EnvVar{
			{Name: "MINIO_ROOT_USER", Value: rootUser},
			{Name: "MINIO_ROOT_PASSWORD", Value: rootPassword},
			{Name: "MINIO_IDENTITY_OPENID_CONFIG_URL", Value: "https://kubernetes.default.svc/.well-known/openid-configuration"},
			{Name: "MINIO_IDENTITY_OPENID_CLIENT_ID", Value: audience},
			{Name: "MINIO_IDENTITY_OPENID_CLAIM_NAME", Value: "sub"},
			{Name: "HOME", Value: "/tmp"},
		}
		deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "sts", Namespace: stsNS},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						AutomountServiceAccountToken: ptr.To(false),
						SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)},
						Containers: []corev1.Container{{
							Name: "minio", Image: minioImage, ImagePullPolicy: corev1.PullIfNotPresent,
							Command: []string{"minio", "server", "/data", "--address", ":9000", "--certs-dir", "/certs"},
							Env:     env,
							Ports:   []corev1.ContainerPort{{Name: "s3", ContainerPort: 9000}},
							ReadinessProbe: &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{
								HTTPGet: &corev1.HTTPGetAction{Path: "/minio/health/ready", Port: intstr.FromString("s3")}}},
							VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "tmp", MountPath: "/tmp"},
								{Name: "certs", MountPath: "/certs", ReadOnly: true}},
						}},
						Volumes: []corev1.Volume{
							{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
							{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
							// MinIO trusts the CAs of certs/CAs for its outgoing requests: the discovery
							// document's and the keys' (kube-root-ca.crt is in every namespace).
							{Name: "certs", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
								Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "CAs/ca.crt"}}}}},
						},
					}}}}
		Expect(k8s.Create(ctx, deploy)).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sts", Namespace: stsNS},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "s3", Port: 9000, TargetPort: intstr.FromString("s3")}}}})).To(Succeed())
		kubectl("-n", stsNS, "rollout", "status", "deployment/sts", "--timeout=3m")

		By("a MinIO policy named after the one ServiceAccount's subject (S3 only)")
		subject := "system:serviceaccount:" + system + ":" + granted
		policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::*"]}]}`
		root := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: stsNS},
			StringData: map[string]string{"endpoint": endpoint, "bucket": "unused", "access_key": rootUser, "secret_key": rootPassword}}
		Expect(k8s.Create(ctx, root)).To(Succeed())
		// --wait: the Service may not route to the ready pod yet (connection refused, seen in CI).
		s3(stsNS, root.Name, "add-policy", "--wait", "2m", subject, policy)

		for _, sa := range []string{granted, other, pool + "-runner"} {
			account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: sa}}
			Expect(k8s.Create(ctx, account)).To(Succeed())
			DeferCleanup(func() { _ = k8s.Delete(ctx, account) })
		}
		p := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec: v1alpha1.InfraRunnerPoolSpec{Replicas: ptr.To[int32](1), Concurrency: 1, Image: awsImage, ServiceAccountName: pool + "-runner"}}
		createPool(p, 1)
	})

	It("a run's AWS provider, given only its ServiceAccount's token, assumes the role and creates the bucket; the destroy deletes it", func() {
		stsClass("e2e-sts", "E2EStsBucket", &v1alpha1.WorkloadIdentity{ServiceAccountName: granted, Audience: audience,
			AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: roleARN}})
		ns := newNamespace("e2e-sts-")
		claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bucket"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: "E2EStsBucket"}}
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		got, res := claimReady(claim)
		Expect(res.Spec.RunnerPool).To(Equal(pool))
		Expect(bucketExists(ns)).To(BeTrue(), "the bucket the run created with the temporary credentials")
		fmt.Fprintf(GinkgoWriter, "claim %s/%s Ready: %s\n", got.Namespace, got.Name, readyCondition(got.Status.Conditions))

		Expect(k8s.Delete(ctx, got)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: res.Name}})).Should(BeTrue())
		Expect(bucketExists(ns)).To(BeFalse(), "the destroy deleted the bucket, with credentials from a new token")
	})

	It("refuses a token of another ServiceAccount, and one for another audience: the claim says why", func() {
		cases := []struct {
			class, kind, why string
			wi               *v1alpha1.WorkloadIdentity
		}{
			{"e2e-sts-other", "E2EStsOther", "None of the given policies (`system:serviceaccount:" + system + ":" + other + "`) are defined",
				&v1alpha1.WorkloadIdentity{ServiceAccountName: other, Audience: audience, AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: roleARN}}},
			// MinIO checks aud, then azp, against its client ID, and names the last.
			{"e2e-sts-audience", "E2EStsAudience", "must match configured OpenID Client ID",
				&v1alpha1.WorkloadIdentity{ServiceAccountName: granted, AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: roleARN}}},
		}
		for _, c := range cases {
			stsClass(c.class, c.kind, c.wi)
			ns := newNamespace("e2e-sts-refused-")
			claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bucket"},
				Spec: v1alpha1.InfraClaimSpec{ResourceKind: c.kind}}
			Expect(k8s.Create(ctx, claim)).To(Succeed())
			var said string
			eventually(func() string {
				got := &v1alpha1.InfraClaim{}
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
				said = readyCondition(got.Status.Conditions)
				return said
			}).Should(And(HavePrefix("False"), ContainSubstring("AssumeRoleWithWebIdentity"), ContainSubstring(c.why)))
			fmt.Fprintf(GinkgoWriter, "%s: the claim says %q\n", c.class, said)
			Expect(bucketExists(ns)).To(BeFalse())
			Expect(k8s.Delete(ctx, claim)).To(Succeed())
			eventually(isGone(claim)).Should(BeTrue(), "a claim whose every run was refused goes: nothing was created")
		}
	})
})

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
