package publish

import (
	crand "crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/identity"
	"burrow/leaktest"
	"burrow/nid"
)

// fixture is a CA, a gateway node ID and an echo service on loopback
// standing in for a member's service.
type fixture struct {
	ca      *identity.CA
	trust   *identity.Trust
	self    nid.ID
	state   string
	service netip.AddrPort
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	leaktest.Check(t, "burrow/runtime/publish")
	ca, err := identity.NewCA("home", crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	trust, err := identity.NewTrust(ca)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return &fixture{ca: ca, trust: trust, self: nid.ID{0xbb}, state: t.TempDir(), service: netip.MustParseAddrPort(ln.Addr().String())}
}

func (f *fixture) gateway(t *testing.T) *Gateway {
	// The echo service on loopback stands in for the network.
	g := New(f.trust, f.self, f.state, func(a netip.Addr) error {
		if !a.IsLoopback() {
			return errors.New("not on loopback")
		}
		return nil
	}, slog.New(slog.DiscardHandler))
	t.Cleanup(g.Close)
	return g
}

// freePort is a loopback address:port nothing listens on.
func freePort(t *testing.T) netip.AddrPort {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return netip.MustParseAddrPort(ln.Addr().String())
}

func (f *fixture) publication(t *testing.T, listen netip.AddrPort, valid time.Duration) *identity.Publication {
	t.Helper()
	p, err := identity.SignPublication(f.ca, identity.Publication{
		Member: nid.ID{0xaa}, MemberName: "board", Service: f.service, Gateway: f.self, GatewayName: "gateway", Listen: listen,
	}, time.Now(), valid, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// echo sends msg through addr and reads it back.
func echo(t *testing.T, addr netip.AddrPort, msg string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo through %s: %q, %v", addr, got, err)
	}
	return c
}

// waitClosed fails unless the other end closes c within a second.
func waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	var timeout net.Error
	if err == nil || (errors.As(err, &timeout) && timeout.Timeout()) {
		t.Fatalf("the connection is still open: %v", err)
	}
}

func refused(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	if c, err := net.Dial("tcp", addr.String()); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections", addr)
	}
}

