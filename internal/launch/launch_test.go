package launch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStart_ExitCodeAndOnExit(t *testing.T) {
	exited := make(chan struct{})
	var out strings.Builder
	p, err := Start(Spec{Bin: "/bin/sh", Args: []string{"-c", `echo "$GREETING"; exit 3`}, Env: []string{"GREETING=hello"}, Out: &out,
		OnExit: func() { close(exited) }})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Wait(10 * time.Second) {
		t.Fatal("sh did not exit")
	}
	select {
	case <-exited:
	default:
		t.Error("Done closed before OnExit ran")
	}
	if got := p.ExitCode(); got != 3 {
		t.Errorf("ExitCode() = %d, want 3", got)
	}
	if out.String() != "hello\n" {
		t.Errorf("output %q, want the environment's GREETING", out.String())
	}
}

func TestProcess_KillStopped(t *testing.T) {
	p, err := Start(Spec{Bin: "/bin/sleep", Args: []string{"60"}, OwnGroup: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ExitCode(); got != -1 {
		t.Errorf("ExitCode() of a running process = %d, want -1", got)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if p.Wait(100 * time.Millisecond) {
		t.Fatal("a stopped process exited")
	}
	if !p.Kill(10 * time.Second) {
		t.Fatal("a stopped process did not exit after Kill")
	}
	if got := p.ExitCode(); got != -1 {
		t.Errorf("ExitCode() of a killed process = %d, want -1", got)
	}
}

func TestStart_MissingBinary(t *testing.T) {
	if _, err := Start(Spec{Bin: "/nonexistent/fenced"}); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
}

func TestPlan(t *testing.T) {
	nodes, err := Plan(3, func(id string) string { return "/data/" + id })
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i, n := range nodes {
		if want := "n" + string(rune('1'+i)); n.ID != want || n.DataDir != "/data/"+want {
			t.Errorf("node %d = %+v, want id and data dir %s", i, n, want)
		}
		addrs = append(addrs, n.Addr, n.PeerAddr)
	}
	slices.Sort(addrs)
	if len(slices.Compact(addrs)) != 6 {
		t.Errorf("addresses %v are not distinct", addrs)
	}
	if got, want := InitialCluster(nodes), "n1="+nodes[0].PeerAddr+",n2="+nodes[1].PeerAddr+",n3="+nodes[2].PeerAddr; got != want {
		t.Errorf("InitialCluster = %q, want %q", got, want)
	}
	args := strings.Join(nodes[0].ServeArgs(), " ")
	for _, want := range []string{"serve", "--node-id n1", "--listen " + nodes[0].Addr, "--peer-listen " + nodes[0].PeerAddr, "--data-dir /data/n1"} {
		if !strings.Contains(args, want) {
			t.Errorf("ServeArgs() = %q, lacks %q", args, want)
		}
	}
}

// TestLinks checks that node i's environment routes each peer through the
// proxy of link (i, peer) and that Isolate and Heal cut and restore it.
func TestLinks(t *testing.T) {
	// Stand-ins for the peers' Raft listeners.
	var nodes []Node
	for i := 0; i < 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		nodes = append(nodes, Node{ID: string(rune('a' + i)), PeerAddr: ln.Addr().String()})
	}
	l, err := NewLinks(nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env := l.Env(0)
	if len(env) != 1 || !strings.HasPrefix(env[0], dialViaEnv+"=") {
		t.Fatalf("Env(0) = %v, want one %s", env, dialViaEnv)
	}
	via := map[string]string{}
	for _, pair := range strings.Split(strings.TrimPrefix(env[0], dialViaEnv+"="), ",") {
		peer, proxy, _ := strings.Cut(pair, "=")
		via[peer] = proxy
	}
	if len(via) != 2 || via[nodes[1].PeerAddr] == "" || via[nodes[2].PeerAddr] == "" || via[nodes[0].PeerAddr] != "" {
		t.Fatalf("Env(0) routes %v, want nodes 1 and 2 only", via)
	}
	reaches := func(addr string) bool {
		c := &http.Client{Timeout: 300 * time.Millisecond}
		resp, err := c.Get("http://" + addr + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
	if !reaches(via[nodes[1].PeerAddr]) {
		t.Fatal("link 0->1 does not pass before any fault")
	}
	l.Isolate(map[int]bool{1: true})
	if reaches(via[nodes[1].PeerAddr]) {
		t.Error("link 0->1 passes with node 1 isolated")
	}
	if !reaches(via[nodes[2].PeerAddr]) {
		t.Error("link 0->2 is cut with node 1 isolated")
	}
	l.Heal()
	if !reaches(via[nodes[1].PeerAddr]) {
		t.Error("link 0->1 does not pass after Heal")
	}
}

func TestWaitReady_TimesOutAndHonoursContext(t *testing.T) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitReady(context.Background(), addrs[0], 100*time.Millisecond); err == nil {
		t.Error("WaitReady of nothing listening succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitReady(ctx, addrs[0], time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitReady with a cancelled context = %v, want context.Canceled", err)
	}
}
