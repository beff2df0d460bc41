package node

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"

	"burrow/link"
)

// sourceGate bounds, per source, the datagrams without a session
// (handshakes, STUN, anything not a transport datagram) that the data path
// hands to the core. The core rate-limits that work itself, but only after
// each datagram was copied, queued and dispatched to it, and past its
// limits it still answers every initiation with a cookie: one address
// spraying faster than the core can take, sharing the core's queue and
// the CPU with the readers, made a beacon lose its members' datagrams
// alongside the spray. Past the gate the rest of such a spray costs a
// hash and a compare-and-swap, and no answer.
//
// Each source hashes, under a key drawn at start, to one of gateSlots
// slots (so an outsider cannot aim at another's slot); a slot is a GCRA
// bucket, the one number being when it will have drained. Sources that
// share a slot share its rate. Memory is fixed, whatever the sources: 2
// KiB a node, which a simulation of 10,000 nodes feels (1,024 slots
// raised its peak by 80 MB).
type sourceGate struct {
	key   [2]uint64
	slots [gateSlots]atomic.Int64
}

const (
	gateSlots = 256
	// gateInterval and gateBurst allow 256 datagrams a second from one
	// address, bursting to 512: well above what members behind one NAT
	// need (the core allows 20 initiations and 10 STUN requests a second
	// per address) and far below what one sender can spray.
	gateInterval = int64(1e9) / 256
	gateBurst    = 512
)

func newSourceGate(key [16]byte) *sourceGate {
	return &sourceGate{key: [2]uint64{binary.LittleEndian.Uint64(key[:8]), binary.LittleEndian.Uint64(key[8:])}}
}

// allow reports whether a datagram from from, at now (Unix ns), may go
// on to the core, and counts it.
func (g *sourceGate) allow(from link.Endpoint, now int64) bool {
	slot := &g.slots[g.slotOf(from)]
	for {
		drained := slot.Load()
		next := max(drained, now) + gateInterval
		if next-now > gateBurst*gateInterval {
			return false
		}
		if slot.CompareAndSwap(drained, next) {
			return true
		}
	}
}

// slotOf is the slot of from's source (link.Endpoint.Source: an address,
// or for a stream the stream).
func (g *sourceGate) slotOf(from link.Endpoint) int {
	a := from.Source().As16()
	hi, lo := binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:])
	h1, l1 := bits.Mul64(hi^g.key[0], 0x9e3779b97f4a7c15)
	h2, l2 := bits.Mul64(lo^g.key[1], 0xc2b2ae3d27d4eb4f)
	return int((h1 ^ l1 ^ h2 ^ l2) % gateSlots)
}
