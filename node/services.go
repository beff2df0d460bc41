package node

import (
	"bytes"
	"io"
	"net/netip"
	"slices"
	"time"

	"burrow/dht"
	"burrow/ipam"
	"burrow/l2"
	"burrow/nid"
	"burrow/overlay"
	"burrow/vdns"
	"burrow/warrens"
	"burrow/xeddsa"

	"github.com/mdlayher/ndp"
)

// ServicesConfig says what a node offers on its TAP beyond switching.
// They all rest on the DHT the nodes keep on the ring.
type ServicesConfig struct {
	DHT dht.Config
	// DHCP answers DHCP clients on the TAP with addresses leased in the
	// DHT; nil turns it off.
	DHCP *ipam.Config
	// DNS answers on a reserved virtual address; nil turns it off.
	DNS *vdns.Config
	// ARPAnswer answers ARP requests and IPv6 neighbour solicitations from
	// the TAP for addresses the node knows, instead of flooding them.
	ARPAnswer bool
	// LocalDHCP keeps DHCP off the overlay: the LAN bridged to the TAP has
	// a server of its own. Its hosts' requests are not flooded (nor
	// answered by this node), and other members' are not delivered here.
	LocalDHCP bool
	// Subnets claims self-assigned container subnets (Warrens); OnSubnet
	// is told when a claim changes, to configure the local bridge.
	Subnets  []warrens.ClaimConfig
	OnSubnet func(warrens.Status)
	// ForwardDNS sends a query outside the virtual domain to the real
	// resolvers; the answer comes back through Node.DNSAnswer.
	ForwardDNS func(vdns.ForwardRequest)
}

// arpEntry is an address's hardware address as this node last saw it;
// for an IPv6 address, also whether its holder said it is a router (an
// answer must repeat that, or hosts drop it as their default router).
type arpEntry struct {
	mac     l2.MAC
	router  bool
	expires time.Time
}

const (
	arpTTL      = 60 * time.Second
	arpMax      = 4096
	arpKeyTTL   = 10 * time.Minute
	arpKeyRenew = arpKeyTTL / 3
)

type servicesState struct {
	kv       *dht.Participant
	dhcp     *ipam.Server
	dns      *vdns.Resolver
	claimers []*warrens.Claimer
	holdings holdingsState
	moves    leaseMovesState
	arp      map[netip.Addr]arpEntry
	// registered remembers local addresses published in the DHT and when.
	registered map[netip.Addr]time.Time
	ringSig    []nid.ID // predecessor and successors last told to the DHT
	// ringNow is ringChangedForDHT's working memory, kept for its
	// capacity: it runs at every tick.
	ringNow []nid.ID
	// started: the node has found its place on the ring (or has no one to
	// join), so writes land where the rest of the network looks for them.
	// Until then a node alone would take every key as its own.
	started bool
	waiting []func(now time.Time)
}

// dhtEnv lets the DHT use the overlay.
type dhtEnv Node

func (e *dhtEnv) Self() nid.ID { return e.self }

func (e *dhtEnv) Successors(n int) []nid.ID {
	var out []nid.ID
	for _, s := range e.ov.ring.Successors(n) {
		out = append(out, s.ID)
	}
	return out
}

func (e *dhtEnv) Predecessor() (nid.ID, bool) {
	p, ok := e.ov.ring.Predecessor()
	return p.ID, ok
}

func (e *dhtEnv) Send(to nid.ID, exact bool, payload []byte) {
	n := (*Node)(e)
	n.originate(&overlay.Message{Type: overlay.Data, Dest: to, Exact: exact, Origin: n.self, Via: n.via(),
		ID: n.ov.rng.Uint64(), Payload: payload}, n.now)
}

// dhtAuthority signs the node's DHT records with its static key and holds
// every record to its owner's signature; a revoked member's are void.
type dhtAuthority Node

func (a *dhtAuthority) PublicKey() [32]byte { return a.cfg.Handshake.Public }

func (a *dhtAuthority) Sign(msg []byte) [dht.SignatureSize]byte {
	var random [64]byte
	// The nonce depends on the key and msg already; a failed read only
	// loses the extra hardening.
	_, _ = io.ReadFull(a.cfg.Handshake.Rand, random[:])
	return xeddsa.Sign(a.cfg.Handshake.Private, msg, random)
}

func (a *dhtAuthority) Certificate() []byte { return a.cfg.Handshake.Cert }

// Member checks a certificate as a handshake does: the CA's, for key, not
// expired, not revoked.
func (a *dhtAuthority) Member(cert []byte, key [32]byte, now time.Time) bool {
	_, err := (*Node)(a).verifyPeer(cert, key, now)
	return err == nil
}

