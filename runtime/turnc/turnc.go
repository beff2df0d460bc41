// Package turnc is burrow's TURN client (RFC 8656): the standard relay the
// EdgeVPN seed's NAT traversal falls back on (section 3.3). It holds one UDP
// allocation on a TURN server, reached from burrow's shared UDP socket, so
// the relayed address and burrow's own traffic use one local port and the
// server sees the same 5-tuple as every peer does.
//
// The package owns no socket. The daemon gives it a send function and hands
// it every datagram whose source is the server (HandleFromServer), which
// returns peers' datagrams to the daemon's data path without copying.
// Datagrams travel as ChannelData, 4 bytes of overhead: the first datagram
// to a new peer binds a channel, which also installs the permission for the
// peer's address, and waits in a short queue until the server confirms.
//
// pion/turn's client runs the STUN transactions: retransmissions, matching
// responses to requests. The allocation, channels and permissions are
// burrow's own, built on pion/stun, because pion's allocation object gives
// up where burrow must not: it closes the whole allocation when coturn
// answers a ChannelBind with 400 after a stale nonce, it only logs a failed
// refresh, so a lost allocation (server restart, NAT mapping change) goes
// unnoticed, and it allocates, and may block, on every write.
//
// One goroutine per Client keeps the allocation alive: it refreshes the
// allocation every KeepAlive, which also detects its loss and keeps NAT
// mappings on the way open; it binds channels and renews those in use; it
// sends requests refused with 438 (stale nonce) again with the fresh nonce;
// and it re-allocates when the allocation is lost. Close stops it.
package turnc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/stun/v4"
	"github.com/pion/turn/v5"
)

// Defaults of Config.
const (
	// DefaultKeepAlive refreshes the allocation well inside the 30 s that
	// many NATs keep an idle UDP mapping.
	DefaultKeepAlive = 25 * time.Second
	// DefaultBindingRefresh renews channel bindings, and with them the
	// permissions, inside the 5-minute permission lifetime of RFC 8656 §9.
	DefaultBindingRefresh = 4 * time.Minute
)

// Implementation constants.
const (
	// requestedLifetime is asked for in every Allocate and Refresh: RFC
	// 8656's default, and what coturn caps at its maximum (it replaces a
	// smaller request by 600 s, even beyond its configured maximum).
	requestedLifetime = 10 * time.Minute
	// maxQueued is how many datagrams to a peer wait for its channel.
	maxQueued = 8
	// bindRetryAfter is how long Send drops datagrams to a peer whose
	// channel could not be bound before it asks again.
	bindRetryAfter = time.Second
	// refreshRetryAfter spaces retries of a failed refresh while the
	// allocation has not expired yet.
	refreshRetryAfter = time.Second
	// Re-allocation attempts back off from the first to the last delay.
	firstReallocDelay = time.Second
	lastReallocDelay  = 30 * time.Second
	// After releasing an allocation an earlier run left on this 5-tuple,
	// Allocate is tried again after waits from releaseWait, doubling, up to
	// maxReleaseWait.
	releaseWait    = 50 * time.Millisecond
	maxReleaseWait = 2 * time.Second
	// maxAuthAttempts bounds how often one request is sent again with a
	// new nonce or realm.
	maxAuthAttempts = 4
)

// Config configures a Client.
type Config struct {
	// Server is the TURN server's UDP address.
	Server netip.AddrPort
	// Username and Password are the long-term credentials.
	Username, Password string
	// Realm, when set, is the realm the server must announce; empty accepts
	// the server's.
	Realm string
	// Send sends one datagram from burrow's shared UDP socket, such as
	// udpio.Conn.WriteTo. It is called from several goroutines at once and
	// must not keep b.
	Send func(b []byte, to netip.AddrPort) error
	// OnRelayedAddr, if set, learns of changes of the relayed address after
	// Allocate returned the first one: the zero AddrPort when the allocation
	// is lost, the new address once re-allocated. It runs on the client's
	// goroutine and must neither block nor call Close.
	OnRelayedAddr func(relayed netip.AddrPort)
	// Log receives the client's coarse events; nil discards them.
	Log *slog.Logger
	// KeepAlive is how often the allocation is refreshed; at most half its
	// lifetime is used. Zero means DefaultKeepAlive.
	KeepAlive time.Duration
	// BindingRefresh is how often a channel binding in use is renewed; it
	// must stay below the server's permission lifetime. Zero means
	// DefaultBindingRefresh.
	BindingRefresh time.Duration
}

