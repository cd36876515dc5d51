package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// buildFenced builds the fenced binary from the main module at root into
// dir, so every invocation measures the server source as it is now.
func buildFenced(root, dir string) (string, error) {
	bin := filepath.Join(dir, "fenced")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/fenced")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/fenced in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// startFenced starts `fenced serve` nodes with their default Raft timings
// and durability (fsync per commit); several nodes bootstrap one cluster
// through --initial-cluster.
func (c *cluster) startFenced(bin string) error {
	n := c.target.Nodes
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("n%d=%s", i+1, addrs[2*i+1]))
	}
	for i := range n {
		data := filepath.Join(c.dir, fmt.Sprintf("n%d", i+1))
		if err := os.Mkdir(data, 0o755); err != nil {
			return err
		}
		args := []string{"serve", "--data-dir", data, "--listen", addrs[2*i], "--peer-listen", addrs[2*i+1], "--node-id", fmt.Sprintf("n%d", i+1)}
		// Every benchmark client comes from this one machine: lift the
		// per-source limits that would cap the sessions workload.
		args = append(args, "--max-sessions-per-source", "0", "--max-grants-per-source", "0", "--max-waiters-per-source", "0", "--session-rate", "0", "--max-conns-per-source", "0")
		if n > 1 {
			args = append(args, "--initial-cluster", strings.Join(initial, ","))
		}
		p, err := startProcess(c.dir, fmt.Sprintf("fenced-n%d", i+1), bin, args...)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		c.endpoints = append(c.endpoints, addrs[2*i])
	}
	return c.waitHTTP("/readyz")
}

// waitHTTP waits until every process of c answers 200 to GET path on its
// endpoint.
func (c *cluster) waitHTTP(path string) error {
	for i, p := range c.procs {
		url := "http://" + c.endpoints[i] + path
		if err := p.waitFor(60*time.Second, func() error { return httpOK(url) }); err != nil {
			return err
		}
	}
	return nil
}

// httpOK returns nil when GET url answers 200.
func httpOK(url string) error {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
