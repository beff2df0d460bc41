package nat

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

func TestBindingRoundTrip(t *testing.T) {
	id := TxID{1, 2, 3}
	req, err := Parse(BindingRequest(id))
	if err != nil || !req.Request || req.TxID != id || req.ChangePort {
		t.Fatalf("request: %+v %v", req, err)
	}
	if change, err := Parse(ChangePortRequest(id)); err != nil || !change.Request || change.TxID != id || !change.ChangePort {
		t.Fatalf("change-port request: %+v %v", change, err)
	}
	for _, mapped := range []netip.AddrPort{netip.MustParseAddrPort("198.51.100.7:40000"), netip.MustParseAddrPort("[2001:db8::9]:5")} {
		resp, err := Parse(BindingSuccess(id, mapped))
		if err != nil || resp.Request || resp.TxID != id || resp.Mapped != mapped {
			t.Fatalf("response for %v: %+v %v", mapped, resp, err)
		}
	}
	if !IsSTUN(BindingRequest(id)) || IsSTUN([]byte{0xB4, 0, 0, 0}) {
		t.Fatal("IsSTUN confuses STUN and burrow datagrams")
	}
}

// A request is as long as the longest answer, so a server answering only
// requests at least as long as their answer serves burrow's own.
func TestRequestsAreAsLongAsTheLongestAnswer(t *testing.T) {
	req := BindingRequest(TxID{1})
	longest := 0
	for _, mapped := range []netip.AddrPort{netip.MustParseAddrPort("198.51.100.7:40000"), netip.MustParseAddrPort("[2001:db8::9]:5")} {
		longest = max(longest, len(BindingSuccess(TxID{1}, mapped)))
	}
	if longest != MaxBindingSuccessLen || len(req) != MaxBindingSuccessLen {
		t.Fatalf("request %d bytes, longest answer %d, MaxBindingSuccessLen %d: want all equal", len(req), longest, MaxBindingSuccessLen)
	}
	if change := ChangePortRequest(TxID{1}); len(change) < MaxBindingSuccessLen {
		t.Fatalf("change-port request %d bytes, shorter than the longest answer (%d)", len(change), MaxBindingSuccessLen)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(BindingRequest(TxID{9}))
	f.Add(ChangePortRequest(TxID{9}))
	f.Add(BindingSuccess(TxID{9}, netip.MustParseAddrPort("192.0.2.1:1")))
	f.Add([]byte{0, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err == nil && !m.Request && !m.Mapped.IsValid() {
			t.Fatal("accepted a response without an address")
		}
	})
}

func TestProberClassifiesNATs(t *testing.T) {
	s1, s2 := netip.MustParseAddrPort("198.18.0.1:3478"), netip.MustParseAddrPort("198.18.0.2:3478")
	local := netip.MustParseAddrPort("10.0.0.5:51820")
	cases := []struct {
		name   string
		mapped [2]netip.AddrPort
		want   Behaviour
	}{
		{"public", [2]netip.AddrPort{local, local}, Public},
		{"endpoint-independent", [2]netip.AddrPort{netip.MustParseAddrPort("203.0.113.1:4000"), netip.MustParseAddrPort("203.0.113.1:4000")}, EndpointIndependent},
		{"address-dependent", [2]netip.AddrPort{netip.MustParseAddrPort("203.0.113.1:4000"), netip.MustParseAddrPort("203.0.113.1:5123")}, AddressDependent},
	}
	for _, tc := range cases {
		now := time.Unix(100, 0)
		p := NewProber([]netip.AddrPort{s1, s2}, []netip.AddrPort{local}, 30*time.Second, rand.NewChaCha8([32]byte{1}), now)
		reqs := p.Due(now)
		if len(reqs) != 2 || p.Due(now) != nil {
			t.Fatalf("%s: due %d requests, then more", tc.name, len(reqs))
		}
		for i, r := range reqs {
			m, _ := Parse(r.Msg)
			if p.Answer(netip.MustParseAddrPort("192.0.2.99:1"), Message{TxID: m.TxID, Mapped: tc.mapped[i]}) {
				t.Fatal("answer from a stranger accepted")
			}
			p.Answer(r.To, Message{TxID: m.TxID, Mapped: tc.mapped[i]})
		}
		if got := p.Behaviour(); got != tc.want {
			t.Errorf("%s: behaviour %v", tc.name, got)
		}
		if tc.want == Public && len(p.Reflexive()) != 0 {
			t.Errorf("public node reports reflexive addresses %v", p.Reflexive())
		}
	}
}

func TestRequestsUseTheInjectedRandomness(t *testing.T) {
	a := NewProber([]netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:3478")}, nil, time.Second, rand.NewChaCha8([32]byte{7}), time.Unix(0, 0))
	b := NewProber([]netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:3478")}, nil, time.Second, rand.NewChaCha8([32]byte{7}), time.Unix(0, 0))
	if !bytes.Equal(a.Due(time.Unix(0, 0))[0].Msg, b.Due(time.Unix(0, 0))[0].Msg) {
		t.Fatal("same seed, different requests")
	}
}
