// Package kernelpath loads and attaches burrow's kernel path: eBPF programs
// that carry Ethernet frames between the TAP and trusted peers in plain
// IPv4/UDP on one port, without the daemon and without encryption (see
// bpf/kernelpath.c). The daemon decides which peers and MACs the kernel
// may serve and fills the maps; this package only moves them into the
// kernel and reads the counters back.
//
// The programs attach with TCX (Linux 6.6 or later): links that belong to
// the process, so they go away with it even when it is killed.
package kernelpath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Overhead is what the kernel path adds to a frame on the underlay: outer
// IPv4 and UDP headers, and the frame's own Ethernet header.
const Overhead = 20 + 8 + 14

// Options configures the programs; they are fixed once loaded.
type Options struct {
	// Port is the UDP port of the kernel path, on every node the same.
	Port uint16
	// TAP is the index of the TAP device: where decapsulated frames go.
	TAP int
	// UnderlayMTU bounds the outer packets; frames that would make bigger
	// ones (other than GSO frames, cut after encapsulation) stay with the
	// daemon.
	UnderlayMTU int
}

// Dest is where frames for one MAC go.
type Dest struct {
	Peer    netip.Addr // the peer's underlay address
	Source  netip.Addr // this node's address toward it
	Ifindex int        // the device the route to it leaves by
}

// Stats are the programs' counters, summed over CPUs. A GSO super-frame
// counts as one packet.
type Stats struct {
	TxPackets   uint64 `json:"tx_packets"`   // frames encapsulated at the TAP
	TxBytes     uint64 `json:"tx_bytes"`     // their bytes before encapsulation
	TxDaemon    uint64 `json:"tx_daemon"`    // frames to kernel-path MACs left to the daemon (not IP, too big)
	TxErrors    uint64 `json:"tx_errors"`    // frames the kernel could not encapsulate, left to the daemon
	RxPackets   uint64 `json:"rx_packets"`   // frames decapsulated into the TAP
	RxBytes     uint64 `json:"rx_bytes"`     // their bytes after decapsulation
	RxProbes    uint64 `json:"rx_probes"`    // probes answered
	RxUntrusted uint64 `json:"rx_untrusted"` // datagrams to the port from addresses not trusted, passed on
	RxErrors    uint64 `json:"rx_errors"`    // malformed datagrams from peers, dropped
}

// Path is the loaded programs and maps and their attachments. Its methods
// are not safe for concurrent use.
type Path struct {
	opts     Options
	objs     bpfObjects
	tap      link.Link
	underlay map[int]link.Link
}

// Load loads the programs and their maps into the kernel, attached to
// nothing yet.
func Load(opts Options) (*Path, error) {
	if opts.Port == 0 || opts.TAP <= 0 || opts.UnderlayMTU < 576 {
		return nil, fmt.Errorf("kernel path: bad options %+v", opts)
	}
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
	_ = rlimit.RemoveMemlock()
	spec, err := loadBpf()
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]any{
		bpfVarKpPort:       opts.Port,
		bpfVarKpTapIfindex: uint32(opts.TAP),
		bpfVarKpMaxOuter:   uint32(opts.UnderlayMTU),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("kernel path: setting %s: %w", name, err)
		}
	}
	p := &Path{opts: opts, underlay: map[int]link.Link{}}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the kernel path's eBPF programs: %w", explain(err))
	}
	return p, nil
}

// explain adds what to do to the errors of a kernel that cannot run the
// kernel path.
func explain(err error) error {
	switch {
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%w (the kernel path needs eBPF with TCX: Linux 6.6 or later)", err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w (the kernel path needs CAP_BPF and CAP_NET_ADMIN, or root, and the bpf() system call)", err)
	}
	return err
}

// AttachTAP attaches the sending program to the TAP's egress: frames the
// host sends into the TAP.
func (p *Path) AttachTAP() error {
	if p.tap != nil {
		return nil
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: p.opts.TAP, Program: p.objs.KpEgress, Attach: ebpf.AttachTCXEgress})
	if err != nil {
		return fmt.Errorf("attaching the kernel path to the TAP (TCX egress of ifindex %d): %w", p.opts.TAP, explain(err))
	}
	p.tap = l
	return nil
}

