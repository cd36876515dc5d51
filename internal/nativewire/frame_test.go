package nativewire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

func TestFrameRoundTrip(t *testing.T) {
	m := &fencedv1.PipelineRequest{Cancel: []uint64{1, 2, 3}}
	b, err := AppendFrame([]byte("x"), KindPipeline, 7, m)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(bytes.NewReader(b[1:]), 1024)
	if err != nil {
		t.Fatal(err)
	}
	var got fencedv1.PipelineRequest
	if err := proto.Unmarshal(f.Payload, &got); err != nil || f.Kind != KindPipeline || f.Stream != 7 || !proto.Equal(&got, m) {
		t.Fatalf("read back %v %v (%v), want kind %d stream 7 %v", f, &got, err, KindPipeline, m)
	}
	if _, err := ReadFrame(bytes.NewReader(b[1:]), proto.Size(m)-1); !errors.Is(err, ErrTooBig) {
		t.Fatalf("a frame one byte over the limit: %v, want ErrTooBig", err)
	}
	if _, err := ReadFrame(bytes.NewReader(b[1:len(b)-1]), 1024); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a truncated frame: %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzReadFrame reads frames from arbitrary bytes: it never panics, never
// returns a payload over the limit or a frame that breaks the framing's
// rules, and every frame it returns encodes back to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	hello, _ := AppendFrame(nil, KindHello, 0, &fencedv1.NativeHello{Version: Version, Authorization: "Bearer x"})
	pipe, _ := AppendFrame(nil, KindPipeline, 3, &fencedv1.PipelineRequest{Cancel: []uint64{9}})
	f.Add(hello)
	f.Add(append(pipe, hello...))
	f.Add([]byte{0, 0, 0, 5, byte(KindCancel), 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 1, 3})
	const limit = 256
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		read := 0
		for {
			fr, err := ReadFrame(r, limit)
			if err != nil {
				return
			}
			if len(fr.Payload) > limit {
				t.Fatalf("payload of %d bytes over the limit %d", len(fr.Payload), limit)
			}
			if fr.Kind < KindHello || fr.Kind > KindCancel {
				t.Fatalf("frame of unknown kind %d returned", fr.Kind)
			}
			if (fr.Kind == KindHello || fr.Kind == KindWelcome) != (fr.Stream == 0) && fr.Kind != KindEnd {
				t.Fatalf("kind %d on stream %d returned", fr.Kind, fr.Stream)
			}
			n := HeaderLen + len(fr.Payload)
			head := data[read : read+HeaderLen]
			again, _ := AppendFrame(nil, fr.Kind, fr.Stream, nil)
			again = append(again, fr.Payload...)
			binary.BigEndian.PutUint32(again, uint32(n-4))
			if !bytes.Equal(again, data[read:read+n]) || !bytes.Equal(again[:HeaderLen], head) {
				t.Fatalf("frame %v does not encode back to %x", fr, data[read:read+n])
			}
			read += n
		}
	})
}
