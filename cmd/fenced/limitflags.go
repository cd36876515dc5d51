package main

import (
	"strconv"

	"github.com/spf13/pflag"

	"github.com/fenced-dev/fenced/server"
)

// addLimitFlags registers the flags of server.Limits; their defaults are
// server.DefaultLimits. 0 turns a limit off.
func addLimitFlags(f *pflag.FlagSet, l *server.Limits) {
	f.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", l.ReadHeaderTimeout, "close a connection whose request headers take longer than this")
	f.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "close an API connection (HTTP/1, HTTP/2, or native without a stream) with no request in flight for this long")
	f.DurationVar(&l.BodyTimeout, "body-timeout", l.BodyTimeout, "cut a unary request whose body takes longer than this to arrive (streams and waits are not cut)")
	f.DurationVar(&l.PingInterval, "ping-interval", l.PingInterval, "ping an HTTP/2 connection silent for this long (0: never)")
	f.DurationVar(&l.PingTimeout, "ping-timeout", l.PingTimeout, "close an HTTP/2 connection whose ping is not answered within this")
	f.IntVar(&l.MaxConns, "max-conns", l.MaxConns, "most open API connections; more are closed at once (0: no cap)")
	f.IntVar(&l.MaxConnsPerSource, "max-conns-per-source", l.MaxConnsPerSource, "most open API connections from one source address (0: no cap)")
	f.Uint32Var(&l.MaxSessionsPerSource, "max-sessions-per-source", l.MaxSessionsPerSource, "most live sessions per source, per-grant sessions included (0: no limit)")
	f.Uint32Var(&l.MaxGrantsPerSource, "max-grants-per-source", l.MaxGrantsPerSource, "most grants held by the sessions of one source (0: no limit)")
	f.Uint32Var(&l.MaxWaitersPerSource, "max-waiters-per-source", l.MaxWaitersPerSource, "most queued acquires of the sessions of one source (0: no limit)")
	f.Float64Var(&l.SessionRate, "session-rate", l.SessionRate, "sessions one source may create per second, on average (0: no limit)")
	f.IntVar(&l.SessionBurst, "session-burst", l.SessionBurst, "sessions one source may create at once, above --session-rate")
	f.Uint64Var(&l.MaxKVKeys, "max-kv-keys", l.MaxKVKeys, "most keys in the fenced kv, deleted ones included (0: no limit)")
	f.Uint64Var(&l.MaxKVBytes, "max-kv-bytes", l.MaxKVBytes, "most bytes of keys and values in the fenced kv (0: no limit)")
	f.IntVar(&l.MaxElectionValueBytes, "max-election-value-bytes", l.MaxElectionValueBytes, "largest value of an election's candidate or leader (0: the most, 65536)")
	f.Uint64Var(&l.MaxLatchCount, "max-latch-count", l.MaxLatchCount, "largest count a latch generation may start with (0: the state machine's cap, 1000000)")
	f.Uint32Var(&l.MaxLimiterQueue, "max-limiter-queue", l.MaxLimiterQueue, "largest queue of waiting takes a rate limiter may be configured with (0: the state machine's cap, 10000)")
	f.Var(offFlag{&l.DisableNative}, "native", "serve the Go SDK's native protocol on the API port beside HTTP (false: the SDK uses Connect)")
	f.Lookup("native").NoOptDefVal = "true"
	f.IntVar(&l.NativeMaxFrameBytes, "native-max-frame-bytes", l.NativeMaxFrameBytes, "largest native-protocol frame; a larger one closes its connection (0: the Pipeline's message limit, 1 MiB plus --max-message-bytes)")
	f.IntVar(&l.NativeMaxStreams, "native-max-streams", l.NativeMaxStreams, "most open streams on one native-protocol connection (0: no cap)")
}

// offFlag is a boolean flag that sets *off to its negation.
type offFlag struct{ off *bool }

func (f offFlag) String() string {
	if f.off == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.off)
}

func (f offFlag) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*f.off = !on
	return nil
}

func (offFlag) Type() string { return "bool" }
