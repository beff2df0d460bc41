package runtime

import (
	"net/netip"
	"testing"

	"burrow/firewall"
)

// The frames firewall check builds are read by the firewall as the packets
// they stand for, in both IP families.
func TestProbeFramesReadAsTheirPackets(t *testing.T) {
	f := firewall.New(firewall.Policy{Inbound: []firewall.Rule{
		{Proto: firewall.ProtoTCP, FirstPort: 5432, LastPort: 5432, CIDR: netip.MustParsePrefix("10.9.0.0/16"), ICMPType: firewall.AnyICMPType},
		{Proto: firewall.ProtoTCP, FirstPort: 5432, LastPort: 5432, CIDR: netip.MustParsePrefix("fd00:9::/32"), ICMPType: firewall.AnyICMPType},
		{Proto: firewall.ProtoICMP, ICMPType: 128, Host: "ops"},
	}})
	for _, c := range []struct {
		src, dst string
		proto    uint8
		port     uint16
		member   string
		rule     int
	}{
		{"10.9.0.7", "10.9.0.5", 6, 5432, "", 0},
		{"fd00:9::7", "fd00:9::5", 6, 5432, "", 1},
		{"fd00:9::7", "fd00:9::5", 1, 128, "ops", 2},
		{"10.8.0.7", "10.9.0.5", 6, 5432, "", -1},
	} {
		v := f.Explain(firewall.Inbound, probeFrame(netip.MustParseAddr(c.src), netip.MustParseAddr(c.dst), c.proto, c.port),
			firewall.Member{Name: c.member}, 1)
		if v.Rule != c.rule || v.Allowed != (c.rule >= 0) {
			t.Errorf("%s→%s proto %d port %d: %+v, want rule %d", c.src, c.dst, c.proto, c.port, v, c.rule)
		}
	}
}
