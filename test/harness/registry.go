package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ModuleRegistry is a module registry for tests: Terraform's service discovery
// (/.well-known/terraform.json) and the modules.v1 protocol (list versions, download), over HTTPS
// with a certificate from a test CA, serving each published version as a .tar.gz archive. Real
// terraform/tofu resolve and download modules through it when CAFile is their SSL_CERT_FILE.
type ModuleRegistry struct {
	// Host is host:port, the first component of the registry's module addresses.
	Host string
	// CAFile is the PEM file of the CA that signed the server's certificate.
	CAFile string

	srv      *http.Server
	mu       sync.Mutex
	archives map[string][]byte   // "ns/name/system/version" → .tar.gz
	versions map[string][]string // "ns/name/system" → versions
	requests []string            // paths requested, in order
	token    string              // required of modules.v1 requests when set
}

// StartModuleRegistry serves an empty registry on 127.0.0.1 (a random port) and writes its CA to
// dir/registry-ca.pem. Stop it with Close.
func StartModuleRegistry(dir string) (*ModuleRegistry, error) {
	return StartModuleRegistryAt(dir, "127.0.0.1:0")
}

// StartModuleRegistryAt is StartModuleRegistry listening on addr (an IPv4 loopback address and a
// port), its certificate for that address. A registry on port 443 has a Host without a port, which
// a TF_TOKEN_<host> variable can name (binding 443 needs root or CAP_NET_BIND_SERVICE).
func StartModuleRegistryAt(dir, addr string) (*ModuleRegistry, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cert, caPEM, err := certificateFor(net.ParseIP(host))
	if err != nil {
		return nil, err
	}
	r := &ModuleRegistry{CAFile: filepath.Join(dir, "registry-ca.pem"),
		archives: map[string][]byte{}, versions: map[string][]string{}}
	if err := os.WriteFile(r.CAFile, caPEM, 0o600); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	r.Host = ln.Addr().String()
	if strings.HasSuffix(r.Host, ":443") {
		r.Host = strings.TrimSuffix(r.Host, ":443")
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = r.srv.ServeTLS(ln, "", "") }()
	return r, nil
}

// Close stops the server.
func (r *ModuleRegistry) Close() { _ = r.srv.Close() }

// Publish packs the module in moduleDir as version of address ("namespace/name/system") and
// returns the archive's SHA-256 digest in hex.
func (r *ModuleRegistry) Publish(address, version, moduleDir string) (string, error) {
	data, err := tarGz(moduleDir)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives[address+"/"+version] = data
	r.versions[address] = append(r.versions[address], version)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// ArchiveURL is the https URL of a published version's archive, as a module source would name it.
func (r *ModuleRegistry) ArchiveURL(address, version string) string {
	return fmt.Sprintf("https://%s/archives/%s/%s.tar.gz", r.Host, address, version)
}

// Requests returns the paths requested so far, in order.
func (r *ModuleRegistry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// RequireToken makes the registry's modules.v1 API answer 401 to requests without
// "Authorization: Bearer <token>", as a private registry does (archives stay open, as the
// pre-signed URLs registries hand out are).
func (r *ModuleRegistry) RequireToken(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = token
}

func (r *ModuleRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.URL.Path)
	token := r.token
	r.mu.Unlock()
	p := req.URL.Path
	if token != "" && strings.HasPrefix(p, "/v1/modules/") && req.Header.Get("Authorization") != "Bearer "+token {
		http.Error(w, `{"errors":["unauthorized"]}`, http.StatusUnauthorized)
		return
	}
	switch {
	case p == "/.well-known/terraform.json":
		writeJSON(w, map[string]string{"modules.v1": "/v1/modules/"})
	case strings.HasPrefix(p, "/v1/modules/") && strings.HasSuffix(p, "/versions"):
		r.listVersions(w, strings.TrimSuffix(strings.TrimPrefix(p, "/v1/modules/"), "/versions"))
	case strings.HasPrefix(p, "/v1/modules/") && strings.HasSuffix(p, "/download"):
		key := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/modules/"), "/download")
		if r.archive(key) == nil {
			http.NotFound(w, req)
			return
		}
		// modules.v1: 204 with the package's address in X-Terraform-Get.
		w.Header().Set("X-Terraform-Get", fmt.Sprintf("https://%s/archives/%s.tar.gz", r.Host, key))
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(p, "/archives/") && strings.HasSuffix(p, ".tar.gz"):
		data := r.archive(strings.TrimSuffix(strings.TrimPrefix(p, "/archives/"), ".tar.gz"))
		if data == nil {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(data)
	default:
		http.NotFound(w, req)
	}
}

func (r *ModuleRegistry) archive(key string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.archives[key]
}

func (r *ModuleRegistry) listVersions(w http.ResponseWriter, address string) {
	r.mu.Lock()
	vs := append([]string(nil), r.versions[address]...)
	r.mu.Unlock()
	if len(vs) == 0 {
		http.Error(w, `{"errors":["not found"]}`, http.StatusNotFound)
		return
	}
	type version struct {
		Version string `json:"version"`
	}
	list := make([]version, 0, len(vs))
	for _, v := range vs {
		list = append(list, version{v})
	}
	writeJSON(w, map[string]any{"modules": []any{map[string]any{"versions": list}}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// tarGz packs the regular files under dir.
func tarGz(dir string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// testCertificate makes a CA and a server certificate for 127.0.0.1 signed by it; it returns the
// server's key pair and the CA's PEM.
func testCertificate() (tls.Certificate, []byte, error) {
	return certificateFor(net.IPv4(127, 0, 0, 1))
}

// certificateFor makes a CA and a server certificate for ip signed by it.
func certificateFor(ip net.IP) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "conductor-tf test registry CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{ip},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

// ServingCertificate makes a CA and a server certificate for 127.0.0.1 signed by it, for servers a
// test runs on loopback (an admission webhook the API server calls); it returns the server's key
// pair and the CA's PEM.
func ServingCertificate() (tls.Certificate, []byte, error) { return testCertificate() }
