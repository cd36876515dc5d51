package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// Signed grants (docs/design.md §10). The cluster's Ed25519 keys live in
// the replicated state (fsm/keys.go); the first leader creates one as it
// takes over, an admin rotates them (KeyService.RotateKeys, `fenced keys
// rotate`), and every member publishes the public keys from its own state
// at WellKnownKeysPath. The leader signs each grant as it hands it to its
// holder: a handler builds the response's grant with Server.handOut, never
// with grantProto, which is for grants shown to others.

// WellKnownKeysPath is where every member serves the cluster's public
// signing keys as JSON (fence.KeySet's MarshalJSON, read by
// fence.LoadKeySet), without authentication, from its own state: a member
// that lags may not list a key rotated in a moment ago.
const WellKnownKeysPath = "/.well-known/fenced-keys"

// maxRotateReasonLen bounds the reason of a rotation (it is audited).
const maxRotateReasonLen = 1024

// handOut returns the API form of g as handed to its holder: with
// Config.SignGrants, signed with the cluster's current key over issuer,
// kind, scope, token and issued_at. Every primitive's handler calls it for
// the grant of the response that gives a grant to its holder (Acquire,
// pipelined acquires, pushed waiters: they all return through it), and
// nothing else: a grant shown to another caller (Describe, Verify, Revoke)
// must not carry a signature its viewer could present.
func (s *Server) handOut(g fence.Grant) *fencedv1.Grant {
	out := grantProto(g)
	if out == nil || !s.cfg.SignGrants {
		return out
	}
	out.Signed = g.Signed // signed with the other grants of its entry (presignGrants)
	if out.Signed == "" {
		out.Signed = s.signGrant(g)
	}
	return out
}

// signGrant returns the wire form of g signed with the current key, or ""
// when the state has no key yet (a leader creates one before it serves):
// alone, or with the grants that wait for a signature at the same time
// (grantBatcher).
func (s *Server) signGrant(g fence.Grant) string {
	id, signer, ok := s.currentSigner()
	if !ok {
		return ""
	}
	wire, err := s.grantBatch.signGrant(signedOf(g), id, signer)
	if err != nil {
		s.log.Error("sign grant", "name", g.Name, "token", g.Token, "err", err)
		return ""
	}
	return wire
}

// currentSigner returns the id of the cluster's current signing key and
// its signer; false when the state has no key yet or the key cannot sign
// (logged).
func (s *Server) currentSigner() (string, *grantSigner, bool) {
	var id string
	var key ed25519.PrivateKey
	var ok bool
	s.sm.read(func(m *fsm.Machine) { id, key, ok = m.SigningKey() })
	if !ok {
		return "", nil, false
	}
	signer, err := s.signers.of(key)
	if err != nil {
		s.log.Error("sign grants", "key", id, "err", err)
		return "", nil, false
	}
	return id, signer, true
}

// signedOf is what a signature of grant g covers: issuer, kind, scope,
// token and issued_at.
func signedOf(g fence.Grant) fence.SignedGrant {
	return fence.SignedGrant{Issuer: g.Issuer, Kind: g.Kind, Scope: g.Scope, Token: g.Token, IssuedAt: g.IssuedAt}
}

// bootstrapKey creates the cluster's first signing key when the state has
// none; a state that has one is left alone (RotateKeys.bootstrap).
func (s *Server) bootstrapKey(ctx context.Context) error {
	var has bool
	s.sm.read(func(m *fsm.Machine) { _, _, has = m.SigningKey() })
	if has {
		return nil
	}
	_, err := s.propose(ctx, &statev1.Command{Op: &statev1.Command_RotateKeys{RotateKeys: newRotation(fsm.DefaultKeysKept, true)}})
	return err
}

// newRotation returns a RotateKeys with a new random seed, stamped now.
func newRotation(keep uint32, bootstrap bool) *statev1.RotateKeys {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	return &statev1.RotateKeys{Seed: seed, CreatedAtUnixMs: time.Now().UnixMilli(), Keep: keep, Bootstrap: bootstrap}
}

