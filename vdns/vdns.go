// Package vdns is the virtual DNS every burrow node answers on its own TAP,
// as the IPOP paper describes it (section 4, "virtual DNS"):
//
//   - "The DNS server 'runs' on a reserved IP address": Config.Server,
//     announced to clients by DHCP. The node answers ARP for it itself, so
//     every member reaches it locally and no broadcast for it leaves the
//     node, and answers DNS queries sent to it.
//   - "If the actual names are unimportant, then they can be based upon
//     the IP address such that a virtual IP address like 10.5.123.44 would
//     translate to a virtual name such as C005123044 for an address space
//     of 10.0.0.0/8": automatic names (AutoName), forward and reverse
//     (PTR), with no state at all.
//   - "If names need to be unique, they can be stored in the DHT": a name
//     is registered first come, first served with PutIfAbsent under
//     "dns:<domain>:<name>", holding its addresses, as a lease the
//     registering node renews; a name already held by another node is a
//     conflict reported to the caller.
//
// Unknown names in the domain get NXDOMAIN; names outside it get REFUSED,
// or, when forwarding is on, are handed to a callback (the node's runtime
// asks the real resolvers) and the answer is relayed. A malformed query
// gets FORMERR when its header can be read and nothing otherwise.
package vdns

import (
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"burrow/dht"
	"burrow/ipam/udp4"
	"burrow/l2"
	"burrow/nid"
)

// Config configures the resolver.
type Config struct {
	// Domain is the virtual network's domain, e.g. "burrow.internal".
	Domain string
	// Network is the virtual IPv4 network that automatic names cover;
	// zero disables them.
	Network netip.Prefix
	// Server is the reserved address the DNS answers on, ServerMAC the
	// hardware address it answers ARP with.
	Server    netip.Addr
	ServerMAC l2.MAC
	// Forward hands names outside the domain to the forward callback;
	// otherwise they are refused.
	Forward bool
	// NameTTL is the lease of a registered name, renewed at a third.
	NameTTL time.Duration
	// AnswerTTL is the TTL of the records in answers.
	AnswerTTL time.Duration
	// ForwardTimeout bounds the wait for a forwarded answer; SERVFAIL then.
	ForwardTimeout time.Duration
}

// Defaults.
const (
	DefaultNameTTL        = time.Hour
	DefaultAnswerTTL      = time.Minute
	DefaultForwardTimeout = 5 * time.Second
	// maxPending bounds queries waiting on the DHT or on a forwarder.
	maxPending = 256
	// ednsSize is the UDP payload size announced in EDNS answers.
	ednsSize = 1232
	// dhcpServerPort is left alone, for a DHCP server on the same address.
	dhcpServerPort = 67
)

// ForwardRequest is a query for a name outside the domain, to be sent to
// the real resolvers. Answer with Resolver.Forwarded and the same ID.
type ForwardRequest struct {
	ID    uint64
	Query []byte // the client's DNS message, as received
}

// Stats counts what the resolver did.
type Stats struct {
	ARPReplies, Queries          uint64
	Answered, NXDomain, Refused  uint64
	ServFail, FormErr, Forwarded uint64
	Dropped                      uint64 // unanswerable or over the pending bound
}

// Resolver is the virtual DNS of one node. It is not safe for concurrent
// use.
type Resolver struct {
	cfg     Config
	self    nid.ID
	domain  string // canonical, fully qualified
	kv      dht.Client
	out     func(frame []byte)
	forward func(ForwardRequest)
	log     *slog.Logger

	pending  int // DHT lookups in flight
	forwards map[uint64]*forwarded
	nextID   uint64
	names    map[string]*registration
	buf      []byte
	stats    Stats
}

// client is where an answer goes.
type client struct {
	mac  l2.MAC
	addr netip.AddrPort
	size int // the largest answer it accepts over UDP
}

type forwarded struct {
	to       client
	query    *dns.Msg
	deadline time.Time
}

