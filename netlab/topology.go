package netlab

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// NAT is the kind of router in front of a site.
type NAT int

const (
	// NoNAT routes the site's LAN, a public subnet from PublicLANRange,
	// without translation or filtering: its hosts are reachable from the
	// internet like cloud machines with public addresses.
	NoNAT NAT = iota
	// EndpointIndependent is a home router. MASQUERADE on wan keeps one
	// mapping per inside socket whatever the destination, so hole punching
	// works. NEW connections arriving on wan are dropped: those addressed to
	// the router itself (without this, a peer's punch packet that reaches
	// the router before the inside host's creates a clashing conntrack
	// entry and SNAT picks a new port) and those that would be forwarded
	// into the LAN.
	EndpointIndependent
	// Symmetric maps every new destination to a new random port
	// (MASQUERADE --random-fully, address-dependent mapping): direct hole
	// punching fails and a relay has to carry the traffic. Its firewall is
	// that of EndpointIndependent.
	Symmetric
	// UDPBlocked is a restrictive corporate firewall in front of an
	// EndpointIndependent NAT: of the LAN's traffic, only TCP to port 443
	// leaves the site; UDP, ICMP and every other port are dropped.
	UDPBlocked
)

// String returns the NAT kind's name.
func (n NAT) String() string {
	switch n {
	case NoNAT:
		return "no-nat"
	case EndpointIndependent:
		return "endpoint-independent"
	case Symmetric:
		return "symmetric"
	case UDPBlocked:
		return "udp-blocked"
	}
	return fmt.Sprintf("NAT(%d)", int(n))
}

// rules returns the router's iptables-restore input for the NAT kind.
func (n NAT) rules() string {
	masquerade := "-A POSTROUTING -o wan -j MASQUERADE\n"
	if n == Symmetric {
		masquerade = "-A POSTROUTING -o wan -j MASQUERADE --random-fully\n"
	}
	return "*nat\n" + masquerade + "COMMIT\n" + n.filter()
}

// filter returns the router's firewall as an iptables-restore (or
// ip6tables-restore) filter table: that of a home router, which lets
// nothing new in, and for UDPBlocked the corporate firewall's rules.
func (n NAT) filter() string {
	filter := "-A INPUT -i wan -m conntrack --ctstate NEW -j DROP\n" +
		"-A FORWARD -i wan -m conntrack --ctstate NEW -j DROP\n"
	if n == UDPBlocked {
		filter += "-A FORWARD -i lan -o wan -p tcp --dport 443 -j ACCEPT\n" +
			"-A FORWARD -i lan -o wan -j DROP\n"
	}
	return "*filter\n" + filter + "COMMIT\n"
}

// Host is a network namespace: an internet host, a site router or a host on
// a site's LAN.
type Host struct {
	// Name is the name given to AddHost or AddSite.
	Name string
	// Namespace is the network namespace's name, <prefix>-<Name>.
	Namespace string
	// Addr is the host's address: on the internet for internet hosts and
	// routers (a router's WAN address), on the LAN for site hosts.
	Addr netip.Addr
	// Addr6 is the host's global IPv6 address on the internet, once
	// AddIPv6 gave it one.
	Addr6 netip.Addr

	lab *Lab
	// inetIf is the host's interface on the internet bridge, if it has one.
	inetIf string
}

// Site is a LAN behind a router.
type Site struct {
	// Name is the name given to AddSite, also the router's name.
	Name string
	NAT  NAT
	// Router is the router's namespace; its Addr is WAN.
	Router *Host
	// WAN is the router's address on the internet.
	WAN netip.Addr
	// LAN is the site's subnet and Gateway the router's address in it.
	LAN     netip.Prefix
	Gateway netip.Addr
	// LAN6 is the site's routed IPv6 subnet and Gateway6 the router's
	// address in it, once AddIPv6 gave the site IPv6.
	LAN6     netip.Prefix
	Gateway6 netip.Addr

	lab       *Lab
	hostCount int
}

// buildInternet creates the namespace holding the internet bridge.
func (l *Lab) buildInternet() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.createNamespace(l.inetNS, false); err != nil {
		return err
	}
	if err := runIP("-n", l.inetNS, "link", "add", l.bridge, "type", "bridge"); err != nil {
		return err
	}
	return runIP("-n", l.inetNS, "link", "set", l.bridge, "up")
}

