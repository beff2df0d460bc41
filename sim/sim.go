// Package sim is burrow's discrete-event simulator: it drives many node
// cores (package node, unchanged) over a simulated network in virtual time,
// with latency, loss, partitions, failures and restarts, and with a
// virtual host behind each node's TAP that sends broadcasts, ping-like
// probes and bulk flows. Scenarios built on it (package sim/scenario)
// reproduce the EdgeVPN paper's experiments E3–E9 and check burrow's
// invariants.
//
// The engine is pure like the core: no sockets, no goroutines, no wall
// clock and one seeded random source, so a run replays exactly from its
// seed. Events are ordered by virtual time and then by the order they were
// scheduled in.
package sim

import (
	"encoding/binary"
	"math/rand/v2"
	"time"

	"burrow/nid"
	"burrow/node"
)

// Config configures a simulation.
type Config struct {
	Seed uint64
	// Latency is the one-way delay of every path. Jitter adds to each pair
	// of nodes a fixed extra delay, uniform in [0, Jitter) and derived from
	// the seed, so paths differ but stay stable.
	Latency, Jitter time.Duration
	// Loss is the probability that any datagram is lost.
	Loss float64
	// Observe, when set, sees every datagram delivered to a running node,
	// after the node handled it: for debugging and custom measurements.
	Observe func(Delivery)
	// Progress, when set, is called every ProgressEvery events (default
	// 1<<20) so a long run can report how it goes.
	Progress      func(Progress)
	ProgressEvery uint64
}

// DefaultLatency is the one-way delay when Config.Latency is zero.
const DefaultLatency = 10 * time.Millisecond

// Progress describes a run in progress.
type Progress struct {
	Elapsed time.Duration // virtual time since the start
	Events  uint64
	Nodes   int // nodes up
	Queue   int // events waiting
	sim     *Sim
}

// ControlMessages sums the overlay control messages the running nodes'
// cores sent and passed on toward their destinations since they started.
// Passed on per sent tells how far routed messages travel: while long
// links are missing, a message routed across the ring crosses many nodes.
// It reads every node, so a caller reporting progress asks only when it
// prints.
func (p Progress) ControlMessages() (sent, forwarded uint64) {
	if p.sim == nil {
		return 0, 0
	}
	for _, n := range p.sim.nodes {
		if n.up {
			s, f := n.core.ControlMessages()
			sent, forwarded = sent+s, forwarded+f
		}
	}
	return sent, forwarded
}

// Sim is one simulation. It is not safe for concurrent use.
type Sim struct {
	cfg    Config
	rng    *rand.Rand
	start  int64 // virtual unix nanoseconds at the start
	now    int64
	seq    uint64
	q      queue
	nodes  []*Node
	flows  []*Flow
	bcasts []*broadcast
	byID   map[nid.ID]int
	// lastLinks are the overlay links each node had at the last
	// overlayChanges.
	lastLinks []map[nid.ID]uint32
	pool      [len(bufferClasses)][][]byte
	// tx is the one transmit batch every node's data path fills; the
	// engine flushes it after each call, while curNode says whose it is.
	tx *node.TxBatch
	// worker is the one data-path worker of every node, as the engine
	// handles one node at a time. One per node would keep a superseded
	// snapshot of each node's tables alive in its flow cache.
	worker  node.Worker
	dh      simDH
	curNode *Node
	cur     cause
	events  uint64
	stats   NetStats
}

// cause is what the event being handled carries: the flow of the frame
// inside, and how many links it crossed. Datagrams sent while handling it
// inherit both (one more link), which is how the engine follows a frame
// through the overlay although every hop is encrypted.
type cause struct {
	flow int32
	hop  uint8
}

var noCause = cause{flow: -1}

// Delivery describes a datagram delivered to a running node.
type Delivery struct {
	At       time.Duration // virtual time since the start
	From, To int           // node indices
	Size     int
	Kind     Kind // as classified at the receiver
	Flow     int  // the flow it belongs to, -1 for none
	Hop      int  // links the frame inside crossed up to here
}

// NetStats count what the simulated network did with datagrams.
type NetStats struct {
	Sent        uint64 `json:"sent"`
	Delivered   uint64 `json:"delivered"`
	Lost        uint64 `json:"lost"`        // random loss
	Partitioned uint64 `json:"partitioned"` // sender and receiver on different sides
	ToDown      uint64 `json:"to_down"`     // receiver not running
	Unroutable  uint64 `json:"unroutable"`  // no node at that address
	Ticks       uint64 `json:"ticks"`       // ticks run (stale timers not counted)
	// Spins counts ticks the engine deferred by spinDelay because the
	// core asked to be ticked again at the very instant it just ticked.
	Spins uint64 `json:"spins"`
}