// New creates the resolver of node self, writing frames through out.
// forward receives queries to forward when cfg.Forward is set.
func New(cfg Config, self nid.ID, kv dht.Client, out func(frame []byte), forward func(ForwardRequest), log *slog.Logger) (*Resolver, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if _, ok := dns.IsDomainName(cfg.Domain); !ok || cfg.Domain == "" || cfg.Domain == "." {
		return nil, errors.New("vdns: Domain is not a domain name")
	}
	for _, label := range dns.SplitDomainName(cfg.Domain) {
		if !validLabel(label) {
			return nil, errors.New("vdns: Domain labels must be letters, digits and hyphens")
		}
	}
	if !cfg.Server.Is4() {
		return nil, errors.New("vdns: Server must be an IPv4 address")
	}
	if cfg.Network.IsValid() && (!cfg.Network.Addr().Is4() || cfg.Network.Bits() > 24) {
		return nil, errors.New("vdns: Network must be an IPv4 prefix of at most /24")
	}
	if cfg.Forward && forward == nil {
		return nil, errors.New("vdns: Forward needs a forward callback")
	}
	if cfg.NameTTL <= 0 {
		cfg.NameTTL = DefaultNameTTL
	}
	if cfg.AnswerTTL <= 0 {
		cfg.AnswerTTL = DefaultAnswerTTL
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = DefaultForwardTimeout
	}
	cfg.Network = cfg.Network.Masked()
	return &Resolver{
		cfg:      cfg,
		self:     self,
		domain:   dns.CanonicalName(cfg.Domain),
		kv:       kv,
		out:      out,
		forward:  forward,
		log:      log,
		forwards: make(map[uint64]*forwarded),
		names:    make(map[string]*registration),
	}, nil
}

// Stats reports counters.
func (r *Resolver) Stats() Stats { return r.stats }

// key is the DHT key of a relative name.
func (r *Resolver) key(name string) string {
	return "dns:" + strings.TrimSuffix(r.domain, ".") + ":" + name
}

// HandleFrame takes a frame read from the TAP. It reports whether the
// frame was for the DNS server — an ARP request for its address, or an
// IPv4 packet to it other than DHCP — which the node must then not
// forward. The DHCP server (package ipam) may use the same address, so
// that this ARP answer also serves its unicast renewals.
func (r *Resolver) HandleFrame(frame []byte, now time.Time) bool {
	eth, err := l2.ParseEthernet(frame)
	if err != nil || eth.Tagged {
		return false
	}
	switch eth.EtherType {
	case l2.EtherTypeARP:
		return r.handleARP(eth, frame[eth.PayloadOffset:])
	case l2.EtherTypeIPv4:
		ip := frame[eth.PayloadOffset:]
		if len(ip) < udp4.IPv4HeaderLen || netip.AddrFrom4([4]byte(ip[16:20])) != r.cfg.Server {
			return false
		}
		d, err := udp4.Parse(frame)
		if err == nil && d.Dst.Port() == dhcpServerPort {
			return false // DHCP may share the address; it is the DHCP server's
		}
		if err != nil || d.Dst.Port() != 53 {
			r.stats.Dropped++ // only DNS over UDP lives at this address
			return true
		}
		r.handleQuery(client{mac: d.SrcMAC, addr: d.Src}, d.Payload, now)
		return true
	}
	return false
}

// handleARP answers requests for the server's address, including a
// client's duplicate-address probe, which learns that it is taken.
func (r *Resolver) handleARP(eth l2.Ethernet, payload []byte) bool {
	a, err := l2.ParseARP(payload)
	if err != nil || a.TargetIP != r.cfg.Server {
		return false
	}
	if a.Op != l2.ARPRequest || a.SenderMAC.IsMulticast() {
		return true
	}
	reply := l2.ARP{Op: l2.ARPReply, SenderMAC: r.cfg.ServerMAC, SenderIP: r.cfg.Server, TargetMAC: a.SenderMAC, TargetIP: a.SenderIP}
	b := l2.Ethernet{Dst: eth.Src, Src: r.cfg.ServerMAC, EtherType: l2.EtherTypeARP}.AppendHeader(r.buf[:0])
	b, _ = l2.AppendARP(b, reply)
	r.buf = b
	r.stats.ARPReplies++
	r.out(b)
	return true
}

