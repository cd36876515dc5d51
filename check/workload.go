package check

import (
	"fmt"
	"slices"
	"strings"
)

// The workloads: the primitives the workers exercise, as named by
// --workload. Each has Config.Locks objects, named by a prefix that tells
// a worker which primitive an object is (workloadOf).
const (
	// WorkloadLock: exclusive locks "lock-N" (with a session or as TTL
	// locks), each guarding the kv key of its name.
	WorkloadLock = "lock"
	// WorkloadSemaphore: semaphores "sem-N" of Config.Capacity permits;
	// each permit's holder writes the kv key of its slot, "sem-N/SLOT".
	WorkloadSemaphore = "semaphore"
	// WorkloadRWLock: read/write locks "rw-N"; readers read the kv key of
	// its name, writers write it.
	WorkloadRWLock = "rwlock"
	// WorkloadElection: elections "elect-N"; the leader writes the kv key
	// of its name under its term token.
	WorkloadElection = "election"
)

// AllWorkloads lists every workload.
var AllWorkloads = []string{WorkloadLock, WorkloadSemaphore, WorkloadRWLock, WorkloadElection}

// namePrefix is the prefix of each workload's object names.
var namePrefix = map[string]string{
	WorkloadLock: "lock-", WorkloadSemaphore: "sem-", WorkloadRWLock: "rw-", WorkloadElection: "elect-",
}

// ParseWorkloads parses "lock,semaphore,...". "all" means every workload.
func ParseWorkloads(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		return AllWorkloads, nil
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		if !slices.Contains(AllWorkloads, w) {
			return nil, fmt.Errorf("unknown workload %q; want some of %s, or all", w, strings.Join(AllWorkloads, ","))
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no workload; want some of %s, or all", strings.Join(AllWorkloads, ","))
	}
	return out, nil
}

// objectNames are the names of n objects of each workload, in the order
// of workloads.
func objectNames(workloads []string, n int) []string {
	var names []string
	for _, w := range workloads {
		for i := 0; i < n; i++ {
			names = append(names, fmt.Sprintf("%s%d", namePrefix[w], i))
		}
	}
	return names
}

// workloadOf is the workload of an object name; a name of no known prefix
// is a lock's.
func workloadOf(name string) string {
	for _, w := range AllWorkloads {
		if strings.HasPrefix(name, namePrefix[w]) {
			return w
		}
	}
	return WorkloadLock
}

// slotKey is the kv key of a semaphore slot, the permit's scope.
func slotKey(name string, slot int) string { return fmt.Sprintf("%s/%d", name, slot) }
