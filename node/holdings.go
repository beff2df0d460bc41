package node

import (
	"net/netip"
	"slices"
	"time"

	"burrow/dht"
	"burrow/firewall"
	"burrow/ipam"
	"burrow/l2"
	"burrow/nid"
	"burrow/warrens"
)

// Frames bound to the holders of leases and subnet claims. An address in
// the DHCP range (one only a lease gives) or in the container subnet
// ranges (one only a subnet claim gives) belongs to the member whose
// signed DHT record holds it. The core looks the record up the first time
// a frame from another member uses such an address, and publishes the
// holder in the snapshot; until the answer is there the frames pass. The
// data path never waits for the DHT: it hands a frame whose source has no
// answer yet to the core, which keeps it until the answer is there and
// then delivers or drops it. Only when no lookup can be made (the limits
// below) or the lookup fails does a frame pass unjudged.

// RouterGroup is the certificate group of a member that may forward for a
// LAN behind it (burrow cert sign --router): its frames may use addresses
// of the DHCP range or the subnet ranges that no lease or claim gives to
// anyone. Another member's frames with such an address are dropped as
// unheld.
const RouterGroup = "router"

const (
	// heldFor is how often a holder is looked up again (or at the
	// record's end, if sooner): a lease given up and taken by another
	// member moves with it. An address no one has held for that long is
	// forgotten.
	heldFor = time.Minute
	// unheldFor is how often an address no one holds is looked up again:
	// a lease written since is found this soon.
	unheldFor = 10 * time.Second
	// recheckDroppedAfter: while a holder's answer drops a member's
	// frames, it is looked up again this often, so that a lease that moved
	// to that member with its client (see leasemove.go) is found within
	// seconds rather than at the next refresh.
	recheckDroppedAfter = 5 * time.Second
	// maxHoldings bounds the addresses and subnets the node keeps holders
	// of, and maxAsking the lookups under way.
	maxHoldings = 4096
	maxAsking   = 256
	// maxHeldPerKey frames per lookup, and maxHeldBytes in all, wait for
	// the answer; more are dropped as unjudged_full.
	maxHeldPerKey = 16
	maxHeldBytes  = 1 << 20
	// logDropsEvery is how often the log says why one member's frames are
	// dropped for one reason.
	logDropsEvery = time.Minute
)

// holding is who holds an address or a subnet, as the node last looked it
// up: a zero holder means no one does.
type holding struct {
	holder nid.ID
	client l2.MAC    // a lease's client: bound to the holder like a TAP MAC
	until  time.Time // when to look it up again
	// checked is when the answer was read.
	checked time.Time
	// unheldSince is when the node first found no one holding it.
	unheldSince time.Time
}

// subnetRange is a Warrens range whose subnets only claims give.
type subnetRange struct {
	prefix netip.Prefix
	bits   int
}

type holdingsState struct {
	leases  map[netip.Addr]holding
	subnets map[netip.Prefix]holding
	// asking are the DHT keys being looked up, each with the bridge whose
	// frame asked (named in the log when the answer says it is dropped).
	asking map[string]nid.ID
	// logged is when the log last said why a member's frames are dropped.
	logged map[dropLogKey]time.Time
	// clientLeases are the addresses of the leases kept, by client MAC.
	clientLeases map[l2.MAC]netip.Addr
	// held are the frames waiting for a lookup, by its DHT key, and
	// heldBytes their size.
	held      map[string][]heldFrame
	heldBytes int
	// passUnjudged: the frames being released had no answer to wait for,
	// so they pass as they would have before the lookup.
	passUnjudged bool
}

// heldFrame waits for the lookup of its source address's holder: a frame
// the data path would have written to the TAP, or, switched, one the core
// switches, run through the switch again once the answer is there.
type heldFrame struct {
	frame    []byte
	off      l2.Offload
	origin   nid.ID
	in       uint32
	routed   bool
	switched bool
}

type dropLogKey struct {
	origin nid.ID
	v      verdict
}

// heldSpace is where the node judges holders: the DHCP range when it
// serves DHCP itself, and the subnet ranges of the families it claims
// subnets in. Members of one network share that configuration.
func (n *Node) heldSpace() (dhcpRange func(netip.Addr) bool, subnets []subnetRange) {
	if d := n.svc.dhcp; d != nil {
		dhcpRange = d.Manages
	}
	for _, c := range n.cfg.Services.Subnets {
		bits := warrens.IPv4Bits
		if c.Family == warrens.IPv6 {
			bits = warrens.IPv6Bits
		}
		subnets = append(subnets, subnetRange{warrens.Range(c.Family), bits})
	}
	return dhcpRange, subnets
}

// publishHoldings copies the holders into the snapshot.
func (n *Node) publishHoldings(s *snapshot) {
	h := &n.svc.holdings
	s.holdingsView = &holdingsView{}
	s.dhcpRange, s.subnetRanges = n.heldSpace()
	s.leaseHolders = make(map[netip.Addr]holding, len(h.leases))
	s.clientMACs = make(map[l2.MAC]nid.ID)
	clear(h.clientLeases)
	for a, l := range h.leases {
		s.leaseHolders[a] = l
		if l.client != (l2.MAC{}) && l.holder != (nid.ID{}) {
			s.clientMACs[l.client] = l.holder
			h.clientLeases[l.client] = a
		}
	}
	s.subnetHolders = make(map[netip.Prefix]holding, len(h.subnets))
	for p, c := range h.subnets {
		s.subnetHolders[p] = c
	}
}

