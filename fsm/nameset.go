package fsm

import (
	"iter"
	"slices"
)

// smallSet is the most names a nameSet keeps in a sorted slice; a larger
// set is a map.
const smallSet = 16

// nameSet is a set of names, as a session's binding holds them: nearly
// always one, for which a Go map (about 200 bytes for one name) or even a
// slice of its own costs several times the name's string header. A set of
// one name keeps it inline (one) and allocates nothing; a second name
// moves the set to a sorted slice (up to smallSet names), beyond that to a
// map, and back to a slice once it shrinks to half of smallSet. Once it
// has had two names it keeps its slice, emptied or not, so a session that
// takes and gives up names again and again allocates nothing for it. A
// nil *nameSet is the empty set for the reading methods. Its walks (all,
// sorted) are in name order, so a walk whose order is visible never
// depends on how it is stored.
type nameSet struct {
	// one is the set's only name while more is nil; "" for none. The empty
	// name is never kept here (it goes to more), so "" means empty.
	one  string
	more *manyNames
}

// manyNames is a nameSet that has had two names or more.
type manyNames struct {
	list []string            // sorted; nil while big is in use
	big  map[string]struct{} // nil while the set is small
}

// has reports whether name is in the set.
func (s *nameSet) has(name string) bool {
	switch {
	case s == nil:
		return false
	case s.more == nil:
		return s.one != "" && s.one == name
	case s.more.big != nil:
		_, ok := s.more.big[name]
		return ok
	}
	_, ok := slices.BinarySearch(s.more.list, name)
	return ok
}

// len returns the number of names in the set.
func (s *nameSet) len() int {
	switch {
	case s == nil:
		return 0
	case s.more == nil:
		if s.one != "" {
			return 1
		}
		return 0
	case s.more.big != nil:
		return len(s.more.big)
	}
	return len(s.more.list)
}

// add puts name in the set and reports whether it was not there.
func (s *nameSet) add(name string) bool {
	if s.more == nil {
		switch {
		case s.one == "" && name != "":
			s.one = name
			return true
		case s.one == name && name != "":
			return false
		}
		s.more = &manyNames{}
		if s.one != "" {
			s.more.list = append(make([]string, 0, 2), s.one)
			s.one = ""
		}
	}
	return s.more.add(name)
}

// remove takes name out of the set and reports whether it was there.
func (s *nameSet) remove(name string) bool {
	if s.more == nil {
		if s.one != "" && s.one == name {
			s.one = ""
			return true
		}
		return false
	}
	return s.more.remove(name)
}

func (s *manyNames) add(name string) bool {
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

func (s *manyNames) remove(name string) bool {
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

// names returns the names in order without copying them when they are
// stored in order: the slice is the set's own (or one) and must not be
// changed or kept past the next change of the set.
func (s *nameSet) names(one *[1]string) []string {
	switch {
	case s == nil:
		return nil
	case s.more == nil:
		if s.one == "" {
			return nil
		}
		one[0] = s.one
		return one[:]
	case s.more.big != nil:
		return sortedKeys(s.more.big)
	}
	return s.more.list
}

// sorted returns the names in order, in a slice of the caller's.
func (s *nameSet) sorted() []string {
	var one [1]string
	out := slices.Clone(s.names(&one))
	if out == nil {
		return []string{}
	}
	return out
}

// all walks the names in order. The set must not change during the walk.
func (s *nameSet) all() iter.Seq[string] {
	return func(yield func(string) bool) {
		var one [1]string
		for _, n := range s.names(&one) {
			if !yield(n) {
				return
			}
		}
	}
}
