package tlsfiles

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
)

// ClientIdentity returns the identity a verified client certificate
// stands for: its common name, or, for a certificate without one (a SPIFFE
// SVID, say), its one URI subject alternative name. A certificate with
// neither, or with no common name and several URIs, names no identity.
func ClientIdentity(leaf *x509.Certificate) (string, error) {
	if cn := leaf.Subject.CommonName; cn != "" {
		return cn, nil
	}
	switch len(leaf.URIs) {
	case 0:
		return "", errors.New("the certificate has no common name and no URI subject alternative name: it names no identity")
	case 1:
		return leaf.URIs[0].String(), nil
	}
	return "", fmt.Errorf("the certificate has no common name and %d URI subject alternative names: it names no single identity", len(leaf.URIs))
}

// IsNodeCert reports whether leaf allows server use as well as client use,
// as node certificates do (fenced certs issue --node); client certificates
// allow client use only. The node id is then its common name.
func IsNodeCert(leaf *x509.Certificate) bool {
	return slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}
