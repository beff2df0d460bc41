package wsock

import (
	"net"
	"sync"
)

// batchLimit is how much batchConn holds back at most before writing.
const batchLimit = 64 << 10

// batchConn is the connection under a WebSocket, where the pipe's writer
// can hold writes back while more datagrams are queued: one system call
// then carries a run of messages instead of one each. Messages stay
// separate frames; only the write calls are merged.
type batchConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  []byte
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hold && len(c.buf) == 0 {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if !c.hold || len(c.buf) >= batchLimit {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// setHold holds writes back, or writes what was held.
func (c *batchConn) setHold(hold bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = hold
	if hold {
		return nil
	}
	return c.flushLocked()
}

func (c *batchConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// wrappingListener gives every accepted connection to wrap: the server
// puts a batchConn under TLS and a boundedConn above it.
type wrappingListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrappingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}
