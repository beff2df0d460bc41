package turnc_test

import (
	"burrow/leaktest"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/stun/v4"

	"burrow/netlab"
	"burrow/netlab/labtest"
	"burrow/runtime/turnc"
	"burrow/runtime/udpio"
)

const (
	turnUser     = "burrow"
	turnPassword = "relay-secret"
	turnRealm    = "burrow.test"
	turnPort     = 3478
)

// checkGoroutines fails the test if a goroutine of the code under test
// outlives it.
func checkGoroutines(t *testing.T) {
	leaktest.Check(t, "burrow/runtime/turnc", "github.com/pion/", "burrow/runtime/udpio")
}

// turnServer is coturn running in a lab namespace.
type turnServer struct {
	host *netlab.Host
	args []string
	proc *netlab.Process
	addr netip.AddrPort
}

// startTURNServer starts coturn on a new lab host with burrow's test
// credentials; extra adds flags, such as shorter lifetimes.
func startTURNServer(t *testing.T, lab *netlab.Lab, extra ...string) *turnServer {
	t.Helper()
	if _, err := exec.LookPath("turnserver"); err != nil {
		t.Skip("skipping: needs coturn's turnserver (apt-get install coturn)")
	}
	host, err := lab.AddHost("turn")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ip := host.Addr.String()
	args := append([]string{
		"-n", "--listening-ip=" + ip, "--relay-ip=" + ip,
		"--lt-cred-mech", "--user=" + turnUser + ":" + turnPassword, "--realm=" + turnRealm,
		"--no-tls", "--no-dtls", "--no-cli", "--verbose",
		"--log-file=stdout", "--simple-log",
		"--pidfile=" + dir + "/turnserver.pid", "--userdb=" + dir + "/turndb",
	}, extra...)
	s := &turnServer{host: host, args: args, addr: netip.AddrPortFrom(host.Addr, turnPort)}
	s.start(t)
	return s
}