// judge is the snapshot's verdict on a frame the core switches, and the
// source address it judged.
func (n *Node) judge(frame []byte, origin nid.ID, now time.Time) (verdict, netip.Addr) {
	v, src := n.snap.Load().judge(frame, origin)
	switch v {
	case unjudged:
		if n.svc.holdings.passUnjudged {
			return passes, src
		}
	case spoofed, unheld:
		n.logDrop(v, src, origin, now)
		n.recheckDropped(frame, src, origin, now)
	}
	return v, src
}

// holdFrame keeps f, whose source address a has no holder looked up yet,
// until the answer is there, and asks. A frame whose answer the core has
// already (the data path's snapshot was older) is released at once, and
// so is one no lookup can be made for, passing unjudged.
func (n *Node) holdFrame(f heldFrame, a netip.Addr, now time.Time) {
	h := &n.svc.holdings
	key, subnet, ok := n.holderKey(a)
	_, asking := h.asking[key]
	switch {
	case !ok || !asking && len(h.asking) >= maxAsking, n.known(a, subnet):
		// Judged on the answer kept, once published; with none to wait
		// for, it passes (and never comes back here).
		n.publishIfDirty()
		h.passUnjudged = true
		n.release(f, now)
		h.passUnjudged = false
	case len(h.held[key]) >= maxHeldPerKey || h.heldBytes+len(f.frame) > maxHeldBytes:
		n.stats.drop(DropUnjudgedFull)
	default:
		h.held[key] = append(h.held[key], f)
		h.heldBytes += len(f.frame)
		if !asking {
			n.askHolder(a, subnet, f.origin, now)
		}
	}
}

// known reports whether the node has an answer for a's lease, or for
// subnet's claim.
func (n *Node) known(a netip.Addr, subnet netip.Prefix) bool {
	_, ok := n.kept(a, subnet)
	return ok
}

// kept is the answer the node has for a's lease, or for subnet's claim
// when subnet is valid, if it has one.
func (n *Node) kept(a netip.Addr, subnet netip.Prefix) (holding, bool) {
	h := &n.svc.holdings
	if subnet.IsValid() {
		c, ok := h.subnets[subnet]
		return c, ok
	}
	l, ok := h.leases[a]
	return l, ok
}

// releaseHeld runs the frames that waited for the lookup of key, now
// that it has an answer, or (answered false) failed.
func (n *Node) releaseHeld(key string, answered bool, now time.Time) {
	h := &n.svc.holdings
	frames := h.held[key]
	if len(frames) == 0 {
		return
	}
	delete(h.held, key)
	n.publishIfDirty() // the judge reads the answer from the snapshot
	h.passUnjudged = !answered
	for _, f := range frames {
		h.heldBytes -= len(f.frame)
		n.release(f, now)
	}
	h.passUnjudged = false
}

// release judges a held frame again and delivers it if it passes.
func (n *Node) release(f heldFrame, now time.Time) {
	if f.switched {
		n.switchFrame(f.in, f.frame, f.off, f.origin, f.routed, now)
		return
	}
	v, _ := n.judge(f.frame, f.origin, now)
	if n.stats.bound(v) && n.passesFirewall(firewall.Inbound, f.frame, l2.MAC(f.frame[6:12]), f.origin, now) {
		n.writeTAP(f.frame, f.off)
	}
}

// recheckDropped looks up again the holder whose answer has a frame from
// origin dropped, when that answer is older than recheckDroppedAfter. The
// frame's source address decides, or, when its MAC gave it away, the
// address of the lease whose client that MAC is.
func (n *Node) recheckDropped(frame []byte, src netip.Addr, origin nid.ID, now time.Time) {
	h := &n.svc.holdings
	if a, ok := h.clientLeases[l2.MAC(frame[6:12])]; ok {
		src = a
	}
	if !src.IsValid() {
		return
	}
	if _, subnet, ok := n.holderKey(src); ok {
		if kept, known := n.kept(src, subnet); known && now.Sub(kept.checked) >= recheckDroppedAfter {
			n.askHolder(src, subnet, origin, now)
		}
	}
}

// holderKey is the DHT key of the record that says who holds a — its
// lease's, or its subnet's claim's — and that subnet (invalid for a
// lease). ok is false for an address no lease or claim gives, and when
// the node keeps as many holders as it may.
func (n *Node) holderKey(a netip.Addr) (key string, subnet netip.Prefix, ok bool) {
	h := &n.svc.holdings
	s := n.snap.Load()
	if len(h.leases)+len(h.subnets) >= maxHoldings {
		return "", netip.Prefix{}, false
	}
	if s.dhcpRange != nil && s.dhcpRange(a) {
		return n.svc.dhcp.Key(a), netip.Prefix{}, true
	}
	if r := slices.IndexFunc(s.subnetRanges, func(r subnetRange) bool { return r.prefix.Contains(a) }); r >= 0 {
		subnet = netip.PrefixFrom(a, s.subnetRanges[r].bits).Masked()
		return warrens.Key(subnet), subnet, true
	}
	return "", netip.Prefix{}, false
}

