package wsock

import (
	"errors"
	"net"
	"sync/atomic"
)

// errAnswerTooLong ends a connection whose HTTP answer would outgrow its
// request.
var errAnswerTooLong = errors.New("wsock: answer longer than the request")

// boundedConn carries the HTTP exchange of a connection that is not yet a
// WebSocket: until upgraded, it writes no more bytes than it has read, so
// no request, malformed or not, draws an answer longer than itself. A
// write that would is not made, and the connection is closed. TLS's own
// handshake runs beneath it, outside the bound.
type boundedConn struct {
	net.Conn
	read, written atomic.Int64
	upgraded      atomic.Bool
}

func (c *boundedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *boundedConn) Write(p []byte) (int, error) {
	if !c.upgraded.Load() && c.written.Add(int64(len(p))) > c.read.Load() {
		c.Conn.Close()
		return 0, errAnswerTooLong
	}
	return c.Conn.Write(p)
}
