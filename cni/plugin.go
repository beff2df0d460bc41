package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/allocator"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
	"github.com/vishvananda/netlink"

	"burrow/runtime"
	"burrow/runtime/containers"
	"burrow/warrens"
)

// errPluginNotAvailable is the CNI 1.1 STATUS code for a plugin that
// cannot add containers now.
const errPluginNotAvailable = 50

// Main runs the plugin: the runtime's command is in CNI_COMMAND, the
// network configuration on standard input.
func Main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: add, Del: del, Check: check, Status: status, GC: gc},
		version.All, "burrow-cni: puts containers on burrow's virtual Ethernet, in this node's own subnets")
}

// node is what the plugin needs of the node's daemon.
type node struct {
	bridge  string
	mtu     int
	subnets []netip.Prefix // claimed, one per family
	dns     types.DNS
}

// askNode asks the daemon for its container bridge and subnets; the error
// says what to do when there are none yet.
func askNode(conf *NetConf) (node, error) {
	resp, err := runtime.Query(conf.Socket, runtime.Request{Command: "status"})
	if err == nil && resp.Error != "" {
		err = errors.New(resp.Error)
	}
	if err != nil {
		return node{}, types.NewError(types.ErrTryAgainLater, "burrow-cni: "+err.Error(), "")
	}
	st := resp.Status
	n := node{mtu: st.TAP.MTU}
	var waiting []string
	if st.TAP.Name == "" {
		return n, types.NewError(types.ErrInvalidNetworkConfig, "burrow-cni: the burrow node at "+conf.Socket+" runs without a TAP device, so its subnets are routed nowhere", "")
	}
	for _, s := range st.Services.Subnets {
		if s.State != "claimed" {
			waiting = append(waiting, s.Family+" "+s.State)
			continue
		}
		n.bridge = s.Bridge
		n.subnets = append(n.subnets, s.Prefix)
	}
	if r := st.Resolver; r != nil {
		n.dns = types.DNS{Nameservers: []string{r.Address}, Domain: r.Domain, Search: []string{r.Domain}}
	}
	switch {
	case len(st.Services.Subnets) == 0:
		return n, types.NewError(types.ErrInvalidNetworkConfig,
			"burrow-cni: the burrow node at "+conf.Socket+" has no container subnets: set services.subnets.enabled: true in its configuration", "")
	case len(n.subnets) == 0:
		return n, types.NewError(types.ErrTryAgainLater, fmt.Sprintf("burrow-cni: the node's container subnets are not claimed yet (%v)", waiting), "")
	}
	return n, nil
}

// hostVethName is the host end of a container's veth: the same for the
// same container and interface, so DEL finds it without any record.
func hostVethName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return "bw" + hex.EncodeToString(sum[:6])
}

// openStore opens the host-local allocator's reservations, locked while
// open. There is one store for every network a node serves, as their
// addresses all come from the node's subnets.
func openStore(conf *NetConf) (*disk.Store, error) {
	s, err := disk.New("addresses", conf.DataDir)
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, "burrow-cni: "+err.Error(), "")
	}
	if err := s.Lock(); err != nil {
		s.Close()
		return nil, types.NewError(types.ErrIOFailure, "burrow-cni: locking the address store: "+err.Error(), "")
	}
	return s, nil
}

func closeStore(s *disk.Store) {
	s.Unlock()
	s.Close()
}

// locked decodes the network configuration and runs f with the address
// store locked.
func locked(args *skel.CmdArgs, f func(*NetConf, *disk.Store) error) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	store, err := openStore(conf)
	if err != nil {
		return err
	}
	defer closeStore(store)
	return f(conf, store)
}

func add(args *skel.CmdArgs) error {
	return locked(args, func(conf *NetConf, store *disk.Store) error {
		n, err := askNode(conf)
		if err != nil {
			return err
		}
		netns, err := ns.GetNS(args.Netns)
		if err != nil {
			return types.NewError(types.ErrInvalidNetNS, "burrow-cni: "+err.Error(), "")
		}
		defer netns.Close()
		if _, ok, _ := containers.Read(conf.DataDir, conf.Name, args.ContainerID, args.IfName); ok {
			return types.NewError(types.ErrInternal, fmt.Sprintf("burrow-cni: container %s already has interface %s on network %s", args.ContainerID, args.IfName, conf.Name), "")
		}
		att := containers.Attachment{ContainerID: args.ContainerID, IfName: args.IfName, Name: containerName(args.Args),
			HostInterface: hostVethName(args.ContainerID, args.IfName)}
		res, err := configure(conf, n, netns, store, &att, args)
		if err != nil {
			if err := undo(conf, store, att); err != nil {
				fmt.Fprintln(os.Stderr, "burrow-cni: cleaning up after a failed ADD:", err)
			}
			return err
		}
		notifyNode(conf)
		return types.PrintResult(res, conf.CNIVersion)
	})
}

