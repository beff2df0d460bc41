package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"


	"burrow/netlab"
	"burrow/netlab/cluster"
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
	_, drops := rejected(t, b)
	replaysBefore := drops["replay"]
	for _, r := range replays {
		if _, err := conn.WriteToUDP(r, target); err != nil {
			t.Fatal(err)
		}
	}
	err = cluster.WaitFor(ctxFor(t, 5*time.Second), "replays to be counted", func() bool {
		_, drops = rejected(t, b)
		return drops["replay"]-replaysBefore == uint64(len(replays))
	})
	if err != nil {
		t.Fatalf("%v: %d replays sent, replay counter grew by %d", err, len(replays), drops["replay"]-replaysBefore)
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
