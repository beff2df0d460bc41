package runtime

import (
	"errors"
	"net"
	"os"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/node"
	"burrow/runtime/codel"
	"burrow/runtime/fq"
	"burrow/runtime/tap"
	"burrow/runtime/turnc"
	"burrow/runtime/udpio"
)

// runTAPReader drains one TAP queue into its fair queue as fast as the
// kernel fills it, so that no frame waits in the kernel's ring behind a
// bulk stream; runTAPWorker sends what it queues. A sparse flow's frame
// it sends itself, so that a ping or a keystroke waits for no other
// goroutine.
func (d *Daemon) runTAPReader(tq *tap.Queue, q *fq.Queue) {
	defer d.wg.Done()
	vnet := d.dev.Offloads().VnetHdr
	w := d.newWorker(nil)
	dp := d.node.Dataplane()
	p := q.Get()
	for {
		n, err := tq.Read(p.Buf)
		if err != nil {
			if !closedErr(err) {
				d.log.Error("TAP read failed", "err", err)
			}
			return
		}
		p.Frame, p.Hdr = p.Buf[:n], l2.VirtioNetHdr{}
		if vnet {
			if err := p.Hdr.Decode(p.Frame); err != nil {
				continue
			}
			p.Frame = p.Frame[l2.VirtioNetHdrLen:]
		}
		now := time.Now().UnixNano()
		if q.Admit(p, time.Duration(now)) {
			p = q.Get()
			continue
		}
		dp.FromTAP(w, p.Hdr, p.Frame, now)
		w.Tx.Flush()
	}
}

// runTAPWorker moves the frames of one TAP queue's fair queue into the
// tunnel, in the order the queue gives, until done is closed. It sends
// after every few frames and whenever the queue runs dry.
func (d *Daemon) runTAPWorker(q *fq.Queue, done <-chan struct{}) {
	defer d.wg.Done()
	w := d.newWorker(nil)
	dp := d.node.Dataplane()
	unsent := 0
	for {
		now := time.Now().UnixNano()
		p := q.Next(time.Duration(now))
		if p == nil {
			if unsent > 0 {
				w.Tx.Flush()
				unsent = 0
			}
			select {
			case <-q.Ready():
				continue
			case <-done:
				return
			}
		}
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
// worker is held up (the kernel's ring held a thousand), bytes for a few
// milliseconds of a bulk stream at the rates one core encrypts, and flows
// enough that a bulk stream rarely shares a queue with anything else. The
// buffers take memory only once used, most recently freed first.
const (
	tapQueueBuffers = 512
	tapQueueBytes   = 1 << 20
	tapQueueFlows   = 64
)

// tapWriter coalesces frames bound for the TAP and writes them in as few
// system calls as the kernel allows.
type tapWriter struct {
	d    *Daemon
	q    *tap.Queue
	gro  *l2.Coalescer // nil when the TAP has no virtio header
	buf  []byte
	fail error
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
	if t.q == nil {
		return // no TAP device: a beacon
	}
	if t.aqm != nil && len(frame) >= bulkFrameLen && t.aqm.Drop(t.now, t.sojourn) {
		return
	}
	if t.gro == nil {
		t.d.writeTAP(t.q, t.buf, frame, off)
		return
	}
	if !t.gro.Add(frame, off) {
		t.flush()
		if !t.gro.Add(frame, off) {
			t.d.writeTAP(t.q, t.buf, frame, off)
		}
	}
}

// newTAPWriter makes a writer to the TAP's first queue (a no-op without a
// TAP); coalesce is for the socket reader, which gets batches to merge.
func (d *Daemon) newTAPWriter(coalesce bool) *tapWriter {
	tw := &tapWriter{d: d, buf: make([]byte, l2.VirtioNetHdrLen+65536)}
	if d.dev != nil {
		tw.q = d.dev.Queue(0)
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
	_, err := t.q.Write(pkt)
	return err
}

// runSocketReader moves datagrams from the socket to the TAP (or onwards).
// It drains the socket into its buffers before each message it handles,
// and handles small datagrams first: a ping or a keystroke that arrives
// behind a backlog of bulk data waits for one bulk message's decryption,
// not for the backlog's, and the backlog waits here, where its time is
// known to CoDel, rather than in the kernel's queue. The replay window
// takes the reordering.
func (d *Daemon) runSocketReader() {
	defer d.wg.Done()
	tw := d.newTAPWriter(true)
	tw.aqm = d.receiveAQM
	w := d.newWorker(tw)
	msgs := make([]udpio.Message, rxBatch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, rxBufLen)
	}
	waiting := 0 // msgs[:waiting] are read and not yet handled
	sinceFlush := 0
	for {
		var n int
		var err error
		switch {
		case waiting == 0:
			n, err = d.conn.ReadBatch(msgs)
		case len(msgs)-waiting >= rxRefill:
			n, err = d.conn.TryReadBatch(msgs[waiting:])
		}
		if err != nil {
			if !closedErr(err) {
				d.log.Error("socket read failed", "err", err)
			}
			return
		}
		waiting += n
		now := time.Now().UnixNano()
		small := false
		for i := range msgs[:waiting] {
			if m := &msgs[i]; m.N <= smallDatagram {
				d.fromSocket(w, tw, m, now)
				m.N, small = -1, true
			}
		}
		if !small {
			d.fromSocket(w, tw, &msgs[0], now)
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

// rxFlushEvery is how many bulk messages the socket reader merges for
// the TAP at most before it writes them; a small datagram is written at
// once. rxRefill is how many of its buffers must be free before it looks
// for more datagrams while some wait: a few bulk messages' decryption is
// the longest a small datagram waits in the kernel, and the looking costs
// a system call per few messages, not one per message.
const (
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
// perhaps, to the core.
func (d *Daemon) fromSocket(w *node.Worker, tw *tapWriter, m *udpio.Message, now int64) {
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
	from := link.UDPEndpoint(m.Addr)
	if len(data) == 0 {
		dp.FromNetwork(w, from, data, now) // counted, like any garbage
	}
	for len(data) > 0 {
		one := data[:min(seg, len(data))]
		data = data[len(one):]
		if d.tr.turn != nil && m.Addr == d.tr.turn.Server() {
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
