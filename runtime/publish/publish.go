// Package publish is a gateway's side of publications: a member exposes
// TCP services of other members, each authorised by a CA-signed
// publication (identity.Publication), on a listen address anyone can
// reach. Every accepted connection is relayed byte for byte to the
// service's address inside the network, through this node's TAP, so TLS
// between the outside client and the service passes through untouched.
// A revocation, a publication's removal from the configuration or its
// expiry closes its listener and every connection it carries at once.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"burrow/identity"
	"burrow/nid"
)

// RevokedDir is where, under the state directory, a gateway keeps the
// revocations of publications it was handed, so that a revoked
// publication stays refused across restarts; a revocation file copied in
// takes effect at the next scan (runtime scans every 2 seconds).
const RevokedDir = "revoked-publications"

// revokedExt ends the name of each kept revocation file.
const revokedExt = ".pubrev"

// dialTimeout bounds how long a client waits for the service to answer
// before its connection is closed.
const dialTimeout = 5 * time.Second

// MaxOpen bounds the connections one publication relays at once: anyone
// can connect, and each open connection holds two buffers of copyBuffer
// bytes, so a flood of connections costs the gateway at most 16 MiB per
// publication. Connections beyond it are closed at once.
const MaxOpen = 256

const copyBuffer = 32 << 10

// FromControl is the source of a publication handed over the control
// socket rather than listed in the configuration.
const FromControl = "control socket"

// Status is one publication as `burrow status` shows it.
type Status struct {
	Serial   string    `json:"serial"`
	Member   string    `json:"member"`  // the member's name
	Service  string    `json:"service"` // address:port inside the network
	Listen   string    `json:"listen"`  // address:port for anyone
	Source   string    `json:"source"`  // a publish[i] file, or the control socket
	NotAfter time.Time `json:"not_after"`
	// Open connections now; Accepted since the listener opened; Failed:
	// connections closed because the service did not answer; Rejected:
	// connections closed at once because MaxOpen were open.
	Open     int64 `json:"open"`
	Accepted int64 `json:"accepted"`
	Failed   int64 `json:"failed"`
	Rejected int64 `json:"rejected"`
	// BytesIn went from outside clients to the service, BytesOut back.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
}

// Gateway holds the publications this node exposes.
type Gateway struct {
	trust      *identity.Trust
	self       nid.ID
	inside     func(netip.Addr) error
	log        *slog.Logger
	revokedDir string

	mu      sync.Mutex
	active  map[[identity.SerialSize]byte]*exposure
	revoked map[[identity.SerialSize]byte]*identity.PublicationRevocation
	seen    map[string]bool // revocation files already honoured
}

// New makes the gateway of node self, trusting publications of trust and
// keeping revocations under stateDir, whose kept revocations it reads.
// inside says why a service address is not one the gateway reaches
// through the network, nil when it is.
func New(trust *identity.Trust, self nid.ID, stateDir string, inside func(netip.Addr) error, log *slog.Logger) *Gateway {
	g := &Gateway{trust: trust, self: self, inside: inside, log: log, revokedDir: filepath.Join(stateDir, RevokedDir), seen: map[string]bool{},
		active: map[[identity.SerialSize]byte]*exposure{}, revoked: map[[identity.SerialSize]byte]*identity.PublicationRevocation{}}
	g.ScanRevoked()
	return g
}

// ScanRevoked honours the revocation files in RevokedDir not seen before:
// those kept from earlier runs, and any an operator copies in. A file that
// is not a revocation of this network for this gateway is reported once
// and left alone.
func (g *Gateway) ScanRevoked() {
	entries, err := os.ReadDir(g.revokedDir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			g.log.Warn("cannot read the revoked publications", "dir", g.revokedDir, "err", err)
		}
		return
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), revokedExt) || !g.firstSight(e.Name()) {
			continue
		}
		path := filepath.Join(g.revokedDir, e.Name())
		r, err := identity.LoadPublicationRevocation(path)
		if err == nil {
			err = g.verifyRevocation(r)
		}
		if err != nil {
			g.log.Error("ignoring a publication revocation file", "path", path, "err", err)
			continue
		}
		g.revoke(r)
	}
}

// firstSight reports whether the revocation file name is new, and marks
// it seen.
func (g *Gateway) firstSight(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen[name] {
		return false
	}
	g.seen[name] = true
	return true
}

// Load reads and checks a publication file for this gateway, now.
func (g *Gateway) Load(path string, now time.Time) (*identity.Publication, error) {
	p, err := identity.LoadPublication(path)
	if err != nil {
		return nil, err
	}
	return p, g.check(p, now)
}

// check verifies p for this gateway at now.
func (g *Gateway) check(p *identity.Publication, now time.Time) error {
	if err := g.trust.VerifyPublication(p, g.self, now); err != nil {
		return err
	}
	if err := g.inside(p.Service.Addr()); err != nil {
		return fmt.Errorf("publication %s of %s (%s): %w", p.SerialString()[:8], p.Service, p.MemberName, err)
	}
	return nil
}

