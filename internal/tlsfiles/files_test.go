package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// newCA makes a CA in a temporary directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := tlsfiles.InitCA(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	return dir
}

func issue(t *testing.T, dir string, kind tlsfiles.Kind, name string, hosts ...string) tlsfiles.Files {
	t.Helper()
	cert, key, err := tlsfiles.Issue(dir, kind, name, hosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tlsfiles.Files{Cert: cert, Key: key, CA: filepath.Join(dir, tlsfiles.CACertFile)}
}

func leaf(t *testing.T, f tlsfiles.Files) *x509.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestInitCA_RefusesExisting(t *testing.T) {
	dir := newCA(t)
	if _, err := tlsfiles.InitCA(dir, time.Hour); err == nil {
		t.Fatal("second InitCA in the same dir succeeded; it must not replace a CA")
	}
	if fi, err := os.Stat(filepath.Join(dir, tlsfiles.CAKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key: %v mode %v, want 0600", err, fi.Mode().Perm())
	}
}

func TestIssue(t *testing.T) {
	dir := newCA(t)
	node := leaf(t, issue(t, dir, tlsfiles.Node, "n1", "db1.internal", "10.0.0.7"))
	if node.Subject.CommonName != "n1" {
		t.Errorf("node CN %q", node.Subject.CommonName)
	}
	if err := node.VerifyHostname("db1.internal"); err != nil {
		t.Error(err)
	}
	for _, h := range []string{"10.0.0.7", "127.0.0.1", "localhost"} {
		if err := node.VerifyHostname(h); err != nil {
			t.Error(err)
		}
	}
	client := leaf(t, issue(t, dir, tlsfiles.Client, "app"))
	if len(client.ExtKeyUsage) != 1 || client.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("client key usage %v, want client auth only", client.ExtKeyUsage)
	}

	for name, bad := range map[string]string{"existing": "n1", "path": "../n2", "empty": "", "ca": "ca"} {
		if _, _, err := tlsfiles.Issue(dir, tlsfiles.Node, bad, nil, time.Hour); err == nil {
			t.Errorf("%s name %q: issued", name, bad)
		}
	}
	if _, _, err := tlsfiles.Issue(t.TempDir(), tlsfiles.Node, "n1", nil, time.Hour); err == nil {
		t.Error("issued without a CA")
	}
}

// NodeIdentity accepts node certificates of the pool only.
func TestNodeIdentity(t *testing.T) {
	dir, other := newCA(t), newCA(t)
	pool, err := tlsfiles.LoadPool(filepath.Join(dir, tlsfiles.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	state := func(f tlsfiles.Files) tls.ConnectionState {
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf(t, f)}}
	}
	if id, err := tlsfiles.NodeIdentity(state(issue(t, dir, tlsfiles.Node, "n1")), pool); err != nil || id != "n1" {
		t.Errorf("node cert: %q %v, want n1", id, err)
	}
	if _, err := tlsfiles.NodeIdentity(state(issue(t, dir, tlsfiles.Client, "app")), pool); err == nil {
		t.Error("client cert accepted as a node")
	}
	if _, err := tlsfiles.NodeIdentity(state(issue(t, other, tlsfiles.Node, "n2")), pool); err == nil {
		t.Error("node cert of another CA accepted")
	}
	if _, err := tlsfiles.NodeIdentity(tls.ConnectionState{}, pool); err == nil {
		t.Error("no certificate accepted")
	}
}

// A reload serves the new pair to new connections; a broken file keeps the
// old one.
func TestReloader(t *testing.T) {
	dir := newCA(t)
	f := issue(t, dir, tlsfiles.Node, "n1")
	r, err := tlsfiles.Load(f)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	client, err := tlsfiles.Load(issue(t, dir, tlsfiles.Client, "app"))
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		c, err := tls.Dial("tcp", ln.Addr().String(), func() *tls.Config { c := client.ClientConfig(); c.ServerName = "localhost"; return c }())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	g := issue(t, dir, tlsfiles.Node, "n1b")
	for _, p := range [][2]string{{g.Cert, f.Cert}, {g.Key, f.Key}} {
		if err := os.Rename(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if serial() != before {
		t.Fatal("changed before Reload")
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	after := serial()
	if after == before {
		t.Fatal("same certificate after Reload")
	}
	os.WriteFile(f.Key, []byte("junk"), 0o600)
	if err := r.Reload(); err == nil {
		t.Fatal("Reload of a broken key succeeded")
	}
	if serial() != after {
		t.Fatal("a failed Reload changed the certificate")
	}
	// A client verifying against another CA refuses the server.
	wrong, err := tlsfiles.Load(issue(t, newCA(t), tlsfiles.Client, "x"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := wrong.ClientConfig()
	cfg.ServerName = "localhost"
	if c, err := tls.Dial("tcp", ln.Addr().String(), cfg); err == nil {
		c.Close()
		t.Fatal("client of another CA accepted the server")
	}
}

func TestFiles_Check(t *testing.T) {
	if err := (tlsfiles.Files{}).Check("peer-", true); err != nil {
		t.Errorf("no files: %v", err)
	}
	if err := (tlsfiles.Files{Cert: "a", Key: "b"}).Check("peer-", true); err == nil {
		t.Error("peer TLS without CA accepted")
	}
	if err := (tlsfiles.Files{Cert: "a", Key: "b"}).Check("", false); err != nil {
		t.Errorf("API TLS without CA: %v", err)
	}
	if err := (tlsfiles.Files{Cert: "a"}).Check("", false); err == nil {
		t.Error("certificate without key accepted")
	}
}

// A node's peer identity must be its own node certificate, at load and at
// every reload.
func TestLoadNode(t *testing.T) {
	dir := newCA(t)
	f := issue(t, dir, tlsfiles.Node, "n1")
	if _, err := tlsfiles.LoadNode(f, "n2"); err == nil {
		t.Error("n1's certificate loaded as n2's")
	}
	if _, err := tlsfiles.LoadNode(issue(t, dir, tlsfiles.Client, "n3"), "n3"); err == nil {
		t.Error("a client certificate loaded as a node's")
	}
	r, err := tlsfiles.LoadNode(f, "n1")
	if err != nil {
		t.Fatal(err)
	}
	before := r.Certificate()
	other := issue(t, dir, tlsfiles.Node, "n4")
	for _, p := range [][2]string{{other.Cert, f.Cert}, {other.Key, f.Key}} {
		if err := os.Rename(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Reload(); err == nil {
		t.Error("reloaded n4's certificate as n1's")
	}
	if r.Certificate() != before {
		t.Error("a refused reload changed the certificate")
	}
}
