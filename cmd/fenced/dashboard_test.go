package main_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/proctest"
)

// The dashboard in a real headless Chromium (Debian's chromium package),
// against real fenced processes: what it shows must follow the cluster
// within the bounds the docs promise (docs/dashboard.md).

// uiDeadline is how soon after a change the page must show it.
const uiDeadline = 2 * time.Second

// chromiumPath finds the browser. Without one the test skips, unless CI is
// set: CI installs it (scripts/test.sh), so there its absence is a failure.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed and CI is set: scripts/test.sh installs Debian's chromium package; the dashboard's browser test cannot run without it")
	}
	t.Skip("chromium is not installed (apt-get install chromium, or run scripts/test.sh): skipping the dashboard's browser test")
	return ""
}

// browser opens url in a fresh headless Chromium, waits until the page is
// live and returns its context.
func browser(t *testing.T, url string) context.Context {
	t.Helper()
	return browserAt(t, url, "live")
}

// browserAt is browser waiting until the page's connection state is conn.
func browserAt(t *testing.T, url, conn string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // tests may run as root
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser, which lives as long as that run's
	// context: no timeout on it (the test binary's bounds it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The browser's start-up is not the dashboard's latency: bound it
	// generously on a loaded machine.
	nav, cancelNav := context.WithTimeout(ctx, 60*time.Second)
	defer cancelNav()
	if err := chromedp.Do(nav, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s in chromium: %v", url, err)
	}
	waitPage(t, ctx, "#conn", conn, 30*time.Second)
	return ctx
}

