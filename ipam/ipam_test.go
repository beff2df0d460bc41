package ipam

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"burrow/dht"
	"burrow/dht/dhttest"
	"burrow/l2"
	"burrow/l2/udp4"
	"burrow/nid"
)

var (
	serverMAC = l2.MAC{0xfe, 0xfd, 0, 0, 0, 1}
	serverIP  = netip.MustParseAddr("10.5.0.1")
	start     = time.Unix(1_700_000_000, 0)
)

func baseConfig() Config {
	return Config{
		Network:   netip.MustParsePrefix("10.5.0.0/16"),
		Gateway:   netip.MustParseAddr("10.5.0.1"),
		DNS:       netip.MustParseAddr("10.5.0.2"),
		Domain:    "burrow.test",
		LeaseTime: 10 * time.Minute,
		OfferHold: 30 * time.Second,
		ServerMAC: serverMAC,
		ServerIP:  serverIP,
	}
}

// rig is servers on several nodes sharing one slow store, and DHCP clients
// on their TAPs.
type rig struct {
	t       *testing.T
	store   *dhttest.Store
	now     time.Time
	servers []*Server
	outbox  [][][]byte // frames written by each server, not yet delivered
	clients []*dhcpClient
	log     bytes.Buffer
}

func newRig(t *testing.T, seed uint64, servers int, cfg Config) *rig {
	r := &rig{t: t, store: dhttest.NewStore(seed), now: start}
	r.store.MaxDelay = 200 * time.Millisecond
	log := slog.New(slog.NewTextHandler(&r.log, nil))
	for i := range servers {
		i := i
		s, err := NewServer(cfg, r.store.Client(nid.ID{byte(i + 1)}), func(f []byte) {
			r.outbox[i] = append(r.outbox[i], bytes.Clone(f))
		}, log)
		if err != nil {
			t.Fatal(err)
		}
		r.servers = append(r.servers, s)
		r.outbox = append(r.outbox, nil)
	}
	return r
}

// dhcpClient follows the client side of RFC 2131 closely enough to drive
// the server: discover, request the offer, renew, release.
type dhcpClient struct {
	mac      l2.MAC
	server   int
	host     string
	xid      dhcpv4.TransactionID
	state    string // "init", "selecting", "requesting", "bound"
	offer    *dhcpv4.DHCPv4
	ip       netip.Addr
	lease    time.Duration
	naks     int
	lastSent time.Time
	replies  []*dhcpv4.DHCPv4
}

func (r *rig) addClient(i, server int) *dhcpClient {
	c := &dhcpClient{mac: l2.MAC{0x52, 0x54, 0, 0, byte(i >> 8), byte(i)}, server: server, host: fmt.Sprintf("host-%d", i), state: "init"}
	r.clients = append(r.clients, c)
	return c
}