// AddHost adds a host on the internet with an address from InternetRange.
func (l *Lab) AddHost(name string) (*Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns, err := l.reserveName(name)
	if err != nil {
		return nil, err
	}
	addr, err := l.nextInternetAddr()
	if err != nil {
		return nil, err
	}
	h := &Host{Name: name, Namespace: ns, Addr: addr, lab: l}
	if err := l.createNamespace(ns, false); err != nil {
		return nil, err
	}
	if err := l.attachToInternet(h, "eth0"); err != nil {
		return nil, err
	}
	return h, nil
}

// AddSandbox adds a namespace with nothing but loopback up, as a
// container runtime makes one for its network plugins to configure.
func (l *Lab) AddSandbox(name string) (*Host, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ns, err := l.reserveName(name)
	if err != nil {
		return nil, err
	}
	h := &Host{Name: name, Namespace: ns, lab: l}
	return h, l.createNamespace(ns, false)
}

// NetnsPath is the host's namespace as a file, what container runtimes
// hand their network plugins.
func (h *Host) NetnsPath() string { return filepath.Join("/var/run/netns", h.Namespace) }

// AddSite adds a site: a router named name with a WAN leg on the internet, a
// LAN bridge, forwarding on and the NAT and firewall rules of its kind.
func (l *Lab) AddSite(name string, nat NAT) (*Site, error) {
	if nat < NoNAT || nat > UDPBlocked {
		return nil, fmt.Errorf("netlab: unknown NAT kind %d", int(nat))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ns, err := l.reserveName(name)
	if err != nil {
		return nil, err
	}
	if l.siteCount == 255 {
		return nil, errors.New("netlab: a lab holds at most 255 sites")
	}
	l.siteCount++
	lanRange := PrivateLANRange
	if nat == NoNAT {
		lanRange = PublicLANRange
	}
	lan := netip.PrefixFrom(nthAddr(lanRange, l.siteCount<<8), 24)
	wan, err := l.nextInternetAddr()
	if err != nil {
		return nil, err
	}
	s := &Site{
		Name:    name,
		NAT:     nat,
		Router:  &Host{Name: name, Namespace: ns, Addr: wan, lab: l},
		WAN:     wan,
		LAN:     lan,
		Gateway: nthAddr(lan, 1),
		lab:     l,
	}
	if err := l.createNamespace(ns, true); err != nil {
		return nil, err
	}
	if err := l.attachToInternet(s.Router, "wan"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"link", "add", "lan", "type", "bridge"},
		{"addr", "add", netip.PrefixFrom(s.Gateway, lan.Bits()).String(), "dev", "lan"},
		{"link", "set", "lan", "up"},
	} {
		if err := runIP(append([]string{"-n", ns}, args...)...); err != nil {
			return nil, err
		}
	}
	if nat == NoNAT {
		for _, h := range l.attached {
			if h != s.Router {
				if err := runIP("-n", h.Namespace, "route", "add", lan.String(), "via", wan.String()); err != nil {
					return nil, err
				}
			}
		}
		l.publicLANs = append(l.publicLANs, s)
	} else if err := runTool(nat.rules(), "ip", "netns", "exec", ns, "iptables-restore", "-w"); err != nil {
		return nil, err
	}
	return s, nil
}

