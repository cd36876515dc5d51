package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/internal/namegroup"
	"github.com/fenced-dev/fenced/raftstore"
)

// Config configures a Server. Start from DefaultConfig; Validate explains
// every value Start would refuse.
type Config struct {
	// Raft configures the node: NodeID, DataDir, PeerListen and timings.
	// DataDir defaults to ./fenced-data and PeerListen to 127.0.0.1:7701.
	Raft raftstore.Config
	// Listen is the API address (gRPC, Connect JSON, /metrics, /healthz,
	// /readyz). Port 0 picks a free port (see Server.Addr). Default
	// 127.0.0.1:7700.
	Listen string
	// AdvertiseAddr is the API address other members forward requests to.
	// Default: the bound Listen address (right when Listen names a
	// specific host, as on loopback).
	AdvertiseAddr string
	// TLS, when it names a certificate and key, serves the API over TLS
	// (HTTP/2 or HTTP/1.1). With a CA file too, a client may present a
	// certificate, which must then verify against that CA. Members call
	// each other's APIs (forwarding, status probes) over TLS as well,
	// verifying the other's certificate against the CA and presenting
	// their own. Server.ReloadTLS reads the files again.
	TLS raftstore.TLSFiles
	// RequireClientCert makes the API's TLS mutual: a client must present
	// a certificate of TLS.CA in the handshake, or the connection is
	// refused before any HTTP (health checks and /metrics included). It
	// needs TLS with a CA. A certificate is an identity only through a
	// cert line of the AuthFile (AuthEntry.Cert).
	RequireClientCert bool
	// InsecureListenAny allows serving the API or the peer port without
	// TLS on an address other than loopback. Without it Validate refuses
	// that; with it Start logs a warning saying what is open.
	InsecureListenAny bool
	// TokenFloor makes the cluster issue only tokens above it. It only ever
	// raises the counter, so it is safe to pass on every start; it is meant
	// for a fresh cluster replacing one whose tokens may still be in flight.
	TokenFloor fence.Token
	// TokenReserveBlock is how many tokens a node reserves at a time: it
	// records the end of each block on its disk (DataDir/token-reservation,
	// fsynced) before it hands out a token in the block, so after any
	// damage to the log its counter restarts above every token it issued
	// (docs/design.md §2). A larger block means fewer such writes (one per
	// block, on every member) and a larger jump of the counter at each
	// leader change and restart. The leader's value applies to the whole
	// cluster. Default 65536 (a batch claim takes up to 32 tokens at once:
	// with 1000, 20,000 claims a second wrote and fsynced a reservation
	// 20 times a second inside the apply of every member); at most
	// 1048576.
	TokenReserveBlock uint64
	// ExpiryInterval is how often the leader looks for leases that ran out.
	// A session is expired at most this long after its TTL. Default 25ms.
	ExpiryInterval time.Duration
	// LockDelay is the lock delay of an acquire that does not ask for one
	// (docs/lock-delay.md): after the session holding the grant expires
	// or is revoked, the lock is granted to no one for this long. A
	// mitigation for resources that cannot check tokens, not a safety
	// mechanism. Default 0 (off); at most 1 minute.
	LockDelay time.Duration
	// MaxMessageBytes caps a request message. Default 64 KiB.
	MaxMessageBytes int
	// ProposeTimeout bounds one proposal when the caller sets no deadline.
	// Default 10s.
	ProposeTimeout time.Duration
	// Limits bounds what clients can make the server hold. Start from
	// DefaultLimits (DefaultConfig does); 0 turns a limit off.
	Limits Limits
	// AllowRevoke enables LockService.Revoke, an administrator's
	// force-revoke of a lock, on a server without AuthFile: while it is
	// on anyone who can reach the API may revoke any holder. With
	// AuthFile, Revoke needs the admin permission on the name instead and
	// AllowRevoke is not needed. Give every member the same setting (a
	// follower forwards the call to the leader, which decides).
	AllowRevoke bool
	// AuthFile, when set, names the auth file (see AuthEntry): every API
	// call must then carry "Authorization: Bearer TOKEN" of an identity in
	// it, and the identity's roles must grant the permission the call
	// needs on its name (docs/design.md §10). Server.ReloadAuth reads it
	// again. Without it the API is open to anyone who can reach it.
	AuthFile string
	// SignGrants makes the leader sign every grant it hands a holder
	// with the cluster's Ed25519 key (the Grant's signed field,
	// docs/design.md §10), so resources behind guard.Signed can verify its
	// scope offline. It costs one signature per grant on the leader.
	// Default true (DefaultConfig); keys are kept and published either way.
	SignGrants bool
	// SignBatchMax is the most grants the leader signs with one signature
	// (fence.SignGrantBatch): the grants that wait for a signature while
	// one is being made are signed together, over the root of their batch,
	// and carry its proof ("fg2." grants). 1 signs every grant alone
	// ("fg1."), for verifiers that only know that form; 0 is
	// DefaultSignBatchMax; at most fence.MaxGrantBatch.
	SignBatchMax int
	// Audit configures the audit log of authentication failures, denials
	// and admin actions; the zero value keeps none.
	Audit AuditConfig
	// KVScopes map kv key prefixes to the scope whose grants may write them
	// (--kv-scope PREFIX=SCOPE); without a mapping a key is its own scope.
	// The leader's mappings decide: give every member the same. Default
	// none.
	KVScopes []KVScope
	// Queue bounds the work queue (QueueConfig); the zero value takes the
	// defaults.
	Queue QueueConfig
	// Metrics groups the names of the per-prefix metrics
	// (fenced_prefix_*, docs/observability.md); DefaultConfig groups by
	// the first "/"-separated segment, at most 100 groups.
	Metrics MetricsConfig
	// UIMaxItems caps how many objects of each primitive, and sessions,
	// one dashboard view shows (the rest: narrow the prefix). Default 500;
	// 1 to 10000.
	UIMaxItems int
	// LogGrants logs every grant, release and expiry at info level as a
	// structured event (msg "grant", "release", "expiry"; --log-grants).
	// Default off: they are logged at debug level.
	LogGrants bool
	// Logger receives structured logs. Nil means slog.Default().
	Logger *slog.Logger
	// Test holds the fault harness's hooks; the zero value is off. Its
	// faults exist only in a test build (build tag fencedfaults).
	Test TestKnobs
}

