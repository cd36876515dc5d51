package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fenced-dev/fenced/bench"
	"github.com/fenced-dev/fenced/pggrant"
)

// postgresBinDir is where Debian's postgresql-15 package puts the server.
const postgresBinDir = "/usr/lib/postgresql/15/bin"

// startPostgres starts one PostgreSQL 15 with its default durability
// (fsync on, synchronous_commit on: every grant and release is flushed
// before it is answered), for the PostgreSQL grantor (pggrant). As root it
// runs the server as the postgres user, which PostgreSQL requires.
func (c *cluster) startPostgres() error {
	pgBin, err := lookBin(filepath.Join(postgresBinDir, "postgres"))
	if err != nil {
		return err
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	data := filepath.Join(c.dir, "data")
	var asUser []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The postgres user must reach the data dir: let it through the
		// directories above it that keep others out (the temporary ones
		// this program or its test made).
		for d := c.dir; d != filepath.Dir(d); d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil {
				return err
			}
			if fi.Mode().Perm()&0o001 != 0 {
				continue
			}
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return err
			}
		}
		if err := os.Mkdir(data, 0o700); err != nil {
			return err
		}
		if err := os.Chown(data, uid, gid); err != nil {
			return err
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	initdb := append(append([]string{}, asUser...), filepath.Join(postgresBinDir, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C")
	if out, err := exec.Command(initdb[0], initdb[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	args := []string{pgBin, "-D", data, "-c", "listen_addresses=127.0.0.1", "-c", "port=" + port, "-c", "unix_socket_directories=", "-c", "max_connections=200"}
	bin := pgBin
	if asUser != nil {
		bin, _ = exec.LookPath(asUser[0])
		args = append(asUser[1:], args...)
	} else {
		args = args[1:]
	}
	p, err := startProcess(c.dir, "postgres", bin, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	// A pool as large as the most lockers of a case (plus the grantor's
	// listener), as a service with that many concurrent callers would
	// size it; pgx's default of max(4, CPUs) queues 16 lockers behind 4
	// connections and measures the pool, not the grantor.
	c.endpoints = []string{fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable&pool_max_conns=70", addrs[0])}
	// Ready once it accepts a session; the (idempotent) migration is
	// the check.
	dsn := c.endpoints[0]
	return p.waitFor(60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return pggrant.MigrateDSN(ctx, dsn)
	})
}

// pgGrantor returns the bench.System of a pggrant Grantor on the
// (migrated) database at dsn.
func pgGrantor(dsn string) (bench.System, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := pggrant.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return bench.NewGrantor("pggrant", g, g), nil
}
