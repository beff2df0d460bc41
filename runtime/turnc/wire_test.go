package turnc

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/pion/stun/v4"
)

func TestParseChannelData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		ok      bool
		number  uint16
		payload []byte
	}{
		{"empty payload", []byte{0x40, 0x00, 0, 0}, true, 0x4000, []byte{}},
		{"payload", []byte{0x40, 0x01, 0, 3, 'a', 'b', 'c'}, true, 0x4001, []byte("abc")},
		{"padding after payload", []byte{0x7f, 0xff, 0, 3, 'a', 'b', 'c', 0}, true, 0x7fff, []byte("abc")},
		{"short header", []byte{0x40, 0x00, 0}, false, 0, nil},
		{"length beyond datagram", []byte{0x40, 0x00, 0, 4, 'a', 'b', 'c'}, false, 0, nil},
		{"STUN message", []byte{0x00, 0x01, 0, 0}, false, 0, nil},
		{"reserved range", []byte{0x80, 0x00, 0, 0}, false, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			number, payload, ok := parseChannelData(tc.in)
			if ok != tc.ok || number != tc.number || !bytes.Equal(payload, tc.payload) {
				t.Fatalf("parseChannelData(%x) = %#x, %q, %v; want %#x, %q, %v", tc.in, number, payload, ok, tc.number, tc.payload, tc.ok)
			}
		})
	}
}

func TestChannelDataRoundTrip(t *testing.T) {
	payload := bytes.Repeat([]byte{0xa5}, 1401)
	b := appendChannelData(nil, 0x4abc, payload)
	if len(b) != channelDataHeaderLen+len(payload) {
		t.Fatalf("framed %d bytes into %d, want %d", len(payload), len(b), channelDataHeaderLen+len(payload))
	}
	number, got, ok := parseChannelData(b)
	if !ok || number != 0x4abc || !bytes.Equal(got, payload) {
		t.Fatalf("round trip gave %#x, %d bytes, %v", number, len(got), ok)
	}
}

// buildDataIndication makes a Data indication with pion/stun, the oracle
// for burrow's allocation-free parser.
func buildDataIndication(t testing.TB, peer netip.AddrPort, payload []byte) []byte {
	t.Helper()
	m, err := stun.Build(stun.TransactionID, stun.NewType(stun.MethodData, stun.ClassIndication),
		xorAddressAttr{typ: stun.AttrXORPeerAddress, addr: peer},
		stun.RawAttribute{Type: stun.AttrData, Value: payload}, stun.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	return m.Raw
}

func TestParseDataIndication(t *testing.T) {
	for _, peer := range []netip.AddrPort{
		netip.MustParseAddrPort("198.18.0.7:49152"),
		netip.MustParseAddrPort("[2001:db8::1]:3478"),
	} {
		for _, size := range []int{0, 1, 3, 4, 1400, 65000} {
			payload := bytes.Repeat([]byte{byte(size)}, size)
			got, data, ok := parseDataIndication(buildDataIndication(t, peer, payload))
			if !ok || got != peer || !bytes.Equal(data, payload) {
				t.Errorf("peer %v, %d bytes: got %v, %d bytes, %v", peer, size, got, len(data), ok)
			}
		}
	}
	refresh, err := stun.Build(stun.TransactionID, stun.NewType(stun.MethodRefresh, stun.ClassSuccessResponse))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := parseDataIndication(refresh.Raw); ok {
		t.Error("a Refresh answer parsed as a Data indication")
	}
	whole := buildDataIndication(t, netip.MustParseAddrPort("198.18.0.7:1"), []byte("hello"))
	for n := range len(whole) - 8 { // cut before the fingerprint's end
		if _, _, ok := parseDataIndication(whole[:n]); ok {
			t.Errorf("a Data indication cut to %d of %d bytes parsed", n, len(whole))
		}
	}
}

func TestParsersAllocateNothing(t *testing.T) {
	indication := buildDataIndication(t, netip.MustParseAddrPort("198.18.0.7:49152"), make([]byte, 1400))
	channelData := appendChannelData(nil, 0x4000, make([]byte, 1400))
	allocs := testing.AllocsPerRun(100, func() {
		parseDataIndication(indication)
		parseChannelData(channelData)
	})
	if allocs != 0 {
		t.Errorf("parsing allocated %v times per run", allocs)
	}
}

// FuzzParseDataIndication checks the parser against pion/stun's decoder:
// whatever burrow accepts, pion decodes to the same payload and, where it
// takes the address (pion also insists on the reserved byte being zero),
// the same peer; and the parsed datagram survives a round trip.
func FuzzParseDataIndication(f *testing.F) {
	f.Add(buildDataIndication(f, netip.MustParseAddrPort("198.18.0.7:49152"), []byte("datagram")))
	f.Add(buildDataIndication(f, netip.MustParseAddrPort("[2001:db8::1]:3478"), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		peer, payload, ok := parseDataIndication(b)
		if !ok {
			return
		}
		m := &stun.Message{Raw: append([]byte(nil), b...)}
		if err := m.Decode(); err != nil {
			t.Fatalf("burrow parsed what pion rejects (%v): %x", err, b)
		}
		if data, err := m.Get(stun.AttrData); err != nil || !bytes.Equal(data, payload) {
			t.Fatalf("payload %x, pion decodes %x (%v)", payload, data, err)
		}
		if want, err := getXORAddress(m, stun.AttrXORPeerAddress); err == nil && want != unmap(peer) {
			t.Fatalf("peer %v, pion decodes %v", peer, want)
		}
		again, againPayload, ok := parseDataIndication(buildDataIndication(t, peer, payload))
		if !ok || again != unmap(peer) || !bytes.Equal(againPayload, payload) {
			t.Fatalf("round trip of %v, %x gave %v, %x, %v", peer, payload, again, againPayload, ok)
		}
	})
}
