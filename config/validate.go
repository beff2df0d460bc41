package config

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"burrow/l2"
)

// FieldError is a validation failure of one field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (c *Config) validate() error {
	if c.Network == "" {
		return fieldErr("network", "is required: the name of the burrow network (as given to `burrow ca init --network`)")
	}
	if c.CA == "" {
		return fieldErr("ca", "is required: path of the network's CA certificate (ca.crt)")
	}
	if c.Cert == "" {
		return fieldErr("cert", "is required: path of this node's certificate (from `burrow cert sign`)")
	}
	var err error
	if c.ListenAddr, err = netip.ParseAddrPort(c.Listen); err != nil {
		return fieldErr("listen", "%q is not an address:port such as [::]:51820 or 0.0.0.0:51820", c.Listen)
	}
	if c.UnderlayMTU < 1280 || c.UnderlayMTU > 65535 {
		return fieldErr("underlay_mtu", "%d is out of range 1280..65535", c.UnderlayMTU)
	}
	if err := c.TAP.validate(); err != nil {
		return err
	}
	for i := range c.Peers {
		if err := c.Peers[i].validate(fmt.Sprintf("peers[%d]", i)); err != nil {
			return err
		}
	}
	if err := c.Links.validate(); err != nil {
		return err
	}
	if err := c.Overlay.validate(); err != nil {
		return err
	}
	for i := range c.Beacons {
		b := &c.Beacons[i]
		field := fmt.Sprintf("beacons[%d]", i)
		ap, err := netip.ParseAddrPort(b.Address)
		if err != nil || ap.Port() == 0 {
			return fieldErr(field+".address", "%q is not an address:port such as 203.0.113.7:51820", b.Address)
		}
		b.Addr = ap
		if b.WebSocket != "" && !strings.HasPrefix(b.WebSocket, "ws://") && !strings.HasPrefix(b.WebSocket, "wss://") {
			return fieldErr(field+".websocket", "%q is not a ws:// or wss:// URL", b.WebSocket)
		}
	}
	if ws := c.Beacon.WebSocket; ws.Listen != "" {
		if (ws.Cert == "") != (ws.Key == "") {
			return fieldErr("beacon.websocket.cert", "cert and key go together: give both for wss, neither for plain ws")
		}
	}
	if t := c.TURN; t != nil {
		ap, err := netip.ParseAddrPort(t.Server)
		if err != nil || ap.Port() == 0 {
			return fieldErr("turn.server", "%q is not an address:port such as 203.0.113.7:3478", t.Server)
		}
		t.Addr = ap
		if t.Username == "" || t.Password == "" {
			return fieldErr("turn.username", "TURN needs long-term credentials: username and password")
		}
	}
	if err := c.validateRendezvous(); err != nil {
		return err
	}
	if c.NAT.PunchBudget > 4096 {
		return fieldErr("nat.punch_budget", "%d probes per dial is a flood; at most 4096", c.NAT.PunchBudget)
	}
	if err := c.Services.validate(); err != nil {
		return err
	}
	if err := c.validateKernelPath(); err != nil {
		return err
	}
	if err := c.validateFirewall(); err != nil {
		return err
	}
	if err := c.validatePublish(); err != nil {
		return err
	}
	if c.Relay.MaxRate < 0 {
		return fieldErr("relay.max_rate", "must not be negative (use relay.enabled: false to stop relaying)")
	}
	if c.Switch.MaxMACs < 0 {
		return fieldErr("switch.max_macs", "must not be negative")
	}
	if c.Metrics.Listen != "" {
		ap, err := netip.ParseAddrPort(c.Metrics.Listen)
		if err != nil || ap.Port() == 0 {
			return fieldErr("metrics.listen", "%q is not an address:port such as 127.0.0.1:9101 (leave it empty to serve no metrics)", c.Metrics.Listen)
		}
		c.Metrics.ListenAddr = ap
	}
	if c.Dashboard.Listen != "" {
		ap, err := netip.ParseAddrPort(c.Dashboard.Listen)
		if err != nil || ap.Port() == 0 {
			return fieldErr("dashboard.listen", "%q is not an address:port such as 127.0.0.1:8080 (leave it empty to serve no dashboard)", c.Dashboard.Listen)
		}
		if ap == c.Metrics.ListenAddr {
			return fieldErr("dashboard.listen", "%s is also metrics.listen; give each its own port", c.Dashboard.Listen)
		}
		c.Dashboard.ListenAddr = ap
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fieldErr("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fieldErr("log.format", "%q is not text or json", c.Log.Format)
	}
	return nil
}