// send wraps p in a frame from the client and hands it to its server.
func (r *rig) send(c *dhcpClient, p *dhcpv4.DHCPv4, dst netip.Addr) bool {
	src := netip.IPv4Unspecified()
	if !p.ClientIPAddr.IsUnspecified() {
		src, _ = netip.AddrFromSlice(p.ClientIPAddr.To4())
	}
	dstMAC := l2.Broadcast
	if dst == serverIP {
		dstMAC = serverMAC
	}
	frame, err := udp4.Append(nil, udp4.Datagram{
		SrcMAC: c.mac, DstMAC: dstMAC,
		Src: netip.AddrPortFrom(src, 68), Dst: netip.AddrPortFrom(dst, 67),
		Payload: p.ToBytes(),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	c.lastSent = r.now
	return r.servers[c.server].HandleFrame(frame, r.now)
}

var broadcastIP = netip.MustParseAddr("255.255.255.255")

func xidOf(c *dhcpClient, n int) dhcpv4.TransactionID {
	return dhcpv4.TransactionID{c.mac[4], c.mac[5], byte(n >> 8), byte(n)}
}

func (r *rig) discover(c *dhcpClient, requested netip.Addr) {
	c.state = "selecting"
	c.xid = xidOf(c, int(r.now.Sub(start)/time.Millisecond))
	mods := []dhcpv4.Modifier{dhcpv4.WithTransactionID(c.xid), dhcpv4.WithOption(dhcpv4.OptHostName(c.host))}
	if requested.IsValid() {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(requested.AsSlice())))
	}
	p, err := dhcpv4.NewDiscovery(net.HardwareAddr(c.mac[:]), mods...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(c, p, broadcastIP)
}

func (r *rig) requestOffer(c *dhcpClient) {
	c.state = "requesting"
	p, err := dhcpv4.NewRequestFromOffer(c.offer, dhcpv4.WithOption(dhcpv4.OptHostName(c.host)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(c, p, broadcastIP)
}

// renew sends a RENEWING-state request: ciaddr set, unicast to the server.
func (r *rig) renew(c *dhcpClient) {
	c.state = "requesting"
	c.xid = xidOf(c, int(r.now.Sub(start)/time.Millisecond))
	p, err := dhcpv4.New(dhcpv4.WithTransactionID(c.xid), dhcpv4.WithHwAddr(net.HardwareAddr(c.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithClientIP(c.ip.AsSlice()))
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(c, p, serverIP)
}

func (r *rig) release(c *dhcpClient) {
	p, err := dhcpv4.New(dhcpv4.WithTransactionID(xidOf(c, 1)), dhcpv4.WithHwAddr(net.HardwareAddr(c.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease), dhcpv4.WithClientIP(c.ip.AsSlice()),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP.AsSlice())))
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(c, p, serverIP)
	c.state, c.ip = "init", netip.Addr{}
}

// checkFrame asserts that a frame from a server is a well-formed DHCP
// reply and returns it with where it was sent.
func (r *rig) checkFrame(frame []byte) (*dhcpv4.DHCPv4, udp4.Datagram) {
	r.t.Helper()
	ip := frame[l2.EthernetHeaderLen:]
	if l2.Checksum(ip[:udp4.IPv4HeaderLen], 0) != 0 {
		r.t.Fatal("reply with a bad IPv4 header checksum")
	}
	udp := ip[udp4.IPv4HeaderLen:]
	if l2.Checksum(udp, l2.PseudoHeaderSum(ip[12:16], ip[16:20], 17, len(udp))) != 0 {
		r.t.Fatal("reply with a bad UDP checksum")
	}
	d, err := udp4.Parse(frame)
	if err != nil {
		r.t.Fatal(err)
	}
	if d.Src != netip.AddrPortFrom(serverIP, 67) || d.Dst.Port() != 68 || d.SrcMAC != serverMAC {
		r.t.Fatalf("reply from %v (%v) to port %d", d.Src, d.SrcMAC, d.Dst.Port())
	}
	p, err := dhcpv4.FromBytes(d.Payload)
	if err != nil {
		r.t.Fatalf("reply does not parse: %v", err)
	}
	if p.OpCode != dhcpv4.OpcodeBootReply || !p.ServerIdentifier().Equal(serverIP.AsSlice()) {
		r.t.Fatalf("reply %v", p.Summary())
	}
	if p.MessageType() == dhcpv4.MessageTypeNak && (d.Dst.Addr() != broadcastIP || d.DstMAC != l2.Broadcast) {
		r.t.Fatalf("NAK sent to %v %v, not broadcast", d.Dst, d.DstMAC)
	}
	return p, d
}

// deliver hands the servers' frames to the clients they address.
func (r *rig) deliver() {
	for i := range r.outbox {
		frames := r.outbox[i]
		r.outbox[i] = nil
		for _, f := range frames {
			p, d := r.checkFrame(f)
			for _, c := range r.clients {
				if c.server == i && bytes.Equal(p.ClientHWAddr, c.mac[:]) && (d.DstMAC == c.mac || d.DstMAC == l2.Broadcast) {
					r.receive(c, p, d)
				}
			}
		}
	}
}

func (r *rig) receive(c *dhcpClient, p *dhcpv4.DHCPv4, d udp4.Datagram) {
	c.replies = append(c.replies, p)
	if p.TransactionID != c.xid {
		return
	}
	switch {
	case p.MessageType() == dhcpv4.MessageTypeOffer && c.state == "selecting":
		c.offer = p
		r.requestOffer(c)
	case p.MessageType() == dhcpv4.MessageTypeAck && c.state == "requesting":
		yi, _ := netip.AddrFromSlice(p.YourIPAddr.To4())
		if d.DstMAC != l2.Broadcast && d.Dst.Addr() != yi {
			r.t.Fatalf("ACK unicast to %v, not to the address given %v", d.Dst, yi)
		}
		c.ip, c.lease, c.state = yi, p.IPAddressLeaseTime(0), "bound"
	case p.MessageType() == dhcpv4.MessageTypeNak:
		c.naks++
		c.state = "init"
	}
}

// run steps time, answering the store and retransmitting like a client.
func (r *rig) run(d time.Duration, retransmit bool) {
	end := r.now.Add(d)
	for r.now.Before(end) {
		r.now = r.now.Add(20 * time.Millisecond)
		r.store.Advance(r.now)
		r.deliver()
		if !retransmit {
			continue
		}
		for _, c := range r.clients {
			if c.state == "bound" || c.naks > 0 || r.now.Sub(c.lastSent) < 2*time.Second {
				continue
			}
			if c.state == "requesting" && c.offer != nil {
				r.requestOffer(c)
			} else {
				r.discover(c, netip.Addr{})
			}
		}
	}
}

func (r *rig) bindAll() {
	for _, c := range r.clients {
		r.discover(c, netip.Addr{})
	}
	r.run(30*time.Second, true)
}

func TestTwentyClientsOnTenServersGetDistinctAddresses(t *testing.T) {
	for seed := range uint64(10) {
		cfg := baseConfig()
		// A small range makes the clients' hash starts collide.
		cfg.RangeStart, cfg.RangeEnd = netip.MustParseAddr("10.5.1.1"), netip.MustParseAddr("10.5.1.40")
		r := newRig(t, seed, 10, cfg)
		for i := range 20 {
			r.addClient(i, i%10)
		}
		r.bindAll()
		seen := make(map[netip.Addr]l2.MAC)
		for _, c := range r.clients {
			if c.state != "bound" {
				t.Fatalf("seed %d: client %v is %s (%d NAKs)", seed, c.mac, c.state, c.naks)
			}
			if other, dup := seen[c.ip]; dup {
				t.Fatalf("seed %d: %v given to %v and %v", seed, c.ip, other, c.mac)
			}
			seen[c.ip] = c.mac
			if !r.servers[0].assignable(c.ip) || c.lease != cfg.LeaseTime {
				t.Fatalf("seed %d: %v leased %v for %v", seed, c.mac, c.ip, c.lease)
			}
			value, _, ok := r.store.Lookup(r.servers[0].Key(c.ip), r.now)
			if !ok || !sameClient(value, c.mac) || !strings.HasSuffix(string(value), c.host) {
				t.Fatalf("seed %d: the DHT holds %q for %v", seed, value, c.ip)
			}
		}
		ack := r.clients[0].replies[len(r.clients[0].replies)-1]
		if !ack.Router()[0].Equal(cfg.Gateway.AsSlice()) || !ack.DNS()[0].Equal(cfg.DNS.AsSlice()) || ack.DomainName() != cfg.Domain ||
			ack.SubnetMask().String() != "ffff0000" || ack.IPAddressRenewalTime(0) != cfg.LeaseTime/2 {
			t.Fatalf("ACK does not carry the configuration: %v", ack.Summary())
		}
	}
}

func TestReservedAddressesAreNeverHandedOut(t *testing.T) {
	cfg := baseConfig()
	cfg.Network = netip.MustParsePrefix("10.5.0.0/28")
	cfg.Reserved = []netip.Addr{netip.MustParseAddr("10.5.0.3"), netip.MustParseAddr("10.5.0.9")}
	r := newRig(t, 1, 3, cfg)
	// .1 gateway and server, .2 DNS, .3 and .9 reserved: 10 of 14 hosts left.
	for i := range 10 {
		r.addClient(i, i%3)
	}
	r.bindAll()
	for _, c := range r.clients {
		if c.state != "bound" {
			t.Fatalf("%v is %s", c.mac, c.state)
		}
		switch c.ip.String() {
		case "10.5.0.0", "10.5.0.1", "10.5.0.2", "10.5.0.3", "10.5.0.9", "10.5.0.15":
			t.Fatalf("reserved %v handed to %v", c.ip, c.mac)
		}
	}
}

func TestExhaustionIsLoggedAndNAKed(t *testing.T) {
	cfg := baseConfig()
	cfg.RangeStart, cfg.RangeEnd = netip.MustParseAddr("10.5.2.1"), netip.MustParseAddr("10.5.2.4")
	r := newRig(t, 2, 2, cfg)
	for i := range 5 {
		r.addClient(i, i%2)
	}
	r.bindAll()
	bound, naked := 0, 0
	for _, c := range r.clients {
		switch {
		case c.state == "bound":
			bound++
		case c.naks > 0:
			naked++
		}
	}
	if bound != 4 || naked != 1 {
		t.Fatalf("%d bound, %d refused; want 4 and 1", bound, naked)
	}
	if !strings.Contains(r.log.String(), "address pool exhausted") {
		t.Fatalf("no log line about exhaustion: %s", r.log.String())
	}
	if r.servers[0].Stats().Exhausted+r.servers[1].Stats().Exhausted == 0 {
		t.Fatal("exhaustion not counted")
	}
}

func TestRenewExtendsAndReleaseFrees(t *testing.T) {
	r := newRig(t, 3, 1, baseConfig())
	c := r.addClient(1, 0)
	r.bindAll()
	key := r.servers[0].Key(c.ip)
	r.run(c.lease/2, false)
	r.renew(c)
	r.run(time.Second, false)
	if c.state != "bound" {
		t.Fatalf("renewal: state %s", c.state)
	}
	ack := c.replies[len(c.replies)-1]
	if ack.MessageType() != dhcpv4.MessageTypeAck || !ack.ClientIPAddr.Equal(c.ip.AsSlice()) {
		t.Fatalf("renewal answered %v", ack.Summary())
	}
	// The record now outlives the original lease.
	r.run(c.lease/2+time.Minute, false)
	if _, _, ok := r.store.Lookup(key, r.now); !ok {
		t.Fatal("renewed lease lapsed at its original end")
	}
	r.release(c)
	r.run(time.Second, false)
	if _, _, ok := r.store.Lookup(key, r.now); ok {
		t.Fatal("released lease still held")
	}
	if len(r.servers[0].Leases(r.now)) != 0 {
		t.Fatal("released lease still listed")
	}
}

func TestReturningClientGetsItsAddressBack(t *testing.T) {
	cfg := baseConfig()
	r := newRig(t, 4, 2, cfg)
	c := r.addClient(7, 0)
	r.bindAll()
	first := c.ip
	// The machine moves to the other node and asks for its address back
	// while the lease written by the first node still runs.
	c.server, c.state = 1, "init"
	r.discover(c, first)
	r.run(5*time.Second, true)
	if c.state != "bound" || c.ip != first {
		t.Fatalf("after moving: %s %v, want %v", c.state, c.ip, first)
	}
	if c.lease > cfg.LeaseTime || c.lease <= 0 {
		t.Fatalf("lease %v for a record another node holds", c.lease)
	}
	// Long after every lease ended, the MAC hashes to the same start.
	r.run(2*cfg.LeaseTime, false)
	c.state = "init"
	r.discover(c, netip.Addr{})
	r.run(5*time.Second, true)
	if c.state != "bound" || c.ip != first {
		t.Fatalf("after the lease lapsed: %s %v, want %v", c.state, c.ip, first)
	}
}

// A client that moved is acknowledged on the record the first node holds,
// and that node is named; once it lets the lease go, the new node takes
// it over and renews it as its own, with a whole lease. Letting go of
// another client's lease deletes nothing.
func TestAMovedClientsLeaseIsHandedOver(t *testing.T) {
	cfg := baseConfig()
	type moved struct {
		lease  Lease
		holder nid.ID
	}
	var told []moved
	cfg.OnMoved = func(l Lease, holder nid.ID) { told = append(told, moved{l, holder}) }
	r := newRig(t, 11, 2, cfg)
	c := r.addClient(3, 0)
	r.bindAll()
	ip := c.ip
	if len(told) != 0 {
		t.Fatalf("a client that never moved was reported moved: %v", told)
	}
	c.server, c.state = 1, "init"
	r.discover(c, ip)
	r.run(5*time.Second, true)
	if c.state != "bound" || c.ip != ip || len(told) != 1 || told[0].lease.IP != ip || told[0].lease.MAC != c.mac || told[0].holder != (nid.ID{1}) {
		t.Fatalf("after moving: %s %v, told %v; want bound to %v and node 1 named", c.state, c.ip, told, ip)
	}

	status := func(op func(done func(dht.Status))) dht.Status {
		st := dht.Status(255)
		op(func(s dht.Status) { st = s })
		r.run(time.Second, false)
		return st
	}
	if st := status(func(done func(dht.Status)) { r.servers[0].LetGo(ip, l2.MAC{9}, r.now, done) }); st != dht.NotFound {
		t.Fatalf("letting go of %v for another client: %v, want not-found", ip, st)
	}
	if st := status(func(done func(dht.Status)) { r.servers[1].TakeOver(ip, c.mac, r.now, done) }); st != dht.Exists {
		t.Fatalf("taking over a lease still held: %v, want exists", st)
	}
	if st := status(func(done func(dht.Status)) { r.servers[0].LetGo(ip, c.mac, r.now, done) }); st != dht.OK {
		t.Fatalf("letting go: %v", st)
	}
	if len(r.servers[0].Leases(r.now)) != 0 {
		t.Fatalf("node 1 still lists %v", r.servers[0].Leases(r.now))
	}
	if st := status(func(done func(dht.Status)) { r.servers[1].TakeOver(ip, c.mac, r.now, done) }); st != dht.OK {
		t.Fatalf("taking over: %v", st)
	}
	r.renew(c)
	r.run(5*time.Second, true)
	if c.ip != ip || c.lease != cfg.LeaseTime || len(told) != 1 {
		t.Fatalf("renewed at node 2: %v for %v, told %d times; want %v for a whole lease, told once", c.ip, c.lease, len(told), ip)
	}
}

// A client that arrives at another node without asking its DHCP server
// (heard there by its ARP) is taken as moved: that node honours its lease
// and names the holder, which can then let it go to it. A host whose MAC
// the record does not name, or at an address no one leased, is not.
func TestAClientThatArrivesWithoutAskingIsTakenAsMoved(t *testing.T) {
	cfg := baseConfig()
	var told []Lease
	var holders []nid.ID
	cfg.OnMoved = func(l Lease, holder nid.ID) { told, holders = append(told, l), append(holders, holder) }
	r := newRig(t, 12, 2, cfg)
	c := r.addClient(4, 0)
	r.bindAll()
	ip := c.ip
	reads := make([]*countingReads, len(r.servers))
	for i, s := range r.servers {
		reads[i] = &countingReads{Client: s.kv}
		s.kv = reads[i]
	}
	r.servers[0].Arrived(ip, c.mac, r.now)
	if reads[0].gets != 0 {
		t.Fatalf("the holder read the record of its own client's lease %d times", reads[0].gets)
	}
	arrive := func(ip netip.Addr, mac l2.MAC) {
		r.servers[1].Arrived(ip, mac, r.now)
		r.run(time.Second, false)
	}
	arrive(ip, l2.MAC{2, 9, 9, 9, 9, 9})
	arrive(ip.Next(), c.mac)
	if len(told) != 0 {
		t.Fatalf("hosts no lease record names were taken as moved: %v", told)
	}
	arrive(ip, c.mac)
	if len(told) != 1 || told[0].IP != ip || told[0].MAC != c.mac || holders[0] != (nid.ID{1}) {
		t.Fatalf("the client heard at node 2: told %v by %v, want its lease of %v and node 1 named", told, holders, ip)
	}
	if leases := r.servers[1].Leases(r.now); len(leases) != 1 || leases[0].IP != ip || leases[0].Expires.After(r.now.Add(cfg.LeaseTime)) {
		t.Fatalf("node 2 honours %v, want the client's lease for at most what remains of it", leases)
	}
	var st dht.Status
	r.servers[0].LetGo(ip, c.mac, r.now, func(s dht.Status) { st = s })
	r.run(time.Second, false)
	r.servers[1].TakeOver(ip, c.mac, r.now, func(s dht.Status) { st = s })
	r.run(time.Second, false)
	if st != dht.OK {
		t.Fatalf("node 2 taking over the lease of the client that arrived: %v", st)
	}
	before := reads[1].gets
	arrive(ip, c.mac)
	if reads[1].gets != before || len(told) != 1 {
		t.Fatalf("node 2 read the record of the lease it took over again (%d reads), told %d times", reads[1].gets-before, len(told))
	}
}

// countingReads counts the reads of a DHT client.
type countingReads struct {
	dht.Client
	gets int
}

func (c *countingReads) Get(key string, now time.Time, cb func(dht.Result)) {
	c.gets++
	c.Client.Get(key, now, cb)
}

func TestRequestForAnotherClientsAddressIsNAKed(t *testing.T) {
	r := newRig(t, 5, 1, baseConfig())
	a, b := r.addClient(1, 0), r.addClient(2, 0)
	r.discover(a, netip.Addr{})
	r.run(5*time.Second, true)
	b.xid = xidOf(b, 99)
	b.state = "requesting"
	p, _ := dhcpv4.New(dhcpv4.WithTransactionID(b.xid), dhcpv4.WithHwAddr(net.HardwareAddr(b.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(a.ip.AsSlice())))
	r.send(b, p, broadcastIP)
	r.run(time.Second, false)
	if b.naks != 1 || b.state == "bound" {
		t.Fatalf("INIT-REBOOT for another client's address: %s, %d NAKs", b.state, b.naks)
	}
	outside, _ := dhcpv4.New(dhcpv4.WithTransactionID(b.xid), dhcpv4.WithHwAddr(net.HardwareAddr(b.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IP{192, 168, 1, 5})))
	r.send(b, outside, broadcastIP)
	r.run(time.Second, false)
	if b.naks != 2 {
		t.Fatalf("request outside the network: %d NAKs", b.naks)
	}
}

func TestRequestForAnotherServerIsIgnored(t *testing.T) {
	r := newRig(t, 6, 1, baseConfig())
	c := r.addClient(1, 0)
	p, _ := dhcpv4.New(dhcpv4.WithTransactionID(xidOf(c, 1)), dhcpv4.WithHwAddr(net.HardwareAddr(c.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IP{10, 5, 0, 9})),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.IP{10, 5, 0, 77})))
	if !r.send(c, p, broadcastIP) {
		t.Fatal("a DHCP request was not consumed")
	}
	r.run(time.Second, false)
	if len(c.replies) != 0 || r.store.Pending() != 0 {
		t.Fatal("answered a request meant for another server")
	}
}

func TestInformGetsConfigurationWithoutLease(t *testing.T) {
	r := newRig(t, 7, 1, baseConfig())
	c := r.addClient(1, 0)
	c.xid = xidOf(c, 5)
	p, _ := dhcpv4.NewInform(net.HardwareAddr(c.mac[:]), net.IP{10, 5, 3, 3}, dhcpv4.WithTransactionID(c.xid))
	r.send(c, p, serverIP)
	f := r.outbox[0]
	if len(f) != 1 {
		t.Fatalf("%d frames for an INFORM", len(f))
	}
	ack, d := r.checkFrame(f[0])
	if ack.MessageType() != dhcpv4.MessageTypeAck || !ack.YourIPAddr.IsUnspecified() || ack.IPAddressLeaseTime(0) != 0 ||
		ack.DomainName() != "burrow.test" || d.Dst.Addr() != netip.MustParseAddr("10.5.3.3") {
		t.Fatalf("INFORM answered %v to %v", ack.Summary(), d.Dst)
	}
}

func TestDeclinedAddressIsNotOfferedAgain(t *testing.T) {
	r := newRig(t, 8, 1, baseConfig())
	c := r.addClient(1, 0)
	r.bindAll()
	bad := c.ip
	p, _ := dhcpv4.New(dhcpv4.WithTransactionID(xidOf(c, 3)), dhcpv4.WithHwAddr(net.HardwareAddr(c.mac[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeDecline), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(bad.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(serverIP.AsSlice())))
	r.send(c, p, broadcastIP)
	r.run(time.Second, false)
	c.state = "init"
	r.discover(c, netip.Addr{})
	r.run(5*time.Second, true)
	if c.state != "bound" || c.ip == bad {
		t.Fatalf("after DECLINE of %v: %s %v", bad, c.state, c.ip)
	}
}

func TestOnLeaseReportsAcknowledgedLeases(t *testing.T) {
	cfg := baseConfig()
	var got []Lease
	cfg.OnLease = func(l Lease) { got = append(got, l) }
	r := newRig(t, 9, 1, cfg)
	c := r.addClient(3, 0)
	r.bindAll()
	if len(got) != 1 || got[0].IP != c.ip || got[0].MAC != c.mac || got[0].Hostname != "host-3" {
		t.Fatalf("OnLease saw %+v", got)
	}
	if l := r.servers[0].Leases(r.now); len(l) != 1 || l[0].IP != c.ip {
		t.Fatalf("Leases = %+v", l)
	}
}

func TestTimeoutsLeaveTheClientToRetry(t *testing.T) {
	r := newRig(t, 10, 2, baseConfig())
	r.store.LoseAnswers = 0.5
	for i := range 6 {
		r.addClient(i, i%2)
	}
	r.bindAll()
	r.run(time.Minute, true)
	seen := make(map[netip.Addr]bool)
	for _, c := range r.clients {
		if c.state != "bound" || seen[c.ip] {
			t.Fatalf("%v: %s %v", c.mac, c.state, c.ip)
		}
		seen[c.ip] = true
	}
}

func TestNonDHCPFramesAreNotConsumedAndGarbageIsNotAnswered(t *testing.T) {
	r := newRig(t, 11, 1, baseConfig())
	s := r.servers[0]
	dns, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("10.5.0.9:5353"), Dst: netip.MustParseAddrPort("10.5.0.2:53"), Payload: []byte("q")})
	otherServer, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("10.5.0.9:68"), Dst: netip.MustParseAddrPort("10.5.0.99:67"), Payload: []byte("q")})
	for name, f := range map[string][]byte{"DNS": dns, "unicast to another server": otherServer, "ARP": make([]byte, 42)} {
		if s.HandleFrame(f, r.now) {
			t.Errorf("%s consumed", name)
		}
	}
	garbage, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67"), Payload: []byte("not dhcp")})
	reply := (&dhcpv4.DHCPv4{OpCode: dhcpv4.OpcodeBootReply, HWType: 1, ClientHWAddr: net.HardwareAddr{1, 2, 3, 4, 5, 6}, Options: dhcpv4.Options{}}).ToBytes()
	aReply, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67"), Payload: reply})
	for name, f := range map[string][]byte{"garbage": garbage, "a reply": aReply} {
		if !s.HandleFrame(f, r.now) {
			t.Errorf("%s to port 67 not consumed", name)
		}
	}
	r.run(time.Second, false)
	if len(r.outbox[0]) != 0 || r.store.Pending() != 0 || s.Stats().Ignored != 2 {
		t.Fatalf("answered garbage: %d frames, stats %+v", len(r.outbox[0]), s.Stats())
	}
}

// The node hands its DHT participant over as the dht.Client.
var _ dht.Client = (*dht.Participant)(nil)

func TestNewServerValidates(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Network = netip.MustParsePrefix("fd00::/64") },
		func(c *Config) { c.Network = netip.MustParsePrefix("10.0.0.0/31") },
		func(c *Config) { c.RangeStart = netip.MustParseAddr("10.6.0.1") },
		func(c *Config) {
			c.RangeStart, c.RangeEnd = netip.MustParseAddr("10.5.0.9"), netip.MustParseAddr("10.5.0.8")
		},
		func(c *Config) { c.ServerIP = netip.Addr{} },
		func(c *Config) { c.DNS = netip.MustParseAddr("fd00::53") },
		func(c *Config) { c.Domain = "bad domain" },
	}
	for i, mutate := range bad {
		cfg := baseConfig()
		mutate(&cfg)
		if _, err := NewServer(cfg, dhttest.NewStore(1).Client(nid.ID{}), func([]byte) {}, nil); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

// FuzzHandleFrame throws arbitrary frames at a server — the input as a
// frame, and the input as the payload of a well-formed DHCP frame, so that
// the fuzzer gets past the IPv4 checksum. Nothing may panic, and whatever
// the server writes must be a valid DHCP reply.
func FuzzHandleFrame(f *testing.F) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0, 0, 1}
	discover, _ := dhcpv4.NewDiscovery(mac, dhcpv4.WithTransactionID(dhcpv4.TransactionID{1, 2, 3, 4}))
	request, _ := dhcpv4.New(dhcpv4.WithTransactionID(dhcpv4.TransactionID{1}), dhcpv4.WithHwAddr(mac),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithClientIP(net.IP{10, 5, 0, 7}))
	inform, _ := dhcpv4.NewInform(mac, net.IP{10, 5, 3, 3})
	for _, p := range []*dhcpv4.DHCPv4{discover, request, inform} {
		f.Add(p.ToBytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := newRig(t, 1, 1, baseConfig())
		r.store.MaxDelay = 0
		wrapped, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("0.0.0.0:68"), Dst: netip.MustParseAddrPort("255.255.255.255:67"), Payload: b})
		for _, frame := range [][]byte{b, wrapped} {
			r.servers[0].HandleFrame(frame, r.now)
			for range 4 {
				r.now = r.now.Add(time.Second)
				r.store.Advance(r.now)
			}
		}
		for _, out := range r.outbox[0] {
			r.checkFrame(out)
		}
	})
}

