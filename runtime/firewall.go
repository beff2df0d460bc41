package runtime

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"burrow/config"
	"burrow/firewall"
)

// ReloadFirewall puts the firewall section of cfg (the configuration file
// read again, on SIGHUP) in force without touching links. Connections the
// new rules no longer allow close at their next packet. Adding or removing
// the whole section needs a restart.
func (d *Daemon) ReloadFirewall(cfg *config.Config) error {
	switch {
	case d.firewall == nil && cfg.Firewall == nil:
		return nil
	case d.firewall == nil:
		return errors.New("the firewall section was added: restart the node to turn the firewall on")
	case cfg.Firewall == nil:
		return errors.New("the firewall section was removed: restart the node to turn the firewall off (it stays as it was until then)")
	}
	d.firewall.SetPolicy(cfg.Firewall.Policy)
	d.log.Info("firewall reloaded", "inbound_rules", len(cfg.Firewall.Policy.Inbound), "outbound_rules", len(cfg.Firewall.Policy.Outbound))
	return nil
}

// FirewallQuery asks how this node's firewall treats a packet between two
// members, one of them this node (by its certificate name).
type FirewallQuery struct {
	From, To string
	Proto    string // tcp, udp or icmp
	Port     int    // destination port (TCP, UDP) or ICMP type
	// Addr is the other member's address, for cidr rules; zero takes the
	// first address of its certificate.
	Addr netip.Addr `json:",omitzero"`
}

// FirewallAnswer is the verdict and what it rests on.
type FirewallAnswer struct {
	Direction string   `json:"direction"`
	Allowed   bool     `json:"allowed"`
	Reason    string   `json:"reason"`
	Rule      string   `json:"rule,omitempty"` // the rule that allowed it, as configured
	Member    string   `json:"member"`         // the other member
	Groups    []string `json:"groups"`         // its certificate's groups, as this node knows them
	Known     bool     `json:"known"`          // this node holds its certificate (it has a link to it)
	Addr      string   `json:"addr,omitempty"` // the address checked against cidr rules
}

// CheckFirewall explains the verdict of this node's firewall on q, opening
// and counting nothing.
func (d *Daemon) CheckFirewall(q FirewallQuery) (FirewallAnswer, error) {
	var a FirewallAnswer
	if d.firewall == nil {
		return a, errors.New("this node has no firewall section: every frame passes")
	}
	self := d.cert.Name
	var other string
	dir := firewall.Inbound
	switch {
	case q.To == self:
		other = q.From
	case q.From == self:
		other, dir = q.To, firewall.Outbound
	default:
		return a, fmt.Errorf("neither %q nor %q is this node (%s): a node's firewall decides only its own traffic; ask the node at either end", q.From, q.To, self)
	}
	var proto uint8
	switch q.Proto {
	case "tcp":
		proto = 6
	case "udp":
		proto = 17
	case "icmp":
		proto = 1
	default:
		return a, fmt.Errorf("protocol %q is none of tcp, udp and icmp", q.Proto)
	}
	if q.Port < 0 || q.Port > 65535 || (proto == 1 && q.Port > 255) {
		return a, fmt.Errorf("%d is no port (1-65535) or ICMP type (0-255)", q.Port)
	}
	a.Direction, a.Member = dir.String(), other
	var member firewall.Member
	var peerAddrs []netip.Prefix
	err := d.call(func() {
		for _, l := range d.node.Links().Links() {
			if l.Up() && l.Peer.Name == other {
				member = firewall.Member{Name: l.Peer.Name, Groups: slices.Clone(l.Peer.Groups)}
				peerAddrs = l.Peer.Addresses
				a.Known = true
			}
		}
	})
	if err != nil {
		return a, err
	}
	// Without a link, member stays unknown: this node matches it only by
	// address, as it would a frame from it.
	a.Groups = member.Groups
	remote := q.Addr
	if !remote.IsValid() && len(peerAddrs) > 0 {
		remote = peerAddrs[0].Addr()
	}
	if !remote.IsValid() {
		remote = netip.IPv4Unspecified()
	}
	remote = remote.Unmap()
	// This node's own address of the same family, for the frame.
	local := netip.IPv4Unspecified()
	if remote.Is6() {
		local = netip.IPv6Unspecified()
	}
	for _, p := range d.addrs {
		if p.Addr().Is6() == remote.Is6() {
			local = p.Addr()
			break
		}
	}
	a.Addr = remote.String()
	src, dst := remote, local
	if dir == firewall.Outbound {
		src, dst = local, remote
	}
	v := d.firewall.Explain(dir, probeFrame(src, dst, proto, uint16(q.Port)), member, time.Now().UnixNano())
	a.Allowed, a.Reason = v.Allowed, v.Reason
	if v.Rule >= 0 {
		rules := d.firewall.Policy().Inbound
		if dir == firewall.Outbound {
			rules = d.firewall.Policy().Outbound
		}
		a.Rule = describeRule(rules[v.Rule])
	}
	return a, nil
}

// probeFrame is the first packet of the connection a query asks about,
// between src and dst (both IPv4 or both IPv6): a TCP or UDP segment to
// port, or an ICMP message of type port (echo: identifier 0).
func probeFrame(src, dst netip.Addr, proto uint8, port uint16) []byte {
	l4 := make([]byte, 20)
	if proto == 1 {
		l4[0] = byte(port)
	} else {
		l4[0], l4[1] = 0xc3, 0x50 // source port 50000
		l4[2], l4[3] = byte(port>>8), byte(port)
	}
	if src.Is4() {
		f := append(make([]byte, 14+20), l4...)
		f[12], f[13] = 0x08, 0x00
		ip := f[14:]
		ip[0], ip[3], ip[9] = 0x45, 40, proto
		s, d := src.As4(), dst.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		return f
	}
	if proto == 1 {
		proto = 58 // ICMPv6
	}
	f := append(make([]byte, 14+40), l4...)
	f[12], f[13] = 0x86, 0xdd
	ip := f[14:]
	ip[0], ip[5], ip[6] = 0x60, 20, proto
	s, d := src.As16(), dst.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	return f
}

// describeRule writes a rule back in the configuration's words.
func describeRule(r firewall.Rule) string {
	s := "proto " + r.Proto.String()
	if r.FirstPort != 0 {
		s += fmt.Sprintf(" port %d", r.FirstPort)
		if r.LastPort != r.FirstPort {
			s += fmt.Sprintf("-%d", r.LastPort)
		}
	}
	if r.ICMPType != firewall.AnyICMPType {
		s += fmt.Sprintf(" icmp_type %d", r.ICMPType)
	}
	if r.Host != "" {
		s += " host " + r.Host
	}
	for _, g := range r.Groups {
		s += " group " + g
	}
	if r.CIDR.IsValid() {
		s += " cidr " + r.CIDR.String()
	}
	if r.Host == "" && len(r.Groups) == 0 && !r.CIDR.IsValid() {
		s += " host any"
	}
	return s
}
