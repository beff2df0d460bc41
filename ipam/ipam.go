// Package ipam is the DHCP server every burrow node answers on its own TAP
// device, with leases kept in the DHT, as the IPOP paper
// (seeds/ipop-self-configuring-grid-vpn.txt) does it (section 3, "dynamic
// allocation of IP addresses"; section 4.1, "DHCP/DHT proxy"):
//
//   - The client talks to a proxy on its own node, never to a central
//     server; the proxy "attempts to write IP:P2P address values to the
//     DHT. If it is successful, the proxy replies with an offer or
//     acknowledgment as necessary."
//   - "During address allocation, a machine attempts to perform an atomic
//     write where the DHT key is the namespace and requested IP address":
//     here the key is "dhcp:<network>:<ip>", the value the client's MAC
//     and host name, written with PutIfAbsent so that of concurrent
//     servers exactly one gets an address; the lease time is the record's
//     TTL, renewed when the client renews.
//   - The namespace's configuration — range, lease time, reserved
//     addresses — is the same on every node (Config); reserved addresses
//     are never handed out.
//
// Candidates are picked deterministically: first the address this server
// last gave the client and the one the client asks for, then a start
// derived from a hash of the client's MAC followed by linear probing
// through the range. A returning client, on any node, therefore tries its
// old address first. A record already holding the client's MAC is reused,
// even when another node wrote it (the client moved): it is honoured for
// what remains of it, and taken over once it lapses — or at once, when
// the member that holds it lets it go (LetGo, TakeOver): the node that
// acknowledged it tells the holder (Config.OnMoved), which checks that the
// client left its own TAP. A client that arrives without asking (Arrived,
// a host heard on the TAP by its ARP) is handled the same way.
//
// Answers are complete Ethernet/IPv4/UDP frames following RFC 2131 section
// 4.1: NAKs broadcast, replies to a client with an address unicast to it,
// others broadcast when the client asks so. When every address is taken
// the server logs it and answers NAK; DHT timeouts go unanswered, since
// the client retransmits. Malformed packets get no answer.
package ipam

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/insomniacslk/dhcp/rfc1035label"

	"burrow/dht"
	"burrow/l2"
	"burrow/l2/udp4"
	"burrow/nid"
)

// Config is the namespace's DHCP configuration, the same on every node,
// plus this node's server addresses.
type Config struct {
	// Network is the virtual IPv4 network, e.g. 10.5.0.0/16.
	Network netip.Prefix
	// RangeStart and RangeEnd bound the addresses handed out; zero means
	// the whole network but its network and broadcast addresses.
	RangeStart, RangeEnd netip.Addr
	// Reserved addresses are never handed out; Gateway, DNS and ServerIP
	// are reserved too.
	Reserved []netip.Addr
	// Gateway, DNS and Domain are announced when set.
	Gateway, DNS netip.Addr
	Domain       string
	// LeaseTime is the lease given to clients.
	LeaseTime time.Duration
	// OfferHold is how long an offered address stays taken before the
	// client confirms it with a REQUEST.
	OfferHold time.Duration
	// ServerMAC and ServerIP are the server's own addresses on the TAP;
	// ServerIP is the DHCP server identifier.
	ServerMAC l2.MAC
	ServerIP  netip.Addr
	// OnLease, if set, is told about every lease acknowledged, new or
	// renewed (to register the host name in DNS, say).
	OnLease func(Lease)
	// OnMoved, if set, is told about every lease acknowledged on a record
	// another member holds: the client moved here from that member's TAP.
	OnMoved func(l Lease, holder nid.ID)
}

// Defaults.
const (
	DefaultLeaseTime = time.Hour
	DefaultOfferHold = time.Minute
	// maxClients bounds the clients the server keeps state for.
	maxClients = 4096
)

// Lease is an address acknowledged to a client.
type Lease struct {
	IP       netip.Addr
	MAC      l2.MAC
	Hostname string
	Expires  time.Time
	// onRecordOf is the member whose lease record this server honours,
	// when it is not this server's own: the client moved here.
	onRecordOf nid.ID
}

// Stats counts what the server did.
type Stats struct {
	Offers, Acks, Naks, Informs uint64
	Releases, Declines          uint64
	Exhausted                   uint64 // allocations that found no free address
	Ignored                     uint64 // malformed, foreign or unanswerable packets
}

