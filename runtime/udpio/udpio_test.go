//go:build linux

package udpio

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// datagram is one received datagram after splitting coalesced messages.
type datagram struct {
	from netip.AddrPort
	data []byte
}

func listen(t testing.TB, addr string) *Conn {
	t.Helper()
	c, err := Listen(netip.MustParseAddrPort(addr))
	if err != nil {
		t.Fatalf("Listen(%s): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// receive reads until want datagrams arrived and returns them in order, with
// the number of messages that held several coalesced datagrams. A watchdog
// closes c when the datagrams do not come.
func receive(t *testing.T, c *Conn, want int) (got []datagram, coalesced int) {
	t.Helper()
	watchdog := time.AfterFunc(5*time.Second, func() { c.Close() })
	defer watchdog.Stop()
	msgs := make([]Message, 8)
	for i := range msgs {
		msgs[i].Buf = make([]byte, ReadBufSize)
	}
	for len(got) < want {
		n, err := c.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("after %d of %d datagrams: %v", len(got), want, err)
		}
		for _, m := range msgs[:n] {
			size := m.N
			if m.SegmentSize > 0 {
				size = m.SegmentSize
				coalesced++
			}
			for off := 0; off < m.N || off == 0; off += size {
				got = append(got, datagram{m.Addr, bytes.Clone(m.Buf[off:min(off+size, m.N)])})
				if size == 0 {
					break
				}
			}
		}
	}
	return got, coalesced
}

// payloads returns datagrams of the given sizes, each with distinct content.
func payloads(seed byte, sizes ...int) [][]byte {
	out := make([][]byte, len(sizes))
	for i, size := range sizes {
		out[i] = make([]byte, size)
		for j := range out[i] {
			out[i][j] = seed + byte(i*7+j)
		}
	}
	return out
}

func repeat(size, count int) []int {
	sizes := make([]int, count)
	for i := range sizes {
		sizes[i] = size
	}
	return sizes
}

// writeAll sends every payload to dest in one WriteBatch.
func writeAll(t *testing.T, c *Conn, dest netip.AddrPort, payloads [][]byte) {
	t.Helper()
	msgs := make([]Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = Message{Buf: p, Addr: dest}
	}
	if n, err := c.WriteBatch(msgs); n != len(msgs) || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(msgs))
	}
}

func checkDatagrams(t *testing.T, got []datagram, from netip.AddrPort, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d datagrams, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].from != from {
			t.Errorf("datagram %d from %v, want %v", i, got[i].from, from)
		}
		if !bytes.Equal(got[i].data, want[i]) {
			t.Errorf("datagram %d: %d bytes differ from the %d sent", i, len(got[i].data), len(want[i]))
		}
	}
}

func TestSegmentedRunArrivesIntactAndInOrder(t *testing.T) {
	cases := []struct{ name, sender, receiver, dest, source string }{
		{"IPv4", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1", "127.0.0.1"},
		{"IPv6", "[::1]:0", "[::1]:0", "::1", "::1"},
		{"IPv4 to dual-stack", "127.0.0.1:0", "[::]:0", "127.0.0.1", "127.0.0.1"},
		{"dual-stack to IPv4", "[::]:0", "127.0.0.1:0", "127.0.0.1", "127.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if probe, err := Listen(netip.MustParseAddrPort("[::1]:0")); err != nil {
				t.Skipf("no IPv6 loopback: %v", err)
			} else {
				probe.Close()
			}
			sender, receiver := listen(t, tc.sender), listen(t, tc.receiver)
			dest := netip.AddrPortFrom(netip.MustParseAddr(tc.dest), receiver.LocalAddr().Port())
			source := netip.AddrPortFrom(netip.MustParseAddr(tc.source), sender.LocalAddr().Port())

			want := payloads(1, append(repeat(1000, 40), 300)...)
			writeAll(t, sender, dest, want)
			got, coalesced := receive(t, receiver, len(want))
			checkDatagrams(t, got, source, want)
			if !sender.GSO() || !receiver.GRO() {
				t.Logf("GSO %v, GRO %v: coalescing not checked", sender.GSO(), receiver.GRO())
			} else if coalesced == 0 {
				t.Errorf("no message arrived coalesced although GSO and GRO are on")
			}

			control := []byte("control")
			if err := sender.WriteTo(control, dest); err != nil {
				t.Fatalf("WriteTo: %v", err)
			}
			got, _ = receive(t, receiver, 1)
			checkDatagrams(t, got, source, [][]byte{control})
		})
	}
}

