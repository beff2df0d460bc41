package runtime

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	goruntime "runtime"
	"sync"
	"time"

	"golang.org/x/sys/cpu"

	"burrow/config"
	"burrow/firewall"
	"burrow/flood"
	"burrow/identity"
	"burrow/l2"
	"burrow/link"
	"burrow/nid"
	"burrow/node"
	"burrow/overlay"
	"burrow/runtime/codel"
	"burrow/runtime/fq"
	"burrow/runtime/pinned"
	"burrow/runtime/publish"
	"burrow/runtime/tap"
	"burrow/runtime/udpio"
	"burrow/wire"
)

// Daemon is a running node.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	cert     *identity.Certificate
	firewall *firewall.Firewall // nil without a firewall section
	node     *node.Node
	dev      *tap.Device
	conn     *udpio.Conn
	control  *controlServer
	events   chan node.Event
	calls    chan func()
	// coreWatch reports a core that stopped turning its loop.
	coreWatch coreWatch
	tapBuf    []byte      // core-owned buffer for frames written to the TAP
	coreTAP   *tap.Writer // the core's writer to the TAP
	addrs     []netip.Prefix
	mtu       int
	mac       l2.MAC
	// subnetBridge is the container bridge this daemon created, removed
	// on shutdown.
	subnetBridge string
	// containerNames are the DNS names of containers attached here, as
	// last registered (core goroutine).
	containerNames map[string][]netip.Addr
	tapBridge      string // the TAP's bridge, when this daemon created it
	wg             sync.WaitGroup
	cancel         context.CancelFunc
	done           chan struct{}
	err            error
	tr             transports
	spare          spareSockets
	kp             *kernelPath // kernel_path, when enabled
	tapQueues      []*fq.Queue // one per TAP queue, closed once its goroutines end
	// tapBells wake each TAP queue's worker when its reader queued frames.
	tapBells []*pinned.Doorbell
	// pinWarning says once that the data path could not take its
	// real-time priority.
	pinWarning  sync.Once
	revocations *revocations
	// gateway exposes the services of members this node publishes.
	gateway *publish.Gateway
	// xmpp is the client of the XMPP rendezvous server, when configured.
	xmpp *xmppRendezvous
	// receiveAQM is the socket reader's CoDel, read by Status.
	receiveAQM *codel.CoDel
	// stop ends the waits of the data path's pinned loops.
	stop *pinned.Stop
}

const (
	eventQueueLen = 4096
	// rxBufLen holds one GRO-coalesced run of datagrams.
	rxBufLen   = 65536
	txBatch    = 128
	tapReadLen = l2.VirtioNetHdrLen + 65536 + 14
)

// TAPMTU is the largest TAP MTU for which a frame, even as a broadcast
// with its flood header or routed around a failure with its source bridge,
// and even through a relay, fits one datagram on an underlay of
// underlayMTU.
func TAPMTU(underlayMTU int, ipv6 bool) int {
	ipUDP := 20 + 8
	if ipv6 {
		ipUDP = 40 + 8
	}
	// A routed frame never names its source in its frame header: the
	// routed header does.
	inner := max(wire.RoutedHeaderLen+wire.FrameHeaderLen, wire.FrameHeaderLen+wire.SourceLen, 1+flood.BroadcastHeaderLen)
	return underlayMTU - ipUDP - wire.RelayOverhead - wire.TransportOverhead - inner - 14
}

