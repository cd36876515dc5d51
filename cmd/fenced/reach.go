package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// noticeTo returns where a command's notices go: stderr when it is a
// terminal, nowhere otherwise, so that a script's output stays its own.
func noticeTo(stderr *os.File) io.Writer {
	if fi, err := stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return stderr
	}
	return io.Discard
}

// validateEndpoint checks one --endpoints entry before anything is
// dialed: host:port (or an http(s) URL with a host) with a port 1–65535.
func validateEndpoint(ep string) error {
	hostport := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return usageError("--endpoints: %q is not host:port or an http(s) URL", ep)
		}
		if u.Port() == "" {
			return nil // the scheme's port
		}
		hostport = u.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return usageError("--endpoints: %q is not host:port (a port is required, e.g. 127.0.0.1:7700)", ep)
	}
	if host == "" || strings.ContainsAny(host, " \t") {
		return usageError("--endpoints: %q has no valid host; want host:port, e.g. 127.0.0.1:7700", ep)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return usageError("--endpoints: %q: port %q is not a number from 1 to 65535; want host:port", ep, port)
	}
	return nil
}

// dialAddr is the TCP address an endpoint is reached at.
func dialAddr(ep string) string {
	if !strings.Contains(ep, "://") {
		return ep
	}
	u, _ := url.Parse(ep)
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// noticeAfter is how long a command waits for an endpoint before it says
// on stderr that it is retrying.
const noticeAfter = time.Second

// reach waits until at least one endpoint accepts a TCP connection, so
// that a command fails with the real reason when none can: a host that
// does not resolve is reported at once; a refused or timed-out
// connection is retried until ctx ends (--timeout), with one notice on
// stderr after noticeAfter. The error names every endpoint and its last
// error.
func reach(ctx context.Context, eps []string, timeout time.Duration, stderr io.Writer) error {
	start := time.Now()
	noticed := false
	backoff := 50 * time.Millisecond
	for {
		errs := make([]error, len(eps))
		permanent := 0
		type res struct {
			i   int
			err error
		}
		ch := make(chan res, len(eps))
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		for i, ep := range eps {
			go func() {
				var d net.Dialer
				c, err := d.DialContext(dctx, "tcp", dialAddr(ep))
				if err == nil {
					c.Close()
				}
				ch <- res{i, err}
			}()
		}
		ok := false
		for range eps {
			r := <-ch
			if r.err == nil {
				ok = true
				continue
			}
			errs[r.i] = r.err
			var dnsErr *net.DNSError
			if errors.As(r.err, &dnsErr) && dnsErr.IsNotFound {
				permanent++
			}
		}
		cancel()
		if ok {
			return nil
		}
		tried := describe(eps, errs)
		if permanent == len(eps) {
			return fmt.Errorf("cannot reach any endpoint: %s", tried)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cannot reach any endpoint within %v (--timeout): %s", timeout, tried)
		}
		if !noticed && time.Since(start) >= noticeAfter {
			fmt.Fprintf(stderr, "fenced: cannot reach %s; retrying for up to %v (--timeout)\n", tried, timeout)
			noticed = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot reach any endpoint within %v (--timeout): %s", timeout, tried)
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// describe lists each endpoint with its error, without the dialer's
// repetition of the address.
func describe(eps []string, errs []error) string {
	parts := make([]string, len(eps))
	for i, ep := range eps {
		msg := errs[i].Error()
		var op *net.OpError
		if errors.As(errs[i], &op) && op.Err != nil {
			msg = op.Err.Error()
		}
		var dnsErr *net.DNSError
		if errors.As(errs[i], &dnsErr) {
			msg = "lookup " + dnsErr.Name + ": " + dnsErr.Err
		}
		parts[i] = ep + " (" + msg + ")"
	}
	return strings.Join(parts, ", ")
}