func (s *turnServer) start(t *testing.T) {
	t.Helper()
	proc, err := s.host.Start("turnserver", s.args...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.host.WaitListening(ctx, "udp", turnPort); err != nil {
		t.Fatal(err)
	}
	s.proc = proc
}

// restart stops coturn and starts it again: every allocation is gone.
func (s *turnServer) restart(t *testing.T) {
	t.Helper()
	if err := s.proc.Stop(); err != nil {
		t.Fatal(err)
	}
	s.start(t)
}

// datagram is what a node received.
type datagram struct {
	from    netip.AddrPort
	viaTURN bool
	data    []byte
}

// node stands in for a burrow daemon: one UDP socket in a lab namespace and
// a reader that hands the TURN server's datagrams to the client the way the
// daemon's socket reader does.
type node struct {
	conn       *udpio.Conn
	turn       atomic.Pointer[turnc.Client]
	inbox      chan datagram
	overflow   atomic.Uint64
	count      atomic.Uint64 // datagrams received, also when the inbox is full
	bytes      atomic.Uint64
	readerDone chan struct{}
	// countOnly makes keep count datagrams without holding copies: while a
	// test counts the allocations of a send, the receiving reader, which
	// runs meanwhile, must make none of its own.
	countOnly atomic.Bool
}

// listenIn opens a UDP socket inside the host's namespace; it stays there.
func listenIn(t *testing.T, host *netlab.Host) *udpio.Conn {
	t.Helper()
	var conn *udpio.Conn
	err := host.Do(func() (err error) {
		conn, err = udpio.Listen(netip.AddrPortFrom(host.Addr, 0))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// startNode opens the node's socket and starts its reader; the node
// closes with the test.
func startNode(t *testing.T, host *netlab.Host) *node {
	t.Helper()
	n := &node{conn: listenIn(t, host), inbox: make(chan datagram, 4096), readerDone: make(chan struct{})}
	go n.read()
	t.Cleanup(func() {
		if c := n.turn.Load(); c != nil {
			c.Close()
		}
		n.conn.Close()
		<-n.readerDone
	})
	return n
}

// startTURNNode starts a node with a TURN client holding an allocation.
func startTURNNode(t *testing.T, host *netlab.Host, server netip.AddrPort, tune func(*turnc.Config)) (*node, *turnc.Client) {
	t.Helper()
	n := startNode(t, host)
	c := n.allocate(t, turnc.Config{Server: server, Username: turnUser, Password: turnPassword, Realm: turnRealm, Send: n.conn.WriteTo}, tune)
	return n, c
}

// allocate makes the node's TURN client, as configured and tuned, and
// allocates.
func (n *node) allocate(t *testing.T, cfg turnc.Config, tune func(*turnc.Config)) *turnc.Client {
	t.Helper()
	if tune != nil {
		tune(&cfg)
	}
	c, err := turnc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.turn.Store(c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	relayed, err := c.Allocate(ctx)
	if err != nil {
		t.Fatalf("allocate: %v", err)
	}
	if !relayed.IsValid() || relayed.Addr() != cfg.Server.Addr() {
		t.Fatalf("relayed address %v, want one on the server's %v", relayed, cfg.Server.Addr())
	}
	return c
}

// read is the daemon's socket reader in small: split coalesced datagrams,
// give those from the TURN server to the client, keep peers' datagrams.
func (n *node) read() {
	defer close(n.readerDone)
	msgs := make([]udpio.Message, 16)
	for i := range msgs {
		msgs[i].Buf = make([]byte, udpio.ReadBufSize)
	}
	for {
		count, err := n.conn.ReadBatch(msgs)
		if err != nil {
			return
		}
		for _, m := range msgs[:count] {
			data := m.Buf[:m.N]
			seg := m.SegmentSize
			if seg <= 0 {
				seg = len(data)
			}
			for len(data) > 0 {
				one := data[:min(seg, len(data))]
				data = data[len(one):]
				n.handle(m.Addr, one)
			}
		}
	}
}

func (n *node) handle(from netip.AddrPort, b []byte) {
	if c := n.turn.Load(); c != nil && from == c.Server() {
		kind, peer, payload := c.HandleFromServer(b)
		switch kind {
		case turnc.Control:
			return
		case turnc.PeerData:
			n.keep(peer, true, payload)
			return
		}
	}
	n.keep(from, false, b)
}

func (n *node) keep(from netip.AddrPort, viaTURN bool, b []byte) {
	n.count.Add(1)
	n.bytes.Add(uint64(len(b)))
	if n.countOnly.Load() {
		return
	}
	select {
	case n.inbox <- datagram{from: from, viaTURN: viaTURN, data: bytes.Clone(b)}:
	default:
		n.overflow.Add(1)
	}
}

// drain empties the inbox once nothing arrived for a moment.
func (n *node) drain() {
	for {
		select {
		case <-n.inbox:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

// sendFunc sends one datagram from a node: through its TURN client or
// straight from its socket.
type sendFunc func(to netip.AddrPort, b []byte) error

func plainSend(n *node) sendFunc {
	return func(to netip.AddrPort, b []byte) error { return n.conn.WriteTo(b, to) }
}

var greeting = []byte("hello from burrow")

// connect greets both ways until each side heard the other: only once
// both have sent does each end hold the permission that lets the other's
// datagrams through the relay.
func connect(t *testing.T, a, b *node, aSend, bSend sendFunc, aAddr, bAddr netip.AddrPort) {
	t.Helper()
	var aHeard, bHeard bool
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !aHeard || !bHeard {
		select {
		case d := <-a.inbox:
			aHeard = aHeard || bytes.Equal(d.data, greeting)
		case d := <-b.inbox:
			bHeard = bHeard || bytes.Equal(d.data, greeting)
		case <-tick.C:
			// A send refused while the channel is being bound is retried here.
			_ = aSend(bAddr, greeting)
			_ = bSend(aAddr, greeting)
		case <-deadline:
			t.Fatalf("no greeting through the relay: a heard b %v, b heard a %v", aHeard, bHeard)
		}
	}
	a.drain()
	b.drain()
}

// testDatagram is datagram seq of a run: a sequence number and a pattern,
// 8 to 1400 bytes long.
func testDatagram(seq int) []byte {
	size := 8 + seq*397%1393
	if seq%10 == 0 {
		size = 1400
	}
	b := make([]byte, size)
	copy(b, "brw1")
	binary.BigEndian.PutUint32(b[4:], uint32(seq))
	for i := 8; i < size; i++ {
		b[i] = byte(seq + i*31)
	}
	return b
}

// exchange sends count datagrams of varied sizes and checks that each
// arrives once, intact and from the expected address. It sends in windows
// and waits for each, so the relay's queues stay short and nothing may be
// lost.
func exchange(t *testing.T, send sendFunc, dest netip.AddrPort, to *node, wantFrom netip.AddrPort, wantViaTURN bool, count int) {
	t.Helper()
	const window = 64
	for start := 0; start < count; start += window {
		end := min(start+window, count)
		for seq := start; seq < end; seq++ {
			if err := send(dest, testDatagram(seq)); err != nil {
				t.Fatalf("send %d: %v", seq, err)
			}
		}
		pending := map[int]bool{}
		for seq := start; seq < end; seq++ {
			pending[seq] = true
		}
		timeout := time.After(5 * time.Second)
		for len(pending) > 0 {
			select {
			case d := <-to.inbox:
				if !bytes.HasPrefix(d.data, []byte("brw1")) {
					continue // a late greeting
				}
				seq := int(binary.BigEndian.Uint32(d.data[4:]))
				if !pending[seq] {
					t.Fatalf("datagram %d arrived twice or out of its window [%d,%d)", seq, start, end)
				}
				if !bytes.Equal(d.data, testDatagram(seq)) {
					t.Fatalf("datagram %d arrived damaged: %d bytes, want %d", seq, len(d.data), len(testDatagram(seq)))
				}
				if d.from != wantFrom || d.viaTURN != wantViaTURN {
					t.Fatalf("datagram %d came from %v (via TURN %v), want %v (via TURN %v)", seq, d.from, d.viaTURN, wantFrom, wantViaTURN)
				}
				delete(pending, seq)
			case <-timeout:
				t.Fatalf("%d of the datagrams %d to %d did not arrive", len(pending), start, end-1)
			}
		}
	}
}

// TestRelayBetweenTwoAllocations: two nodes, each with an allocation,
// exchange datagrams through each other's relayed address both ways, as
// ChannelData.
func TestRelayBetweenTwoAllocations(t *testing.T) {
	checkGoroutines(t)
	lab := labtest.New(t)
	server := startTURNServer(t, lab)
	hostA, hostB := addHost(t, lab, "a"), addHost(t, lab, "b")
	a, turnA := startTURNNode(t, hostA, server.addr, nil)
	b, turnB := startTURNNode(t, hostB, server.addr, nil)
	relayA, relayB := turnA.RelayedAddr(), turnB.RelayedAddr()
	if turnA.MappedAddr() != a.conn.LocalAddr() {
		t.Errorf("mapped address %v, want the socket's %v (no NAT here)", turnA.MappedAddr(), a.conn.LocalAddr())
	}

	connect(t, a, b, turnA.Send, turnB.Send, relayA, relayB)
	const count = 3000
	exchange(t, turnA.Send, relayB, b, relayA, true, count)
	exchange(t, turnB.Send, relayA, a, relayB, true, count)

	for name, c := range map[string]*turnc.Client{"a": turnA, "b": turnB} {
		st := c.Stats()
		t.Logf("%s: %+v", name, st)
		if st.Received < count || st.Sent < count {
			t.Errorf("%s relayed %d and received %d datagrams, want at least %d each", name, st.Sent, st.Received, count)
		}
		if st.ReceivedIndications != 0 {
			t.Errorf("%s received %d datagrams as Data indications, want all as ChannelData", name, st.ReceivedIndications)
		}
	}

	payload := testDatagram(10)
	b.countOnly.Store(true)
	if allocs := testing.AllocsPerRun(200, func() { turnA.Send(relayB, payload) }); allocs != 0 {
		t.Errorf("Send on a bound channel allocated %v times per datagram", allocs)
	}
	channelData := append([]byte{0x40, 0x00, 0, byte(len(payload))}, payload...)
	if allocs := testing.AllocsPerRun(200, func() { turnA.HandleFromServer(channelData) }); allocs != 0 {
		t.Errorf("HandleFromServer allocated %v times per ChannelData message", allocs)
	}
}

// TestRelayToPlainPeer is the daemon's case: a node relays to a peer's own
// socket address, and the peer answers straight to the relayed address.
func TestRelayToPlainPeer(t *testing.T) {
	checkGoroutines(t)
	lab := labtest.New(t)
	server := startTURNServer(t, lab)
	relayed, turnA := startTURNNode(t, addHost(t, lab, "a"), server.addr, nil)
	plain := startNode(t, addHost(t, lab, "b"))
	relayA, addrB := turnA.RelayedAddr(), plain.conn.LocalAddr()

	connect(t, relayed, plain, turnA.Send, plainSend(plain), relayA, addrB)
	exchange(t, turnA.Send, addrB, plain, relayA, false, 1000)
	exchange(t, plainSend(plain), relayA, relayed, addrB, true, 1000)
	if st := turnA.Stats(); st.ReceivedIndications != 0 {
		t.Errorf("%d datagrams came as Data indications, want all as ChannelData", st.ReceivedIndications)
	}
}

func TestWrongCredentialsFailClearly(t *testing.T) {
	checkGoroutines(t)
	lab := labtest.New(t)
	server := startTURNServer(t, lab)
	host := addHost(t, lab, "a")
	for _, tc := range []struct {
		name, password, realm string
		want                  string
	}{
		{"wrong password", "guessed", turnRealm, "check username, password and realm"},
		{"other realm", turnPassword, "elsewhere", `announces realm "burrow.test", configured is "elsewhere"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startNode(t, host)
			c, err := turnc.New(turnc.Config{Server: server.addr, Username: turnUser, Password: tc.password, Realm: tc.realm, Send: n.conn.WriteTo})
			if err != nil {
				t.Fatal(err)
			}
			n.turn.Store(c)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err = c.Allocate(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Allocate: %v; want an error saying %q", err, tc.want)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the refusal took %v to report", took)
			}
			var refused *turnc.ServerError
			if tc.name == "wrong password" && (!errors.As(err, &refused) || refused.Code != stun.CodeUnauthorized) {
				t.Errorf("error %v is not a 401 ServerError", err)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
}

// TestAllocationKeptAlive runs longer than the allocation, permission and
// nonce lifetimes coturn grants here: refreshes, channel renewals and
// retries after 438 (stale nonce) must keep every datagram flowing.
func TestAllocationKeptAlive(t *testing.T) {
	checkGoroutines(t)
	lab := labtest.New(t)
	server := startTURNServer(t, lab, "--max-allocate-lifetime=4", "--permission-lifetime=3",
		"--channel-lifetime=6", "--stale-nonce=2")
	fast := func(cfg *turnc.Config) { cfg.BindingRefresh = time.Second }
	a, turnA := startTURNNode(t, addHost(t, lab, "a"), server.addr, fast)
	b, turnB := startTURNNode(t, addHost(t, lab, "b"), server.addr, fast)
	relayA, relayB := turnA.RelayedAddr(), turnB.RelayedAddr()
	connect(t, a, b, turnA.Send, turnB.Send, relayA, relayB)

	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); {
		exchange(t, turnA.Send, relayB, b, relayA, true, 5)
		exchange(t, turnB.Send, relayA, a, relayB, true, 5)
		time.Sleep(100 * time.Millisecond)
	}
	for name, c := range map[string]*turnc.Client{"a": turnA, "b": turnB} {
		st := c.Stats()
		t.Logf("%s: %+v", name, st)
		if st.Refreshes < 4 {
			t.Errorf("%s refreshed %d times in 12 s of a 4 s allocation", name, st.Refreshes)
		}
		if st.Bindings < 4 {
			t.Errorf("%s bound or renewed channels %d times in 12 s of 3 s permissions", name, st.Bindings)
		}
		if st.StaleNonces == 0 {
			t.Errorf("%s never met a stale nonce with nonces expiring every 2 s", name)
		}
		if st.Reallocations != 0 {
			t.Errorf("%s re-allocated %d times; the allocation should have lasted", name, st.Reallocations)
		}
	}
	if turnA.RelayedAddr() != relayA || turnB.RelayedAddr() != relayB {
		t.Error("a relayed address changed")
	}
}

// TestReallocatesAfterServerRestart: a restarted server knows no
// allocation; the clients notice at their next keepalive, allocate again,
// report the new relayed address, and traffic resumes.
func TestReallocatesAfterServerRestart(t *testing.T) {
	checkGoroutines(t)
	lab := labtest.New(t)
	server := startTURNServer(t, lab)
	changes := map[string]chan netip.AddrPort{"a": make(chan netip.AddrPort, 8), "b": make(chan netip.AddrPort, 8)}
	tune := func(name string) func(*turnc.Config) {
		return func(cfg *turnc.Config) {
			cfg.KeepAlive = 500 * time.Millisecond
			cfg.OnRelayedAddr = func(ap netip.AddrPort) { changes[name] <- ap }
		}
	}
	a, turnA := startTURNNode(t, addHost(t, lab, "a"), server.addr, tune("a"))
	b, turnB := startTURNNode(t, addHost(t, lab, "b"), server.addr, tune("b"))
	connect(t, a, b, turnA.Send, turnB.Send, turnA.RelayedAddr(), turnB.RelayedAddr())
	exchange(t, turnA.Send, turnB.RelayedAddr(), b, turnA.RelayedAddr(), true, 100)

	server.restart(t)
	for name, ch := range changes {
		var got []netip.AddrPort
		timeout := time.After(20 * time.Second)
		for len(got) < 2 {
			select {
			case ap := <-ch:
				got = append(got, ap)
			case <-timeout:
				t.Fatalf("%s reported %v after the restart, want the loss and then a new address", name, got)
			}
		}
		if got[0].IsValid() || !got[1].IsValid() {
			t.Fatalf("%s reported %v, want the zero address and then a new one", name, got)
		}
	}
	relayA, relayB := turnA.RelayedAddr(), turnB.RelayedAddr()
	connect(t, a, b, turnA.Send, turnB.Send, relayA, relayB)
	exchange(t, turnA.Send, relayB, b, relayA, true, 500)
	exchange(t, turnB.Send, relayA, a, relayB, true, 500)
	for name, c := range map[string]*turnc.Client{"a": turnA, "b": turnB} {
		if st := c.Stats(); st.Reallocations != 1 {
			t.Errorf("%s re-allocated %d times, want 1", name, st.Reallocations)
		}
	}
}

// TestReplacesAllocationOfEarlierRun: a daemon restarted on the same port
// finds the allocation of its previous run still on the server (437
// Allocation Mismatch); the client releases it and allocates anew.
func TestReplacesAllocationOfEarlierRun(t *testing.T) {
	checkGoroutines(t)
	lab := labtest.New(t)
	server := startTURNServer(t, lab)
	n := startNode(t, addHost(t, lab, "a"))
	var crashed atomic.Bool
	sendUntilCrash := func(b []byte, to netip.AddrPort) error {
		if crashed.Load() {
			return errors.New("crashed")
		}
		return n.conn.WriteTo(b, to)
	}
	cfg := turnc.Config{Server: server.addr, Username: turnUser, Password: turnPassword, Send: sendUntilCrash}
	first := n.allocate(t, cfg, nil)
	crashed.Store(true) // the release in Close never leaves
	first.Close()
	crashed.Store(false)

	second := n.allocate(t, cfg, nil)
	if !second.RelayedAddr().IsValid() {
		t.Fatal("no relayed address")
	}
}

// TestRelayThroughput measures what one relayed flow carries: a node sends
// 1400-byte datagrams as fast as it can to another's relayed address, and
// the receiver counts what arrives.
func TestRelayThroughput(t *testing.T) {
	checkGoroutines(t)
	if testing.Short() {
		t.Skip("skipping the throughput measurement in -short mode")
	}
	lab := labtest.New(t)
	server := startTURNServer(t, lab)
	a, turnA := startTURNNode(t, addHost(t, lab, "a"), server.addr, nil)
	b, turnB := startTURNNode(t, addHost(t, lab, "b"), server.addr, nil)
	relayA, relayB := turnA.RelayedAddr(), turnB.RelayedAddr()
	connect(t, a, b, turnA.Send, turnB.Send, relayA, relayB)

	payload := testDatagram(10)
	const duration = 3 * time.Second
	before := b.count.Load()
	beforeBytes := b.bytes.Load()
	sent := 0
	start := time.Now()
	for time.Since(start) < duration {
		for range 64 {
			if err := turnA.Send(relayB, payload); err == nil {
				sent++
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // the last datagrams in flight
	elapsed := duration.Seconds()
	got := b.count.Load() - before
	gotBytes := b.bytes.Load() - beforeBytes
	report := fmt.Sprintf("relayed through coturn: %.1f MB/s, %.0f datagrams/s of %d bytes (%.1f Mbit/s); sent %.0f/s, %.1f%% lost",
		float64(gotBytes)/elapsed/1e6, float64(got)/elapsed, len(payload), float64(gotBytes)*8/elapsed/1e6,
		float64(sent)/elapsed, 100*(1-float64(got)/float64(sent)))
	t.Log(report)
	if got < 1000 {
		t.Errorf("only %d datagrams arrived: %s", got, report)
	}
}

func addHost(t *testing.T, lab *netlab.Lab, name string) *netlab.Host {
	t.Helper()
	h, err := lab.AddHost(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
