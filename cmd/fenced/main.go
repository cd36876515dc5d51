// Command fenced is the fenced server, its command-line client, its fault
// harness and its benchmark.
//
//	fenced serve                          run a server (single node, data in ./fenced-data; --config FILE, FENCED_SERVE_*)
//	fenced acquire NAME --ttl 30s         take a lock with a per-grant TTL, print the grant
//	fenced release NAME --session ID --secret S   release it (the secret is in acquire --json)
//	fenced renew NAME --session ID --secret S [--ttl D]   renew a grant of fenced acquire (same token)
//	fenced revoke NAME --reason TEXT      force-revoke: end the session holding NAME
//	fenced lock NAME -- CMD ARGS...       run CMD while holding the lock
//	fenced elect NAME --value V -- CMD    run CMD only while leading the election NAME
//	fenced observe NAME [--json]          print the election's leader and every change of it
//	fenced rwlock read NAME -- CMD ARGS...    run CMD under a shared read grant of a read/write lock
//	fenced rwlock write NAME -- CMD ARGS...   run CMD under its exclusive write grant
//	fenced rwlock describe NAME           readers, writer, waiters in order with their modes
//	fenced status [NAME]                  holders, tokens, waiters, sessions
//	fenced semaphore acquire NAME --capacity N [--permits K]   take permits, print them
//	fenced semaphore release NAME --session ID --secret S      release a session's permits
//	fenced semaphore describe NAME        capacity, holders (slots, tokens), waiters
//	fenced semaphore run NAME --capacity N -- CMD ARGS...      run CMD while holding permits
//	fenced kv put KEY [VALUE] --token T   write the fenced key-value store under a token
//	fenced kv get KEY                     read a key (value, version, token)
//	fenced kv del KEY --token T           delete a key under a token
//	fenced queue push QUEUE [PAYLOAD]      enqueue an item (payload from stdin when omitted)
//	fenced queue claim QUEUE              claim the oldest available item, print it and its claim token
//	fenced queue ack QUEUE ITEM --token T   report a claimed item done
//	fenced queue nack QUEUE ITEM --token T  give a claimed item back to the queue
//	fenced queue stats QUEUE              a queue's counts (--items N lists items)
//	fenced work QUEUE -- CMD ARGS...      run CMD per claimed item: ack on exit 0, nack otherwise
//	fenced cluster status                 members, roles, leader, term, per-node lag
//	fenced cluster add ID PEER-ADDR       add a voter
//	fenced cluster remove ID              remove a member
//	fenced cluster transfer-leader [ID]   hand leadership to ID, or to any other member
//	fenced latch create NAME --count N    start a latch generation (create or reset)
//	fenced latch count-down NAME          count a latch generation down
//	fenced latch wait NAME                wait until a latch generation reaches zero
//	fenced latch join NAME                a latch's current generation and count
//	fenced limiter config NAME --limit N  create or change a rate limiter
//	fenced limiter take NAME              take permits (granted, or when to retry)
//	fenced limiter describe NAME          a rate limiter's configuration and free permits
//	fenced check                          run the fault harness against a real cluster
//	fenced bench                          measure lock throughput and latency
//	fenced certs init                     create a CA in ./fenced-certs
//	fenced certs issue --node ID          issue a node (or --client NAME) certificate
//	fenced auth token --name N --role P=PERMS --token-out F   create a bearer token for --auth-file
//	fenced auth cert --name N --cert F --role P=PERMS       print the --auth-file line of a client certificate
//	fenced keys list                      the cluster's public grant-signing keys
//	fenced keys rotate --reason TEXT      sign new grants with a new key (admin)
//	fenced snapshot save FILE             save a consistent, checksummed backup of the state (admin)
//	fenced snapshot inspect FILE          check a backup and print its issuer, last token, lineage
//	fenced snapshot restore FILE --data-dir DIR --token-floor N   build a new cluster from a backup (offline, new issuer epoch)
//	fenced snapshot lineage               the issuer and the restores it descends from
//	fenced version                        release, commit, Go version, replicated format versions
//	fenced man --dir DIR                  write a man page for every command into DIR
//
// "fenced completion bash|zsh|fish|powershell" prints a shell completion
// script. "fenced rwlock MODE" with any other MODE than read, write or
// describe is refused (exit 2).
//
// Exit codes: 0 success, 1 error, 2 usage, 3 not granted (or elected) in
// time, 4 lock, grant or leadership lost while CMD ran (fenced lock, fenced
// rwlock read|write, fenced elect); fenced kv also 3 key not found, 5 stale
// token, 6 version mismatch, 7 scope mismatch (the token is not a live
// grant's for the key: docs/scopes.md); fenced queue claim 3 no item in
// time, ack and nack 5 stale claim token (docs/queue.md); fenced latch
// also 3 wait ran out, 5 generation replaced; a limiter take 3 not granted.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit codes scripts can rely on.
const (
	exitOK         = 0
	exitError      = 1
	exitUsage      = 2
	exitNotGranted = 3
	exitLockLost   = 4
	// exitInterrupted is the shell's code for a command ended by SIGINT.
	exitInterrupted = 130
)

// exitCodeError carries an exit code out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitCodeError) Unwrap() error { return e.err }

// withExit attaches an exit code to err.
func withExit(code int, err error) error { return &exitCodeError{code: code, err: err} }

// usageError reports bad flags or arguments (exit 2).
func usageError(format string, args ...any) error {
	return withExit(exitUsage, fmt.Errorf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !cleansUpItself(os.Args[1:]) {
		go exitAfterInterrupt(ctx)
	}
	os.Exit(run(ctx, os.Args[1:]))
}

// interruptGrace is how long a command has, after SIGINT or SIGTERM, to
// end on its own before the process exits anyway.
const interruptGrace = 750 * time.Millisecond

// exitAfterInterrupt ends the process interruptGrace after ctx ends (a
// signal), for a command still waiting on a server that went away: what
// it leaves on a server (a session, a queued acquire) ends by its TTL.
func exitAfterInterrupt(ctx context.Context) {
	<-ctx.Done()
	time.Sleep(interruptGrace)
	fmt.Fprintln(os.Stderr, "fenced: interrupted")
	os.Exit(exitInterrupted)
}

// cleansUpItself reports whether the command line runs a command that
// handles SIGINT and SIGTERM itself and must be left to finish: the
// server's graceful shutdown, the commands that run CMD under a grant
// (fenced lock, rwlock read|write, elect, semaphore run: CMD gets the
// signal and its status is theirs), fenced work (it ends its current
// item), the harness (it stops its cluster) and bench (it prints what it
// measured, with bounded clean-up).
func cleansUpItself(args []string) bool {
	c, _, err := newRootCommand().Find(args)
	if err != nil || c == nil {
		return false
	}
	for ; c != nil && c.HasParent(); c = c.Parent() {
		switch strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ") {
		case "serve", "lock", "rwlock read", "rwlock write", "elect", "semaphore run", "work", "check", "bench":
			return true
		}
	}
	return false
}

// run executes the command line and returns the process exit code.
func run(ctx context.Context, args []string) int {
	cmd := newRootCommand()
	cmd.SetArgs(args)
	at, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		if ec.err != nil {
			fmt.Fprintln(os.Stderr, "fenced:", ec.err)
		}
		return ec.code
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Ctrl-C or SIGTERM: the cancellation is ours, not an error.
		fmt.Fprintln(os.Stderr, "fenced: interrupted")
		return exitInterrupted
	}
	fmt.Fprintln(os.Stderr, "fenced:", err)
	if isUsage(at, err) {
		return exitUsage
	}
	return exitError
}
