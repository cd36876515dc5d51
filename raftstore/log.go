package raftstore

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// levelTrace is the slog level of hclog's Trace, below slog.LevelDebug.
const levelTrace = slog.LevelDebug - 4

// hclogAdapter routes the hclog output of hashicorp/raft and raft-wal into a
// slog.Logger. The logger name (such as "raft.wal") becomes the attribute
// "logger"; key/value pairs pass through. The level is the slog handler's:
// SetLevel does nothing.
type hclogAdapter struct {
	base    *slog.Logger // without name and implied args
	name    string
	implied []any
	l       *slog.Logger // base with name and implied args
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// newHCLogger returns an hclog.Logger that writes to l under name.
func newHCLogger(l *slog.Logger, name string) *hclogAdapter {
	return newHCLoggerWith(l, name, nil)
}

func newHCLoggerWith(base *slog.Logger, name string, implied []any) *hclogAdapter {
	l := base
	if name != "" {
		l = l.With("logger", name)
	}
	if len(implied) > 0 {
		l = l.With(convertArgs(implied)...)
	}
	return &hclogAdapter{base: base, name: name, implied: implied, l: l}
}

// toSlogLevel maps an hclog level to slog; ok is false for hclog.Off.
func toSlogLevel(level hclog.Level) (lvl slog.Level, ok bool) {
	switch level {
	case hclog.Trace:
		return levelTrace, true
	case hclog.Debug:
		return slog.LevelDebug, true
	case hclog.Warn:
		return slog.LevelWarn, true
	case hclog.Error:
		return slog.LevelError, true
	case hclog.Off:
		return 0, false
	default: // Info, NoLevel
		return slog.LevelInfo, true
	}
}

// convertArgs renders hclog's formatting helpers, which slog would print as
// slices or bare numbers.
func convertArgs(args []any) []any {
	out := args
	copied := false
	for i, a := range args {
		var v any
		switch a := a.(type) {
		case hclog.Format:
			if len(a) == 0 {
				v = ""
			} else if f, ok := a[0].(string); ok {
				v = fmt.Sprintf(f, a[1:]...)
			} else {
				v = fmt.Sprint(a...)
			}
		case hclog.Hex:
			v = fmt.Sprintf("0x%x", int(a))
		case hclog.Octal:
			v = fmt.Sprintf("0%o", int(a))
		case hclog.Binary:
			v = fmt.Sprintf("0b%b", int(a))
		case hclog.Quote:
			v = fmt.Sprintf("%q", string(a))
		default:
			continue
		}
		if !copied {
			out = append([]any(nil), args...)
			copied = true
		}
		out[i] = v
	}
	return out
}

// Log implements hclog.Logger.
func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	lvl, ok := toSlogLevel(level)
	if !ok {
		return
	}
	ctx := context.Background()
	if !a.l.Enabled(ctx, lvl) {
		return
	}
	a.l.Log(ctx, lvl, msg, convertArgs(args)...)
}

// Trace implements hclog.Logger.
func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (a *hclogAdapter) Info(msg string, args ...any) { a.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (a *hclogAdapter) Warn(msg string, args ...any) { a.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	lvl, ok := toSlogLevel(level)
	return ok && a.l.Enabled(context.Background(), lvl)
}

// IsTrace implements hclog.Logger.
func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }

// IsDebug implements hclog.Logger.
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }

// IsInfo implements hclog.Logger.
func (a *hclogAdapter) IsInfo() bool { return a.enabled(hclog.Info) }

// IsWarn implements hclog.Logger.
func (a *hclogAdapter) IsWarn() bool { return a.enabled(hclog.Warn) }

// IsError implements hclog.Logger.
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

// ImpliedArgs implements hclog.Logger.
func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

// With implements hclog.Logger.
func (a *hclogAdapter) With(args ...any) hclog.Logger {
	implied := append(append([]any(nil), a.implied...), args...)
	return newHCLoggerWith(a.base, a.name, implied)
}

// Name implements hclog.Logger.
func (a *hclogAdapter) Name() string { return a.name }

// Named implements hclog.Logger.
func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return newHCLoggerWith(a.base, name, a.implied)
}

// ResetNamed implements hclog.Logger.
func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return newHCLoggerWith(a.base, name, a.implied)
}

// SetLevel implements hclog.Logger. It does nothing: the slog handler
// decides what is logged.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

// GetLevel implements hclog.Logger: the lowest level the handler logs.
func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, level := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(level) {
			return level
		}
	}
	return hclog.Off
}

// StandardLogger implements hclog.Logger. Lines are logged at
// opts.ForceLevel, or Info.
func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	lvl := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		if l, ok := toSlogLevel(opts.ForceLevel); ok {
			lvl = l
		} else {
			return log.New(io.Discard, "", 0)
		}
	}
	return slog.NewLogLogger(a.l.Handler(), lvl)
}

// StandardWriter implements hclog.Logger.
func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}
