//go:build linux

package udpio

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bufferSize is the socket buffer burrow asks for; without privilege the
// kernel caps it at net.core.rmem_max / wmem_max.
const bufferSize = 8 << 20

var (
	segmentCmsgSpace = unix.CmsgSpace(2) // UDP_SEGMENT carries a u16
	groCmsgSpace     = unix.CmsgSpace(4) // UDP_GRO carries an int
	// stampCmsgSpace holds SO_TIMESTAMPNS's struct timespec.
	stampCmsgSpace = unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{})))
	// readCmsgSpace is what one received message's control data needs.
	readCmsgSpace = groCmsgSpace + stampCmsgSpace
)

// tune raises the socket buffers, turns on UDP_GRO and receive timestamps
// and tells which of GSO and GRO the kernel offers on fd.
func tune(fd int) (gso, gro bool) {
	setBufferSize(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF)
	setBufferSize(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF)
	// Without timestamps Message.Received stays zero: nothing breaks.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	gro = unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
	_, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT)
	return err == nil, gro
}

// setBufferSize tries the privileged option, which ignores the sysctl cap,
// then the ordinary one. A socket keeps working with the default size, so
// failures are not errors.
func setBufferSize(fd, forceOpt, opt int) {
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, forceOpt, bufferSize) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, bufferSize)
	}
}

// mmsg runs recvmmsg or sendmmsg (trap) on hdrs; a zero errno means success.
func mmsg(trap, fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	n, _, errno := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	return int(n), errno
}

func setIovec(iov *unix.Iovec, b []byte) {
	iov.Base = nil
	if len(b) > 0 {
		iov.Base = &b[0]
	}
	iov.SetLen(len(b))
}

// putSockaddr writes ap into sa in the form a socket of family takes and
// returns its length. A dual-stack socket reaches IPv4 through the mapped
// IPv6 form; an IPv4 socket given an IPv6 address gets an IPv6 sockaddr and
// the kernel's refusal.
func putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort, family int) uint32 {
	if addr := ap.Addr().Unmap(); family == unix.AF_INET && addr.Is4() {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: addr.As4()}
		binary.BigEndian.PutUint16(portBytes(&sa4.Port), ap.Port())
		return unix.SizeofSockaddrInet4
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ap.Addr().As16()}
	binary.BigEndian.PutUint16(portBytes(&sa.Port), ap.Port())
	return unix.SizeofSockaddrInet6
}

// readSockaddr is the inverse of putSockaddr; mapped IPv4 comes out as IPv4.
func readSockaddr(sa *unix.RawSockaddrInet6) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), binary.BigEndian.Uint16(portBytes(&sa4.Port)))
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), binary.BigEndian.Uint16(portBytes(&sa.Port)))
	}
	return netip.AddrPort{}
}

// portBytes views a sockaddr port, which is kept in network byte order.
func portBytes(p *uint16) []byte { return (*[2]byte)(unsafe.Pointer(p))[:] }

// putSegmentSize writes a UDP_SEGMENT control message into b[:segmentCmsgSpace].
func putSegmentSize(b []byte, size int) {
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level = unix.SOL_UDP
	h.Type = unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
}

// parseReadControl finds, in a received message's control data, the
// segment size of UDP_GRO (0 without) and the kernel's receive time of
// SO_TIMESTAMPNS in Unix nanoseconds (0 without).
func parseReadControl(ctrl []byte) (segmentSize int, received int64) {
	for len(ctrl) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
		length := int(h.Len)
		if length < unix.SizeofCmsghdr || length > len(ctrl) {
			break
		}
		data := ctrl[unix.CmsgLen(0):length]
		switch {
		case h.Level == unix.SOL_UDP && h.Type == unix.UDP_GRO && len(data) >= 4:
			segmentSize = int(binary.NativeEndian.Uint32(data))
		case h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})):
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			received = ts.Nano()
		}
		ctrl = ctrl[min(unix.CmsgSpace(length-unix.CmsgLen(0)), len(ctrl)):]
	}
	return segmentSize, received
}
