package runtime

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"burrow/link"
	"burrow/node"
)

// spareSockets are the sockets a node behind a NAT that maps every
// destination to a new port sends its birthday probes from (see node's
// birthday.go). Each is opened on first use, bound to the main socket's
// IPv4 address at a port the kernel picks, read by a goroutine of its own,
// and closed after spareIdle without a datagram: a link punched through
// one gets keepalives far more often, so only unused sockets close.
type spareSockets struct {
	d       *Daemon
	bind    netip.Addr
	mu      sync.Mutex
	socks   map[uint16]*net.UDPConn
	closed  bool
	workers sync.Pool // *node.Worker, shared by the readers
}

// spareIdle is how long a spare socket stays open without a datagram.
const spareIdle = time.Minute

// spareReadLen holds any datagram the socket's links carry: the data
// path's segments and handshakes with certificates, without offloads.
const spareReadLen = 4096

// initSpareSockets makes the sockets open on first use, bound beside the
// main socket at listen.
func (d *Daemon) initSpareSockets(listen netip.AddrPort) {
	s := &d.spare
	s.d, s.bind = d, netip.IPv4Unspecified()
	if a := listen.Addr().Unmap(); a.Is4() {
		s.bind = a
	}
	s.socks = make(map[uint16]*net.UDPConn)
	s.workers.New = func() any { return d.newWorker(d.newTAPWriter(false)) }
}

// send sends b to to from spare socket i, opening it if needed.
func (s *spareSockets) send(i uint16, to netip.AddrPort, b []byte) error {
	c, err := s.socket(i)
	if err != nil {
		return err
	}
	_, err = c.WriteToUDPAddrPort(b, to)
	return err
}

func (s *spareSockets) socket(i uint16) (*net.UDPConn, error) {
	if i >= node.SpareSockets {
		return nil, fmt.Errorf("no spare socket %d", i)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.socks[i]; c != nil {
		return c, nil
	}
	if s.closed {
		return nil, net.ErrClosed
	}
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(s.bind, 0)))
	if err != nil {
		return nil, fmt.Errorf("spare socket: %w", err)
	}
	s.socks[i] = c
	go s.read(i, c)
	return c, nil
}

// read hands the datagrams of spare socket i to the data path until the
// socket closes or stays idle for spareIdle.
func (s *spareSockets) read(i uint16, c *net.UDPConn) {
	buf := make([]byte, spareReadLen)
	dp := s.d.node.Dataplane()
	for {
		if err := c.SetReadDeadline(time.Now().Add(spareIdle)); err != nil {
			return
		}
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.mu.Lock()
			if s.socks[i] == c {
				delete(s.socks, i)
			}
			s.mu.Unlock()
			c.Close()
			return
		}
		if err != nil {
			return
		}
		w := s.workers.Get().(*node.Worker)
		dp.FromNetwork(w, link.SpareEndpoint(i, netip.AddrPortFrom(from.Addr().Unmap(), from.Port())), buf[:n], time.Now().UnixNano())
		w.Tx.Flush()
		s.workers.Put(w)
	}
}

func (s *spareSockets) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for i, c := range s.socks {
		c.Close()
		delete(s.socks, i)
	}
}
