package link

import (
	"net/netip"
	"testing"

	"burrow/nid"
)

// A direct IPv6 path is the best there is: datagrams arriving over IPv4
// do not move a link off it (roaming within IPv6 does), and a link on
// IPv4 counts the peer's IPv6 endpoints as better candidates.
func TestDirectIPv6IsTheBestPath(t *testing.T) {
	v4 := UDPEndpoint(netip.MustParseAddrPort("198.51.100.7:51820"))
	v6 := UDPEndpoint(netip.MustParseAddrPort("[2001:db8::7]:51820"))
	roamed6 := UDPEndpoint(netip.MustParseAddrPort("[2001:db8::8]:51820"))
	mapped := UDPEndpoint(netip.MustParseAddrPort("[::ffff:198.51.100.7]:51820"))
	relay := RelayEndpoint(nid.ID{1}, nid.ID{2})
	if !v6.IsBest() || v4.IsBest() || mapped.IsBest() || relay.IsBest() || (Endpoint{Via: TURN, Addr: v6.Addr}).IsBest() {
		t.Fatal("only a direct IPv6 endpoint is the best path")
	}
	var l Link
	l.SetEndpoint(v4)
	l.AddCandidates([]Endpoint{v4, v6, relay})
	if got := l.betterCandidates(); len(got) != 1 || got[0] != v6 || !l.hasBetterCandidate() {
		t.Fatalf("better candidates of a link on IPv4: %v", got)
	}
	l.SetEndpoint(v6)
	l.SetEndpoint(v4)
	if l.Endpoint() != v6 {
		t.Fatalf("an IPv4 datagram moved the link off IPv6 to %v", l.Endpoint())
	}
	l.SetEndpoint(roamed6)
	if l.Endpoint() != roamed6 || l.hasBetterCandidate() {
		t.Fatalf("the link did not roam within IPv6: %v", l.Endpoint())
	}
}
