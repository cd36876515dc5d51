package client

import (
	"crypto/tls"
	"fmt"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// WithTLS makes the Client talk HTTP/2 over TLS with cfg: endpoints given as
// "host:port" are reached at https://host:port (an explicit http:// URL
// stays cleartext). cfg.RootCAs verifies the servers (nil: the system
// roots); cfg.Certificates, if any, is presented as the client's identity.
// Ignored when WithHTTPClient is given, whose transport decides.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// LoadTLS returns a TLS config for WithTLS from PEM files: the CA the
// servers' certificates are verified against (empty: the system roots) and
// an optional client certificate with its key (both or neither).
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := tlsfiles.LoadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("client: %w: %v", fence.ErrInvalidArgument, err)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("client: %w: a client certificate needs its key and the other way round (cert %q, key %q)", fence.ErrInvalidArgument, certFile, keyFile)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: %w: %v", fence.ErrInvalidArgument, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