// TestARevocationClosesTheListenerAndEveryConnection, and the
// publication stays refused, also by a gateway started anew.
func TestARevocationClosesTheListenerAndEveryConnection(t *testing.T) {
	f := newFixture(t)
	g := f.gateway(t)
	listen := freePort(t)
	p := f.publication(t, listen, time.Hour)
	if _, err := g.Add(p.Marshal(), time.Now()); err != nil {
		t.Fatal(err)
	}
	conns := []net.Conn{echo(t, listen, "hello"), echo(t, listen, "again")}
	st := g.Status()
	if len(st) != 1 || st[0].Open != 2 || st[0].Accepted != 2 || st[0].BytesIn != 10 || st[0].BytesOut != 10 || st[0].Source != FromControl {
		t.Fatalf("status with two open connections: %+v", st)
	}
	r, err := identity.SignPublicationRevocation(f.ca, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	closed, err := g.Revoke(r.Marshal())
	if err != nil || closed == nil || closed.Serial != p.SerialString() || closed.Open != 2 {
		t.Fatalf("Revoke = %+v, %v", closed, err)
	}
	for _, c := range conns {
		waitClosed(t, c)
	}
	refused(t, listen)
	if len(g.Status()) != 0 {
		t.Errorf("a revoked publication is still listed: %+v", g.Status())
	}
	if _, err := g.Add(p.Marshal(), time.Now()); err == nil || !strings.Contains(err.Error(), "was revoked") {
		t.Errorf("adding a revoked publication: %v", err)
	}
	if err := g.SetConfigured([]Sourced{{p, "publish[0] a.pub"}}); err != nil {
		t.Errorf("a configuration still listing a revoked publication: %v (want it left out)", err)
	}
	refused(t, listen)
	if _, err := identity.LoadPublicationRevocation(filepath.Join(f.state, RevokedDir, p.SerialString()+revokedExt)); err != nil {
		t.Errorf("the revocation is not kept: %v", err)
	}
	g.Close()
	if _, err := f.gateway(t).Add(p.Marshal(), time.Now()); err == nil || !strings.Contains(err.Error(), "was revoked") {
		t.Errorf("adding a revoked publication after a restart: %v", err)
	}
}

// TestRevocationsForAnotherGatewayOrFromAnotherCAAreRefused.
func TestRevocationsForAnotherGatewayOrFromAnotherCAAreRefused(t *testing.T) {
	f := newFixture(t)
	g := f.gateway(t)
	listen := freePort(t)
	p := f.publication(t, listen, time.Hour)
	if _, err := g.Add(p.Marshal(), time.Now()); err != nil {
		t.Fatal(err)
	}
	elsewhere := *p
	elsewhere.Gateway = nid.ID{0xcc}
	r, err := identity.SignPublicationRevocation(f.ca, &elsewhere, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Revoke(r.Marshal()); !errors.Is(err, identity.ErrNotThisGateway) {
		t.Errorf("a revocation for another gateway: %v", err)
	}
	other, err := identity.NewCA("home", crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.Network = other.Network
	r, err = identity.SignPublicationRevocation(other, p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Revoke(r.Marshal()); !errors.Is(err, identity.ErrUnknownIssuer) {
		t.Errorf("a revocation of another CA: %v", err)
	}
	if _, err := g.Revoke([]byte("nonsense")); !errors.Is(err, identity.ErrMalformed) {
		t.Errorf("a malformed revocation: %v", err)
	}
	echo(t, listen, "still here")
}

// TestConfiguredPublicationsChangeAllOrNothing: a set with a listen
// address that cannot open changes nothing; a set without a publication
// closes it and its connections; control-socket publications stay.
func TestConfiguredPublicationsChangeAllOrNothing(t *testing.T) {
	f := newFixture(t)
	g := f.gateway(t)
	a, b, c := freePort(t), freePort(t), freePort(t)
	pa, pb, pc := f.publication(t, a, time.Hour), f.publication(t, b, time.Hour), f.publication(t, c, time.Hour)
	if _, err := g.Add(pc.Marshal(), time.Now()); err != nil {
		t.Fatal(err)
	}
	holder, err := net.Listen("tcp", b.String())
	if err != nil {
		t.Fatal(err)
	}
	err = g.SetConfigured([]Sourced{{pa, "publish[0] a.pub"}, {pb, "publish[1] b.pub"}})
	if err == nil || !strings.Contains(err.Error(), "publish[1] b.pub") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("a taken listen address: %v", err)
	}
	refused(t, a)
	holder.Close()
	if err := g.SetConfigured([]Sourced{{pa, "publish[0] a.pub"}, {pb, "publish[1] b.pub"}}); err != nil {
		t.Fatal(err)
	}
	open := echo(t, a, "a")
	echo(t, b, "b")
	if err := g.SetConfigured([]Sourced{{pb, "publish[0] b.pub"}}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, open)
	refused(t, a)
	echo(t, b, "b")
	echo(t, c, "c")
	if got := len(g.Status()); got != 2 {
		t.Errorf("%d publications listed, want b and c", got)
	}
}

// TestAPublicationClosesWhenItExpires.
func TestAPublicationClosesWhenItExpires(t *testing.T) {
	f := newFixture(t)
	g := f.gateway(t)
	listen := freePort(t)
	p := f.publication(t, listen, 2*time.Second)
	if _, err := g.Add(p.Marshal(), time.Now()); err != nil {
		t.Fatal(err)
	}
	c := echo(t, listen, "x")
	time.Sleep(time.Until(p.NotAfter))
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from an echo service nobody wrote to")
	}
	refused(t, listen)
	if _, err := g.Add(p.Marshal(), time.Now()); !errors.Is(err, identity.ErrPublicationExpired) {
		t.Errorf("adding an expired publication: %v", err)
	}
}

// TestARevocationFileCopiedInTakesEffectAtTheNextScan, and a file for
// another gateway is ignored.
func TestARevocationFileCopiedInTakesEffectAtTheNextScan(t *testing.T) {
	f := newFixture(t)
	g := f.gateway(t)
	listen := freePort(t)
	p := f.publication(t, listen, time.Hour)
	if _, err := g.Add(p.Marshal(), time.Now()); err != nil {
		t.Fatal(err)
	}
	c := echo(t, listen, "hello")
	if err := os.MkdirAll(filepath.Join(f.state, RevokedDir), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := *p
	elsewhere.Gateway = nid.ID{0xcc}
	for _, file := range []struct {
		name string
		pub  *identity.Publication
	}{{"other.pubrev", &elsewhere}, {"mine.pubrev", p}} {
		name, pub := file.name, file.pub
		r, err := identity.SignPublicationRevocation(f.ca, pub, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := identity.SavePublicationRevocation(filepath.Join(f.state, RevokedDir, name), r); err != nil {
			t.Fatal(err)
		}
		if name == "other.pubrev" {
			g.ScanRevoked()
			echo(t, listen, "still here")
		}
	}
	g.ScanRevoked()
	waitClosed(t, c)
	refused(t, listen)
}

// TestAPublicationRelaysAtMostMaxOpenConnections: the one beyond is
// closed at once and counted; once one closes, the next is relayed.
func TestAPublicationRelaysAtMostMaxOpenConnections(t *testing.T) {
	f := newFixture(t)
	g := f.gateway(t)
	listen := freePort(t)
	if _, err := g.Add(f.publication(t, listen, time.Hour).Marshal(), time.Now()); err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, MaxOpen)
	for i := range conns {
		conns[i] = echo(t, listen, "x")
	}
	extra, err := net.Dial("tcp", listen.String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	waitClosed(t, extra)
	if st := g.Status()[0]; st.Open != MaxOpen || st.Rejected != 1 {
		t.Fatalf("with %d open and one more: %+v", MaxOpen, st)
	}
	conns[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for g.Status()[0].Open == MaxOpen && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	echo(t, listen, "room again")
}
