package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// Authentication: bearer tokens and client certificates named in an auth
// file (Config.AuthFile).
//
// The file holds one identity per line, as JSON, known by the SHA-256 of
// its bearer token or by the identity of its client certificate (the
// common name, or the one URI SAN of a certificate without a common name;
// tlsfiles.ClientIdentity):
//
//	{"name":"app","sha256":"<hex SHA-256 of the token>","roles":[{"prefix":"orders/","permissions":["acquire","read"]}]}
//	{"name":"billing","cert":"billing-svc","roles":[{"prefix":"billing/","permissions":["acquire","read"]}]}
//
// Blank lines and lines starting with # are skipped. The server keeps only
// the hashes: a token is 32 random bytes (fenced auth token makes one), so
// one unsalted SHA-256 suffices. A certificate is verified against the
// API's CA (Config.TLS.CA) in the handshake; the cert line only names what
// it may do. Server.ReloadAuth reads the file again. Authorization (which
// call needs which permission) is in authz.go.

// Permissions a role grants on the names starting with its prefix.
const (
	permRead    = "read"     // Status, List, Describe, Verify, kv get
	permAcquire = "acquire"  // sessions, Acquire, Release
	permKVWrite = "kv-write" // kv put and delete
	permEnqueue = "enqueue"  // queue push (claim, ack, nack and extend need acquire)
	permAdmin   = "admin"    // cluster API, Revoke
)

// permissions is every permission a role may grant.
var permissions = []string{permRead, permAcquire, permKVWrite, permEnqueue, permAdmin}

// AuthEntry is one line of an auth file: an identity, how it is known
// (exactly one of SHA256, the hexadecimal SHA-256 of its bearer token, and
// Cert, the identity of its client certificate) and its roles.
type AuthEntry struct {
	Name   string     `json:"name"`
	SHA256 string     `json:"sha256,omitempty"`
	Cert   string     `json:"cert,omitempty"`
	Roles  []AuthRole `json:"roles"`
}

// maxCertIdentity bounds a cert line's certificate identity (a common
// name or a URI), which followers forward in a header.
const maxCertIdentity = 1024

// AuthRole grants permissions (read, acquire, kv-write, enqueue, admin) on every
// name that starts with Prefix; the prefix "" covers every name.
type AuthRole struct {
	Prefix      string   `json:"prefix"`
	Permissions []string `json:"permissions"`
}

// identity is an authenticated caller.
type identity struct {
	name  string
	roles []AuthRole
}

// allows reports whether one of the identity's roles grants perm on name.
func (id *identity) allows(perm, name string) bool {
	for _, r := range id.roles {
		if strings.HasPrefix(name, r.Prefix) && slices.Contains(r.Permissions, perm) {
			return true
		}
	}
	return false
}

// allowsAnywhere reports whether one of the identity's roles grants perm
// on some prefix.
func (id *identity) allowsAnywhere(perm string) bool {
	for _, r := range id.roles {
		if slices.Contains(r.Permissions, perm) {
			return true
		}
	}
	return false
}

// authTable holds an auth file's identities: by the hex SHA-256 of their
// token, and by the identity of their client certificate.
type authTable struct {
	byHash map[string]*identity
	byCert map[string]*identity
}

// authenticator holds the auth file's identities; a reload swaps them.
type authenticator struct {
	path  string
	table atomic.Pointer[authTable]
}

func loadAuthenticator(path string) (*authenticator, error) {
	a := &authenticator{path: path}
	if err := a.reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// reload reads the file again; on error the identities stay as they were.
func (a *authenticator) reload() error {
	data, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("auth file: %w", err)
	}
	t, err := parseAuthFile(data)
	if err != nil {
		return fmt.Errorf("auth file %s: %w", a.path, err)
	}
	a.table.Store(&t)
	return nil
}

