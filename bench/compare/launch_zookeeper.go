package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The Debian zookeeper package's server jar (its manifest names the
// dependency jars) and the JVM.
const (
	zkJar   = "/usr/share/java/zookeeper.jar"
	javaBin = "/usr/bin/java"
	zkMain  = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
)

// startZooKeeper starts a standalone ZooKeeper (the class the package's
// zkServer.sh runs, with the JVM's default flags as the package has them).
// Durability is ZooKeeper's default: forceSync=yes, the transaction log is
// fsynced before a write is acknowledged. maxClientCnxns=0 lifts the
// per-address limit of 60 connections, because every ZooKeeper session is
// a connection of its own and all clients here come from 127.0.0.1.
func (c *cluster) startZooKeeper() error {
	if _, err := lookBin(javaBin); err != nil {
		return err
	}
	if _, err := lookBin(zkJar); err != nil {
		return err
	}
	addrs, err := freeAddrs(1)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	cfg := strings.Join([]string{
		"tickTime=2000",
		"dataDir=" + filepath.Join(c.dir, "data"),
		"dataLogDir=" + filepath.Join(c.dir, "txlog"),
		"clientPort=" + port,
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=ruok,srvr",
		"",
	}, "\n")
	cfgPath := filepath.Join(c.dir, "zoo.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}
	p, err := startProcess(c.dir, "zookeeper", javaBin,
		"-Dzookeeper.log.dir="+c.dir,
		"-cp", zkJar, zkMain, cfgPath)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	c.endpoints = addrs
	return p.waitFor(60*time.Second, func() error { return zkRuok(addrs[0]) })
}

// zkRuok sends the four-letter command ruok and wants imok.
func zkRuok(addr string) error {
	out, err := zkFourLetter(addr, "ruok")
	if err != nil {
		return err
	}
	if out != "imok" {
		return fmt.Errorf("ruok answered %q", out)
	}
	return nil
}

// zkFourLetter sends a four-letter command and returns the answer.
func zkFourLetter(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return strings.TrimSpace(string(b)), err
}