// Server answers DHCP on one TAP. It is not safe for concurrent use.
type Server struct {
	cfg      Config
	kv       dht.Client
	out      func(frame []byte)
	log      *slog.Logger
	key      string // "dhcp:<network>:"
	mask     net.IPMask
	bcast    netip.Addr
	first    uint32 // RangeStart as an integer
	size     uint32 // addresses in the range
	reserved map[netip.Addr]bool
	clients  map[l2.MAC]*client
	leases   map[l2.MAC]Lease
	buf      []byte
	stats    Stats
	network  NetworkOptions
}

// NetworkOptions are what the whole network sets for its DHCP clients
// (burrow network set): they take the place of the server's own gateway
// and domain, and add an interface MTU and static routes.
type NetworkOptions struct {
	Router       netip.Addr
	DomainSearch string
	MTU          int
	Routes       []Route
}

// Route is a static route a client is given (RFC 3442).
type Route struct {
	Prefix netip.Prefix
	Via    netip.Addr
}

// SetNetworkOptions replaces the network-wide options; later replies carry
// them.
func (s *Server) SetNetworkOptions(o NetworkOptions) { s.network = o }

// client is a client with an exchange in progress or recently finished.
type client struct {
	mac   l2.MAC
	busy  bool           // a DHT operation is in flight for it
	req   *dhcpv4.DHCPv4 // the transaction being answered
	seen  time.Time      // last packet
	host  string         // host name it announced
	tried int            // allocation: candidates tried so far
}

// NewServer validates cfg and creates a server writing frames through out.
func NewServer(cfg Config, kv dht.Client, out func(frame []byte), log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n := cfg.Network.Masked()
	if !n.IsValid() || !n.Addr().Is4() || n.Bits() > 30 {
		return nil, errors.New("ipam: Network must be an IPv4 prefix of at most /30")
	}
	cfg.Network = n
	last := lastAddr(n)
	if !cfg.RangeStart.IsValid() {
		cfg.RangeStart = n.Addr().Next()
	}
	if !cfg.RangeEnd.IsValid() {
		cfg.RangeEnd = last.Prev()
	}
	if !n.Contains(cfg.RangeStart) || !n.Contains(cfg.RangeEnd) || cfg.RangeEnd.Less(cfg.RangeStart) {
		return nil, errors.New("ipam: range must lie in Network, start before end")
	}
	if !cfg.ServerIP.Is4() {
		return nil, errors.New("ipam: ServerIP must be IPv4")
	}
	for _, a := range []netip.Addr{cfg.Gateway, cfg.DNS} {
		if a.IsValid() && !a.Is4() {
			return nil, errors.New("ipam: Gateway and DNS must be IPv4")
		}
	}
	if cfg.Domain != "" && !validDomain(cfg.Domain) {
		return nil, errors.New("ipam: Domain is not a valid DNS name")
	}
	if cfg.LeaseTime <= 0 {
		cfg.LeaseTime = DefaultLeaseTime
	}
	if cfg.OfferHold <= 0 {
		cfg.OfferHold = DefaultOfferHold
	}
	s := &Server{
		cfg:      cfg,
		kv:       kv,
		out:      out,
		log:      log,
		key:      "dhcp:" + n.String() + ":",
		mask:     net.CIDRMask(n.Bits(), 32),
		bcast:    last,
		first:    toUint(cfg.RangeStart),
		size:     toUint(cfg.RangeEnd) - toUint(cfg.RangeStart) + 1,
		reserved: make(map[netip.Addr]bool),
		clients:  make(map[l2.MAC]*client),
		leases:   make(map[l2.MAC]Lease),
	}
	for _, a := range append(slices.Clone(cfg.Reserved), cfg.Gateway, cfg.DNS, cfg.ServerIP, n.Addr(), last) {
		if a.IsValid() {
			s.reserved[a.Unmap()] = true
		}
	}
	return s, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	return fromUint(toUint(p.Addr()) | (1<<(32-p.Bits()) - 1))
}

