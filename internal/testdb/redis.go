package testdb

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
)

// Redis is a throwaway redis-server.
type Redis struct {
	// Addr is the server's host:port on loopback.
	Addr string
	dir  string
	cmd  *exec.Cmd
}

// StartRedis starts redis-server on a free loopback port with a temporary
// directory and append-only persistence off. Call Stop when done.
func StartRedis() (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("testdb: redis-server not installed; run scripts/test.sh or: apt-get install -y redis-server")
	}
	dir, err := os.MkdirTemp("", "fenced-redis-")
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			break
		}
		r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		r.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes")
		if err := r.cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("testdb: start redis-server: %w", err)
		}
		if err := waitPort(r.Addr, 10*time.Second); err == nil {
			return r, nil
		}
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("testdb: redis-server did not start on a free port")
}

// Stop kills the server and removes its directory.
func (r *Redis) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	os.RemoveAll(r.dir)
}
