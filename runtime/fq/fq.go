// Package fq is the fair queue between a TAP queue's reader and the worker
// that encrypts and sends what it reads: fq_codel (RFC 8290) in user space.
//
// The kernel's TAP ring is one FIFO of up to a thousand frames, each up to
// 64 KiB with the TAP's segmentation offloads, and TCP's small-queue limit
// does not reach into it (the TAP takes each frame off the socket's
// account as it queues it): a bulk stream keeps milliseconds of data in
// it, in front of every ping and keystroke. So the reader drains the ring
// as fast as the kernel fills it, into a queue per flow here; the worker
// takes from the flows in turn (deficit round robin, a flow that was idle
// served first), and CoDel on each flow drops from the head of a flow that
// keeps a standing queue, so that its TCP sender slows down.
//
// A Queue holds a fixed number of buffers, allocated once, and a limit on
// the bytes queued: many buffers, for the small frames of a burst while
// the worker is held up, but few bytes, for the 64 KiB frames of a bulk
// stream. When either runs out, the reader's next frame takes the head of
// the longest flow. One reader and one worker may use a Queue at the same
// time; the worker holds one packet at a time, so two buffers are the
// least that work.
package fq

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"burrow/l2"
	"burrow/runtime/codel"
)

// Packet is one frame read from the TAP, in a buffer the Queue owns.
type Packet struct {
	// Buf is the whole buffer; the reader reads into it and sets Frame
	// and Hdr.
	Buf   []byte
	Frame []byte
	Hdr   l2.VirtioNetHdr

	enqueued time.Duration
	next     *Packet
}

// flow is one flow's queue.
type flow struct {
	head, tail *Packet
	bytes      int
	deficit    int
	codel      *codel.CoDel
	// last is when the flow's latest frame arrived.
	last time.Duration
	// listed says the flow is on the new or the old list.
	listed bool
}

// Queue is the fair queue of one TAP queue.
type Queue struct {
	mu       sync.Mutex
	free     []*Packet
	flows    []flow
	newFlows ring
	oldFlows ring
	queued   int
	// bytes is what the flows hold; limit what they may.
	bytes, limit int
	// Drops counts the frames dropped: by CoDel, or to make room.
	Drops atomic.Uint64
	// mapped is the buffers' mapping, unmapped by Close; nil when they
	// are on the heap.
	mapped []byte
}

// quantum is a flow's share per turn: one full-sized frame.
const quantum = 1514

// New makes a Queue of buffers of bufLen bytes holding at most limit
// bytes of frames, spreading frames over flows queues. The buffers are mapped apart from Go's heap, so that they
// neither raise the garbage collector's goal nor take memory before a
// frame is read into them: an idle daemon's queues cost nothing, and a
// lightly loaded one's only the few buffers at the top of the free list,
// which is used last in, first out.
func New(buffers, bufLen, limit, flows int) *Queue {
	q := &Queue{
		limit:    limit,
		free:     make([]*Packet, 0, buffers),
		flows:    make([]flow, flows),
		newFlows: newRing(flows),
		oldFlows: newRing(flows),
	}
	slab, err := unix.Mmap(-1, 0, buffers*bufLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err == nil {
		q.mapped = slab
	} else {
		slab = make([]byte, buffers*bufLen)
	}
	for i := range buffers {
		q.free = append(q.free, &Packet{Buf: slab[i*bufLen : (i+1)*bufLen : (i+1)*bufLen]})
	}
	for i := range q.flows {
		q.flows[i].codel = codel.New(codel.Target, codel.Interval)
	}
	return q
}

// Get returns a free buffer for the reader. When every buffer is queued,
// or the flows hold their limit of bytes, it drops the head of the longest
// flow and returns that.
func (q *Queue) Get() *Packet {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.free); n > 0 && (q.bytes < q.limit || q.queued == 0) {
		p := q.free[n-1]
		q.free = q.free[:n-1]
		return p
	}
	longest := 0
	for i := range q.flows {
		if q.flows[i].bytes > q.flows[longest].bytes {
			longest = i
		}
	}
	q.Drops.Add(1)
	return q.pop(&q.flows[longest])
}

// SparseFrameLen is the largest frame Admit leaves to the reader: pings,
// DNS, keystrokes, acknowledgements, voice.
const SparseFrameLen = 512

