//go:build !unix

package nativewire

import "errors"

// rawReads is whether a Reader reads a syscall.Conn's socket itself: not
// here, where a Reader reads through a bufio.Reader.
const rawReads = false

func (fr *Reader) runRaw(func(Frame) error) error {
	return errors.New("nativewire: raw reads are not supported on this platform")
}
