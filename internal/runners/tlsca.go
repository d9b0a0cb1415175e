package runners

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// CA is the run protocol's certificate authority: the manager keeps it in a Secret of its
// namespace (type kubernetes.io/tls) and publishes its certificate in a ConfigMap of the same name
// (key ca.crt) that runner pods mount.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// CAName is the name of the CA's Secret and ConfigMap; CAKey the ConfigMap's key.
const (
	CAName = "conductor-tf-runner-ca"
	CAKey  = "ca.crt"
)

// caValidity is how long a CA the manager creates is valid: ten years. Serving certificates are
// made at each start, valid for a year.
const caValidity = 10 * 365 * 24 * time.Hour

// LoadOrCreateCA reads the CA from the Secret CAName in namespace, creating it (ECDSA P-256,
// self-signed) when it does not exist, and writes its certificate to the ConfigMap CAName. Two
// managers starting at once agree: the one whose create loses reads the winner's.
func LoadOrCreateCA(ctx context.Context, kube kubernetes.Interface, namespace string) (*CA, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	s, err := secrets.Get(ctx, CAName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key, kerr := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if kerr != nil {
			return nil, kerr
		}
		cert, cerr := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "conductor-tf runner CA"}, key)
		if cerr != nil {
			return nil, cerr
		}
		keyPEM, kerr := keyutil.MarshalPrivateKeyToPEM(key)
		if kerr != nil {
			return nil, kerr
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: CAName, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "conductor-tf"}},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), corev1.TLSPrivateKeyKey: keyPEM},
		}
		if _, err = secrets.Create(ctx, s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			s, err = secrets.Get(ctx, CAName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("runner CA Secret %s/%s: %w", namespace, CAName, err)
	}
	ca, err := parseCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("runner CA Secret %s/%s: %w", namespace, CAName, err)
	}
	return ca, publishCA(ctx, kube, namespace, ca.CertPEM)
}

func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("the CA key cannot sign")
	}
	return &CA{Cert: certs[0], Key: signer, CertPEM: certPEM}, nil
}

// publishCA writes the CA certificate to the ConfigMap runners mount.
func publishCA(ctx context.Context, kube kubernetes.Interface, namespace string, certPEM []byte) error {
	cms := kube.CoreV1().ConfigMaps(namespace)
	cm, err := cms.Get(ctx, CAName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: CAName, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "conductor-tf"}},
			Data:       map[string]string{CAKey: string(certPEM)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err != nil || cm.Data[CAKey] == string(certPEM) {
		return err
	}
	cm.Data = map[string]string{CAKey: string(certPEM)}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// ServerConfig returns a TLS server configuration (TLS 1.3 only) with a certificate signed by the
// CA for hosts (DNS names or IP addresses), valid for one year from now.
func (ca *CA) ServerConfig(hosts []string) (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "conductor-tf run protocol"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// ClientConfig returns the TLS configuration of a runner that trusts only the CA in caPEM.
func ClientConfig(caPEM []byte, serverName string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the given PEM")
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: serverName}, nil
}
