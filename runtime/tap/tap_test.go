//go:build linux

package tap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"burrow/l2"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	hostMAC  = l2.MAC{0x02, 0x62, 0x75, 0x72, 0x00, 0x01}
	peerMAC  = l2.MAC{0x02, 0x62, 0x75, 0x72, 0x00, 0x02}
	hostAddr = netip.MustParsePrefix("10.77.0.1/24")
	peerAddr = netip.MustParsePrefix("10.77.0.2/24")
	hostV6   = netip.MustParsePrefix("fd00:77::1/64")
)

func TestCreateConfiguresLinkAndCloseRemovesIt(t *testing.T) {
	ns, nl := newNamespace(t)
	dev := createIn(t, ns, Options{
		Name: "burrow0", MTU: 1400, MAC: hostMAC,
		Addresses: []netip.Prefix{hostAddr, hostV6}, Queues: 2, Offload: true,
	})

	if dev.Name() != "burrow0" || dev.MTU() != 1400 || dev.MAC() != hostMAC || dev.NumQueues() != 2 {
		t.Errorf("device reports name %q MTU %d MAC %s queues %d", dev.Name(), dev.MTU(), dev.MAC(), dev.NumQueues())
	}
	off := dev.Offloads()
	if !off.VnetHdr || !off.TSO {
		t.Errorf("offloads %+v: want at least the virtio header and TSO", off)
	}
	t.Logf("offloads: %+v", off)

	link, err := nl.LinkByName("burrow0")
	if err != nil {
		t.Fatalf("link not found in namespace: %v", err)
	}
	attrs := link.Attrs()
	if attrs.MTU != 1400 || !bytes.Equal(attrs.HardwareAddr, hostMAC[:]) || attrs.Flags&net.FlagUp == 0 {
		t.Errorf("netlink sees MTU %d MAC %s flags %v", attrs.MTU, attrs.HardwareAddr, attrs.Flags)
	}
	assertAddresses(t, nl, link, hostAddr, hostV6)

	extra := netip.MustParsePrefix("10.78.0.1/16")
	if err := dev.AddAddress(extra); err != nil {
		t.Fatal(err)
	}
	assertAddresses(t, nl, link, hostAddr, hostV6, extra)
	if err := dev.DelAddress(extra); err != nil {
		t.Fatal(err)
	}
	assertAddresses(t, nl, link, hostAddr, hostV6)

	if err := dev.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := dev.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	assertOnlyLoopback(t, nl)
}

func TestFailedCreateLeavesNothingBehind(t *testing.T) {
	ns, nl := newNamespace(t)
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"MTU too large", Options{Name: "burrow0", MTU: 70000, Addresses: []netip.Prefix{hostAddr}, Queues: 2, Offload: true}, "MTU"},
		{"address added twice", Options{Name: "burrow0", Addresses: []netip.Prefix{hostAddr, hostAddr}, Offload: true}, "add address"},
		{"name too long", Options{Name: "burrow-name-too-long", Offload: true}, "interface name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			onThreadIn(t, ns, func() {
				var dev *Device
				if dev, err = Create(c.opts); err == nil {
					dev.Close()
				}
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Create error %v, want one mentioning %q", err, c.want)
			}
			t.Log(err)
			assertOnlyLoopback(t, nl)
		})
	}
}

func TestCreateRefusesNameInUse(t *testing.T) {
	ns, nl := newNamespace(t)
	opts := Options{Name: "burrow0", Addresses: []netip.Prefix{hostAddr}, Queues: 2, Offload: true}
	first := createIn(t, ns, opts)

	var err error
	onThreadIn(t, ns, func() {
		var dev *Device
		if dev, err = Create(opts); err == nil {
			dev.Close()
		}
	})
	if !errors.Is(err, unix.EBUSY) {
		t.Fatalf("second Create of %s: %v, want EBUSY", opts.Name, err)
	}
	link, err := nl.LinkByName(first.Name())
	if err != nil {
		t.Fatalf("first device disappeared: %v", err)
	}
	assertAddresses(t, nl, link, hostAddr)
}