// Start brings a node up: keys, certificate, socket, TAP, control socket
// and goroutines. When it fails, everything it did is undone.
func Start(cfg *config.Config, log *slog.Logger) (_ *Daemon, err error) {
	d := &Daemon{cfg: cfg, log: log, events: make(chan node.Event, eventQueueLen), calls: make(chan func()), done: make(chan struct{})}
	defer func() {
		if err != nil {
			d.closeIO()
			d.closeDataPath()
		}
	}()
	key, created, err := identity.LoadOrCreateNodeKey(cfg.StateDir, crand.Reader)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created node key", "path", cfg.StateDir+"/node.key", "node_id", key.ID())
	}
	trust, cert, err := loadMembership(cfg, key, time.Now())
	if err != nil {
		return nil, err
	}
	d.cert = cert
	d.revocations = newRevocations(cfg.StateDir, trust, log)

	if d.conn, err = udpio.Listen(cfg.ListenAddr); err != nil {
		return nil, fmt.Errorf("listen %v: %w (is another burrow running? change `listen` in %s)", cfg.ListenAddr, err, cfg.Path)
	}
	mtu := cfg.TAP.MTU
	if mtu == 0 {
		mtu = TAPMTU(cfg.UnderlayMTU, cfg.ListenAddr.Addr().Is6() && !cfg.ListenAddr.Addr().Is4In6())
	}
	mac := node.MACFor(key.ID())
	if cfg.TAP.HasMAC {
		mac = cfg.TAP.MACAddr
	}
	d.addrs = cfg.TAP.Prefixes
	if len(d.addrs) == 0 {
		d.addrs = cert.Addresses
	}
	queues := cfg.TAP.Queues
	if queues == 0 {
		queues = min(goruntime.NumCPU(), 4)
	}
	d.mtu, d.mac = mtu, mac
	if cfg.TAP.On {
		tapAddrs := d.addrs
		if cfg.TAP.Bridge != "" {
			tapAddrs = nil // they go on the bridge
		}
		if d.dev, err = tap.Create(tap.Options{Name: cfg.TAP.Name, MTU: mtu, MAC: mac, Addresses: tapAddrs, Queues: queues, Offload: cfg.TAP.OffloadOn}); err != nil {
			return nil, err
		}
		d.mac = d.dev.MAC()
		if cfg.TAP.Bridge != "" {
			if err := d.attachBridge(cfg.TAP.Bridge, mtu, d.addrs); err != nil {
				return nil, err
			}
		}
	}
	d.gateway = publish.New(trust, key.ID(), cfg.StateDir, d.insideNetwork, log)
	if err := d.ReloadPublications(cfg); err != nil {
		return nil, err
	}
	if d.control, err = listenControl(cfg.ControlSocket, d); err != nil {
		return nil, err
	}
	if err := d.startTransports(cfg); err != nil {
		return nil, err
	}
	d.tapBuf = make([]byte, l2.VirtioNetHdrLen+65536)
	if d.dev != nil {
		d.coreTAP = d.dev.Queue(0).NewWriter()
	}

	now := time.Now()
	peers := make([]node.StaticPeer, len(cfg.Peers))
	for i, p := range cfg.Peers {
		peers[i] = node.StaticPeer{Endpoint: p.Addr, Key: p.Key}
	}
	services, err := d.servicesConfig(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Firewall != nil {
		d.firewall = firewall.New(cfg.Firewall.Policy)
	}
	if x := cfg.Rendezvous.XMPP; x != nil {
		if d.xmpp, err = newXMPPRendezvous(x, log); err != nil {
			return nil, err
		}
	}
	d.node, err = node.New(node.Config{
		Name:     cert.Name,
		Services: services,
		Handshake: link.HandshakeConfig{
			Network: cfg.Network, Private: key.Private, Public: key.Public,
			Cert: cert.Marshal(), AESFast: hasFastAES(), Rand: crand.Reader,
		},
		Verify: func(raw []byte, static [32]byte, now time.Time) (link.Peer, error) {
			c, err := trust.VerifyPeer(raw, static, now)
			if err != nil {
				return link.Peer{}, err
			}
			return link.Peer{ID: c.ID(), Name: c.Name, Addresses: c.Addresses, Groups: c.Groups, NotAfter: c.NotAfter}, nil
		},
		Timers: link.Timers{
			Keepalive: cfg.Links.Keepalive, DeadAfter: cfg.Links.DeadAfter, HandshakeRetry: cfg.Links.HandshakeRetry,
			RekeyAfter: cfg.Links.RekeyAfter, RekeyAfterMessages: cfg.Links.RekeyAfterMessages,
		},
		MAC:         d.mac,
		Peers:       peers,
		RelayRate:   cfg.RelayRate(),
		Reach:       reachConfig(cfg),
		Rendezvous:  rendezvousConfig(cfg),
		Revocations: d.revocations.config(),
		Firewall:    d.firewall,
		MaxMACs:     cfg.Switch.MaxMACs,
		MACAge:      cfg.Switch.MACAge,
		FlowIdle:    cfg.Switch.FlowIdle,
		Log:         log,
		Overlay:     overlayConfig(cfg, d.conn.LocalAddr(), cfg.TAP.Name),
	}, (*coreOutput)(d), now)
	if err != nil {
		return nil, err
	}
	if d.dev != nil {
		log.Info("burrow up", "node_id", d.node.Self(), "name", cert.Name, "network", cfg.Network,
			"listen", d.conn.LocalAddr(), "tap", d.dev.Name(), "mtu", d.dev.MTU(), "mac", d.dev.MAC(),
			"addresses", d.addrs, "offloads", fmt.Sprintf("%+v", d.dev.Offloads()), "peers", len(peers), "beacon", cfg.Beacon.Enabled)
	} else {
		log.Info("burrow up without a TAP device", "node_id", d.node.Self(), "name", cert.Name, "network", cfg.Network,
			"listen", d.conn.LocalAddr(), "beacon", cfg.Beacon.Enabled)
	}

	if cfg.Services.DNS.Enabled {
		name := cfg.Services.DNS.Name
		if name == "" {
			name = cert.Name
		}
		var addrs []netip.Addr
		for _, p := range d.addrs {
			addrs = append(addrs, p.Addr())
		}
		d.node.RegisterName(name, addrs, now, func(ok bool) {
			if !ok {
				log.Warn("DNS name taken by another node", "name", name)
			}
		})
	}

	if cfg.Services.DNS.Enabled && cfg.Services.Subnets.Enabled {
		names, err := d.attachedContainerNames()
		if err != nil {
			log.Warn("containers' DNS names not registered", "err", err)
		}
		d.registerContainerNames(names, now)
	}

	if err := d.startKernelPath(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	queues = 0
	if d.dev != nil {
		queues = d.dev.NumQueues()
	}
	if d.stop, err = pinned.NewStop(); err != nil {
		return nil, err
	}
	for range queues {
		bell, err := pinned.NewDoorbell()
		if err != nil {
			return nil, err
		}
		d.tapBells = append(d.tapBells, bell)
		d.tapQueues = append(d.tapQueues, fq.New(tapQueueBuffers, tapReadLen, tapQueueBytes, tapQueueFlows))
	}
	reserveProcessors(pinnedLoops(queues))
	d.wg.Add(2 + 2*queues)
	d.receiveAQM = codel.New(codel.Target, codel.Interval)
	d.coreWatch.stallAfter = coreStallAfter
	d.coreWatch.turned(time.Now())
	go d.coreWatch.watch(ctx, func(stalled time.Duration, stacks string) {
		d.log.Error("the core has not run for "+stalled.Round(time.Second).String()+": it is stuck; every goroutine's stack follows", "stacks", stacks)
	})
	go d.runCore(ctx)
	go d.runSocketReader()
	d.allocateTURN(ctx)
	for i, q := range d.tapQueues {
		go d.runTAPReader(d.dev.Queue(i), q, d.tapBells[i])
		go d.runTAPWorker(q, d.tapBells[i])
	}
	if d.xmpp != nil {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.xmpp.run(ctx, d)
		}()
	}
	go d.control.serve()
	return d, nil
}