func (a *dhtAuthority) Verify(key [32]byte, msg []byte, sig [dht.SignatureSize]byte) bool {
	if _, revoked := a.rev.raw[nid.FromPublicKey(key)]; revoked {
		return false
	}
	return xeddsa.Verify(key, msg, sig)
}

// WithDHT hands f the node's DHT at now, for operations its operator asks
// for (burrow dht). Callbacks run later, inside the core.
func (n *Node) WithDHT(now time.Time, f func(dht.Client)) {
	n.now = now
	f(n.svc.kv)
}

func (n *Node) initServices(now time.Time) error {
	s := &n.svc
	c := n.cfg.Services
	if c.DHT.Auth == nil {
		c.DHT.Auth = (*dhtAuthority)(n)
	}
	if c.DHT.Shared == nil {
		c.DHT.Shared = n.sharedSettings
	}
	if c.DHT.SelfCertifying == nil {
		c.DHT.SelfCertifying = (*revocationRecords)(n)
	}
	kv, err := dht.New((*dhtEnv)(n), c.DHT, now)
	if err != nil {
		return err
	}
	s.kv = kv
	s.arp = make(map[netip.Addr]arpEntry)
	s.holdings = holdingsState{leases: make(map[netip.Addr]holding), subnets: make(map[netip.Prefix]holding),
		asking: make(map[string]nid.ID), logged: make(map[dropLogKey]time.Time), clientLeases: make(map[l2.MAC]netip.Addr),
		held: make(map[string][]heldFrame)}
	s.moves = leaseMovesState{checks: make(map[netip.Addr]*moveCheck), told: make(map[netip.Addr]time.Time), looked: make(map[netip.Addr]time.Time)}
	s.registered = make(map[netip.Addr]time.Time)
	if c.DNS != nil {
		forward := c.ForwardDNS
		if forward == nil {
			forward = func(vdns.ForwardRequest) {}
		}
		if s.dns, err = vdns.New(*c.DNS, n.self, kv, n.serviceFrame, forward, n.log); err != nil {
			return err
		}
	}
	if c.DHCP != nil {
		cfg := *c.DHCP
		cfg.OnLease = func(l ipam.Lease) { n.leased(l) }
		cfg.OnMoved = n.clientMoved
		if s.dhcp, err = ipam.NewServer(cfg, kv, n.serviceFrame, n.log); err != nil {
			return err
		}
	}
	for _, cc := range c.Subnets {
		cl, err := warrens.NewClaimer(cc, kv, n.self, n.log, func(st warrens.Status) {
			if c.OnSubnet != nil {
				c.OnSubnet(st)
			}
		})
		if err != nil {
			return err
		}
		s.claimers = append(s.claimers, cl)
	}
	return nil
}

// startServices starts what writes to the DHT once the node has joined
// the ring — at once for a node with no one to join.
func (n *Node) startServices(now time.Time) {
	s := &n.svc
	alone := len(n.cfg.Overlay.Bootstrap) == 0 && len(n.cfg.Reach.Beacons) == 0 && len(n.cfg.Overlay.Remembered) == 0
	if s.started || !(n.ov.joined || alone || n.ov.cfg.Disabled) {
		return
	}
	s.started = true
	n.ringChangedForDHT(now)
	for _, cl := range s.claimers {
		cl.Start(now)
	}
	for _, f := range s.waiting {
		f(now)
	}
	s.waiting = nil
}

// whenStarted runs f now if the services have started, or when they do.
func (n *Node) whenStarted(now time.Time, f func(time.Time)) {
	if n.svc.started {
		f(now)
		return
	}
	n.svc.waiting = append(n.svc.waiting, f)
}

// serviceFrame writes a frame a service built to the TAP.
func (n *Node) serviceFrame(frame []byte) { n.writeTAP(frame, l2.Offload{}) }

// leased registers a DHCP client's name and address.
func (n *Node) leased(l ipam.Lease) {
	n.learnARP(l.IP, arpEntry{mac: l.MAC}, n.now)
	if n.svc.dns != nil && l.Hostname != "" {
		n.svc.dns.Register(l.Hostname, []netip.Addr{l.IP}, n.now, func(vdns.RegisterResult) {})
	}
}

// DNSAnswer hands back the real resolvers' answer to a forwarded query.
func (n *Node) DNSAnswer(id uint64, answer []byte, now time.Time) {
	n.now = now
	if n.svc.dns != nil {
		n.svc.dns.Forwarded(id, answer, now)
	}
	n.publishIfDirty()
}