// readPacket waits for q's next packet as a pinned loop does: TryRead,
// and when nothing is queued, wait for the descriptor (here a tenth of a
// second at most, so that a closed queue is noticed).
func readPacket(q *Queue, buf []byte) (int, error) {
	for {
		n, err := q.TryRead(buf)
		if n > 0 || err != nil {
			return n, err
		}
		fds := []unix.PollFd{{Fd: int32(q.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && !errors.Is(err, unix.EINTR) {
			return 0, err
		}
	}
}

func TestCloseEndsReads(t *testing.T) {
	ns, _ := newNamespace(t)
	dev := createIn(t, ns, Options{Name: "burrow0", Offload: true})
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := readPacket(dev.Queue(0), buf); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	dev.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reads still going on 5 s after Close")
	}
}

// TestARPReplyThroughKernel writes an ARP request for the device's own
// address and expects the kernel's reply, in both packet formats, and checks
// that the exchange allocates nothing.
func TestARPReplyThroughKernel(t *testing.T) {
	for _, offload := range []bool{true, false} {
		t.Run(map[bool]string{true: "vnet header", false: "plain frames"}[offload], func(t *testing.T) {
			ns, _ := newNamespace(t)
			dev := createIn(t, ns, Options{Name: "burrow0", MAC: hostMAC, Addresses: []netip.Prefix{hostAddr}, Offload: offload})
			if dev.Offloads().VnetHdr != offload {
				t.Fatalf("offloads %+v with Offload %v", dev.Offloads(), offload)
			}
			watchdog := time.AfterFunc(10*time.Second, func() { dev.Close() })
			defer watchdog.Stop()

			hdrLen := 0
			if offload {
				hdrLen = VnetHdrLen
			}
			request := make([]byte, hdrLen+60)
			putARPRequest(request[hdrLen:], peerMAC, peerAddr.Addr(), hostAddr.Addr())
			buf := make([]byte, 2048)
			w := dev.Queue(0).NewWriter()
			exchange := func() []byte {
				if _, err := w.Write(request); err != nil {
					t.Fatalf("write ARP request: %v", err)
				}
				for {
					n, err := readPacket(dev.Queue(0), buf)
					if err != nil {
						t.Fatalf("no ARP reply before the watchdog: %v", err)
					}
					if n >= hdrLen+42 && binary.BigEndian.Uint16(buf[hdrLen+12:]) == 0x0806 {
						return buf[hdrLen:n]
					}
				}
			}

			reply := exchange()
			if offload && !bytes.Equal(buf[:VnetHdrLen], make([]byte, VnetHdrLen)) {
				t.Errorf("virtio header of an ARP reply: % x, want zeros", buf[:VnetHdrLen])
			}
			want := make([]byte, 42)
			putARP(want, 2, hostMAC, hostAddr.Addr(), peerMAC, peerAddr.Addr())
			if !bytes.Equal(reply[:42], want) {
				t.Fatalf("ARP reply\n got % x\nwant % x", reply[:42], want)
			}
			if allocs := testing.AllocsPerRun(50, func() { exchange() }); allocs != 0 {
				t.Errorf("write+read allocates %.1f times per packet", allocs)
			}
		})
	}
}

// putARPRequest writes a broadcast who-has for target from (mac, ip) into
// frame, padded to the Ethernet minimum of 60 bytes.
func putARPRequest(frame []byte, mac l2.MAC, ip, target netip.Addr) {
	putARP(frame, 1, mac, ip, l2.MAC{}, target)
	copy(frame[0:6], l2.Broadcast[:])
}

// putARP writes an Ethernet+ARP packet with operation op into frame[:42].
func putARP(frame []byte, op uint16, sha l2.MAC, spa netip.Addr, tha l2.MAC, tpa netip.Addr) {
	copy(frame[0:6], tha[:])
	copy(frame[6:12], sha[:])
	binary.BigEndian.PutUint16(frame[12:], 0x0806)
	arp := frame[14:]
	binary.BigEndian.PutUint16(arp[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(arp[2:], 0x0800) // IPv4
	arp[4], arp[5] = 6, 4
	binary.BigEndian.PutUint16(arp[6:], op)
	copy(arp[8:14], sha[:])
	copy(arp[14:18], spa.AsSlice())
	copy(arp[18:24], tha[:])
	copy(arp[24:28], tpa.AsSlice())
}

func TestDescribeNamesPrivilegeProblems(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EPERM, unix.EACCES} {
		err := describe("open "+tunPath, errno)
		if !errors.Is(err, errno) || !strings.Contains(err.Error(), "CAP_NET_ADMIN") || !strings.Contains(err.Error(), tunPath) {
			t.Errorf("describe(%v) = %v", errno, err)
		}
	}
	if err := describe("TUNSETIFF", unix.EINVAL); strings.Contains(err.Error(), "CAP_NET_ADMIN") {
		t.Errorf("describe(EINVAL) blames privileges: %v", err)
	}
	if describe("anything", nil) != nil {
		t.Error("describe(nil) is not nil")
	}
}

func assertAddresses(t *testing.T, nl *netlink.Handle, link netlink.Link, want ...netip.Prefix) {
	t.Helper()
	addrs, err := nl.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var got []netip.Prefix
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		ip, _ := netip.AddrFromSlice(a.IP)
		bits, _ := a.Mask.Size()
		got = append(got, netip.PrefixFrom(ip.Unmap(), bits))
	}
	sortPrefixes(got)
	want = slices.Clone(want)
	sortPrefixes(want)
	if !slices.Equal(got, want) {
		t.Errorf("addresses on %s: %v, want %v", link.Attrs().Name, got, want)
	}
}

func sortPrefixes(p []netip.Prefix) {
	slices.SortFunc(p, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
}

// assertOnlyLoopback checks that the namespace holds no link but lo and no
// address outside it.
func assertOnlyLoopback(t *testing.T, nl *netlink.Handle) {
	t.Helper()
	links, err := nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			t.Errorf("link %s left behind", l.Attrs().Name)
		}
	}
	addrs, err := nl.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.LinkIndex != 1 {
			t.Errorf("address %s left behind on link %d", a.IPNet, a.LinkIndex)
		}
	}
}