func (r *Resolver) handleQuery(to client, payload []byte, now time.Time) {
	r.stats.Queries++
	var q dns.Msg
	if err := q.Unpack(payload); err != nil {
		r.formErr(to, payload)
		return
	}
	if q.Response {
		r.stats.Dropped++
		return
	}
	to.size = dns.MinMsgSize
	if opt := q.IsEdns0(); opt != nil {
		to.size = max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	switch {
	case q.Opcode != dns.OpcodeQuery:
		r.answerRcode(to, &q, dns.RcodeNotImplemented)
		return
	case len(q.Question) != 1:
		r.answerRcode(to, &q, dns.RcodeFormatError)
		return
	}
	question := q.Question[0]
	name := dns.CanonicalName(question.Name)
	switch {
	case question.Qclass != dns.ClassINET && question.Qclass != dns.ClassANY:
		r.answerRcode(to, &q, dns.RcodeRefused)
	case dns.IsSubDomain(r.domain, name):
		r.answerInDomain(to, &q, name, now)
	case strings.HasSuffix(name, ".in-addr.arpa.") && r.ownReverse(name):
		r.answerPTR(to, &q, name)
	case r.cfg.Forward:
		r.forwardQuery(to, &q, payload, now)
	default:
		r.answerRcode(to, &q, dns.RcodeRefused)
	}
}

// formErr answers a message that does not parse, if at least its header
// does and it is a query.
func (r *Resolver) formErr(to client, payload []byte) {
	if len(payload) < 12 || payload[2]&0x80 != 0 {
		r.stats.Dropped++
		return
	}
	var m dns.Msg
	m.Id = binary.BigEndian.Uint16(payload)
	m.Response, m.Rcode = true, dns.RcodeFormatError
	to.size = dns.MinMsgSize
	r.send(to, &m)
}

// answerInDomain answers a name in the virtual domain: the apex, an
// automatic name, or a name registered in the DHT.
func (r *Resolver) answerInDomain(to client, q *dns.Msg, name string, now time.Time) {
	qtype := q.Question[0].Qtype
	if name == r.domain {
		m := r.reply(q)
		if qtype == dns.TypeSOA || qtype == dns.TypeANY {
			m.Answer = append(m.Answer, r.soa())
		} else {
			m.Ns = append(m.Ns, r.soa())
		}
		r.send(to, m)
		return
	}
	rel := strings.TrimSuffix(name, "."+r.domain)
	if ip, ok := ParseAutoName(r.cfg.Network, rel); ok {
		r.answerAddrs(to, q, []netip.Addr{ip})
		return
	}
	if _, err := canonicalName(rel); err != nil {
		r.nxdomain(to, q)
		return
	}
	if r.pending >= maxPending {
		r.answerRcode(to, q, dns.RcodeServerFailure)
		return
	}
	r.pending++
	r.kv.Get(r.key(rel), now, func(res dht.Result) {
		r.pending--
		switch res.Status {
		case dht.OK:
			r.answerAddrs(to, q, decodeAddrs(res.Value))
		case dht.NotFound:
			r.nxdomain(to, q)
		default:
			r.answerRcode(to, q, dns.RcodeServerFailure)
		}
	})
}

// answerAddrs answers with the addresses of the question's type; a name
// with none of that type gets an empty answer (NODATA).
func (r *Resolver) answerAddrs(to client, q *dns.Msg, addrs []netip.Addr) {
	question := q.Question[0]
	m := r.reply(q)
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: question.Name, Rrtype: t, Class: dns.ClassINET, Ttl: r.ttl()}
	}
	for _, a := range addrs {
		switch {
		case a.Is4() && (question.Qtype == dns.TypeA || question.Qtype == dns.TypeANY):
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: net.IP(a.AsSlice())})
		case a.Is6() && (question.Qtype == dns.TypeAAAA || question.Qtype == dns.TypeANY):
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.IP(a.AsSlice())})
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, r.soa())
	}
	r.send(to, m)
}

