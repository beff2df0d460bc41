//go:build linux

// Package tap creates the Linux TAP device that connects burrow's virtual
// Ethernet to the host: one file descriptor per queue, the virtio-net header
// in front of every packet so TCP and UDP super-frames (TSO/USO) cross
// user space unsegmented, and the link's MTU, MAC and addresses set with
// netlink. The package moves raw bytes and runs no goroutines; the caller
// reads and writes each Queue from its own loops.
package tap

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"burrow/l2"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Options describe the device Create makes.
type Options struct {
	// Name is the interface name; empty lets the kernel pick one (tapN).
	Name string
	// MTU of the link; 0 keeps the kernel default (1500).
	MTU int
	// MAC of the link; the zero MAC keeps the one the kernel assigned.
	MAC l2.MAC
	// Addresses are added to the link, each as host address with prefix length.
	Addresses []netip.Prefix
	// Queues is the number of queues (file descriptors); 0 means 1.
	Queues int
	// Offload turns on the virtio-net header and segmentation offloads.
	// Without it packets are plain Ethernet frames.
	Offload bool
}

// Offloads tells what the kernel accepted.
type Offloads struct {
	// VnetHdr: every packet starts with a VnetHdrLen-byte virtio_net_hdr.
	VnetHdr bool
	// TSO: the device takes and hands out TCP super-frames (and partial checksums).
	TSO bool
	// USO: the device takes and hands out UDP super-frames.
	USO bool
}

// Device is an open TAP device. It exists as long as it is open: Close
// removes it from the system together with its addresses.
type Device struct {
	name     string
	mtu      int
	mac      l2.MAC
	offloads Offloads
	queues   []*Queue
	nl       *netlink.Handle // bound to the namespace the device lives in
	link     netlink.Link

	closeOnce sync.Once
	closeErr  error
}

// Create opens a TAP device as opts describe and brings its link up. On
// failure nothing is left behind.
func Create(opts Options) (*Device, error) {
	if opts.Queues < 0 || opts.MTU < 0 {
		return nil, fmt.Errorf("tap: invalid options: %d queues, MTU %d", opts.Queues, opts.MTU)
	}
	d := &Device{}
	err := d.open(opts)
	if err == nil {
		err = d.configure(opts)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// open attaches every queue and negotiates the offloads.
func (d *Device) open(opts Options) error {
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if opts.Queues > 1 {
		flags |= unix.IFF_MULTI_QUEUE
	}
	if opts.Offload {
		flags |= unix.IFF_VNET_HDR
	}
	// IFF_TUN_EXCL makes the first open fail on a name already in use
	// instead of joining another device's queues.
	fd, name, err := openQueue(opts.Name, flags|unix.IFF_TUN_EXCL)
	if flags&unix.IFF_VNET_HDR != 0 && errors.Is(err, unix.EINVAL) {
		// A kernel without the virtio header refuses the flag: plain frames.
		flags &^= unix.IFF_VNET_HDR
		fd, name, err = openQueue(opts.Name, flags|unix.IFF_TUN_EXCL)
	}
	if err != nil {
		return err
	}
	d.name = name
	q, err := newQueue(fd, name)
	if err != nil {
		return err
	}
	d.queues = append(d.queues, q)
	if flags&unix.IFF_VNET_HDR != 0 {
		if err := setVnetHdrLen(fd); err != nil {
			return err
		}
		d.offloads = enableOffloads(fd)
	}
	for len(d.queues) < max(opts.Queues, 1) {
		fd, _, err := openQueue(name, flags)
		if err != nil {
			return err
		}
		q, err := newQueue(fd, name)
		if err != nil {
			return err
		}
		d.queues = append(d.queues, q)
	}
	return nil
}

// configure sets MTU, MAC and addresses through netlink and brings the link up.
func (d *Device) configure(opts Options) error {
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return describe("netlink", err)
	}
	d.nl = nl
	if d.link, err = nl.LinkByName(d.name); err != nil {
		return describe("find link "+d.name, err)
	}
	if opts.MTU != 0 {
		if err := nl.LinkSetMTU(d.link, opts.MTU); err != nil {
			return describe(fmt.Sprintf("set MTU %d on %s", opts.MTU, d.name), err)
		}
	}
	if opts.MAC != (l2.MAC{}) {
		if err := nl.LinkSetHardwareAddr(d.link, opts.MAC[:]); err != nil {
			return describe(fmt.Sprintf("set MAC %s on %s", opts.MAC, d.name), err)
		}
	}
	for _, p := range opts.Addresses {
		if err := d.AddAddress(p); err != nil {
			return err
		}
	}
	if err := nl.LinkSetUp(d.link); err != nil {
		return describe("bring up "+d.name, err)
	}
	if d.link, err = nl.LinkByIndex(d.link.Attrs().Index); err != nil {
		return describe("read back "+d.name, err)
	}
	d.mtu = d.link.Attrs().MTU
	copy(d.mac[:], d.link.Attrs().HardwareAddr)
	return nil
}

// Name is the interface name.
func (d *Device) Name() string { return d.name }

// MTU is the link MTU set at creation.
func (d *Device) MTU() int { return d.mtu }

// MAC is the link's hardware address.
func (d *Device) MAC() l2.MAC { return d.mac }

// Offloads tells the packet format and the offloads the kernel accepted.
func (d *Device) Offloads() Offloads { return d.offloads }

// NumQueues is the number of queues.
func (d *Device) NumQueues() int { return len(d.queues) }

// Queue returns queue i, 0 <= i < NumQueues().
func (d *Device) Queue(i int) *Queue { return d.queues[i] }

// AddAddress adds p (host address and prefix length) to the link.
func (d *Device) AddAddress(p netip.Prefix) error {
	return describe(fmt.Sprintf("add address %s to %s", p, d.name), d.nl.AddrAdd(d.link, netlinkAddr(p)))
}

// DelAddress removes p from the link.
func (d *Device) DelAddress(p netip.Prefix) error {
	return describe(fmt.Sprintf("delete address %s from %s", p, d.name), d.nl.AddrDel(d.link, netlinkAddr(p)))
}

// Close closes every queue, which removes the device and its addresses, and
// unblocks pending reads. Calling it again returns the first result.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		for _, q := range d.queues {
			errs = append(errs, q.file.Close())
		}
		if d.nl != nil {
			d.nl.Close()
		}
		d.closeErr = describe("close "+d.name, errors.Join(errs...))
	})
	return d.closeErr
}

// netlinkAddr keeps the host bits of p: 10.0.0.1/24 is address 10.0.0.1 on 10.0.0.0/24.
func netlinkAddr(p netip.Prefix) *netlink.Addr {
	addr := p.Addr()
	return &netlink.Addr{IPNet: &net.IPNet{
		IP:   addr.AsSlice(),
		Mask: net.CIDRMask(p.Bits(), addr.BitLen()),
	}}
}

// describe prefixes err with the step that failed and, when the kernel
// refused for lack of privilege, says what burrow needs. A nil err stays nil.
func describe(step string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return fmt.Errorf("tap: %s: %w (burrow needs root or CAP_NET_ADMIN)", step, err)
	default:
		return fmt.Errorf("tap: %s: %w", step, err)
	}
}