// configure reserves the container's addresses, records the attachment
// and then builds it; add undoes all of it on an error.
func configure(conf *NetConf, n node, netns ns.NetNS, store *disk.Store, att *containers.Attachment, args *skel.CmdArgs) (*current.Result, error) {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, DNS: n.dns}
	for i, subnet := range n.subnets {
		first, last := warrens.Containers(subnet)
		if last == broadcast(subnet) {
			last = last.Prev() // an IPv4 subnet's broadcast address is no host's
		}
		rs := allocator.RangeSet{{Subnet: types.IPNet(*prefixNet(subnet)), RangeStart: first.AsSlice(),
			RangeEnd: last.AsSlice(), Gateway: warrens.Bridge(subnet).AsSlice()}}
		if err := rs.Canonicalize(); err != nil {
			return nil, types.NewError(types.ErrInternal, "burrow-cni: the node's subnet "+subnet.String()+": "+err.Error(), "")
		}
		ipc, err := allocator.NewIPAllocator(&rs, store, i).Get(args.ContainerID, args.IfName, nil)
		if err != nil {
			return nil, types.NewError(types.ErrInternal, fmt.Sprintf("burrow-cni: no address left in the node's subnet %s: %v", subnet, err), "")
		}
		container := 1 // the container's interface, after the host's
		ipc.Interface = &container
		res.IPs = append(res.IPs, ipc)
		a, _ := netip.AddrFromSlice(ipc.Address.IP)
		bits, _ := ipc.Address.Mask.Size()
		att.Addresses = append(att.Addresses, netip.PrefixFrom(a.Unmap(), bits))
		def := net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if subnet.Addr().Is6() {
			def = net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
		}
		res.Routes = append(res.Routes, &types.Route{Dst: def, GW: ipc.Gateway})
	}
	if err := containers.Write(conf.DataDir, conf.Name, *att); err != nil {
		return nil, types.NewError(types.ErrIOFailure, "burrow-cni: recording the attachment: "+err.Error(), "")
	}

	bridge, err := netlink.LinkByName(n.bridge)
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, fmt.Sprintf("burrow-cni: the node's container bridge %s: %v", n.bridge, err), "")
	}
	var hostIf, contIf net.Interface
	err = netns.Do(func(hostNS ns.NetNS) error {
		hostIf, contIf, err = ip.SetupVethWithName(args.IfName, att.HostInterface, n.mtu, "", hostNS)
		return err
	})
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "burrow-cni: creating the container's veth: "+err.Error(), "")
	}
	host, err := netlink.LinkByName(hostIf.Name)
	if err == nil {
		err = netlink.LinkSetMaster(host, bridge)
	}
	if err != nil {
		return nil, types.NewError(types.ErrInternal, fmt.Sprintf("burrow-cni: attaching %s to the bridge %s: %v", hostIf.Name, n.bridge, err), "")
	}
	res.Interfaces = []*current.Interface{
		{Name: hostIf.Name, Mac: hostIf.HardwareAddr.String(), Mtu: hostIf.MTU},
		{Name: contIf.Name, Mac: contIf.HardwareAddr.String(), Mtu: contIf.MTU, Sandbox: args.Netns},
	}
	if err := netns.Do(func(ns.NetNS) error { return ipam.ConfigureIface(args.IfName, res) }); err != nil {
		return nil, types.NewError(types.ErrInternal, "burrow-cni: addressing the container's interface: "+err.Error(), "")
	}
	return res, nil
}

// undo removes whatever add made of an attachment: its veth (deleting
// the host's end deletes the container's), its address reservations and
// its record. It never touches the container's namespace, where an
// interface of the same name may belong to another plugin.
func undo(conf *NetConf, store *disk.Store, att containers.Attachment) error {
	var errs []error
	if l, err := netlink.LinkByName(att.HostInterface); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("deleting %s: %w", att.HostInterface, err))
		}
	}
	if err := store.ReleaseByID(att.ContainerID, att.IfName); err != nil {
		errs = append(errs, fmt.Errorf("releasing the container's addresses: %w", err))
	}
	if err := containers.Remove(conf.DataDir, conf.Name, att.ContainerID, att.IfName); err != nil {
		errs = append(errs, fmt.Errorf("removing the attachment record: %w", err))
	}
	return errors.Join(errs...)
}

// notifyNode tells the daemon the attachments changed, so that it
// registers or drops container names; a daemon that is down reads them
// when it starts.
func notifyNode(conf *NetConf) {
	if resp, err := runtime.Query(conf.Socket, runtime.Request{Command: "containers-changed"}); err != nil || resp.Error != "" {
		fmt.Fprintf(os.Stderr, "burrow-cni: container names not updated: the node did not answer (%v); it reads them when it starts\n", errors.Join(err, respError(resp)))
	}
}

func respError(resp *runtime.Response) error {
	if resp == nil || resp.Error == "" {
		return nil
	}
	return errors.New(resp.Error)
}

