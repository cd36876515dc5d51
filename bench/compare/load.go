package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-dev/fenced/bench"
)

// clockTicks is the unit of /proc CPU times (USER_HZ), 100 on Linux.
const clockTicks = 100

// loadSample is a snapshot of CPU time used: by the whole machine, by this
// runner (the clients) and by the servers.
type loadSample struct {
	at                     time.Time
	machine, self, servers float64 // seconds
}

// sampleLoad reads the CPU times now.
func sampleLoad(pids []int) loadSample {
	s := loadSample{at: time.Now(), self: procCPU("self")}
	// The servers' process trees: PostgreSQL's backends are children of
	// its postmaster, itself a child of runuser when run as root.
	s.servers = bench.CPUTime(pids).Seconds()
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line := strings.SplitN(string(b), "\n", 2)[0]
		f := strings.Fields(line)
		// cpu user nice system idle iowait irq softirq steal ...
		for i, v := range f[1:] {
			n, _ := strconv.ParseFloat(v, 64)
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			if i >= 8 { // guest times are already in user
				break
			}
			s.machine += n / clockTicks
		}
	}
	return s
}

// procCPU is the user+system CPU seconds of /proc/<id>.
func procCPU(id string) float64 {
	b, err := os.ReadFile("/proc/" + id + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / clockTicks
}

// machineLoad is the CPU use, in percent of one core, over a measurement:
// the clients (this runner), the servers, and every other process on the
// machine (other work sharing it).
type machineLoad struct {
	ClientsPct float64 `json:"clients_cpu_percent"`
	ServersPct float64 `json:"servers_cpu_percent"`
	OthersPct  float64 `json:"others_cpu_percent"`
}

// loadSince returns the load from a to now.
func loadSince(a loadSample, pids []int) machineLoad {
	b := sampleLoad(pids)
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return machineLoad{}
	}
	pct := func(x float64) float64 { return 100 * x / wall }
	l := machineLoad{ClientsPct: pct(b.self - a.self), ServersPct: pct(b.servers - a.servers)}
	l.OthersPct = max(0, pct(b.machine-a.machine)-l.ClientsPct-l.ServersPct)
	return l
}

func (l machineLoad) String() string {
	return fmt.Sprintf("cpu: clients %.0f%% servers %.0f%% others %.0f%%", l.ClientsPct, l.ServersPct, l.OthersPct)
}
