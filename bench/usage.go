package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ServerUsage is the resource use of the server processes during a
// measurement, summed over the processes.
type ServerUsage struct {
	// PIDs are the processes sampled.
	PIDs []int `json:"pids"`
	// CPUPercent is CPU time (user + system) over wall time; 100 is one
	// core busy.
	CPUPercent float64 `json:"cpu_percent"`
	// RSSMiB is the resident set size at the end of the measurement.
	RSSMiB float64 `json:"rss_mib"`
	// RSSBeforeMiB is the resident set size before the sessions workload
	// opened its holders; BytesPerSession is the growth divided by the
	// number of holders.
	RSSBeforeMiB    float64 `json:"rss_before_mib,omitempty"`
	BytesPerSession float64 `json:"bytes_per_session,omitempty"`

	rssBytes int64
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ), 100 on
// every Linux platform Go supports.
const clockTicks = 100

// usageSampler holds the CPU times of processes at the start of a
// measurement.
type usageSampler struct {
	pids []int
	cpu  time.Duration
}

func startUsage(pids []int) *usageSampler {
	if len(pids) == 0 {
		return nil
	}
	return &usageSampler{pids: pids, cpu: cpuOf(pids)}
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
	return &ServerUsage{
		PIDs:       s.pids,
		CPUPercent: 100 * float64(cpuOf(s.pids)-s.cpu) / float64(elapsed),
		RSSMiB:     float64(rss) / (1 << 20),
		rssBytes:   rss,
	}
}

// cpuOf returns the CPU time used so far by pids (and their waited-for
// children), as far as /proc tells.
func cpuOf(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses and may
		// contain spaces: state is field 3, utime 14, stime 15.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return total
}

// rssOf returns the summed resident set size of pids in bytes, 0 when none
// can be read.
func rssOf(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				total += kb << 10
				break
			}
		}
		_ = f.Close()
	}
	return total
}

// ProcessCPU returns the CPU time (user + system) the processes pids have
// used so far, as far as /proc tells.
func ProcessCPU(pids ...int) time.Duration { return cpuOf(pids) }

// ProcessRSS returns the summed resident set size of pids in bytes, 0 when
// none can be read.
func ProcessRSS(pids ...int) int64 { return rssOf(pids) }
