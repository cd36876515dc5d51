package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

// defaultEndpoint is used when neither --endpoints nor FENCED_ENDPOINTS is set.
const defaultEndpoint = "127.0.0.1:7700"

// clientFlags are the flags every client command takes.
type clientFlags struct {
	endpoints string
	json      bool
	timeout   time.Duration
	// TLS: the CA servers are verified against, and a client certificate.
	ca, cert, key string
	// tokenFile holds the bearer token (a server with --auth-file).
	tokenFile string
}

func (f *clientFlags) register(cmd *cobra.Command) {
	def := os.Getenv("FENCED_ENDPOINTS")
	if def == "" {
		def = defaultEndpoint
	}
	cmd.Flags().StringVar(&f.endpoints, "endpoints", def, "comma-separated server addresses (env FENCED_ENDPOINTS)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON (tokens and session ids as decimal strings)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to keep trying the endpoints (added to any --wait)")
	cmd.Flags().StringVar(&f.ca, "ca", os.Getenv("FENCED_CA"), "talk TLS, verifying servers against this CA (PEM) (env FENCED_CA)")
	cmd.Flags().StringVar(&f.cert, "cert", os.Getenv("FENCED_CERT"), "talk TLS, presenting this client certificate (PEM) (env FENCED_CERT)")
	cmd.Flags().StringVar(&f.key, "key", os.Getenv("FENCED_KEY"), "private key of --cert (PEM) (env FENCED_KEY)")
	cmd.Flags().StringVar(&f.tokenFile, "token-file", os.Getenv("FENCED_TOKEN_FILE"), "send the bearer token in this file (fenced auth token --token-out) (env FENCED_TOKEN_FILE; or the token itself in FENCED_AUTH_TOKEN)")
}

// bearerToken returns the token of --token-file, or of FENCED_AUTH_TOKEN
// when no file is given; "" when neither is.
func (f *clientFlags) bearerToken() (string, error) {
	if f.tokenFile == "" {
		return strings.TrimSpace(os.Getenv("FENCED_AUTH_TOKEN")), nil
	}
	b, err := os.ReadFile(f.tokenFile)
	if err != nil {
		return "", usageError("--token-file: %v", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", usageError("--token-file %s is empty", f.tokenFile)
	}
	return t, nil
}

// options returns the SDK options of the flags: a bearer token when one is
// given, TLS when --ca or --cert is. Its logs are discarded: the commands report errors themselves.
func (f *clientFlags) options() ([]client.Option, error) {
	opts := []client.Option{client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	token, err := f.bearerToken()
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, client.WithBearerToken(token))
	}
	if f.ca == "" && f.cert == "" && f.key == "" {
		return opts, nil
	}
	tc, err := client.LoadTLS(f.ca, f.cert, f.key)
	if err != nil {
		return nil, usageError("--ca/--cert/--key: %v", err)
	}
	return append(opts, client.WithTLS(tc)), nil
}

// context bounds a command's requests by --timeout plus extra (its --wait).
func (f *clientFlags) context(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.timeout+extra)
}

// endpointList returns the addresses in --endpoints.
func (f *clientFlags) endpointList() []string {
	var eps []string
	for _, ep := range strings.Split(f.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}

// maxTimeout is the longest --timeout.
const maxTimeout = 24 * time.Hour

// reachable checks the endpoints and --timeout, and waits (up to
// --timeout) until one endpoint accepts a connection.
func (f *clientFlags) reachable(ctx context.Context) ([]string, error) {
	eps, err := f.validEndpoints()
	if err != nil {
		return nil, err
	}
	return eps, f.reach(ctx, eps)
}

// reach waits (up to --timeout) until one of eps accepts a connection.
func (f *clientFlags) reach(ctx context.Context, eps []string) error {
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return reach(rctx, eps, f.timeout, noticeTo(os.Stderr))
}

// validEndpoints checks --endpoints and --timeout without dialing.
func (f *clientFlags) validEndpoints() ([]string, error) {
	eps := f.endpointList()
	if len(eps) == 0 {
		return nil, usageError("--endpoints is empty; want host:port[,host:port...]")
	}
	for _, ep := range eps {
		if err := validateEndpoint(ep); err != nil {
			return nil, err
		}
	}
	if f.timeout <= 0 || f.timeout > maxTimeout {
		// Bounded so that --timeout plus a --wait (at most fence.MaxWait)
		// cannot overflow.
		return nil, usageError("--timeout must be between 1ns and %v, got %v", maxTimeout, f.timeout)
	}
	return eps, nil
}

// client checks the endpoints, waits (up to --timeout) until one accepts
// a connection, and connects to them.
func (f *clientFlags) client(ctx context.Context) (*client.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	eps, err := f.reachable(ctx)
	if err != nil {
		return nil, err
	}
	c, err := client.New(eps, opts...)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return c, nil
}

// withClient connects, runs fn with a context bounded by --timeout, and
// closes the client. fn's error is returned as it is.
func (f *clientFlags) withClient(ctx context.Context, fn func(ctx context.Context, c *client.Client) error) error {
	c, err := f.client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := f.context(ctx, 0)
	defer cancel()
	return f.explain(fn(ctx, c))
}

// explain adds to an error that ended with --timeout which limit ran out.
func (f *clientFlags) explain(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("--timeout %v ran out: %w", f.timeout, err)
	}
	return err
}

// classify gives an error from the SDK its exit code: invalid arguments
// are usage errors (2), everything else is 1.
func classify(err error) error {
	if errors.Is(err, fence.ErrInvalidArgument) || errors.Is(err, fence.ErrInvalidToken) {
		return withExit(exitUsage, err)
	}
	return err
}

// grantJSON is the JSON form of a grant printed by acquire and revoke.
// Secret, the secret of the grant's session, is printed by acquire only.
type grantJSON struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Scope   string `json:"scope"`
	Token   string `json:"token"`
	Issuer  string `json:"issuer"`
	Session string `json:"session"`
	TTLMs   int64  `json:"ttl_ms"`
	Secret  string `json:"secret,omitempty"`
	// Signed is the signed grant, for an X-Fencing-Grant header.
	Signed string `json:"signed,omitempty"`
}

// printGrant prints g as one JSON object, with the session's secret when
// given, or one line of text without it.
func printGrant(w io.Writer, asJSON bool, g fence.Grant, secret string) error {
	if asJSON {
		return json.NewEncoder(w).Encode(grantJSON{
			Name: g.Name, Kind: string(g.Kind), Scope: g.Scope, Token: g.Token.String(), Issuer: g.Issuer,
			Session: fmt.Sprint(g.Session), TTLMs: g.TTL.Milliseconds(), Secret: secret, Signed: g.Signed,
		})
	}
	_, err := fmt.Fprintf(w, "%s: granted token %d (issuer %s, session %d, ttl %v)\n", shown(g.Name), g.Token, shown(g.Issuer), g.Session, g.TTL)
	return err
}

// Bounds of the clean-up a command does after its own work (closing a
// session, releasing a lock), which must never wait forever for a server
// that went away.
const (
	cleanupWait        = 2 * time.Second
	interruptedCleanup = 300 * time.Millisecond
)

// cleanupContext bounds a clean-up call made after the command's context
// cmdCtx may have ended: cleanupWait, or interruptedCleanup once the
// command was interrupted.
func cleanupContext(cmdCtx context.Context) (context.Context, context.CancelFunc) {
	d := cleanupWait
	if cmdCtx.Err() != nil {
		d = interruptedCleanup
	}
	return context.WithTimeout(context.WithoutCancel(cmdCtx), d)
}
