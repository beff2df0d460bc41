package runtime

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/pion/stun/v4"

	"burrow/nat"
)

// A beacon answers STUN at the port after its own: a padded request gets
// the asker's address, one shorter than the answer gets nothing.
func TestBeaconAnswersSTUNAtItsSecondPort(t *testing.T) {
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Skipf("no loopback UDP socket: %v", err)
	}
	second := probe.LocalAddr().(*net.UDPAddr).AddrPort()
	probe.Close()
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	d.serveSecondSTUNPort(netip.AddrPortFrom(second.Addr(), second.Port()-1))
	if d.tr.stun == nil {
		t.Skip("the port was taken meanwhile")
	}
	defer d.tr.stun.Close()

	asker, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	ask := func(req []byte) (nat.Message, bool) {
		if _, err := asker.WriteToUDPAddrPort(req, second); err != nil {
			t.Fatal(err)
		}
		asker.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 1500)
		n, _, err := asker.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nat.Message{}, false
		}
		m, err := nat.Parse(buf[:n])
		return m, err == nil
	}
	if m, ok := ask(nat.BindingRequest(nat.TxID{1})); !ok || m.Request || m.Mapped != asker.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Fatalf("padded request: answer %+v (%v), want the asker's address %v", m, ok, asker.LocalAddr())
	}
	short, err := stun.Build(stun.BindingRequest, stun.TransactionID)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := ask(short.Raw); ok {
		t.Fatalf("a %d-byte request got an answer: %+v", len(short.Raw), m)
	}
}