// loadMembership loads the trusted CAs and this node's certificate and
// checks that they belong together, to this key and this network, now.
func loadMembership(cfg *config.Config, key identity.NodeKey, now time.Time) (*identity.Trust, *identity.Certificate, error) {
	trust, err := identity.LoadTrust(cfg.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("ca %s: %w", cfg.CA, err)
	}
	if trust.Network() != cfg.Network {
		return nil, nil, fmt.Errorf("ca %s is for network %q, but the config says network %q", cfg.CA, trust.Network(), cfg.Network)
	}
	cert, err := identity.LoadCertificate(cfg.Cert)
	if err != nil {
		return nil, nil, fmt.Errorf("cert %s: %w", cfg.Cert, err)
	}
	if cert.PublicKey != key.Public {
		return nil, nil, fmt.Errorf("cert %s was issued for another key than %s/node.key; sign one for this node: burrow cert sign --ca CA_DIR --state %s --name %s --out %s",
			cfg.Cert, cfg.StateDir, cfg.StateDir, cert.Name, cfg.Cert)
	}
	if err := trust.Verify(cert, now); err != nil {
		return nil, nil, fmt.Errorf("cert %s: %w", cfg.Cert, err)
	}
	return trust, cert, nil
}

func reachConfig(cfg *config.Config) node.ReachConfig {
	// Without a beacon, members that find each other through a
	// rendezvous server tell each other their public addresses.
	r := node.ReachConfig{PunchBudget: cfg.NAT.Budget()}
	for _, b := range cfg.Beacons {
		r.Beacons = append(r.Beacons, node.Beacon{Addr: b.Addr, WebSocket: b.WebSocket != ""})
	}
	return r
}

