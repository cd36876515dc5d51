package fsm

import (
	"iter"
	"slices"
)

// smallSet is the most names a nameSet keeps in a sorted slice; a larger
// set is a map.
const smallSet = 16

// nameSet is a set of names, as a session's binding holds them: nearly
// always one or a few, for which a Go map (about 200 bytes for one name)
// costs several times the names themselves. Up to smallSet names it is a
// sorted slice, beyond that a map, and back to a slice once it shrinks to
// half of smallSet. A nil *nameSet is the empty set for the reading
// methods. Its walks (all, sorted) are in name order, so a walk whose
// order is visible never depends on how it is stored.
type nameSet struct {
	list []string            // sorted; nil while big is in use
	big  map[string]struct{} // nil while the set is small
}

// has reports whether name is in the set.
func (s *nameSet) has(name string) bool {
	if s == nil {
		return false
	}
	if s.big != nil {
		_, ok := s.big[name]
		return ok
	}
	_, ok := slices.BinarySearch(s.list, name)
	return ok
}

// len returns the number of names in the set.
func (s *nameSet) len() int {
	if s == nil {
		return 0
	}
	if s.big != nil {
		return len(s.big)
	}
	return len(s.list)
}

// add puts name in the set and reports whether it was not there.
func (s *nameSet) add(name string) bool {
	if s.big != nil {
		if _, ok := s.big[name]; ok {
			return false
		}
		s.big[name] = struct{}{}
		return true
	}
	i, ok := slices.BinarySearch(s.list, name)
	if ok {
		return false
	}
	if len(s.list) < smallSet {
		s.list = slices.Insert(s.list, i, name)
		return true
	}
	s.big = make(map[string]struct{}, 2*smallSet)
	for _, n := range s.list {
		s.big[n] = struct{}{}
	}
	s.big[name] = struct{}{}
	s.list = nil
	return true
}

// remove takes name out of the set and reports whether it was there.
func (s *nameSet) remove(name string) bool {
	if s.big != nil {
		if _, ok := s.big[name]; !ok {
			return false
		}
		delete(s.big, name)
		if len(s.big) <= smallSet/2 {
			s.list = sortedKeys(s.big)
			s.big = nil
		}
		return true
	}
	i, ok := slices.BinarySearch(s.list, name)
	if !ok {
		return false
	}
	s.list = slices.Delete(s.list, i, i+1)
	return true
}

// sorted returns the names in order, in a slice of the caller's.
func (s *nameSet) sorted() []string {
	if s == nil {
		return []string{}
	}
	if s.big != nil {
		return sortedKeys(s.big)
	}
	return slices.Clone(s.list)
}

// all walks the names in order. The set must not change during the walk.
func (s *nameSet) all() iter.Seq[string] {
	return func(yield func(string) bool) {
		if s == nil {
			return
		}
		list := s.list
		if s.big != nil {
			list = sortedKeys(s.big)
		}
		for _, n := range list {
			if !yield(n) {
				return
			}
		}
	}
}
