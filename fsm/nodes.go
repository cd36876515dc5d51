package fsm

import (
	"fmt"
	"sort"

	fence "github.com/fenced-dev/fenced"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

func (m *Machine) registerNode(r *statev1.RegisterNode) Result {
	if r.GetId() == "" || r.GetApiAddr() == "" {
		return Result{Err: fmt.Errorf("%w: register node needs an id and an API address", fence.ErrInvalidArgument)}
	}
	m.nodes[r.GetId()] = r.GetApiAddr()
	return Result{}
}

// NodeAPIAddr returns the API address a member registered, or "".
func (m *Machine) NodeAPIAddr(id string) string { return m.nodes[id] }

func (m *Machine) nodesSnapshot() []*statev1.RegisterNode {
	ids := make([]string, 0, len(m.nodes))
	for id := range m.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*statev1.RegisterNode, len(ids))
	for i, id := range ids {
		out[i] = &statev1.RegisterNode{Id: id, ApiAddr: m.nodes[id]}
	}
	return out
}
