package runtime

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"burrow/config"
	"burrow/dht"
	"burrow/ipam"
	"burrow/l2"
	"burrow/node"
	"burrow/runtime/containers"
	"burrow/vdns"
	"burrow/warrens"
)

// servicesConfig turns the config's services section into the core's.
func (d *Daemon) servicesConfig(cfg *config.Config) (node.ServicesConfig, error) {
	s := cfg.Services
	out := node.ServicesConfig{DHT: dht.Config{}, ARPAnswer: s.ARPOn, LocalDHCP: cfg.TAP.LocalDHCP}
	// Every node answers for the service address with the same MAC, so a
	// client keeps a valid ARP entry wherever it moves in the network.
	sum := sha256.Sum256([]byte("burrow services " + cfg.Network))
	serviceMAC := l2.MAC{0x02, sum[0], sum[1], sum[2], sum[3], sum[4]}
	if s.DNS.Enabled {
		out.DNS = &vdns.Config{Domain: s.DNS.Domain, Network: s.Prefix, Server: s.DNS.Addr, ServerMAC: serviceMAC, Forward: s.DNS.Forward}
		if s.DNS.Forward {
			upstream := s.DNS.UpstreamAddrs
			if len(upstream) == 0 {
				upstream = systemResolvers("/etc/resolv.conf")
			}
			if len(upstream) == 0 {
				return out, errors.New("services.dns.forward: no upstream resolver configured and none in /etc/resolv.conf")
			}
			out.ForwardDNS = func(req vdns.ForwardRequest) { go d.forwardDNS(upstream, req) }
		}
	}
	if s.DHCP.Enabled {
		lease := s.DHCP.LeaseTime
		if lease == 0 {
			lease = time.Hour
		}
		out.DHCP = &ipam.Config{Network: s.Prefix, RangeStart: s.DHCP.First, RangeEnd: s.DHCP.Last,
			Reserved: s.DHCP.ReservedAddr, Gateway: s.DHCP.GatewayAddr, DNS: s.DNS.Addr, Domain: s.DNS.Domain,
			LeaseTime: lease, ServerMAC: serviceMAC, ServerIP: s.DNS.Addr}
	}
	if s.Subnets.Enabled {
		raw, err := os.ReadFile(s.Subnets.MachineID)
		if err != nil {
			return out, fmt.Errorf("services.subnets.machine_id: %w", err)
		}
		id, err := warrens.ParseMachineID(raw)
		if err != nil {
			return out, fmt.Errorf("services.subnets.machine_id %s: %w", s.Subnets.MachineID, err)
		}
		for _, f := range s.Subnets.Families {
			family := warrens.IPv4
			if f == "ipv6" {
				family = warrens.IPv6
			}
			out.Subnets = append(out.Subnets, warrens.ClaimConfig{MachineID: id, Family: family})
		}
		out.OnSubnet = func(st warrens.Status) { go d.configureSubnet(st) }
	}
	return out, nil
}

// systemResolvers reads the nameservers of a resolv.conf.
func systemResolvers(path string) []netip.AddrPort {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.AddrPort
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil {
				out = append(out, netip.AddrPortFrom(a, 53))
			}
		}
	}
	return out
}

// forwardDNS asks the real resolvers a query outside the virtual domain
// and hands the first answer back to the core.
func (d *Daemon) forwardDNS(upstream []netip.AddrPort, req vdns.ForwardRequest) {
	for _, server := range upstream {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
		if err != nil {
			continue
		}
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		if _, err = conn.Write(req.Query); err == nil {
			var n int
			if n, err = conn.Read(buf); err == nil {
				conn.Close()
				d.call(func() { d.node.DNSAnswer(req.ID, buf[:n], time.Now()) })
				return
			}
		}
		conn.Close()
	}
}

