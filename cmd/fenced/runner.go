package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// heldRun is a CMD that runs only while a grant is held: `fenced lock`
// and `fenced elect` run theirs with runHeld.
type heldRun struct {
	argv []string
	// env is added to fenced's environment for CMD (the grant's token...).
	env   []string
	grace time.Duration
	// held is cancelled when the grant can no longer be trusted.
	held context.Context
	// lost names the grant lost, for the message on stderr.
	lost string
	// done lets go of the grant after CMD exited by itself.
	done func()
}

// runHeld runs r.argv in a process group of its own with r.env. Signals to
// fenced go to CMD's group. When CMD exits, r.done lets go of the grant
// and fenced exits with CMD's status. When r.held is cancelled first,
// fenced sends SIGTERM to CMD's group, SIGKILL after r.grace, says on
// stderr what was lost and exits exitLockLost.
func runHeld(r heldRun) error {
	child := exec.Command(r.argv[0], r.argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	child.Env = append(os.Environ(), r.env...)
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		r.done()
		return fmt.Errorf("start %s: %w", r.argv[0], err)
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
			r.done()
			return childExit(err)
		case sig := <-sigs:
			syscall.Kill(-child.Process.Pid, sig.(syscall.Signal))
		case <-r.held.Done():
			fmt.Fprintf(os.Stderr, "fenced: %s: %v; stopping %s\n", r.lost, context.Cause(r.held), r.argv[0])
			stopGroup(child.Process.Pid, exited, r.grace)
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