// ownReverse reports whether a reverse name is for an address in the
// virtual network.
func (r *Resolver) ownReverse(name string) bool {
	ip, ok := parseReverse(name)
	return ok && r.cfg.Network.IsValid() && r.cfg.Network.Contains(ip)
}

// parseReverse reads d.c.b.a.in-addr.arpa.
func parseReverse(name string) (netip.Addr, bool) {
	labels := dns.SplitDomainName(strings.TrimSuffix(name, "in-addr.arpa."))
	if len(labels) != 4 {
		return netip.Addr{}, false
	}
	ip, err := netip.ParseAddr(labels[3] + "." + labels[2] + "." + labels[1] + "." + labels[0])
	return ip, err == nil
}

func (r *Resolver) answerPTR(to client, q *dns.Msg, name string) {
	ip, _ := parseReverse(name)
	auto, _ := AutoName(r.cfg.Network, ip)
	question := q.Question[0]
	m := r.reply(q)
	if question.Qtype == dns.TypePTR || question.Qtype == dns.TypeANY {
		m.Answer = append(m.Answer, &dns.PTR{
			Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: r.ttl()},
			Ptr: auto + "." + r.domain,
		})
	}
	r.send(to, m)
}

func (r *Resolver) nxdomain(to client, q *dns.Msg) {
	m := r.reply(q)
	m.Rcode = dns.RcodeNameError
	m.Ns = append(m.Ns, r.soa())
	r.send(to, m)
}

func (r *Resolver) answerRcode(to client, q *dns.Msg, rcode int) {
	m := new(dns.Msg)
	m.SetRcode(q, rcode)
	m.RecursionAvailable = r.cfg.Forward
	r.send(to, m)
}

// reply starts an authoritative answer to q.
func (r *Resolver) reply(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	m.RecursionAvailable = r.cfg.Forward
	return m
}

func (r *Resolver) ttl() uint32 { return uint32(r.cfg.AnswerTTL / time.Second) }

// soa is the domain's start of authority, carried in negative answers so
// that resolvers cache them for AnswerTTL.
func (r *Resolver) soa() dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: r.domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: r.ttl()},
		Ns:      "ns." + r.domain,
		Mbox:    "hostmaster." + r.domain,
		Serial:  1,
		Refresh: 3600,
		Retry:   600,
		Expire:  86400,
		Minttl:  r.ttl(),
	}
}

// forwardQuery hands a query for an outside name to the runtime.
func (r *Resolver) forwardQuery(to client, q *dns.Msg, payload []byte, now time.Time) {
	if len(r.forwards) >= maxPending {
		r.answerRcode(to, q, dns.RcodeServerFailure)
		return
	}
	r.nextID++
	r.forwards[r.nextID] = &forwarded{to: to, query: q, deadline: now.Add(r.cfg.ForwardTimeout)}
	r.stats.Forwarded++
	r.forward(ForwardRequest{ID: r.nextID, Query: slices.Clone(payload)})
}

// Forwarded relays the answer to forward request id. An answer that does
// not parse or does not answer the question is treated as a failure.
func (r *Resolver) Forwarded(id uint64, answer []byte, now time.Time) {
	f := r.forwards[id]
	if f == nil {
		return // too late, or never asked
	}
	delete(r.forwards, id)
	var m dns.Msg
	if err := m.Unpack(answer); err != nil || !m.Response || len(m.Question) != 1 ||
		!strings.EqualFold(m.Question[0].Name, f.query.Question[0].Name) || m.Question[0].Qtype != f.query.Question[0].Qtype {
		r.answerRcode(f.to, f.query, dns.RcodeServerFailure)
		return
	}
	m.Id = f.query.Id
	r.send(f.to, &m)
}

