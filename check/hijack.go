package check

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"time"

	mrand "math/rand/v2"

	"connectrpc.com/connect"

	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
	"github.com/fenced-dev/fenced/proto/fenced/v1/fencedv1connect"
)

// The session-ownership attack. Now and then a worker turns on another
// worker's session: it picks a victim, a session Status lists (and a lock
// it holds) or a guessed id near its own (ids are sequential), and tries
// to release the victim's lock, renew the victim's session and close it,
// each with a wrong secret, through the API itself
// (the SDK only ever acts for its own sessions). Each try is an OpHijack
// in the history; the ownership checker flags any that took effect. All
// workers share one identity in a secure run, so only the session secret
// stands in the way.

// hijackEvery is one in how many of a worker's session rounds it also
// attacks another session.
const hijackEvery = 2

// hijacker makes the attack's raw API calls.
type hijacker struct {
	locks    []fencedv1connect.LockServiceClient
	sessions []fencedv1connect.SessionServiceClient
}

// newHijacker connects to the endpoints the way the worker's SDK client
// does: cleartext HTTP/2, or TLS against caFile with the bearer token of
// tokenFile.
func newHijacker(endpoints []string, caFile, tokenFile string) (*hijacker, error) {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	scheme := "http://"
	var token string
	if caFile != "" {
		tc, err := client.LoadTLS(caFile, "", "")
		if err != nil {
			return nil, err
		}
		tc.ServerName = "localhost" // what every node certificate names
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig, token, scheme = tc, strings.TrimSpace(string(b)), "https://"
		tr.Protocols.SetHTTP2(true)
	} else {
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	hc := &http.Client{Transport: bearerTransport{token, tr}, Timeout: requestTimeout}
	h := &hijacker{}
	for _, ep := range endpoints {
		h.locks = append(h.locks, fencedv1connect.NewLockServiceClient(hc, scheme+ep))
		h.sessions = append(h.sessions, fencedv1connect.NewSessionServiceClient(hc, scheme+ep))
	}
	return h, nil
}

// bearerTransport adds the bearer token, when there is one.
type bearerTransport struct {
	token string
	next  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// wrongSecret is a well-formed secret of nobody's (128 random bits).
func wrongSecret() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// hijackOutcome classifies an attack call: OK when it took effect (took
// is true, and the call did not fail), Fail when it was refused or did
// nothing, Unknown when it may have done something (no answer).
func hijackOutcome(err error, took bool) string {
	switch {
	case err == nil && took:
		return history.OK
	case err == nil:
		return history.Fail
	}
	switch connect.CodeOf(err) {
	case connect.CodePermissionDenied, connect.CodeNotFound, connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeUnauthenticated:
		return history.Fail
	}
	return history.Unknown
}

// attack runs one attack by the worker whose own session is own: it picks
// a victim and tries release, renew and close for it with wrong secrets.
func (h *hijacker) attack(ctx context.Context, rec *recorder, rng *mrand.Rand, names []string, own uint64) {
	i := rng.IntN(len(h.locks))
	name := names[rng.IntN(len(names))]
	var victim uint64
	how := "guessed"
	if rng.IntN(4) != 0 {
		sctx, cancel := context.WithTimeout(ctx, requestTimeout)
		st, err := h.locks[i].Status(sctx, connect.NewRequest(&fencedv1.StatusRequest{PageSize: 100}))
		cancel()
		var others []*fencedv1.SessionInfo
		if err == nil {
			for _, s := range st.Msg.Sessions {
				if s.Session != own {
					others = append(others, s)
				}
			}
		}
		if len(others) > 0 {
			s := others[rng.IntN(len(others))]
			victim, how = s.Session, "listed"
			if len(s.Held) > 0 {
				name = s.Held[rng.IntN(len(s.Held))]
			}
		}
	}
	if victim == 0 {
		// Sequential ids: the sessions made just before this worker's own
		// are other workers' (or ended).
		victim = own - 1 - uint64(rng.IntN(4))
		if own <= 5 {
			victim = own + 1 + uint64(rng.IntN(4))
		}
	}
	try := func(call string, do func(ctx context.Context) (bool, string, error)) {
		op := history.Op{Kind: history.OpHijack, Target: call, Name: name, Session: victim, Value: how, Invoke: time.Now().UnixNano()}
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		took, result, err := do(cctx)
		cancel()
		op.Outcome, op.Result, op.Error = hijackOutcome(err, took), result, errText(err)
		rec.record(op)
	}
	try(history.HijackRelease, func(ctx context.Context) (bool, string, error) {
		r, err := h.locks[i].Release(ctx, connect.NewRequest(&fencedv1.ReleaseRequest{Name: name, Session: victim, Secret: wrongSecret()}))
		if err != nil {
			return false, "", err
		}
		return r.Msg.Result == fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED, releaseResultName(r.Msg.Result), nil
	})
	try(history.HijackRenew, func(ctx context.Context) (bool, string, error) {
		r, err := h.sessions[i].KeepAliveOnce(ctx, connect.NewRequest(&fencedv1.KeepAliveRequest{Session: victim, Secret: wrongSecret()}))
		if err != nil {
			return false, "", err
		}
		m := r.Msg
		return !m.Gone && !m.NotOwner && m.Error == "", "", nil
	})
	try(history.HijackClose, func(ctx context.Context) (bool, string, error) {
		r, err := h.sessions[i].CloseSession(ctx, connect.NewRequest(&fencedv1.CloseSessionRequest{Session: victim, Secret: wrongSecret()}))
		if err != nil {
			return false, "", err
		}
		return r.Msg.Closed, "", nil
	})
}

// releaseResultName is a release answer as the history records it.
func releaseResultName(r fencedv1.ReleaseResult) string {
	switch r {
	case fencedv1.ReleaseResult_RELEASE_RESULT_RELEASED:
		return "released"
	case fencedv1.ReleaseResult_RELEASE_RESULT_ALREADY_RELEASED:
		return "already_released"
	case fencedv1.ReleaseResult_RELEASE_RESULT_NOT_OWNED:
		return "not_owned"
	}
	return r.String()
}