// DefaultConfig returns the embedded default: a single node bootstrapped in
// ./fenced-data, API on 127.0.0.1:7700, peers on 127.0.0.1:7701.
func DefaultConfig() Config {
	rc := raftstore.DefaultConfig()
	rc.Bootstrap = true
	return Config{
		Raft:            rc,
		Listen:          "127.0.0.1:7700",
		ExpiryInterval:  25 * time.Millisecond,
		MaxMessageBytes: 64 << 10,
		ProposeTimeout:  10 * time.Second,
		Limits:          DefaultLimits(),

		TokenReserveBlock: 65536,
		SignGrants:        true,
		SignBatchMax:      DefaultSignBatchMax,
		UIMaxItems:        500,
		Metrics:           MetricsConfig{PrefixDepth: namegroup.DefaultDepth, MaxGroups: namegroup.DefaultMaxGroups},
	}
}

// MetricsConfig says how the per-prefix metrics group lock names: by
// Groups when set (the longest that a name starts with, "_other" for the
// rest), otherwise by the first PrefixDepth "/"-separated segments (0: one
// group for every name). At most MaxGroups distinct groups are counted;
// names beyond them are counted under "_overflow", so the series stay
// bounded however many names clients use.
type MetricsConfig struct {
	PrefixDepth int
	Groups      []string
	MaxGroups   int
}

func (c MetricsConfig) grouping() namegroup.Config {
	return namegroup.Config{Groups: c.Groups, Depth: c.PrefixDepth, MaxGroups: c.MaxGroups}
}

// DefaultSignBatchMax is Config.SignBatchMax's default.
const DefaultSignBatchMax = 64

// maxTokenReserveBlock is the largest TokenReserveBlock (the state
// machine's limit).
const maxTokenReserveBlock = 1 << 20

