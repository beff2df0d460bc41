package runtime

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"burrow/config"
	"burrow/nat"
)

// stunOnLoopback answers binding requests at addr as a beacon's second
// port does, until the test ends.
func stunOnLoopback(t *testing.T, addr string) netip.AddrPort {
	t.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Skipf("no loopback UDP socket at %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	go (&Daemon{}).answerSTUN(conn)
	return conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

func TestNetcheckOnLoopback(t *testing.T) {
	a, b := stunOnLoopback(t, "127.0.0.1:0"), stunOnLoopback(t, "127.0.0.2:0")
	cfg := &config.Config{Beacons: []config.BeaconRef{{Addr: a}, {Addr: b}}}
	r, err := Netcheck(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !r.UDP || r.Mapping != nat.MappingNone || r.PortAllocation != nat.AllocationNone || r.Filtering != "none" {
		t.Errorf("loopback: %+v, want UDP and no NAT", r)
	}
	if len(r.Mappings) != 2*netcheckSockets || r.NearestBeacon == nil || r.NearestBeacon.Via != "udp" {
		t.Errorf("loopback: %d answers (want %d), nearest %+v", len(r.Mappings), 2*netcheckSockets, r.NearestBeacon)
	}
	// These beacons answer at their own ports only; their second ports
	// are asked, and counted unanswered.
	for _, s := range r.Servers {
		if answers := s.Kind == "beacon"; s.Answered != answers || answers && s.RTTms <= 0 {
			t.Errorf("%s: %+v", s.Address, s)
		}
	}
}

func TestNetcheckWithoutAnswers(t *testing.T) {
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skip(err)
	}
	defer silent.Close()
	cfg := &config.Config{Beacons: []config.BeaconRef{{Addr: silent.LocalAddr().(*net.UDPAddr).AddrPort()}}}
	r, err := Netcheck(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.UDP || r.Mapping != nat.Undetermined || r.NearestBeacon != nil || len(r.Mappings) != 0 {
		t.Errorf("a silent beacon: %+v, want no UDP and nothing known", r)
	}
	if _, err := Netcheck(context.Background(), &config.Config{}); !errors.Is(err, ErrNoBeacon) {
		t.Errorf("no beacon: %v", err)
	}
}
