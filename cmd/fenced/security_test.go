package main_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenced-dev/fenced/internal/launch"
	"github.com/fenced-dev/fenced/internal/proctest"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
)

// runFencedEnv runs a fenced client command with extra environment.
func runFencedEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, proctest.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("fenced %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// raftStatus is what the attack tests compare before and after an attack.
type raftStatus struct {
	Leader    string `json:"leader"`
	Term      uint64 `json:"term,string"`
	LastToken uint64 `json:"last_token,string"`
	Members   []struct {
		APIAddr string `json:"api_addr"`
	} `json:"members"`
}

// statusVia reads `fenced cluster status --json` with extra flags (TLS).
func statusVia(t *testing.T, env []string, endpoints string) raftStatus {
	t.Helper()
	out, errOut, code := runFencedEnv(t, env, "cluster", "status", "--json", "--endpoints", endpoints)
	var st raftStatus
	if code != 0 {
		t.Fatalf("cluster status: exit %d %q %s", code, out, errOut)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("cluster status: %v in %s", err, out)
	}
	return st
}

// acquireToken takes and releases lock name through the CLI and returns its
// token.
func cliAcquireToken(t *testing.T, env []string, endpoints, name string) uint64 {
	t.Helper()
	out, errOut, code := runFencedEnv(t, env, "acquire", name, "--ttl", "10s", "--json", "--endpoints", endpoints)
	if code != 0 {
		t.Fatalf("acquire %s: exit %d %q %s", name, code, out, errOut)
	}
	var g struct{ Token, Session, Secret string }
	if err := json.Unmarshal([]byte(out), &g); err != nil {
		t.Fatalf("acquire: %v in %q", err, out)
	}
	if out, errOut, code := runFencedEnv(t, env, "release", name, "--session", g.Session, "--secret", g.Secret, "--endpoints", endpoints); code != 0 {
		t.Fatalf("release %s: exit %d %q %s", name, code, out, errOut)
	}
	tok, err := strconv.ParseUint(g.Token, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// attacker is a Raft transport outside the cluster, as someone on the
// network would run it, sending RPCs that name it n9.
type attacker struct {
	trans *raft.NetworkTransport
	hdr   raft.RPCHeader
}

func newAttacker(t *testing.T, stream raft.StreamLayer, id string) *attacker {
	t.Helper()
	trans := raft.NewNetworkTransport(stream, 1, 2*time.Second, io.Discard)
	t.Cleanup(func() { trans.Close() })
	return &attacker{trans: trans, hdr: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(trans.LocalAddr())}}
}

// plainStream is a TCP stream layer; with cfg, every dial speaks TLS.
type plainStream struct {
	net.Listener
	cfg *tls.Config
}

func (s plainStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.cfg == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(d, "tcp", string(addr), s.cfg)
}

func listenStream(t *testing.T, cfg *tls.Config) plainStream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return plainStream{Listener: ln, cfg: cfg}
}

// heartbeat sends a heartbeat of a far later term, which makes a leader
// that believes it step down.
func (a *attacker) heartbeat(target string, term uint64) error {
	var resp raft.AppendEntriesResponse
	return a.trans.AppendEntries("", raft.ServerAddress(target), &raft.AppendEntriesRequest{RPCHeader: a.hdr, Term: term}, &resp)
}

// appendEntries sends an entry of a far later term to be committed at
// once, as a forged token reset would be.
func (a *attacker) appendEntries(target string, term uint64) error {
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{RPCHeader: a.hdr, Term: term, PrevLogEntry: 0, PrevLogTerm: 0, LeaderCommitIndex: 1 << 20,
		Entries: []*raft.Log{{Index: 1, Term: term, Type: raft.LogCommand, Data: []byte("forged")}}}
	return a.trans.AppendEntries("", raft.ServerAddress(target), req, &resp)
}

// requestVote asks for a vote in a far later term.
func (a *attacker) requestVote(target string, term uint64) error {
	var resp raft.RequestVoteResponse
	return a.trans.RequestVote("", raft.ServerAddress(target), &raft.RequestVoteRequest{RPCHeader: a.hdr, Term: term, LastLogIndex: 1 << 40, LastLogTerm: term}, &resp)
}

// timeoutNow tells a member to start an election now.
func (a *attacker) timeoutNow(target string) error {
	var resp raft.TimeoutNowResponse
	return a.trans.TimeoutNow("", raft.ServerAddress(target), &raft.TimeoutNowRequest{RPCHeader: a.hdr}, &resp)
}

// all sends every forged RPC to target and returns their errors.
func (a *attacker) all(target string, term uint64) []error {
	return []error{a.heartbeat(target, term+100), a.appendEntries(target, term+100), a.requestVote(target, term+100), a.timeoutNow(target)}
}

// mustFail sends every forged RPC to target and fails the test for each
// that was accepted.
func (a *attacker) mustFail(t *testing.T, target string, term uint64, what string) {
	t.Helper()
	for i, err := range a.all(target, term) {
		if err == nil {
			t.Errorf("%s: forged RPC %d accepted, want it refused", what, i)
		}
	}
}

// unchanged fails the test when the leader or its term moved.
func unchanged(t *testing.T, before, after raftStatus) {
	t.Helper()
	if after.Leader != before.Leader || after.Term != before.Term {
		t.Fatalf("after the forged RPCs: leader %s term %d, was %s term %d", after.Leader, after.Term, before.Leader, before.Term)
	}
}

// A forged heartbeat, AppendEntries, RequestVote or TimeoutNow from a host
// that is not a member (without TLS) is answered with a refusal and
// changes nothing: the leader stays, its term stays, tokens continue.
func TestPeerPort_RefusesNonMember(t *testing.T) {
	servers := proctest.StartCluster(t, 3)
	leader, followers := leaderOf(t, servers)
	eps := proctest.Endpoints(servers)
	first := cliAcquireToken(t, nil, eps, "a")
	before := statusVia(t, nil, leader.Addr)

	for _, id := range []string{"n9", followers[0].NodeID, leader.NodeID} {
		// n9 is no member; a member's id does not match the attacker's
		// address; the target's own id is never a peer.
		a := newAttacker(t, listenStream(t, nil), id)
		for _, target := range []*proctest.Server{leader, followers[0]} {
			for i, err := range a.all(target.PeerAddr, before.Term) {
				if err == nil || !strings.Contains(err.Error(), "peer refused") {
					t.Errorf("forged RPC %d as %s to %s: %v, want a refusal", i, id, target.NodeID, err)
				}
			}
		}
	}

	unchanged(t, before, statusVia(t, nil, leader.Addr))
	if next := cliAcquireToken(t, nil, eps, "a"); next != first+1 {
		t.Fatalf("token after the forged RPCs: %d, want %d", next, first+1)
	}
	if !strings.Contains(leader.Log(), "refused a peer") {
		t.Errorf("leader logged no refusal:\n%s", leader.Log())
	}
}

// A single node with no peers accepts no peer connection at all.
func TestPeerPort_SingleNodeRefusesAll(t *testing.T) {
	s := proctest.StartServer(t)
	first := cliAcquireToken(t, nil, s.Addr, "a")
	before := statusVia(t, nil, s.Addr)
	for _, id := range []string{"n2", "n1"} {
		newAttacker(t, listenStream(t, nil), id).mustFail(t, s.PeerAddr, before.Term, "as "+id)
	}
	unchanged(t, before, statusVia(t, nil, s.Addr))
	if next := cliAcquireToken(t, nil, s.Addr, "a"); next != first+1 {
		t.Fatalf("token after the forged RPCs: %d, want %d", next, first+1)
	}
	if !strings.Contains(s.Log(), "not the address of a member") {
		t.Errorf("no refused connection logged:\n%s", s.Log())
	}
}

// A 3-node cluster with TLS on the API and mutual TLS on the peer port
// serves through the TLS API (CA from flags or FENCED_CA), fails over when
// the leader is killed, and refuses peers without a node certificate of
// the cluster CA.
func TestTLSCluster(t *testing.T) {
	servers, dir := proctest.StartClusterTLS(t, 3)
	ca := filepath.Join(dir, tlsfiles.CACertFile)
	env := []string{"FENCED_CA=" + ca}
	leader, followers := leaderOfEnv(t, env, servers)
	eps := proctest.Endpoints(servers)

	// Without the CA the client cannot verify the servers.
	if out, errOut, code := runFenced(t, "status", "--endpoints", leader.Addr, "--timeout", "2s"); code == 0 {
		t.Fatalf("status without the CA: exit 0 %q %s", out, errOut)
	}
	first := cliAcquireToken(t, env, eps, "a")
	// A follower forwards to the leader over TLS.
	if out, errOut, code := runFenced(t, "status", "a", "--ca", ca, "--endpoints", followers[0].Addr); code != 0 {
		t.Fatalf("status through a follower with --ca: exit %d %q %s", code, out, errOut)
	}
	before := statusVia(t, env, leader.Addr)

	pool, err := tlsfiles.LoadPool(ca)
	if err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	if _, err := tlsfiles.InitCA(otherDir, time.Hour); err != nil {
		t.Fatal(err)
	}
	must := func(_, _ string, err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tlsfiles.Issue(otherDir, tlsfiles.Node, "n2", nil, time.Hour))
	must(tlsfiles.Issue(dir, tlsfiles.Client, "app", nil, time.Hour))
	must(tlsfiles.Issue(dir, tlsfiles.Node, "n9", nil, time.Hour))
	load := func(dir, name string) []tls.Certificate {
		c, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	attacks := map[string]*tls.Config{
		"no TLS":                nil,
		"no client certificate": {RootCAs: pool, ServerName: "localhost"},
		"node certificate of another CA naming a member": {InsecureSkipVerify: true, Certificates: load(otherDir, "n2")},
		"client certificate of the cluster CA":           {RootCAs: pool, ServerName: "localhost", Certificates: load(dir, "app")},
		"node certificate of the cluster CA, no member":  {RootCAs: pool, ServerName: "localhost", Certificates: load(dir, "n9")},
	}
	for name, cfg := range attacks {
		newAttacker(t, listenStream(t, cfg), "n2").mustFail(t, leader.PeerAddr, before.Term, name)
	}
	unchanged(t, before, statusVia(t, env, leader.Addr))

	leader.Kill()
	var survivors []string
	for _, s := range servers {
		if s != leader {
			survivors = append(survivors, s.Addr)
		}
	}
	if next := cliAcquireToken(t, env, strings.Join(survivors, ","), "a"); next <= first {
		t.Fatalf("token after failover: %d, want above %d", next, first)
	}
}

// leaderOfEnv is leaderOf with extra environment (TLS).
// stableLeader are Raft timings for cluster tests that need one leader
// throughout (they check that denied calls moved no leadership and that
// the leader audited a forwarded call): with the cluster tests' quick
// timings (proctest.ClusterTiming: a leader steps down after 150ms without
// a quorum's answer) a loaded machine elects new leaders now and then,
// which changes the term and the last token (a new leader's token
// reservation) whatever the calls did. With these, only a stall of 2s
// does. The flags come after ClusterTiming, so they win.
var stableLeader = []string{"--heartbeat-timeout", "2s", "--election-timeout", "2s", "--leader-lease-timeout", "2s"}

func leaderOfEnv(t *testing.T, env []string, servers []*proctest.Server) (*proctest.Server, []*proctest.Server) {
	t.Helper()
	var st raftStatus
	eventually(t, "a leader with every member registered", 20*time.Second, func() bool {
		st = statusVia(t, env, proctest.Endpoints(servers))
		registered := 0
		for _, m := range st.Members {
			if m.APIAddr != "" {
				registered++
			}
		}
		return st.Leader != "" && registered == len(servers)
	})
	var leader *proctest.Server
	var followers []*proctest.Server
	for _, s := range servers {
		if s.NodeID == st.Leader {
			leader = s
		} else {
			followers = append(followers, s)
		}
	}
	return leader, followers
}

// SIGHUP reloads the certificate: new connections get the new one; a file
// that does not load leaves the old one in use.
func TestTLS_ReloadOnSIGHUP(t *testing.T) {
	addrs := proctest.FreeAddrs(t, 2)
	nodes := []launch.Node{{ID: "n1", Addr: addrs[0], PeerAddr: addrs[1], DataDir: t.TempDir()}}
	dir := t.TempDir()
	if err := launch.IssueCerts(dir, nodes); err != nil {
		t.Fatal(err)
	}
	s := &proctest.Server{NodeID: "n1", Addr: addrs[0], PeerAddr: addrs[1], DataDir: nodes[0].DataDir, CertsDir: dir}
	s.Init(t)
	s.Start()
	t.Cleanup(s.Kill)

	pool, err := tlsfiles.LoadPool(filepath.Join(dir, tlsfiles.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string {
		c, err := tls.Dial("tcp", s.Addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err != nil {
			t.Fatalf("TLS dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	old := serial()

	// A new certificate for n1, moved over the files the server reads.
	if _, _, err := tlsfiles.Issue(dir, tlsfiles.Node, "n1-new", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".crt", ".key"} {
		if err := os.Rename(filepath.Join(dir, "n1-new"+ext), filepath.Join(dir, "n1"+ext)); err != nil {
			t.Fatal(err)
		}
	}
	want := serialOf(t, filepath.Join(dir, "n1.crt"))
	if serial() != old {
		t.Fatal("certificate changed before SIGHUP")
	}
	if err := s.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new certificate served", 10*time.Second, func() bool { return serial() == want })

	// A broken file: the reload fails, the certificate in use stays.
	if err := os.WriteFile(filepath.Join(dir, "n1.crt"), []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Signal(syscall.SIGHUP)
	eventually(t, "the failed reload logged", 10*time.Second, func() bool { return strings.Contains(s.Log(), "TLS reload failed") })
	if got := serial(); got != want {
		t.Fatalf("after a failed reload the server presents serial %s, want %s still", got, want)
	}
}

func serialOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// Without TLS the server serves loopback only; --insecure-listen-any lets it
// serve every interface, with a warning saying what is open.
func TestServe_LoopbackUnlessInsecureListenAny(t *testing.T) {
	addrs := proctest.FreeAddrs(t, 2)
	_, port, _ := net.SplitHostPort(addrs[0])
	args := []string{"serve", "--listen", "0.0.0.0:" + port, "--peer-listen", addrs[1], "--data-dir", t.TempDir()}
	_, errOut, code := runFenced(t, args...)
	if code != 2 || !strings.Contains(errOut, "--insecure-listen-any") {
		t.Fatalf("serve on 0.0.0.0 without TLS: exit %d %s, want 2 naming --insecure-listen-any", code, errOut)
	}
	f := startFenced(t, nil, append(args, "--insecure-listen-any")...)
	if err := launch.WaitReady(context.Background(), "127.0.0.1:"+port, 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, f.stderr.String())
	}
	if log := f.stderr.String(); !strings.Contains(log, `"level":"WARN","msg":"API served without TLS beyond loopback`) {
		t.Fatalf("no warning about the open API:\n%s", log)
	}
}

// With mutual TLS a node started with --join is let in once it is being
// added: it catches up, registers its API and serves through forwarding.
func TestTLS_JoinNode(t *testing.T) {
	addrs := proctest.FreeAddrs(t, 4)
	nodes := []launch.Node{
		{ID: "n1", Addr: addrs[0], PeerAddr: addrs[1], DataDir: t.TempDir()},
		{ID: "n2", Addr: addrs[2], PeerAddr: addrs[3], DataDir: t.TempDir()},
	}
	dir := t.TempDir()
	if err := launch.IssueCerts(dir, nodes); err != nil {
		t.Fatal(err)
	}
	servers := make([]*proctest.Server, 2)
	for i, n := range nodes {
		servers[i] = &proctest.Server{NodeID: n.ID, Addr: n.Addr, PeerAddr: n.PeerAddr, DataDir: n.DataDir, CertsDir: dir, Args: append([]string{}, proctest.ClusterTiming...)}
		servers[i].Init(t)
		t.Cleanup(servers[i].Kill)
	}
	servers[1].Args = append(servers[1].Args, "--join")
	servers[0].Start()
	servers[1].StartNoWait()

	env := []string{"FENCED_CA=" + filepath.Join(dir, tlsfiles.CACertFile)}
	if out, errOut, code := runFencedEnv(t, env, "cluster", "add", "n2", nodes[1].PeerAddr, "--endpoints", nodes[0].Addr); code != 0 {
		t.Fatalf("cluster add n2: exit %d %q %s", code, out, errOut)
	}
	_, followers := leaderOfEnv(t, env, servers)
	if len(followers) != 1 || followers[0].NodeID != "n2" {
		t.Fatalf("followers %v, want n2", followers)
	}
	cliAcquireToken(t, env, nodes[1].Addr, "through-n2")
}

// A node does not start with another node's peer certificate, nor with
// half of a TLS identity.
func TestServe_TLSFlagsChecked(t *testing.T) {
	dir := t.TempDir()
	addrs := proctest.FreeAddrs(t, 2)
	nodes := []launch.Node{{ID: "n2", Addr: addrs[0], PeerAddr: addrs[1], DataDir: t.TempDir()}}
	if err := launch.IssueCerts(dir, nodes); err != nil {
		t.Fatal(err)
	}
	cert, key, ca := filepath.Join(dir, "n2.crt"), filepath.Join(dir, "n2.key"), filepath.Join(dir, tlsfiles.CACertFile)
	base := []string{"serve", "--node-id", "n1", "--listen", addrs[0], "--peer-listen", addrs[1], "--data-dir", t.TempDir()}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--peer-cert", cert, "--peer-key", key, "--peer-ca", ca}, 1, `names node "n2", not this node "n1"`},
		{[]string{"--peer-cert", cert, "--peer-key", key}, 2, "--peer-ca"},
		{[]string{"--cert", cert}, 2, "--key"},
	} {
		_, errOut, code := runFenced(t, append(base, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("serve %v: exit %d %s, want %d naming %s", c.args, code, errOut, c.code, c.want)
		}
	}
}
