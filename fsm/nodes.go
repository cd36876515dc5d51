package fsm

import (
	"fmt"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// nodeTable holds the API address each member registered (node id ->
// address), so that followers can forward requests to the leader.
type nodeTable map[string]string

var _ section = nodeTable(nil)

func (t nodeTable) register(r *statev1.RegisterNode) Result {
	if err := ValidateNode(r.GetId(), r.GetApiAddr()); err != nil {
		return Result{Err: err}
	}
	t[r.GetId()] = r.GetApiAddr()
	return Result{}
}

// ValidateNode checks a node registration: a valid node id and an API
// address of the form HOST:PORT, both bounded (fence.ValidateNodeID,
// fence.ValidateNodeAddr). The state machine refuses a RegisterNode that
// fails it, changing nothing.
func ValidateNode(id, apiAddr string) error {
	if err := fence.ValidateNodeID(id); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	if err := fence.ValidateNodeAddr("API address", apiAddr); err != nil {
		return fmt.Errorf("register node %q: %w", id, err)
	}
	return nil
}

// NodeAPIAddr returns the API address a member registered, or "".
func (m *Machine) NodeAPIAddr(id string) string { return m.nodes[id] }

// NodeAPIAddrs returns the API addresses members registered, sorted.
func (m *Machine) NodeAPIAddrs() []string {
	out := make([]string, 0, len(m.nodes))
	for _, id := range sortedKeys(m.nodes) {
		out = append(out, m.nodes[id])
	}
	return out
}

func (t nodeTable) snapshot(st *statev1.State) {
	for _, id := range sortedKeys(t) {
		st.Nodes = append(st.Nodes, &statev1.RegisterNode{Id: id, ApiAddr: t[id]})
	}
}

func (t nodeTable) restore(st *statev1.State) error {
	for _, n := range st.GetNodes() {
		t[n.GetId()] = n.GetApiAddr()
	}
	return nil
}