func rendezvousConfig(cfg *config.Config) node.RendezvousConfig {
	if x := cfg.Rendezvous.XMPP; x != nil {
		return node.RendezvousConfig{Enabled: true, Contacts: x.Contacts}
	}
	return node.RendezvousConfig{}
}

func overlayConfig(cfg *config.Config, listen netip.AddrPort, tapName string) node.OverlayConfig {
	o := cfg.Overlay
	advertise := o.AdvertiseAddrs
	if len(advertise) == 0 {
		advertise = localEndpoints(listen, tapName)
	}
	return node.OverlayConfig{
		Disabled:       !o.On,
		Params:         overlay.Params{Successors: o.Successors, LongDistance: o.K, Auto: o.AutoK, MaxInbound: o.MaxInbound, MaxLinks: o.MaxLinks},
		Bootstrap:      o.BootstrapAddrs,
		Advertise:      advertise,
		StabilizeEvery: o.Stabilize,
		HealEvery:      o.Heal,
		OnDemand:       node.OnDemandConfig{Enabled: o.OnDemand.On, Threshold: o.OnDemand.Threshold, Window: o.OnDemand.Window, Idle: o.OnDemand.Idle},
		Remembered:     loadRemembered(cfg.StateDir),
	}
}

// localEndpoints is where other nodes can reach this one: the listen
// address, or, when it is unspecified, this machine's interface addresses
// (but the TAP's) that hostEndpoints keeps, with the listen port.
func localEndpoints(listen netip.AddrPort, tapName string) []netip.AddrPort {
	if !listen.Addr().IsUnspecified() {
		return []netip.AddrPort{listen}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var addrs []netip.Addr
	for _, ifc := range ifaces {
		if ifc.Name == tapName || ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		ifAddrs, _ := ifc.Addrs()
		for _, a := range ifAddrs {
			if pfx, err := netip.ParsePrefix(a.String()); err == nil {
				addrs = append(addrs, pfx.Addr())
			}
		}
	}
	return hostEndpoints(listen, addrs)
}

// maxHostIPv6 bounds the IPv6 host candidates: a host often has several
// (a stable address, temporary ones for privacy), any one of them reaches
// it, and the rest of the room in an overlay message is for IPv4, the
// mappings beacons see and a TURN address.
const maxHostIPv6 = 2

// hostEndpoints picks the host candidates among a machine's addresses for
// a socket listening on the unspecified address listen: IPv4 addresses
// first (private ones too, for peers on the same LAN), then, when the
// socket serves IPv6, global IPv6 addresses. Link-local addresses need a
// zone and unique local ones (fc00::/7) reach only a site that a LAN path
// over IPv4 already covers; name them in overlay.advertise to offer them
// anyway.
func hostEndpoints(listen netip.AddrPort, addrs []netip.Addr) []netip.AddrPort {
	var v4, v6 []netip.AddrPort
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case !a.IsGlobalUnicast():
		case a.Is4():
			v4 = append(v4, netip.AddrPortFrom(a, listen.Port()))
		case listen.Addr().Is6() && !a.IsPrivate() && len(v6) < maxHostIPv6:
			v6 = append(v6, netip.AddrPortFrom(a, listen.Port()))
		}
	}
	// A machine with many IPv4 addresses (container bridges) must not
	// crowd out its IPv6 ones.
	return append(v4[:min(len(v4), overlay.MaxEndpoints-len(v6))], v6...)
}

func hasFastAES() bool {
	return (cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ) || (cpu.ARM64.HasAES && cpu.ARM64.HasPMULL)
}