func TestReturningClientKeepsItsAddressWhenAnEarlierOneFrees(t *testing.T) {
	r := newRig(t, 12, 1, baseConfig())
	s := r.servers[0]
	c := r.addClient(4, 0)
	start, _ := s.candidate(&client{mac: c.mac, req: &dhcpv4.DHCPv4{Options: dhcpv4.Options{}}}, 2)
	blocker := nid.ID{0xee}
	r.store.Set(s.Key(start), []byte("02:00:00:00:00:01"), blocker, time.Hour, r.now)
	r.bindAll()
	if c.state != "bound" || c.ip == start {
		t.Fatalf("bound %s to %v with its hash start %v taken", c.state, c.ip, start)
	}
	kept := c.ip
	r.store.Set(s.Key(start), nil, blocker, 0, r.now) // the blocker's lease ends
	c.state = "init"
	r.discover(c, netip.Addr{})
	r.run(5*time.Second, true)
	if c.state != "bound" || c.ip != kept {
		t.Fatalf("rediscovered %s %v, want its address %v", c.state, c.ip, kept)
	}
}

// Every frame from the TAP passes through HandleFrame, so frames that are
// not DHCP must cost no allocation.
func TestOtherFramesCostNoAllocation(t *testing.T) {
	r := newRig(t, 13, 1, baseConfig())
	s := r.servers[0]
	data, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("10.5.0.9:40000"), Dst: netip.MustParseAddrPort("10.5.0.10:5201"), Payload: make([]byte, 1400)})
	tcp := bytes.Clone(data)
	tcp[l2.EthernetHeaderLen+9] = 6
	for name, f := range map[string][]byte{"UDP data": data, "TCP data": tcp} {
		if n := testing.AllocsPerRun(100, func() { s.HandleFrame(f, r.now) }); n != 0 {
			t.Errorf("%s: %v allocations per frame", name, n)
		}
	}
}

