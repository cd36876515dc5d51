package httpfence

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Defaults of KeysConfig.
const (
	DefaultKeysMaxAge     = 5 * time.Minute
	DefaultKeysMinRefresh = 10 * time.Second
	DefaultKeysTimeout    = 5 * time.Second
)

// maxKeysBody bounds the key set document read.
const maxKeysBody = 1 << 20

// KeysConfig configures a Keys.
type KeysConfig struct {
	// Client fetches the document. Nil means a client with Timeout.
	Client *http.Client
	// MaxAge is how long a loaded set is used before VerifyGrant loads it
	// again. Default DefaultKeysMaxAge (5m).
	MaxAge time.Duration
	// MinRefresh is the least time between two loads that a grant of an
	// unknown key id triggers, so that grants with made-up key ids cannot
	// make the resource fetch at will. Default DefaultKeysMinRefresh (10s).
	MinRefresh time.Duration
	// Timeout bounds one load. Default DefaultKeysTimeout (5s).
	Timeout time.Duration
	// Clock measures MaxAge and MinRefresh. Nil means fence.SystemClock.
	Clock fence.Clock
}

// Keys is a fence.GrantVerifier for guard.Signed that keeps a cluster's
// key set fresh from a member's GET /.well-known/fenced-keys: it loads the
// set again when it is older than MaxAge, and when a grant names a key id
// the set does not hold (a rotation since), at most once per MinRefresh.
// A load that fails keeps the set loaded before (the error is returned by
// Refresh only). The loads happen inside VerifyGrant, so a request may wait
// up to Timeout for one. Safe for concurrent use.
type Keys struct {
	url string
	cfg KeysConfig

	mu     sync.Mutex
	set    *fence.KeySet
	loaded time.Time // when set was loaded
	tried  time.Time // when a load was last tried
}

var _ fence.GrantVerifier = (*Keys)(nil)

// LoadKeys loads the key set at url (a member's
// http://HOST:PORT/.well-known/fenced-keys) and returns a Keys that keeps
// it fresh. It fails when the first load does.
func LoadKeys(ctx context.Context, url string, cfg KeysConfig) (*Keys, error) {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultKeysMaxAge
	}
	if cfg.MinRefresh <= 0 {
		cfg.MinRefresh = DefaultKeysMinRefresh
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultKeysTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.Timeout}
	}
	if cfg.Clock == nil {
		cfg.Clock = fence.SystemClock{}
	}
	k := &Keys{url: url, cfg: cfg}
	if err := k.Refresh(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Set returns the key set in use.
func (k *Keys) Set() *fence.KeySet {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.set
}

// Refresh loads the key set now; on failure the set in use is kept.
func (k *Keys) Refresh(ctx context.Context) error {
	k.mu.Lock()
	k.tried = k.cfg.Clock.Now()
	k.mu.Unlock()
	return k.load(ctx)
}

// load fetches the set and puts it in use.
func (k *Keys) load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.Timeout)
	defer cancel()
	set, err := k.fetch(ctx)
	if err != nil {
		return fmt.Errorf("httpfence: load keys from %s: %w", k.url, err)
	}
	k.mu.Lock()
	k.set, k.loaded = set, k.cfg.Clock.Now()
	k.mu.Unlock()
	return nil
}

func (k *Keys) fetch(ctx context.Context) (*fence.KeySet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %.200s", resp.Status, body)
	}
	return fence.LoadKeySet(body)
}

// VerifyGrant implements fence.GrantVerifier with the set in use, loading
// it again first when it is older than MaxAge, or when the grant's key id
// is unknown and no load was tried within MinRefresh.
func (k *Keys) VerifyGrant(encoded string) (fence.SignedGrant, error) {
	g, err := fence.ParseSignedGrant(encoded)
	if err != nil {
		return fence.SignedGrant{}, err
	}
	k.mu.Lock()
	set := k.set
	now := k.cfg.Clock.Now()
	due := now.Sub(k.tried) > k.cfg.MinRefresh && (now.Sub(k.loaded) > k.cfg.MaxAge || !set.Has(g.KeyID))
	if due {
		k.tried = now // this call loads; concurrent ones use the set in use
	}
	k.mu.Unlock()
	if due {
		k.load(context.Background()) // on failure the old set stays
		set = k.Set()
	}
	return set.VerifyGrant(encoded)
}
