package runtime

import (
	"errors"
	"net"
	"os"
	"time"

	"burrow/l2"
	"burrow/link"
	"burrow/runtime/tap"
	"burrow/runtime/turnc"
	"burrow/runtime/udpio"
)

// runTAPReader moves frames from one TAP queue into the tunnel.
func (d *Daemon) runTAPReader(q *tap.Queue) {
	defer d.wg.Done()
	w := d.newWorker(nil)
	dp := d.node.Dataplane()
	buf := make([]byte, tapReadLen)
	vnet := d.dev.Offloads().VnetHdr
	for {
		n, err := q.Read(buf)
		if err != nil {
			if !closedErr(err) {
				d.log.Error("TAP read failed", "err", err)
			}
			return
		}
		var hdr l2.VirtioNetHdr
		frame := buf[:n]
		if vnet {
			if err := hdr.Decode(frame); err != nil {
				continue
			}
			frame = frame[l2.VirtioNetHdrLen:]
		}
		dp.FromTAP(w, hdr, frame, time.Now().UnixNano())
		w.Tx.Flush()
	}
}

// tapWriter coalesces frames bound for the TAP and writes them in as few
// system calls as the kernel allows.
type tapWriter struct {
	d    *Daemon
	q    *tap.Queue
	gro  *l2.Coalescer // nil when the TAP has no virtio header
	buf  []byte
	fail error
}

func (t *tapWriter) Frame(frame []byte, off l2.Offload) {
	if t.q == nil {
		return // no TAP device: a beacon
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
func (d *Daemon) runSocketReader() {
	defer d.wg.Done()
	tw := d.newTAPWriter(true)
	w := d.newWorker(tw)
	dp := d.node.Dataplane()
	msgs := make([]udpio.Message, rxBatch)
	for i := range msgs {
		msgs[i].Buf = make([]byte, rxBufLen)
	}
	for {
		n, err := d.conn.ReadBatch(msgs)
		if err != nil {
			if !closedErr(err) {
				d.log.Error("socket read failed", "err", err)
			}
			return
		}
		now := time.Now().UnixNano()
		for _, m := range msgs[:n] {
			data := m.Buf[:m.N]
			seg := m.SegmentSize
			if seg <= 0 {
				seg = len(data)
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
		tw.flush()
		w.Tx.Flush()
	}
}

func closedErr(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, net.ErrClosed)
}