func (t *TAP) validate() error {
	if len(t.Name) > 15 || strings.ContainsAny(t.Name, "/ \t%") {
		return fieldErr("tap.name", "%q is not a valid interface name (at most 15 characters, no '/', '%%' or spaces)", t.Name)
	}
	if t.MTU != 0 && (t.MTU < 576 || t.MTU > 65000) {
		return fieldErr("tap.mtu", "%d is out of range 576..65000 (0 derives it from underlay_mtu)", t.MTU)
	}
	if t.MAC != "" {
		m, err := l2.ParseMAC(t.MAC)
		if err != nil {
			return fieldErr("tap.mac", "%q is not a MAC address such as 02:00:00:00:00:01", t.MAC)
		}
		if m.IsMulticast() {
			return fieldErr("tap.mac", "%s is a multicast address; use a unicast one (first byte even)", t.MAC)
		}
		t.MACAddr, t.HasMAC = m, true
	}
	for i, a := range t.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fieldErr(fmt.Sprintf("tap.addresses[%d]", i), "%q is not an address with prefix length such as 10.10.0.1/24", a)
		}
		t.Prefixes = append(t.Prefixes, p)
	}
	if t.LocalDHCP && t.Bridge == "" {
		return fieldErr("tap.local_dhcp", "needs tap.bridge: only a bridged LAN can have a DHCP server of its own")
	}
	if t.Queues < 0 || t.Queues > 16 {
		return fieldErr("tap.queues", "%d is out of range 0..16 (0 = one per CPU)", t.Queues)
	}
	return nil
}

func (p *Peer) validate(field string) error {
	ap, err := netip.ParseAddrPort(p.Endpoint)
	if err != nil || ap.Port() == 0 {
		return fieldErr(field+".endpoint", "%q is not an address:port such as 203.0.113.7:51820", p.Endpoint)
	}
	p.Addr = ap
	if p.PublicKey != "" {
		raw, err := base64.StdEncoding.DecodeString(p.PublicKey)
		if err != nil || len(raw) != 32 {
			return fieldErr(field+".public_key", "is not a base64 X25519 public key (see `burrow key show` on that node)")
		}
		p.Key = new([32]byte)
		copy(p.Key[:], raw)
	}
	return nil
}

