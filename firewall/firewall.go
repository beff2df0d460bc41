// Package firewall decides which frames may enter and leave a node's TAP,
// by rules on the other member's certificate (its name and groups), the
// remote address, the protocol, the destination port and the ICMP type,
// as Nebula's firewall does for its tunnels. It is stateful: a packet a
// rule allowed opens a connection, and the packets of that connection pass
// both ways until it has been idle for its protocol's timeout. ARP, IPv6
// neighbour discovery (without them nothing passes) and multicast group
// membership (IGMP, MLD: without them snooping hides the groups) always
// pass; other ethertypes follow the policy's OtherEthertypes.
//
// The firewall is safe for concurrent use: the data path's workers check
// frames while the core replaces the policy. It does no I/O and reads no
// clock; times are unix nanoseconds from the caller.
package firewall

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Proto is a rule's protocol.
type Proto uint8

// Protocols.
const (
	ProtoAny Proto = iota
	ProtoTCP
	ProtoUDP
	ProtoICMP // ICMP for IPv4, ICMPv6 for IPv6
)

var protoNames = [...]string{"any", "tcp", "udp", "icmp"}

func (p Proto) String() string { return protoNames[p] }

// AnyICMPType in Rule.ICMPType matches every type.
const AnyICMPType = -1

// Rule allows packets that match every field it sets.
type Rule struct {
	Proto Proto
	// FirstPort and LastPort bound the destination port (TCP and UDP);
	// both zero match any port.
	FirstPort, LastPort uint16
	ICMPType            int // AnyICMPType, or a type (ICMP only)
	// Host is the other member's certificate name; "" is any member.
	Host string
	// Groups must all be in the other member's certificate.
	Groups []string
	// CIDR holds the remote address; the zero prefix is any address.
	CIDR netip.Prefix
}

// Policy is a node's whole firewall configuration.
type Policy struct {
	Inbound, Outbound []Rule
	// OtherEthertypes lets frames that are neither IP, ARP nor 802.1Q
	// through; otherwise they are dropped.
	OtherEthertypes bool
	// Idle timeouts of connections, by protocol.
	TCPTimeout, UDPTimeout, ICMPTimeout time.Duration
}

// Default idle timeouts (Nebula's).
const (
	DefaultTCPTimeout  = 12 * time.Minute
	DefaultUDPTimeout  = 3 * time.Minute
	DefaultICMPTimeout = 10 * time.Minute
)

// Member is what the firewall knows of the other end: the certificate of
// the member a frame comes from or goes to. A zero Member is unknown (a
// broadcast, or a member whose certificate this node has not seen): rules
// naming a host or groups do not match it.
type Member struct {
	Name   string
	Groups []string
}

// Direction says whether a frame enters the node's TAP or leaves it.
type Direction uint8

// Directions.
const (
	Inbound  Direction = iota // from another member into this node's TAP
	Outbound                  // from this node's TAP toward another member
)

func (d Direction) String() string {
	if d == Inbound {
		return "inbound"
	}
	return "outbound"
}

// Verdict is a decision and why.
type Verdict struct {
	Allowed bool
	// Rule is the index of the rule that allowed the packet in its
	// direction's list, or -1.
	Rule   int
	Reason string
}

// Firewall holds a policy and the connections it allowed.
type Firewall struct {
	policy atomic.Pointer[compiled]
	shards [numShards]shard
	// Opened counts connections a rule opened; Dropped counts frames
	// dropped. Frames allowed are not counted: a counter every frame
	// writes, from every core, would cost more than the check.
	Opened, Dropped atomic.Uint64
}

// compiled is a policy with its generation: connections opened under an
// older one are checked again against the current one.
type compiled struct {
	Policy
	gen uint32
}

const (
	numShards = 64
	// maxPerShard bounds the connections tracked (64 Ki in all).
	maxPerShard = 1024
)

// shard is a part of the connection table. Readers take no lock: the map
// is replaced whole when a connection is added or swept (copy on write),
// and a connection's expiry is moved on in place, at most once per
// refreshEvery, so the frames of a connection in use write nothing shared.
type shard struct {
	mu    sync.Mutex // serializes writers
	conns atomic.Pointer[map[connKey]*conn]
}

// refreshEvery is how stale a connection's expiry may get before a packet
// of it moves it on.
const refreshEvery = int64(time.Second)

// connKey names a connection from this node's side: both directions of it
// map to the same key.
type connKey struct {
	proto         uint8
	local, remote [16]byte
	lport, rport  uint16
}