func toUint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func fromUint(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// validDomain accepts dot-separated labels of letters, digits and hyphens.
func validDomain(d string) bool {
	d = strings.TrimSuffix(d, ".")
	if d == "" || len(d) > 253 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Key is the DHT key of address ip in the server's network.
func (s *Server) Key(ip netip.Addr) string { return s.key + ip.String() }

// Stats reports counters.
func (s *Server) Stats() Stats { return s.stats }

// Leases lists the leases this server acknowledged that have not ended by
// now, ordered by address.
func (s *Server) Leases(now time.Time) []Lease {
	var out []Lease
	for _, l := range s.leases {
		if now.Before(l.Expires) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b Lease) int { return a.IP.Compare(b.IP) })
	return out
}

// Manages reports whether ip is one only a lease gives: in the range and
// not reserved. Every node of a network has the same configuration, so
// every node answers the same.
func (s *Server) Manages(ip netip.Addr) bool { return s.assignable(ip) }

// assignable reports whether ip may be handed out.
func (s *Server) assignable(ip netip.Addr) bool {
	if !ip.Is4() || s.reserved[ip] {
		return false
	}
	v := toUint(ip)
	return v >= s.first && v-s.first < s.size
}

// HandleFrame takes a frame read from the TAP. It reports whether the
// frame was a DHCP packet for this server, which the node must then not
// forward; answers go out through the output callback.
func (s *Server) HandleFrame(frame []byte, now time.Time) bool {
	dst, ok := udp4.Peek(frame)
	if !ok || dst.Port() != dhcpv4.ServerPort {
		return false
	}
	switch dst.Addr() {
	case limitedBroadcast, s.bcast, s.cfg.ServerIP:
	default:
		return false // unicast to some other server on the segment
	}
	d, err := udp4.Parse(frame)
	if err != nil {
		s.stats.Ignored++
		return true
	}
	req, err := dhcpv4.FromBytes(d.Payload)
	if err != nil || req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet ||
		len(req.ClientHWAddr) != 6 || !req.GatewayIPAddr.IsUnspecified() {
		s.stats.Ignored++ // relayed requests have no place on a TAP
		return true
	}
	mac := l2.MAC(req.ClientHWAddr)
	if mac.IsMulticast() || mac == (l2.MAC{}) {
		s.stats.Ignored++
		return true
	}
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		s.discover(mac, req, now)
	case dhcpv4.MessageTypeRequest:
		s.request(mac, req, now)
	case dhcpv4.MessageTypeRelease:
		s.release(mac, req, now)
	case dhcpv4.MessageTypeDecline:
		s.decline(mac, req, now)
	case dhcpv4.MessageTypeInform:
		s.stats.Informs++
		s.reply(req, dhcpv4.MessageTypeAck, netip.Addr{}, 0)
	default:
		s.stats.Ignored++
	}
	return true
}

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// begin returns the client's state for a new exchange, or nil when one is
// in flight; a retransmission of the same kind then replaces the
// transaction to answer.
func (s *Server) begin(mac l2.MAC, req *dhcpv4.DHCPv4, now time.Time) *client {
	c := s.clients[mac]
	if c == nil {
		if len(s.clients) >= maxClients {
			s.prune(now)
		}
		if len(s.clients) >= maxClients {
			s.stats.Ignored++
			return nil
		}
		c = &client{mac: mac}
		s.clients[mac] = c
	}
	c.seen = now
	if c.busy {
		if c.req.MessageType() == req.MessageType() {
			c.req = req
		}
		return nil
	}
	c.busy, c.req, c.host = true, req, hostname(req)
	return c
}

// prune forgets idle clients not heard from for an offer hold, and
// leases that ended.
func (s *Server) prune(now time.Time) {
	for mac, c := range s.clients {
		if !c.busy && now.Sub(c.seen) > s.cfg.OfferHold {
			delete(s.clients, mac)
		}
	}
	for mac, l := range s.leases {
		if !now.Before(l.Expires) {
			delete(s.leases, mac)
		}
	}
}

// hostname is the client's host name option, reduced to a DNS label.
func hostname(req *dhcpv4.DHCPv4) string {
	var b strings.Builder
	for _, c := range strings.ToLower(req.HostName()) {
		if b.Len() == 63 {
			break
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		}
	}
	return strings.Trim(b.String(), "-")
}

