package flood

import (
	"fmt"
	"math"
	"time"

	"burrow/l2"
	"burrow/nid"
)

// Port names where a frame enters or leaves the bridge. The caller numbers
// its links; LocalPort is the TAP device.
type Port uint32

// LocalPort is the bridge's own TAP device.
const LocalPort Port = 0

// RoutedPort is where a MAC is reached when the link it was learned
// through is gone: frames toward it travel greedily over the ring toward
// its root bridge until traffic teaches a port again.
const RoutedPort Port = math.MaxUint32

// Entry is what the learning table knows about one leaf MAC.
type Entry struct {
	Port     Port      // where frames to the MAC are switched
	Root     nid.ID    // the bridge the MAC sits behind
	LastSeen time.Time // the last Learn of the MAC
}

// Table is the learning table of EdgeVPN section 3.2.1: Ethernet address
// learning (MAC to port) together with root bridge learning (the leaf MACs
// behind each bridge). It is soft state: bounded, expiring, and rebuilt from
// traffic and FRBs.
//
// Learn, Lookup and RootOf cost O(1) expected: one or two map operations and
// a few index updates, whether the table is empty or full. When full, Learn
// evicts the least recently seen entry in O(1), so a flood of random source
// MACs can neither grow memory past maxMACs nor slow learning down; it can
// only push out idle entries, which traffic then re-learns. Expire and
// Reroute cost O(1) per entry they touch; Leaves, which a bridge asks
// only of itself when a link comes up, reads every entry.
//
// Entries live in pages of slots and are threaded on two doubly-linked
// lists by index: all entries from most to least recently seen, and the
// entries of each port. No list per root: every node learns a MAC from
// each host that broadcasts, each behind its own bridge, and a list per
// root cost a map entry per MAC. Times passed to Learn and Expire must
// not go backwards.
type Table struct {
	maxMACs int
	maxAge  time.Duration

	slotOf map[l2.MAC]int32
	// pages hold the slots, 1<<slotPageBits each; slot 0 is unused so
	// that index 0 can mean "none". used counts the slots handed out.
	pages []*slotPage
	used  int32
	free  int32 // first released slot, the rest chained through byAge

	age   list // every entry, most recently seen first
	ports map[Port]list

	// changes are the MACs whose entries were learned, moved, refreshed
	// or removed since the last ClearChanges, each once (slot.noted), so
	// that a copy of the table can follow it without a rebuild. Past
	// more changes than entries, changesLost replaces them: rebuilding
	// the copy is then as cheap.
	changes     []l2.MAC
	changesLost bool
}

// chain selects one of the lists an entry is threaded on.
type chain int

const (
	byAge chain = iota
	byPort
	numChains
)

const none int32 = 0

type list struct{ head, tail int32 }

type links struct{ prev, next int32 }

// slot holds an Entry in 56 bytes rather than 80: its time as Unix
// nanoseconds. Every node learns a MAC from each host that broadcasts,
// so in a large network the learning tables are a large part of a node.
type slot struct {
	mac   l2.MAC
	noted bool // mac is in changes
	port  Port
	root  nid.ID
	seen  int64 // LastSeen, Unix nanoseconds
	links [numChains]links
}

func (s *slot) entry() Entry {
	return Entry{Port: s.port, Root: s.root, LastSeen: time.Unix(0, s.seen).UTC()}
}

// NewTable returns an empty table holding at most maxMACs entries, each
// expiring maxAge after it was last learned. It panics on a non-positive
// limit, which is a configuration bug.
func NewTable(maxMACs int, maxAge time.Duration) *Table {
	if maxMACs < 1 || maxMACs >= math.MaxInt32 || maxAge <= 0 {
		panic(fmt.Sprintf("flood: NewTable(%d, %v): limits must be positive", maxMACs, maxAge))
	}
	return &Table{
		maxMACs: maxMACs,
		maxAge:  maxAge,
		slotOf:  make(map[l2.MAC]int32),
		used:    1,
		ports:   make(map[Port]list),
	}
}

// Learn records that mac, behind the bridge root, is reached through port.
// Learning a known MAC again moves it at once to the new port and root, which
// is what lets an address relocate to another bridge. Multicast addresses are
// never sources, so they are not learned. Learn reports whether the
// entry is new or moved (a port or root it did not have).
func (t *Table) Learn(mac l2.MAC, port Port, root nid.ID, now time.Time) (changed bool) {
	if mac.IsMulticast() {
		return false
	}
	i, known := t.slotOf[mac]
	if !known {
		if len(t.slotOf) >= t.maxMACs {
			t.remove(t.age.tail)
		}
		i = t.alloc()
		t.slotOf[mac] = i
		*t.slot(i) = slot{mac: mac, port: port, root: root, seen: now.UnixNano()}
		t.push(&t.age, byAge, i)
		join(t, t.ports, port, byPort, i)
		t.note(i)
		return true
	}
	e := t.slot(i)
	if e.root != root {
		e.root = root
		changed = true
	}
	if e.port != port {
		leave(t, t.ports, e.port, byPort, i)
		join(t, t.ports, port, byPort, i)
		e.port = port
		changed = true
	}
	e.seen = now.UnixNano()
	t.unlink(&t.age, byAge, i)
	t.push(&t.age, byAge, i)
	t.note(i)
	return changed
}

// Each calls f for every entry, in no particular order.
func (t *Table) Each(f func(mac l2.MAC, e Entry)) {
	for i := t.age.head; i != none; {
		s := t.slot(i)
		f(s.mac, s.entry())
		i = s.links[byAge].next
	}
}

