// Package vdns is the virtual DNS every burrow node answers on its own TAP,
// as the IPOP paper (seeds/ipop-self-configuring-grid-vpn.txt) describes
// it (section 4, "virtual DNS"):
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
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"burrow/dht"
	"burrow/l2"
	"burrow/l2/udp4"
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
