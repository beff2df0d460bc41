package runtime

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"burrow/config"
	"burrow/link"
	"burrow/nid"
	"burrow/node"
	"burrow/runtime/kernelpath"
)

// The kernel path (kernel_path.enabled): for peers whose direct endpoint
// lies in a trusted underlay prefix, frames leave and enter the TAP through
// eBPF programs in plain Ethernet-in-UDP, never reaching this process. The
// daemon keeps doing what only it can: it finds and authenticates the
// peers over its encrypted links, tells the kernel which addresses it may
// take frames from, probes that each peer's kernel takes this node's
// frames, and only then tells the kernel which MACs to send where. Every
// other frame — broadcasts, unknown MACs, peers outside the trusted
// prefixes, relayed links — takes the encrypted path as before.
//
// A peer's MAC here is the one its TAP gets by default, derived from its
// node ID (MACFor): hosts behind a peer's bridge, or a TAP with tap.mac
// set, keep the encrypted path.

const (
	// kernelPathEvery is how often the kernel path follows the links and
	// probes its peers.
	kernelPathEvery = time.Second
	// kernelPathExpiry is how long an answered probe vouches for a peer:
	// three probes lost in a row take its MACs back to the daemon.
	kernelPathExpiry = 3*kernelPathEvery + kernelPathEvery/2
)

// kernelPath is a daemon's kernel path while it runs.
type kernelPath struct {
	d       *Daemon
	log     *slog.Logger
	cfg     config.KernelPath
	path    *kernelpath.Path
	probe   *net.UDPConn
	source  netip.Addr     // listen's address when it names one, for the outer headers
	exclude map[int]string // the TAP and its bridges: never an underlay
	stop    chan struct{}  // closed by stopKernelPath
	wake    chan struct{}  // a peer answered its first probe
	wg      sync.WaitGroup // the loop and the probe reader
	peers   map[netip.Addr]bool
	macs    map[[6]byte]kernelpath.Dest
	up      map[nid.ID]netip.Addr // peers whose MACs the kernel serves, for the log
	skipped map[netip.Addr]string // why a trusted peer is left out, logged once

	mu       sync.Mutex
	asked    map[netip.Addr][2]uint64 // the last two nonces sent to each peer
	answered map[netip.Addr]time.Time // the last answer from each peer
}

// kernelPeer is a peer the kernel path may serve: its link is up and
// direct, at an endpoint in a trusted prefix.
type kernelPeer struct {
	id   nid.ID
	name string
	addr netip.Addr
}

// startKernelPath loads and attaches the kernel path when the
// configuration turns it on; it is undone by stopKernelPath.
func (d *Daemon) startKernelPath() error {
	kc := d.cfg.KernelPath
	if !kc.Enabled || d.dev == nil {
		return nil
	}
	tap, err := net.InterfaceByName(d.dev.Name())
	if err != nil {
		return fmt.Errorf("kernel_path: %w", err)
	}
	k := &kernelPath{
		d: d, log: d.log.With("component", "kernel_path"), cfg: kc,
		exclude: map[int]string{tap.Index: tap.Name},
		stop:    make(chan struct{}), wake: make(chan struct{}, 1),
		peers: map[netip.Addr]bool{}, macs: map[[6]byte]kernelpath.Dest{},
		up: map[nid.ID]netip.Addr{}, skipped: map[netip.Addr]string{},
		asked: map[netip.Addr][2]uint64{}, answered: map[netip.Addr]time.Time{},
	}
	bridges := []string{d.cfg.TAP.Bridge}
	if d.cfg.Services.Subnets.Enabled {
		bridges = append(bridges, d.cfg.Services.Subnets.Bridge)
	}
	for _, br := range bridges {
		if ifc, err := net.InterfaceByName(br); br != "" && err == nil {
			k.exclude[ifc.Index] = br
		}
	}
	if a := d.cfg.ListenAddr.Addr().Unmap(); a.Is4() && !a.IsUnspecified() {
		k.source = a
	}
	d.kp = k
	if k.path, err = kernelpath.Load(kernelpath.Options{Port: uint16(kc.Port), TAP: tap.Index, UnderlayMTU: d.cfg.UnderlayMTU}); err != nil {
		return fmt.Errorf("kernel_path.enabled: %w", err)
	}
	if err := k.path.AttachTAP(); err != nil {
		return fmt.Errorf("kernel_path.enabled: %w", err)
	}
	// The devices holding a trusted address take the peers' datagrams
	// from the start; devices that routes to peers name are added later.
	ifaces, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("kernel_path: %w", err)
	}
	for _, ifc := range ifaces {
		if k.exclude[ifc.Index] != "" || ifc.Flags&net.FlagLoopback != 0 || !k.holdsTrusted(ifc) {
			continue
		}
		if err := k.path.AttachUnderlay(ifc.Index); err != nil {
			return fmt.Errorf("kernel_path.enabled: %s: %w", ifc.Name, err)
		}
	}
	laddr := &net.UDPAddr{}
	if k.source.IsValid() {
		laddr.IP = k.source.AsSlice()
	}
	if k.probe, err = net.ListenUDP("udp4", laddr); err != nil {
		return fmt.Errorf("kernel_path: probe socket: %w", err)
	}
	k.log.Info("kernel path on: frames to peers in the trusted prefixes travel UNENCRYPTED, in the kernel",
		"port", kc.Port, "trusted", kc.Prefixes, "tap", tap.Name, "underlay", k.underlayNames())
	k.wg.Add(2)
	go k.readAnswers()
	go k.run()
	return nil
}