// NextDeadline is when Tick should next run; zero when nothing waits.
func (r *Resolver) NextDeadline() time.Time {
	var next time.Time
	at := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, f := range r.forwards {
		at(f.deadline)
	}
	for _, reg := range r.names {
		if !reg.inFlight {
			at(reg.next)
		}
	}
	return next
}

// Tick fails forwarded queries that were not answered in time and renews
// registered names.
func (r *Resolver) Tick(now time.Time) {
	for _, id := range sortedIDs(r.forwards) {
		if f := r.forwards[id]; !now.Before(f.deadline) {
			delete(r.forwards, id)
			r.answerRcode(f.to, f.query, dns.RcodeServerFailure)
		}
	}
	r.tickNames(now)
}

func sortedIDs(m map[uint64]*forwarded) []uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// send packs m, cut to what the client accepts, into a frame to it.
func (r *Resolver) send(to client, m *dns.Msg) {
	switch m.Rcode {
	case dns.RcodeSuccess:
		r.stats.Answered++
	case dns.RcodeNameError:
		r.stats.NXDomain++
	case dns.RcodeRefused:
		r.stats.Refused++
	case dns.RcodeServerFailure:
		r.stats.ServFail++
	case dns.RcodeFormatError:
		r.stats.FormErr++
	}
	if to.size > dns.MinMsgSize && m.IsEdns0() == nil {
		m.SetEdns0(ednsSize, false)
	}
	m.Truncate(min(to.size, ednsSize))
	payload, err := m.Pack()
	if err != nil {
		r.stats.Dropped++
		return
	}
	frame, err := udp4.Append(r.buf[:0], udp4.Datagram{
		SrcMAC:  r.cfg.ServerMAC,
		DstMAC:  to.mac,
		Src:     netip.AddrPortFrom(r.cfg.Server, 53),
		Dst:     to.addr,
		Payload: payload,
	})
	if err != nil {
		r.stats.Dropped++
		return
	}
	r.buf = frame
	r.out(frame)
}

// RegisterState is where a registered name stands.
type RegisterState uint8

// Registration states.
const (
	Registered RegisterState = iota // the name is ours; its lease is renewed
	Conflict                        // another node holds the name
	Retrying                        // the DHT did not answer; trying again
	Invalid                         // the name or its addresses cannot be registered
)

func (s RegisterState) String() string {
	return [...]string{"registered", "conflict", "retrying", "invalid"}[s]
}

// RegisterResult reports a registration.
type RegisterResult struct {
	Name  string
	State RegisterState
	// Holder and Addrs are the other node and its addresses, on Conflict.
	Holder nid.ID
	Addrs  []netip.Addr
}

type registration struct {
	name     string
	value    []byte
	state    RegisterState
	reported bool // cb heard the first outcome
	holder   nid.ID
	theirs   []netip.Addr
	next     time.Time // when to write or renew next
	inFlight bool
	cb       func(RegisterResult)
}

func (g *registration) result() RegisterResult {
	return RegisterResult{Name: g.name, State: g.state, Holder: g.holder, Addrs: slices.Clone(g.theirs)}
}

// Register claims name (relative to the domain; "web" or "db.eu") for
// addrs, first come first served, and keeps it while the resolver runs.
// cb, if set, hears the outcome and every later change of state — a
// conflict when another node holds the name, or later takes it over
// after a lapse.
func (r *Resolver) Register(name string, addrs []netip.Addr, now time.Time, cb func(RegisterResult)) {
	canon, err := canonicalName(name)
	value := encodeAddrs(addrs)
	if err != nil || len(addrs) == 0 || len(value) > dht.DefaultMaxValueLen || len(decodeAddrs(value)) != len(addrs) {
		if cb != nil {
			cb(RegisterResult{Name: name, State: Invalid})
		}
		return
	}
	// A registration in flight for the name is superseded: its answer is
	// ignored, and this one overwrites whatever it wrote.
	g := &registration{name: canon, value: value, state: Retrying, cb: cb}
	r.names[canon] = g
	r.claim(g, now)
}

