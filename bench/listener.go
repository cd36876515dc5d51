package bench

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListenerPID returns the id of the local process listening on addr's TCP
// port (host:port), found through /proc. It fails when addr is not on this
// machine, nothing listens on the port, or the process cannot be seen
// (another user's, without privileges).
func ListenerPID(addr string) (int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("bench: address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bench: address %q: port %q is not a number 0–65535", addr, portText)
	}
	if !isLocalHost(host) {
		return 0, fmt.Errorf("bench: %s is not on this machine", addr)
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		listeningInodes(table, int(port), inodes)
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("bench: nothing listens on port %d here", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		link, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
			pid, err := strconv.Atoi(strings.Split(fd, "/")[2])
			if err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("bench: cannot see the process listening on port %d", port)
}

// listeningInodes adds to inodes the socket inodes of table's (a
// /proc/net/tcp file) listening sockets on port.
func listeningInodes(table string, port int, inodes map[string]bool) {
	f, err := os.Open(table)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	want := fmt.Sprintf(":%04X", port)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local_address rem_address st ... inode (field 9)
		if len(f) < 10 || !strings.HasSuffix(f[1], want) || f[3] != "0A" {
			continue
		}
		inodes[f[9]] = true
	}
}

// isLocalHost reports whether host names this machine.
func isLocalHost(host string) bool {
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return true
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
