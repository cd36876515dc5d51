package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// etcdBin is where Debian's etcd-server package puts the server.
const etcdBin = "/usr/bin/etcd"

// startEtcd starts etcd members with default durability (fsync of the WAL
// on every commit; --unsafe-no-fsync is off) and default Raft timings.
func (c *cluster) startEtcd() error {
	bin, err := lookBin(etcdBin)
	if err != nil {
		return err
	}
	n := c.target.Nodes
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return err
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("n%d=http://%s", i+1, addrs[2*i+1]))
	}
	token := filepath.Base(c.dir)
	for i := range n {
		data := filepath.Join(c.dir, fmt.Sprintf("n%d", i+1))
		if err := os.Mkdir(data, 0o700); err != nil {
			return err
		}
		client, peer := "http://"+addrs[2*i], "http://"+addrs[2*i+1]
		p, err := startProcess(c.dir, fmt.Sprintf("etcd-n%d", i+1), bin,
			"--name", fmt.Sprintf("n%d", i+1),
			"--data-dir", data,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--logger", "zap",
			"--log-level", "warn",
		)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		c.endpoints = append(c.endpoints, addrs[2*i])
	}
	return c.waitHTTP("/health")
}
