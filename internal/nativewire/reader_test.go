package nativewire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/nettest"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// pipePair returns both ends of a net.Pipe, which is no syscall.Conn.
func pipePair(t *testing.T) (net.Conn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// conns are the kinds of connection a Reader reads: on the socket itself
// (raw) and through a bufio.Reader.
var conns = []struct {
	name string
	pair func(*testing.T) (net.Conn, net.Conn)
	raw  bool
}{
	{"tcp", func(t *testing.T) (net.Conn, net.Conn) { return nettest.TCPPair(t) }, runtime.GOOS != "windows" && rawReads},
	{"pipe", pipePair, false},
}

// testFrames returns n frames of random sizes, some larger than a
// Reader's buffer, and their encoding.
func testFrames(t *testing.T, n int, rng *rand.Rand) ([]*fencedv1.PipelineRequest, []byte) {
	t.Helper()
	var wire []byte
	var ms []*fencedv1.PipelineRequest
	for i := range n {
		size := rng.IntN(64)
		if i%50 == 7 {
			size = readerBufferSize + rng.IntN(3*readerBufferSize)
		}
		m := &fencedv1.PipelineRequest{Cancel: make([]uint64, size)}
		for j := range m.Cancel {
			m.Cancel[j] = uint64(i)<<20 | uint64(j)
		}
		var err error
		if wire, err = AppendFrame(wire, KindPipeline, uint32(i+1), m); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms, wire
}

// TestReaderChunks sends frames in chunks of random sizes, at random
// pauses, the first bytes already in the bufio.Reader the Reader takes
// over: every frame arrives whole, in order, with its stream id, and the
// end of the connection between frames is io.EOF.
func TestReaderChunks(t *testing.T) {
	for _, tc := range conns {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			ms, wire := testFrames(t, 400, rng)
			w, r := tc.pair(t)
			go func() {
				for b := wire; len(b) > 0; {
					n := min(len(b), 1+rng.IntN(3000))
					if _, err := w.Write(b[:n]); err != nil {
						return
					}
					b = b[n:]
					if rng.IntN(4) == 0 {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					}
				}
				w.Close()
			}()
			br := bufio.NewReaderSize(r, 4<<10)
			if _, err := br.Peek(1); err != nil { // bytes buffered before the Reader
				t.Fatal(err)
			}
			fr := NewReader(r, br, 1<<20)
			if (fr.raw != nil) != tc.raw {
				t.Fatalf("reads the socket itself: %v, want %v", fr.raw != nil, tc.raw)
			}
			_ = fr.SetReadDeadline(time.Now().Add(time.Minute))
			i := 0
			err := fr.Run(func(f Frame) error {
				var got fencedv1.PipelineRequest
				if err := proto.Unmarshal(f.Payload, &got); err != nil {
					return err
				}
				if i >= len(ms) || f.Stream != uint32(i+1) || f.Kind != KindPipeline || !proto.Equal(&got, ms[i]) {
					return fmt.Errorf("frame %d: stream %d kind %d, %d values", i, f.Stream, f.Kind, len(got.Cancel))
				}
				i++
				return nil
			})
			if !errors.Is(err, io.EOF) || i != len(ms) {
				t.Fatalf("after %d of %d frames: %v, want io.EOF after all", i, len(ms), err)
			}
		})
	}
}

