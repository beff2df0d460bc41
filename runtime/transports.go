package runtime

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"burrow/config"
	"burrow/link"
	"burrow/node"
	"burrow/runtime/turnc"
	"burrow/runtime/wsock"
)

// transports are the ways besides the UDP socket that datagrams travel:
// a TURN allocation, a WebSocket server (on a beacon) and WebSocket
// clients to beacons (on a node whose network blocks UDP).
type transports struct {
	turn *turnc.Client
	ws   *wsock.Server
	stun *net.UDPConn // a beacon's second STUN port

	mu      sync.Mutex
	clients map[uint32]*wsock.Client
	next    uint32
	workers sync.Pool // *node.Worker for the WebSocket server's readers
}

// clientStreams are numbered from here so they never collide with the
// server's connection numbers.
const clientStreamBase = 1 << 31

// startTransports sets up TURN and the WebSocket server as configured.
func (d *Daemon) startTransports(cfg *config.Config) error {
	d.initSpareSockets(cfg.ListenAddr)
	t := &d.tr
	t.clients = make(map[uint32]*wsock.Client)
	t.next = clientStreamBase
	if tc := cfg.TURN; tc != nil {
		client, err := turnc.New(turnc.Config{
			Server: tc.Addr, Username: tc.Username, Password: tc.Password, Realm: tc.Realm,
			Send: d.conn.WriteTo, Log: d.log,
			OnRelayedAddr: func(relayed netip.AddrPort) {
				go d.call(func() { d.node.SetRelayedAddress(relayed) })
			},
		})
		if err != nil {
			return fmt.Errorf("turn: %w", err)
		}
		t.turn = client
	}
	if cfg.Beacon.Enabled {
		d.serveSecondSTUNPort(cfg.ListenAddr)
	}
	if ws := cfg.Beacon.WebSocket; cfg.Beacon.Enabled && ws.Listen != "" {
		var tlsConfig *tls.Config
		if ws.Cert != "" {
			cert, err := tls.LoadX509KeyPair(ws.Cert, ws.Key)
			if err != nil {
				return fmt.Errorf("beacon.websocket.cert: %w", err)
			}
			tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		path := ws.Path
		if path == "" {
			path = "/burrow"
		}
		t.workers.New = func() any { return d.newWorker(d.newTAPWriter(false)) }
		server, err := wsock.NewServer(wsock.ServerConfig{Listen: ws.Listen, TLS: tlsConfig, Path: path, Log: d.log,
			Deliver: func(conn uint32, b []byte) {
				w := t.workers.Get().(*node.Worker)
				d.node.Dataplane().FromNetwork(w, link.Endpoint{Via: link.Stream, Stream: conn}, b, time.Now().UnixNano())
				w.Tx.Flush()
				t.workers.Put(w)
			}})
		if err != nil {
			return fmt.Errorf("beacon.websocket.listen: %w", err)
		}
		t.ws = server
	}
	return nil
}

// allocateTURN runs the first TURN allocation off the core goroutine: its
// answers come back through the socket reader.
func (d *Daemon) allocateTURN(ctx context.Context) {
	if d.tr.turn == nil {
		return
	}
	go func() {
		relayed, err := d.tr.turn.Allocate(ctx)
		if err != nil {
			d.log.Warn("TURN allocation failed; continuing without a relayed candidate", "server", d.tr.turn.Server(), "err", err)
			return
		}
		d.log.Info("TURN relayed address", "relayed", relayed, "mapped", d.tr.turn.MappedAddr())
		d.call(func() { d.node.SetRelayedAddress(relayed) })
	}()
}

// sendStream sends on a WebSocket connection, ours or a client's.
func (d *Daemon) sendStream(id uint32, b []byte) error {
	if id >= clientStreamBase {
		d.tr.mu.Lock()
		c := d.tr.clients[id]
		d.tr.mu.Unlock()
		if c == nil {
			return wsock.ErrClosed
		}
		return c.Send(b)
	}
	if d.tr.ws == nil {
		return wsock.ErrClosed
	}
	return d.tr.ws.Send(id, b)
}

// OpenStream dials beacon i over WebSocket; the core asks for it when UDP
// reached no beacon. Runs on the core goroutine, so the dial goes elsewhere.
func (o *coreOutput) OpenStream(beacon int) {
	d := (*Daemon)(o)
	b := d.cfg.Beacons[beacon]
	go func() {
		w := d.newWorker(d.newTAPWriter(false))
		var id uint32
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var tlsConfig *tls.Config
		if b.TLSInsecure {
			tlsConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // operator's explicit choice for tests
		}
		c, err := wsock.Dial(ctx, wsock.ClientConfig{URL: b.WebSocket, TLS: tlsConfig, Deliver: func(p []byte) {
			d.node.Dataplane().FromNetwork(w, link.Endpoint{Via: link.Stream, Stream: id}, p, time.Now().UnixNano())
			w.Tx.Flush()
		}})
		if err != nil {
			d.log.Warn("WebSocket to beacon failed", "url", b.WebSocket, "err", err)
			d.call(func() { d.node.StreamDown(0, time.Now()) })
			return
		}
		d.tr.mu.Lock()
		d.tr.next++
		id = d.tr.next
		d.tr.clients[id] = c
		d.tr.mu.Unlock()
		d.log.Info("WebSocket to beacon up", "url", b.WebSocket, "stream", id)
		d.call(func() { d.node.StreamUp(beacon, id, time.Now()) })
		<-c.Done()
		d.tr.mu.Lock()
		delete(d.tr.clients, id)
		d.tr.mu.Unlock()
		d.log.Info("WebSocket to beacon closed", "url", b.WebSocket, "err", c.Err())
		d.call(func() { d.node.StreamDown(id, time.Now()) })
	}()
}

func (d *Daemon) closeTransports() {
	d.spare.close()
	if d.tr.stun != nil {
		d.tr.stun.Close()
	}
	if d.tr.turn != nil {
		d.tr.turn.Close()
	}
	if d.tr.ws != nil {
		d.tr.ws.Close()
	}
	d.tr.mu.Lock()
	for _, c := range d.tr.clients {
		c.Close()
	}
	d.tr.mu.Unlock()
}
