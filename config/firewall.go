package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"burrow/firewall"
	"burrow/identity"
)

// Firewall is the firewall section: which frames may enter and leave the
// TAP, by the other member's certificate name and groups, the remote
// address, protocol, destination port and ICMP type. Without the section
// everything passes; with it, only what a rule allows (ARP, IPv6
// neighbour discovery and multicast group membership always pass).
type Firewall struct {
	// OtherEthertypes is "drop" (the default) or "allow": frames that are
	// neither IP, ARP nor neighbour discovery.
	OtherEthertypes string            `yaml:"other_ethertypes"`
	Conntrack       FirewallConntrack `yaml:"conntrack"`
	Inbound         []FirewallRule    `yaml:"inbound"`
	Outbound        []FirewallRule    `yaml:"outbound"`

	Policy firewall.Policy `yaml:"-"`
}

// FirewallConntrack holds the idle timeouts of allowed connections.
type FirewallConntrack struct {
	TCPTimeout  time.Duration `yaml:"tcp_timeout"`
	UDPTimeout  time.Duration `yaml:"udp_timeout"`
	ICMPTimeout time.Duration `yaml:"icmp_timeout"`
}

// FirewallRule allows what matches all its fields. At least one of host,
// group, groups and cidr must be given ("host: any" for every member).
type FirewallRule struct {
	// Port is the destination port: a number, a range "8000-8080" or
	// "any" (the default); TCP and UDP only.
	Port string `yaml:"port"`
	// Proto is any (the default), tcp, udp or icmp.
	Proto string `yaml:"proto"`
	// ICMPType limits an icmp rule to one type (8: echo request).
	ICMPType *int `yaml:"icmp_type"`
	// Host is a member's certificate name, or "any".
	Host string `yaml:"host"`
	// Group and Groups name groups the member's certificate must all hold.
	Group  string   `yaml:"group"`
	Groups []string `yaml:"groups"`
	// CIDR holds the remote address, or is "any".
	CIDR string `yaml:"cidr"`
}

func (f *Firewall) validate() error {
	p := &f.Policy
	switch f.OtherEthertypes {
	case "", "drop":
	case "allow":
		p.OtherEthertypes = true
	default:
		return fieldErr("firewall.other_ethertypes", "%q is neither allow nor drop", f.OtherEthertypes)
	}
	for field, d := range map[string]time.Duration{"tcp_timeout": f.Conntrack.TCPTimeout, "udp_timeout": f.Conntrack.UDPTimeout, "icmp_timeout": f.Conntrack.ICMPTimeout} {
		if d < 0 {
			return fieldErr("firewall.conntrack."+field, "%v is negative", d)
		}
	}
	p.TCPTimeout, p.UDPTimeout, p.ICMPTimeout = f.Conntrack.TCPTimeout, f.Conntrack.UDPTimeout, f.Conntrack.ICMPTimeout
	var err error
	if p.Inbound, err = compileRules("firewall.inbound", f.Inbound); err != nil {
		return err
	}
	p.Outbound, err = compileRules("firewall.outbound", f.Outbound)
	return err
}

func compileRules(field string, rules []FirewallRule) ([]firewall.Rule, error) {
	out := make([]firewall.Rule, 0, len(rules))
	for i, r := range rules {
		c, err := r.compile(fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (r *FirewallRule) compile(field string) (firewall.Rule, error) {
	c := firewall.Rule{ICMPType: firewall.AnyICMPType}
	switch strings.ToLower(r.Proto) {
	case "", "any":
	case "tcp":
		c.Proto = firewall.ProtoTCP
	case "udp":
		c.Proto = firewall.ProtoUDP
	case "icmp":
		c.Proto = firewall.ProtoICMP
	default:
		return c, fieldErr(field+".proto", "%q is none of any, tcp, udp and icmp", r.Proto)
	}
	if r.Port != "" && r.Port != "any" {
		if c.Proto != firewall.ProtoTCP && c.Proto != firewall.ProtoUDP {
			return c, fieldErr(field+".port", "needs proto tcp or udp: only they have ports")
		}
		first, last, ok := strings.Cut(r.Port, "-")
		if !ok {
			last = first
		}
		a, errA := strconv.ParseUint(strings.TrimSpace(first), 10, 16)
		b, errB := strconv.ParseUint(strings.TrimSpace(last), 10, 16)
		if errA != nil || errB != nil || a == 0 || b < a {
			return c, fieldErr(field+".port", "%q is not a port (1-65535), a range such as 8000-8080, or any", r.Port)
		}
		c.FirstPort, c.LastPort = uint16(a), uint16(b)
	}
	if r.ICMPType != nil {
		if c.Proto != firewall.ProtoICMP {
			return c, fieldErr(field+".icmp_type", "needs proto icmp")
		}
		if *r.ICMPType < 0 || *r.ICMPType > 255 {
			return c, fieldErr(field+".icmp_type", "%d is out of range 0..255", *r.ICMPType)
		}
		c.ICMPType = *r.ICMPType
	}
	if r.Host != "any" {
		if r.Host != "" {
			if err := identity.CheckNodeName(r.Host); err != nil {
				return c, fieldErr(field+".host", "%q cannot name a member: %v", r.Host, err)
			}
		}
		c.Host = r.Host
	}
	groups := r.Groups
	if r.Group != "" {
		groups = append([]string{r.Group}, groups...)
	}
	for _, g := range groups {
		if err := identity.CheckGroupName(g); err != nil {
			return c, fieldErr(field+".groups", "%q cannot name a group of a certificate: %v", g, err)
		}
	}
	c.Groups = groups
	if r.CIDR != "" && r.CIDR != "any" {
		p, err := netip.ParsePrefix(r.CIDR)
		if err != nil {
			return c, fieldErr(field+".cidr", "%q is not a prefix such as 10.9.0.0/24, or any", r.CIDR)
		}
		c.CIDR = p.Masked()
	}
	if r.Host == "" && len(groups) == 0 && r.CIDR == "" {
		return c, fieldErr(field, "names no host, group, groups or cidr; say host: any to allow every member")
	}
	return c, nil
}
