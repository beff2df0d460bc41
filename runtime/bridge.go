package runtime

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// attachBridge puts the TAP on a Linux bridge — created when missing —
// and gives the bridge the node's addresses, so that hosts and containers
// on the bridge are on the virtual Ethernet too (and get DHCP from it).
func (d *Daemon) attachBridge(name string, mtu int, addrs []netip.Prefix) error {
	br, err := netlink.LinkByName(name)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU = name, mtu
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			return fmt.Errorf("tap.bridge: creating %s: %w", name, err)
		}
		d.tapBridge = name
		if br, err = netlink.LinkByName(name); err != nil {
			return fmt.Errorf("tap.bridge: %w", err)
		}
	}
	tap, err := netlink.LinkByName(d.dev.Name())
	if err != nil {
		return fmt.Errorf("tap.bridge: %w", err)
	}
	if err := netlink.LinkSetMaster(tap, br); err != nil {
		return fmt.Errorf("tap.bridge: attaching %s to %s: %w", d.dev.Name(), name, err)
	}
	for _, p := range addrs {
		if err := netlink.AddrReplace(br, &netlink.Addr{IPNet: prefixNet(p)}); err != nil {
			return fmt.Errorf("tap.bridge: address %v on %s: %w", p, name, err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("tap.bridge: %w", err)
	}
	return nil
}

// removeBridge deletes the TAP's bridge if this daemon created it.
func (d *Daemon) removeBridge() {
	if d.tapBridge == "" {
		return
	}
	if l, err := netlink.LinkByName(d.tapBridge); err == nil {
		netlink.LinkDel(l)
	}
}
