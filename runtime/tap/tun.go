//go:build linux

package tap

import "golang.org/x/sys/unix"

// Offload flags for TUNSETOFFLOAD (linux/if_tun.h); x/sys does not define them.
const (
	tunFCsum = 0x01
	tunFTSO4 = 0x02
	tunFTSO6 = 0x04
	tunFUSO4 = 0x20
	tunFUSO6 = 0x40
)

// VnetHdrLen is the size of the virtio_net_hdr that precedes every packet
// read from or written to a queue when Offloads().VnetHdr is true.
const VnetHdrLen = 10

const tunPath = "/dev/net/tun"

// openQueue opens /dev/net/tun (blocking: see newQueue) and attaches it to the TAP name
// with flags; it returns the fd and the name the kernel settled on (an empty
// name or one with %d is chosen by the kernel).
func openQueue(name string, flags uint16) (int, string, error) {
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return -1, "", describe("interface name "+name, err)
	}
	fd, err := unix.Open(tunPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", describe("open "+tunPath, err)
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, "", describe("TUNSETIFF "+name, err)
	}
	return fd, ifr.Name(), nil
}

// setVnetHdrLen tells the kernel how long the virtio header on fd is.
func setVnetHdrLen(fd int) error {
	return describe("TUNSETVNETHDRSZ", unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, VnetHdrLen))
}

// enableOffloads asks for the richest offload set the kernel accepts:
// TCP and UDP segmentation, then TCP only, then none.
func enableOffloads(fd int) Offloads {
	attempts := []struct {
		flags int
		got   Offloads
	}{
		{tunFCsum | tunFTSO4 | tunFTSO6 | tunFUSO4 | tunFUSO6, Offloads{VnetHdr: true, TSO: true, USO: true}},
		{tunFCsum | tunFTSO4 | tunFTSO6, Offloads{VnetHdr: true, TSO: true}},
	}
	for _, a := range attempts {
		if unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, a.flags) == nil {
			return a.got
		}
	}
	// A new device starts without offloads, so the kernel keeps finishing
	// checksums and segmenting itself; the header is still there, all zero.
	return Offloads{VnetHdr: true}
}
