// Package nativewire is the framing of fenced's native protocol, shared by
// the server and the Go SDK (docs/design.md, "The native protocol").
//
// A cleartext connection opens with Preface; over TLS the protocol is
// chosen by ALPN (ALPN) and there is no preface. Then every frame is
//
//	length  uint32, big endian: the bytes after it (at least 5)
//	kind    one byte (Kind)
//	stream  uint32, big endian: the stream the frame belongs to (0 for
//	        the handshake and for an error of the whole connection)
//	payload length-5 bytes: a protobuf message, or nothing
//
// The client's first frame is a Hello on stream 0, the server's a Welcome.
// A client opens a stream by sending its first Pipeline or KeepAlive frame
// on a new stream id (greater than any it used before on the connection).
package nativewire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// Preface opens a cleartext native connection. Its first byte, 0, starts
// no HTTP/1 request, no HTTP/2 preface and no TLS record, so a server
// tells the protocols apart by one byte.
const Preface = "\x00FENCED/1\r\n"

// ALPN is the protocol id of the native protocol in a TLS handshake.
const ALPN = "fenced/1"

// Version is the protocol version in a Hello.
const Version = 1

// HeaderLen is the length of a frame's header: length, kind, stream.
const HeaderLen = 9

// Kind is the kind of a frame.
type Kind byte

// The kinds of frame. C: sent by the client; S: by the server.
const (
	KindHello     Kind = 1 // C, stream 0: NativeHello
	KindWelcome   Kind = 2 // S, stream 0: NativeWelcome
	KindPipeline  Kind = 3 // C: PipelineRequest; S: PipelineResponse
	KindKeepAlive Kind = 4 // C: KeepAliveRequest; S: KeepAliveResponse
	KindCloseSend Kind = 5 // C: the client sends no more on the stream (no payload)
	KindEnd       Kind = 6 // S: the stream ended: PipelineError (code 0: no error); on stream 0 the connection ends
	KindCancel    Kind = 7 // C: the client abandons the stream; the server cancels it (no payload)
)

// ErrMalformed is wrapped by the error of a frame that breaks the framing.
var ErrMalformed = errors.New("malformed native frame")

// ErrTooBig is wrapped by the error of a frame over the reader's limit.
var ErrTooBig = errors.New("native frame too big")

// Frame is one frame read.
type Frame struct {
	Kind    Kind
	Stream  uint32
	Payload []byte
}

// ReadFrame reads one frame from r whose payload is at most maxPayload
// bytes. A frame over the limit fails with ErrTooBig before its payload
// is read; an unknown kind, a stream id that does not fit the kind or a
// length too short for the header fails with ErrMalformed. The payload is
// a new slice.
func ReadFrame(r io.Reader, maxPayload int) (Frame, error) {
	return ReadFrameBuffer(r, maxPayload, nil)
}

// ReadFrameBuffer is ReadFrame reading into buf: the header, then the
// payload, which is buf[:n] when it fits in buf's capacity (a new slice
// when it does not). A payload in buf is valid until buf is read into
// again, so a reader of many frames reuses one buffer and allocates
// nothing per frame.
func ReadFrameBuffer(r io.Reader, maxPayload int, buf []byte) (Frame, error) {
	if cap(buf) < HeaderLen {
		buf = make([]byte, HeaderLen)
	}
	h := buf[:HeaderLen]
	if _, err := io.ReadFull(r, h); err != nil {
		return Frame{}, err
	}
	f, n, err := ParseHeader(h, maxPayload)
	if err != nil {
		return Frame{}, err
	}
	if n > 0 {
		if n <= cap(buf) {
			f.Payload = buf[:n]
		} else {
			f.Payload = make([]byte, n)
		}
		if _, err := io.ReadFull(r, f.Payload); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
	}
	return f, nil
}

// ParseHeader checks a frame header and returns its kind and stream and
// its payload's length.
func ParseHeader(h []byte, maxPayload int) (Frame, int, error) {
	if len(h) < HeaderLen {
		return Frame{}, 0, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(h), HeaderLen)
	}
	length := binary.BigEndian.Uint32(h)
	f := Frame{Kind: Kind(h[4]), Stream: binary.BigEndian.Uint32(h[5:])}
	if length < HeaderLen-4 {
		return Frame{}, 0, fmt.Errorf("%w: length %d is shorter than the kind and stream id (5 bytes)", ErrMalformed, length)
	}
	n := uint64(length) - (HeaderLen - 4)
	if n > uint64(maxPayload) {
		return Frame{}, 0, fmt.Errorf("%w: %d bytes of payload, the most is %d", ErrTooBig, n, maxPayload)
	}
	switch f.Kind {
	case KindHello, KindWelcome:
		if f.Stream != 0 {
			return Frame{}, 0, fmt.Errorf("%w: kind %d on stream %d; it belongs on stream 0", ErrMalformed, f.Kind, f.Stream)
		}
	case KindPipeline, KindKeepAlive, KindCloseSend, KindCancel:
		if f.Stream == 0 {
			return Frame{}, 0, fmt.Errorf("%w: kind %d on stream 0, which carries only the handshake and connection errors", ErrMalformed, f.Kind)
		}
		if (f.Kind == KindCloseSend || f.Kind == KindCancel) && n != 0 {
			return Frame{}, 0, fmt.Errorf("%w: kind %d carries no payload, got %d bytes", ErrMalformed, f.Kind, n)
		}
	case KindEnd:
	default:
		return Frame{}, 0, fmt.Errorf("%w: unknown kind %d", ErrMalformed, f.Kind)
	}
	return f, int(n), nil
}

// AppendFrame appends a frame of kind on stream carrying m (nil: no
// payload) to dst.
func AppendFrame(dst []byte, kind Kind, stream uint32, m proto.Message) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(kind), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[start+5:], stream)
	if m != nil {
		var err error
		if dst, err = (proto.MarshalOptions{}).MarshalAppend(dst, m); err != nil {
			return dst[:start], err
		}
	}
	n := len(dst) - start - 4
	if uint64(n) > 1<<32-1 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrTooBig, n)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}