// stopKernelPath detaches and unloads the kernel path, if any. Frames to
// its peers go back to the encrypted path, or nowhere when the TAP is
// going too.
func (d *Daemon) stopKernelPath() {
	k := d.kp
	if k == nil {
		return
	}
	d.kp = nil
	close(k.stop)
	if k.probe != nil {
		k.probe.Close()
	}
	k.wg.Wait()
	if k.path != nil {
		if err := k.path.Close(); err != nil {
			k.log.Warn("detaching the kernel path", "err", err)
		} else {
			k.log.Info("kernel path off")
		}
	}
}

func (k *kernelPath) holdsTrusted(ifc net.Interface) bool {
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && k.trusted(p.Addr()) {
			return true
		}
	}
	return false
}

func (k *kernelPath) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range k.cfg.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (k *kernelPath) underlayNames() []string {
	var names []string
	for _, i := range k.path.Underlays() {
		if ifc, err := net.InterfaceByIndex(i); err == nil {
			names = append(names, ifc.Name)
		}
	}
	return names
}

// onCore runs f on the core goroutine, unless the kernel path or the
// daemon stops first.
func (k *kernelPath) onCore(f func()) bool {
	finished := make(chan struct{})
	select {
	case k.d.calls <- func() { f(); close(finished) }:
	case <-k.stop:
		return false
	case <-k.d.done:
		return false
	}
	<-finished
	return true
}

func (k *kernelPath) run() {
	defer k.wg.Done()
	tick := time.NewTicker(kernelPathEvery)
	defer tick.Stop()
	for {
		var peers []kernelPeer
		if !k.onCore(func() { peers = k.candidates() }) {
			return
		}
		k.sync(peers, time.Now())
		select {
		case <-k.stop:
			return
		case <-tick.C:
		case <-k.wake:
		}
	}
}

// candidates lists the peers whose links are up and direct, at endpoints
// in a trusted prefix. It runs on the core goroutine.
func (k *kernelPath) candidates() []kernelPeer {
	var out []kernelPeer
	for _, l := range k.d.node.Links().Links() {
		if !l.Up() {
			continue
		}
		ep := l.Endpoint()
		if ep.Via != link.UDP || ep.IsRelay() {
			continue
		}
		if a := ep.Addr.Addr().Unmap(); a.Is4() && k.trusted(a) {
			out = append(out, kernelPeer{id: l.Peer.ID, name: l.Peer.Name, addr: a})
		}
	}
	return out
}