func BenchmarkHandleFrameNotDHCP(b *testing.B) {
	s, _ := NewServer(baseConfig(), dhttest.NewStore(1).Client(nid.ID{}), func([]byte) {}, nil)
	frame, _ := udp4.Append(nil, udp4.Datagram{Src: netip.MustParseAddrPort("10.5.0.9:40000"), Dst: netip.MustParseAddrPort("10.5.0.10:5201"), Payload: make([]byte, 1400)})
	b.ReportAllocs()
	for b.Loop() {
		s.HandleFrame(frame, start)
	}
}

// TestNetworkOptionsReachClients: what the network sets (router, search
// domain, MTU, a static route) is in the ACK, with the default route among
// the classless routes.
func TestNetworkOptionsReachClients(t *testing.T) {
	r := newRig(t, 1, 1, baseConfig())
	router := netip.MustParseAddr("10.5.0.9")
	r.servers[0].SetNetworkOptions(NetworkOptions{Router: router, DomainSearch: "corp.example", MTU: 1280,
		Routes: []Route{{Prefix: netip.MustParsePrefix("10.20.0.0/16"), Via: netip.MustParseAddr("10.5.0.7")}}})
	c := r.addClient(1, 0)
	r.bindAll()
	ack := c.replies[len(c.replies)-1]
	mtu := ack.Options.Get(dhcpv4.OptionInterfaceMTU)
	routes := ack.ClasslessStaticRoute()
	if c.state != "bound" || !ack.Router()[0].Equal(router.AsSlice()) || ack.DomainName() != "corp.example" ||
		len(ack.DomainSearch().Labels) != 1 || ack.DomainSearch().Labels[0] != "corp.example" ||
		len(mtu) != 2 || int(mtu[0])<<8|int(mtu[1]) != 1280 || len(routes) != 2 ||
		routes[0].String() != "route to 10.20.0.0/16 via 10.5.0.7" || routes[1].String() != "route to 0.0.0.0/0 via 10.5.0.9" {
		t.Fatalf("ACK: %v (routes %v)", ack.Summary(), routes)
	}
}