// conn is a tracked connection: opened in direction origin by a packet
// of ICMP type icmpType (ICMP only), last allowed under policy generation
// gen.
type conn struct {
	expires  atomic.Int64
	gen      atomic.Uint32
	origin   Direction
	icmpType int16
}

// New makes a firewall with policy p.
func New(p Policy) *Firewall {
	f := &Firewall{}
	for i := range f.shards {
		f.shards[i].conns.Store(&map[connKey]*conn{})
	}
	f.SetPolicy(p)
	return f
}

// SetPolicy replaces the policy. Connections opened before stay open only
// as long as the new policy allows what opened them.
func (f *Firewall) SetPolicy(p Policy) {
	if p.TCPTimeout <= 0 {
		p.TCPTimeout = DefaultTCPTimeout
	}
	if p.UDPTimeout <= 0 {
		p.UDPTimeout = DefaultUDPTimeout
	}
	if p.ICMPTimeout <= 0 {
		p.ICMPTimeout = DefaultICMPTimeout
	}
	var gen uint32
	if old := f.policy.Load(); old != nil {
		gen = old.gen + 1
	}
	f.policy.Store(&compiled{Policy: p, gen: gen})
}

// Policy returns the policy in force.
func (f *Firewall) Policy() Policy { return f.policy.Load().Policy }

// NamesMembers reports whether a rule of direction d names a host or
// groups, so that the member at the other end matters.
func (f *Firewall) NamesMembers(d Direction) bool {
	p := f.policy.Load()
	rules := p.Inbound
	if d == Outbound {
		rules = p.Outbound
	}
	return slices.ContainsFunc(rules, func(r Rule) bool { return r.Host != "" || len(r.Groups) > 0 })
}

// Allow checks a frame crossing the TAP in direction d, to or from member
// m, at now (unix nanoseconds), and counts the outcome. It allocates
// nothing: the data path calls it for every frame.
func (f *Firewall) Allow(d Direction, frame []byte, m Member, now int64) bool {
	allowed, _, _ := f.check(d, frame, m, now, true)
	if !allowed {
		f.Dropped.Add(1)
	}
	return allowed
}

// Explain is Allow without effects: it says what the firewall would do
// with the frame and why, opening and counting nothing.
func (f *Firewall) Explain(d Direction, frame []byte, m Member, now int64) Verdict {
	allowed, rule, why := f.check(d, frame, m, now, false)
	v := Verdict{Allowed: allowed, Rule: rule}
	switch why {
	case becauseAlways:
		v.Reason = "ARP, IPv6 neighbour discovery and group membership (IGMP, MLD) always pass"
	case becauseOtherAllowed:
		v.Reason = "other ethertypes are allowed (other_ethertypes: allow)"
	case becauseOtherDropped:
		v.Reason = "neither IP, ARP nor neighbour discovery, and other_ethertypes is drop"
	case becauseMalformed:
		v.Reason = "a malformed IP packet"
	case becauseConnection:
		v.Reason = "a connection the firewall allowed before"
	case becauseRule:
		v.Reason = fmt.Sprintf("%s rule %d allows it", d, rule+1)
	case becauseNoRule:
		v.Reason = fmt.Sprintf("no %s rule matches", d)
	}
	return v
}

// reason is why check decided as it did.
type reason uint8

const (
	becauseAlways reason = iota
	becauseOtherAllowed
	becauseOtherDropped
	becauseMalformed
	becauseConnection
	becauseRule
	becauseNoRule
)

// check decides on a frame; with track it opens or refreshes the
// connection an allowed packet belongs to. rule is the index of the rule
// that allowed it, or -1.
func (f *Firewall) check(d Direction, frame []byte, m Member, now int64, track bool) (allowed bool, rule int, why reason) {
	p := f.policy.Load()
	pkt, kind := parse(frame)
	switch kind {
	case kindAlways:
		return true, -1, becauseAlways
	case kindOther:
		if p.OtherEthertypes {
			return true, -1, becauseOtherAllowed
		}
		return false, -1, becauseOtherDropped
	case kindMalformed:
		return false, -1, becauseMalformed
	}
	key := pkt.key(d)
	sh := &f.shards[shardOf(&key)]
	if c := (*sh.conns.Load())[key]; c != nil && c.expires.Load() > now {
		gen := c.gen.Load()
		if gen == p.gen || p.match(c.origin, pkt.view(c.origin, d, c.icmpType), m) >= 0 {
			if track {
				if gen != p.gen {
					c.gen.Store(p.gen)
				}
				if next := now + p.timeout(pkt.proto); next-c.expires.Load() >= refreshEvery {
					c.expires.Store(next)
				}
			}
			return true, -1, becauseConnection
		}
	}
	i := p.match(d, pkt.view(d, d, pkt.icmpType), m)
	if i < 0 {
		return false, -1, becauseNoRule
	}
	if track {
		f.open(sh, key, d, pkt, p, now)
	}
	return true, i, becauseRule
}