// TestTryReadNeverWaits: TryRead returns nothing at once from an empty
// queue, the kernel's ARP reply once Fd is readable, and os.ErrClosed
// after Close; it allocates nothing.
func TestTryReadNeverWaits(t *testing.T) {
	ns, _ := newNamespace(t)
	dev := createIn(t, ns, Options{Name: "burrow0", MAC: hostMAC, Addresses: []netip.Prefix{hostAddr}})
	q := dev.Queue(0)
	buf := make([]byte, 2048)
	drainUntilEmpty := func() {
		for {
			n, err := q.TryRead(buf)
			if err != nil {
				t.Fatalf("TryRead: %v", err)
			}
			if n == 0 {
				return
			}
		}
	}
	drainUntilEmpty() // what the kernel sent when the link came up
	if allocs := testing.AllocsPerRun(50, func() { q.TryRead(buf) }); allocs != 0 {
		t.Errorf("TryRead allocates %.1f times per call", allocs)
	}
	request := make([]byte, 60)
	putARPRequest(request, peerMAC, peerAddr.Addr(), hostAddr.Addr())
	if _, err := q.NewWriter().Write(request); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(q.Fd()), Events: unix.POLLIN}}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatal("no ARP reply within 5 s")
		}
		if _, err := unix.Poll(fds, 100); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
		n, err := q.TryRead(buf)
		if err != nil {
			t.Fatalf("TryRead: %v", err)
		}
		if n >= 42 && binary.BigEndian.Uint16(buf[12:]) == 0x0806 {
			break
		}
	}
	dev.Close()
	if _, err := q.TryRead(buf); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("TryRead after Close: %v, want os.ErrClosed", err)
	}
}
