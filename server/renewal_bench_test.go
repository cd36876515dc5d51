package server

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/internal/heapcost"
	fencedv1 "github.com/fenced-dev/fenced/proto/fenced/v1"
)

// BenchmarkKeepAlive_HeapPerQueuedRenewal reports the Go heap a KeepAlive
// stream keeps live per renewal received and not yet renewed: 100
// messages of 1,000 renewals each, decoded and queued as the stream's
// receiving goroutine does (docs/benchmarks.md, "The cost of scale").
func BenchmarkKeepAlive_HeapPerQueuedRenewal(b *testing.B) {
	const messages, per = 100, 1000
	frames := make([][]byte, messages)
	secret := strings.Repeat("s", 43) // a 32-byte secret in base64
	for i := range frames {
		m := &fencedv1.KeepAliveRequest{Session: uint64(i*per + 1), Nonce: 1, Secret: secret}
		for j := 1; j < per; j++ {
			m.More = append(m.More, &fencedv1.KeepAliveRequest{Session: uint64(i*per + j + 1), Nonce: uint64(j), Secret: secret})
		}
		var err error
		if frames[i], err = proto.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
	var heap float64
	for b.Loop() {
		heap = heapcost.PerItem(messages*per, func() any {
			var q []renewal
			for _, f := range frames {
				m := new(fencedv1.KeepAliveRequest)
				if err := proto.Unmarshal(f, m); err != nil {
					panic(fmt.Sprint(err))
				}
				q = queueRenewals(q, m)
			}
			return q
		})
	}
	b.ReportMetric(heap, "heap-B/renewal")
}
