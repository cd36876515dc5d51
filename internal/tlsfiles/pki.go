package tlsfiles

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names of the CA in a certificates directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Kind is what a certificate is issued for.
type Kind int

const (
	// Node certificates identify a cluster member by its node id (the
	// common name). They allow server and client use: a node serves the
	// API and the peer port and dials its peers with the same pair.
	Node Kind = iota
	// Client certificates identify an API client. They allow client use
	// only, so the peer port refuses them.
	Client
)

// InitCA creates a new CA (an ECDSA P-256 key and a self-signed
// certificate valid for validity) in dir as ca.crt and ca.key (mode 0600).
// It refuses a dir that already has a CA, so an existing cluster's CA is
// never replaced by accident.
func InitCA(dir string, validity time.Duration) (certPath string, err error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Stat(p); err == nil {
			return "", fmt.Errorf("%s already exists; a directory holds one CA (remove it to start over, which invalidates every certificate it issued)", p)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "fenced CA", Organization: []string{"fenced"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", err
	}
	if err := writeKey(keyPath, key); err != nil {
		return "", err
	}
	return certPath, writePEM(certPath, "CERTIFICATE", der, 0o644)
}

// Issue signs a certificate for name with the CA in dir and writes it as
// NAME.crt and NAME.key (mode 0600) in dir. A node certificate names
// localhost, 127.0.0.1 and ::1 and each of hosts (host names or IP
// addresses) as subject alternative names, so clients can verify the API
// at those addresses. It refuses to overwrite an existing certificate.
func Issue(dir string, kind Kind, name string, hosts []string, validity time.Duration) (certPath, keyPath string, err error) {
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return "", "", fmt.Errorf("name %q: want a plain name such as n1 or app (it is the file name and the certificate's common name)", name)
	}
	if name == "ca" {
		return "", "", errors.New(`name "ca" is the CA's own file name; pick another`)
	}
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Stat(p); err == nil {
			return "", "", fmt.Errorf("%s already exists; remove it to issue a new one", p)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"fenced"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	switch kind {
	case Node:
		tmpl.Subject.OrganizationalUnit = []string{"node"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case Client:
		tmpl.Subject.OrganizationalUnit = []string{"client"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return "", "", fmt.Errorf("unknown certificate kind %d", kind)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	if err := writeKey(keyPath, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePEM(certPath, "CERTIFICATE", der, 0o644)
}

// loadCA reads the CA of dir.
func loadCA(dir string) (*x509.Certificate, any, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA (run \"fenced certs init --dir %s\" first): %w", dir, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("read the CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("CA files in %s are not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", CACertFile, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", CAKeyFile, err)
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
