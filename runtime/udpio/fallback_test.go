//go:build linux

package udpio

import (
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inFreshNamespace runs fn on a thread inside a new, unnamed network
// namespace whose loopback is up with the given MTU. Sockets fn opens stay
// there; the namespace disappears with the last of them.
func inFreshNamespace(t *testing.T, loopbackMTU int, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("current namespace: %v", err)
	}
	defer orig.Close()
	defer func() {
		// A thread left in the wrong namespace dies with its goroutine.
		if err := netns.Set(orig); err != nil {
			t.Errorf("switch back from namespace: %v", err)
			return
		}
		runtime.UnlockOSThread()
	}()
	ns, err := netns.New()
	if err != nil {
		t.Skipf("cannot create a network namespace: %v", err)
	}
	defer ns.Close()
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink: %v", err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetMTU(lo, loopbackMTU)
	}
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("set up loopback: %v", err)
	}
	fn()
}

// TestSegmentsAbovePathMTUGoUnsegmented sends segments larger than the path
// MTU, which the kernel refuses to segment but sends as single fragmented
// datagrams: WriteBatch must deliver every one.
func TestSegmentsAbovePathMTUGoUnsegmented(t *testing.T) {
	var sender, receiver *Conn
	inFreshNamespace(t, 1280, func() {
		sender, receiver = listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	})
	if !sender.GSO() {
		t.Skip("kernel without UDP GSO")
	}
	want := payloads(9, repeat(1400, 10)...)
	writeAll(t, sender, receiver.LocalAddr(), want)
	got, _ := receive(t, receiver, len(want))
	checkDatagrams(t, got, sender.LocalAddr(), want)
	t.Logf("GSO after the refusal: %v", sender.GSO())
}