// configureSubnet gives the container bridge the claimed subnet, routes
// the whole Warrens range over the TAP, and answers ARP on the TAP for
// this node's containers (proxy ARP), so that containers on different
// nodes reach each other through the virtual Ethernet without per-node
// routes.
func (d *Daemon) configureSubnet(st warrens.Status) {
	if st.State != warrens.Claimed || d.dev == nil {
		return
	}
	name := d.cfg.Services.Subnets.Bridge
	br, err := netlink.LinkByName(name)
	if err != nil {
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil && !os.IsExist(err) {
			d.log.Error("creating the container bridge", "bridge", name, "err", err)
			return
		}
		if br, err = netlink.LinkByName(name); err != nil {
			d.log.Error("finding the container bridge", "bridge", name, "err", err)
			return
		}
		d.subnetBridge = name
	}
	addr := netip.PrefixFrom(warrens.Bridge(st.Prefix), st.Prefix.Bits())
	if err := netlink.AddrReplace(br, &netlink.Addr{IPNet: prefixNet(addr)}); err != nil {
		d.log.Error("addressing the container bridge", "bridge", name, "err", err)
	}
	netlink.LinkSetUp(br)
	d.reattachContainers(br)
	tap, err := netlink.LinkByName(d.dev.Name())
	if err != nil {
		return
	}
	if err := netlink.RouteReplace(&netlink.Route{LinkIndex: tap.Attrs().Index, Dst: prefixNet(warrens.Range(st.Family)), Scope: netlink.SCOPE_LINK}); err != nil {
		d.log.Error("routing the container range over the TAP", "err", err)
	}
	family := "ipv4"
	if st.Prefix.Addr().Is6() {
		family = "ipv6"
	}
	knobs := []string{
		fmt.Sprintf("/proc/sys/net/%s/conf/%s/forwarding", family, d.dev.Name()),
		fmt.Sprintf("/proc/sys/net/%s/conf/%s/forwarding", family, name),
		fmt.Sprintf("/proc/sys/net/ipv4/conf/%s/proxy_arp", d.dev.Name()),
	}
	if family == "ipv6" {
		// Linux forwards IPv6 only with forwarding on for all interfaces;
		// the per-interface knob only makes one act as a router's.
		knobs = append(knobs, "/proc/sys/net/ipv6/conf/all/forwarding")
	}
	for _, knob := range knobs {
		os.WriteFile(knob, []byte("1"), 0o644)
	}
	d.log.Info("container subnet ready", "subnet", st.Prefix, "bridge", name, "bridge_address", addr)
}

// reattachContainers puts the host ends of the containers burrow-cni
// attached back on the bridge: a bridge this daemon made went away with
// its last run, and the containers with it.
func (d *Daemon) reattachContainers(br netlink.Link) {
	atts, err := containers.All(containers.DataDir(d.cfg.StateDir))
	if err != nil {
		d.log.Warn("containers not put back on the bridge", "err", err)
		return
	}
	for _, a := range atts {
		l, err := netlink.LinkByName(a.HostInterface)
		if err != nil || l.Attrs().MasterIndex == br.Attrs().Index {
			continue
		}
		if err := netlink.LinkSetMaster(l, br); err != nil {
			d.log.Warn("putting a container back on the bridge", "interface", a.HostInterface, "err", err)
		}
	}
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// syncContainerNames registers in the network's DNS the name of each
// container burrow-cni attached to this node, and gives up the names of
// containers gone: the plugin asks for it after each change, and the
// daemon does it as it starts.
func (d *Daemon) syncContainerNames() error {
	if !d.cfg.Services.DNS.Enabled {
		return nil
	}
	want, err := d.attachedContainerNames()
	if err != nil {
		return err
	}
	return d.call(func() { d.registerContainerNames(want, time.Now()) })
}

func (d *Daemon) attachedContainerNames() (map[string][]netip.Addr, error) {
	atts, err := containers.All(containers.DataDir(d.cfg.StateDir))
	if err != nil {
		return nil, fmt.Errorf("reading the containers' records: %w", err)
	}
	want := map[string][]netip.Addr{}
	for _, a := range atts {
		if a.Name != "" {
			want[a.Name] = append(want[a.Name], a.Addrs()...)
		}
	}
	return want, nil
}

// registerContainerNames runs on the core goroutine.
func (d *Daemon) registerContainerNames(want map[string][]netip.Addr, now time.Time) {
	for name, addrs := range want {
		if slices.Equal(d.containerNames[name], addrs) {
			continue
		}
		d.node.RegisterName(name, addrs, now, func(ok bool) {
			if !ok {
				d.log.Warn("a container's DNS name is taken by another node, or not a name", "name", name)
			}
		})
	}
	for name := range d.containerNames {
		if _, ok := want[name]; !ok {
			d.node.UnregisterName(name, now)
		}
	}
	d.containerNames = want
}

// removeSubnetBridge deletes the container bridge if this daemon made it.
func (d *Daemon) removeSubnetBridge() {
	if d.subnetBridge == "" {
		return
	}
	if l, err := netlink.LinkByName(d.subnetBridge); err == nil {
		netlink.LinkDel(l)
	}
}
