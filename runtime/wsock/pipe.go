package wsock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

var (
	errNotBinary    = errors.New("wsock: peer sent a text message")
	errWriteTimeout = errors.New("wsock: peer accepted nothing within the write timeout")
	errSilent       = errors.New("wsock: peer silent, not even answering pings")
)

// initialReadBuf is a connection's first read buffer; it grows to the
// largest message seen, up to the limit.
const initialReadBuf = 2048

// pipe is one WebSocket connection carrying datagrams. Reads and writes
// pass context.Background, which lets the library skip its per-call timer
// setup: the pipe closes the connection itself on timeouts and Close.
type pipe struct {
	ws     *websocket.Conn
	conn   *batchConn // under ws
	limits Limits
	stats  *counters

	queue       chan *[]byte
	queuedBytes atomic.Int64
	writeTimer  *time.Timer

	// heard is set by everything that arrives and cleared by each idle
	// check; pinging while a ping waits for its pong.
	heard, pinging atomic.Bool

	readBuf []byte

	closeOnce sync.Once
	done      chan struct{}
	cause     error // why the pipe ended; written before done closes
	wg        sync.WaitGroup
}

func newPipe(ws *websocket.Conn, conn *batchConn, limits Limits, stats *counters) *pipe {
	ws.SetReadLimit(int64(limits.MaxMessageSize))
	p := &pipe{
		ws:      ws,
		conn:    conn,
		limits:  limits,
		stats:   stats,
		queue:   make(chan *[]byte, limits.QueueLen),
		readBuf: make([]byte, min(initialReadBuf, limits.MaxMessageSize+1)),
		done:    make(chan struct{}),
	}
	p.writeTimer = time.AfterFunc(time.Hour, func() { p.fail(errWriteTimeout) })
	p.writeTimer.Stop()
	p.heard.Store(true)
	p.wg.Add(1)
	go p.runWriter()
	return p
}

// send queues a copy of b for the writer, or drops it when the queue is
// full.
func (p *pipe) send(b []byte) error {
	if len(b) > p.limits.MaxMessageSize {
		return ErrTooLarge
	}
	select {
	case <-p.done:
		return ErrClosed
	default:
	}
	if p.queuedBytes.Add(int64(len(b))) > int64(p.limits.QueueBytes) {
		p.queuedBytes.Add(-int64(len(b)))
		p.stats.dropped.Add(1)
		return ErrQueueFull
	}
	buf := getBuf(len(b))
	*buf = append((*buf)[:0], b...)
	select {
	case p.queue <- buf:
		return nil
	default:
		p.queuedBytes.Add(-int64(len(b)))
		putBuf(buf)
		p.stats.dropped.Add(1)
		return ErrQueueFull
	}
}

// runWriter writes queued datagrams, one message each, and checks for
// silence every half IdleTimeout.
func (p *pipe) runWriter() {
	defer p.wg.Done()
	idle := time.NewTicker(max(p.limits.IdleTimeout/2, time.Millisecond))
	defer idle.Stop()
	for {
		select {
		case <-p.done:
			return
		case buf := <-p.queue:
			if err := p.writeRun(buf); err != nil {
				p.close(fmt.Errorf("wsock: write: %w", err))
				return
			}
		case <-idle.C:
			p.checkIdle()
		}
	}
}

// writeRun writes buf and the datagrams queued behind it, one message
// each, holding the connection's writes back until the queue runs dry. The
// write timeout restarts with each message, so a slow but moving peer
// keeps its connection.
func (p *pipe) writeRun(buf *[]byte) error {
	defer p.writeTimer.Stop()
	for {
		p.writeTimer.Reset(p.limits.WriteTimeout)
		err := p.conn.setHold(len(p.queue) > 0)
		if err == nil {
			err = p.ws.Write(context.Background(), websocket.MessageBinary, *buf)
		}
		p.queuedBytes.Add(-int64(len(*buf)))
		putBuf(buf)
		if err != nil {
			return err
		}
		p.stats.sent.Add(1)
		select {
		case buf = <-p.queue:
		default:
			return p.conn.setHold(false)
		}
	}
}

// checkIdle pings a connection silent since the last check, and closes one
// that stayed silent although pinged then.
func (p *pipe) checkIdle() {
	if p.heard.Swap(false) {
		return
	}
	if p.pinging.Load() {
		p.fail(errSilent)
		return
	}
	p.pinging.Store(true)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// Ping waits for the pong, or for the connection to close.
		if p.ws.Ping(context.Background()) == nil {
			p.heard.Store(true)
		}
		p.pinging.Store(false)
	}()
}

// readLoop hands each message to deliver until the connection fails, and
// returns why. It runs on one goroutine per connection.
func (p *pipe) readLoop(deliver func(b []byte)) error {
	for {
		typ, r, err := p.ws.Reader(context.Background())
		if err != nil {
			return err
		}
		if !p.heard.Load() {
			p.heard.Store(true)
		}
		if typ != websocket.MessageBinary {
			p.stats.broken.Add(1)
			p.ws.Close(websocket.StatusUnsupportedData, "binary messages only")
			return errNotBinary
		}
		n, err := p.readMessage(r)
		if err != nil {
			if errors.Is(err, websocket.ErrMessageTooBig) {
				p.stats.broken.Add(1) // the library has sent the close frame
			}
			return err
		}
		p.stats.received.Add(1)
		deliver(p.readBuf[:n])
	}
}

// readMessage reads one message into readBuf, growing it up to one byte
// beyond the limit, which the library's limit reader reports as too big.
func (p *pipe) readMessage(r io.Reader) (int, error) {
	n := 0
	for {
		if n == len(p.readBuf) {
			grown := make([]byte, min(2*len(p.readBuf), p.limits.MaxMessageSize+1))
			copy(grown, p.readBuf[:n])
			p.readBuf = grown
		}
		m, err := r.Read(p.readBuf[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// fail closes a connection that misbehaved.
func (p *pipe) fail(cause error) {
	p.closeOnce.Do(func() {
		p.stats.broken.Add(1)
		p.shutdown(cause)
	})
}

// close ends the pipe at once; the first cause sticks.
func (p *pipe) close(cause error) {
	p.closeOnce.Do(func() { p.shutdown(cause) })
}

func (p *pipe) shutdown(cause error) {
	p.cause = cause
	close(p.done)
	p.writeTimer.Stop()
	p.ws.CloseNow()
}

// wait waits for the pipe's goroutines; the pipe must be closed.
func (p *pipe) wait() { p.wg.Wait() }
