package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestReach_NoticeOnce: an endpoint that refuses connections gets one
// notice after about a second of retrying, then the error at --timeout,
// naming the endpoint and the refusal; an endpoint that starts listening
// meanwhile ends the wait.
func TestReach_NoticeOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	err = reach(ctx, []string{dead}, 2500*time.Millisecond, &out)
	if err == nil || !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "2.5s") {
		t.Fatalf("err %v: want the endpoint, the refusal and the timeout", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 1 || !strings.Contains(out.String(), "retrying") {
		t.Fatalf("notices %q: want exactly one", out.String())
	}

	// A listener that appears while reach retries ends it without error.
	go func() {
		time.Sleep(300 * time.Millisecond)
		if l, err := net.Listen("tcp", dead); err == nil {
			t.Cleanup(func() { l.Close() })
		}
	}()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	if err := reach(ctx2, []string{dead}, 20*time.Second, &out); err != nil {
		t.Fatalf("reach after the endpoint started listening: %v", err)
	}
}

func TestValidateEndpoint(t *testing.T) {
	for ep, ok := range map[string]bool{
		"127.0.0.1:7700": true, "localhost:1": true, "[::1]:7700": true, "https://db.example.com": true, "http://h:80": true,
		"127.0.0.1": false, "127.0.0.1:": false, ":7700": false, "h:0": false, "h:65536": false, "h:http": false, "ftp://h:1": false, "https://": false,
	} {
		if err := validateEndpoint(ep); (err == nil) != ok {
			t.Errorf("validateEndpoint(%q) = %v, want ok=%v", ep, err, ok)
		}
	}
}
