//go:build linux

package tap

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// newNamespace makes a network namespace with a unique name, removed when
// the test ends, and returns a netlink handle inside it.
func newNamespace(t *testing.T) (netns.NsHandle, *netlink.Handle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and TAP devices")
	}
	if _, err := os.Stat(tunPath); err != nil {
		t.Skipf("needs %s: %v", tunPath, err)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	name := "bt" + hex.EncodeToString(suffix)

	var ns netns.NsHandle
	var err error
	onThreadIn(t, netns.None(), func() { ns, err = netns.NewNamed(name) })
	if err != nil {
		t.Skipf("cannot create network namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	nl, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink in %s: %v", name, err)
	}
	t.Cleanup(nl.Close)
	return ns, nl
}

// onThreadIn runs fn on a thread switched into ns (netns.None() keeps the
// current one, for fn that switch by themselves) and switches back. Sockets
// and devices fn creates stay in ns. A thread that cannot be switched back
// is never handed back to the scheduler.
func onThreadIn(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("current namespace: %v", err)
	}
	defer orig.Close()
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("switch back from namespace: %v", err)
			return
		}
		runtime.UnlockOSThread()
	}()
	if ns.IsOpen() {
		if err := netns.Set(ns); err != nil {
			t.Fatalf("enter namespace: %v", err)
		}
	}
	fn()
}

// createIn creates a device inside ns and closes it when the test ends.
func createIn(t *testing.T, ns netns.NsHandle, opts Options) *Device {
	t.Helper()
	var dev *Device
	var err error
	onThreadIn(t, ns, func() { dev, err = Create(opts) })
	if err != nil {
		t.Fatalf("Create(%+v): %v", opts, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}