// ErrRevoked: the CA revoked the publication.
var ErrRevoked = errors.New("publication revoked")

// revokedErr says when p was revoked, nil if it was not; g.mu is held.
func (g *Gateway) revokedErr(p *identity.Publication) error {
	if r := g.revoked[p.Serial]; r != nil {
		return fmt.Errorf("%w: publication %s of %s (%s) was revoked at %s", ErrRevoked, p.SerialString()[:8], p.Service, p.MemberName, r.RevokedAt.Format(time.RFC3339))
	}
	return nil
}

// Sourced is a checked publication and where it came from.
type Sourced struct {
	Publication *identity.Publication
	Source      string
}

// SetConfigured puts exactly pubs in force as the publications of the
// configuration: it opens the listeners of new ones and closes those no
// longer listed (and every connection they carry). Publications handed
// over the control socket stay; revoked ones are left out, with a
// warning, since a revocation outranks a stale list. When a listener
// cannot open, nothing changes.
func (g *Gateway) SetConfigured(pubs []Sourced) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	wanted := map[[identity.SerialSize]byte]bool{}
	var opened []*exposure
	undo := func() {
		for _, e := range opened {
			e.close()
		}
	}
	for _, s := range pubs {
		p := s.Publication
		if wanted[p.Serial] {
			undo()
			return fmt.Errorf("%s: publication %s is listed twice", s.Source, p.SerialString()[:8])
		}
		wanted[p.Serial] = true
		if err := g.revokedErr(p); err != nil {
			g.log.Warn("not exposing a revoked publication; remove it from publish:", "source", s.Source, "err", err)
			continue
		}
		if e := g.active[p.Serial]; e != nil {
			e.source = s.Source
			continue
		}
		e, err := g.open(s)
		if err != nil {
			undo()
			return err
		}
		opened = append(opened, e)
	}
	for serial, e := range g.active {
		if e.source != FromControl && !wanted[serial] {
			g.log.Info("publication withdrawn from the configuration", "serial", e.pub.SerialString(), "service", e.pub.Service, "listen", e.pub.Listen)
			e.close()
			delete(g.active, serial)
		}
	}
	for _, e := range opened {
		g.start(e)
	}
	return nil
}

// Add checks a publication handed over the control socket and exposes it.
func (g *Gateway) Add(raw []byte, now time.Time) (Status, error) {
	p, err := identity.ParsePublication(raw)
	if err != nil {
		return Status{}, err
	}
	if err := g.check(p, now); err != nil {
		return Status{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.revokedErr(p); err != nil {
		return Status{}, err
	}
	if e := g.active[p.Serial]; e != nil {
		return e.status(), nil
	}
	e, err := g.open(Sourced{Publication: p, Source: FromControl})
	if err != nil {
		return Status{}, err
	}
	g.start(e)
	return e.status(), nil
}

// Revoke honours a CA-signed revocation: the publication's listener and
// connections close, the revocation is kept, and the publication is
// refused from then on. It returns the closed publication's status as it
// was just before, nil when it was not exposed here.
func (g *Gateway) Revoke(raw []byte) (*Status, error) {
	r, err := identity.ParsePublicationRevocation(raw)
	if err != nil {
		return nil, err
	}
	if err := g.verifyRevocation(r); err != nil {
		return nil, err
	}
	closed := g.revoke(r)
	name := r.SerialString() + revokedExt
	err = os.MkdirAll(g.revokedDir, 0o755)
	if err == nil {
		err = identity.SavePublicationRevocation(filepath.Join(g.revokedDir, name), r)
	}
	if err != nil {
		g.log.Error("cannot keep a publication revocation; it holds until restart", "serial", r.SerialString(), "err", err)
	} else {
		g.firstSight(name)
	}
	return closed, nil
}

// verifyRevocation checks that a trusted CA signed r for this gateway.
func (g *Gateway) verifyRevocation(r *identity.PublicationRevocation) error {
	if err := g.trust.VerifyPublicationRevocation(r); err != nil {
		return err
	}
	if r.Gateway != g.self {
		return fmt.Errorf("%w: the revocation of publication %s is for gateway %s, and this node is %s",
			identity.ErrNotThisGateway, r.SerialString()[:8], r.Gateway.Short(), g.self.Short())
	}
	return nil
}

// revoke closes r's publication, if exposed, and refuses it from now on.
func (g *Gateway) revoke(r *identity.PublicationRevocation) *Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.revoked[r.Serial] = r
	e := g.active[r.Serial]
	if e == nil {
		return nil
	}
	st := e.status() // before the connections it cuts go
	e.close()
	delete(g.active, r.Serial)
	g.log.Info("publication revoked: listener and connections closed", "serial", r.SerialString(), "service", e.pub.Service, "listen", e.pub.Listen, "open", st.Open)
	return &st
}

// Status lists the exposed publications by listen address.
func (g *Gateway) Status() []Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Status, 0, len(g.active))
	for _, e := range g.active {
		out = append(out, e.status())
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Listen, b.Listen) })
	return out
}

