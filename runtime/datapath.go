package runtime

import (
	"errors"
	"net"
	"os"
	goruntime "runtime"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/node"
	"burrow/runtime/codel"
	"burrow/runtime/fq"
	"burrow/runtime/pinned"
	"burrow/runtime/tap"
	"burrow/runtime/turnc"
	"burrow/runtime/udpio"
)

// runTAPReader drains one TAP queue into its fair queue as fast as the
// kernel fills it, so that no frame waits in the kernel's ring behind a
// bulk stream (package fq says why); runTAPWorker sends what it queues.
// A small frame of a flow with nothing queued the reader sends itself, as
// it reads it: a ping, a keystroke, an acknowledgement. The reader runs at
// real-time priority, and the worker at normal priority: the reader's
// work is a copy per frame and the encryption of small ones, the worker's
// the encryption of bulk streams, which must not starve the programs that
// send them. Both wait in the kernel (package pinned).
func (d *Daemon) runTAPReader(tq *tap.Queue, q *fq.Queue, bell *pinned.Doorbell) {
	defer d.wg.Done()
	d.pin(dataPathPriority)
	budget := d.newBudget()
	vnet := d.dev.Offloads().VnetHdr
	w := d.newWorker(nil)
	dp := d.node.Dataplane()
	p := q.Get()
	var turn pinned.Yielder
	for {
		n, err := tq.TryRead(p.Buf)
		if err != nil {
			if !closedErr(err) {
				d.log.Error("TAP read failed", "err", err)
			}
			return
		}
		now := time.Now().UnixNano()
		if n == 0 {
			w.Tx.Flush()
			budget.Idle(now)
			turn.Idle(now)
			if stopped, err := d.stop.Wait(tq.Fd()); stopped || err != nil {
				return
			}
			continue
		}
		budget.Busy(now)
		turn.Busy(now)
		p.Frame, p.Hdr = p.Buf[:n], l2.VirtioNetHdr{}
		if vnet {
			if err := p.Hdr.Decode(p.Frame); err != nil {
				continue
			}
			p.Frame = p.Frame[l2.VirtioNetHdrLen:]
		}
		if q.Admit(p, time.Duration(now)) {
			bell.Ring()
			p = q.Get()
			continue
		}
		dp.FromTAP(w, p.Hdr, p.Frame, now)
	}
}

// runTAPWorker moves the frames of one TAP queue's fair queue into the
// tunnel, in the order the queue gives, until the data path stops. It
// sends after every few frames and whenever the queue runs dry.
func (d *Daemon) runTAPWorker(q *fq.Queue, bell *pinned.Doorbell) {
	defer d.wg.Done()
	d.pin(0)
	w := d.newWorker(nil)
	dp := d.node.Dataplane()
	unsent := 0
	var turn pinned.Yielder
	for {
		now := time.Now().UnixNano()
		p := q.Next(time.Duration(now))
		if p == nil {
			if unsent > 0 {
				w.Tx.Flush()
				unsent = 0
			}
			bell.Arm()
			// A frame queued before the Arm rang for nobody.
			if p = q.Next(time.Duration(now)); p == nil {
				turn.Idle(now)
				if stopped, err := bell.Wait(d.stop); stopped || err != nil {
					return
				}
				continue
			}
		}
		turn.Busy(now)
		dp.FromTAP(w, p.Hdr, p.Frame, now)
		q.Release(p)
		if unsent++; unsent == tapFlushEvery {
			w.Tx.Flush()
			unsent = 0
		}
	}
}

// tapFlushEvery is how many TAP frames the worker sends at once at most
// while more wait: one segmented frame already fills a send, and a ping
// behind it waits for no more than a few.
const tapFlushEvery = 4

// TAP fair queue sizes: buffers for a burst of small frames while the
// worker is held up (the kernel's ring held a thousand), bytes for some
// 7 ms of a bulk stream at the rates one core encrypts, and flows enough
// that a bulk stream rarely shares a queue with anything else. The bytes
// are more than CoDel lets a stream keep (1 ms for 10 ms): with 1 MiB a
// stream reached the limit first, and each frame read while full dropped
// a 64 KiB frame, 46 segments, until its sender slowed down: 265,000–
// 301,000 segments retransmitted in a 10 s stream, against 7,000–8,000
// with 4 MiB and 7–10 % more throughput, for 3–5 MiB more resident memory
// (docs/benchmarks.md). Other flows have queues of their own and do not
// wait behind it. The buffers take memory only once used, most recently
// freed first.
const (
	tapQueueBuffers = 512
	tapQueueBytes   = 4 << 20
	tapQueueFlows   = 64
)

