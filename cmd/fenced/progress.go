package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// progressLine is a live status line on a terminal: each update rewrites
// it in place, and clear removes it before the command prints its
// result. Off a terminal (or with --json) it writes nothing, so that the
// command's output stays machine-readable.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer // nil: off
	width int       // of the line shown, to blank it
}

// newProgress returns a progress line on stderr when stderr is a terminal
// and the command does not print JSON; else one that writes nothing.
func newProgress(stderr *os.File, asJSON bool) *progressLine {
	if asJSON || noticeTo(stderr) == io.Discard {
		return &progressLine{}
	}
	return &progressLine{w: stderr}
}

// update shows the line.
func (p *progressLine) update(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return
	}
	s := fmt.Sprintf(format, args...)
	pad := ""
	if n := p.width - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", s, pad)
	p.width = len(s)
}

// clear removes the line.
func (p *progressLine) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil || p.width == 0 {
		return
	}
	fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
	p.width = 0
}
