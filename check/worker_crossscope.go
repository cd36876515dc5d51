package check

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	fence "github.com/fenced-dev/fenced"
	"github.com/fenced-dev/fenced/check/history"
	"github.com/fenced-dev/fenced/client"
)

// The cross-scope attack. Now and then a worker that holds a grant also
// writes, with its live token, one kv key its grant's scope does not
// cover: another object's key, a string-prefix neighbour of its scope
// ("lock-1" writes "lock-10"), its scope cut short ("lock-"), or, for a
// permit of scope "sem-0/1", the parent "sem-0"; a reader tries its own
// key with its read token. The kv must refuse each one (a scope mismatch,
// Outcome Fail, nothing changed); the scope checker flags any it accepted.
// Each try is an OpWrite whose Target names the attack and whose
// GrantKind and Scope are the worker's grant.

// crossScopeEvery is one in how many of a worker's rounds that get a
// grant also make one cross-scope write.
const crossScopeEvery = 3

// The attacks of a cross-scope write (its Target).
const (
	AttackOtherObject = "other-object"
	AttackNeighbour   = "prefix-neighbour"
	AttackCutShort    = "cut-short"
	AttackParent      = "parent"
	AttackReadToken   = "read-token"
)

// crossScoper makes the cross-scope writes of one worker. Its choices come
// from a random source of their own, so the rest of the workload makes the
// same choices as without the attack.
type crossScoper struct {
	rng   *rand.Rand
	names []string
	slots int // the semaphores' capacity: the slot keys another object may be
}

func newCrossScoper(cfg WorkerConfig) *crossScoper {
	return &crossScoper{rng: rand.New(rand.NewPCG(cfg.Seed, 0x5c09e)), names: cfg.Names, slots: max(cfg.Capacity, 1)}
}

// maybe makes, one call in crossScopeEvery, one cross-scope write with t,
// the token of a grant of kind and scope that the worker holds.
func (x *crossScoper) maybe(ctx context.Context, c *client.Client, rec *recorder, kind, scope string, t fence.Token, n int) {
	if x.rng.IntN(crossScopeEvery) != 0 {
		return
	}
	attack, key := x.target(kind, scope)
	op := history.Op{Kind: history.OpWrite, Key: key, Token: uint64(t), Target: attack, GrantKind: kind, Scope: scope,
		Value: fmt.Sprintf("%s-%d-%s", rec.id, n, attack)}
	putKey(ctx, c, rec, op)
}

// target picks an attack on a grant of kind and scope and the key it
// writes, a key scope does not cover (or, for a read grant, may not write).
func (x *crossScoper) target(kind, scope string) (attack, key string) {
	if kind == history.GrantRead {
		return AttackReadToken, scope
	}
	switch x.rng.IntN(3) {
	case 0:
		if parent, _, ok := cutLast(scope); ok {
			return AttackParent, parent
		}
		if len(scope) > 1 {
			return AttackCutShort, scope[:len(scope)-1]
		}
	case 1:
		return AttackNeighbour, scope + "0"
	}
	for range 8 {
		name := x.names[x.rng.IntN(len(x.names))]
		key := name
		if workloadOf(name) == WorkloadSemaphore {
			key = slotKey(name, x.rng.IntN(x.slots))
		}
		if !fence.ScopeCovers(scope, key) {
			return AttackOtherObject, key
		}
	}
	return AttackNeighbour, scope + "0"
}

// cutLast splits scope at its last "/": "sem-0/1" is "sem-0" and "1".
func cutLast(scope string) (parent, last string, ok bool) {
	i := strings.LastIndexByte(scope, '/')
	if i <= 0 {
		return "", "", false
	}
	return scope[:i], scope[i+1:], true
}
