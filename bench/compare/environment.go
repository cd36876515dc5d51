package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
)

// environment records what the numbers were measured with.
type environment struct {
	FencedCommit string            `json:"fenced_commit"`
	GoVersion    string            `json:"go_version"`
	Etcd         string            `json:"etcd"`
	Redis        string            `json:"redis"`
	ZooKeeper    string            `json:"zookeeper"`
	Java         string            `json:"java"`
	Clients      map[string]string `json:"client_libraries"`
	CPU          string            `json:"cpu"`
	Cores        int               `json:"cores"`
	MemTotal     string            `json:"mem_total"`
	Kernel       string            `json:"kernel"`
	OS           string            `json:"os"`
	DataDisk     string            `json:"data_disk"`
}

// collectEnvironment reads versions and the machine's description; a
// figure that cannot be read is "unknown".
func collectEnvironment(root, tmp string) environment {
	e := environment{
		FencedCommit: fencedCommit(root),
		GoVersion:    runtime.Version(),
		Etcd:         firstOutputLine(etcdBin, "--version"),
		Redis:        firstOutputLine(redisBin, "--version"),
		ZooKeeper:    firstOutputLine("dpkg-query", "-W", "-f=${Version}", "zookeeper"),
		Java:         firstOutputLine(javaBin, "-version"),
		Clients:      map[string]string{},
		Cores:        runtime.NumCPU(),
		CPU:          procField("/proc/cpuinfo", "model name"),
		MemTotal:     procField("/proc/meminfo", "MemTotal"),
		Kernel:       readTrim("/proc/sys/kernel/osrelease"),
		OS:           osRelease(),
		DataDisk:     dataDisk(tmp),
	}
	if e.ZooKeeper != "unknown" {
		e.ZooKeeper = "Debian package zookeeper " + e.ZooKeeper
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "go.etcd.io/etcd/client/v3", "github.com/go-zookeeper/zk", "github.com/redis/go-redis/v9":
				e.Clients[d.Path] = d.Version
			}
		}
	}
	return e
}

// fencedCommit is HEAD of the main module's repository, marked when the
// work tree has uncommitted changes (they are part of what was measured).
func fencedCommit(root string) string {
	head := firstOutputLine("git", "-C", root, "rev-parse", "--short=12", "HEAD")
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output()
	if err == nil && len(strings.TrimSpace(string(out))) > 0 {
		head += " (with uncommitted changes)"
	}
	return head
}

// firstOutputLine runs a command and returns the first line it prints
// (stdout or stderr), or "unknown".
func firstOutputLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	line := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	if err != nil || line == "" {
		return "unknown"
	}
	return line
}

// procField returns the value of the first "key : value" line of a /proc
// file whose key is key.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// osRelease is PRETTY_NAME from /etc/os-release.
func osRelease() string {
	v := procField("/etc/os-release", "PRETTY_NAME")
	if v != "unknown" {
		return v
	}
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(rest, `"`)
		}
	}
	return "unknown"
}

// dataDisk describes the file system that holds the data directories.
func dataDisk(dir string) string {
	out, err := exec.Command("df", "-P", "-T", dir).Output()
	if err != nil {
		return "unknown"
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 {
		return "unknown"
	}
	return fmt.Sprintf("%s on %s (%s)", f[1], f[0], dir)
}