// Wait blocks until the daemon stopped and returns why.
func (d *Daemon) Wait() error {
	<-d.done
	return d.err
}

// Close stops the daemon and removes the TAP (with its addresses) and the
// control socket.
func (d *Daemon) Close() error {
	d.cancel()
	<-d.done
	return d.err
}

// closeDataPath releases the data path's queues and wakeups once its
// loops ended, or never started.
func (d *Daemon) closeDataPath() {
	for _, q := range d.tapQueues {
		q.Close()
	}
	for _, bell := range d.tapBells {
		bell.Close()
	}
	if d.stop != nil {
		d.stop.Close()
	}
}

func (d *Daemon) closeIO() {
	if d.stop != nil {
		d.stop.Stop() // before the descriptors the data path waits for close
	}
	d.stopKernelPath()
	if d.gateway != nil {
		d.gateway.Close()
	}
	if d.control != nil {
		d.control.close()
	}
	d.closeTransports()
	d.removeSubnetBridge()
	defer d.removeBridge() // after the TAP is gone
	if d.conn != nil {
		d.conn.Close()
	}
	if d.dev != nil {
		d.dev.Close()
	}
}

// Node ID of the running daemon.
func (d *Daemon) NodeID() nid.ID { return d.node.Self() }

// linkedPeers are the peers of the node's up links; the core's to call.
func (d *Daemon) linkedPeers() []link.Peer {
	var peers []link.Peer
	for _, l := range d.node.Links().Links() {
		if l.Up() {
			peers = append(peers, l.Peer)
		}
	}
	return peers
}

// call runs f on the core goroutine and waits for it.
func (d *Daemon) call(f func()) error {
	finished := make(chan struct{})
	select {
	case d.calls <- func() { f(); close(finished) }:
	case <-d.done:
		return errors.New("daemon stopped")
	}
	<-finished
	return nil
}

// housekeepingEvery is how often the core's goroutine saves the
// remembered peers, checks certificate expiry and looks for revocation
// files dropped into the state directory.
const housekeepingEvery = 2 * time.Second

func (d *Daemon) runCore(ctx context.Context) {
	defer d.wg.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	save := time.NewTicker(housekeepingEvery)
	defer save.Stop()
	var saved []overlay.Info
	defer func() {
		d.closeIO()
		go func() {
			d.wg.Wait()
			d.closeDataPath()
			close(d.done)
		}()
	}()
	expiry := expiryWarner{cert: d.cert, log: d.log}
	expiry.check(time.Now())
	d.serveCore(ctx, timer, save.C, func() {
		expiry.check(time.Now())
		expiry.checkPeers(d.linkedPeers(), time.Now())
		if peers := d.node.Remembered(); saveRemembered(d.cfg.StateDir, peers, saved) {
			saved = peers
		}
		for _, raw := range d.revocations.scan() {
			if _, _, err := d.node.Revoke(raw, time.Now()); err != nil {
				d.log.Error("revocation refused", "err", err)
			}
		}
		d.gateway.ScanRevoked()
	})
	// The peers known now, however short the run: a node that has no
	// bootstrap of its own finds its ring again from them after a restart.
	saveRemembered(d.cfg.StateDir, d.node.Remembered(), saved)
	d.log.Info("shutting down: telling the neighbours")
	d.node.Leave(time.Now())
	// Keep switching a moment: frames already on their way through this
	// node still arrive while the neighbours move their flows elsewhere.
	drain, cancel := context.WithTimeout(context.Background(), node.LeaveDrain)
	defer cancel()
	d.serveCore(drain, timer, nil, nil)
}

// serveCore runs the core — events from the data path, calls, timers —
// until ctx ends; save runs at every tick of every.
func (d *Daemon) serveCore(ctx context.Context, timer *time.Timer, every <-chan time.Time, save func()) {
	for {
		d.coreWatch.turned(time.Now())
		select {
		case <-ctx.Done():
			return
		case ev := <-d.events:
			d.node.Handle(ev, time.Now())
		case f := <-d.calls:
			f()
		case <-timer.C:
			d.node.Tick(time.Now())
		case <-every:
			save()
		}
		now := time.Now()
		timer.Reset(d.node.NextDeadline(now).Sub(now))
	}
}

