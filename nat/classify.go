package nat

import (
	"net/netip"
	"slices"
)

// Observation is one STUN answer `burrow netcheck` got: which of its
// sockets asked which server, and the mapping the server saw. Sent orders
// the requests as they left, the order in which a NAT made its mappings.
type Observation struct {
	Local  netip.AddrPort // the socket's own address (port, and address if bound to one)
	Server netip.AddrPort
	Mapped netip.AddrPort
	Sent   int
}

// Mapping behaviours (RFC 4787, section 4.1), and what cannot be told.
const (
	// MappingNone: a server saw the socket's own address: no NAT.
	MappingNone = "none"
	// MappingEndpointIndependent: servers at different addresses saw one
	// mapping of a socket.
	MappingEndpointIndependent = "endpoint-independent"
	// MappingAddressDependent: servers at different addresses saw
	// different mappings, two ports of one server address the same one.
	MappingAddressDependent = "address-dependent"
	// MappingAddressAndPortDependent: two ports of one server address saw
	// different mappings.
	MappingAddressAndPortDependent = "address-and-port-dependent"
	// MappingDependent: servers at different addresses saw different
	// mappings, and no server address answered on two ports to tell
	// which of the two dependent kinds it is.
	MappingDependent = "dependent"
	// Undetermined: too few answers to tell.
	Undetermined = "unknown"
)

// Filtering behaviours (RFC 4787, section 5) that burrow netcheck tells
// apart with a beacon's two ports; beacons have one address each, so
// endpoint-independent and address-dependent filtering look alike.
const (
	FilteringNone                    = "none"
	FilteringAddressAndPortDependent = "address-and-port-dependent"
	FilteringNotPortDependent        = "endpoint-independent-or-address-dependent"
)

// Port allocation patterns: how a NAT picks the public port of a new
// mapping.
const (
	// AllocationNone: no NAT, nothing allocated.
	AllocationNone = "none"
	// AllocationPreserved: the public port is the socket's own.
	AllocationPreserved = "preserved"
	// AllocationSequential: each new mapping's port is a little above the
	// last one's, so a peer can guess the next.
	AllocationSequential = "sequential"
	// AllocationRandom: ports jump around.
	AllocationRandom = "random"
)

// sequentialStep is the largest gap between the ports of two mappings
// made one after the other that still counts as sequential: other hosts
// behind the NAT may take a few in between.
const sequentialStep = 16

// ClassifyMapping tells the NAT's mapping behaviour from the answers, and
// why. own says whether an address is one of this host's.
func ClassifyMapping(obs []Observation, own func(netip.Addr) bool) (kind, why string) {
	for _, o := range obs {
		if own(o.Mapped.Addr()) {
			return MappingNone, "a server saw this host's own address"
		}
	}
	// Pairs of answers to one socket from two servers: at two addresses,
	// or at two ports of one address; and whether any pair saw two
	// mappings.
	var otherAddr, otherAddrDiffers, otherPort, otherPortDiffers bool
	for i, a := range obs {
		for _, b := range obs[i+1:] {
			if a.Local != b.Local || a.Server == b.Server {
				continue
			}
			if a.Server.Addr() != b.Server.Addr() {
				otherAddr = true
				otherAddrDiffers = otherAddrDiffers || a.Mapped != b.Mapped
			} else {
				otherPort = true
				otherPortDiffers = otherPortDiffers || a.Mapped != b.Mapped
			}
		}
	}
	switch {
	case otherPortDiffers:
		return MappingAddressAndPortDependent, "two ports of one server address saw different mappings of one socket"
	case otherAddrDiffers && otherPort:
		return MappingAddressDependent, "servers at different addresses saw different mappings of one socket, two ports of one address the same"
	case otherAddrDiffers:
		return MappingDependent, "servers at different addresses saw different mappings of one socket; a server answering on two ports would tell address- from address-and-port-dependent"
	case otherAddr:
		return MappingEndpointIndependent, "servers at different addresses saw the same mapping of each socket"
	}
	return Undetermined, "needs answers from two servers at different addresses to one socket: configure a second beacon"
}

// ClassifyAllocation tells how the NAT picks ports for new mappings, from
// the mappings in the order they were made.
func ClassifyAllocation(obs []Observation, own func(netip.Addr) bool) (kind, why string) {
	if len(obs) == 0 {
		return Undetermined, "no answers"
	}
	sorted := slices.Clone(obs)
	slices.SortStableFunc(sorted, func(a, b Observation) int { return a.Sent - b.Sent })
	preserved := true
	var ports []uint16
	var seen []netip.AddrPort
	for _, o := range sorted {
		if own(o.Mapped.Addr()) {
			return AllocationNone, "no NAT"
		}
		preserved = preserved && o.Mapped.Port() == o.Local.Port()
		if !slices.Contains(seen, o.Mapped) {
			seen = append(seen, o.Mapped)
			ports = append(ports, o.Mapped.Port())
		}
	}
	if preserved {
		return AllocationPreserved, "every mapping kept its socket's port"
	}
	if len(ports) < 3 {
		return Undetermined, "fewer than three mappings to compare"
	}
	for i := 1; i < len(ports); i++ {
		if step := int(ports[i]) - int(ports[i-1]); step <= 0 || step > sequentialStep {
			return AllocationRandom, "the ports of mappings made one after the other jump around"
		}
	}
	return AllocationSequential, "each new mapping's port is a little above the last one's"
}
