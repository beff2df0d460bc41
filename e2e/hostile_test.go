package e2e

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"burrow/link"
	"burrow/nat"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/runtime/udpio"
	"burrow/wire"
)

// udpPayloads extracts the UDP payloads to port from a pcap file of
// Ethernet/IPv4 frames.
func udpPayloads(path string, port uint16) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) < 24 {
		return nil, errors.New("pcap too short")
	}
	var out [][]byte
	for off := 24; off+16 <= len(data); {
		n := int(binary.LittleEndian.Uint32(data[off+8:]))
		if off+16+n > len(data) {
			break
		}
		pkt := data[off+16 : off+16+n]
		off += 16 + n
		if len(pkt) < 14+20+8 || binary.BigEndian.Uint16(pkt[12:]) != 0x0800 || pkt[23] != 17 {
			continue
		}
		ihl := int(pkt[14]&0x0f) * 4
		udp := pkt[14+ihl:]
		if len(udp) < 8 || binary.BigEndian.Uint16(udp[2:]) != port {
			continue
		}
		out = append(out, append([]byte(nil), udp[8:]...))
	}
	return out, nil
}

// rejected is everything the node counted as refused: drops by reason plus
// handshakes that were invalid or rate limited.
func rejected(t *testing.T, node *cluster.Node) (total uint64, drops map[string]uint64) {
	t.Helper()
	st, err := node.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range st.Drops {
		total += v
	}
	return total + st.Handshakes.Invalid + st.Handshakes.RateLimited, st.Drops
}

// TestGarbageAndReplaysOnlyMoveDropCounters sprays random datagrams and
// replays of captured real ones at a node: it keeps its link, keeps
// forwarding, and counts every one of them as refused.
func TestGarbageAndReplaysOnlyMoveDropCounters(t *testing.T) {
	lab, nw := newNetwork(t, 2)
	a, b := nw.Nodes[0], nw.Nodes[1]
	a.Dial(b)
	startAll(t, nw)
	if err := nw.WaitLinks(ctxFor(t, 10*time.Second), map[*cluster.Node]int{a: 1, b: 1}); err != nil {
		t.Fatal(err)
	}
	// A replay of two datagrams glued together is not a replay: take them
	// one by one. Generic receive offload would merge datagrams arriving
	// back to back before tcpdump sees them, and the veth would carry a
	// segmented send (a frame and the probe right behind it, say) whole
	// to b, where tcpdump sees it as one datagram: the sender's stack
	// must cut it up.
	for _, offload := range []struct {
		host    *cluster.Node
		feature string
	}{{b, "gro"}, {a, "tx-udp-segmentation"}} {
		if out, err := offload.host.Host.Command(ctxFor(t, 5*time.Second), "ethtool", "-K", "eth0", offload.feature, "off").CombinedOutput(); err != nil {
			t.Fatalf("ethtool -K eth0 %s off on %s: %v %s", offload.feature, offload.host.Name, err, out)
		}
	}
	pcap := filepath.Join(b.Dir, "capture.pcap")
	capture, err := b.Host.Start("tcpdump", "--immediate-mode", "-i", "eth0", "-n", "-U", "-w", pcap,
		"udp", "and", "dst", "host", b.Host.Addr.String(), "and", "dst", "port", fmt.Sprint(cluster.Port))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	ctx := ctxFor(t, 60*time.Second)
	if r, err := netlab.Ping(ctx, a.Host, b.Address.Addr(), 5, 50*time.Millisecond); err != nil || r.Received != 5 {
		t.Fatalf("ping before the spray: %+v %v", r, err)
	}
	time.Sleep(200 * time.Millisecond)
	capture.Stop()
	replays, err := udpPayloads(pcap, cluster.Port)
	// a asks b, linked at a public address, how it sees it: a STUN
	// request, answered whoever sends it (every member answers STUN,
	// never with more bytes than it got), so no replay.
	replays = slices.DeleteFunc(replays, nat.IsSTUN)
	if err != nil || len(replays) < 5 {
		t.Fatalf("captured %d datagrams to replay: %v", len(replays), err)
	}

	attacker, err := lab.AddHost("attacker")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := inside(attacker, func() (*net.UDPConn, error) { return net.ListenUDP("udp4", &net.UDPAddr{}) })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := net.UDPAddrFromAddrPort(b.Endpoint())

	// Replays of real traffic: each one is counted as a replay.
	totalBefore, dropsBefore := rejected(t, b)
	replaysBefore := dropsBefore["replay"]
	for _, r := range replays {
		if _, err := conn.WriteToUDP(r, target); err != nil {
			t.Fatal(err)
		}
	}
	transport := 0
	for _, r := range replays {
		if len(r) > 0 && wire.Type(r[0]) == wire.TypeTransport {
			transport++
		}
	}
	// Transport datagrams count as replays; anything else captured (a
	// handshake message) must be refused all the same.
	var drops map[string]uint64
	var total uint64
	err = cluster.WaitFor(ctxFor(t, 5*time.Second), "replays to be counted", func() bool {
		total, drops = rejected(t, b)
		return drops["replay"]-replaysBefore == uint64(transport) && total-totalBefore >= uint64(len(replays))
	})
	if err != nil {
		grew := map[string]uint64{}
		for reason, v := range drops {
			if v != dropsBefore[reason] {
				grew[reason] = v - dropsBefore[reason]
			}
		}
		t.Fatalf("%v: %d replays sent, %d of them of transport datagrams; the replay counter grew by %d, all refusals by %d, the drop counters by %v",
			err, len(replays), transport, drops["replay"]-replaysBefore, total-totalBefore, grew)
	}

	// Random garbage, half of it dressed as burrow handshakes.
	before, _ := rejected(t, b)
	rng := rand.New(rand.NewPCG(1, 2))
	const random = 2000
	for i := range random {
		g := make([]byte, rng.IntN(1500))
		for j := range g {
			g[j] = byte(rng.Uint32())
		}
		if len(g) > 0 && i%2 == 0 {
			g[0] = 0xB1 + byte(i%4)
		}
		if _, err := conn.WriteToUDP(g, target); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			time.Sleep(5 * time.Millisecond) // stay under the socket buffer
		}
	}
	var after uint64
	err = cluster.WaitFor(ctxFor(t, 10*time.Second), "every random datagram to be counted", func() bool {
		after, drops = rejected(t, b)
		return after-before >= random
	})
	t.Logf("%d random datagrams, refusals grew by %d: %v", random, after-before, drops)
	if err != nil {
		t.Error(err)
	}
	if b.UpLinks() != 1 {
		t.Fatal("the spray broke the link")
	}
	if r, err := netlab.Ping(ctx, a.Host, b.Address.Addr(), 3, 50*time.Millisecond); err != nil || r.Received != 3 {
		t.Fatalf("ping after the spray: %+v %v", r, err)
	}
}

