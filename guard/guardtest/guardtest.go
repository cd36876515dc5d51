// Package guardtest is the conformance suite every fenced guard runs against
// itself, on its real store: the watermark rule of docs/design.md §5, sequential
// and under concurrency (Run), and the contract of fence.Guard's Do
// (RunGuard).
//
// An adapter's test wraps its guard in a Target, whose Write goes through
// the guard's Do (or another of its atomic steps), and calls Run; and hands
// the guard itself to RunGuard:
//
//	func TestGuard_Conformance(t *testing.T) {
//		guardtest.Run(t, func(t *testing.T) guardtest.Target { return newTarget(t) })
//		guardtest.RunGuard(t, guardtest.Guard{Guard: g, Watermark: g.Watermark})
//	}
//
// httpfence/httpfencetest checks the same guard behind the HTTP middleware.
package guardtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	fence "github.com/fenced-dev/fenced"
)

// Target is a protected resource as the suite drives it. Each object has a
// value and a watermark; objects are independent.
type Target interface {
	// Write stores value for object under token t, checked and applied in
	// one atomic step. It returns nil when accepted, an error matching
	// fence.ErrStaleToken (a *fence.StaleTokenError, with errors.As) when t
	// is below the object's watermark, and an error matching
	// fence.ErrInvalidToken for a token outside 1..fence.MaxToken.
	Write(ctx context.Context, object string, t fence.Token, value string) error
	// Read returns the object's value ("" if never written) and watermark
	// (0 if none), bypassing the guard.
	Read(ctx context.Context, object string) (value string, mark fence.Token, err error)
}

// Appender is implemented by Targets whose Write appends value to the
// object's value, separated by ",", instead of replacing it. The suite then
// also checks the commit order the stored value records.
type Appender interface {
	Target
	// Appends reports that Write appends.
	Appends() bool
}

// Run runs the whole suite. newTarget is called once per subtest; objects
// are named uniquely per subtest, so targets may share a store.
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("Sequential", func(t *testing.T) { testSequential(t, newTarget(t)) })
	t.Run("PerObject", func(t *testing.T) { testPerObject(t, newTarget(t)) })
	t.Run("InvalidTokens", func(t *testing.T) { testInvalidTokens(t, newTarget(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newTarget(t)) })
}

var objectSeq struct {
	sync.Mutex
	n int
}

