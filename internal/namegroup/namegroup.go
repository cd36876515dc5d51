// Package namegroup maps names (of locks, of guarded objects) to a bounded
// set of metric label values, so that per-name metrics never grow one
// series per raw name unless asked to.
package namegroup

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Label values that are not a prefix of a name.
const (
	// Other is the group of a name under none of the configured groups.
	Other = "_other"
	// Overflow is the group of a name whose prefix came after MaxGroups
	// distinct groups were already in use.
	Overflow = "_overflow"
)

// Defaults of Config.
const (
	DefaultDepth     = 1
	DefaultMaxGroups = 100
)

// Config says how names are grouped.
type Config struct {
	// Groups, when set, are the only groups: a name is counted under the
	// longest of them it starts with, or under Other. Depth is then
	// ignored.
	Groups []string
	// Depth, without Groups, groups a name by its first Depth
	// "/"-separated segments ("orders/eu/42" is "orders/" at depth 1,
	// "orders/eu/" at depth 2; a name with fewer segments is itself). 0
	// puts every name in the group "". A negative depth is refused.
	// Default DefaultDepth.
	Depth int
	// MaxGroups caps the distinct groups a Grouper hands out; later ones
	// are Overflow. 0 means DefaultMaxGroups; a negative value is refused.
	MaxGroups int
}

// Validate explains a Config that New would refuse.
func (c Config) Validate() error {
	if c.Depth < 0 {
		return fmt.Errorf("metrics prefix depth %d is negative; use 0 (one group) or more", c.Depth)
	}
	if c.MaxGroups < 0 {
		return fmt.Errorf("metrics max groups %d is negative; use 0 for the default %d", c.MaxGroups, DefaultMaxGroups)
	}
	seen := map[string]bool{}
	for _, g := range c.Groups {
		if g == "" {
			return fmt.Errorf("metrics group is empty; name a prefix such as orders/")
		}
		if seen[g] {
			return fmt.Errorf("metrics group %q is given twice", g)
		}
		seen[g] = true
	}
	return nil
}

// Grouper maps names to groups. It is safe for concurrent use.
type Grouper struct {
	groups []string // longest first
	depth  int
	max    int

	mu   sync.Mutex
	seen map[string]bool
}

// New returns the Grouper of c, or Validate's error.
func New(c Config) (*Grouper, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	g := &Grouper{groups: append([]string(nil), c.Groups...), depth: c.Depth, max: c.MaxGroups, seen: map[string]bool{}}
	if g.max == 0 {
		g.max = DefaultMaxGroups
	}
	sort.Slice(g.groups, func(i, j int) bool { return len(g.groups[i]) > len(g.groups[j]) })
	return g, nil
}

// Group returns the group of name.
func (g *Grouper) Group(name string) string {
	group := g.prefix(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[group] {
		return group
	}
	if len(g.seen) >= g.max {
		return Overflow
	}
	g.seen[group] = true
	return group
}

func (g *Grouper) prefix(name string) string {
	if len(g.groups) > 0 {
		for _, p := range g.groups {
			if strings.HasPrefix(name, p) {
				return p
			}
		}
		return Other
	}
	end := 0
	for range g.depth {
		i := strings.IndexByte(name[end:], '/')
		if i < 0 {
			return name
		}
		end += i + 1
	}
	return name[:end]
}
