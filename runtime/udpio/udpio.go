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
	"os"
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

// Conn is a UDP socket. ReadBatch and TryReadBatch may run from one
// goroutine at a time, beside any number of Writers, WriteBatch and
// WriteTo calls. The socket is not in Go's poller: a datagram wakes only
// the thread that waits for it in the kernel (ReadBatch, or a loop that
// waits for Fd), and no sender waits for another (each has its Writer).
type Conn struct {
	file   *os.File // holds the descriptor open while a call uses it
	raw    syscall.RawConn
	fd     int
	family int // AF_INET, or AF_INET6 also for dual-stack
	local  netip.AddrPort
	gso    atomic.Bool
	gro    bool

	readMu sync.Mutex
	read   *batch // made by the first read: many sockets never read

	// writers serve WriteBatch and WriteTo, for callers without a Writer
	// of their own.
	writers sync.Pool
}

// Listen opens a UDP socket on addr. An IPv4 address gives an IPv4 socket;
// the unspecified IPv6 address [::] gives one socket for both families
// (IPV6_V6ONLY off, whatever net.ipv6.bindv6only says), or an IPv4 socket
// on 0.0.0.0 where the kernel has no IPv6 at all.
// The socket buffers are raised towards 8 MiB (beyond the sysctl limits when
// privileged), GRO is turned on and GSO used when the kernel has them.
func Listen(addr netip.AddrPort) (*Conn, error) {
	if !addr.IsValid() {
		return nil, fmt.Errorf("udpio: listen on %v: not an address", addr)
	}
	fd, family, err := bind(addr)
	if err != nil {
		return nil, fmt.Errorf("udpio: listen on %v: %w", addr, err)
	}
	// A descriptor still blocking when os.NewFile sees it stays out of
	// Go's poller; it is made non-blocking afterwards for the calls here.
	c := &Conn{
		file:   os.NewFile(uintptr(fd), "udp:"+addr.String()),
		fd:     fd,
		family: family,
	}
	c.raw, _ = c.file.SyscallConn() // never fails for a file
	c.writers.New = func() any { return c.NewWriter() }
	if err := unix.SetNonblock(fd, true); err != nil {
		c.file.Close()
		return nil, fmt.Errorf("udpio: listen on %v: %w", addr, os.NewSyscallError("fcntl", err))
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		c.file.Close()
		return nil, fmt.Errorf("udpio: listen on %v: %w", addr, os.NewSyscallError("getsockname", err))
	}
	c.local = addrPortOf(sa)
	gso, gro := tune(fd)
	c.gso.Store(gso)
	c.gro = gro
	return c, nil
}

// bind makes a blocking UDP socket bound to addr, of the family Listen
// promises, and returns it with its family.
func bind(addr netip.AddrPort) (fd, family int, err error) {
	var sa unix.Sockaddr
	family = unix.AF_INET6
	if a := addr.Addr().Unmap(); a.Is4() {
		family = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: a.As4()}
	} else {
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err == unix.EAFNOSUPPORT && addr.Addr().IsUnspecified() {
		// Booted with ipv6.disable=1: serve IPv4 alone.
		return bind(netip.AddrPortFrom(netip.IPv4Unspecified(), addr.Port()))
	}
	if err != nil {
		return -1, 0, os.NewSyscallError("socket", err)
	}
	if family == unix.AF_INET6 {
		// Only the unspecified address serves both families.
		v6only := 1
		if addr.Addr().IsUnspecified() {
			v6only = 0
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, v6only); err != nil {
			unix.Close(fd)
			return -1, 0, os.NewSyscallError("setsockopt IPV6_V6ONLY", err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, 0, os.NewSyscallError("bind", err)
	}
	return fd, family, nil
}

func addrPortOf(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// LocalAddr is the address the socket is bound to.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// Fd is the socket's file descriptor, for a loop that waits until it is
// readable (pinned.Stop.Wait) and then calls TryReadBatch. It stays the
// socket's until Close.
func (c *Conn) Fd() int { return c.fd }

// GSO reports whether WriteBatch currently sends runs of equal datagrams as
// one segmented send.
func (c *Conn) GSO() bool { return c.gso.Load() }

// GRO reports whether the kernel may coalesce received datagrams.
func (c *Conn) GRO() bool { return c.gro }

// WriteTo sends one datagram, waiting while the socket's buffer is full.
func (c *Conn) WriteTo(b []byte, addr netip.AddrPort) error {
	w := c.writers.Get().(*Writer)
	defer c.writers.Put(w)
	w.one[0] = Message{Buf: b, Addr: addr}
	_, err := w.WriteBatch(w.one[:])
	w.one[0] = Message{}
	return err
}

// Close closes the socket; blocked ReadBatch and WriteBatch calls return,
// and every later call fails, with errors that wrap net.ErrClosed.
func (c *Conn) Close() error {
	// Shutting the socket down wakes every thread that waits for it in
	// the kernel: closing alone would not.
	_ = c.raw.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
	return c.file.Close()
}

// closed is the error of a call on a closed Conn.
func (c *Conn) closed(op string) error {
	return &net.OpError{Op: op, Net: "udp", Addr: net.UDPAddrFromAddrPort(c.local), Err: net.ErrClosed}
}

// waitFor blocks the calling thread until fd is ready for events (POLLIN
// or POLLOUT) or has an error or hung up, and reports whether to try the
// call again: false when the socket was shut down.
func waitFor(fd int, events int16) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: events}}
	for {
		_, err := unix.Ppoll(fds[:], nil, nil)
		if err == unix.EINTR {
			continue
		}
		return err == nil && fds[0].Revents&(unix.POLLHUP|unix.POLLNVAL) == 0
	}
}
