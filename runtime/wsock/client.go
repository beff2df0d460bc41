package wsock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// URL is the beacon's endpoint, wss://host/path (or ws:// in tests).
	URL string
	// TLS configures wss://; nil trusts the system's roots.
	TLS *tls.Config
	// Deliver receives each datagram the server sent, on the client's
	// reader goroutine; b is valid only during the call.
	Deliver func(b []byte)
	// Limits apply to the connection.
	Limits
}

// Client is a node's connection to a beacon. It does not reconnect: when
// Done is closed, the caller dials again.
type Client struct {
	pipe  *pipe
	stats counters
}

// Dial connects to the server. HTTPS_PROXY and the like are honoured, as
// networks that only let HTTPS out often insist on a proxy.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.Deliver == nil {
		return nil, errors.New("wsock: no Deliver function")
	}
	cfg.Limits = cfg.Limits.withDefaults()
	// A transport of its own, so that a failed dial leaves no idle
	// connection behind, and whose custom TLS config keeps HTTP/2, which
	// cannot upgrade, away.
	var conn *batchConn
	var dialer net.Dialer
	transport := &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		TLSClientConfig: cfg.TLS,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			conn = &batchConn{Conn: c}
			return conn, nil
		},
	}
	ws, _, err := websocket.Dial(ctx, cfg.URL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: transport}})
	if err != nil {
		transport.CloseIdleConnections()
		return nil, fmt.Errorf("wsock: dial %s: %w", cfg.URL, err)
	}
	c := &Client{}
	c.pipe = newPipe(ws, conn, cfg.Limits, &c.stats)
	c.pipe.wg.Add(1)
	go func() {
		defer c.pipe.wg.Done()
		c.pipe.close(c.pipe.readLoop(cfg.Deliver))
	}()
	return c, nil
}

// Send queues b without waiting; see ErrQueueFull.
func (c *Client) Send(b []byte) error { return c.pipe.send(b) }

// Done is closed when the connection has ended.
func (c *Client) Done() <-chan struct{} { return c.pipe.done }

// Err says why the connection ended, once Done is closed; nil before.
func (c *Client) Err() error {
	select {
	case <-c.pipe.done:
		return c.pipe.cause
	default:
		return nil
	}
}

// Stats returns the counters.
func (c *Client) Stats() Stats { return c.stats.snapshot() }

// closeGrace is how long Close waits for the server to answer its goodbye.
const closeGrace = time.Second

// Close says goodbye to the server, ends the connection and waits for its
// goroutines.
func (c *Client) Close() error {
	select {
	case <-c.pipe.done:
	default:
		answered := make(chan struct{})
		go func() {
			defer close(answered)
			c.pipe.ws.Close(websocket.StatusNormalClosure, "")
		}()
		select {
		case <-answered:
		case <-time.After(closeGrace):
		}
		c.pipe.close(ErrClosed) // also ends a goodbye still waiting
		<-answered
	}
	c.pipe.wait()
	return nil
}
