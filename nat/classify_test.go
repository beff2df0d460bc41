package nat

import (
	"net/netip"
	"testing"
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// ownAddr is the host's own address in these cases.
func ownAddr(a netip.Addr) bool { return a == netip.MustParseAddr("10.0.0.2") }

func TestClassifyMapping(t *testing.T) {
	const (
		sock1, sock2     = "10.0.0.2:40000", "10.0.0.2:40001"
		beaconA, beaconB = "198.51.100.1:51820", "198.51.100.2:51820"
		beaconA2         = "198.51.100.1:3478" // the same address on another port
	)
	for _, c := range []struct {
		name string
		obs  []Observation
		want string
	}{
		{"no answers", nil, Undetermined},
		{"no NAT", []Observation{{Local: ap(sock1), Server: ap(beaconA), Mapped: ap(sock1)}}, MappingNone},
		{"one server", []Observation{
			{Local: ap(sock1), Server: ap(beaconA), Mapped: ap("203.0.113.1:40000")},
			{Local: ap(sock2), Server: ap(beaconA), Mapped: ap("203.0.113.1:40001")},
		}, Undetermined},
		{"two addresses, one mapping", []Observation{
			{Local: ap(sock1), Server: ap(beaconA), Mapped: ap("203.0.113.1:40000")},
			{Local: ap(sock1), Server: ap(beaconB), Mapped: ap("203.0.113.1:40000")},
			{Local: ap(sock2), Server: ap(beaconA), Mapped: ap("203.0.113.1:40001")},
			{Local: ap(sock2), Server: ap(beaconB), Mapped: ap("203.0.113.1:40001")},
		}, MappingEndpointIndependent},
		{"two addresses, two mappings", []Observation{
			{Local: ap(sock1), Server: ap(beaconA), Mapped: ap("203.0.113.1:1111")},
			{Local: ap(sock1), Server: ap(beaconB), Mapped: ap("203.0.113.1:2222")},
		}, MappingDependent},
		{"two addresses differ, two ports agree", []Observation{
			{Local: ap(sock1), Server: ap(beaconA), Mapped: ap("203.0.113.1:1111")},
			{Local: ap(sock1), Server: ap(beaconA2), Mapped: ap("203.0.113.1:1111")},
			{Local: ap(sock1), Server: ap(beaconB), Mapped: ap("203.0.113.1:2222")},
		}, MappingAddressDependent},
		{"two ports differ", []Observation{
			{Local: ap(sock1), Server: ap(beaconA), Mapped: ap("203.0.113.1:1111")},
			{Local: ap(sock1), Server: ap(beaconA2), Mapped: ap("203.0.113.1:3333")},
			{Local: ap(sock1), Server: ap(beaconB), Mapped: ap("203.0.113.1:2222")},
		}, MappingAddressAndPortDependent},
		{"mappings of different sockets are not compared", []Observation{
			{Local: ap(sock1), Server: ap(beaconA), Mapped: ap("203.0.113.1:1111")},
			{Local: ap(sock2), Server: ap(beaconB), Mapped: ap("203.0.113.1:2222")},
		}, Undetermined},
	} {
		if got, why := ClassifyMapping(c.obs, ownAddr); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

func TestClassifyAllocation(t *testing.T) {
	obs := func(local []uint16, mapped ...uint16) []Observation {
		var out []Observation
		for i, p := range mapped {
			out = append(out, Observation{Local: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.2"), local[i%len(local)]),
				Server: ap("198.51.100.1:51820"), Mapped: netip.AddrPortFrom(netip.MustParseAddr("203.0.113.1"), p), Sent: i})
		}
		return out
	}
	for _, c := range []struct {
		name string
		obs  []Observation
		want string
	}{
		{"no answers", nil, Undetermined},
		{"no NAT", []Observation{{Local: ap("10.0.0.2:40000"), Mapped: ap("10.0.0.2:40000")}}, AllocationNone},
		{"preserved", obs([]uint16{40000, 41234, 52000}, 40000, 41234, 52000), AllocationPreserved},
		{"sequential", obs([]uint16{40000, 41234, 52000, 33000}, 1024, 1025, 1027, 1028), AllocationSequential},
		{"random", obs([]uint16{40000, 41234, 52000, 33000}, 61000, 1200, 33117, 48001), AllocationRandom},
		{"a repeated mapping counts once", obs([]uint16{40000, 40000, 41234, 41234, 52000}, 1024, 1024, 1025, 1025, 1026), AllocationSequential},
		{"too few", obs([]uint16{40000, 41234}, 61000, 1200), Undetermined},
	} {
		if got, why := ClassifyAllocation(c.obs, ownAddr); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}