// pageText returns the text of the element sel names, "" when none.
func pageText(ctx context.Context, sel string) (string, error) {
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : ""; })()`, sel)
	return chromedp.Run(ctx, chromedp.Evaluate[string](js))
}

// waitPage waits until the element sel names shows want, within d, and
// returns how long it took.
func waitPage(t *testing.T, ctx context.Context, sel, want string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got string
	for {
		var err error
		got, err = pageText(ctx, sel)
		if err != nil {
			t.Fatalf("read %s from the page: %v", sel, err)
		}
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("after %v the page shows %s = %q, want %q", d, sel, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDashboard_LockHolderWaitersRelease drives a lock through the API and
// checks the page: holder and token within 2s of the grant, waiters in
// queue order, the next holder after a release.
func TestDashboard_LockHolderWaitersRelease(t *testing.T) {
	chromiumPath(t)
	srv := proctest.StartServer(t)
	ctx := browser(t, "http://"+srv.Addr+"/ui/")
	c := quietClient(t, srv.Addr)
	tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	session := func() *client.Session {
		s, err := c.NewSession(tctx, client.WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	const name = "orders/42"
	row := `tr[data-lock="` + name + `"] `
	a, b, d := session(), session(), session()
	ma := client.NewMutex(a, name)
	if err := ma.Lock(tctx); err != nil {
		t.Fatal(err)
	}
	took := waitPage(t, ctx, row+"td.holder", strconv.FormatUint(a.ID(), 10), uiDeadline)
	tokA := ma.Token()
	waitPage(t, ctx, row+"td.token", tokA.String(), uiDeadline)
	t.Logf("holder shown %v after the grant", took)

	// Two waiters, queued one after the other: the page lists them in
	// queue order.
	mb, md := client.NewMutex(b, name), client.NewMutex(d, name)
	lockedB := make(chan error, 1)
	go func() { lockedB <- mb.Lock(tctx) }()
	waitPage(t, ctx, row+"td.waiters", strconv.FormatUint(b.ID(), 10), uiDeadline)
	lockedD := make(chan error, 1)
	go func() { lockedD <- md.Lock(tctx) }()
	waitPage(t, ctx, row+"td.waiters", fmt.Sprintf("%d, %d", b.ID(), d.ID()), uiDeadline)

	if err := ma.Unlock(tctx); err != nil {
		t.Fatal(err)
	}
	if err := <-lockedB; err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, row+"td.holder", strconv.FormatUint(b.ID(), 10), uiDeadline)
	waitPage(t, ctx, row+"td.token", mb.Token().String(), uiDeadline)
	waitPage(t, ctx, row+"td.waiters", strconv.FormatUint(d.ID(), 10), uiDeadline)
	saveScreenshot(t, ctx)
	if mb.Token() <= tokA {
		t.Fatalf("next holder's token %v is not above %v", mb.Token(), tokA)
	}
	// The timeline shows the grants, newest first.
	tl, err := pageText(ctx, "#timeline")
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf("grant   lock %s → session %d, token %v", name, b.ID(), mb.Token())
	earlier := fmt.Sprintf("grant   lock %s → session %d, token %v", name, a.ID(), tokA)
	if i, j := strings.Index(tl, first), strings.Index(tl, earlier); i < 0 || j < 0 || i > j {
		t.Fatalf("timeline %q does not show %q before %q", tl, first, earlier)
	}
}

// TestDashboard_MemberKilledShowsDown opens the page on a member of a
// 3-node cluster of real processes and SIGKILLs the leader it shows (or,
// when the page's member leads, another member): the page shows every
// member up, then the killed one down, and after a leader's death another
// leader.
func TestDashboard_MemberKilledShowsDown(t *testing.T) {
	chromiumPath(t)
	servers := proctest.StartCluster(t, 3)
	page := servers[0]
	ctx := browser(t, "http://"+page.Addr+"/ui/")
	for _, s := range servers {
		waitPage(t, ctx, `tr[data-member="`+s.NodeID+`"] td.state`, "up", 10*time.Second)
	}
	var victim *proctest.Server
	waitFor(t, 10*time.Second, func() bool {
		shown, err := pageText(ctx, "#leader")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range servers[1:] {
			if s.NodeID == shown {
				victim = s
			}
		}
		if shown == page.NodeID {
			victim = servers[1] // a follower; the page's member stays up
		}
		return victim != nil
	})
	wasLeader, _ := pageText(ctx, "#leader")
	victim.Kill()
	took := waitPage(t, ctx, `tr[data-member="`+victim.NodeID+`"] td.state`, "down", 10*time.Second)
	t.Logf("killed %s (leader shown: %s) shown down after %v", victim.NodeID, wasLeader, took)
	if wasLeader == victim.NodeID {
		waitFor(t, 30*time.Second, func() bool {
			got, err := pageText(ctx, "#leader")
			if err != nil {
				t.Fatal(err)
			}
			return got != victim.NodeID && got != "none" && got != ""
		})
	}
	for _, s := range servers {
		if s != victim {
			waitPage(t, ctx, `tr[data-member="`+s.NodeID+`"] td.state`, "up", 10*time.Second)
		}
	}
}

// TestDashboard_AuthNeedsTokenAndFilters runs a server with an auth file:
// the page asks for a token and shows nothing without one; the snapshot
// call is refused without one; with a token that may read only orders/,
// the page shows the lock under orders/ and not the one under billing/.
func TestDashboard_AuthNeedsTokenAndFilters(t *testing.T) {
	chromiumPath(t)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.jsonl")
	newToken(t, authFile, "admin", "=admin,read,acquire")
	newToken(t, authFile, "viewer", "orders/=read")
	srv := proctest.StartServer(t, "--auth-file", authFile)
	readToken := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name+".token"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}

	resp, err := http.Get("http://" + srv.Addr + "/ui/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("snapshot without a token: %s, want 401", resp.Status)
	}

	ctx := browserAt(t, "http://"+srv.Addr+"/ui/", "needs a token")
	admin, err := client.New([]string{srv.Addr}, client.WithBearerToken(readToken("admin")))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := admin.NewSession(tctx, client.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for _, name := range []string{"orders/1", "billing/1"} {
		if err := client.NewMutex(s, name).Lock(tctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(() => { document.getElementById("token").value = %q; document.getElementById("auth-form").requestSubmit(); return true; })()`, readToken("viewer")))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "#conn", "live", 10*time.Second)
	waitPage(t, ctx, `tr[data-lock="orders/1"] td.holder`, strconv.FormatUint(s.ID(), 10), uiDeadline)
	if got, _ := pageText(ctx, `tr[data-lock="billing/1"]`); got != "" {
		t.Fatalf("a token that may read only orders/ sees billing/1: %q", got)
	}
	if got, _ := pageText(ctx, "#token"); got != "" {
		t.Fatalf("the token field still holds %q", got)
	}
	notes, _ := pageText(ctx, "#notes")
	if !strings.Contains(notes, "hidden") {
		t.Fatalf("notes %q do not say that objects are hidden", notes)
	}
}

// saveScreenshot writes a PNG of the page to the file named by
// FENCED_DASHBOARD_SCREENSHOT, when it is set: the README's picture of the
// dashboard (docs/dashboard.png) is made this way, by this test, with
// FENCED_DASHBOARD_SCREENSHOT=$PWD/docs/dashboard.png go test -run
// TestDashboard_LockHolderWaitersRelease ./cmd/fenced/
func saveScreenshot(t *testing.T, ctx context.Context) {
	path := os.Getenv("FENCED_DASHBOARD_SCREENSHOT")
	if path == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the dashboard written to %s (%d bytes)", path, len(png))
}