// object returns an object name unique in this test binary's run.
func object(t *testing.T) string {
	objectSeq.Lock()
	defer objectSeq.Unlock()
	objectSeq.n++
	return fmt.Sprintf("guardtest-%d-%d-%d", time.Now().UnixNano()%1e9, objectSeq.n, rand.IntN(1e6))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustRead(t *testing.T, tg Target, obj string) (string, fence.Token) {
	t.Helper()
	v, m, err := tg.Read(ctx(t), obj)
	if err != nil {
		t.Fatalf("Read(%q): %v", obj, err)
	}
	return v, m
}

// lastValue is the value a write left visible: the whole value, or the
// last appended element.
func lastValue(tg Target, v string) string {
	if a, ok := tg.(Appender); ok && a.Appends() {
		if i := strings.LastIndexByte(v, ','); i >= 0 {
			return v[i+1:]
		}
	}
	return v
}

func testSequential(t *testing.T, tg Target) {
	obj := object(t)
	if v, m := mustRead(t, tg, obj); v != "" || m != 0 {
		t.Fatalf("unknown object: Read()=%q, %d; want no value and no watermark", v, m)
	}
	steps := []struct {
		token    fence.Token
		value    string
		accepted bool
	}{
		{5, "a", true},  // first write
		{5, "b", true},  // equal token: repeated write within one grant
		{9, "c", true},  // higher token becomes the watermark
		{7, "d", false}, // lower token rejected
		{1, "e", false},
		{9, "f", true},
		{fence.MaxToken, "g", true},
		{fence.MaxToken - 1, "h", false},
	}
	var mark fence.Token
	var value string
	for i, st := range steps {
		err := tg.Write(ctx(t), obj, st.token, st.value)
		if st.accepted {
			if err != nil {
				t.Fatalf("step %d: Write(token %d)=%v, want accepted", i, st.token, err)
			}
			mark, value = st.token, st.value
		} else {
			var se *fence.StaleTokenError
			if !errors.As(err, &se) || !errors.Is(err, fence.ErrStaleToken) {
				t.Fatalf("step %d: Write(token %d)=%v, want a *fence.StaleTokenError", i, st.token, err)
			}
			if se.Presented != st.token || se.Required != mark {
				t.Fatalf("step %d: StaleTokenError{Presented: %d, Required: %d}, want {%d, %d}", i, se.Presented, se.Required, st.token, mark)
			}
		}
		v, m := mustRead(t, tg, obj)
		if lastValue(tg, v) != value || m != mark {
			t.Fatalf("step %d: Read()=%q, %d; want value %q, watermark %d", i, v, m, value, mark)
		}
	}
}

func testPerObject(t *testing.T, tg Target) {
	a, b := object(t), object(t)
	if err := tg.Write(ctx(t), a, 100, "a"); err != nil {
		t.Fatalf("Write(a, 100): %v", err)
	}
	if err := tg.Write(ctx(t), b, 3, "b"); err != nil {
		t.Fatalf("Write(b, 3)=%v: a watermark of another object must not apply", err)
	}
	if _, m := mustRead(t, tg, b); m != 3 {
		t.Fatalf("watermark of b=%d, want 3", m)
	}
}

func testInvalidTokens(t *testing.T, tg Target) {
	obj := object(t)
	if err := tg.Write(ctx(t), obj, 10, "ok"); err != nil {
		t.Fatalf("Write(10): %v", err)
	}
	before, mark := mustRead(t, tg, obj)
	for _, tok := range []fence.Token{0, fence.MaxToken + 1, ^fence.Token(0)} {
		err := tg.Write(ctx(t), obj, tok, "bad")
		if !errors.Is(err, fence.ErrInvalidToken) {
			t.Errorf("Write(token %d)=%v, want fence.ErrInvalidToken", uint64(tok), err)
		}
		if v, m := mustRead(t, tg, obj); v != before || m != mark {
			t.Errorf("Write(token %d) changed the object: %q/%d -> %q/%d", uint64(tok), before, mark, v, m)
		}
	}
}

// write is one completed write of the concurrent test.
type write struct {
	token              fence.Token
	value              string
	accepted           bool
	invoked, completed time.Time
}

func testConcurrent(t *testing.T, tg Target) {
	const writers, perWriter = 8, 40
	obj := object(t)
	var mu sync.Mutex
	var history []write
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; i < perWriter; i++ {
				tok := fence.Token(1 + rng.IntN(200))
				val := fmt.Sprintf("w%d-%d-t%d", w, i, tok)
				start := time.Now()
				err := tg.Write(ctx(t), obj, tok, val)
				end := time.Now()
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					t.Errorf("Write(token %d): %v", tok, err)
					return
				}
				mu.Lock()
				history = append(history, write{tok, val, err == nil, start, end})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var maxTok fence.Token
	for _, w := range history {
		if w.accepted {
			maxTok = max(maxTok, w.token)
		}
	}
	// Real-time order: a write that started after an accepted write with a
	// higher token had completed must have been rejected.
	for _, a := range history {
		if !a.accepted {
			continue
		}
		for _, b := range history {
			if b.accepted && b.token < a.token && b.invoked.After(a.completed) {
				t.Fatalf("write with token %d was accepted after a write with token %d had completed", b.token, a.token)
			}
		}
	}
	v, mark := mustRead(t, tg, obj)
	if mark != maxTok {
		t.Fatalf("watermark=%d, want the highest accepted token %d", mark, maxTok)
	}
	final := lastValue(tg, v)
	if !strings.HasSuffix(final, "-t"+strconv.FormatUint(uint64(maxTok), 10)) {
		t.Fatalf("final value %q is not from a writer of the highest token %d", final, maxTok)
	}
	if a, ok := tg.(Appender); ok && a.Appends() {
		// The stored value lists the accepted writes in commit order.
		var last uint64
		for _, el := range strings.Split(v, ",") {
			i := strings.LastIndex(el, "-t")
			tok, err := strconv.ParseUint(el[i+2:], 10, 64)
			if i < 0 || err != nil {
				t.Fatalf("appended element %q is not a value this suite wrote", el)
			}
			if tok < last {
				t.Fatalf("commit order has token %d after token %d: %s", tok, last, v)
			}
			last = tok
		}
	}
}