// parseAuthFile checks and parses the contents of an auth file. Every
// line must be a valid entry: names and hashes are unique, a hash is 64
// hexadecimal digits and every permission is known.
func parseAuthFile(data []byte) (authTable, error) {
	t := authTable{byHash: map[string]*identity{}, byCert: map[string]*identity{}}
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var e AuthEntry
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return authTable{}, fmt.Errorf("%w: line %d: %v", fence.ErrInvalidArgument, n, err)
		}
		if err := e.validate(); err != nil {
			return authTable{}, fmt.Errorf("%w: line %d: %v", fence.ErrInvalidArgument, n, err)
		}
		if names[e.Name] {
			return authTable{}, fmt.Errorf("%w: line %d: identity %q is named twice", fence.ErrInvalidArgument, n, e.Name)
		}
		id := &identity{name: e.Name, roles: e.Roles}
		if e.Cert != "" {
			if _, dup := t.byCert[e.Cert]; dup {
				return authTable{}, fmt.Errorf("%w: line %d: identity %q has the certificate identity %q of another identity", fence.ErrInvalidArgument, n, e.Name, e.Cert)
			}
			t.byCert[e.Cert] = id
		} else {
			hash := strings.ToLower(e.SHA256)
			if _, dup := t.byHash[hash]; dup {
				return authTable{}, fmt.Errorf("%w: line %d: identity %q has the token hash of another identity", fence.ErrInvalidArgument, n, e.Name)
			}
			t.byHash[hash] = id
		}
		names[e.Name] = true
	}
	if err := sc.Err(); err != nil {
		return authTable{}, err
	}
	if len(names) == 0 {
		return authTable{}, fmt.Errorf("%w: no identities: every call would be refused", fence.ErrInvalidArgument)
	}
	return t, nil
}

func (e *AuthEntry) validate() error {
	if e.Name == "" {
		return errors.New(`"name" is empty`)
	}
	switch {
	case e.SHA256 != "" && e.Cert != "":
		return fmt.Errorf(`identity %q: give "sha256" (a bearer token) or "cert" (a client certificate), not both: one identity per line`, e.Name)
	case e.Cert != "":
		if len(e.Cert) > maxCertIdentity || strings.IndexFunc(e.Cert, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
			return fmt.Errorf(`identity %q: "cert" must be a certificate's common name or URI of at most %d bytes without control characters (fenced auth cert prints the line)`, e.Name, maxCertIdentity)
		}
	default:
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf(`identity %q: "sha256" must be 64 hexadecimal digits (the SHA-256 of the token; fenced auth token prints the line), or give "cert" instead (fenced auth cert)`, e.Name)
		}
	}
	for _, r := range e.Roles {
		if len(r.Permissions) == 0 {
			return fmt.Errorf("identity %q: the role on prefix %q grants no permission", e.Name, r.Prefix)
		}
		for _, p := range r.Permissions {
			if !slices.Contains(permissions, p) {
				return fmt.Errorf("identity %q: unknown permission %q; want %s", e.Name, p, strings.Join(permissions, ", "))
			}
		}
	}
	return nil
}

// TokenHash returns the hex SHA-256 of a bearer token, as an auth file
// holds it.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewAuthToken returns a new bearer token (32 random bytes, hexadecimal)
// and its hash for an auth file line (TokenHash).
func NewAuthToken() (token, hash string) {
	var b [32]byte
	rand.Read(b[:])
	token = hex.EncodeToString(b[:])
	return token, TokenHash(token)
}

// errNoCredentials is a call without an Authorization header (and without
// a client certificate of an identity, when the auth file has cert lines).
var errNoCredentials = errors.New("no credentials: this server requires \"Authorization: Bearer TOKEN\" on every API call (SDK: client.WithBearerToken; CLI: --token-file or FENCED_AUTH_TOKEN)")

// errNoCertCredentials is errNoCredentials of a server whose auth file
// also names certificates.
var errNoCertCredentials = fmt.Errorf("%w; or a client certificate named by a cert line of its auth file (SDK: client.WithTLS; CLI: --cert and --key or FENCED_CERT and FENCED_KEY)", errNoCredentials)

// headerClientIdentity carries, on a call a member forwards (to the
// leader) or probes with, the identity of the client certificate that
// member verified. It is believed only from a connection that presents
// the node certificate of a current member; from anyone else it is
// refused (401), so a client cannot claim a certificate it does not hold.
const headerClientIdentity = "X-Fenced-Client-Identity"