// enqueue hands an event to the core without ever blocking the data path.
func (d *Daemon) enqueue(ev node.Event) {
	select {
	case d.events <- ev:
	default:
		d.node.Stats().Drop(node.DropSlowPathFull)
	}
}

// coreOutput carries the core's actions to the socket and the TAP. It runs
// on the core goroutine only.
type coreOutput Daemon

func (o *coreOutput) SendDatagram(to link.Endpoint, b []byte) {
	(*Daemon)(o).sendOne(to, b)
}

// sendOne sends one datagram on whichever transport its endpoint names.
func (d *Daemon) sendOne(to link.Endpoint, b []byte) {
	var err error
	switch {
	case to.Via == link.UDP:
		err = d.conn.WriteTo(b, to.Addr)
	case to.Via == link.TURN && d.tr.turn != nil:
		err = d.tr.turn.Send(to.Addr, b)
	case to.Via == link.Stream:
		err = d.sendStream(to.Stream, b)
	case to.Via == link.Spare:
		err = d.spare.send(to.Socket, to.Addr, b)
	default:
		err = fmt.Errorf("no %v transport on this node", to.Path())
	}
	if err != nil && !closedErr(err) {
		d.log.Debug("send failed", "to", to, "err", err)
	}
}

func (o *coreOutput) WriteFrame(frame []byte, off l2.Offload) {
	if o.dev != nil {
		(*Daemon)(o).writeTAP(o.coreTAP, o.tapBuf, frame, off)
	}
}

// writeTAP writes one frame to the TAP through buf, adding the virtio
// header the device expects or finishing the checksum when it has none.
func (d *Daemon) writeTAP(w *tap.Writer, buf, frame []byte, off l2.Offload) {
	if !d.dev.Offloads().VnetHdr {
		if off.NeedsCsum {
			if err := l2.CompleteChecksum(frame, int(off.CsumStart), int(off.CsumOffset)); err != nil {
				return
			}
		}
		w.Write(frame)
		return
	}
	off.VirtioNetHdr().Encode(buf)
	n := copy(buf[l2.VirtioNetHdrLen:], frame)
	w.Write(buf[:l2.VirtioNetHdrLen+n])
}

// newWorker makes the scratch of one data-path goroutine; frames is where
// it puts frames for the TAP (nil for workers that never write any).
func (d *Daemon) newWorker(frames node.FrameSink) *node.Worker {
	out := make([]udpio.Message, 0, txBatch)
	// spare holds the datagrams for spare sockets, in runs of one socket
	// (a link's datagrams come together), spareSocket their sockets.
	spare := make([]udpio.Message, 0, txBatch)
	spareSocket := make([]uint16, 0, txBatch)
	socket := d.conn.NewWriter()
	send := func(msgs []node.TxMsg) {
		out, spare, spareSocket = out[:0], spare[:0], spareSocket[:0]
		for _, m := range msgs {
			switch m.To.Via {
			case link.UDP:
				out = append(out, udpio.Message{Buf: m.Buf, N: len(m.Buf), Addr: m.To.Addr})
			case link.Spare:
				spare = append(spare, udpio.Message{Buf: m.Buf, N: len(m.Buf), Addr: m.To.Addr})
				spareSocket = append(spareSocket, m.To.Socket)
			default:
				d.sendOne(m.To, m.Buf)
			}
		}
		for start := 0; start < len(spare); {
			end := start + 1
			for end < len(spare) && spareSocket[end] == spareSocket[start] {
				end++
			}
			if err := d.spare.sendBatch(spareSocket[start], spare[start:end]); err != nil && !closedErr(err) {
				d.log.Debug("spare socket send failed", "socket", spareSocket[start], "err", err)
			}
			start = end
		}
		// A datagram the kernel refuses (no route to its family, a firewall)
		// is dropped, not the rest of the batch behind it.
		for sent := 0; sent < len(out); sent++ {
			n, err := socket.WriteBatch(out[sent:])
			if sent += n; err == nil || closedErr(err) {
				break
			}
			d.log.Debug("batch send failed", "to", out[sent].Addr, "err", err)
		}
	}
	return &node.Worker{Tx: node.NewTxBatch(txBatch, node.TxBufLen(d.mtu+18), send), Frames: frames, Slow: d.enqueue}
}