// sync brings the kernel's maps in line with the peers: their addresses
// let in, probes sent, and the MACs of those that answered sent their way.
func (k *kernelPath) sync(peers []kernelPeer, now time.Time) {
	type route struct {
		dest kernelpath.Dest
		ok   bool
	}
	routes := map[netip.Addr]route{}
	want := map[netip.Addr]bool{}
	for _, p := range peers {
		if _, done := routes[p.addr]; done {
			continue
		}
		dest, why := k.route(p.addr)
		routes[p.addr] = route{dest, why == ""}
		if why != "" {
			if k.skipped[p.addr] != why {
				k.log.Warn("peer left on the encrypted path", "peer", p.name, "endpoint", p.addr, "why", why)
				k.skipped[p.addr] = why
			}
			continue
		}
		delete(k.skipped, p.addr)
		want[p.addr] = true
	}
	for a := range want {
		if !k.peers[a] {
			if err := k.path.SetPeer(a); err != nil {
				k.log.Warn("letting a peer in", "endpoint", a, "err", err)
				continue
			}
			k.peers[a] = true
		}
	}
	for a := range k.peers {
		if !want[a] {
			if err := k.path.DeletePeer(a); err != nil {
				k.log.Warn("shutting a peer out", "endpoint", a, "err", err)
				continue
			}
			delete(k.peers, a)
		}
	}

	k.mu.Lock()
	for a := range k.asked {
		if !want[a] {
			delete(k.asked, a)
			delete(k.answered, a)
		}
	}
	confirmed := map[netip.Addr]bool{}
	for a := range want {
		confirmed[a] = now.Sub(k.answered[a]) < kernelPathExpiry
	}
	k.mu.Unlock()
	for a := range want {
		k.sendProbe(a)
	}

	macs := map[[6]byte]kernelpath.Dest{}
	up := map[nid.ID]netip.Addr{}
	for _, p := range peers {
		if r := routes[p.addr]; r.ok && confirmed[p.addr] {
			macs[node.MACFor(p.id)] = r.dest
			up[p.id] = p.addr
		}
	}
	for mac, dest := range macs {
		if cur, ok := k.macs[mac]; !ok || cur != dest {
			if err := k.path.SetMAC(mac, dest); err != nil {
				k.log.Warn("sending a MAC through the kernel", "mac", net.HardwareAddr(mac[:]), "err", err)
				delete(up, macPeer(peers, mac))
				continue
			}
			k.macs[mac] = dest
		}
	}
	for mac := range k.macs {
		if _, ok := macs[mac]; !ok {
			if err := k.path.DeleteMAC(mac); err != nil {
				k.log.Warn("taking a MAC back from the kernel", "mac", net.HardwareAddr(mac[:]), "err", err)
				continue
			}
			delete(k.macs, mac)
		}
	}
	names := map[nid.ID]string{}
	for _, p := range peers {
		names[p.id] = p.name
	}
	for id, a := range up {
		if _, was := k.up[id]; !was {
			k.log.Info("kernel path to peer up", "peer", names[id], "node_id", id, "endpoint", a)
		}
	}
	for id, a := range k.up {
		if _, is := up[id]; !is {
			why := "its kernel path stopped answering probes"
			if !want[a] {
				why = "its link is down, not direct or not trusted"
			}
			k.log.Info("kernel path to peer down: back to the encrypted path", "node_id", id, "endpoint", a, "why", why)
		}
	}
	k.up = up
}

func macPeer(peers []kernelPeer, mac [6]byte) nid.ID {
	for _, p := range peers {
		if node.MACFor(p.id) == mac {
			return p.id
		}
	}
	return nid.ID{}
}

// route finds how this node reaches a peer's address: the device, which
// gets the receiving program too, and the source address; why says what
// keeps the peer off the kernel path.
func (k *kernelPath) route(a netip.Addr) (dest kernelpath.Dest, why string) {
	routes, err := netlink.RouteGet(a.AsSlice())
	if err != nil || len(routes) == 0 {
		return dest, fmt.Sprintf("no route: %v", err)
	}
	r := routes[0]
	if name := k.exclude[r.LinkIndex]; name != "" {
		return dest, "its route leads through " + name + ", the virtual network itself"
	}
	src := k.source
	if !src.IsValid() {
		src, _ = netip.AddrFromSlice(r.Src)
		src = src.Unmap()
	}
	if !src.Is4() {
		return dest, "no IPv4 source address toward it"
	}
	if err := k.path.AttachUnderlay(r.LinkIndex); err != nil {
		return dest, err.Error()
	}
	return kernelpath.Dest{Peer: a, Source: src, Ifindex: r.LinkIndex}, ""
}

func (k *kernelPath) sendProbe(a netip.Addr) {
	var b [8]byte
	crand.Read(b[:])
	nonce := binary.LittleEndian.Uint64(b[:])
	k.mu.Lock()
	prev := k.asked[a]
	k.asked[a] = [2]uint64{nonce, prev[0]}
	k.mu.Unlock()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, uint16(k.cfg.Port)))
	if _, err := k.probe.WriteToUDP(kernelpath.AppendProbe(nil, nonce), to); err != nil && !errors.Is(err, net.ErrClosed) {
		k.log.Debug("probe not sent", "endpoint", a, "err", err)
	}
}

// readAnswers takes the answers of the peers' kernels to this node's
// probes.
func (k *kernelPath) readAnswers() {
	defer k.wg.Done()
	buf := make([]byte, 64)
	for {
		n, from, err := k.probe.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				k.log.Warn("probe socket", "err", err)
			}
			return
		}
		nonce, ok := kernelpath.ParseAnswer(buf[:n])
		a := from.Addr().Unmap()
		if !ok || from.Port() != uint16(k.cfg.Port) {
			continue
		}
		k.mu.Lock()
		asked := k.asked[a]
		first := false
		if nonce != 0 && (nonce == asked[0] || nonce == asked[1]) {
			first = time.Since(k.answered[a]) >= kernelPathExpiry
			k.answered[a] = time.Now()
		}
		k.mu.Unlock()
		if first {
			select {
			case k.wake <- struct{}{}:
			default:
			}
		}
	}
}
