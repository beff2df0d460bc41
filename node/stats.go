package node

import "sync/atomic"

// DropReason says why a datagram or frame was discarded.
type DropReason int

// Drop reasons, counted separately so an operator can tell an attack from a
// misconfiguration.
const (
	DropMalformed      DropReason = iota // not parseable
	DropNotBurrow                        // not a burrow datagram type
	DropUnknownSession                   // transport for an index we do not have
	DropAuth                             // failed authentication
	DropReplay                           // replayed or older than the window
	DropNoRoute                          // nowhere to send it
	DropLoop                             // a broadcast of our own came back
	DropSlowPathFull                     // the core was too busy to take it
	DropRelayLimit                       // relaying for others is off or over its rate
	DropRateLimited                      // a source asked for work too often
	DropTooShort                         // an unauthenticated request shorter than its answer would be
	DropSpoofed                          // from one member with another member's MAC or address (certified, leased or claimed)
	DropUnheld                           // from a member that is no router, with an address only a lease or claim gives, held by no one
	DropUnjudgedFull                     // waiting for its source's holder to be looked up, with no room left to wait
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"malformed", "not_burrow", "unknown_session", "auth_failed", "replay",
	"no_route", "own_broadcast", "slow_path_full", "relay_limit", "rate_limited",
	"too_short", "spoofed", "unheld", "unjudged_full",
}

func (r DropReason) String() string { return dropNames[r] }

// Stats are counters updated by the core and the data path.
type Stats struct {
	drops [numDropReasons]atomic.Uint64

	FloodsStarted, FloodsReceived, FloodsForwarded atomic.Uint64
	FramesToTAP, FramesFromTAP                     atomic.Uint64
	SlowPathEvents                                 atomic.Uint64
	Relayed                                        atomic.Uint64 // datagrams relayed for others
	RelayQueued                                    atomic.Uint64 // of them, those that waited for their pair's share
	PunchProbes                                    atomic.Uint64 // extra ports probed for NATs with a port per destination
	ARPAnswered                                    atomic.Uint64 // ARP requests answered locally: broadcasts saved
	NDAnswered                                     atomic.Uint64 // IPv6 neighbour solicitations answered locally
	MulticastPruned                                atomic.Uint64 // group frames kept from the TAP: no host here listens
	DHCPKeptLocal                                  atomic.Uint64 // DHCP frames kept from crossing the overlay (services.LocalDHCP)
	RevocationsSent                                atomic.Uint64 // revocations passed on to neighbours
}

func (s *Stats) drop(r DropReason) { s.drops[r].Add(1) }

// bound counts a frame that binding to its sender refuses, and reports
// whether it passes.
func (s *Stats) bound(v verdict) bool {
	switch v {
	case spoofed:
		s.drop(DropSpoofed)
	case unheld:
		s.drop(DropUnheld)
	default:
		return true
	}
	return false
}

// Drop counts a drop that happened outside the node (e.g. in the runtime).
func (s *Stats) Drop(r DropReason) { s.drop(r) }

// Drops returns the drop counters by reason name.
func (s *Stats) Drops() map[string]uint64 {
	m := make(map[string]uint64, numDropReasons)
	for r := range numDropReasons {
		m[r.String()] = s.drops[r].Load()
	}
	return m
}