// del removes an attachment: it succeeds when there is nothing left to
// remove, as the spec asks, and does not need the daemon.
func del(args *skel.CmdArgs) error {
	return locked(args, func(conf *NetConf, store *disk.Store) error {
		att := containers.Attachment{ContainerID: args.ContainerID, IfName: args.IfName, HostInterface: hostVethName(args.ContainerID, args.IfName)}
		if err := undo(conf, store, att); err != nil {
			return types.NewError(types.ErrIOFailure, "burrow-cni: "+err.Error(), "")
		}
		notifyNode(conf)
		return nil
	})
}

// check verifies that an attachment is as add left it: its record, the
// host's end on the bridge, the container's interface with its addresses
// and default routes, and the node still holding the subnets.
func check(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	att, ok, err := containers.Read(conf.DataDir, conf.Name, args.ContainerID, args.IfName)
	if err != nil {
		return types.NewError(types.ErrIOFailure, "burrow-cni: "+err.Error(), "")
	}
	if !ok {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("burrow-cni: container %s has no interface %s on network %s", args.ContainerID, args.IfName, conf.Name), "")
	}
	n, err := askNode(conf)
	if err != nil {
		return err
	}
	for _, a := range att.Addresses {
		if !slices.ContainsFunc(n.subnets, func(s netip.Prefix) bool { return s.Contains(a.Addr()) }) {
			return checkErr("the container's address %v is outside the node's subnets %v", a, n.subnets)
		}
	}
	host, err := netlink.LinkByName(att.HostInterface)
	if err != nil {
		return checkErr("the host's end %s: %v", att.HostInterface, err)
	}
	if br, err := netlink.LinkByName(n.bridge); err != nil || host.Attrs().MasterIndex != br.Attrs().Index {
		return checkErr("%s is not on the bridge %s", att.HostInterface, n.bridge)
	}
	return ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		link, err := netlink.LinkByName(args.IfName)
		if err != nil {
			return checkErr("the container's interface %s: %v", args.IfName, err)
		}
		for _, a := range att.Addresses {
			if !hasAddress(link, a) {
				return checkErr("%s lacks its address %v", args.IfName, a)
			}
			if !hasDefaultRoute(link, a) {
				return checkErr("%s has no default route through the bridge for %v", args.IfName, a)
			}
		}
		return nil
	})
}

func checkErr(format string, args ...any) error {
	return types.NewError(types.ErrInternal, "burrow-cni: check: "+fmt.Sprintf(format, args...), "")
}

func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func hasAddress(link netlink.Link, want netip.Prefix) bool {
	addrs, err := netlink.AddrList(link, family(want.Addr()))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(addrs, func(a netlink.Addr) bool {
		got, _ := netip.AddrFromSlice(a.IP)
		bits, _ := a.Mask.Size()
		return netip.PrefixFrom(got.Unmap(), bits) == want
	})
}

func hasDefaultRoute(link netlink.Link, addr netip.Prefix) bool {
	gw := warrens.Bridge(addr.Masked())
	routes, err := netlink.RouteList(link, family(addr.Addr()))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(routes, func(r netlink.Route) bool {
		got, _ := netip.AddrFromSlice(r.Gw)
		return (r.Dst == nil || r.Dst.IP.IsUnspecified()) && got.Unmap() == gw
	})
}

// status answers whether the plugin can add containers now.
func status(args *skel.CmdArgs) error {
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := askNode(conf); err != nil {
		var e *types.Error
		if errors.As(err, &e) {
			return types.NewError(errPluginNotAvailable, e.Msg, e.Details)
		}
		return err
	}
	return nil
}

// gc removes every attachment of the network that the runtime no longer
// lists as valid, with its veth and addresses.
func gc(args *skel.CmdArgs) error {
	return locked(args, func(conf *NetConf, store *disk.Store) error {
		atts, err := containers.OfNetwork(conf.DataDir, conf.Name)
		if err != nil {
			return types.NewError(types.ErrIOFailure, "burrow-cni: "+err.Error(), "")
		}
		var errs []error
		removed := false
		for _, att := range atts {
			if !slices.Contains(conf.ValidAttachments, types.GCAttachment{ContainerID: att.ContainerID, IfName: att.IfName}) {
				errs = append(errs, undo(conf, store, att))
				removed = true
			}
		}
		if removed {
			notifyNode(conf)
		}
		if err := errors.Join(errs...); err != nil {
			return types.NewError(types.ErrIOFailure, "burrow-cni: gc: "+err.Error(), "")
		}
		return nil
	})
}

// broadcast is an IPv4 subnet's broadcast address; IPv6 has none.
func broadcast(p netip.Prefix) netip.Addr {
	if !p.Addr().Is4() {
		return netip.Addr{}
	}
	a := p.Masked().Addr().As4()
	host := ^uint32(0) >> p.Bits()
	for i := range a {
		a[i] |= byte(host >> (24 - 8*i))
	}
	return netip.AddrFrom4(a)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