// TestCertificateFromAnotherCACannotLink: a node whose certificate comes
// from a different CA (same network name) dials a member and is refused on
// both sides.
func TestCertificateFromAnotherCACannotLink(t *testing.T) {
	lab, nw := newNetwork(t, 1)
	member := nw.Nodes[0]
	other, err := cluster.New(lab, "e2e", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	host, err := lab.AddHost("intruder")
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := other.AddNode(host, "intruder", virtual(9))
	if err != nil {
		t.Fatal(err)
	}
	intruder.Dial(member)
	startAll(t, nw)
	if err := intruder.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = cluster.WaitFor(ctx, "the intruder's dial to fail with a certificate error", func() bool {
		st, err := intruder.Status()
		return err == nil && len(st.Dials) == 1 && strings.Contains(st.Dials[0].LastError, "certificate")
	})
	if err != nil {
		st, _ := intruder.Status()
		t.Fatalf("%v; intruder status: %+v", err, st)
	}
	st, err := member.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Links) != 0 || st.Handshakes.Completed != 0 {
		t.Fatalf("member linked with a foreign certificate: %+v", st.Links)
	}
	if r, _ := netlab.Ping(ctx, intruder.Host, member.Address.Addr(), 1, 100*time.Millisecond); r.Received != 0 {
		t.Fatal("the intruder reached the member's virtual address")
	}
}