// RegisterName claims a name in the network's DNS for this node's addresses.
func (n *Node) RegisterName(name string, addrs []netip.Addr, now time.Time, done func(ok bool)) {
	if n.svc.dns == nil {
		done(false)
		return
	}
	n.whenStarted(now, func(now time.Time) {
		n.svc.dns.Register(name, addrs, now, func(r vdns.RegisterResult) { done(r.State == vdns.Registered) })
	})
}

// UnregisterName gives up a name RegisterName claimed.
func (n *Node) UnregisterName(name string, now time.Time) {
	if n.svc.dns == nil {
		return
	}
	n.whenStarted(now, func(now time.Time) { n.svc.dns.Unregister(name, now) })
}

// serveLocal offers a frame from the TAP to the local services; it
// reports whether one of them consumed it.
func (n *Node) serveLocal(frame []byte, now time.Time) bool {
	s := &n.svc
	if !s.started {
		return false // clients retry; by then the node has joined
	}
	if s.dns != nil && s.dns.HandleFrame(frame, now) {
		return true
	}
	if s.dhcp != nil && s.dhcp.HandleFrame(frame, now) {
		return true
	}
	return n.answerARP(frame, now) || n.answerND(frame, now)
}

// snoopNeighbors learns address-to-MAC pairs from the ARP traffic and the IPv6
// neighbour advertisements the switch sees, so that later requests can be
// answered locally; a gratuitous ARP from a moved address updates the
// entry at once. Solicitations are not learned from: they do not say
// whether their sender is a router.
func (n *Node) snoopNeighbors(frame []byte, from uint32, now time.Time) {
	eth, err := l2.ParseEthernet(frame)
	if err != nil {
		return
	}
	var ip netip.Addr
	var e arpEntry
	switch eth.EtherType {
	case l2.EtherTypeARP:
		a, err := l2.ParseARP(frame[eth.PayloadOffset:])
		if err != nil || !a.SenderIP.IsValid() || a.SenderIP.IsUnspecified() {
			return
		}
		ip, e = a.SenderIP, arpEntry{mac: a.SenderMAC}
		if from == localPort {
			n.heardLocally(ip, e.mac, now)
		}
	case l2.EtherTypeIPv6:
		nd, err := l2.ParseND(frame)
		if err != nil {
			return
		}
		na, ok := nd.Message.(*ndp.NeighborAdvertisement)
		if !ok || !na.TargetAddress.Is6() || na.TargetAddress.IsMulticast() || na.TargetAddress.IsUnspecified() {
			return
		}
		e.mac, ok = nd.LinkLayerAddress()
		if !ok {
			e.mac = eth.Src
		}
		ip, e.router = na.TargetAddress, na.Router
	default:
		return
	}
	if e.mac.IsMulticast() || e.mac == (l2.MAC{}) {
		return
	}
	n.learnARP(ip, e, now)
	if from == localPort && n.svc.started {
		n.publishARP(ip, e, now)
	}
}

func (n *Node) learnARP(ip netip.Addr, e arpEntry, now time.Time) {
	s := &n.svc
	if _, ok := s.arp[ip]; !ok && len(s.arp) >= arpMax {
		return
	}
	e.expires = now.Add(arpTTL)
	s.arp[ip] = e
}

