package node

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"burrow/l2"
	"burrow/nid"
)

// Multicast snooping (RFC 4541). The node reads which hosts listen to
// which groups from the IGMP and MLD reports it sees: its own TAP's, and
// every other host's, which reach every node as floods like any link-local
// multicast. A frame to a group some host reported goes to the TAPs of the
// nodes with a listener only; a group no one reported still floods to
// every TAP, as unregistered multicast does on a switch. Link-local groups
// (224.0.0.0/24, ff02::/16: ARP's and ND's neighbours, mDNS, the reports
// themselves) always go everywhere.
//
// Hosts report when they join and then only when asked, so each node is
// the querier of its own TAP: it asks at start and every
// groupQueryInterval, and a membership not reported again within
// groupMembership ends.

const (
	groupQueryInterval = 125 * time.Second // RFC 3376's default
	groupQueryResponse = 10 * time.Second
	// groupMembership is RFC 3376's group membership interval.
	groupMembership = 2*groupQueryInterval + groupQueryResponse
	// groupStartupQueries are asked groupStartupInterval apart first, so
	// that a (re)started node learns its hosts' groups soon.
	groupStartupQueries  = 2
	groupStartupInterval = 2 * time.Second
	groupsMax            = 4096
)

// groupMember is a host that listens to a group, and the node it sits
// behind.
type groupMember struct {
	node nid.ID
	host l2.MAC
}

type groupsState struct {
	members   map[netip.Addr]map[groupMember]time.Time // until when
	nextQuery time.Time
	queries   int
}

// snoopGroups learns from a membership report that reached the switch,
// from a host behind origin.
func (n *Node) snoopGroups(frame []byte, origin nid.ID, now time.Time) {
	r, err := l2.ParseGroupReport(frame)
	if err != nil {
		return
	}
	g := &n.groups
	if g.members == nil {
		g.members = make(map[netip.Addr]map[groupMember]time.Time)
	}
	m := groupMember{node: origin, host: r.Host}
	for _, group := range r.Joined {
		if !l2.IsSnooped(group) {
			// Link-local groups go everywhere anyway; every IPv6 host
			// reports solicited-node groups of its own, which would fill
			// the table to no purpose.
			continue
		}
		hosts := g.members[group]
		if hosts == nil {
			if len(g.members) >= groupsMax {
				continue
			}
			hosts = make(map[groupMember]time.Time)
			g.members[group] = hosts
			n.dirty |= dirtyGroups
		}
		if _, ok := hosts[m]; !ok && origin == n.self {
			n.dirty |= dirtyGroups
		}
		hosts[m] = now.Add(groupMembership)
	}
	for _, group := range r.Left {
		n.forgetMember(group, m)
	}
}

func (n *Node) forgetMember(group netip.Addr, m groupMember) {
	hosts := n.groups.members[group]
	if _, ok := hosts[m]; !ok {
		return
	}
	delete(hosts, m)
	if m.node == n.self || len(hosts) == 0 {
		n.dirty |= dirtyGroups
	}
	if len(hosts) == 0 {
		delete(n.groups.members, group)
	}
}

// groupsTick ends memberships no longer reported and asks the TAP's hosts
// for theirs when it is time.
func (n *Node) groupsTick(now time.Time) {
	g := &n.groups
	for group, hosts := range g.members {
		for m, until := range hosts {
			if now.After(until) {
				n.forgetMember(group, m)
			}
		}
	}
	if now.Before(g.nextQuery) {
		return
	}
	g.queries++
	if g.queries < groupStartupQueries {
		g.nextQuery = now.Add(groupStartupInterval)
	} else {
		g.nextQuery = now.Add(groupQueryInterval)
	}
	mac := querierMAC(n.self)
	n.writeTAP(l2.AppendIGMPQuery(nil, mac, uint8(groupQueryResponse/(100*time.Millisecond))), l2.Offload{})
	n.writeTAP(l2.AppendMLDQuery(nil, mac, linkLocalFor(mac), uint16(groupQueryResponse/time.Millisecond)), l2.Offload{})
}

// querierMAC is the source of the node's queries: locally administered,
// derived from its ID, and not the TAP's own MAC (MACFor), which the
// host's kernel would take for itself.
func querierMAC(id nid.ID) l2.MAC { return l2.MAC{0x0a, id[0], id[1], id[2], id[3], id[4]} }

// linkLocalFor is the IPv6 link-local address of a MAC (modified EUI-64):
// MLD queries must come from one.
func linkLocalFor(mac l2.MAC) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: mac[0] ^ 2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]})
}

// publishGroups gives the data path each reported group and whether a host
// behind this node listens to it.
func (n *Node) publishGroups(s *snapshot) {
	s.groups = make(map[netip.Addr]bool, len(n.groups.members))
	for group, hosts := range n.groups.members {
		local := false
		for m := range hosts {
			local = local || m.node == n.self
		}
		s.groups[group] = local
	}
}

// deliversGroup reports whether a frame from the overlay goes to the TAP:
// unless it is for a group some host reported and no host behind this node
// listens to.
func (s *snapshot) deliversGroup(frame []byte) bool {
	group, snooped := l2.SnoopedGroup(frame)
	if !snooped {
		return true
	}
	local, reported := s.groups[group]
	return local || !reported
}

// GroupsStatus says what multicast snooping knows.
type GroupsStatus struct {
	// Reported are the groups some host listens to, Local those a host
	// behind this node does.
	Reported []string `json:"reported,omitempty"`
	Local    []string `json:"local,omitempty"`
	// Pruned counts the frames to a group kept from this node's TAP
	// because no host behind it listens.
	Pruned uint64 `json:"pruned"`
}

func (n *Node) groupsStatus() GroupsStatus {
	st := GroupsStatus{Pruned: n.stats.MulticastPruned.Load()}
	for _, group := range slices.SortedFunc(maps.Keys(n.groups.members), netip.Addr.Compare) {
		st.Reported = append(st.Reported, group.String())
		for m := range n.groups.members[group] {
			if m.node == n.self {
				st.Local = append(st.Local, group.String())
				break
			}
		}
	}
	return st
}
