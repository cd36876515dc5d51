package testdb

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"
)

// Postgres is a throwaway PostgreSQL server.
type Postgres struct {
	// URL is a connection string for the superuser "postgres" and the
	// database "postgres", e.g. postgres://postgres@127.0.0.1:PORT/postgres.
	URL string
	// Port is the server's loopback port.
	Port    int
	dir     string
	bin     string
	asUser  []string // prefix that runs a command as the postgres user when we are root
	logFile string
}

// postgresBin finds the newest installed PostgreSQL server binaries.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("testdb: PostgreSQL server not installed (no initdb); run scripts/test.sh or: apt-get install -y postgresql")
}

// StartPostgres initialises and starts a PostgreSQL server in a new
// temporary directory, listening on 127.0.0.1 only, with trust
// authentication. Call Stop when done.
func StartPostgres() (*Postgres, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fenced-pg-")
	if err != nil {
		return nil, err
	}
	p := &Postgres{dir: dir, bin: bin, logFile: filepath.Join(dir, "server.log")}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("testdb: running as root needs the postgres user (apt-get install -y postgresql): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := p.run(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		p.Stop()
		return nil, fmt.Errorf("testdb: initdb: %v\n%s", err, out)
	}
	for attempt := 0; attempt < 5; attempt++ {
		p.Port, err = freePort()
		if err != nil {
			break
		}
		var out []byte
		out, err = p.start()
		if err == nil {
			p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
			return p, nil
		}
		err = fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	log, _ := os.ReadFile(p.logFile)
	p.Stop()
	return nil, fmt.Errorf("testdb: start PostgreSQL: %v\nserver log:\n%s", err, log)
}

// start starts the server of p.dir on p.Port.
func (p *Postgres) start() ([]byte, error) {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c fsync=off -c max_connections=200", p.Port, p.dir)
	return p.run(filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-l", p.logFile, "-o", opts, "-w", "-t", "60", "start")
}

// Restart stops the server abruptly (an immediate shutdown: no
// checkpoint, crash recovery at the next start, like a kill -9 of the
// postmaster) and starts it again on the same port with its data. Open
// connections are broken.
func (p *Postgres) Restart() error {
	if out, err := p.run(filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "-t", "30", "stop"); err != nil {
		return fmt.Errorf("testdb: stop PostgreSQL: %v\n%s", err, out)
	}
	if out, err := p.start(); err != nil {
		log, _ := os.ReadFile(p.logFile)
		return fmt.Errorf("testdb: restart PostgreSQL: %v\n%s\nserver log:\n%s", err, out, log)
	}
	return nil
}

func (p *Postgres) run(name string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, p.asUser...), append([]string{name}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// Stop stops the server and removes its directory.
func (p *Postgres) Stop() {
	if p.Port != 0 {
		p.run(filepath.Join(p.bin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "-t", "30", "stop")
	}
	os.RemoveAll(p.dir)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitPort waits until addr accepts connections.
func waitPort(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