// Inbound says what a datagram from the server was.
type Inbound uint8

const (
	// NotTURN is not this client's traffic, such as a STUN Binding response
	// to the daemon's own request: the caller handles it.
	NotTURN Inbound = iota
	// Control is TURN signalling or a malformed relayed datagram, consumed.
	Control
	// PeerData is a peer's datagram.
	PeerData
)

// Stats counts a Client's work since New.
type Stats struct {
	// Sent and Received count peers' datagrams relayed each way.
	Sent, Received uint64
	// ReceivedIndications counts the Received datagrams that came as Data
	// indications rather than ChannelData.
	ReceivedIndications uint64
	// Dropped counts datagrams lost here: queued for a channel that could
	// not be bound, beyond the queue, or received malformed or on an
	// unknown channel.
	Dropped uint64
	// Refreshes, Bindings and Reallocations count successful requests;
	// Bindings include renewals.
	Refreshes, Bindings, Reallocations uint64
	// StaleNonces counts 438 answers, each followed by a retry.
	StaleNonces uint64
}

type stats struct {
	sent, received, indications, dropped      atomic.Uint64
	refreshes, bindings, reallocations, stale atomic.Uint64
}

// Channel states.
const (
	chanIdle uint32 = iota
	chanBinding
	chanBound
)

// channel is a peer's channel number, kept for the Client's lifetime so a
// peer is never bound to two numbers (servers refuse that).
type channel struct {
	peer   netip.AddrPort
	number uint16
	state  atomic.Uint32
	// used is set by each send and cleared by each renewal: a channel not
	// used in between is left to expire.
	used atomic.Bool

	// Under Client.mu.
	queued     [][]byte
	retryAfter time.Time

	// Maintenance goroutine only.
	renewAt time.Time
}

// channelTable is an immutable snapshot of the channels; Send and
// HandleFromServer read it without locks.
type channelTable struct {
	byPeer   map[netip.AddrPort]*channel
	byNumber []*channel // index: number - firstChannel
}

// Client is a TURN allocation. Send, HandleFromServer and the accessors may
// be called from any goroutine.
type Client struct {
	cfg        Config
	log        *slog.Logger
	username   stun.Username
	serverAddr net.Addr
	conn       *serverConn
	turn       *turn.Client
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	wake       chan struct{}
	table      atomic.Pointer[channelTable]
	closed     atomic.Bool
	stats      stats
	bufs       sync.Pool

	mu         sync.Mutex
	allocating bool // Allocate runs
	allocated  bool // Allocate succeeded
	relayed    netip.AddrPort
	mapped     netip.AddrPort

	// Owned by whoever drives the allocation: Allocate, then the
	// maintenance goroutine, then Close.
	realm        stun.Realm
	nonce        stun.Nonce
	integrity    stun.MessageIntegrity
	refreshAt    time.Time
	expiresAt    time.Time
	lost         bool
	reallocAt    time.Time
	reallocDelay time.Duration
}

