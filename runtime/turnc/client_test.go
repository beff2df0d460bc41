package turnc

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/pion/stun/v4"
)

// newOffline makes a client whose datagrams go nowhere: enough to test
// what needs no server.
func newOffline(t *testing.T) *Client {
	t.Helper()
	c, err := New(Config{
		Server:   netip.MustParseAddrPort("198.18.0.1:3478"),
		Username: "burrow",
		Send:     func([]byte, netip.AddrPort) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSendQueuesBoundedUntilBound(t *testing.T) {
	c := newOffline(t)
	peer := netip.MustParseAddrPort("198.18.0.9:4000")
	for i := range maxQueued {
		if err := c.Send(peer, []byte{byte(i)}); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
	}
	if err := c.Send(peer, []byte("one too many")); !errors.Is(err, ErrNotBound) {
		t.Fatalf("datagram beyond the queue: %v, want ErrNotBound", err)
	}
	if err := c.Send(peer, make([]byte, maxPayload+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize datagram: %v, want ErrTooLarge", err)
	}
	if st := c.Stats(); st.Dropped != 1 || st.Sent != 0 {
		t.Errorf("stats %+v, want 1 dropped and none sent", st)
	}
	c.Close()
	if err := c.Send(peer, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
}

func TestHandleFromServerSortsDatagrams(t *testing.T) {
	c := newOffline(t)
	peer := netip.MustParseAddrPort("198.18.0.9:4000")
	if err := c.Send(peer, []byte("x")); err != nil { // takes channel 0x4000
		t.Fatal(err)
	}
	binding, err := stun.Build(stun.TransactionID, stun.BindingSuccess)
	if err != nil {
		t.Fatal(err)
	}
	refresh, err := stun.Build(stun.TransactionID, stun.NewType(stun.MethodRefresh, stun.ClassSuccessResponse))
	if err != nil {
		t.Fatal(err)
	}
	indicationPeer := netip.MustParseAddrPort("198.18.0.10:5000")
	for _, tc := range []struct {
		name    string
		in      []byte
		kind    Inbound
		peer    netip.AddrPort
		payload []byte
	}{
		{"ChannelData on a known channel", appendChannelData(nil, 0x4000, []byte("relayed")), PeerData, peer, []byte("relayed")},
		{"ChannelData on an unknown channel", appendChannelData(nil, 0x4001, []byte("stray")), Control, netip.AddrPort{}, nil},
		{"Data indication", buildDataIndication(t, indicationPeer, []byte("indicated")), PeerData, indicationPeer, []byte("indicated")},
		{"TURN answer", refresh.Raw, Control, netip.AddrPort{}, nil},
		{"the daemon's STUN binding answer", binding.Raw, NotTURN, netip.AddrPort{}, nil},
		{"not STUN at all", []byte("burrow datagram"), NotTURN, netip.AddrPort{}, nil},
	} {
		kind, from, payload := c.HandleFromServer(tc.in)
		if kind != tc.kind || from != tc.peer || !bytes.Equal(payload, tc.payload) {
			t.Errorf("%s: got %v, %v, %q; want %v, %v, %q", tc.name, kind, from, payload, tc.kind, tc.peer, tc.payload)
		}
	}
	if st := c.Stats(); st.Received != 2 || st.ReceivedIndications != 1 || st.Dropped != 1 {
		t.Errorf("stats %+v, want 2 received (1 as an indication), 1 dropped", st)
	}
}
