// Package tlsfiles loads the PEM files of a TLS identity (certificate, key
// and the CA it trusts), reloads them on demand without a restart, and
// builds the tls.Configs of fenced's API, its peer port and its clients
// from whatever pair was loaded last. A node's identity is the common name
// of its certificate; node certificates allow server and client use,
// client certificates client use only (InitCA and Issue make them for
// `fenced certs`).
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// Files names the PEM files of one TLS identity and the CA it trusts.
type Files struct {
	Cert string // certificate chain, leaf first
	Key  string // private key of the leaf
	CA   string // CA certificates the other side is verified against
}

// Enabled reports whether any file is named.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check reports a half-given identity: a certificate without its key or the
// other way round, or (when needCA) a missing CA. prefix is the flag prefix
// the message names ("" or "peer-").
func (f Files) Check(prefix string, needCA bool) error {
	var missing []string
	if f.Cert == "" {
		missing = append(missing, "--"+prefix+"cert")
	}
	if f.Key == "" {
		missing = append(missing, "--"+prefix+"key")
	}
	if needCA && f.CA == "" {
		missing = append(missing, "--"+prefix+"ca")
	}
	if !f.Enabled() || len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("TLS needs %v as well (given: cert %q, key %q, ca %q)", missing, f.Cert, f.Key, f.CA)
}

// loaded is one loaded pair and CA pool.
type loaded struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil when Files.CA is empty: the system roots
}

// Reloader holds the identity last loaded from its Files. Its methods are
// safe for concurrent use; the configs it builds read the latest pair at
// each handshake, so a Reload applies to new connections at once and
// leaves established ones alone.
type Reloader struct {
	files Files
	// node, when set, is the node id the certificate must name (LoadNode).
	node string
	cur  atomic.Pointer[loaded]
}

// Load reads f (f.Cert and f.Key required; f.CA optional) and returns a
// Reloader holding it.
func Load(f Files) (*Reloader, error) {
	r := &Reloader{files: f}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// LoadNode is Load for a node's peer identity: the certificate must be a
// node certificate (server and client use) whose common name is id, now
// and at every Reload, so that a node is never started, nor reloaded, with
// another node's certificate.
func LoadNode(f Files, id string) (*Reloader, error) {
	r := &Reloader{files: f, node: id}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Files returns the files r reads.
func (r *Reloader) Files() Files { return r.files }

// Reload reads the files again. When they do not load (a file missing, a
// key that does not match its certificate, a CA file without a
// certificate) it returns the error and keeps the identity it had.
func (r *Reloader) Reload() error {
	if r.files.Cert == "" || r.files.Key == "" {
		return errors.New("tls: a certificate and its key are both needed")
	}
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return fmt.Errorf("tls: load %s and %s: %w", r.files.Cert, r.files.Key, err)
	}
	if r.node != "" {
		if err := checkNodeCert(cert.Leaf, r.node); err != nil {
			return fmt.Errorf("tls: %s: %w", r.files.Cert, err)
		}
	}
	l := &loaded{cert: &cert}
	if r.files.CA != "" {
		if l.pool, err = LoadPool(r.files.CA); err != nil {
			return err
		}
	}
	r.cur.Store(l)
	return nil
}

// checkNodeCert checks that leaf is a node certificate naming id.
func checkNodeCert(leaf *x509.Certificate, id string) error {
	if leaf.Subject.CommonName != id {
		return fmt.Errorf("the certificate names node %q, not this node %q (issue one with fenced certs issue --node %s)", leaf.Subject.CommonName, id, id)
	}
	if !IsNodeCert(leaf) {
		return fmt.Errorf("the certificate of %q is not a node certificate: it must allow both server and client use", id)
	}
	return nil
}

// LoadPool reads the PEM certificates in path into a pool.
func LoadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// Certificate returns the certificate last loaded.
func (r *Reloader) Certificate() *tls.Certificate { return r.cur.Load().cert }

// Pool returns the CA pool last loaded, nil when no CA file is named.
func (r *Reloader) Pool() *x509.CertPool { return r.cur.Load().pool }

// ServerConfig returns the config of a TLS listener that presents the
// latest certificate. With a CA file, clients may present a certificate,
// which must then verify against the latest CA; with requireClientCert
// they must present one (mutual TLS), otherwise they need not
// (authentication of API clients is a separate layer).
func (r *Reloader) ServerConfig(requireClientCert bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			l := r.cur.Load()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2", "http/1.1"},
				Certificates: []tls.Certificate{*l.cert},
			}
			if l.pool != nil {
				c.ClientCAs, c.ClientAuth = l.pool, tls.VerifyClientCertIfGiven
				if requireClientCert {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}

// ClientConfig returns the config of a TLS client that verifies the server
// against the latest CA (the system roots without a CA file) and the host
// name it dials, and presents the latest certificate when asked.
func (r *Reloader) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.Certificate(), nil
		},
		// The chain is verified below against the pool loaded last, which
		// a RootCAs fixed here would not follow.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs, r.Pool())
		},
	}
}

// verifyServer does what crypto/tls does with RootCAs set to pool: the
// server's chain must lead to pool (the system roots when nil) and name
// the host dialed.
func verifyServer(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: cs.ServerName})
	return err
}

// NodeIdentity verifies a node certificate presented on a peer connection:
// its chain must lead to a certificate of pool and allow server use (client
// certificates issued by the same CA allow client use only, so they are
// refused), and its common name, the node id, is returned.
func NodeIdentity(cs tls.ConnectionState, pool *x509.CertPool) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("no certificate presented")
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "", fmt.Errorf("certificate %q is not a node certificate of the cluster CA: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return "", errors.New("node certificate has no common name (the node id)")
	}
	return leaf.Subject.CommonName, nil
}