// tapWriter coalesces frames bound for the TAP and writes them in as few
// system calls as the kernel allows.
type tapWriter struct {
	d   *Daemon
	w   *tap.Writer   // nil without a TAP: a beacon
	gro *l2.Coalescer // nil when the TAP has no virtio header
	buf []byte
	// aqm keeps the socket's receive queue short (nil without one): the
	// socket reader sets now and the current datagram's time in the queue
	// before handing it to the core.
	aqm          *codel.CoDel
	now, sojourn time.Duration
}

// bulkFrameLen is the size from which a frame may be dropped to shorten a
// standing queue: such frames carry bulk transfers, whose TCP senders slow
// down when one is lost, while pings, DNS, keystrokes, acknowledgements
// and voice are smaller and never dropped.
const bulkFrameLen = 1000

func (t *tapWriter) Frame(frame []byte, off l2.Offload) {
	if t.w == nil {
		return
	}
	if t.aqm != nil && len(frame) >= bulkFrameLen && t.aqm.Drop(t.now, t.sojourn) {
		return
	}
	if t.gro == nil {
		t.d.writeTAP(t.w, t.buf, frame, off)
		return
	}
	if !t.gro.Add(frame, off) {
		t.flush()
		if !t.gro.Add(frame, off) {
			t.d.writeTAP(t.w, t.buf, frame, off)
		}
	}
}

// newTAPWriter makes a writer to the TAP's first queue (a no-op without a
// TAP); coalesce is for the socket reader, which gets batches to merge.
func (d *Daemon) newTAPWriter(coalesce bool) *tapWriter {
	tw := &tapWriter{d: d, buf: make([]byte, l2.VirtioNetHdrLen+65536)}
	if d.dev != nil {
		tw.w = d.dev.Queue(0).NewWriter()
		if coalesce && d.dev.Offloads().VnetHdr {
			tw.gro = l2.NewCoalescer(256, 512<<10)
		}
	}
	return tw
}

func (t *tapWriter) flush() {
	if t.gro != nil {
		t.gro.Flush(t.write)
	}
}

func (t *tapWriter) write(pkt []byte) error {
	_, err := t.w.Write(pkt)
	return err
}

// runSocketReader moves datagrams from the socket to the TAP (or onwards).
// It drains the socket into its buffers before each message it handles,
// and handles small datagrams first: a ping or a keystroke that arrives
// behind a backlog of bulk data waits for one bulk message's decryption,
// not for the backlog's, and the backlog waits here, where its time is
// known to CoDel, rather than in the kernel's queue. The replay window
// takes the reordering. It runs pinned at real-time priority within its
// budget, so that what arrives for it waits for no busy program's turn.
func (d *Daemon) runSocketReader() {
	defer d.wg.Done()
	d.pin(dataPathPriority)
	budget := d.newBudget()
	tw := d.newTAPWriter(true)
	tw.aqm = d.receiveAQM
	w := d.newWorker(tw)
	msgs := make([]udpio.Message, rxBatch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, rxBufLen)
	}
	waiting := 0 // msgs[:waiting] are read and not yet handled
	sinceFlush := 0
	var turn pinned.Yielder
	for {
		var n int
		var err error
		if waiting == 0 || len(msgs)-waiting >= rxRefill {
			n, err = d.conn.TryReadBatch(msgs[waiting:])
		}
		if err != nil {
			if !closedErr(err) {
				d.log.Error("socket read failed", "err", err)
			}
			return
		}
		now := time.Now().UnixNano()
		if waiting += n; waiting == 0 {
			budget.Idle(now)
			turn.Idle(now)
			if stopped, err := d.stop.Wait(d.conn.Fd()); stopped || err != nil {
				return
			}
			continue
		}
		budget.Busy(now)
		turn.Busy(now)
		small := false
		for i := range msgs[:waiting] {
			if m := &msgs[i]; m.N <= smallDatagram {
				d.fromSocket(w, tw, m, link.Endpoint{}, now)
				m.N, small = -1, true
			}
		}
		if !small {
			d.fromSocket(w, tw, &msgs[0], link.Endpoint{}, now)
			msgs[0].N = -1
			sinceFlush++
		}
		waiting = compactHandled(msgs[:waiting])
		if waiting == 0 || small || sinceFlush >= rxFlushEvery {
			tw.flush()
			w.Tx.Flush()
			sinceFlush = 0
		}
	}
}