func TestMixedDestinations(t *testing.T) {
	sender := listen(t, "127.0.0.1:0")
	receivers := []*Conn{listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")}
	// Runs of every kind: broken by address, by a longer datagram, after a
	// shorter one, by the segment and byte limits; empty datagrams.
	plan := []struct {
		to    int
		sizes []int
	}{
		{0, repeat(500, 5)},
		{1, repeat(500, 3)},
		{0, []int{200}},
		{2, []int{600, 600, 700, 600, 0, 0}},
		{0, repeat(100, 70)},
		{1, repeat(1400, 50)},
		{2, []int{1, 1, 1}},
	}
	var msgs []Message
	want := make([][][]byte, len(receivers))
	for i, step := range plan {
		dest := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), receivers[step.to].LocalAddr().Port())
		for _, p := range payloads(byte(i*31), step.sizes...) {
			msgs = append(msgs, Message{Buf: p, Addr: dest})
			want[step.to] = append(want[step.to], p)
		}
	}
	if n, err := sender.WriteBatch(msgs); n != len(msgs) || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(msgs))
	}
	for r, receiver := range receivers {
		t.Run(fmt.Sprint("receiver ", r), func(t *testing.T) {
			got, _ := receive(t, receiver, len(want[r]))
			checkDatagrams(t, got, sender.LocalAddr(), want[r])
		})
	}
}

func TestSegmentRun(t *testing.T) {
	a := netip.MustParseAddrPort("192.0.2.1:1")
	b := netip.MustParseAddrPort("192.0.2.2:1")
	msgs := func(addr netip.AddrPort, sizes ...int) []Message {
		out := make([]Message, len(sizes))
		for i, size := range sizes {
			out[i] = Message{Buf: make([]byte, size), Addr: addr}
		}
		return out
	}
	cases := []struct {
		name string
		msgs []Message
		want int
	}{
		{"single", msgs(a, 100), 1},
		{"equal", msgs(a, 100, 100, 100), 3},
		{"shorter last ends the run", msgs(a, 100, 100, 50, 100), 3},
		{"longer breaks the run", msgs(a, 100, 200), 1},
		{"other address breaks the run", append(msgs(a, 100, 100), msgs(b, 100)...), 2},
		{"segment limit", msgs(a, repeat(10, 70)...), maxSegments},
		{"byte limit", msgs(a, repeat(1400, 50)...), maxGSOBytes / 1400},
		{"empty datagram goes alone", msgs(a, 0, 0), 1},
		{"empty datagram ends a run", msgs(a, 10, 0), 1},
	}
	for _, c := range cases {
		if got := segmentRun(c.msgs); got != c.want {
			t.Errorf("%s: run of %d, want %d", c.name, got, c.want)
		}
	}
}

// TestGSORefusedBySocketIsSwitchedOff sends a run from a socket without UDP
// checksums, which the kernel will not segment (EINVAL) but sends datagram
// by datagram: everything must arrive and GSO must end up off.
func TestGSORefusedBySocketIsSwitchedOff(t *testing.T) {
	sender, receiver := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	if !sender.GSO() {
		t.Skip("kernel without UDP GSO")
	}
	var err error
	if cerr := sender.raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatalf("SO_NO_CHECK: %v", err)
	}
	want := payloads(5, repeat(1000, 10)...)
	writeAll(t, sender, receiver.LocalAddr(), want)
	if sender.GSO() {
		t.Error("GSO still on after the kernel refused it")
	}
	got, _ := receive(t, receiver, len(want))
	checkDatagrams(t, got, sender.LocalAddr(), want)
}

