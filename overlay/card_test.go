package overlay

import (
	"bytes"
	"net/netip"
	"testing"

	"burrow/nid"
)

func TestCardRoundTrips(t *testing.T) {
	relayed := netip.MustParseAddrPort("203.0.113.9:49152")
	want := Card{Kind: CardOffer, Info: Info{ID: nid.ID{9}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.2:51820"), netip.MustParseAddrPort("[2001:db8::1]:51820"), relayed}, TURN: relayed, Relays: []nid.ID{{1}}}}
	got, err := ParseCard(want.Append(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Append(nil), want.Append(nil)) || got.Kind != want.Kind || got.Info.TURN != relayed || len(got.Info.Endpoints) != 3 {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseCardRejectsGarbage(t *testing.T) {
	ok := Card{Kind: CardAnswer, Info: Info{ID: nid.ID{1}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820")}}}.Append(nil)
	for name, b := range map[string][]byte{
		"empty":        nil,
		"version":      append([]byte{9}, ok[1:]...),
		"kind zero":    append([]byte{cardVersion, 0}, ok[2:]...),
		"kind unknown": append([]byte{cardVersion, byte(maxCardKind)}, ok[2:]...),
		"truncated":    ok[:len(ok)-1],
		"trailing":     append(append([]byte(nil), ok...), 0),
		"no one":       Card{Kind: CardAnswer, Info: Info{Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820")}}}.Append(nil),
		"nowhere":      Card{Kind: CardAnswer, Info: Info{ID: nid.ID{1}}}.Append(nil),
	} {
		if c, err := ParseCard(b); err == nil {
			t.Errorf("%s: parsed %+v", name, c)
		}
	}
}

func FuzzParseCard(f *testing.F) {
	f.Add(Card{Kind: CardPublished, Info: Info{ID: nid.ID{7}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:51820")}}}.Append(nil))
	relayed := netip.MustParseAddrPort("203.0.113.9:49152")
	f.Add(Card{Kind: CardOffer, Info: Info{ID: nid.ID{3}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.2:51820"), relayed}, TURN: relayed, Relays: []nid.ID{{4}}}}.Append(nil))
	f.Add(Card{Kind: CardAnswer, Info: Info{ID: nid.ID{5}, Endpoints: []netip.AddrPort{netip.MustParseAddrPort("[2001:db8::5]:443")}}}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCard(b)
		if err != nil {
			return
		}
		if again := c.Append(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b)
		}
	})
}
