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
	"burrow/runtime/udpio"
)

// A beacon answers STUN at the port after its own: a padded request gets
// the asker's address, a change-port request gets it from the beacon's own
// port, and one shorter than the answer gets nothing.
func TestBeaconAnswersSTUNAtItsSecondPort(t *testing.T) {
	main, err := udpio.Listen(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Skipf("no loopback UDP socket: %v", err)
	}
	defer main.Close()
	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil)), conn: main}
	d.serveSecondSTUNPort(main.LocalAddr())
	if d.tr.stun == nil {
		t.Skip("the port after the main socket's is taken")
	}
	defer d.tr.stun.Close()
	second, _ := nat.SecondPort(main.LocalAddr())

	asker, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer asker.Close()
	// ask sends req to the second port and returns the answer and the
	// port it came from.
	ask := func(req []byte) (nat.Message, uint16, bool) {
		if _, err := asker.WriteToUDPAddrPort(req, second); err != nil {
			t.Fatal(err)
		}
		asker.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		buf := make([]byte, 1500)
		n, from, err := asker.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nat.Message{}, 0, false
		}
		m, err := nat.Parse(buf[:n])
		return m, from.Port(), err == nil
	}
	self := asker.LocalAddr().(*net.UDPAddr).AddrPort()
	if m, port, ok := ask(nat.BindingRequest(nat.TxID{1})); !ok || m.Request || m.Mapped != self || port != second.Port() {
		t.Fatalf("padded request: answer %+v (%v) from port %d, want the asker's address %v from %d", m, ok, port, self, second.Port())
	}
	// burrow netcheck's filtering test: answered from the main socket.
	if m, port, ok := ask(nat.ChangePortRequest(nat.TxID{2})); !ok || m.Mapped != self || port != main.LocalAddr().Port() {
		t.Fatalf("change-port request: answer %+v (%v) from port %d, want one from the beacon's own port %d", m, ok, port, main.LocalAddr().Port())
	}
	short, err := stun.Build(stun.BindingRequest, stun.TransactionID)
	if err != nil {
		t.Fatal(err)
	}
	if m, _, ok := ask(short.Raw); ok {
		t.Fatalf("a %d-byte request got an answer: %+v", len(short.Raw), m)
	}
}
