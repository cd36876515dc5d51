package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/fenced-dev/fenced/internal/nativewire"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// secure prepares the API for TLS when Config.TLS names files: it loads
// the identity and wraps ln, the API listener, so that it serves TLS with
// the identity loaded last. It also builds the client this node calls
// other members with (TLS or not). On error ln is closed. It is the one
// place TLS enters the API listener: a listener built another way (with
// connection limits, say) is wrapped the same.
func (s *Server) secure(ln net.Listener) (net.Listener, error) {
	if s.cfg.TLS.Enabled() {
		id, err := tlsfiles.Load(s.cfg.TLS)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("API TLS: %w", err)
		}
		s.apiTLS = id
	}
	s.members = &http.Client{Transport: s.memberTransport()}
	if s.apiTLS == nil {
		return readBufListener{ln}, nil
	}
	return tlsListener{ln, s.apiTLS, s.cfg.RequireClientCert, !s.cfg.Limits.DisableNative}, nil
}

// tlsListener wraps accepted connections in TLS with the identity loaded
// last, so a reload applies to new connections.
type tlsListener struct {
	net.Listener
	id *tlsfiles.Reloader
	// requireClientCert refuses a handshake without a client certificate
	// of the CA (Config.RequireClientCert).
	requireClientCert bool
	// native offers the native protocol (nativewire.ALPN) first.
	native bool
}

func (l tlsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cfg := l.id.ServerConfig(l.requireClientCert)
	if l.native {
		perClient := cfg.GetConfigForClient
		cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := perClient(h)
			if c != nil {
				c.NextProtos = append([]string{nativewire.ALPN}, c.NextProtos...)
			}
			return c, err
		}
	}
	return tls.Server(c, cfg), nil
}

// setProtocols lets the API server speak HTTP/2 over TLS with TLS and
// cleartext HTTP/2 (h2c) without, and logs what net/http reports (failed
// TLS handshakes among it) in the server's log.
func (s *Server) setProtocols() {
	if s.apiTLS != nil {
		s.http.Protocols.SetHTTP2(true)
	} else {
		s.http.Protocols.SetUnencryptedHTTP2(true)
	}
	s.http.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
}

// ReloadTLS reads the API and peer certificate, key and CA files again.
// New connections use them at once; established connections keep the
// identity they were opened with. Files that do not load leave the
// identity as it was, and the error says which and why.
func (s *Server) ReloadTLS() error {
	var errs []error
	if s.apiTLS != nil {
		errs = append(errs, s.apiTLS.Reload())
	}
	errs = append(errs, s.node.ReloadTLS())
	return errors.Join(errs...)
}

// memberTransport returns the HTTP transport this node calls other members'
// APIs with (forwarding, status probes): HTTP/2 over TLS with this node's
// certificate when the API has TLS, cleartext HTTP/2 otherwise. A cluster
// is either all TLS or all plain.
func (s *Server) memberTransport() *http.Transport {
	t := &http.Transport{
		DialContext:     (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		Protocols:       new(http.Protocols),
		IdleConnTimeout: time.Minute,
		// A leader that stopped answering (paused, cut off) is noticed
		// by pings, not only when TCP gives up.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 5 * time.Second, PingTimeout: 5 * time.Second},
	}
	if s.apiTLS != nil {
		t.TLSClientConfig = s.apiTLS.ClientConfig()
		t.Protocols.SetHTTP2(true)
	} else {
		t.Protocols.SetUnencryptedHTTP2(true)
	}
	return t
}

// memberURL is the base URL of a member's API at addr.
func (s *Server) memberURL(addr string) *url.URL {
	scheme := "http"
	if s.apiTLS != nil {
		scheme = "https"
	}
	return &url.URL{Scheme: scheme, Host: addr}
}
