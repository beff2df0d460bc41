//go:build linux

package tap

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// virtio_net_hdr fields (linux/virtio_net.h), in the host's byte order.
const (
	gsoTypeOffset  = 1
	gsoSizeOffset  = 4
	gsoTypeTCPv4   = 1
	gsoTypeECNFlag = 0x80
)

// TestTCPSuperFramesCrossAForwarder connects two namespaces through two TAPs
// and a forwarder that copies packets, virtio header included, between their
// queues. A bulk TCP transfer must arrive complete and must have travelled
// as TCP super-frames larger than the MTU.
func TestTCPSuperFramesCrossAForwarder(t *testing.T) {
	const mtu = 1500
	const total = 100 << 20
	nsA, _ := newNamespace(t)
	nsB, _ := newNamespace(t)
	a := createIn(t, nsA, Options{Name: "burrow0", MTU: mtu, MAC: hostMAC, Addresses: []netip.Prefix{hostAddr}, Queues: 2, Offload: true})
	b := createIn(t, nsB, Options{Name: "burrow0", MTU: mtu, MAC: peerMAC, Addresses: []netip.Prefix{peerAddr}, Queues: 2, Offload: true})
	if !a.Offloads().TSO || !b.Offloads().TSO {
		t.Skipf("kernel refused TSO on the TAP: %+v", a.Offloads())
	}

	var superFrames, largest atomic.Int64
	var wg sync.WaitGroup
	forward := func(src, dst *Queue, count bool) {
		defer wg.Done()
		buf := make([]byte, 1<<17)
		w := dst.NewWriter()
		for {
			n, err := readPacket(src, buf)
			if err != nil {
				return
			}
			pkt := buf[:n]
			if count && isTCPv4SuperFrame(pkt, mtu) {
				superFrames.Add(1)
				if int64(n) > largest.Load() {
					largest.Store(int64(n))
				}
			}
			if _, err := w.Write(pkt); err != nil && !errors.Is(err, os.ErrClosed) {
				t.Errorf("forward %d bytes: %v", n, err)
			}
		}
	}
	for i := range a.NumQueues() {
		wg.Add(2)
		go forward(a.Queue(i), b.Queue(i), true)
		go forward(b.Queue(i), a.Queue(i), false)
	}
	t.Cleanup(func() {
		a.Close()
		b.Close()
		wg.Wait()
	})

	var ln net.Listener
	var err error
	onThreadIn(t, nsB, func() { ln, err = net.Listen("tcp4", net.JoinHostPort(peerAddr.Addr().String(), "0")) })
	if err != nil {
		t.Fatalf("listen in namespace: %v", err)
	}
	defer ln.Close()
	received := make(chan int64, 1)
	go func() {
		received <- drain(t, ln)
	}()

	var conn net.Conn
	onThreadIn(t, nsA, func() { conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second) })
	if err != nil {
		t.Fatalf("dial across the forwarder: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	start := time.Now()
	chunk := make([]byte, 256<<10)
	for sent := 0; sent < total; sent += len(chunk) {
		if _, err := conn.Write(chunk); err != nil {
			t.Fatalf("send after %d bytes: %v", sent, err)
		}
	}
	conn.Close()
	got := <-received
	elapsed := time.Since(start)

	if got != total {
		t.Fatalf("received %d of %d bytes", got, total)
	}
	if superFrames.Load() == 0 {
		t.Fatal("no TCP super-frame crossed the forwarder: offloads are not working")
	}
	t.Logf("%d MiB in %v: %.2f Gbit/s; %d TCPv4 super-frames, largest %d bytes",
		total>>20, elapsed.Round(time.Millisecond), float64(total)*8/elapsed.Seconds()/1e9, superFrames.Load(), largest.Load())
}

// drain accepts one connection and counts the bytes until it closes.
func drain(t *testing.T, ln net.Listener) int64 {
	c, err := ln.Accept()
	if err != nil {
		t.Errorf("accept: %v", err)
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 256<<10)
	var n int64
	for {
		m, err := c.Read(buf)
		n += int64(m)
		if err != nil {
			return n
		}
	}
}

// isTCPv4SuperFrame reports whether pkt (virtio header first) is a TCPv4
// GSO frame carrying more than one MTU of IP packet.
func isTCPv4SuperFrame(pkt []byte, mtu int) bool {
	const ethernetHdrLen = 14
	if len(pkt) < VnetHdrLen {
		return false
	}
	gsoType := pkt[gsoTypeOffset] &^ gsoTypeECNFlag
	gsoSize := binary.NativeEndian.Uint16(pkt[gsoSizeOffset:])
	return gsoType == gsoTypeTCPv4 && gsoSize > 0 && len(pkt)-VnetHdrLen-ethernetHdrLen > mtu
}
