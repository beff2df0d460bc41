//go:build linux

// Package udpio is burrow's one UDP socket, moved in batches: recvmmsg and
// sendmmsg, with the kernel's UDP segmentation (GSO, UDP_SEGMENT) on send
// and coalescing (GRO, UDP_GRO) on receive, so that one system call carries
// dozens of datagrams. The package runs no goroutines and allocates nothing
// per batch; the caller owns the buffers and the loops.
package udpio

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// BatchSize is the most messages one ReadBatch fills and one sendmmsg call
// carries; WriteBatch takes any number and sends them in rounds.
const BatchSize = 64

// ReadBufSize is the buffer a message needs on receive when GRO is on: the
// kernel hands over up to this many bytes of coalesced datagrams at once and
// cuts what does not fit.
const ReadBufSize = 65535

// GSO limits per send: segments the kernel accepts, and the largest UDP
// payload of one IPv4 packet.
const (
	maxSegments = 64
	maxGSOBytes = 65507
)

// Message is one datagram, or on receive several coalesced ones.
type Message struct {
	// Buf holds the datagram to send, or receives one.
	Buf []byte
	// N is the number of bytes received into Buf.
	N int
	// Addr is the destination on send and the source on receive. IPv6
	// zones are not carried.
	Addr netip.AddrPort
	// SegmentSize, on receive, is non-zero when the kernel coalesced several
	// datagrams from Addr into Buf[:N]: each is SegmentSize bytes long except
	// possibly the last. The caller splits them. Ignored on send.
	SegmentSize int
	// Received, on receive, is when the kernel took the datagram in, in
	// Unix nanoseconds (zero where the kernel gives no timestamp): the
	// time it then waited in the socket's queue is the receive side's
	// standing queue. Ignored on send.
	Received int64
}

// Conn is a UDP socket. ReadBatch, WriteBatch and WriteTo may run at the
// same time from different goroutines.
type Conn struct {
	udp    *net.UDPConn
	raw    syscall.RawConn
	family int // AF_INET, or AF_INET6 also for dual-stack
	local  netip.AddrPort
	gso    atomic.Bool
	gro    bool

	readMu  sync.Mutex
	read    *batch
	writeMu sync.Mutex
	write   *batch
}

// Listen opens a UDP socket on addr. An IPv4 address gives an IPv4 socket;
// the unspecified IPv6 address [::] gives one socket for both families.
// The socket buffers are raised towards 8 MiB (beyond the sysctl limits when
// privileged), GRO is turned on and GSO used when the kernel has them.
func Listen(addr netip.AddrPort) (*Conn, error) {
	if !addr.IsValid() {
		return nil, fmt.Errorf("udpio: listen on %v: not an address", addr)
	}
	udp, err := net.ListenUDP(network(addr.Addr()), net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("udpio: %w", err)
	}
	c := &Conn{
		udp:   udp,
		local: udp.LocalAddr().(*net.UDPAddr).AddrPort(),
		read:  newBatch(unix.SYS_RECVMMSG, readCmsgSpace),
		write: newBatch(unix.SYS_SENDMMSG, segmentCmsgSpace),
	}
	if c.raw, err = udp.SyscallConn(); err != nil {
		udp.Close()
		return nil, fmt.Errorf("udpio: %w", err)
	}
	var familyErr error
	err = c.raw.Control(func(fd uintptr) {
		c.family, familyErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		gso, gro := tune(int(fd))
		c.gso.Store(gso)
		c.gro = gro
	})
	if err == nil {
		err = familyErr
	}
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("udpio: socket on %v: %w", addr, err)
	}
	return c, nil
}

// network picks the Go network name that gives the socket family Listen promises.
func network(addr netip.Addr) string {
	switch {
	case addr.Unmap().Is4():
		return "udp4"
	case addr.IsUnspecified():
		return "udp"
	default:
		return "udp6"
	}
}

// LocalAddr is the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// GSO reports whether WriteBatch currently sends runs of equal datagrams as
// one segmented send.
func (c *Conn) GSO() bool { return c.gso.Load() }

// GRO reports whether the kernel may coalesce received datagrams.
func (c *Conn) GRO() bool { return c.gro }

// WriteTo sends one datagram.
func (c *Conn) WriteTo(b []byte, addr netip.AddrPort) error {
	_, err := c.udp.WriteToUDPAddrPort(b, addr)
	return err
}

// Close closes the socket; blocked ReadBatch and WriteBatch calls return,
// and every later call fails, with errors that wrap net.ErrClosed.
func (c *Conn) Close() error { return c.udp.Close() }
