package turnc

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// serverConn is the net.PacketConn pion's client runs its STUN transactions
// over: writes go out through the daemon's send function, so requests
// leave from burrow's shared socket; responses come back through
// Client.HandleFromServer, never through ReadFrom, which only waits for
// Close.
type serverConn struct {
	send   func(b []byte, to netip.AddrPort) error
	server netip.AddrPort

	closeOnce sync.Once
	closed    chan struct{}
}

func newServerConn(send func([]byte, netip.AddrPort) error, server netip.AddrPort) *serverConn {
	return &serverConn{send: send, server: server, closed: make(chan struct{})}
}

func (s *serverConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	select {
	case <-s.closed:
		return 0, net.ErrClosed
	default:
	}
	udp, ok := addr.(*net.UDPAddr)
	if !ok || unmap(udp.AddrPort()) != s.server {
		return 0, fmt.Errorf("turnc: refusing to send to %v, not the TURN server %v", addr, s.server)
	}
	if err := s.send(p, s.server); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *serverConn) ReadFrom([]byte) (int, net.Addr, error) {
	<-s.closed
	return 0, nil, net.ErrClosed
}

func (s *serverConn) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// LocalAddr is unknown here: the daemon owns the socket.
func (s *serverConn) LocalAddr() net.Addr { return &net.UDPAddr{} }

func (s *serverConn) SetDeadline(time.Time) error      { return nil }
func (s *serverConn) SetReadDeadline(time.Time) error  { return nil }
func (s *serverConn) SetWriteDeadline(time.Time) error { return nil }