// TestBeaconKeepsServingUnderAFlood: while an attacker sprays the beacon
// with STUN requests, handshake initiations and garbage, two members
// behind symmetric NATs keep talking through its relay.
func TestBeaconKeepsServingUnderAFlood(t *testing.T) {
	n := newNATNetwork(t, map[string]netlab.NAT{"c1": netlab.Symmetric, "c2": netlab.Symmetric})
	startAll(t, n.net)
	c1, c2 := n.nodes["c1"], n.nodes["c2"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "c1-c2 over the relay", func() bool {
		return c1.PathTo(c2) == "relay" && c2.PathTo(c1) == "relay"
	}); err != nil {
		t.Fatal(err)
	}
	attacker, err := n.lab.AddHost("attacker")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := inside(attacker, func() (*udpio.Conn, error) { return udpio.Listen(netip.AddrPortFrom(attacker.Addr, 0)) })
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	target := n.beacon.Endpoint()
	stop := make(chan struct{})
	var sent atomic.Int64
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		cfg := &link.HandshakeConfig{Network: "nat", Cert: []byte("x"), Rand: cryptorand.Reader}
		_, init, _ := link.StartHandshake(cfg)
		initDgram := wire.AppendHandshake(nil, wire.HandshakeHeader{Type: wire.TypeHandshakeInit, Sender: 1}, init)
		// Sent 64 at a time, as fast as the sender's core allows.
		batch := make([]udpio.Message, 64)
		for i := range batch {
			b := initDgram
			if i%3 == 2 {
				b = make([]byte, 200)
			}
			batch[i] = udpio.Message{Buf: b, Addr: target}
		}
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			for i := range batch {
				switch i % 3 {
				case 0:
					batch[i].Buf = nat.BindingRequest(nat.TxID{byte(i), byte(round), byte(round >> 8)})
				case 2:
					b := batch[i].Buf
					for j := range b {
						b[j] = byte(rng.Uint32())
					}
					b[0] = byte(wire.TypeTransport)
				}
			}
			if n, err := conn.WriteBatch(batch); err == nil {
				sent.Add(int64(n))
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	r, err := netlab.Ping(ctxFor(t, 30*time.Second), c1.Host, c2.Address.Addr(), 100, 20*time.Millisecond)
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	st, err := n.beacon.Status()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood of %d datagrams; c1-c2 pings through the beacon: %d/%d; beacon refused: rate_limited=%d malformed=%d unknown_session=%d slow_path_full=%d, handshakes rate limited %d, answered with a cookie %d",
		sent.Load(), r.Received, r.Transmitted, st.Drops["rate_limited"], st.Drops["malformed"], st.Drops["unknown_session"], st.Drops["slow_path_full"], st.Handshakes.RateLimited, st.Handshakes.Cookies)
	if r.Received < 90 {
		t.Errorf("only %d of 100 relayed pings arrived during the flood", r.Received)
	}
	if st.Drops["rate_limited"] == 0 || st.Handshakes.RateLimited == 0 {
		t.Error("the flood was not rate limited")
	}
	// One address's spray stops in the data path: it never fills the
	// core's queue, where the members' control messages wait too.
	if st.Drops["slow_path_full"] != 0 {
		t.Errorf("the flood filled the core's queue: %d events dropped", st.Drops["slow_path_full"])
	}
	// Past the limits the beacon answers with cookies, not with its
	// Diffie-Hellman work.
	if st.Handshakes.Cookies == 0 {
		t.Error("the beacon answered no initiation of the flood with a cookie")
	}
}

// TestNodesRideOutTheirBeaconsOutage: when the only beacon dies, members
// keep their direct links; when it returns, they link to it again.
func TestNodesRideOutTheirBeaconsOutage(t *testing.T) {
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent})
	startAll(t, n.net)
	a, b := n.nodes["a"], n.nodes["b"]
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a-b direct", func() bool {
		return a.PathTo(b) == "direct" && b.PathTo(a) == "direct"
	}); err != nil {
		t.Fatal(err)
	}
	if err := n.beacon.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // longer than the links' dead time
	if r, err := netlab.Ping(ctxFor(t, 20*time.Second), a.Host, b.Address.Addr(), 10, 50*time.Millisecond); err != nil || r.Received < 9 {
		t.Fatalf("a-b without the beacon: %+v %v", r, err)
	}
	if err := n.beacon.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for _, node := range []*cluster.Node{a, b} {
		if err := cluster.WaitFor(ctxFor(t, 60*time.Second), node.Name+" back on the beacon", func() bool {
			st, err := node.Status()
			return err == nil && st.Reach.Beacon == n.beacon.ID.String() && node.PathTo(n.beacon) != ""
		}); err != nil {
			t.Error(err)
		}
	}
	t.Logf("both members relinked to the beacon %v after it returned", time.Since(back).Round(100*time.Millisecond))
}
