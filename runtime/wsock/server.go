package wsock

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// DefaultMaxConns is ServerConfig.MaxConns when unset.
const DefaultMaxConns = 1024

// ServerConfig configures a Server.
type ServerConfig struct {
	// Listen is the TCP address to listen on, such as ":443"; port 0 picks
	// a free one (see Addr).
	Listen string
	// TLS, when set, serves wss://; nil serves plain ws://, for tests or
	// behind a proxy that terminates TLS.
	TLS *tls.Config
	// Path is the URL path of the WebSocket endpoint. Default "/".
	Path string
	// Deliver receives each datagram a client sent. It runs on the
	// connection's reader goroutine, so calls for different connections run
	// at the same time; b is valid only during the call.
	Deliver func(conn uint32, b []byte)
	// OnOpen and OnClose, if set, bracket a connection on its reader
	// goroutine: OnOpen runs before its first Deliver, OnClose after its
	// last, once Send no longer reaches it.
	OnOpen, OnClose func(conn uint32, remote netip.AddrPort)
	// MaxConns bounds the open connections; more are refused with HTTP 503.
	// Default DefaultMaxConns.
	MaxConns int
	// Limits apply to each connection.
	Limits
	// Log receives the server's coarse events; nil discards them.
	Log *slog.Logger
}

// connKey finds a request's connection in its context.
type connKey struct{}

// Server is a beacon's WebSocket endpoint. Connections are numbered from 1
// and numbers are not reused while open.
type Server struct {
	cfg   ServerConfig
	log   *slog.Logger
	ln    net.Listener
	http  *http.Server
	stats counters
	wg    sync.WaitGroup // Serve and the connection handlers

	mu     sync.RWMutex
	conns  map[uint32]*pipe // nil while the handshake runs
	lastID uint32
	closed bool
}

// NewServer listens and starts serving.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.Deliver == nil {
		return nil, errors.New("wsock: no Deliver function")
	}
	if cfg.Path == "" {
		cfg.Path = "/"
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.Limits = cfg.Limits.withDefaults()
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tcp, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	var ln net.Listener = wrappingListener{tcp, func(c net.Conn) net.Conn { return &batchConn{Conn: c} }}
	if cfg.TLS != nil {
		tlsCfg := cfg.TLS.Clone()
		// WebSocket upgrades need HTTP/1.1.
		tlsCfg.NextProtos = []string{"http/1.1"}
		ln = tls.NewListener(ln, tlsCfg)
	}
	ln = wrappingListener{ln, func(c net.Conn) net.Conn { return &boundedConn{Conn: c} }}
	s := &Server{cfg: cfg, log: log, ln: ln, conns: map[uint32]*pipe{}}
	s.http = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c.(*boundedConn))
		},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.http.Serve(ln)
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() netip.AddrPort {
	return s.ln.Addr().(*net.TCPAddr).AddrPort()
}

// Stats returns the counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// Send queues b for connection conn without waiting; see ErrQueueFull.
func (s *Server) Send(conn uint32, b []byte) error {
	s.mu.RLock()
	p := s.conns[conn]
	s.mu.RUnlock()
	if p == nil {
		return ErrUnknownConn
	}
	return p.send(b)
}

// ServeHTTP upgrades a request for the endpoint and carries the
// connection until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != s.cfg.Path {
		http.NotFound(w, r)
		return
	}
	id, ok := s.reserve()
	if !ok {
		s.stats.refused.Add(1)
		http.Error(w, "burrow beacon: too many connections", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	bounded := r.Context().Value(connKey{}).(*boundedConn)
	// Without a Date header the answer to the shortest valid upgrade
	// request is shorter than it, as the bound asks.
	w.Header()["Date"] = nil
	ws, err := websocket.Accept(w, r, nil)
	if err != nil { // Accept answered the request
		s.release(id)
		return
	}
	bounded.upgraded.Store(true)
	p := newPipe(ws, batchConnUnder(bounded), s.cfg.Limits, &s.stats)
	if !s.register(id, p) {
		p.close(ErrClosed)
		p.wait()
		s.release(id)
		return
	}
	remote, _ := netip.ParseAddrPort(r.RemoteAddr)
	s.log.Debug("websocket connection open", "conn", id, "remote", remote)
	if s.cfg.OnOpen != nil {
		s.cfg.OnOpen(id, remote)
	}
	err = p.readLoop(func(b []byte) { s.cfg.Deliver(id, b) })
	p.close(err)
	p.wait()
	s.release(id)
	s.log.Debug("websocket connection closed", "conn", id, "remote", remote, "err", p.cause)
	if s.cfg.OnClose != nil {
		s.cfg.OnClose(id, remote)
	}
}

// batchConnUnder finds the batchConn beneath a connection's TLS, if any.
func batchConnUnder(c *boundedConn) *batchConn {
	if t, ok := c.Conn.(*tls.Conn); ok {
		return t.NetConn().(*batchConn)
	}
	return c.Conn.(*batchConn)
}

// reserve takes a connection number and a place under MaxConns.
func (s *Server) reserve() (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= s.cfg.MaxConns {
		return 0, false
	}
	for {
		s.lastID++
		if _, taken := s.conns[s.lastID]; !taken && s.lastID != 0 {
			break
		}
	}
	s.conns[s.lastID] = nil
	s.wg.Add(1)
	return s.lastID, true
}

// register makes an upgraded connection reachable by Send, unless the
// server closed meanwhile.
func (s *Server) register(id uint32, p *pipe) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[id] = p
	return true
}

func (s *Server) release(id uint32) {
	s.mu.Lock()
	delete(s.conns, id)
	s.mu.Unlock()
}

// Close stops listening, closes every connection and waits until their
// goroutines, and with them every OnClose, have finished.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var open []*pipe
	for _, p := range s.conns {
		if p != nil {
			open = append(open, p)
		}
	}
	s.mu.Unlock()
	err := s.http.Close()
	for _, p := range open {
		p.close(ErrClosed)
	}
	s.wg.Wait()
	return err
}