// AttachUnderlay attaches the receiving program to the ingress of an
// underlay device, unless it is there already. It goes first, before
// other TCX programs, and passes on everything not addressed to the
// kernel-path port.
func (p *Path) AttachUnderlay(ifindex int) error {
	if p.underlay[ifindex] != nil {
		return nil
	}
	l, err := link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: p.objs.KpIngress, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
	if err != nil {
		return fmt.Errorf("attaching the kernel path to ifindex %d (TCX ingress): %w", ifindex, explain(err))
	}
	p.underlay[ifindex] = l
	return nil
}

// Underlays lists the devices the receiving program is attached to.
func (p *Path) Underlays() []int {
	out := make([]int, 0, len(p.underlay))
	for i := range p.underlay {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Close detaches everything and unloads the programs and maps.
func (p *Path) Close() error {
	var errs []error
	if p.tap != nil {
		errs = append(errs, p.tap.Close())
		p.tap = nil
	}
	for i, l := range p.underlay {
		errs = append(errs, l.Close())
		delete(p.underlay, i)
	}
	errs = append(errs, p.objs.Close())
	return errors.Join(errs...)
}

// be32 is an IPv4 address as the programs keep it: in network byte order
// in memory.
func be32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.NativeEndian.Uint32(b[:])
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// SetPeer lets datagrams from addr to the kernel-path port in: frames are
// delivered, probes answered.
func (p *Path) SetPeer(addr netip.Addr) error {
	if !addr.Is4() {
		return fmt.Errorf("kernel path: %v is not an IPv4 address", addr)
	}
	return p.objs.KpPeers.Put(be32(addr), uint32(1))
}

// DeletePeer stops letting datagrams from addr in.
func (p *Path) DeletePeer(addr netip.Addr) error {
	err := p.objs.KpPeers.Delete(be32(addr))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// Peers lists the addresses let in.
func (p *Path) Peers() ([]netip.Addr, error) {
	var out []netip.Addr
	var k, v uint32
	it := p.objs.KpPeers.Iterate()
	for it.Next(&k, &v) {
		out = append(out, addrOf(k))
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, it.Err()
}

// SetMAC sends the frames for mac through the kernel path to d.
func (p *Path) SetMAC(mac [6]byte, d Dest) error {
	if !d.Peer.Is4() || !d.Source.Is4() || d.Ifindex <= 0 || d.Ifindex > math.MaxInt32 {
		return fmt.Errorf("kernel path: bad destination %+v", d)
	}
	return p.objs.KpMacs.Put(bpfMacKey{Addr: mac}, bpfDest{Daddr: be32(d.Peer), Saddr: be32(d.Source), Ifindex: uint32(d.Ifindex)})
}

// DeleteMAC leaves the frames for mac to the daemon again.
func (p *Path) DeleteMAC(mac [6]byte) error {
	err := p.objs.KpMacs.Delete(bpfMacKey{Addr: mac})
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// MACs lists the MACs the kernel path serves and where their frames go.
func (p *Path) MACs() (map[[6]byte]Dest, error) {
	out := map[[6]byte]Dest{}
	var k bpfMacKey
	var v bpfDest
	it := p.objs.KpMacs.Iterate()
	for it.Next(&k, &v) {
		out[k.Addr] = Dest{Peer: addrOf(v.Daddr), Source: addrOf(v.Saddr), Ifindex: int(v.Ifindex)}
	}
	return out, it.Err()
}

// Stats reads the counters.
func (p *Path) Stats() (Stats, error) { return readStats(p.objs.KpStats) }

func readStats(m *ebpf.Map) (Stats, error) {
	var perCPU []bpfStats
	if err := m.Lookup(uint32(0), &perCPU); err != nil {
		return Stats{}, err
	}
	var s Stats
	for _, c := range perCPU {
		s.TxPackets += c.TxPackets
		s.TxBytes += c.TxBytes
		s.TxDaemon += c.TxDaemon
		s.TxErrors += c.TxErrors
		s.RxPackets += c.RxPackets
		s.RxBytes += c.RxBytes
		s.RxProbes += c.RxProbes
		s.RxUntrusted += c.RxUntrusted
		s.RxErrors += c.RxErrors
	}
	return s, nil
}