// value is what a lease record holds: the client's MAC and host name.
func (c *client) value() []byte {
	v := c.mac.String()
	if c.host != "" {
		v += " " + c.host
	}
	return []byte(v)
}

// sameClient reports whether a lease record belongs to mac.
func sameClient(value []byte, mac l2.MAC) bool {
	m, ok := LeaseClient(value)
	return ok && m == mac
}

// LeaseClient is the MAC of the client a lease record's value names.
func LeaseClient(value []byte) (l2.MAC, bool) {
	field, _, _ := bytes.Cut(value, []byte(" "))
	m, err := l2.ParseMAC(string(field))
	return m, err == nil
}

// leaseTTL is the lifetime of a confirmed lease record: longer than the
// lease so that the record outlives the client's lease even when the ACK
// arrives late.
func (s *Server) leaseTTL() time.Duration { return s.cfg.LeaseTime + s.cfg.LeaseTime/8 }

// leaseFor is the lease to announce for a record: the configured lease,
// or what is left of the record when that is less.
func (s *Server) leaseFor(res dht.Result) time.Duration {
	left := res.Expires.Sub(res.At).Truncate(time.Second)
	return max(min(s.cfg.LeaseTime, left), time.Second)
}

// candidate returns the i-th address to try for c: the address this
// server last gave it, the one it requests, then the range probed
// linearly from a hash of its MAC. ok is false for addresses to skip.
func (s *Server) candidate(c *client, i int) (ip netip.Addr, ok bool) {
	switch i {
	case 0:
		ip = s.leases[c.mac].IP
	case 1:
		if r := c.req.RequestedIPAddress(); r != nil {
			ip, _ = netip.AddrFromSlice(r.To4())
		}
	default:
		h := fnv.New64a()
		h.Write(c.mac[:])
		start := uint32(h.Sum64() % uint64(s.size))
		ip = fromUint(s.first + (start+uint32(i-2))%s.size)
	}
	return ip, s.assignable(ip)
}

func (s *Server) discover(mac l2.MAC, req *dhcpv4.DHCPv4, now time.Time) {
	c := s.begin(mac, req, now)
	if c == nil {
		return
	}
	c.tried = 0
	s.probe(c, now)
}

// probe writes the next candidate for c; the first one written, or
// already held for c, is offered.
func (s *Server) probe(c *client, now time.Time) {
	for c.tried < 2+int(s.size) {
		ip, ok := s.candidate(c, c.tried)
		c.tried++
		if !ok {
			continue
		}
		s.kv.PutIfAbsent(s.Key(ip), c.value(), s.cfg.OfferHold, now, func(res dht.Result) {
			switch {
			case res.Status == dht.OK:
				s.finish(c, dhcpv4.MessageTypeOffer, ip, s.cfg.LeaseTime)
			case res.Status == dht.Exists && sameClient(res.Value, c.mac):
				s.finish(c, dhcpv4.MessageTypeOffer, ip, s.leaseFor(res))
			case res.Status == dht.Exists:
				s.probe(c, res.At)
			default:
				s.log.Debug("dhcp: lease store unavailable; waiting for the client to retry", "client", c.mac, "status", res.Status)
				c.busy = false
			}
		})
		return
	}
	s.stats.Exhausted++
	s.log.Warn("dhcp: address pool exhausted", "network", s.cfg.Network, "range", s.cfg.RangeStart.String()+"-"+s.cfg.RangeEnd.String(), "client", c.mac)
	s.finish(c, dhcpv4.MessageTypeNak, netip.Addr{}, 0)
}

