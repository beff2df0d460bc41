package link

import (
	"net/netip"
	"slices"
	"testing"

	"burrow/nid"
)

// A dial tries the direct endpoints alone first, then adds one relayed
// endpoint per attempt in their order, so the preferred relay gets a head
// start over the next; with nothing direct, the first relay goes at once.
func TestDialAddsOneRelayPerAttempt(t *testing.T) {
	peer := nid.FromUint128(0, 9)
	direct := UDPEndpoint(netip.MustParseAddrPort("198.18.0.5:51820"))
	r1, r2 := RelayEndpoint(nid.FromUint128(0, 1), peer), RelayEndpoint(nid.FromUint128(0, 2), peer)
	for _, c := range []struct {
		endpoints []Endpoint
		want      [][]Endpoint // per attempt
	}{
		{[]Endpoint{direct, r1, r2}, [][]Endpoint{{direct}, {direct, r1}, {direct, r1, r2}, {direct, r1, r2}}},
		{[]Endpoint{r1, r2}, [][]Endpoint{{r1}, {r1}, {r1, r2}}},
		{[]Endpoint{direct}, [][]Endpoint{{direct}, {direct}}},
	} {
		d := &Dial{Endpoints: c.endpoints}
		for try, want := range c.want {
			d.tries = try
			if got := d.attemptEndpoints(); !slices.Equal(got, want) {
				t.Errorf("endpoints %v, attempt %d: tried %v, want %v", c.endpoints, try+1, got, want)
			}
		}
	}
}