func (s *Services) validate() error {
	s.ARPOn = s.ARPAnswer == nil || *s.ARPAnswer
	if s.DHCP.Enabled {
		s.DNS.Enabled = true
	}
	if s.Network == "" {
		if s.DHCP.Enabled || s.DNS.Enabled {
			return fieldErr("services.network", "is required for DHCP and DNS: the virtual IPv4 network, such as 10.99.0.0/24")
		}
	} else {
		p, err := netip.ParsePrefix(s.Network)
		if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
			return fieldErr("services.network", "%q is not an IPv4 network of at most /30 such as 10.99.0.0/24", s.Network)
		}
		s.Prefix = p.Masked()
	}
	inNet := func(field, a string) (netip.Addr, error) {
		addr, err := netip.ParseAddr(a)
		if err != nil || !s.Prefix.Contains(addr) {
			return addr, fieldErr(field, "%q is not an address in services.network %v", a, s.Prefix)
		}
		return addr, nil
	}
	var err error
	if d := &s.DHCP; d.Enabled {
		if d.Range != "" {
			first, last, ok := strings.Cut(d.Range, "-")
			if !ok {
				return fieldErr("services.dhcp.range", "%q is not first-last, such as 10.99.0.100-10.99.0.199", d.Range)
			}
			if d.First, err = inNet("services.dhcp.range", strings.TrimSpace(first)); err != nil {
				return err
			}
			if d.Last, err = inNet("services.dhcp.range", strings.TrimSpace(last)); err != nil {
				return err
			}
			if d.Last.Less(d.First) {
				return fieldErr("services.dhcp.range", "%q ends before it starts", d.Range)
			}
		}
		if d.Gateway != "" {
			if d.GatewayAddr, err = inNet("services.dhcp.gateway", d.Gateway); err != nil {
				return err
			}
		}
		for i, r := range d.Reserved {
			a, err := inNet(fmt.Sprintf("services.dhcp.reserved[%d]", i), r)
			if err != nil {
				return err
			}
			d.ReservedAddr = append(d.ReservedAddr, a)
		}
		if d.LeaseTime < 0 {
			return fieldErr("services.dhcp.lease_time", "must not be negative")
		}
	}
	if d := &s.DNS; d.Enabled {
		if d.Address == "" {
			d.Addr = s.Prefix.Addr().Next()
		} else if d.Addr, err = inNet("services.dns.address", d.Address); err != nil {
			return err
		}
		if d.Domain == "" {
			d.Domain = "burrow.internal"
		}
		for i, u := range d.Upstream {
			ap, err := netip.ParseAddrPort(u)
			if err != nil {
				if a, aerr := netip.ParseAddr(u); aerr == nil {
					ap, err = netip.AddrPortFrom(a, 53), nil
				}
			}
			if err != nil {
				return fieldErr(fmt.Sprintf("services.dns.upstream[%d]", i), "%q is not an address or address:port of a resolver", u)
			}
			d.UpstreamAddrs = append(d.UpstreamAddrs, ap)
		}
	}
	if sn := &s.Subnets; sn.Enabled {
		if len(sn.Families) == 0 {
			sn.Families = []string{"ipv4", "ipv6"}
		}
		for i, f := range sn.Families {
			if f != "ipv4" && f != "ipv6" {
				return fieldErr(fmt.Sprintf("services.subnets.families[%d]", i), "%q is not ipv4 or ipv6", f)
			}
		}
		if sn.MachineID == "" {
			sn.MachineID = "/etc/machine-id"
		}
		if sn.Bridge == "" {
			sn.Bridge = "bw-cni0"
		}
		if len(sn.Bridge) > 15 {
			return fieldErr("services.subnets.bridge", "%q is longer than an interface name may be (15)", sn.Bridge)
		}
	}
	return nil
}

func (o *Overlay) validate() error {
	for i, b := range o.Bootstrap {
		ap, err := netip.ParseAddrPort(b)
		if err != nil || ap.Port() == 0 {
			return fieldErr(fmt.Sprintf("overlay.bootstrap[%d]", i), "%q is not an address:port such as 203.0.113.7:51820", b)
		}
		o.BootstrapAddrs = append(o.BootstrapAddrs, ap)
	}
	for i, a := range o.Advertise {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || ap.Port() == 0 || ap.Addr().IsUnspecified() {
			return fieldErr(fmt.Sprintf("overlay.advertise[%d]", i), "%q is not a reachable address:port such as 203.0.113.7:51820", a)
		}
		o.AdvertiseAddrs = append(o.AdvertiseAddrs, ap)
	}
	if o.Successors < 0 || o.Successors > 8 {
		return fieldErr("overlay.successors", "%d is out of range 1..8 (0 = default 2)", o.Successors)
	}
	if o.LongDistance == "auto" {
		o.AutoK = true
	} else if k, err := strconv.Atoi(o.LongDistance); err != nil || k < 0 || k > 32 {
		return fieldErr("overlay.long_distance", "%q is not a number of links 0..32 or \"auto\"", o.LongDistance)
	} else {
		o.K = k
	}
	if o.MaxInbound < 0 || o.MaxLinks < 0 {
		return fieldErr("overlay.max_links", "limits must not be negative")
	}
	if o.Stabilize < 0 || o.Heal < 0 {
		return fieldErr("overlay.stabilize_every", "intervals must not be negative")
	}
	if o.OnDemand.Threshold < 0 || o.OnDemand.Window < 0 || o.OnDemand.Idle < 0 {
		return fieldErr("overlay.on_demand", "threshold, window and idle must not be negative")
	}
	return nil
}