// authenticate returns the identity of a call: the bearer token of r when
// it has one; else, from a current member (memberNode, the node id of the
// connection's node certificate of a member, "" otherwise), the client
// identity it forwards; else the identity of the client certificate leaf
// (nil without one). It returns the certificate identity it used.
func (a *authenticator) authenticate(r *http.Request, leaf *x509.Certificate, memberNode string) (*identity, string, error) {
	t := a.table.Load()
	if fwd := r.Header.Values(headerClientIdentity); len(fwd) > 0 {
		if memberNode == "" {
			return nil, "", fmt.Errorf("%s %q refused: it is taken only from a current member forwarding a call (over TLS with its node certificate)", headerClientIdentity, fwd[0])
		}
		if len(fwd) > 1 {
			return nil, "", fmt.Errorf("%s is repeated: a forwarded call names one client identity", headerClientIdentity)
		}
		id := t.byCert[fwd[0]]
		if id == nil {
			return nil, "", fmt.Errorf("client certificate identity %q, forwarded by %s, has no cert line in this node's auth file", fwd[0], memberNode)
		}
		return id, fwd[0], nil
	}
	if len(r.Header.Values("Authorization")) == 0 && leaf != nil {
		cid, err := tlsfiles.ClientIdentity(leaf)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", errNoCertCredentials, err)
		}
		id := t.byCert[cid]
		if id == nil {
			return nil, "", fmt.Errorf("%w: the client certificate's identity %q has no cert line in the auth file (fenced auth cert prints one)", errNoCertCredentials, cid)
		}
		return id, cid, nil
	}
	id, err := t.token(r)
	return id, "", err
}

// token returns the identity of the bearer token of r.
func (t *authTable) token(r *http.Request) (*identity, error) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		if len(t.byCert) > 0 {
			return nil, errNoCertCredentials
		}
		return nil, errNoCredentials
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	scheme, token, ok := strings.Cut(h[0], " ")
	if len(h) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, errors.New(`malformed credentials: want one header "Authorization: Bearer TOKEN"`)
	}
	id := t.byHash[TokenHash(token)]
	if id == nil {
		return nil, errors.New("unknown bearer token")
	}
	return id, nil
}

// caller is what authentication learned about a call: its identity (nil
// for an unauthenticated RegisterNode), the node id of its verified node
// certificate (a member's or not; "" for a client certificate), and what
// a member forwarding the call or probing others carries on: its
// Authorization header, or the identity of the client certificate the
// identity was found by.
type caller struct {
	id            *identity
	certName      string
	authorization string
	certIdentity  string
}

type callerKey struct{}

func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// authenticating requires a valid bearer token or a client certificate of
// an identity on every API call when the server has an auth file (see
// auth.go); /healthz, /readyz and /metrics stay open. A RegisterNode
// without credentials passes on to its own check (a member's node
// certificate). A refusal is 401 Unauthenticated in the Connect error
// format and is audited. It runs on every node, before a follower
// forwards the call; the leader checks the same bearer token again, or
// believes the client identity the follower forwards when the follower
// presents a current member's node certificate.
func (s *Server) authenticating(next http.Handler) http.Handler {
	if s.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAPI(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c, err := s.authenticateRequest(r)
		if err != nil {
			writeConnectError(w, http.StatusUnauthorized, "unauthenticated", err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// authenticateRequest returns the caller of r, an API call on a server
// with an auth file, or why it is refused (recorded in the audit log).
// The native protocol authenticates its connections with it too, from
// the credentials of their hello (native.go).
func (s *Server) authenticateRequest(r *http.Request) (*caller, error) {
	c := &caller{authorization: r.Header.Get("Authorization")}
	var leaf *x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		if leaf = r.TLS.VerifiedChains[0][0]; tlsfiles.IsNodeCert(leaf) {
			c.certName = leaf.Subject.CommonName
		}
	}
	member := ""
	// Only a forwarded client identity needs the membership (a read of
	// raft's configuration).
	if c.certName != "" && r.Header.Get(headerClientIdentity) != "" && s.isMember(c.certName) {
		member = c.certName
	}
	id, cid, err := s.auth.authenticate(r, leaf, member)
	if err != nil && !(errors.Is(err, errNoCredentials) && r.URL.Path == registerNodePath) {
		s.audit.record(auditEntry{Event: auditAuthFailed, Source: identityOf(r.Context()), Procedure: r.URL.Path, Outcome: "refused", Detail: err.Error()})
		return nil, err
	}
	c.id, c.certIdentity = id, cid
	return c, nil
}

// isMember reports whether id is a member of this node's latest
// configuration.
func (s *Server) isMember(id string) bool {
	members, _ := s.node.Members()
	for _, m := range members {
		if m.ID == id {
			return true
		}
	}
	return false
}

// ReloadAuth reads the auth file again. Calls after it see the new
// identities; a file that does not load leaves the old ones in use, and
// the error says why. Without an auth file it does nothing.
func (s *Server) ReloadAuth() error {
	if s.auth == nil {
		return nil
	}
	return s.auth.reload()
}

// CheckAuthLine reports whether line is a valid auth-file entry.
func CheckAuthLine(line []byte) error {
	_, err := parseAuthFile(line)
	return err
}