// rxBatch is how many messages the socket reader holds. rxFlushEvery is
// how many bulk messages it merges for the TAP at most before it writes
// them; a small datagram is written at once. rxRefill is how many of its
// buffers must be free before it looks for more datagrams while some
// wait: a few bulk messages' decryption is the longest a small datagram
// waits in the kernel, and the looking costs a system call per few
// messages, not one per message.
const (
	rxBatch      = 8
	rxFlushEvery = 16
	rxRefill     = 4
)

// compactHandled moves the messages marked handled (N < 0) behind the
// others, keeping the others' order, and returns how many are left; the
// buffers move with them.
func compactHandled(msgs []udpio.Message) int {
	left := 0
	for i := range msgs {
		if msgs[i].N >= 0 {
			msgs[left], msgs[i] = msgs[i], msgs[left]
			left++
		}
	}
	return left
}

// smallDatagram is the size up to which a datagram carries no bulk data:
// pings, acknowledgements, keystrokes, DNS, the overlay's control.
const smallDatagram = 512

// fromSocket hands one received message, several coalesced datagrams
// perhaps, to the core; via is the socket's endpoint (zero for the main
// socket), the sender's address to be filled in.
func (d *Daemon) fromSocket(w *node.Worker, tw *tapWriter, m *udpio.Message, via link.Endpoint, now int64) {
	dp := d.node.Dataplane()
	data := m.Buf[:m.N]
	seg := m.SegmentSize
	if seg <= 0 {
		seg = len(data)
	}
	// The time the datagram waited in the socket's queue; none known
	// without the kernel's timestamp.
	tw.now, tw.sojourn = time.Duration(now), 0
	if m.Received != 0 {
		tw.sojourn = time.Duration(now - m.Received)
	}
	from := via
	from.Addr = m.Addr
	if len(data) == 0 {
		dp.FromNetwork(w, from, data, now) // counted, like any garbage
	}
	for len(data) > 0 {
		one := data[:min(seg, len(data))]
		data = data[len(one):]
		if d.tr.turn != nil && via.Via == link.UDP && m.Addr == d.tr.turn.Server() {
			switch kind, peer, payload := d.tr.turn.HandleFromServer(one); kind {
			case turnc.PeerData:
				dp.FromNetwork(w, link.Endpoint{Via: link.TURN, Addr: peer}, payload, now)
				continue
			case turnc.Control:
				continue
			}
		}
		dp.FromNetwork(w, from, one, now)
	}
}

func closedErr(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed)
}

// dataPathPriority is the real-time priority of the data path's readers:
// the lowest, above every normal thread and below the kernel's own
// real-time threads.
const dataPathPriority = 1

// pin puts the calling data-path loop on a thread of its own, at the
// real-time priority given (0 for normal; package pinned says why);
// without the privilege it runs at normal priority, and the first loop
// that finds so says it.
func (d *Daemon) pin(priority int) {
	if err := pinned.Pin(priority); err != nil {
		d.pinWarning.Do(func() {
			d.log.Warn("data path at normal priority: latency under load will suffer (needs CAP_SYS_NICE or an RLIMIT_RTPRIO of 1)", "err", err)
		})
	}
}

// pinnedLoops is how many threads the data path pins: the socket's reader,
// and each TAP queue's reader and worker.
func pinnedLoops(tapQueues int) int { return 1 + 2*tapQueues }

// A reader's budget: real-time priority for at most 80 ms of every 100,
// so that a flood it cannot keep up with leaves the CPU a fifth of the
// time to everything else at least.
const (
	budgetShare  = 80 * time.Millisecond
	budgetWindow = 100 * time.Millisecond
)

// newBudget makes the budget of a reader pinned at dataPathPriority.
func (d *Daemon) newBudget() *pinned.Budget {
	return pinned.NewBudget(dataPathPriority, budgetShare, budgetWindow)
}

// reserveProcessors lets Go run as many goroutines at once as the
// machine has CPUs besides the pinned loops, unless GOMAXPROCS says
// otherwise: a pinned loop keeps its processor while it waits in the
// kernel, and with Go's default, one per CPU, the rest of the daemon and
// the other loops would queue for the processors the waiting ones hold.
func reserveProcessors(pinned int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	goruntime.GOMAXPROCS(goruntime.NumCPU() + pinned)
}