// New makes a client for the server; it sends nothing until Allocate.
func New(cfg Config) (*Client, error) {
	if !cfg.Server.IsValid() {
		return nil, errors.New("turnc: no server address")
	}
	if cfg.Send == nil {
		return nil, errors.New("turnc: no send function")
	}
	if cfg.Username == "" {
		return nil, errors.New("turnc: no username")
	}
	cfg.Server = unmap(cfg.Server)
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = DefaultKeepAlive
	}
	if cfg.BindingRefresh <= 0 {
		cfg.BindingRefresh = DefaultBindingRefresh
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn := newServerConn(cfg.Send, cfg.Server)
	tc, err := turn.NewClient(&turn.ClientConfig{Conn: conn})
	if err != nil {
		return nil, fmt.Errorf("turnc: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg:        cfg,
		log:        log.With("turn_server", cfg.Server),
		username:   stun.NewUsername(cfg.Username),
		serverAddr: net.UDPAddrFromAddrPort(cfg.Server),
		conn:       conn,
		turn:       tc,
		ctx:        ctx,
		cancel:     cancel,
		wake:       make(chan struct{}, 1),
		bufs: sync.Pool{New: func() any {
			b := make([]byte, 0, channelDataHeaderLen+maxPayload)
			return &b
		}},
	}
	c.table.Store(&channelTable{byPeer: map[netip.AddrPort]*channel{}})
	return c, nil
}

// Server is the TURN server's address: the daemon hands every datagram from
// it to HandleFromServer.
func (c *Client) Server() netip.AddrPort { return c.cfg.Server }

// Allocate requests the allocation and returns the relayed address, where
// peers send to reach this node. The daemon's socket reader must already
// pass the server's datagrams to HandleFromServer, since the answers
// arrive there. Once it succeeds, the client keeps the allocation until
// Close; after a failure Allocate may be called again.
func (c *Client) Allocate(ctx context.Context) (netip.AddrPort, error) {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return netip.AddrPort{}, ErrClosed
	}
	if c.allocating || c.allocated {
		c.mu.Unlock()
		return netip.AddrPort{}, errors.New("turnc: Allocate called twice")
	}
	c.allocating = true
	c.wg.Add(1)
	c.mu.Unlock()
	defer c.wg.Done()

	// Close must also abort an allocation in progress.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()

	relayed, err := c.allocate(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allocating = false
	if err != nil {
		return netip.AddrPort{}, err
	}
	if c.closed.Load() {
		return netip.AddrPort{}, ErrClosed
	}
	c.allocated = true
	c.wg.Add(1)
	go c.runMaintenance()
	return relayed, nil
}

// RelayedAddr is the allocation's relayed address, the zero AddrPort while
// there is none.
func (c *Client) RelayedAddr() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relayed
}

// MappedAddr is this node's address as the server sees it (its
// server-reflexive address), from the last allocation.
func (c *Client) MappedAddr() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mapped
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	s := &c.stats
	return Stats{
		Sent: s.sent.Load(), Received: s.received.Load(), ReceivedIndications: s.indications.Load(),
		Dropped: s.dropped.Load(), Refreshes: s.refreshes.Load(), Bindings: s.bindings.Load(),
		Reallocations: s.reallocations.Load(), StaleNonces: s.stale.Load(),
	}
}

// Send relays b to peer, an address as the server sees it. Once the peer's
// channel is bound, Send frames b as ChannelData, hands it to Config.Send
// and allocates nothing. Before that it queues a copy of b, up to a few
// datagrams, and returns ErrNotBound beyond.
func (c *Client) Send(peer netip.AddrPort, b []byte) error {
	if c.closed.Load() {
		return ErrClosed
	}
	if len(b) > maxPayload {
		return ErrTooLarge
	}
	peer = unmap(peer)
	if ch := c.table.Load().byPeer[peer]; ch != nil && ch.state.Load() == chanBound {
		if !ch.used.Load() {
			ch.used.Store(true)
		}
		return c.sendChannelData(ch, b)
	}
	return c.sendUnbound(peer, b)
}

func (c *Client) sendChannelData(ch *channel, b []byte) error {
	buf := c.bufs.Get().(*[]byte)
	*buf = appendChannelData((*buf)[:0], ch.number, b)
	err := c.cfg.Send(*buf, c.cfg.Server)
	c.bufs.Put(buf)
	if err != nil {
		return err
	}
	c.stats.sent.Add(1)
	return nil
}

