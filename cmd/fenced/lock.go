package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/client"
)

func newLockCommand() *cobra.Command {
	var cf clientFlags
	var ttl, wait, grace time.Duration
	var delay lockDelayFlag
	cmd := &cobra.Command{
		Use:   "lock NAME [flags] -- CMD [ARGS...]",
		Short: "Run CMD while holding a lock",
		Long: `Take the lock (waiting up to --wait), keep it alive, and run CMD with
FENCED_TOKEN, FENCED_LOCK, FENCED_KIND ("lock") and FENCED_ISSUER in its
environment, and FENCED_SESSION and FENCED_SESSION_SECRET, the session
holding the lock and its secret (with which CMD may release it early: "fenced release NAME").
When CMD exits the lock is released and fenced exits with CMD's status.

When the lock can no longer be trusted (renewals unconfirmed until the
session's local validity ran out, which, with clocks running at about
the same rate, is before the server can have expired it; or the server
says the session is gone), fenced sends SIGTERM
to CMD's process group, SIGKILL after --grace, says on stderr which lock
and token were lost, and exits 4. CMD should send FENCED_TOKEN with every
protected write: a paused CMD cannot be stopped in time, the token check at
the resource is what rejects its late writes.

Exit status: CMD's status; 3 not granted within --wait; 4 lock lost;
2 usage; 1 other error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageError("usage: fenced lock NAME [flags] -- CMD [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := delay.options()
			if err != nil {
				return err
			}
			return runUnder(cmd, &cf, args[0], ttl, wait, grace, args[1:], takeMutex(args[0], opts...))
		},
	}
	runFlags(cmd, &cf, &ttl, &wait, &grace, "lock")
	delay.register(cmd)
	return cmd
}

// runUnder runs argv under the grant take takes of name, with the flags
// of fenced lock: the exit codes are that command's.
func runUnder(cmd *cobra.Command, cf *clientFlags, name string, ttl, wait, grace time.Duration, argv []string, take takeFunc) error {
	if err := errors.Join(fence.ValidateName(name), fence.ValidateTTL(ttl), fence.ValidateWait(wait)); err != nil {
		return withExit(exitUsage, err)
	}
	if grace < 0 || grace > maxTimeout {
		return usageError("--grace must be between 0 and %v, got %v", maxTimeout, grace)
	}
	c, err := cf.client(cmd.Context())
	if err != nil {
		return err
	}
	actx, cancel := cf.context(cmd.Context(), wait)
	defer cancel()
	err = runLocked(cmd.Context(), actx, c, name, ttl, wait, grace, argv, take)
	var ec *exitCodeError
	if errors.As(err, &ec) && ec.code == exitLockLost {
		// Exit now: Close would wait for the SDK's last attempt to
		// tell an unreachable server that the session is gone.
		return err
	}
	c.Close()
	return err
}

// runFlags registers the flags of a command that runs CMD under a grant.
func runFlags(cmd *cobra.Command, cf *clientFlags, ttl, wait, grace *time.Duration, what string) {
	cf.register(cmd)
	cmd.Flags().DurationVar(ttl, "ttl", 15*time.Second, "session TTL (100ms to 24h); renewed every TTL/3")
	cmd.Flags().DurationVar(wait, "wait", 30*time.Second, "how long to wait for the "+what)
	cmd.Flags().DurationVar(grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when the "+what+" is lost")
}

// held is the grant a command runs CMD under: its context is cancelled
// when the grant is lost, and unlock releases it.
type held struct {
	grant  fence.Grant
	ctx    context.Context
	unlock func(ctx context.Context) error
}

// takeFunc takes a grant through session s, waiting until ctx ends.
type takeFunc func(ctx context.Context, s *client.Session) (held, error)

// takeMutex takes the exclusive lock name with opts.
func takeMutex(name string, opts ...client.LockOption) takeFunc {
	return func(ctx context.Context, s *client.Session) (held, error) {
		m := client.NewMutex(s, name, opts...)
		if err := m.Lock(ctx); err != nil {
			return held{}, err
		}
		return held{grant: m.Grant(), ctx: m.Context(), unlock: m.Unlock}, nil
	}
}

// grantWords names a grant of kind for messages: "lock", "read lock",
// "write lock".
func grantWords(k fence.Kind) string {
	switch k {
	case fence.KindRead, fence.KindWrite:
		return string(k) + " lock"
	}
	return "lock"
}

// runLocked holds name, taken with take, while argv runs. acquireCtx
// bounds taking the grant, ctx the whole run.
func runLocked(ctx, acquireCtx context.Context, c *client.Client, name string, ttl, wait, grace time.Duration, argv []string, take takeFunc) error {
	s, err := c.NewSession(acquireCtx, client.WithTTL(ttl))
	if err != nil {
		return classify(err)
	}
	wctx, cancel := context.WithTimeout(acquireCtx, wait)
	m, err := take(wctx, s)
	cancel()
	closeSession, err := endTake(ctx, wctx, s, err, fmt.Sprintf("%s: not granted within %v", name, wait))
	if err != nil {
		return err
	}
	defer closeSession()
	g := m.grant
	env := []string{
		"FENCED_TOKEN=" + g.Token.String(),
		"FENCED_LOCK=" + g.Name,
		"FENCED_KIND=" + string(g.Kind),
		"FENCED_ISSUER=" + g.Issuer,
		"FENCED_SESSION=" + strconv.FormatUint(s.ID(), 10),
		"FENCED_SESSION_SECRET=" + s.Secret(),
	}
	lost := func() string { return fmt.Sprintf("%s %q lost (token %d)", grantWords(g.Kind), g.Name, g.Token) }
	return runHeld(m.ctx, env, argv, grace, lost, func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.unlock(uctx)
	})
}

// endTake ends the taking of a grant through session s, which ran in wctx
// and failed with err (nil: granted). A take that failed closes s and
// returns the error to exit with: exit status 3 with notWithin when wctx's
// deadline passed while ctx (the whole run) lives, else err classified. A
// grant returns closeSession, which closes s when the run is over, unless
// s was lost (the SDK then already asked the server to close it).
func endTake(ctx, wctx context.Context, s *client.Session, err error, notWithin string) (closeSession func(), _ error) {
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		s.Close(cctx)
		cancel()
		if errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, withExit(exitNotGranted, errors.New(notWithin))
		}
		return nil, classify(err)
	}
	return func() {
		if s.Err() != nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(cctx)
	}, nil
}

// runHeld runs argv with env added to its environment while held is
// alive, and calls release when argv exits (or cannot start). When held
// ends first, it says so on stderr (lost describes what was lost), sends
// SIGTERM to argv's process group, SIGKILL after grace, and returns exit
// status 4. Signals to fenced are passed on to argv's process group.
func runHeld(held context.Context, env, argv []string, grace time.Duration, lost func() string, release func()) error {
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), env...)
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		release()
		return fmt.Errorf("start %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	// Signals to fenced go to CMD's process group; fenced exits when CMD does.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	for {
		select {
		case err := <-exited:
			release()
			return childExit(err)
		case sig := <-sigs:
			syscall.Kill(-child.Process.Pid, sig.(syscall.Signal))
		case <-held.Done():
			fmt.Fprintf(os.Stderr, "fenced: %s: %v; stopping %s\n", lost(), context.Cause(held), argv[0])
			stopGroup(child.Process.Pid, exited, grace)
			return withExit(exitLockLost, nil)
		}
	}
}

// stopGroup sends SIGTERM to the process group pgid, then SIGKILL if CMD
// has not exited after grace.
func stopGroup(pgid int, exited <-chan error, grace time.Duration) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
}

// childExit turns CMD's end into fenced's exit: the same status, or
// 128+signal when it was killed by a signal, as shells report it.
func childExit(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return withExit(128+int(ws.Signal()), nil)
	}
	return withExit(ee.ExitCode(), nil)
}