// publishARP records a local host's address in the DHT, so that other
// nodes can answer ARP and neighbour solicitations for it without a
// broadcast. An IPv6 entry's value carries the router flag after the MAC.
func (n *Node) publishARP(ip netip.Addr, e arpEntry, now time.Time) {
	s := &n.svc
	if at, ok := s.registered[ip]; ok && now.Sub(at) < arpKeyRenew {
		return
	}
	s.registered[ip] = now
	value := e.mac[:]
	if ip.Is6() {
		value = append(bytes.Clone(value), boolByte(e.router))
	}
	s.kv.Put(arpKey(ip), value, arpKeyTTL, now, func(dht.Result) {})
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func arpKey(ip netip.Addr) string { return "arp:" + ip.String() }

// knownNeighbor is the entry for ip when it is fresh and its holder is not
// on this node's own TAP (local hosts answer for themselves). On a miss it
// asks the DHT, so that the next request finds the answer.
func (n *Node) knownNeighbor(ip netip.Addr, now time.Time) (arpEntry, bool) {
	e, ok := n.svc.arp[ip]
	if !ok || now.After(e.expires) {
		n.svc.kv.Get(arpKey(ip), now, func(r dht.Result) {
			switch {
			case r.Status != dht.OK:
			case ip.Is4() && len(r.Value) == 6:
				n.learnARP(ip, arpEntry{mac: l2.MAC(r.Value)}, r.At)
			case ip.Is6() && len(r.Value) == 7 && r.Value[6] <= 1:
				n.learnARP(ip, arpEntry{mac: l2.MAC(r.Value[:6]), router: r.Value[6] == 1}, r.At)
			}
		})
		return e, false
	}
	if where, known := n.learn.Lookup(e.mac); known && uint32(where.Port) == localPort {
		return e, false
	}
	return e, true
}

// answerARP answers a local ARP request when the target's MAC is known
// and the target is not local (local hosts answer themselves); on a miss
// it asks the DHT, so the next request finds the answer.
func (n *Node) answerARP(frame []byte, now time.Time) bool {
	if !n.cfg.Services.ARPAnswer {
		return false
	}
	eth, err := l2.ParseEthernet(frame)
	if err != nil || eth.EtherType != l2.EtherTypeARP || !eth.Dst.IsBroadcast() {
		return false
	}
	req, err := l2.ParseARP(frame[eth.PayloadOffset:])
	if err != nil || req.Op != l2.ARPRequest || req.SenderIP == req.TargetIP {
		return false
	}
	e, ok := n.knownNeighbor(req.TargetIP, now)
	if !ok {
		return false
	}
	reply := (l2.Ethernet{Dst: req.SenderMAC, Src: e.mac, EtherType: l2.EtherTypeARP}).AppendHeader(nil)
	reply, err = l2.AppendARP(reply, l2.ARP{Op: l2.ARPReply, SenderMAC: e.mac, SenderIP: req.TargetIP, TargetMAC: req.SenderMAC, TargetIP: req.SenderIP})
	if err != nil {
		return false
	}
	n.stats.ARPAnswered.Add(1)
	n.writeTAP(reply, l2.Offload{})
	return true
}

// answerND answers, like answerARP, a neighbour solicitation from the TAP
// for an IPv6 address whose holder the node knows. Duplicate address
// detection (from the unspecified address) is left to the holder.
func (n *Node) answerND(frame []byte, now time.Time) bool {
	if !n.cfg.Services.ARPAnswer {
		return false
	}
	nd, err := l2.ParseND(frame)
	if err != nil || !nd.Eth.Dst.IsMulticast() || nd.Src.IsUnspecified() {
		return false
	}
	ns, ok := nd.Message.(*ndp.NeighborSolicitation)
	if !ok || ns.TargetAddress == nd.Src {
		return false
	}
	e, ok := n.knownNeighbor(ns.TargetAddress, now)
	if !ok {
		n.findSubnetHolder(ns.TargetAddress, now)
		return false
	}
	reply, err := l2.AppendNeighborAdvertisement(nil, nd.Eth.Src, nd.Src, e.mac, ns.TargetAddress, e.router)
	if err != nil {
		return false
	}
	n.stats.NDAnswered.Add(1)
	n.writeTAP(reply, l2.Offload{})
	return true
}

// findSubnetHolder looks up, for an address in a member's Warrens IPv6
// container subnet, the member that claimed the subnet: it routes the
// subnet, so it is the address's neighbour, at its TAP's MAC (MACFor). The
// next solicitation for the address is then answered. Linux proxies
// neighbour discovery only address by address, so without this the
// kernels of other members could not reach a subnet's containers.
func (n *Node) findSubnetHolder(target netip.Addr, now time.Time) {
	if !warrens.Range(warrens.IPv6).Contains(target) {
		return
	}
	key := warrens.Key(netip.PrefixFrom(target, warrens.IPv6Bits).Masked())
	n.svc.kv.Get(key, now, func(r dht.Result) {
		if r.Status == dht.OK && r.Owner != n.self {
			n.learnARP(target, arpEntry{mac: MACFor(r.Owner), router: true}, r.At)
		}
	})
}

func (n *Node) servicesTick(now time.Time) {
	s := &n.svc
	n.startServices(now)
	n.ringChangedForDHT(now)
	s.kv.Tick(now)
	if s.dns != nil {
		s.dns.Tick(now)
	}
	for _, cl := range s.claimers {
		cl.Tick(now)
	}
	n.groupsTick(now)
	if s.started {
		n.settingsTick(now)
		n.storeRevocationsTick(now)
		n.lookUpsDue(now)
	}
	if s.dhcp != nil {
		n.probeMoved(now)
	}
	for ip, e := range s.arp {
		if now.After(e.expires) {
			delete(s.arp, ip)
		}
	}
	n.refreshHoldings(now)
}

// ringChangedForDHT tells the DHT when the predecessor or successors
// changed, so it moves replicas.
func (n *Node) ringChangedForDHT(now time.Time) {
	sig := n.svc.ringNow[:0]
	if p, ok := n.ov.ring.Predecessor(); ok {
		sig = append(sig, p.ID)
	}
	for _, s := range n.ov.ring.Successors(overlay.MaxSuccessors) {
		sig = append(sig, s.ID)
	}
	if slices.Equal(sig, n.svc.ringSig) {
		n.svc.ringNow = sig
		return
	}
	n.svc.ringSig, n.svc.ringNow = sig, n.svc.ringSig
	n.svc.kv.RingChanged(now)
}

// servicesDeadline is when the services next need a tick.
func (n *Node) servicesDeadline(now time.Time) time.Time {
	next := n.svc.kv.NextDeadline(now)
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if n.svc.dns != nil {
		consider(n.svc.dns.NextDeadline())
	}
	for _, cl := range n.svc.claimers {
		consider(cl.NextDeadline())
	}
	for _, c := range n.svc.moves.checks {
		consider(c.nextProbe)
	}
	if n.svc.started {
		consider(n.nextLookUp())
	}
	return next
}

// ServicesStatus reports the DHT, DHCP, DNS, ARP and subnet services.
type ServicesStatus struct {
	DHT         dht.Stats             `json:"dht"`
	DHCP        *ipam.Stats           `json:"dhcp,omitempty"`
	Leases      []ipam.Lease          `json:"leases,omitempty"`
	DNS         *vdns.Stats           `json:"dns,omitempty"`
	Names       []vdns.RegisterResult `json:"names,omitempty"`
	ARPEntries  int                   `json:"arp_entries"`
	ARPAnswered uint64                `json:"arp_answered"`
	NDAnswered  uint64                `json:"nd_answered"`
	// DHCPKeptLocal counts DHCP frames kept off the overlay (tap.local_dhcp).
	DHCPKeptLocal uint64 `json:"dhcp_kept_local,omitempty"`
	// Subnets are the container subnet claims, one per family; empty
	// when services.subnets is off.
	Subnets []SubnetStatus `json:"subnets,omitempty"`
}

// SubnetStatus is one self-assigned container subnet (Warrens), with its
// states spelled out for people and scripts.
type SubnetStatus struct {
	Family string `json:"family"` // ipv4 or ipv6
	// Prefix is the subnet claimed, or the candidate being claimed.
	Prefix netip.Prefix `json:"prefix"`
	// State is waiting (for the node to join the ring: a claim written
	// earlier would land where the other nodes do not look), claiming,
	// claimed, or exhausted (other nodes hold every candidate).
	State string `json:"state"`
	// Attempt counts the candidates found held by other nodes before
	// Prefix: 0 is the subnet derived from the machine id itself.
	Attempt int `json:"attempt"`
	// Expires is when the claim lapses unless renewed; zero until claimed.
	Expires    time.Time         `json:"expires,omitzero"`
	Collisions []SubnetCollision `json:"collisions,omitempty"`
	// Bridge is the local bridge the subnet is routed on. The core knows
	// nothing of bridges: the daemon, which creates it, fills it in.
	Bridge string `json:"bridge,omitempty"`
}

// SubnetCollision is a candidate subnet found held by another node.
type SubnetCollision struct {
	Prefix netip.Prefix `json:"prefix"`
	Holder string       `json:"holder"` // the holder's node ID
}

func (s *servicesState) subnetStatus(cl *warrens.Claimer) SubnetStatus {
	c := cl.Status()
	st := SubnetStatus{Family: c.Family.String(), Prefix: c.Prefix, State: c.State.String(), Attempt: c.Attempt, Expires: c.Expires}
	if !s.started {
		st.State = "waiting"
	}
	for _, col := range c.Collisions {
		st.Collisions = append(st.Collisions, SubnetCollision{Prefix: col.Prefix, Holder: col.Holder.String()})
	}
	return st
}

func (n *Node) servicesStatus(now time.Time) ServicesStatus {
	s := &n.svc
	st := ServicesStatus{DHT: s.kv.Stats(), ARPEntries: len(s.arp), ARPAnswered: n.stats.ARPAnswered.Load(), NDAnswered: n.stats.NDAnswered.Load(),
		DHCPKeptLocal: n.stats.DHCPKeptLocal.Load()}
	if s.dhcp != nil {
		ds := s.dhcp.Stats()
		st.DHCP, st.Leases = &ds, s.dhcp.Leases(now)
	}
	if s.dns != nil {
		ns := s.dns.Stats()
		st.DNS, st.Names = &ns, s.dns.Names()
	}
	for _, cl := range s.claimers {
		st.Subnets = append(st.Subnets, s.subnetStatus(cl))
	}
	return st
}
