package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
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
)

// Authentication: bearer tokens from an auth file (Config.AuthFile).
//
// The file holds one identity per line, as JSON:
//
//	{"name":"app","sha256":"<hex SHA-256 of the token>","roles":[{"prefix":"orders/","permissions":["acquire","read"]}]}
//
// Blank lines and lines starting with # are skipped. The server keeps only
// the hashes: a token is 32 random bytes (fenced auth token makes one), so
// one unsalted SHA-256 suffices. Server.ReloadAuth reads the file again.
// Authorization (which call needs which permission) is in authz.go.

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

// AuthEntry is one line of an auth file: an identity, the SHA-256 of its
// bearer token (hexadecimal) and its roles.
type AuthEntry struct {
	Name   string     `json:"name"`
	SHA256 string     `json:"sha256"`
	Roles  []AuthRole `json:"roles"`
}

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

// authTable maps the hex SHA-256 of a token to its identity.
type authTable map[string]*identity

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
	t := authTable{}
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
			return nil, fmt.Errorf("%w: line %d: %v", fence.ErrInvalidArgument, n, err)
		}
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", fence.ErrInvalidArgument, n, err)
		}
		hash := strings.ToLower(e.SHA256)
		if names[e.Name] {
			return nil, fmt.Errorf("%w: line %d: identity %q is named twice", fence.ErrInvalidArgument, n, e.Name)
		}
		if _, dup := t[hash]; dup {
			return nil, fmt.Errorf("%w: line %d: identity %q has the token hash of another identity", fence.ErrInvalidArgument, n, e.Name)
		}
		names[e.Name] = true
		t[hash] = &identity{name: e.Name, roles: e.Roles}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("%w: no identities: every call would be refused", fence.ErrInvalidArgument)
	}
	return t, nil
}

func (e *AuthEntry) validate() error {
	if e.Name == "" {
		return errors.New(`"name" is empty`)
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf(`identity %q: "sha256" must be 64 hexadecimal digits (the SHA-256 of the token; fenced auth token prints the line)`, e.Name)
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

// errNoCredentials is a call without an Authorization header.
var errNoCredentials = errors.New("no credentials: this server requires \"Authorization: Bearer TOKEN\" on every API call (SDK: client.WithBearerToken; CLI: --token-file or FENCED_AUTH_TOKEN)")

// authenticate returns the identity of the bearer token of r.
func (a *authenticator) authenticate(r *http.Request) (*identity, error) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return nil, errNoCredentials
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	scheme, token, ok := strings.Cut(h[0], " ")
	if len(h) > 1 || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, errors.New(`malformed credentials: want one header "Authorization: Bearer TOKEN"`)
	}
	id := (*a.table.Load())[TokenHash(token)]
	if id == nil {
		return nil, errors.New("unknown bearer token")
	}
	return id, nil
}

// caller is what authentication learned about a call: its identity (nil
// for an unauthenticated RegisterNode), the common name of its verified
// client certificate, and its Authorization header, which status probes
// of other members carry on.
type caller struct {
	id            *identity
	certName      string
	authorization string
}

type callerKey struct{}

func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// authenticating requires a valid bearer token on every API call when the
// server has an auth file (see auth.go); /healthz, /readyz and /metrics
// stay open. A RegisterNode without credentials passes on to its own check
// (a member's node certificate). A refusal is 401 Unauthenticated in the
// Connect error format and is audited. It runs on every node, before a
// follower forwards the call, and the leader checks the same header again.
func (s *Server) authenticating(next http.Handler) http.Handler {
	if s.auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isAPI(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c := &caller{authorization: r.Header.Get("Authorization")}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			c.certName = r.TLS.VerifiedChains[0][0].Subject.CommonName
		}
		id, err := s.auth.authenticate(r)
		if err != nil && !(errors.Is(err, errNoCredentials) && r.URL.Path == registerNodePath) {
			s.audit.record(auditEntry{Event: auditAuthFailed, Source: identityOf(r.Context()), Procedure: r.URL.Path, Outcome: "refused", Detail: err.Error()})
			writeConnectError(w, http.StatusUnauthorized, "unauthenticated", err.Error())
			return
		}
		c.id = id
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
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