// keySet returns this member's view of the cluster's public keys.
func (s *Server) keySet() (*fence.KeySet, error) {
	var issuer string
	var keys []fence.PublicKey
	s.sm.read(func(m *fsm.Machine) { issuer, keys = m.Issuer(), m.SigningKeys() })
	if issuer == "" {
		return nil, fmt.Errorf("%w: no leader has initialised the cluster yet", errUnavailable)
	}
	current := ""
	if len(keys) > 0 {
		current = keys[len(keys)-1].ID
	}
	return fence.NewKeySet(issuer, current, keys)
}

// wellKnownKeys serves WellKnownKeysPath.
func (s *Server) wellKnownKeys(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: GET "+WellKnownKeysPath, http.StatusMethodNotAllowed)
		return
	}
	ks, err := s.keySet()
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	body, err := json.Marshal(ks)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(append(body, '\n'))
}

// keepOf returns how many keys a rotation keeps: its keep, 0 meaning
// fsm.DefaultKeysKept.
func keepOf(m *fencedv1.RotateKeysRequest) uint32 {
	if m.Keep == 0 {
		return fsm.DefaultKeysKept
	}
	return m.Keep
}

// keyService implements the KeyService API.
type keyService struct{ s *Server }

var _ fencedv1connect.KeyServiceHandler = (*keyService)(nil)

func publicKeyProto(k fence.PublicKey) *fencedv1.PublicSigningKey {
	return &fencedv1.PublicSigningKey{Id: k.ID, CreatedAtUnixMs: k.CreatedAt.UnixMilli(), PublicKey: k.Key}
}

// ListKeys implements KeyServiceHandler.
func (h *keyService) ListKeys(ctx context.Context, req *connect.Request[fencedv1.ListKeysRequest]) (*connect.Response[fencedv1.ListKeysResponse], error) {
	ks, err := h.s.keySet()
	if err != nil {
		return nil, toConnect(err)
	}
	resp := &fencedv1.ListKeysResponse{Issuer: ks.Issuer(), Current: ks.Current()}
	for _, k := range ks.Keys() { // oldest first
		resp.Keys = append(resp.Keys, publicKeyProto(k))
	}
	return connect.NewResponse(resp), nil
}

// RotateKeys implements KeyServiceHandler: a new key signs every grant
// from the moment it is applied; the newest keep keys stay published.
// The interceptor checked admin and audits the call.
func (h *keyService) RotateKeys(ctx context.Context, req *connect.Request[fencedv1.RotateKeysRequest]) (*connect.Response[fencedv1.RotateKeysResponse], error) {
	m := req.Msg
	keep := keepOf(m)
	if keep > fsm.MaxKeysKept {
		return nil, toConnect(fmt.Errorf("%w: keep %d keys is more than %d", fence.ErrInvalidArgument, keep, fsm.MaxKeysKept))
	}
	if len(m.Reason) > maxRotateReasonLen {
		return nil, toConnect(fmt.Errorf("%w: reason is %d bytes, longer than %d", fence.ErrInvalidArgument, len(m.Reason), maxRotateReasonLen))
	}
	var before []fence.PublicKey
	h.s.sm.read(func(fm *fsm.Machine) { before = fm.SigningKeys() })
	rot := newRotation(keep, false)
	if _, err := h.s.propose(ctx, &statev1.Command{Op: &statev1.Command_RotateKeys{RotateKeys: rot}}); err != nil {
		return nil, toConnect(err)
	}
	var after []fence.PublicKey
	h.s.sm.read(func(fm *fsm.Machine) { after = fm.SigningKeys() })
	id := fence.KeyIDOf(ed25519.NewKeyFromSeed(rot.Seed).Public().(ed25519.PublicKey))
	resp := &fencedv1.RotateKeysResponse{}
	for _, k := range after {
		if k.ID == id {
			resp.Key = publicKeyProto(k)
		}
	}
	for _, k := range before {
		if !slices.ContainsFunc(after, func(a fence.PublicKey) bool { return a.ID == k.ID }) {
			resp.Dropped = append(resp.Dropped, k.ID)
		}
	}
	h.s.log.Warn("signing keys rotated", "key", id, "keep", keep, "dropped", resp.Dropped, "reason", m.Reason)
	return connect.NewResponse(resp), nil
}