// Close closes every listener and connection.
func (g *Gateway) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.active {
		e.close()
	}
	clear(g.active)
}

// expire closes e when its publication runs out, unless it went before.
func (g *Gateway) expire(e *exposure) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active[e.pub.Serial] != e {
		return
	}
	g.log.Info("publication expired: listener and connections closed", "serial", e.pub.SerialString(), "service", e.pub.Service, "listen", e.pub.Listen)
	e.close()
	delete(g.active, e.pub.Serial)
}

// open listens for s's publication; g.mu is held.
func (g *Gateway) open(s Sourced) (*exposure, error) {
	p := s.Publication
	for _, e := range g.active {
		if e.pub.Listen == p.Listen {
			return nil, fmt.Errorf("%s: listen address %s is already taken by publication %s of %s", s.Source, p.Listen, e.pub.SerialString()[:8], e.pub.Service)
		}
	}
	ln, err := net.Listen("tcp", p.Listen.String())
	if err != nil {
		return nil, fmt.Errorf("%s: publication %s of %s (%s) cannot listen: %w", s.Source, p.SerialString()[:8], p.Service, p.MemberName, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &exposure{pub: p, source: s.Source, ln: ln.(*net.TCPListener), ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}, log: g.log}, nil
}

// start serves an opened exposure; g.mu is held.
func (g *Gateway) start(e *exposure) {
	g.active[e.pub.Serial] = e
	e.expiry = time.AfterFunc(time.Until(e.pub.NotAfter), func() { g.expire(e) })
	g.log.Info("publishing", "serial", e.pub.SerialString(), "member", e.pub.MemberName, "service", e.pub.Service, "listen", e.pub.Listen, "source", e.source)
	go e.serve()
}

// exposure is one publication's listener and the connections it accepted.
type exposure struct {
	pub    *identity.Publication
	source string
	ln     *net.TCPListener
	ctx    context.Context // ends when the exposure closes
	cancel context.CancelFunc
	expiry *time.Timer
	log    *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]bool // both ends of every relayed connection
	closed bool

	accepted, failed, rejected, open, bytesIn, bytesOut atomic.Int64
}

func (e *exposure) status() Status {
	return Status{Serial: e.pub.SerialString(), Member: e.pub.MemberName, Service: e.pub.Service.String(), Listen: e.pub.Listen.String(),
		Source: e.source, NotAfter: e.pub.NotAfter, Open: e.open.Load(), Accepted: e.accepted.Load(), Failed: e.failed.Load(), Rejected: e.rejected.Load(),
		BytesIn: e.bytesIn.Load(), BytesOut: e.bytesOut.Load()}
}

// close stops accepting and cuts every connection, at once.
func (e *exposure) close() {
	e.cancel()
	if e.expiry != nil {
		e.expiry.Stop()
	}
	e.ln.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for c := range e.conns {
		c.Close()
	}
}

// track adds c to the connections close cuts; false when e is closed.
func (e *exposure) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.conns[c] = true
	return true
}

func (e *exposure) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	c.Close()
}

func (e *exposure) serve() {
	for {
		c, err := e.ln.AcceptTCP()
		if err != nil {
			if e.ctx.Err() == nil {
				e.log.Error("publication stopped accepting", "listen", e.pub.Listen, "err", err)
			}
			return
		}
		e.accepted.Add(1)
		if e.open.Load() >= MaxOpen {
			e.rejected.Add(1)
			c.Close()
			continue
		}
		e.open.Add(1)
		go e.relay(c)
	}
}

// relay connects client to the service and copies bytes both ways until
// both sides are done or the exposure closes.
// serve counted it open; it is no longer when relay returns.
func (e *exposure) relay(client *net.TCPConn) {
	defer e.open.Add(-1)
	if !e.track(client) {
		client.Close()
		return
	}
	defer e.untrack(client)
	ctx, cancel := context.WithTimeout(e.ctx, dialTimeout)
	var d net.Dialer
	up, err := d.DialContext(ctx, "tcp", e.pub.Service.String())
	cancel()
	if err != nil {
		e.failed.Add(1)
		e.log.Warn("published service unreachable", "service", e.pub.Service, "member", e.pub.MemberName, "client", client.RemoteAddr(), "err", err)
		return
	}
	service := up.(*net.TCPConn)
	if !e.track(service) {
		service.Close()
		return
	}
	defer e.untrack(service)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pipe(service, client, &e.bytesIn)
	}()
	pipe(client, service, &e.bytesOut)
	wg.Wait()
}

// pipe copies src to dst until src ends, counting each read so that
// status shows the bytes while a connection lasts, then passes the end on.
func pipe(dst, src *net.TCPConn, count *atomic.Int64) {
	buf := make([]byte, copyBuffer)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			count.Add(int64(n))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if errors.Is(err, io.EOF) {
			dst.CloseWrite()
			return
		}
		if err != nil { // reset, or closed by a revocation: both sides end
			dst.Close()
			src.Close()
			return
		}
	}
}