// AddHost adds a host on the site's LAN with the router as default gateway.
func (s *Site) AddHost(name string) (*Host, error) {
	l := s.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	ns, err := l.reserveName(name)
	if err != nil {
		return nil, err
	}
	// .1 is the gateway and .255 the broadcast address.
	if s.hostCount == 253 {
		return nil, fmt.Errorf("netlab: site %s is full", s.Name)
	}
	s.hostCount++
	h := &Host{Name: name, Namespace: ns, Addr: nthAddr(s.LAN, 1+s.hostCount), lab: l}
	if err := l.createNamespace(ns, false); err != nil {
		return nil, err
	}
	port := l.nextPortName()
	steps := [][]string{
		{"-n", s.Router.Namespace, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", s.Router.Namespace, "link", "set", port, "master", "lan", "up"},
		{"-n", ns, "addr", "add", netip.PrefixFrom(h.Addr, s.LAN.Bits()).String(), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", s.Gateway.String()},
	}
	if s.LAN6.IsValid() {
		h.Addr6 = nthAddr6(s.LAN6, 1+s.hostCount)
		steps = append(steps,
			[]string{"-n", ns, "-6", "addr", "add", netip.PrefixFrom(h.Addr6, s.LAN6.Bits()).String(), "dev", "eth0", "nodad"},
			[]string{"-n", ns, "-6", "route", "add", "default", "via", s.Gateway6.String()})
	}
	for _, args := range steps {
		if err := runIP(args...); err != nil {
			return nil, err
		}
	}
	if err := waitLinksReady(s.Router.Namespace, port, "lan"); err != nil {
		return nil, err
	}
	if err := waitLinksReady(ns, "eth0"); err != nil {
		return nil, err
	}
	return h, nil
}

// FlushConntrack empties the router's connection tracking table, dropping
// every NAT mapping: the next packet of each flow gets a fresh one, as when
// a real router reboots or expires its mappings.
func (s *Site) FlushConntrack() error {
	_, err := s.Router.Run(context.Background(), "conntrack", "-F")
	return err
}

// nextInternetAddr hands out the next address of InternetRange; the caller
// holds l.mu.
func (l *Lab) nextInternetAddr() (netip.Addr, error) {
	if l.hostCount == 1<<(32-InternetRange.Bits())-2 {
		return netip.Addr{}, errors.New("netlab: the internet range is full")
	}
	l.hostCount++
	return nthAddr(InternetRange, l.hostCount), nil
}

// attachToInternet gives h an interface ifname on the internet bridge with
// h.Addr, an on-link default route and routes to the NoNAT sites' LANs; the
// caller holds l.mu.
func (l *Lab) attachToInternet(h *Host, ifname string) error {
	port := l.nextPortName()
	steps := [][]string{
		{"-n", l.inetNS, "link", "add", port, "type", "veth", "peer", "name", ifname, "netns", h.Namespace},
		{"-n", l.inetNS, "link", "set", port, "master", l.bridge, "up"},
		{"-n", h.Namespace, "addr", "add", netip.PrefixFrom(h.Addr, InternetRange.Bits()).String(), "dev", ifname},
		{"-n", h.Namespace, "link", "set", ifname, "up"},
		{"-n", h.Namespace, "route", "add", "default", "dev", ifname},
	}
	for _, s := range l.publicLANs {
		steps = append(steps, []string{"-n", h.Namespace, "route", "add", s.LAN.String(), "via", s.WAN.String()})
	}
	for _, args := range steps {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	if err := waitLinksReady(l.inetNS, port); err != nil {
		return err
	}
	if err := waitLinksReady(h.Namespace, ifname); err != nil {
		return err
	}
	l.attached = append(l.attached, h)
	h.inetIf = ifname
	return nil
}

// AddIPv6 gives an internet host a global IPv6 address from InternetRange6
// beside its IPv4 one, an IPv6 default route and routes to the sites with
// IPv6: dual stack, as a cloud machine has. Hosts without it keep IPv4
// alone (and only the link-local IPv6 address the kernel gives every
// interface).
func (h *Host) AddIPv6() error {
	l := h.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	return h.addIPv6()
}

// addIPv6 is AddIPv6; the caller holds l.mu.
func (h *Host) addIPv6() error {
	l := h.lab
	if h.inetIf == "" {
		return fmt.Errorf("netlab: %s is not on the internet", h.Name)
	}
	if h.Addr6.IsValid() {
		return nil
	}
	l.host6Count++
	addr := nthAddr6(InternetRange6, l.host6Count)
	for _, args := range [][]string{
		// nodad: the address is usable at once, not after duplicate detection.
		{"-n", h.Namespace, "-6", "addr", "add", netip.PrefixFrom(addr, InternetRange6.Bits()).String(), "dev", h.inetIf, "nodad"},
		{"-n", h.Namespace, "-6", "route", "add", "default", "dev", h.inetIf},
	} {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	for _, s := range l.sites6 {
		if err := runIP("-n", h.Namespace, "-6", "route", "add", s.LAN6.String(), "via", s.Router.Addr6.String()); err != nil {
			return err
		}
	}
	h.Addr6 = addr
	return nil
}

// AddIPv6 gives the site IPv6 the way ISPs do: the router gets a global
// address on the internet and routes a /64 of SiteRange6 to the LAN, with
// no translation (no NAT66); hosts added to the site afterwards get an
// address in it. The router's firewall is its IPv4 one (a home router lets
// nothing new in from the internet, for IPv6 too), so two hosts behind
// such routers reach each other only by both sending first — which
// burrow's nodes do, each told of the other over the overlay.
func (s *Site) AddIPv6() error {
	l := s.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.hostCount > 0 {
		return fmt.Errorf("netlab: give site %s IPv6 before adding hosts", s.Name)
	}
	if s.LAN6.IsValid() {
		return nil
	}
	if err := s.Router.addIPv6(); err != nil {
		return err
	}
	base, n := SiteRange6.Addr().As16(), len(l.sites6)+1
	base[6], base[7] = byte(n>>8), byte(n)
	s.LAN6 = netip.PrefixFrom(netip.AddrFrom16(base), 64)
	s.Gateway6 = nthAddr6(s.LAN6, 1)
	ns := s.Router.Namespace
	if err := inNamespace(ns, func() error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0)
	}); err != nil {
		return fmt.Errorf("netlab: IPv6 forwarding in %s: %w", ns, err)
	}
	if err := runIP("-n", ns, "-6", "addr", "add", netip.PrefixFrom(s.Gateway6, 64).String(), "dev", "lan", "nodad"); err != nil {
		return err
	}
	if s.NAT != NoNAT {
		if err := runTool(s.NAT.filter(), "ip", "netns", "exec", ns, "ip6tables-restore", "-w"); err != nil {
			return err
		}
	}
	for _, h := range l.attached {
		if h != s.Router && h.Addr6.IsValid() {
			if err := runIP("-n", h.Namespace, "-6", "route", "add", s.LAN6.String(), "via", s.Router.Addr6.String()); err != nil {
				return err
			}
		}
	}
	l.sites6 = append(l.sites6, s)
	return nil
}

// nthAddr6 returns the IPv6 address n places after the start of p.
func nthAddr6(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr().As16()
	binary.BigEndian.PutUint64(a[8:], binary.BigEndian.Uint64(a[8:])+uint64(n))
	return netip.AddrFrom16(a)
}

// nthAddr returns the IPv4 address n places after the start of p.
func nthAddr(p netip.Prefix, n int) netip.Addr {
	base := p.Masked().Addr().As4()
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(base[:])+uint32(n))
	return netip.AddrFrom4(out)
}

// AddContainer adds a namespace plugged into a bridge inside the host's
// namespace (the bridge must exist, e.g. one a daemon created), like a
// container on a node: eth0 with no address — the test gives it one, or a
// DHCP client does.
func (h *Host) AddContainer(name, bridge string) (*Host, error) {
	l := h.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	ns, err := l.reserveName(name)
	if err != nil {
		return nil, err
	}
	c := &Host{Name: name, Namespace: ns, lab: l}
	if err := l.createNamespace(ns, false); err != nil {
		return nil, err
	}
	port := l.nextPortName()
	for _, args := range [][]string{
		{"-n", h.Namespace, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", h.Namespace, "link", "set", port, "master", bridge, "up"},
		{"-n", ns, "link", "set", "eth0", "up"},
	} {
		if err := runIP(args...); err != nil {
			return nil, err
		}
	}
	if err := waitLinksReady(h.Namespace, port); err != nil {
		return nil, err
	}
	return c, waitLinksReady(ns, "eth0")
}

// MoveContainer unplugs container c (made by AddContainer) from the host
// it sits on and plugs it into bridge on host to, keeping its eth0's MAC,
// as a machine carried to another LAN: eth0 comes back up with no
// address, and c is a host of to from then on.
func (c *Host) MoveContainer(to *Host, bridge string) error {
	l := c.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	out, err := exec.Command("ip", "-n", c.Namespace, "-o", "link", "show", "dev", "eth0").CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: %s's eth0: %v: %s", c.Name, err, out)
	}
	mac := linkMAC.FindSubmatch(out)
	if mac == nil {
		return fmt.Errorf("netlab: no MAC in %q", out)
	}
	port := l.nextPortName()
	for _, args := range [][]string{
		{"-n", c.Namespace, "link", "del", "eth0"},
		{"-n", to.Namespace, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", c.Namespace},
		{"-n", c.Namespace, "link", "set", "eth0", "address", string(mac[1])},
		{"-n", to.Namespace, "link", "set", port, "master", bridge, "up"},
		{"-n", c.Namespace, "link", "set", "eth0", "up"},
	} {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	if err := waitLinksReady(to.Namespace, port); err != nil {
		return err
	}
	return waitLinksReady(c.Namespace, "eth0")
}

// linkMAC finds the MAC in a line of ip -o link show.
var linkMAC = regexp.MustCompile(`link/ether ([0-9a-f:]{17})`)
