//go:build unix

package nativewire

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// rawReads is whether a Reader reads a syscall.Conn's socket itself.
const rawReads = true

// runRaw is Run on the socket, in syscall.RawConn.Read calls that each
// last until a probe (or an error).
//
// Why a short read may be trusted: RawConn.Read resets the poller's
// "readable" before it first calls read, and each wait consumes it, so
// bytes that arrive after a wait began (or after the reset) wake the
// next wait. The first call of each RawConn.Read reads until EAGAIN,
// since bytes (or the end) may have arrived before the reset; later calls
// follow a wake, and a read that fills less than the buffer took every
// byte that had arrived.
//
// Why a probe: a peer's end (FIN) or a reset does not come back with its
// data. If it arrives before the wake that a frame just before it caused
// (the two wake-ups are one), the read after the wake returns the frame
// but not the end, and no wake follows. So after a trusted short read the
// Reader arms a read deadline of ProbeInterval (unless it is armed):
// when it fires, a new RawConn.Read reads until EAGAIN, and finds the
// end. An idle connection is not probed again until it reads.
func (fr *Reader) runRaw(handle func(Frame) error) error {
	var err error
	first := true
	read := func(fd uintptr) bool {
		for {
			space := len(fr.buf) - fr.end
			n, rerr := syscall.Read(int(fd), fr.buf[fr.end:])
			switch {
			case rerr == syscall.EINTR:
				continue
			case rerr == syscall.EAGAIN:
				first = false
				return false
			case rerr != nil:
				err = fr.opError(os.NewSyscallError("read", rerr))
				return true
			case n == 0:
				err = fr.eof()
				return true
			}
			drained, herr := fr.received(n, space, handle)
			if herr != nil {
				err = herr
				return true
			}
			if drained && !first {
				fr.armProbe()
				return false
			}
		}
	}
	for {
		first = true
		rerr := fr.raw.Read(read)
		if err != nil {
			return err
		}
		if rerr != nil && !(errors.Is(rerr, os.ErrDeadlineExceeded) && fr.probed()) {
			return rerr
		}
	}
}

// armProbe arms the probe's deadline unless it is armed.
func (fr *Reader) armProbe() {
	fr.dmu.Lock()
	defer fr.dmu.Unlock()
	if fr.probeAt.IsZero() {
		fr.probeAt = time.Now().Add(fr.ProbeInterval)
		fr.applyDeadlineLocked()
	}
}

// probed reports whether a deadline that fired was the probe's, not the
// one set with SetReadDeadline, and disarms the probe.
func (fr *Reader) probed() bool {
	fr.dmu.Lock()
	defer fr.dmu.Unlock()
	if !fr.deadline.IsZero() && !time.Now().Before(fr.deadline) {
		return false
	}
	fr.probeAt = time.Time{}
	fr.applyDeadlineLocked()
	return true
}
