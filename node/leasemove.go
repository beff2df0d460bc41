package node

import (
	"net/netip"
	"time"

	"burrow/dht"
	"burrow/ipam"
	"burrow/l2"
	"burrow/nid"
	"burrow/overlay"
)

// A DHCP client that moves from one member's TAP to another's (a VM
// migrated, a laptop plugged in elsewhere) keeps its address, but its
// lease record stays with the first member, and frames bound to lease
// holders would drop the client's frames from the second until the
// record lapsed. So the member that acknowledged the client on another's
// record tells that holder (LeaseMoved); the holder asks its own TAP for
// the client with ARP probes and, when none is answered, lets the lease go
// and says so (LeaseReleased); the new member then writes the record as
// its own, and the other members, which look a holder up again when its
// answer drops frames (recheckDroppedAfter), find the new holder. A
// client that moves without asking the new member's DHCP server (a
// virtual machine migrated live, announcing itself by ARP) is found by
// its ARP on the new member's TAP, and moves its lease the same way. No
// member can take a lease this way from a client still on its holder's
// TAP: the client answers there.

const (
	// moveProbes ARP probes, moveProbeGap apart, ask the holder's TAP for
	// a client said to have moved; when none is answered the lease goes.
	moveProbes   = 3
	moveProbeGap = 500 * time.Millisecond
	// maxMoveChecks bounds the checks under way at a holder.
	maxMoveChecks = 64
	// maxNoted bounds the addresses a member keeps notes of for
	// moveToldEvery: holders told, lease records looked up.
	maxNoted = 256
	// moveToldEvery is how often, at most, the new member tells the holder
	// of one moved client.
	moveToldEvery = 10 * time.Second
	// movePayloadLen is a LeaseMoved's payload: the IPv4 address and the
	// client's MAC.
	movePayloadLen = 4 + 6
)

// moveCheck is a holder's check that a client said to have moved left
// its TAP.
type moveCheck struct {
	client    l2.MAC
	asked     overlay.Message // the LeaseMoved, answered once the lease is let go
	probes    int
	nextProbe time.Time
	answered  bool
}

type leaseMovesState struct {
	checks map[netip.Addr]*moveCheck
	told   map[netip.Addr]time.Time // holders told that their client moved here
	looked map[netip.Addr]time.Time // hosts heard on the TAP whose lease record was looked up
}

// noteOnce notes ip in notes and reports true at most once per
// moveToldEvery for each address: notes older than that are forgotten,
// and none is taken while maxNoted are kept.
func noteOnce(notes map[netip.Addr]time.Time, ip netip.Addr, now time.Time) bool {
	if at, ok := notes[ip]; ok && now.Sub(at) < moveToldEvery {
		return false
	}
	for a, at := range notes {
		if now.Sub(at) >= moveToldEvery {
			delete(notes, a)
		}
	}
	if len(notes) >= maxNoted {
		return false
	}
	notes[ip] = now
	return true
}

func movePayload(ip netip.Addr, mac l2.MAC) []byte {
	a := ip.As4()
	return append(a[:], mac[:]...)
}

func parseMovePayload(p []byte) (netip.Addr, l2.MAC, bool) {
	if len(p) != movePayloadLen {
		return netip.Addr{}, l2.MAC{}, false
	}
	return netip.AddrFrom4([4]byte(p[:4])), l2.MAC(p[4:]), true
}

// clientMoved is the DHCP server's news that it acknowledged a lease on
// the record of holder: the client moved here.
func (n *Node) clientMoved(l ipam.Lease, holder nid.ID) {
	m := &n.svc.moves
	if holder == n.self || holder == (nid.ID{}) || !noteOnce(m.told, l.IP, n.now) {
		return
	}
	n.log.Info("dhcp: a client moved here; asking its lease's holder to let it go", "client", l.MAC, "address", l.IP, "holder", n.memberName(holder))
	n.originate(&overlay.Message{Type: overlay.LeaseMoved, Dest: holder, Exact: true, Origin: n.self, Via: n.via(),
		ID: n.ov.rng.Uint64(), Payload: movePayload(l.IP, l.MAC)}, n.now)
}