// Lookup returns what is known about mac.
func (t *Table) Lookup(mac l2.MAC) (Entry, bool) {
	i, ok := t.slotOf[mac]
	if !ok {
		return Entry{}, false
	}
	return t.slot(i).entry(), true
}

// RootOf returns the bridge mac sits behind.
func (t *Table) RootOf(mac l2.MAC) (nid.ID, bool) {
	i, ok := t.slotOf[mac]
	if !ok {
		return nid.ID{}, false
	}
	return t.slot(i).root, true
}

// Leaves appends to dst the MACs known to sit behind root, in no particular
// order.
func (t *Table) Leaves(root nid.ID, dst []l2.MAC) []l2.MAC {
	for i := t.age.head; i != none; i = t.slot(i).links[byAge].next {
		if s := t.slot(i); s.root == root {
			dst = append(dst, s.mac)
		}
	}
	return dst
}

// Forget drops mac's entry, if any, and reports whether there was one.
func (t *Table) Forget(mac l2.MAC) bool {
	i, ok := t.slotOf[mac]
	if ok {
		t.remove(i)
	}
	return ok
}

// Reroute moves every entry learned through port to RoutedPort, as when
// its link goes down: their root bridges are still there, only the way to
// them changed. Entries with no known root cannot be routed and are
// dropped. It returns how many entries moved.
func (t *Table) Reroute(port Port) int {
	n := 0
	for i := t.ports[port].head; i != none; {
		s := t.slot(i)
		next := s.links[byPort].next
		if s.root == (nid.ID{}) {
			t.remove(i)
		} else {
			leave(t, t.ports, port, byPort, i)
			join(t, t.ports, RoutedPort, byPort, i)
			s.port = RoutedPort
			t.note(i)
			n++
		}
		i = next
	}
	return n
}

// Expire drops the entries not learned during the last maxAge before now and
// returns how many there were.
func (t *Table) Expire(now time.Time) int {
	n := 0
	for i := t.age.tail; i != none && now.UnixNano()-t.slot(i).seen >= int64(t.maxAge); n++ {
		t.remove(i)
		i = t.age.tail
	}
	return n
}

// Len is the number of MACs in the table.
func (t *Table) Len() int { return len(t.slotOf) }

// Changes returns the MACs whose entries were learned, moved, refreshed
// or removed since the last ClearChanges, in no particular order, and
// whether it kept track: when not, any entry may have changed. The slice
// is valid until the table changes.
func (t *Table) Changes() ([]l2.MAC, bool) { return t.changes, !t.changesLost }

// ClearChanges starts tracking changes afresh.
func (t *Table) ClearChanges() {
	for _, mac := range t.changes {
		if i, ok := t.slotOf[mac]; ok {
			t.slot(i).noted = false
		}
	}
	t.changes, t.changesLost = t.changes[:0], false
}

// note records that the entry in slot i changed.
func (t *Table) note(i int32) {
	s := t.slot(i)
	if s.noted || t.changesLost {
		return
	}
	if len(t.changes) >= max(len(t.slotOf), minTrackedChanges) {
		t.changesLost = true
		return
	}
	s.noted = true
	t.changes = append(t.changes, s.mac)
}

// minTrackedChanges keeps a nearly empty table tracking changes.
const minTrackedChanges = 16

func (t *Table) alloc() int32 {
	if i := t.free; i != none {
		t.free = t.slot(i).links[byAge].next
		return i
	}
	i := t.used
	if int(i>>slotPageBits) == len(t.pages) {
		t.pages = append(t.pages, new(slotPage))
	}
	t.used++
	return i
}

// slotPageBits sizes the pages slots are allocated in: 32 slots of 56
// bytes. A table grows a page at a time, with nothing copied and less
// than a page to spare; grown as one slice, doubling, the tables of a
// simulation's nodes that had just learned a few hundred MACs each held
// up to twice the room they used, and the copies they left were garbage.
const slotPageBits = 5

type slotPage [1 << slotPageBits]slot

// slot is the slot at index i.
func (t *Table) slot(i int32) *slot {
	return &t.pages[i>>slotPageBits][i&(1<<slotPageBits-1)]
}

func (t *Table) remove(i int32) {
	t.note(i)
	s := t.slot(i)
	delete(t.slotOf, s.mac)
	t.unlink(&t.age, byAge, i)
	leave(t, t.ports, s.port, byPort, i)
	*s = slot{links: [numChains]links{byAge: {next: t.free}}}
	t.free = i
}

func (t *Table) push(l *list, c chain, i int32) {
	t.slot(i).links[c] = links{prev: none, next: l.head}
	if l.head != none {
		t.slot(l.head).links[c].prev = i
	} else {
		l.tail = i
	}
	l.head = i
}

func (t *Table) unlink(l *list, c chain, i int32) {
	at := t.slot(i).links[c]
	if at.prev != none {
		t.slot(at.prev).links[c].next = at.next
	} else {
		l.head = at.next
	}
	if at.next != none {
		t.slot(at.next).links[c].prev = at.prev
	} else {
		l.tail = at.prev
	}
}

// join and leave keep per-key lists in a map, deleting a key whose list
// empties so that the map never outgrows the entries.
func join[K comparable](t *Table, lists map[K]list, key K, c chain, i int32) {
	l := lists[key]
	t.push(&l, c, i)
	lists[key] = l
}

func leave[K comparable](t *Table, lists map[K]list, key K, c chain, i int32) {
	l := lists[key]
	t.unlink(&l, c, i)
	if l.head == none {
		delete(lists, key)
		return
	}
	lists[key] = l
}
