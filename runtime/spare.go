package runtime

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"burrow/link"
	"burrow/node"
	"burrow/runtime/udpio"
)

// spareSockets are the sockets a node behind a NAT that maps every
// destination to a new port sends its birthday probes from (see node's
// birthday.go). Each is opened on first use, bound to the main socket's
// IPv4 address at a port the kernel picks, with the main socket's offloads
// and buffers, and closed after spareIdle without a datagram: a link
// punched through one gets keepalives far more often, so only unused
// sockets close. One goroutine reads them all, waiting in poll(2) on every
// descriptor at once, so that hundreds of idle sockets cost no thread.
type spareSockets struct {
	d    *Daemon
	bind netip.Addr
	mu   sync.Mutex
	// socks are the open sockets by index; the reader polls them all and
	// the eventfd wake, which tells it the set changed.
	socks   map[uint16]*spareSocket
	wake    int
	running bool
	closed  bool
}

type spareSocket struct {
	index  uint16
	conn   *udpio.Conn
	lastRx atomic.Int64 // or when it opened
}

// spareIdle is how long a spare socket stays open without a datagram.
const spareIdle = time.Minute

// initSpareSockets makes the sockets open on first use, bound beside the
// main socket at listen.
func (d *Daemon) initSpareSockets(listen netip.AddrPort) {
	s := &d.spare
	s.d, s.bind = d, netip.IPv4Unspecified()
	if a := listen.Addr().Unmap(); a.Is4() {
		s.bind = a
	}
	s.socks = make(map[uint16]*spareSocket)
}

// send sends b to to from spare socket i, opening it if needed.
func (s *spareSockets) send(i uint16, to netip.AddrPort, b []byte) error {
	sock, err := s.socket(i)
	if err != nil {
		return err
	}
	return sock.conn.WriteTo(b, to)
}

// sendBatch sends msgs from spare socket i in as few system calls as the
// kernel allows; a datagram the kernel refuses drops, not the rest.
func (s *spareSockets) sendBatch(i uint16, msgs []udpio.Message) error {
	sock, err := s.socket(i)
	if err != nil {
		return err
	}
	for sent := 0; sent < len(msgs); sent++ {
		n, err := sock.conn.WriteBatch(msgs[sent:])
		if sent += n; err == nil || closedErr(err) {
			return err
		}
	}
	return nil
}

func (s *spareSockets) socket(i uint16) (*spareSocket, error) {
	if i >= node.SpareSockets {
		return nil, fmt.Errorf("no spare socket %d", i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sock := s.socks[i]; sock != nil {
		return sock, nil
	}
	if s.closed {
		return nil, fmt.Errorf("spare socket: %w", net.ErrClosed)
	}
	if !s.running {
		wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("spare sockets: %w", err)
		}
		s.wake, s.running = wake, true
		go s.read()
	}
	conn, err := udpio.Listen(netip.AddrPortFrom(s.bind, 0))
	if err != nil {
		return nil, fmt.Errorf("spare socket: %w", err)
	}
	sock := &spareSocket{index: i, conn: conn}
	sock.lastRx.Store(time.Now().UnixNano())
	s.socks[i] = sock
	s.poke()
	return sock, nil
}

// poke wakes the reader to poll the current set of sockets.
func (s *spareSockets) poke() {
	one := [8]byte{1}
	_, _ = unix.Write(s.wake, one[:])
}

// read hands the datagrams of every spare socket to the data path, and
// closes the sockets idle for spareIdle, until close.
func (s *spareSockets) read() {
	d := s.d
	tw := d.newTAPWriter(true)
	w := d.newWorker(tw)
	msgs := make([]udpio.Message, rxBatch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, rxBufLen)
	}
	var fds []unix.PollFd
	var socks []*spareSocket
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			unix.Close(s.wake)
			return
		}
		fds, socks = append(fds[:0], unix.PollFd{Fd: int32(s.wake), Events: unix.POLLIN}), socks[:0]
		for _, sock := range s.socks {
			fds = append(fds, unix.PollFd{Fd: int32(sock.conn.Fd()), Events: unix.POLLIN})
			socks = append(socks, sock)
		}
		s.mu.Unlock()
		if _, err := unix.Poll(fds, int(spareIdle/time.Millisecond)); err != nil && err != unix.EINTR {
			d.log.Error("spare sockets: poll failed", "err", err)
			return
		}
		if fds[0].Revents != 0 {
			var drain [8]byte
			_, _ = unix.Read(s.wake, drain[:])
		}
		now := time.Now().UnixNano()
		for i, sock := range socks {
			if fds[i+1].Revents == 0 {
				continue
			}
			sock.lastRx.Store(now)
			via := link.SpareEndpoint(sock.index, netip.AddrPort{})
			for {
				n, err := sock.conn.TryReadBatch(msgs)
				if n == 0 || err != nil {
					break
				}
				for j := range msgs[:n] {
					d.fromSocket(w, tw, &msgs[j], via, now)
				}
			}
		}
		tw.flush()
		w.Tx.Flush()
		s.closeIdle(now)
	}
}

// closeIdle closes the sockets that got nothing for spareIdle.
func (s *spareSockets) closeIdle(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sock := range s.socks {
		if now-sock.lastRx.Load() > int64(spareIdle) {
			sock.conn.Close()
			delete(s.socks, i)
		}
	}
}

func (s *spareSockets) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for i, sock := range s.socks {
		sock.conn.Close()
		delete(s.socks, i)
	}
	if s.running {
		s.poke()
	}
}