func (l *Links) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"links.keepalive", l.Keepalive}, {"links.dead_after", l.DeadAfter}, {"links.rekey_after", l.RekeyAfter}, {"links.handshake_retry", l.HandshakeRetry}} {
		if d.v < 0 {
			return fieldErr(d.name, "must not be negative")
		}
	}
	if l.Keepalive > 0 && l.DeadAfter > 0 && l.DeadAfter < 2*l.Keepalive {
		return fieldErr("links.dead_after", "%v must be at least twice links.keepalive (%v), or live peers are declared dead", l.DeadAfter, l.Keepalive)
	}
	return nil
}

// privateV4 are the IPv4 networks that stay inside one site: RFC 1918 and
// link-local. Shared address space (100.64.0.0/10) is not among them: it
// spans a carrier's network.
var privateV4 = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("169.254.0.0/16"),
}

// IsPrivatePrefix reports whether every address of p is private: inside
// one of the RFC 1918 or link-local networks.
func IsPrivatePrefix(p netip.Prefix) bool {
	for _, r := range privateV4 {
		if p.Bits() >= r.Bits() && r.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

func (c *Config) validateFirewall() error {
	if c.Firewall == nil {
		return nil
	}
	if c.KernelPath.Enabled {
		return fieldErr("firewall", "cannot be combined with kernel_path.enabled: the kernel path carries frames past the firewall; turn one off")
	}
	return c.Firewall.validate()
}

func (c *Config) validateKernelPath() error {
	k := &c.KernelPath
	if k.Port < 1 || k.Port > 65535 {
		return fieldErr("kernel_path.port", "%d is out of range 1..65535", k.Port)
	}
	for i, t := range k.Trusted {
		field := fmt.Sprintf("kernel_path.trusted[%d]", i)
		p, err := netip.ParsePrefix(t)
		if err != nil {
			return fieldErr(field, "%q is not a prefix such as 10.0.0.0/8", t)
		}
		if !p.Addr().Is4() {
			return fieldErr(field, "%v is not IPv4: the kernel path carries frames over IPv4 underlays only", p)
		}
		p = p.Masked()
		if !IsPrivatePrefix(p) && !k.AllowPublic {
			return fieldErr(field, "%v is not a private network (10/8, 172.16/12, 192.168/16 or 169.254/16): "+
				"the kernel path sends frames unencrypted, so peers there would be reached in the clear across networks "+
				"nobody here controls; trust only prefixes inside one datacenter or cluster, or, if that is really meant, "+
				"say so with kernel_path.allow_public: true", p)
		}
		k.Prefixes = append(k.Prefixes, p)
	}
	if !k.Enabled {
		return nil
	}
	if k.Port == int(c.ListenAddr.Port()) {
		return fieldErr("kernel_path.port", "%d is also the port of listen; the kernel path needs a port of its own", k.Port)
	}
	if len(k.Prefixes) == 0 {
		return fieldErr("kernel_path.trusted", "is required with kernel_path.enabled: the underlay prefixes (one datacenter or cluster) "+
			"whose peers may be reached without encryption, such as [10.0.0.0/8]")
	}
	if !c.TAP.On {
		return fieldErr("kernel_path.enabled", "needs the TAP (tap.enabled: true): the kernel path carries the TAP's frames")
	}
	if c.TAP.MTU != 0 && c.TAP.MTU+KernelPathOverhead > c.UnderlayMTU {
		return fieldErr("kernel_path.enabled", "tap.mtu %d plus the kernel path's %d bytes exceeds underlay_mtu %d: lower tap.mtu, or leave it 0 to derive it",
			c.TAP.MTU, KernelPathOverhead, c.UnderlayMTU)
	}
	return nil
}

// validatePublish checks the publication files' names; their contents are
// checked, against the CA and this node's key, when the daemon loads them.
func (c *Config) validatePublish() error {
	seen := map[string]int{}
	for i, path := range c.Publish {
		field := fmt.Sprintf("publish[%d]", i)
		if strings.TrimSpace(path) == "" {
			return fieldErr(field, "is empty: give the path of a publication file made by `burrow publish sign`")
		}
		if j, dup := seen[path]; dup {
			return fieldErr(field, "%s is also publish[%d]; list each publication once", path, j)
		}
		if c.TAP.Enabled != nil && !*c.TAP.Enabled {
			return fieldErr(field, "a gateway reaches the published service through its TAP, and tap.enabled is false")
		}
		seen[path] = i
	}
	return nil
}
