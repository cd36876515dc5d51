package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServerUsage is the resource use of the server processes during a
// measurement, summed over the processes and their descendants (a
// PostgreSQL's postmaster and its backends).
type ServerUsage struct {
	// PIDs are the processes sampled.
	PIDs []int `json:"pids"`
	// CPUPercent is CPU time (user + system) over wall time; 100 is one
	// core busy.
	CPUPercent float64 `json:"cpu_percent"`
	// CPUPercentPerPID is CPUPercent of each process, in the order of
	// PIDs (to tell a cluster's leader from its followers).
	CPUPercentPerPID []float64 `json:"cpu_percent_per_pid,omitempty"`
	// RSSMiB is the resident set size at the end of the measurement.
	RSSMiB float64 `json:"rss_mib"`
	// RSSBeforeMiB is the resident set size before the sessions workload
	// opened its holders; BytesPerSession is the growth divided by the
	// number of holders.
	RSSBeforeMiB    float64 `json:"rss_before_mib,omitempty"`
	BytesPerSession float64 `json:"bytes_per_session,omitempty"`
	// ReadCalls and WriteCalls count the read and write system calls the
	// processes made during the measurement (/proc/PID/io's syscr and
	// syscw: read, pread, readv, recvmsg, ... and write, pwrite, writev,
	// sendmsg, ...; a server's log writes are among them); 0 when /proc
	// does not tell (another user's process, or not Linux).
	ReadCalls  int64 `json:"read_calls,omitempty"`
	WriteCalls int64 `json:"write_calls,omitempty"`

	rssBytes int64
}

// ClientUsage is the CPU the benchmark's own process used during a
// measurement: the system's client library (for fenced, the SDK: its
// calls, streams, keep-alives and timers) and the workload's bookkeeping
// (a latency sample per cycle, the token checks), which is the same for
// every system. The clients of one Run are all in this process, so it is
// the clients' CPU.
type ClientUsage struct {
	// CPUPercent is this process's CPU time (user + system, children
	// excluded) over wall time; 100 is one core busy.
	CPUPercent float64 `json:"cpu_percent"`
	// ReadCalls and WriteCalls count this process's read and write system
	// calls during the measurement, as ServerUsage's do.
	ReadCalls  int64 `json:"read_calls,omitempty"`
	WriteCalls int64 `json:"write_calls,omitempty"`
}

// UsPerCycle returns CPU time per cycle in microseconds for a process
// busy cpuPercent at cyclesPerS, 0 when either is 0.
func UsPerCycle(cpuPercent, cyclesPerS float64) float64 {
	if cpuPercent <= 0 || cyclesPerS <= 0 {
		return 0
	}
	return cpuPercent / 100 * 1e6 / cyclesPerS
}

// clientSampler holds this process's CPU time at the start of a
// measurement; nil when it cannot be read.
type clientSampler struct {
	cpu    time.Duration
	io     ioCalls
	ioRead bool // io was read
}

func startClientUsage() *clientSampler {
	cpu, ok := selfCPU()
	if !ok {
		return nil
	}
	s := &clientSampler{cpu: cpu}
	s.io, s.ioRead = ioCallsOf([]int{os.Getpid()})
	return s
}

// stop returns this process's usage since startClientUsage over elapsed;
// nil when it could not be read.
func (s *clientSampler) stop(elapsed time.Duration) *ClientUsage {
	if s == nil || elapsed <= 0 {
		return nil
	}
	cpu, ok := selfCPU()
	if !ok {
		return nil
	}
	u := &ClientUsage{CPUPercent: 100 * float64(cpu-s.cpu) / float64(elapsed)}
	if end, ok := ioCallsOf([]int{os.Getpid()}); ok && s.ioRead {
		u.ReadCalls, u.WriteCalls = end.reads-s.io.reads, end.writes-s.io.writes
	}
	return u
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ), 100 on
// every Linux platform Go supports.
const clockTicks = 100

// usageSampler holds the CPU times of processes at the start of a
// measurement.
type usageSampler struct {
	pids   []int
	cpu    time.Duration
	each   []time.Duration // per pid
	io     ioCalls
	ioRead bool // io was read
}

func startUsage(pids []int) *usageSampler {
	if len(pids) == 0 {
		return nil
	}
	s := &usageSampler{pids: pids, cpu: cpuOf(pids)}
	s.io, s.ioRead = ioCallsOf(pids)
	for _, pid := range pids {
		s.each = append(s.each, cpuOf([]int{pid}))
	}
	return s
}