// askHolder reads the record of a's lease, or of subnet's claim when
// subnet is valid, and keeps who holds it. An answer already kept stands
// until the new one is there. origin is the bridge whose frame asked,
// zero for a refresh.
func (n *Node) askHolder(a netip.Addr, subnet netip.Prefix, origin nid.ID, now time.Time) {
	h := &n.svc.holdings
	key := warrens.Key(subnet)
	if !subnet.IsValid() {
		key = n.svc.dhcp.Key(a)
	}
	if _, busy := h.asking[key]; busy || len(h.asking) >= maxAsking {
		return
	}
	h.asking[key] = origin
	n.svc.kv.Get(key, now, func(r dht.Result) {
		delete(h.asking, key)
		before, ok := h.leases[a]
		if subnet.IsValid() {
			before, ok = h.subnets[subnet]
		}
		var held holding
		switch r.Status {
		case dht.OK:
			held = holding{holder: r.Owner, until: r.At.Add(heldFor), checked: r.At}
			if r.Expires.Before(held.until) {
				held.until = r.Expires
			}
			if !subnet.IsValid() {
				held.client, _ = ipam.LeaseClient(r.Value)
			}
		case dht.NotFound:
			held = holding{until: r.At.Add(unheldFor), unheldSince: r.At, checked: r.At}
			if ok && before.holder == (nid.ID{}) {
				held.unheldSince = before.unheldSince
			}
		default:
			// As before: the next frame, or the next tick, asks again.
			n.releaseHeld(key, false, r.At)
			return
		}
		if subnet.IsValid() {
			h.subnets[subnet] = held
		} else {
			h.leases[a] = held
		}
		n.dirty |= dirtyHoldings
		if origin != (nid.ID{}) {
			n.logHolding(a, origin, held.holder, r.At)
		}
		n.releaseHeld(key, true, r.At)
	})
}

// logHolding says, when a lookup's answer has frames from origin
// dropped, why.
func (n *Node) logHolding(a netip.Addr, origin, holder nid.ID, now time.Time) {
	switch {
	case holder == origin:
	case holder != (nid.ID{}):
		n.logDrop(spoofed, a, origin, now, "holder", n.memberName(holder))
	case n.snap.Load().notRouters[origin]:
		n.logDrop(unheld, a, origin, now)
	}
}

// logDrop says why frames from origin are dropped, at most once per
// member and reason in logDropsEvery; a is the frame's source address,
// invalid when its MAC gave it away.
func (n *Node) logDrop(v verdict, a netip.Addr, origin nid.ID, now time.Time, attrs ...any) {
	h := &n.svc.holdings
	k := dropLogKey{origin, v}
	if at, ok := h.logged[k]; ok && now.Sub(at) < logDropsEvery {
		return
	}
	h.logged[k] = now
	if a.IsValid() {
		attrs = append([]any{"address", a}, attrs...)
	}
	attrs = append([]any{"from", n.memberName(origin)}, attrs...)
	if v == spoofed {
		n.log.Warn("dropping frames from a member that uses another member's MAC or address (counted as spoofed)", attrs...)
		return
	}
	n.log.Warn("dropping frames from a member using an address no lease or subnet claim gives it (counted as unheld); "+
		"sign its certificate with burrow cert sign --router if it forwards for a LAN behind it", attrs...)
}

// memberName is a linked member's certificate name, else its node ID.
func (n *Node) memberName(id nid.ID) string {
	if p := n.snap.Load().byPeer[id]; p != nil && p.link.Peer.Name != "" {
		return p.link.Peer.Name
	}
	return id.String()
}

// refreshHoldings looks up again the holders whose answer is due, keeping
// the answer until the new one is there, so that no frame passes
// unjudged in between. An address no one has held for heldFor is
// forgotten instead: the next frame from it asks again.
func (n *Node) refreshHoldings(now time.Time) {
	h := &n.svc.holdings
	due := func(l holding) (refresh, forget bool) {
		if now.Before(l.until) {
			return false, false
		}
		if l.holder == (nid.ID{}) && now.Sub(l.unheldSince) >= heldFor {
			return false, true
		}
		return true, false
	}
	for a, l := range h.leases {
		if refresh, forget := due(l); forget {
			delete(h.leases, a)
			n.dirty |= dirtyHoldings
		} else if refresh {
			n.askHolder(a, netip.Prefix{}, nid.ID{}, now)
		}
	}
	for p, c := range h.subnets {
		if refresh, forget := due(c); forget {
			delete(h.subnets, p)
			n.dirty |= dirtyHoldings
		} else if refresh {
			n.askHolder(p.Addr(), p, nid.ID{}, now)
		}
	}
	for k, at := range h.logged {
		if now.Sub(at) >= logDropsEvery {
			delete(h.logged, k)
		}
	}
}