// open tracks a connection a rule allowed, opened by pkt in direction d,
// until its protocol's timeout.
func (f *Firewall) open(sh *shard, key connKey, d Direction, pkt packet, p *compiled, now int64) {
	c := &conn{origin: d, icmpType: pkt.icmpType}
	c.expires.Store(now + p.timeout(pkt.proto))
	c.gen.Store(p.gen)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := *sh.conns.Load()
	if _, tracked := old[key]; !tracked && len(old) >= maxPerShard {
		sweepShard(sh, now)
		if old = *sh.conns.Load(); len(old) >= maxPerShard {
			return // full: the packet passes, its answers need a rule of their own
		}
	}
	next := make(map[connKey]*conn, len(old)+1)
	maps.Copy(next, old)
	next[key] = c
	sh.conns.Store(&next)
	f.Opened.Add(1)
}

// timeout is the idle timeout of a protocol's connections, in nanoseconds.
func (p *compiled) timeout(proto uint8) int64 {
	switch proto {
	case ipProtoTCP:
		return int64(p.TCPTimeout)
	case ipProtoUDP:
		return int64(p.UDPTimeout)
	}
	return int64(p.ICMPTimeout)
}

// Sweep forgets connections idle past their timeout; the core calls it
// now and then so that the table does not hold dead ones.
func (f *Firewall) Sweep(now int64) {
	for i := range f.shards {
		sh := &f.shards[i]
		sh.mu.Lock()
		sweepShard(sh, now)
		sh.mu.Unlock()
	}
}

// Connections counts the connections tracked.
func (f *Firewall) Connections() int {
	n := 0
	for i := range f.shards {
		n += len(*f.shards[i].conns.Load())
	}
	return n
}

// sweepShard replaces the shard's map by one without the expired
// connections; the caller holds sh.mu.
func sweepShard(sh *shard, now int64) {
	old := *sh.conns.Load()
	next := make(map[connKey]*conn, len(old))
	for k, c := range old {
		if c.expires.Load() > now {
			next[k] = c
		}
	}
	if len(next) < len(old) {
		sh.conns.Store(&next)
	}
}

func shardOf(k *connKey) int {
	h := uint32(k.proto) ^ binary.LittleEndian.Uint32(k.remote[12:]) ^ binary.LittleEndian.Uint32(k.local[12:]) ^
		uint32(k.lport)<<16 ^ uint32(k.rport)
	h ^= h >> 16
	h *= 0x45d9f3b
	h ^= h >> 16
	return int(h % numShards)
}

// flowView is a packet as a rule of one direction sees it: the remote
// address, the destination port and the ICMP type.
type flowView struct {
	proto    uint8
	remote   netip.Addr
	dport    uint16
	icmpType int16
}

// match returns the index of the first rule of direction d that allows
// v to or from m, or -1.
func (p *compiled) match(d Direction, v flowView, m Member) int {
	rules := p.Inbound
	if d == Outbound {
		rules = p.Outbound
	}
	for i := range rules {
		if rules[i].matches(v, m) {
			return i
		}
	}
	return -1
}

func (r *Rule) matches(v flowView, m Member) bool {
	switch r.Proto {
	case ProtoTCP:
		if v.proto != ipProtoTCP {
			return false
		}
	case ProtoUDP:
		if v.proto != ipProtoUDP {
			return false
		}
	case ProtoICMP:
		if v.proto != ipProtoICMP && v.proto != ipProtoICMPv6 {
			return false
		}
		if r.ICMPType != AnyICMPType && int(v.icmpType) != r.ICMPType {
			return false
		}
	}
	if (r.FirstPort != 0 || r.LastPort != 0) && (v.dport < r.FirstPort || v.dport > r.LastPort) {
		return false
	}
	if r.Host != "" && r.Host != m.Name {
		return false
	}
	for _, g := range r.Groups {
		if !slices.Contains(m.Groups, g) {
			return false
		}
	}
	return !r.CIDR.IsValid() || r.CIDR.Contains(v.remote)
}