// request confirms an offer, a reboot's remembered address or a renewal.
func (s *Server) request(mac l2.MAC, req *dhcpv4.DHCPv4, now time.Time) {
	if id := req.ServerIdentifier(); id != nil && !id.Equal(net.IP(s.cfg.ServerIP.AsSlice())) {
		s.stats.Ignored++ // the client chose another server
		return
	}
	var ip netip.Addr
	if r := req.RequestedIPAddress(); r != nil {
		ip, _ = netip.AddrFromSlice(r.To4())
	} else {
		ip, _ = netip.AddrFromSlice(req.ClientIPAddr.To4())
	}
	if !ip.IsValid() || ip.IsUnspecified() {
		s.stats.Ignored++
		return
	}
	c := s.begin(mac, req, now)
	if c == nil {
		return
	}
	if !s.assignable(ip) {
		s.finish(c, dhcpv4.MessageTypeNak, netip.Addr{}, 0)
		return
	}
	key := s.Key(ip)
	s.kv.Renew(key, s.leaseTTL(), now, func(res dht.Result) {
		switch res.Status {
		case dht.OK:
			if sameClient(res.Value, mac) {
				s.finish(c, dhcpv4.MessageTypeAck, ip, s.leaseFor(res))
			} else {
				s.finish(c, dhcpv4.MessageTypeNak, netip.Addr{}, 0)
			}
		case dht.Denied:
			s.kv.Get(key, res.At, func(res dht.Result) {
				if res.Status == dht.OK {
					res.Status = dht.Exists // another member's record
				}
				s.confirmForeign(c, ip, res)
			})
		case dht.NotFound:
			s.kv.PutIfAbsent(key, c.value(), s.leaseTTL(), res.At, func(res dht.Result) { s.confirmForeign(c, ip, res) })
		default:
			c.busy = false
		}
	})
}

// confirmForeign acknowledges ip if the record just written, or another
// member's record (Exists), belongs to the client, and refuses it
// otherwise.
func (s *Server) confirmForeign(c *client, ip netip.Addr, res dht.Result) {
	switch {
	case (res.Status == dht.OK || res.Status == dht.Exists) && sameClient(res.Value, c.mac):
		s.finish(c, dhcpv4.MessageTypeAck, ip, s.leaseFor(res))
		if res.Status == dht.Exists {
			s.movedHere(s.leases[c.mac], res.Owner, res.At)
		}
	case res.Status == dht.Exists || res.Status == dht.OK || res.Status == dht.NotFound:
		s.finish(c, dhcpv4.MessageTypeNak, netip.Addr{}, 0)
	default:
		c.busy = false
	}
}

// release frees the client's address if the record is its own.
func (s *Server) release(mac l2.MAC, req *dhcpv4.DHCPv4, now time.Time) {
	ip, _ := netip.AddrFromSlice(req.ClientIPAddr.To4())
	if !s.assignable(ip) {
		s.stats.Ignored++
		return
	}
	c := s.begin(mac, req, now)
	if c == nil {
		return
	}
	s.stats.Releases++
	s.withClientRecord(c, mac, ip, now, func(key string, at time.Time) {
		s.kv.Delete(key, at, func(dht.Result) { c.busy = false })
	})
}

// LetGo gives up this node's lease of ip to mac, whose client left this
// TAP for another member's: it deletes the record, if it is this node's
// and the client's, and forgets the lease. done gets the deletion's
// outcome, NotFound when there was nothing to let go.
func (s *Server) LetGo(ip netip.Addr, mac l2.MAC, now time.Time, done func(dht.Status)) {
	key := s.Key(ip)
	s.kv.Get(key, now, func(res dht.Result) {
		if res.Status != dht.OK || !sameClient(res.Value, mac) {
			done(dht.NotFound)
			return
		}
		s.kv.Delete(key, res.At, func(res dht.Result) {
			if res.Status == dht.OK {
				if l, ok := s.leases[mac]; ok && l.IP == ip {
					delete(s.leases, mac)
				}
			}
			done(res.Status)
		})
	})
}

// TakeOver writes the record of a lease this server acknowledged on
// another member's record, once that member let it go: the lease is then
// this node's, renewed here as any other.
func (s *Server) TakeOver(ip netip.Addr, mac l2.MAC, now time.Time, done func(dht.Status)) {
	l, ok := s.leases[mac]
	if !ok || l.IP != ip || !now.Before(l.Expires) {
		done(dht.NotFound)
		return
	}
	c := &client{mac: mac, host: l.Hostname}
	s.kv.PutIfAbsent(s.Key(ip), c.value(), s.leaseTTL(), now, func(res dht.Result) {
		if l, ok := s.leases[mac]; ok && res.Status == dht.OK {
			l.onRecordOf = nid.ID{}
			s.leases[mac] = l
		}
		done(res.Status)
	})
}