// TestFailedSendKeepsGSO sends a run to port 0, which the kernel refuses
// with EINVAL with or without segmentation: the error must surface and GSO
// must stay on.
func TestFailedSendKeepsGSO(t *testing.T) {
	sender := listen(t, "127.0.0.1:0")
	if !sender.GSO() {
		t.Skip("kernel without UDP GSO")
	}
	dest := netip.MustParseAddrPort("127.0.0.1:0")
	msgs := []Message{{Buf: make([]byte, 100), Addr: dest}, {Buf: make([]byte, 100), Addr: dest}}
	n, err := sender.WriteBatch(msgs)
	if n != 0 || err == nil {
		t.Fatalf("WriteBatch to port 0 = %d, %v; want 0 and an error", n, err)
	}
	if !sender.GSO() {
		t.Error("GSO switched off by an error that was not GSO's")
	}
}

func TestCloseUnblocksAndEndsTheConn(t *testing.T) {
	c := listen(t, "127.0.0.1:0")
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadBatch([]Message{{Buf: make([]byte, 100)}})
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadBatch after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still blocked 5 s after Close")
	}
	dest := netip.MustParseAddrPort("127.0.0.1:9")
	if _, err := c.WriteBatch([]Message{{Buf: []byte("x"), Addr: dest}}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteBatch after Close: %v, want net.ErrClosed", err)
	}
	if err := c.WriteTo([]byte("x"), dest); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteTo after Close: %v, want net.ErrClosed", err)
	}
}

func TestListenRefusesInvalidAddress(t *testing.T) {
	if c, err := Listen(netip.AddrPort{}); err == nil {
		c.Close()
		t.Fatal("Listen on the zero AddrPort succeeded")
	}
}

// TestReceiveTimeIsTheKernels: a datagram that waited in the socket's
// queue says when the kernel took it in, so the reader can tell how long
// it waited.
func TestReceiveTimeIsTheKernels(t *testing.T) {
	if err := timestampsOffered(); err != nil {
		t.Skipf("skipping: no receive timestamps here, Message.Received stays zero: %v", err)
	}
	receiver := listen(t, "127.0.0.1:0")
	sender := listen(t, "127.0.0.1:0")
	sent := time.Now()
	writeAll(t, sender, receiver.LocalAddr(), payloads(1, 100))
	const wait = 50 * time.Millisecond
	time.Sleep(wait)
	msgs := []Message{{Buf: make([]byte, ReadBufSize)}}
	if _, err := receiver.ReadBatch(msgs); err != nil {
		t.Fatal(err)
	}
	read := time.Now()
	received := time.Unix(0, msgs[0].Received)
	if received.Before(sent.Add(-time.Millisecond)) || received.After(read) {
		t.Fatalf("received at %v; sent at %v, read at %v", received, sent, read)
	}
	if waited := read.Sub(received); waited < wait {
		t.Errorf("the datagram waited %v in the queue by its timestamp; it waited at least %v", waited, wait)
	}
}

// timestampsOffered tells whether a UDP socket takes SO_TIMESTAMPNS; Linux
// does, but qemu-user (which runs the arm tests) refuses the option.
func timestampsOffered() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
}

// TestTryReadBatchReturnsWhatIsThere: with nothing queued it returns at
// once with nothing; with datagrams queued it returns them.
func TestTryReadBatchReturnsWhatIsThere(t *testing.T) {
	receiver := listen(t, "127.0.0.1:0")
	sender := listen(t, "127.0.0.1:0")
	msgs := []Message{{Buf: make([]byte, ReadBufSize)}, {Buf: make([]byte, ReadBufSize)}}
	if n, err := receiver.TryReadBatch(msgs); n != 0 || err != nil {
		t.Fatalf("TryReadBatch on an empty socket = %d, %v; want 0, nil", n, err)
	}
	writeAll(t, sender, receiver.LocalAddr(), payloads(2, 100))
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := receiver.TryReadBatch(msgs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if got := msgs[0].Buf[:msgs[0].N]; !bytes.Equal(got, payloads(2, 100)[0]) {
				t.Fatalf("read %x, want the datagram sent", got)
			}
			return
		}
		if n != 0 || time.Now().After(deadline) {
			t.Fatalf("TryReadBatch = %d after one datagram was sent", n)
		}
		time.Sleep(time.Millisecond)
	}
}