// start is the virtual clock's origin; any fixed instant would do.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// New creates an empty simulation.
func New(cfg Config) *Sim {
	if cfg.Latency <= 0 {
		cfg.Latency = DefaultLatency
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = 1 << 20
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], cfg.Seed)
	copy(seed[8:], "burrow simulation")
	s := &Sim{
		cfg:   cfg,
		rng:   rand.New(rand.NewChaCha8(seed)),
		start: epoch.UnixNano(),
		now:   epoch.UnixNano(),
		cur:   noCause,
		dh:    simDH{statics: make(map[[32]byte][32]byte)},
	}
	s.tx = node.NewTxBatch(0, txBufLen, s.flushTx)
	s.worker = node.Worker{Tx: s.tx, Frames: (*hostSink)(s), Slow: s.slowEvent}
	return s
}

// txBufLen holds the largest datagram: a full-size frame plus headers.
var txBufLen = node.TxBufLen(maxFrameSize)

// maxFrameSize is the largest frame a host sends.
const maxFrameSize = 1500

// Rand is the simulation's random source, for scenarios to draw from so
// that everything derives from the one seed.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Now is the current virtual time.
func (s *Sim) Now() time.Time { return time.Unix(0, s.now) }

// Elapsed is the virtual time since the start.
func (s *Sim) Elapsed() time.Duration { return time.Duration(s.now - s.start) }

// Events is how many events have been processed.
func (s *Sim) Events() uint64 { return s.events }

// NetStats reports what the network did with datagrams so far.
func (s *Sim) NetStats() NetStats { return s.stats }

// At schedules fn at virtual time t after the start (at once if t has
// passed).
func (s *Sim) At(t time.Duration, fn func()) {
	s.push(event{at: max(s.start+int64(t), s.now), kind: evCall, fn: fn})
}

// After schedules fn d from now.
func (s *Sim) After(d time.Duration, fn func()) {
	s.push(event{at: s.now + int64(max(d, 0)), kind: evCall, fn: fn})
}

func (s *Sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.q.push(e)
}

// RunFor advances virtual time by d, processing every event due.
func (s *Sim) RunFor(d time.Duration) { s.RunUntil(s.Elapsed() + d) }

// RunUntil processes every event due up to virtual time t after the start
// and leaves the clock at t.
func (s *Sim) RunUntil(t time.Duration) {
	end := s.start + int64(t)
	for s.q.len() > 0 && s.q.peek().at <= end {
		e := s.q.pop()
		s.now = e.at
		s.events++
		switch e.kind {
		case evDatagram:
			s.deliver(&e)
		case evTimer:
			s.tick(&e)
		case evTAP:
			s.fromHost(&e)
		case evFlow:
			s.flows[e.node].next(s)
		case evCall:
			e.fn()
		}
		if s.cfg.Progress != nil && s.events%s.cfg.ProgressEvery == 0 {
			s.cfg.Progress(Progress{Elapsed: s.Elapsed(), Events: s.events, Nodes: s.UpCount(), Queue: s.q.len(), sim: s})
		}
	}
	if end > s.now {
		s.now = end
	}
}

// buffer returns a pooled buffer holding a copy of b.
func (s *Sim) buffer(b []byte) []byte { return append(s.bufferFor(len(b)), b...) }

// bufferClasses are the capacities of pooled buffers. Most datagrams are
// keepalives and control messages of a few dozen to a few hundred bytes;
// giving each a full frame's buffer made the pool the largest thing the
// engine held (37 MB at 2,000 nodes).
var bufferClasses = [...]int{128, 512, txBufLen}

// bufferFor returns an empty pooled buffer that holds size bytes.
func (s *Sim) bufferFor(size int) []byte {
	for c, capacity := range bufferClasses {
		if size > capacity {
			continue
		}
		if p := s.pool[c]; len(p) > 0 {
			buf := p[len(p)-1]
			s.pool[c] = p[:len(p)-1]
			return buf[:0]
		}
		return make([]byte, 0, capacity)
	}
	return make([]byte, 0, size) // larger than any datagram: not pooled
}

func (s *Sim) release(b []byte) {
	for c, capacity := range bufferClasses {
		if cap(b) == capacity {
			s.pool[c] = append(s.pool[c], b)
			return
		}
	}
}

// splitmix64 scrambles x; it derives per-pair values from the seed without
// drawing from (and so without disturbing) the random source.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
