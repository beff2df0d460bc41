package runtime

import (
	"net/netip"
	"slices"
	"testing"

	"burrow/overlay"
)

func TestHostEndpoints(t *testing.T) {
	addrs := func(ss ...string) (out []netip.Addr) {
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	eps := func(ss ...string) (out []netip.AddrPort) {
		for _, s := range ss {
			out = append(out, netip.MustParseAddrPort(s))
		}
		return out
	}
	machine := addrs("2001:db8::1", "fe80::1", "fd42::1", "198.51.100.7", "2001:db8::2", "::ffff:10.0.0.7", "2001:db8::3", "169.254.0.1", "ff02::1")
	for _, c := range []struct {
		listen string
		want   []netip.AddrPort
	}{
		// IPv4 first, private ones too; then at most two global IPv6
		// addresses, never link-local, unique local or multicast ones.
		{"[::]:51820", eps("198.51.100.7:51820", "10.0.0.7:51820", "[2001:db8::1]:51820", "[2001:db8::2]:51820")},
		// An IPv4 socket offers IPv4 alone.
		{"0.0.0.0:51820", eps("198.51.100.7:51820", "10.0.0.7:51820")},
	} {
		if got := hostEndpoints(netip.MustParseAddrPort(c.listen), machine); !slices.Equal(got, c.want) {
			t.Errorf("listening on %s: %v, want %v", c.listen, got, c.want)
		}
	}
	// Many IPv4 addresses leave room for the IPv6 ones.
	crowded := append(addrs("10.1.0.1", "10.2.0.1", "10.3.0.1", "10.4.0.1", "10.5.0.1", "10.6.0.1", "10.7.0.1", "10.8.0.1"), machine...)
	got := hostEndpoints(netip.MustParseAddrPort("[::]:51820"), crowded)
	if len(got) != overlay.MaxEndpoints || !slices.Contains(got, netip.MustParseAddrPort("[2001:db8::2]:51820")) || got[0] != netip.MustParseAddrPort("10.1.0.1:51820") {
		t.Errorf("a machine with many IPv4 addresses offers %v", got)
	}
}