// SparseGap is how long a flow must have been silent for its next small
// frame to skip the queue: longer than the gaps within a burst, so that a
// stream of acknowledgements is queued and sent in batches.
const SparseGap = time.Millisecond

// Admit queues the frame the reader read into p, at now, and reports
// true; except a small frame of a flow that has nothing queued, nothing
// with the worker and was silent for SparseGap, which it leaves to the
// reader to send itself, at once, reporting false: such a frame overtakes
// nothing of its own flow and need wait neither for the worker nor for a
// bulk flow's turn.
func (q *Queue) Admit(p *Packet, now time.Duration) bool {
	i := q.flowOf(p)
	f := &q.flows[i]
	q.mu.Lock()
	if len(p.Frame) <= SparseFrameLen && !f.listed && now-f.last >= SparseGap {
		f.last = now
		q.mu.Unlock()
		return false
	}
	q.put(i, p, now)
	q.mu.Unlock()
	return true
}

func (q *Queue) flowOf(p *Packet) int { return int(l2.FlowHash(p.Frame) % uint32(len(q.flows))) }

// put appends p to flow i's queue; q.mu is held.
func (q *Queue) put(i int, p *Packet, now time.Duration) {
	f := &q.flows[i]
	p.enqueued = now
	p.next = nil
	f.last = now
	if f.tail == nil {
		f.head = p
	} else {
		f.tail.next = p
	}
	f.tail = p
	f.bytes += len(p.Frame)
	q.bytes += len(p.Frame)
	q.queued++
	if !f.listed {
		f.listed = true
		f.deficit = quantum
		q.newFlows.push(i)
	}
}

// Next returns the frame to send next at now, or nil when nothing is
// queued. Frames CoDel drops on the way go back to the free buffers.
func (q *Queue) Next(now time.Duration) *Packet {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		list := &q.newFlows
		if list.empty() {
			list = &q.oldFlows
		}
		if list.empty() {
			return nil
		}
		f := &q.flows[list.peek()]
		if f.deficit <= 0 {
			f.deficit += quantum
			q.oldFlows.push(list.pop())
			continue
		}
		p := q.dequeue(f, now)
		if p == nil {
			// An emptied new flow goes to the old list, so that a flow
			// cannot stay new by emptying its queue every turn.
			i := list.pop()
			if list == &q.newFlows && !q.oldFlows.empty() {
				q.oldFlows.push(i)
			} else {
				f.listed = false
			}
			continue
		}
		f.deficit -= len(p.Frame)
		return p
	}
}

// Close gives the buffers' memory back; the reader and the worker must
// have stopped.
func (q *Queue) Close() {
	if q.mapped != nil {
		_ = unix.Munmap(q.mapped)
		q.mapped = nil
	}
}

// Release gives the worker's packet back once it is sent.
func (q *Queue) Release(p *Packet) {
	q.mu.Lock()
	q.free = append(q.free, p)
	q.mu.Unlock()
}

// dequeue takes f's head, dropping while CoDel says so.
func (q *Queue) dequeue(f *flow, now time.Duration) *Packet {
	for {
		p := q.pop(f)
		if p == nil {
			return nil
		}
		if !f.codel.Drop(now, now-p.enqueued) {
			return p
		}
		q.Drops.Add(1)
		q.free = append(q.free, p)
	}
}

func (q *Queue) pop(f *flow) *Packet {
	p := f.head
	if p == nil {
		return nil
	}
	f.head = p.next
	if f.head == nil {
		f.tail = nil
	}
	f.bytes -= len(p.Frame)
	q.bytes -= len(p.Frame)
	q.queued--
	return p
}

// ring is a FIFO of flow indices; a flow is on at most one list at a
// time, so the number of flows bounds it.
type ring struct {
	items      []int
	head, size int
}

func newRing(capacity int) ring { return ring{items: make([]int, capacity)} }

func (r *ring) empty() bool { return r.size == 0 }
func (r *ring) peek() int   { return r.items[r.head] }

func (r *ring) push(i int) {
	r.items[(r.head+r.size)%len(r.items)] = i
	r.size++
}

func (r *ring) pop() int {
	i := r.items[r.head]
	r.head = (r.head + 1) % len(r.items)
	r.size--
	return i
}