// Arrived takes a host heard on the TAP at ip with mac. When ip's lease
// record names mac and another member holds it, the client came here
// without asking this server for its address (a virtual machine migrated
// live, announcing itself by ARP), or asked and its holder has not let
// the lease go yet: either way it is handled as a client that asked, its
// lease honoured here for what remains of the record and OnMoved telling
// the holder, which may then check again that the client left. A lease
// on this server's own record needs no reading. The caller bounds how
// often it looks the record up.
func (s *Server) Arrived(ip netip.Addr, mac l2.MAC, now time.Time) {
	l, known := s.leases[mac]
	if !s.assignable(ip) || s.cfg.OnMoved == nil || known && l.IP == ip && l.onRecordOf == (nid.ID{}) && now.Before(l.Expires) {
		return
	}
	s.kv.Get(s.Key(ip), now, func(res dht.Result) {
		if res.Status != dht.OK || !sameClient(res.Value, mac) {
			return
		}
		_, host, _ := bytes.Cut(res.Value, []byte(" "))
		s.movedHere(Lease{IP: ip, MAC: mac, Hostname: string(host), Expires: res.At.Add(s.leaseFor(res))}, res.Owner, res.At)
	})
}

// movedHere honours a lease on holder's record, and tells OnMoved.
func (s *Server) movedHere(l Lease, holder nid.ID, now time.Time) {
	l.onRecordOf = holder
	s.keep(l, now)
	if s.cfg.OnMoved != nil {
		s.cfg.OnMoved(l, holder)
	}
}

// withClientRecord reads ip's lease record and, if it is the client's,
// forgets the client's lease and runs change on the record; the client is
// free for its next exchange once change's write is answered.
func (s *Server) withClientRecord(c *client, mac l2.MAC, ip netip.Addr, now time.Time, change func(key string, at time.Time)) {
	key := s.Key(ip)
	s.kv.Get(key, now, func(res dht.Result) {
		if res.Status != dht.OK || !sameClient(res.Value, mac) {
			c.busy = false
			return
		}
		delete(s.leases, mac)
		change(key, res.At)
	})
}

// decline marks an address the client found in use as taken for a lease
// time, so that no one is offered it again meanwhile.
func (s *Server) decline(mac l2.MAC, req *dhcpv4.DHCPv4, now time.Time) {
	var ip netip.Addr
	if r := req.RequestedIPAddress(); r != nil {
		ip, _ = netip.AddrFromSlice(r.To4())
	}
	if !s.assignable(ip) {
		s.stats.Ignored++
		return
	}
	c := s.begin(mac, req, now)
	if c == nil {
		return
	}
	s.stats.Declines++
	s.withClientRecord(c, mac, ip, now, func(key string, at time.Time) {
		s.log.Warn("dhcp: client declined an address already in use", "ip", ip, "client", mac)
		s.kv.Put(key, []byte("declined"), s.cfg.LeaseTime, at, func(dht.Result) { c.busy = false })
	})
}

// finish answers the client's transaction and ends the exchange.
func (s *Server) finish(c *client, typ dhcpv4.MessageType, ip netip.Addr, lease time.Duration) {
	c.busy = false
	switch typ {
	case dhcpv4.MessageTypeOffer:
		s.stats.Offers++
	case dhcpv4.MessageTypeAck:
		s.stats.Acks++
		l := Lease{IP: ip, MAC: c.mac, Hostname: c.host, Expires: c.seen.Add(lease)}
		s.keep(l, c.seen)
		if s.cfg.OnLease != nil {
			s.cfg.OnLease(l)
		}
	case dhcpv4.MessageTypeNak:
		s.stats.Naks++
	}
	s.reply(c.req, typ, ip, lease)
}

// keep notes a lease this server honours, within the bound on them.
func (s *Server) keep(l Lease, now time.Time) {
	if len(s.leases) >= maxClients {
		s.prune(now)
	}
	s.leases[l.MAC] = l
}

