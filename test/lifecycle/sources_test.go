package lifecycle_test

// Issue 20, item 2: module sources parsed by the libraries that define them, pinned or refused.
// The registry is test/harness's: service discovery and modules.v1 over HTTPS with a test CA, which
// the runs trust through SSL_CERT_FILE (suite_test.go).

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// classWithModule creates a file class over module m and returns its name.
func classWithModule(s *scenario, name string, m v1alpha1.ModuleSource) string {
	class := fileClass(name, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) { c.Spec.Module = m })
	Expect(k8s.Create(s.ctx, class)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
	return class.Name
}

var _ = Describe("Module sources", func() {
	It("resolve a registry module through a private registry over HTTPS: a constraint installs the newest version it allows, and the resource records that version", func() {
		// Seen on fd3b2e2: tofu resolved the constraint, but status.moduleVersion said "~> 0.1".
		s := newScenario()
		addr := "platform/" + s.ns + "/local"
		for _, v := range []string{"0.1.0", "0.2.0", "1.0.0"} {
			_, err := registry.Publish(addr, v, moduleDir)
			Expect(err).NotTo(HaveOccurred())
		}
		class := classWithModule(s, "registry-"+s.ns, v1alpha1.ModuleSource{Source: registry.Host + "/" + addr, Version: "~> 0.1"})
		Eventually(classReady(s, class), timeout, time.Second).Should(HavePrefix("True"))

		claim := fileClaim(s.ns, "reg", s.kind, s.dir, "registry")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		Expect(res.Spec.Module.Version).To(Equal("~> 0.1"))
		Expect(res.Status.ModuleVersion).To(Equal("0.2.0"), "the exact version init chose for the constraint")
		Expect(fileContent(filepath.Join(s.dir, s.ns+"-reg.txt"))).To(HavePrefix("hello registry"))
		requests := registry.Requests()
		Expect(requests).To(ContainElements("/.well-known/terraform.json", "/v1/modules/"+addr+"/versions",
			"/v1/modules/"+addr+"/0.2.0/download", "/archives/"+addr+"/0.2.0.tar.gz"))
		Expect(requests).NotTo(ContainElement(ContainSubstring(addr + "/1.0.0")))

		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(func() bool {
			_, err := os.Stat(filepath.Join(s.dir, s.ns+"-reg.txt"))
			return os.IsNotExist(err)
		}, timeout, time.Second).Should(BeTrue())
	})

	It("refuse a source that is not pinned or is pinned twice, with the reason on the class; an archive pinned by its checksum installs and a wrong checksum fails the download", func() {
		// Seen on fd3b2e2 (before the parser): the archive without a checksum was "True Valid:
		// module https://…/0.1.0.tar.gz@0.1.0 resolved", its version silently dropped.
		s := newScenario()
		addr := "platform/" + s.ns + "/local"
		sum, err := registry.Publish(addr, "0.1.0", moduleDir)
		Expect(err).NotTo(HaveOccurred())
		archive := registry.ArchiveURL(addr, "0.1.0")

		unpinned := classWithModule(s, "archive-"+s.ns, v1alpha1.ModuleSource{Source: archive, Version: "0.1.0"})
		twice := classWithModule(s, "twice-"+s.ns, v1alpha1.ModuleSource{Source: twoVersions() + "?ref=v1.0.0", Version: "v1.1.0"})
		latest := classWithModule(s, "latest-"+s.ns, v1alpha1.ModuleSource{Source: registry.Host + "/" + addr, Version: "latest"})
		pinned := classWithModule(s, "checksum-"+s.ns, v1alpha1.ModuleSource{Source: archive + "?checksum=sha256:" + sum, Version: "0.1.0"})
		wrong := classWithModule(s, "wrongsum-"+s.ns, v1alpha1.ModuleSource{Source: archive + "?checksum=sha256:" + strings.Repeat("0", 64), Version: "0.1.0"})

		Eventually(classReady(s, unpinned), timeout, time.Second).Should(And(
			HavePrefix("False ModuleInvalid: archive module source"), ContainSubstring("is not pinned"), ContainSubstring("?checksum=sha256:")))
		Eventually(classReady(s, twice), timeout, time.Second).Should(And(
			HavePrefix("False ModuleInvalid: git module source"), ContainSubstring(`pins ?ref=v1.0.0 but the class's version is "v1.1.0"`)))
		Eventually(classReady(s, latest), timeout, time.Second).Should(
			MatchRegexp(`^False ModuleInvalid: registry module .*: version "latest" is neither a version nor a version constraint`))
		Eventually(classReady(s, pinned), timeout, time.Second).Should(HavePrefix("True"))
		Eventually(classReady(s, wrong), timeout, time.Second).Should(And(
			HavePrefix("False ModuleInvalid"), ContainSubstring("checksum")))
	})
})