// Unregister stops renewing name and deletes it from the DHT.
func (r *Resolver) Unregister(name string, now time.Time) {
	canon, err := canonicalName(name)
	if err != nil || r.names[canon] == nil {
		return
	}
	delete(r.names, canon)
	r.kv.Delete(r.key(canon), now, func(dht.Result) {})
}

// Names reports the registrations.
func (r *Resolver) Names() []RegisterResult {
	var out []RegisterResult
	for _, g := range r.names {
		out = append(out, g.result())
	}
	slices.SortFunc(out, func(a, b RegisterResult) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r *Resolver) claim(g *registration, now time.Time) {
	g.inFlight = true
	value := g.value
	r.kv.PutIfAbsent(r.key(g.name), value, r.cfg.NameTTL, now, func(res dht.Result) {
		g.inFlight = false
		switch {
		case r.names[g.name] != g:
			// Unregistered meanwhile.
		case res.Status == dht.OK:
			r.settle(g, Registered, res.At.Add(r.cfg.NameTTL/3))
		case res.Status == dht.Exists && res.Owner == r.self:
			// Ours with other addresses: overwrite.
			g.inFlight = true
			r.kv.Put(r.key(g.name), value, r.cfg.NameTTL, res.At, func(res dht.Result) {
				g.inFlight = false
				r.afterWrite(g, res)
			})
		case res.Status == dht.Exists:
			if g.state != Conflict || !g.reported {
				r.log.Warn("vdns: name already registered by another node", "name", g.name, "holder", res.Owner)
			}
			g.holder, g.theirs = res.Owner, decodeAddrs(res.Value)
			r.settle(g, Conflict, res.At.Add(r.cfg.NameTTL/3))
		case res.Status == dht.TooLarge || res.Status == dht.Invalid:
			r.settle(g, Invalid, time.Time{}) // the DHT's limits are tighter than ours
		default:
			r.settle(g, Retrying, res.At.Add(retryInterval))
		}
	})
}

func (r *Resolver) afterWrite(g *registration, res dht.Result) {
	if r.names[g.name] != g {
		return
	}
	if res.Status == dht.OK {
		r.settle(g, Registered, res.At.Add(r.cfg.NameTTL/3))
		return
	}
	r.settle(g, Retrying, res.At.Add(retryInterval))
}

// settle records an outcome and when to act next, telling cb about the
// first outcome and every change after it.
func (r *Resolver) settle(g *registration, state RegisterState, next time.Time) {
	changed := !g.reported || g.state != state
	g.state, g.next, g.reported = state, next, true
	if state != Conflict {
		g.holder, g.theirs = nid.ID{}, nil
	}
	if changed && g.cb != nil {
		g.cb(g.result())
	}
}

// tickNames renews registered names and retries the others: a name held
// by another node is taken once its holder lets it lapse.
func (r *Resolver) tickNames(now time.Time) {
	for _, name := range sortedNames(r.names) {
		g := r.names[name]
		if g.inFlight || g.next.IsZero() || now.Before(g.next) {
			continue
		}
		if g.state != Registered {
			r.claim(g, now)
			continue
		}
		g.inFlight = true
		r.kv.Renew(r.key(g.name), r.cfg.NameTTL, now, func(res dht.Result) {
			g.inFlight = false
			if r.names[g.name] != g {
				return
			}
			switch res.Status {
			case dht.OK:
				g.next = res.At.Add(r.cfg.NameTTL / 3)
			case dht.NotFound:
				r.claim(g, res.At) // lapsed; probably still free
			case dht.Denied:
				g.holder = res.Owner
				r.log.Warn("vdns: registered name taken over by another node after a lapse", "name", g.name, "holder", res.Owner)
				r.settle(g, Conflict, res.At.Add(r.cfg.NameTTL/3))
			default:
				g.next = res.At.Add(retryInterval)
			}
		})
	}
}

// retryInterval spaces attempts when the DHT does not answer.
const retryInterval = 5 * time.Second

func sortedNames(m map[string]*registration) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