// reply builds the answer to req and writes it out. ip is the address
// given (yiaddr), lease its duration; an INFORM gets neither.
func (s *Server) reply(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType, ip netip.Addr, lease time.Duration) {
	r := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		ClientHWAddr:  req.ClientHWAddr,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: net.IPv4zero,
		Options:       make(dhcpv4.Options),
	}
	r.UpdateOption(dhcpv4.OptMessageType(typ))
	r.UpdateOption(dhcpv4.OptServerIdentifier(s.cfg.ServerIP.AsSlice()))
	if id := req.GetOneOption(dhcpv4.OptionClientIdentifier); id != nil {
		r.UpdateOption(dhcpv4.OptClientIdentifier(id)) // RFC 6842
	}
	if typ == dhcpv4.MessageTypeNak {
		r.UpdateOption(dhcpv4.OptMessage("address not available"))
	} else {
		if typ == dhcpv4.MessageTypeAck && !req.ClientIPAddr.IsUnspecified() {
			r.ClientIPAddr = req.ClientIPAddr
		}
		if ip.IsValid() {
			r.YourIPAddr = ip.AsSlice()
		}
		r.UpdateOption(dhcpv4.OptSubnetMask(s.mask))
		r.UpdateOption(dhcpv4.OptBroadcastAddress(s.bcast.AsSlice()))
		gateway, domain := s.cfg.Gateway, s.cfg.Domain
		if s.network.Router.IsValid() {
			gateway = s.network.Router
		}
		if s.network.DomainSearch != "" {
			domain = s.network.DomainSearch
			r.UpdateOption(dhcpv4.OptDomainSearch(&rfc1035label.Labels{Labels: []string{domain}}))
		}
		if gateway.IsValid() {
			r.UpdateOption(dhcpv4.OptRouter(gateway.AsSlice()))
		}
		if s.cfg.DNS.IsValid() {
			r.UpdateOption(dhcpv4.OptDNS(s.cfg.DNS.AsSlice()))
		}
		if domain != "" {
			r.UpdateOption(dhcpv4.OptDomainName(domain))
		}
		if mtu := s.network.MTU; mtu > 0 {
			r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, binary.BigEndian.AppendUint16(nil, uint16(mtu))))
		}
		if len(s.network.Routes) > 0 {
			// A client given classless routes ignores the router option
			// (RFC 3442), so the default route goes among them.
			var routes []*dhcpv4.Route
			for _, rt := range s.network.Routes {
				routes = append(routes, &dhcpv4.Route{Dest: &net.IPNet{IP: rt.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(rt.Prefix.Bits(), 32)}, Router: rt.Via.AsSlice()})
			}
			if gateway.IsValid() {
				routes = append(routes, &dhcpv4.Route{Dest: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Router: gateway.AsSlice()})
			}
			r.UpdateOption(dhcpv4.OptClasslessStaticRoute(routes...))
		}
		if lease > 0 {
			r.UpdateOption(dhcpv4.OptIPAddressLeaseTime(lease))
			r.UpdateOption(dhcpv4.OptRenewTimeValue(lease / 2))
			r.UpdateOption(dhcpv4.OptRebindingTimeValue(lease * 7 / 8))
		}
	}
	d := udp4.Datagram{
		SrcMAC:  s.cfg.ServerMAC,
		Src:     netip.AddrPortFrom(s.cfg.ServerIP, dhcpv4.ServerPort),
		Payload: r.ToBytes(),
	}
	// RFC 2131 section 4.1: a NAK is broadcast; a client that has an
	// address hears unicast there; otherwise broadcast if it asks, unicast
	// to the new address if not.
	ciaddr, _ := netip.AddrFromSlice(req.ClientIPAddr.To4())
	switch {
	case typ == dhcpv4.MessageTypeNak:
		d.DstMAC, d.Dst = l2.Broadcast, netip.AddrPortFrom(limitedBroadcast, dhcpv4.ClientPort)
	case ciaddr.IsValid() && !ciaddr.IsUnspecified():
		d.DstMAC, d.Dst = l2.MAC(req.ClientHWAddr), netip.AddrPortFrom(ciaddr, dhcpv4.ClientPort)
	case req.IsBroadcast() || !ip.IsValid():
		d.DstMAC, d.Dst = l2.Broadcast, netip.AddrPortFrom(limitedBroadcast, dhcpv4.ClientPort)
	default:
		d.DstMAC, d.Dst = l2.MAC(req.ClientHWAddr), netip.AddrPortFrom(ip, dhcpv4.ClientPort)
	}
	frame, err := udp4.Append(s.buf[:0], d)
	if err != nil {
		return
	}
	s.buf = frame
	s.out(frame)
}