// TestReaderPingPong waits for each frame's answer before the next is
// sent, the pattern where the Reader waits for the poller after every
// short read: a wake-up lost there would hang the test (bounded by the
// read deadline).
func TestReaderPingPong(t *testing.T) {
	for _, tc := range conns {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.pair(t)
			const rounds = 5000
			done := make(chan error, 1)
			go func() {
				_ = a.SetDeadline(time.Now().Add(time.Minute))
				frame, _ := AppendFrame(nil, KindKeepAlive, 1, nil)
				ack := make([]byte, 1)
				for range rounds {
					if _, err := a.Write(frame); err != nil {
						done <- err
						return
					}
					if _, err := io.ReadFull(a, ack); err != nil {
						done <- err
						return
					}
				}
				done <- a.Close()
			}()
			fr := NewReader(b, nil, 16)
			_ = fr.SetReadDeadline(time.Now().Add(time.Minute))
			n := 0
			err := fr.Run(func(Frame) error {
				n++
				_, err := b.Write([]byte{1})
				return err
			})
			if !errors.Is(err, io.EOF) || n != rounds {
				t.Fatalf("after %d of %d round trips: %v", n, rounds, err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReaderErrors: a frame over the limit, a malformed one, the end of
// the connection inside a frame, a read deadline, a close by another
// goroutine and handle's own error each end Run with their error, and no
// frame after the bad one is handed over.
func TestReaderErrors(t *testing.T) {
	good, _ := AppendFrame(nil, KindPipeline, 1, &fencedv1.PipelineRequest{Cancel: []uint64{1}})
	big, _ := AppendFrame(nil, KindPipeline, 2, &fencedv1.PipelineRequest{Cancel: make([]uint64, 100)})
	malformed := []byte{0, 0, 0, 5, 99, 0, 0, 0, 1}
	errHandle := errors.New("handle failed")
	cases := []struct {
		name    string
		send    []byte
		close   bool // the writer closes after sending
		handle  error
		want    error
		handled int
	}{
		{"too big", append(append(append([]byte{}, good...), big...), good...), false, nil, ErrTooBig, 1},
		{"malformed", append(append(append([]byte{}, good...), malformed...), good...), false, nil, ErrMalformed, 1},
		{"eof inside a frame", append(append([]byte{}, good...), good[:len(good)-1]...), true, nil, io.ErrUnexpectedEOF, 1},
		{"eof inside a header", append(append([]byte{}, good...), good[:4]...), true, nil, io.ErrUnexpectedEOF, 1},
		{"deadline", good, false, nil, os.ErrDeadlineExceeded, 1},
		{"handle's error", append(append([]byte{}, good...), good...), false, errHandle, errHandle, 1},
	}
	for _, tc := range conns {
		for _, c := range cases {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				w, r := tc.pair(t)
				go func() {
					_, _ = w.Write(c.send)
					if c.close {
						w.Close()
					}
				}()
				fr := NewReader(r, nil, 64)
				_ = fr.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
				n := 0
				err := fr.Run(func(Frame) error {
					n++
					return c.handle
				})
				if !errors.Is(err, c.want) || n != c.handled {
					t.Fatalf("%v after %d frames, want %v after %d", err, n, c.want, c.handled)
				}
			})
		}
		t.Run(tc.name+"/closed", func(t *testing.T) {
			_, r := tc.pair(t)
			time.AfterFunc(50*time.Millisecond, func() { r.Close() })
			fr := NewReader(r, nil, 64)
			_ = fr.SetReadDeadline(time.Now().Add(time.Minute))
			err := fr.Run(func(Frame) error { return nil })
			var op *net.OpError
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("%v, want net.ErrClosed", err)
			}
			if tc.raw && !errors.As(err, &op) {
				t.Fatalf("%T %v, want a *net.OpError as net.Conn's Read returns", err, err)
			}
		})
	}
}

// TestReaderEndWithLastFrame: the peer sends a frame and closes while the
// Reader is in handle, so the wake-ups of the frame and of the end are
// one, and the read after it returns the frame alone: the probe finds
// the end within its interval. The control, with no probe in the test's
// time, shows the end is missed without it (the case the probe exists
// for), so the test can fail.
func TestReaderEndWithLastFrame(t *testing.T) {
	if !rawReads {
		t.Skip("the Reader reads through a bufio.Reader here")
	}
	for _, probe := range []time.Duration{20 * time.Millisecond, time.Hour} {
		t.Run(probe.String(), func(t *testing.T) {
			w, r := nettest.TCPPair(t)
			frame, _ := AppendFrame(nil, KindKeepAlive, 1, nil)
			inHandle := make(chan struct{})
			go func() {
				time.Sleep(20 * time.Millisecond) // the Reader waits for the poller
				_, _ = w.Write(frame)
				<-inHandle
				_, _ = w.Write(frame)
				w.Close()
			}()
			fr := NewReader(r, nil, 16)
			fr.ProbeInterval = probe
			_ = fr.SetReadDeadline(time.Now().Add(2 * time.Second))
			n := 0
			err := fr.Run(func(Frame) error {
				if n++; n == 1 {
					close(inHandle)
					time.Sleep(50 * time.Millisecond) // the second frame and the end arrive
				}
				return nil
			})
			if probe == time.Hour {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("control without a probe: %v, want the deadline (the end missed)", err)
				}
				return
			}
			if !errors.Is(err, io.EOF) || n != 2 {
				t.Fatalf("%v after %d frames, want io.EOF after 2", err, n)
			}
		})
	}
}

// TestReaderDeadlineWithProbe: a deadline set with SetReadDeadline ends
// Run when it passes, though probes fire before it, and a probe does not
// end Run.
func TestReaderDeadlineWithProbe(t *testing.T) {
	w, r := nettest.TCPPair(t)
	frame, _ := AppendFrame(nil, KindKeepAlive, 1, nil)
	go func() { _, _ = w.Write(frame) }()
	fr := NewReader(r, nil, 16)
	fr.ProbeInterval = 10 * time.Millisecond
	start := time.Now()
	_ = fr.SetReadDeadline(start.Add(300 * time.Millisecond))
	n := 0
	err := fr.Run(func(Frame) error { n++; return nil })
	if !errors.Is(err, os.ErrDeadlineExceeded) || n != 1 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("%v after %d frames and %v, want the deadline after 1 frame and 300ms", err, n, time.Since(start))
	}
}