// stop returns the usage since startUsage, over wall time elapsed; nil
// when no processes were given or none could be read.
func (s *usageSampler) stop(elapsed time.Duration) *ServerUsage {
	if s == nil || elapsed <= 0 {
		return nil
	}
	rss := rssOf(s.pids)
	if rss <= 0 {
		return nil
	}
	u := &ServerUsage{
		PIDs:       s.pids,
		CPUPercent: 100 * float64(cpuOf(s.pids)-s.cpu) / float64(elapsed),
		RSSMiB:     float64(rss) / (1 << 20),
		rssBytes:   rss,
	}
	if end, ok := ioCallsOf(s.pids); ok && s.ioRead {
		u.ReadCalls, u.WriteCalls = end.reads-s.io.reads, end.writes-s.io.writes
	}
	if len(s.pids) > 1 {
		for i, pid := range s.pids {
			u.CPUPercentPerPID = append(u.CPUPercentPerPID, 100*float64(cpuOf([]int{pid})-s.each[i])/float64(elapsed))
		}
	}
	return u
}

// cpuOf returns the CPU time used so far by the process trees of pids:
// each process and its live descendants (a server that forks, as
// PostgreSQL forks a backend per connection and runuser forks the
// postmaster), each with its own user+system time and that of the children
// it has waited for (a backend that exited is counted in its parent's),
// as far as /proc tells.
func cpuOf(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range ProcessTree(pids) {
		f := statFields(pid)
		if len(f) < 15 {
			continue
		}
		var ticks int64
		for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
		total += time.Duration(ticks) * time.Second / clockTicks
	}
	return total
}

// ioCalls counts read and write system calls.
type ioCalls struct{ reads, writes int64 }

// ioCallsOf returns the read and write system calls made so far by the
// process trees of pids (/proc/PID/io's syscr and syscw, each process's
// threads together); ok is false when no process's counts could be read.
func ioCallsOf(pids []int) (total ioCalls, ok bool) {
	for _, pid := range ProcessTree(pids) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				continue
			}
			switch name {
			case "syscr":
				total.reads += n
				ok = true
			case "syscw":
				total.writes += n
			}
		}
	}
	return total, ok
}

// CPUTime returns the CPU time (user + system) the process trees of pids
// have used so far: each process, its live descendants and the children
// they waited for.
func CPUTime(pids []int) time.Duration { return cpuOf(pids) }

// statFields returns the fields of /proc/PID/stat after the command name
// (which is in parentheses and may contain spaces): f[0] is the state
// (field 3), f[1] the parent's pid, f[11] utime (field 14). Nil when the
// process is gone.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// ProcessTree returns pids and every live descendant of them (from the
// parent pids in /proc), each once, roots first.
func ProcessTree(pids []int) []int {
	if len(pids) == 0 {
		return nil
	}
	children := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if f := statFields(pid); len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				children[ppid] = append(children[ppid], pid)
			}
		}
	}
	seen := map[int]bool{}
	var out []int
	queue := append([]int{}, pids...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// rssOf returns the resident set size of the process trees of pids in
// bytes, 0 when none can be read. Shared memory (PostgreSQL's shared
// buffers, mapped by every backend) is counted once: the sum of each
// process's private and file-backed resident pages plus the largest
// shared resident size among them.
func rssOf(pids []int) int64 {
	var total, shmem int64
	for _, pid := range ProcessTree(pids) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var rss, sh int64
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rss = kib(rest)
			} else if rest, ok := strings.CutPrefix(line, "RssShmem:"); ok {
				sh = kib(rest)
			}
		}
		_ = f.Close()
		total += rss - sh
		shmem = max(shmem, sh)
	}
	if total+shmem <= 0 {
		return 0
	}
	return total + shmem
}

// kib parses a /proc/PID/status size ("  1234 kB") in bytes.
func kib(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(s), " kB"), 10, 64)
	return n << 10
}

// ProcessCPU returns the CPU time (user + system) the processes pids have
// used so far, as far as /proc tells.
func ProcessCPU(pids ...int) time.Duration { return cpuOf(pids) }

// ProcessRSS returns the summed resident set size of pids in bytes, 0 when
// none can be read.
func ProcessRSS(pids ...int) int64 { return rssOf(pids) }