// Validate reports every value of c that Start would refuse, each with what
// is allowed instead.
func (c Config) Validate() error {
	var errs []error
	if err := c.Raft.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q is not host:port: %v", c.Listen, err))
	}
	if c.AdvertiseAddr != "" {
		if err := fence.ValidateNodeAddr("advertise address", c.AdvertiseAddr); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.TLS.Check("", false); err != nil {
		errs = append(errs, err)
	}
	if c.RequireClientCert && (c.TLS.Cert == "" || c.TLS.CA == "") {
		errs = append(errs, errors.New("require client certificates: the API needs TLS with a CA to verify them against (--cert, --key and --ca)"))
	}
	if c.Audit.MaxBytes < 0 || c.Audit.Keep < 0 {
		errs = append(errs, fmt.Errorf("audit log: rotation size %d and files kept %d must not be negative", c.Audit.MaxBytes, c.Audit.Keep))
	}
	if !c.InsecureListenAny {
		if !c.TLS.Enabled() && !isLoopback(c.Listen) {
			errs = append(errs, fmt.Errorf("listen address %s is not loopback and the API has no TLS: anyone who reaches it could call every API; give a certificate and key (fenced certs issue) or allow it in the clear with --insecure-listen-any", c.Listen))
		}
		if !c.Raft.PeerTLS.Enabled() && !isLoopback(c.Raft.PeerListen) {
			errs = append(errs, fmt.Errorf("peer listen address %s is not loopback and the peer port has no TLS: a host that can send from a member's address could forge Raft messages; give a peer certificate, key and CA (fenced certs issue) or allow it in the clear with --insecure-listen-any", c.Raft.PeerListen))
		}
	}
	if c.TokenFloor > fence.MaxToken {
		errs = append(errs, fmt.Errorf("token floor %d is above the maximum token %d", uint64(c.TokenFloor), uint64(fence.MaxToken)))
	}
	if c.ExpiryInterval < time.Millisecond || c.ExpiryInterval > time.Second {
		errs = append(errs, fmt.Errorf("expiry interval %v is out of range; want 1ms to 1s", c.ExpiryInterval))
	}
	if err := validateLockDelayConfig(c.LockDelay); err != nil {
		errs = append(errs, err)
	}
	if c.MaxMessageBytes < 1024 {
		errs = append(errs, fmt.Errorf("max message bytes %d is too small; want at least 1024", c.MaxMessageBytes))
	}
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.Queue.validate()...)
	if err := validateKVScopes(c.KVScopes); err != nil {
		errs = append(errs, err)
	}
	if c.UIMaxItems < 1 || c.UIMaxItems > 10000 {
		errs = append(errs, fmt.Errorf("ui max items %d is out of range; want 1 to 10000", c.UIMaxItems))
	}
	if err := c.Metrics.grouping().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ProposeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("propose timeout %v must be positive", c.ProposeTimeout))
	}
	if c.TokenReserveBlock < 1 || c.TokenReserveBlock > maxTokenReserveBlock {
		errs = append(errs, fmt.Errorf("token reserve block %d is out of range; want 1 to %d", c.TokenReserveBlock, maxTokenReserveBlock))
	}
	if c.SignBatchMax < 0 || c.SignBatchMax > fence.MaxGrantBatch {
		errs = append(errs, fmt.Errorf("sign batch max %d is out of range; want 1 to %d (0: %d)", c.SignBatchMax, fence.MaxGrantBatch, DefaultSignBatchMax))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("server: invalid config: %w", errors.Join(errs...))
}

// isLoopback reports whether addr (host:port) names a loopback host:
// "localhost" or a loopback IP. An empty host or a wildcard listens on
// every interface and is not loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// warnInsecure logs what this server serves in the clear beyond loopback
// (allowed by InsecureListenAny).
func (c Config) warnInsecure(log *slog.Logger) {
	if !c.TLS.Enabled() && !isLoopback(c.Listen) {
		log.Warn("API served without TLS beyond loopback (--insecure-listen-any): anyone who reaches this address can call every API, cluster changes included, and read what it sends", "listen", c.Listen)
	}
	if !c.Raft.PeerTLS.Enabled() && !isLoopback(c.Raft.PeerListen) {
		log.Warn("Raft peer port served without TLS beyond loopback (--insecure-listen-any): non-members are refused by source IP and the sender named in each RPC, but a host that can send from a member's IP and names that member is believed", "peer_listen", c.Raft.PeerListen)
	}
}
