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
	cmd := &cobra.Command{
		Use:   "lock NAME [flags] -- CMD [ARGS...]",
		Short: "Run CMD while holding a lock",
		Long: `Take the lock (waiting up to --wait), keep it alive, and run CMD with
FENCED_TOKEN, FENCED_LOCK and FENCED_ISSUER in its environment, and
FENCED_SESSION and FENCED_SESSION_SECRET, the session holding the lock and
its secret (with which CMD may release it early: "fenced release NAME").
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
			name, argv := args[0], args[1:]
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
			err = runLocked(cmd.Context(), actx, c, name, ttl, wait, grace, argv)
			var ec *exitCodeError
			if errors.As(err, &ec) && ec.code == exitLockLost {
				// Exit now: Close would wait for the SDK's last attempt to
				// tell an unreachable server that the session is gone.
				return err
			}
			c.Close()
			return err
		},
	}
	cf.register(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", 15*time.Second, "session TTL (100ms to 24h); renewed every TTL/3")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the lock")
	cmd.Flags().DurationVar(&grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when the lock is lost")
	return cmd
}

// runLocked holds name while argv runs. acquireCtx bounds taking the lock,
// ctx the whole run.
func runLocked(ctx, acquireCtx context.Context, c *client.Client, name string, ttl, wait, grace time.Duration, argv []string) error {
	s, err := c.NewSession(acquireCtx, client.WithTTL(ttl))
	if err != nil {
		return classify(err)
	}
	m := client.NewMutex(s, name)
	wctx, cancel := context.WithTimeout(acquireCtx, wait)
	err = m.Lock(wctx)
	cancel()
	if err != nil {
		cctx, cancel := cleanupContext(ctx)
		s.Close(cctx)
		cancel()
		if errors.Is(wctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return withExit(exitNotGranted, fmt.Errorf("%s: not granted within %v", name, wait))
		}
		return classify(err)
	}
	defer func() {
		if s.Err() != nil {
			return // lost: the SDK already asked the server to close it
		}
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Close(cctx)
	}()
	g := m.Grant()

	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(),
		"FENCED_TOKEN="+g.Token.String(),
		"FENCED_LOCK="+g.Name,
		"FENCED_ISSUER="+g.Issuer,
		"FENCED_SESSION="+strconv.FormatUint(s.ID(), 10),
		"FENCED_SESSION_SECRET="+s.Secret(),
	)
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		uctx, cancel := cleanupContext(ctx)
		m.Unlock(uctx)
		cancel()
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
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			m.Unlock(uctx)
			cancel()
			return childExit(err)
		case sig := <-sigs:
			syscall.Kill(-child.Process.Pid, sig.(syscall.Signal))
		case <-m.Context().Done():
			fmt.Fprintf(os.Stderr, "fenced: lock %q lost (token %d): %v; stopping %s\n", g.Name, g.Token, context.Cause(m.Context()), argv[0])
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
