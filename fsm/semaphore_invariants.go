package fsm

import fence "github.com/fenced-dev/fenced"

// check reports a semaphore that breaks its rules: a capacity out of
// range, an idle semaphore kept, a permit in a slot at or above the
// capacity, two permits in one slot or with one token, a permit or waiter
// of a session that is not live or not bound to it, a session both
// holding and waiting, a waiter asking for more than the capacity, a head
// waiter whose request fits in the free permits (it should have been
// served), or a session bound to a semaphore that does not list it.
func (t *semaphoreTable) check() error {
	m := t.m
	for name, sem := range t.byName {
		if sem.name != name {
			return broken("semaphore %q is filed under %q", sem.name, name)
		}
		if err := storedName(name); err != nil {
			return broken("semaphore %q: %v", name, err)
		}
		if err := ValidateCapacity(sem.capacity); err != nil {
			return broken("semaphore %q: %v", name, err)
		}
		if sem.idle() {
			return broken("semaphore %q has no permits and no waiters but is kept", name)
		}
		tokens := make(map[fence.Token]uint32, len(sem.bySlot))
		count := make(map[uint64]int, len(sem.held))
		for slot, p := range sem.bySlot {
			s := m.sessions[p.session]
			switch {
			case p.slot != slot:
				return broken("semaphore %q: the permit of slot %d is filed under slot %d", name, p.slot, slot)
			case slot >= sem.capacity:
				return broken("semaphore %q: slot %d is not below the capacity %d", name, slot, sem.capacity)
			case s == nil:
				return broken("semaphore %q slot %d is held by session %d, which is not live", name, slot, p.session)
			case !p.token.Valid() || p.token > m.tokens.last:
				return broken("semaphore %q slot %d has token %d; want 1 to the last token %d", name, slot, p.token, m.tokens.last)
			}
			if other, dup := tokens[p.token]; dup {
				return broken("semaphore %q slots %d and %d hold the same token %d", name, other, slot, p.token)
			}
			if !s.bound(kindSemaphore).held.has(name) {
				return broken("semaphore %q slot %d is held by session %d, which is not bound to it", name, slot, p.session)
			}
			tokens[p.token] = slot
			count[p.session]++
		}
		for sid, slots := range sem.held {
			if len(slots) == 0 || len(slots) != count[sid] {
				return broken("semaphore %q lists %d slots for session %d, which holds %d", name, len(slots), sid, count[sid])
			}
			for i, slot := range slots {
				if p := sem.bySlot[slot]; p == nil || p.session != sid || (i > 0 && slots[i-1] >= slot) {
					return broken("semaphore %q lists slots %v for session %d, not its own in order", name, slots, sid)
				}
			}
		}
		if len(sem.want) != sem.queue.len() {
			return broken("semaphore %q has %d waiters but %d wanted counts", name, sem.queue.len(), len(sem.want))
		}
		queued := make(map[uint64]bool, sem.queue.len())
		for _, w := range sem.queue.list {
			s := m.sessions[w.session]
			n := sem.want[w.session]
			switch {
			case s == nil:
				return broken("session %d waits for semaphore %q but is not live", w.session, name)
			case queued[w.session]:
				return broken("session %d is queued twice for semaphore %q", w.session, name)
			case len(sem.held[w.session]) > 0:
				return broken("session %d waits for semaphore %q, of which it holds permits", w.session, name)
			case n == 0 || n > sem.capacity:
				return broken("session %d waits for %d permits of semaphore %q of capacity %d", w.session, n, name, sem.capacity)
			}
			if !s.bound(kindSemaphore).waiting.has(name) {
				return broken("session %d waits for semaphore %q but is not bound to it", w.session, name)
			}
			queued[w.session] = true
		}
		if sem.queue.len() > 0 {
			if n := sem.want[sem.queue.list[0].session]; n <= sem.free() && fence.MaxToken-m.tokens.last >= fence.Token(n) {
				return broken("semaphore %q: the head waiter asks for %d permits, %d are free, and it was not served", name, n, sem.free())
			}
		}
	}
	for _, s := range m.checked.others {
		id, b := s.id, s.bound(kindSemaphore)
		for name := range b.held.all() {
			if sem := t.byName[name]; sem == nil || len(sem.held[id]) == 0 {
				return broken("session %d is bound as holder of semaphore %q, of which it holds no permit", id, name)
			}
		}
		for name := range b.waiting.all() {
			if sem := t.byName[name]; sem == nil || !sem.queue.has(id) {
				return broken("session %d is bound as waiter of semaphore %q, which does not queue it", id, name)
			}
		}
	}
	return nil
}