// sendUnbound queues b for a peer whose channel is not bound, creating the
// channel and asking for the binding as needed.
func (c *Client) sendUnbound(peer netip.AddrPort, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.table.Load().byPeer[peer]
	if ch == nil {
		var err error
		if ch, err = c.addChannelLocked(peer); err != nil {
			c.stats.dropped.Add(1)
			return err
		}
	}
	switch ch.state.Load() {
	case chanBound: // bound meanwhile
		ch.used.Store(true)
		return c.sendChannelData(ch, b)
	case chanIdle:
		if time.Now().Before(ch.retryAfter) {
			c.stats.dropped.Add(1)
			return ErrNotBound
		}
		ch.state.Store(chanBinding)
		c.wakeMaintenance()
	}
	if len(ch.queued) == maxQueued {
		c.stats.dropped.Add(1)
		return ErrNotBound
	}
	ch.queued = append(ch.queued, append([]byte(nil), b...))
	return nil
}

// addChannelLocked gives peer the next channel number and publishes a new
// table.
func (c *Client) addChannelLocked(peer netip.AddrPort) (*channel, error) {
	old := c.table.Load()
	if len(old.byNumber) == maxChannels {
		return nil, ErrTooManyPeers
	}
	ch := &channel{peer: peer, number: uint16(firstChannel + len(old.byNumber))}
	t := &channelTable{
		byPeer:   make(map[netip.AddrPort]*channel, len(old.byPeer)+1),
		byNumber: append(old.byNumber[:len(old.byNumber):len(old.byNumber)], ch),
	}
	for p, existing := range old.byPeer {
		t.byPeer[p] = existing
	}
	t.byPeer[peer] = ch
	c.table.Store(t)
	return ch, nil
}

func (c *Client) wakeMaintenance() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// HandleFromServer takes one datagram whose source is the server; the
// daemon splits coalesced (GRO) reads first. For PeerData it returns the
// peer's address as the server saw it and the payload, a sub-slice of b.
// It allocates nothing for ChannelData.
func (c *Client) HandleFromServer(b []byte) (kind Inbound, peer netip.AddrPort, payload []byte) {
	if number, data, ok := parseChannelData(b); ok {
		t := c.table.Load()
		i := int(number) - firstChannel
		if i < 0 || i >= len(t.byNumber) {
			c.stats.dropped.Add(1)
			return Control, netip.AddrPort{}, nil
		}
		c.stats.received.Add(1)
		return PeerData, t.byNumber[i].peer, data
	}
	if !stun.IsMessage(b) {
		return NotTURN, netip.AddrPort{}, nil
	}
	typ := binary.BigEndian.Uint16(b[0:2])
	if typ == dataIndication {
		peer, data, ok := parseDataIndication(b)
		if !ok {
			c.stats.dropped.Add(1)
			return Control, netip.AddrPort{}, nil
		}
		c.stats.received.Add(1)
		c.stats.indications.Add(1)
		return PeerData, unmap(peer), data
	}
	var t stun.MessageType
	t.ReadValue(typ)
	if !isTURNMethod(t.Method) || (t.Class != stun.ClassSuccessResponse && t.Class != stun.ClassErrorResponse) {
		return NotTURN, netip.AddrPort{}, nil
	}
	// pion matches the response to its transaction and drops strays.
	_, _ = c.turn.HandleInbound(b, c.serverAddr)
	return Control, netip.AddrPort{}, nil
}

func isTURNMethod(m stun.Method) bool {
	switch m {
	case stun.MethodAllocate, stun.MethodRefresh, stun.MethodCreatePermission, stun.MethodChannelBind:
		return true
	}
	return false
}

// Close stops the client and releases the allocation (one unanswered
// Refresh with lifetime 0; if it is lost the allocation expires). Send
// fails afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil
	}
	c.closed.Store(true)
	allocated := c.allocated
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.turn.Close()
	if allocated && !c.lost {
		c.deallocate()
	}
	return c.conn.Close()
}

// deallocate sends one Refresh with lifetime 0 without waiting for the
// answer.
func (c *Client) deallocate() {
	req, err := c.buildRequest(stun.MethodRefresh, lifetimeAttr(0))
	if err != nil {
		return
	}
	if err := c.cfg.Send(req.Raw, c.cfg.Server); err != nil {
		c.log.Debug("releasing the allocation failed", "err", err)
	}
}

func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
