// Package wsock carries burrow's datagrams over WebSocket, for networks that
// only let HTTPS out: a beacon runs a Server, a node behind such a firewall
// Dials it. Each datagram is one binary WebSocket message, never a slice of
// a byte stream: a datagram arrives whole or not at all, and no side ever
// looks for boundaries inside TCP's stream. Stack4Things lost about 90 % of
// its throughput tunnelling datagrams spliced into a stream
// (stack4things-iot-network-virtualization §4.2); message framing is the
// remedy that paper points to.
//
// Every connection has a bounded send queue drained by one writer
// goroutine, so Send never waits for a slow peer: when the queue is full
// the datagram is dropped and counted, as on a congested UDP path, and a
// peer that accepts nothing for WriteTimeout is disconnected. A run of
// queued datagrams leaves in one write system call, still one message
// each. One reader
// goroutine hands each message to the Deliver callback. A connection that
// stays silent is pinged and closed if the pong does not come. A message
// that is too large or not binary closes its connection, nothing else.
package wsock

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrClosed is returned by Send on a closed connection or server.
	ErrClosed = errors.New("wsock: connection closed")
	// ErrQueueFull is returned by Send when the connection's queue is full:
	// the datagram was dropped.
	ErrQueueFull = errors.New("wsock: send queue full, datagram dropped")
	// ErrTooLarge is returned by Send for a datagram over MaxMessageSize.
	ErrTooLarge = errors.New("wsock: datagram larger than the message size limit")
	// ErrUnknownConn is returned by Server.Send for a connection that is not
	// open.
	ErrUnknownConn = errors.New("wsock: no such connection")
)

// Limits bound what one connection may cost. The zero value of a field
// means its default.
type Limits struct {
	// MaxMessageSize is the largest datagram either way; a peer sending a
	// larger message is disconnected. Default 65535.
	MaxMessageSize int
	// QueueLen bounds how many datagrams wait for the writer, and QueueBytes
	// their total size. Defaults 512 and 4 MiB.
	QueueLen, QueueBytes int
	// IdleTimeout: a connection on which nothing arrived for half of it is
	// pinged, and closed when nothing, not even the pong, arrived for all
	// of it. Default 30 s.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose peer accepts nothing for this
	// long. Default 10 s.
	WriteTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxMessageSize <= 0 {
		l.MaxMessageSize = 65535
	}
	if l.QueueLen <= 0 {
		l.QueueLen = 512
	}
	if l.QueueBytes <= 0 {
		l.QueueBytes = 4 << 20
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 30 * time.Second
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 10 * time.Second
	}
	return l
}

// Stats counts datagrams and connections.
type Stats struct {
	// Sent and Received count datagrams written to and read from
	// connections.
	Sent, Received uint64
	// Dropped counts datagrams Send dropped because a queue was full.
	Dropped uint64
	// Refused counts connections refused because MaxConns were open.
	Refused uint64
	// Broken counts connections closed for misbehaving: a message too large
	// or not binary, a write timeout, or silence.
	Broken uint64
}

type counters struct {
	sent, received, dropped, refused, broken atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Sent: c.sent.Load(), Received: c.received.Load(), Dropped: c.dropped.Load(),
		Refused: c.refused.Load(), Broken: c.broken.Load(),
	}
}

// Queued datagrams live in pooled buffers of two sizes: most datagrams fit
// a small one.
const smallBufSize = 2048

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, 0, smallBufSize); return &b }}
	largeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 65536); return &b }}
)

func getBuf(size int) *[]byte {
	if size <= smallBufSize {
		return smallBufs.Get().(*[]byte)
	}
	return largeBufs.Get().(*[]byte)
}

func putBuf(b *[]byte) {
	if cap(*b) <= smallBufSize {
		smallBufs.Put(b)
	} else {
		largeBufs.Put(b)
	}
}