// checkMoved starts the holder's check of a client another member says
// moved to it: it probes for the client on its own TAP.
func (n *Node) checkMoved(m *overlay.Message, now time.Time) {
	ip, mac, ok := parseMovePayload(m.Payload)
	s := &n.svc
	if !ok || s.dhcp == nil || !s.dhcp.Manages(ip) || m.Origin == n.self {
		n.stats.drop(DropMalformed)
		return
	}
	if _, busy := s.moves.checks[ip]; busy || len(s.moves.checks) >= maxMoveChecks {
		return
	}
	s.moves.checks[ip] = &moveCheck{client: mac, asked: *m, nextProbe: now}
	n.probeMoved(now)
}

// probeMoved sends the probes that are due, and lets go of the leases
// whose clients answered none.
func (n *Node) probeMoved(now time.Time) {
	s := &n.svc
	for ip, c := range s.moves.checks {
		switch {
		case c.answered:
			delete(s.moves.checks, ip)
			n.log.Info("dhcp: a client said to have moved is still here; keeping its lease", "client", c.client, "address", ip, "claimed by", n.memberName(c.asked.Origin))
		case now.Before(c.nextProbe):
		case c.probes < moveProbes:
			c.probes++
			c.nextProbe = now.Add(moveProbeGap)
			n.sendARPProbe(ip)
		default:
			delete(s.moves.checks, ip)
			n.letLeaseGo(ip, c, now)
		}
	}
}

// sendARPProbe asks the TAP who has ip, as the DHCP server: an answer
// comes back to the server's MAC, through the core.
func (n *Node) sendARPProbe(ip netip.Addr) {
	d := n.cfg.Services.DHCP
	frame := (l2.Ethernet{Dst: l2.Broadcast, Src: d.ServerMAC, EtherType: l2.EtherTypeARP}).AppendHeader(nil)
	frame, err := l2.AppendARP(frame, l2.ARP{Op: l2.ARPRequest, SenderMAC: d.ServerMAC, SenderIP: d.ServerIP, TargetIP: ip})
	if err == nil {
		n.serviceFrame(frame)
	}
}

// heardLocally notes an ARP from a host on the TAP: a client said to have
// moved that answers is still here, and a client of another member's
// lease that arrived here takes its lease along (ipam.Server.Arrived).
func (n *Node) heardLocally(ip netip.Addr, mac l2.MAC, now time.Time) {
	s := &n.svc
	if c := s.moves.checks[ip]; c != nil && c.client == mac {
		c.answered = true
	}
	if s.dhcp != nil && mac != n.cfg.MAC && s.dhcp.Manages(ip) && noteOnce(s.moves.looked, ip, now) {
		s.dhcp.Arrived(ip, mac, now)
	}
}

// letLeaseGo deletes the lease record of a client that left, and tells
// the member it moved to, which then takes the lease over.
func (n *Node) letLeaseGo(ip netip.Addr, c *moveCheck, now time.Time) {
	asked := c.asked
	n.svc.dhcp.LetGo(ip, c.client, now, func(st dht.Status) {
		if st != dht.OK {
			return // not ours, or not now: the other member asks again when the client renews
		}
		n.log.Info("dhcp: a client moved to another member; its lease went with it", "client", c.client, "address", ip, "to", n.memberName(asked.Origin))
		n.reply(&asked, &overlay.Message{Type: overlay.LeaseReleased, Payload: asked.Payload}, n.now)
	})
}

// takeOverLease writes the record of a lease its holder let go.
func (n *Node) takeOverLease(m *overlay.Message, now time.Time) {
	ip, mac, ok := parseMovePayload(m.Payload)
	if !ok || n.svc.dhcp == nil {
		n.stats.drop(DropMalformed)
		return
	}
	n.svc.dhcp.TakeOver(ip, mac, now, func(st dht.Status) {
		if st == dht.OK {
			n.log.Info("dhcp: took over the lease of a client that moved here", "client", mac, "address", ip)
		}
	})
}
