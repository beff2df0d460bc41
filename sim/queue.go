package sim

// eventKind says what an event does when its time comes.
type eventKind uint8

const (
	evDatagram eventKind = iota + 1 // a datagram arrives at node
	evTimer                         // node's Tick, if gen is still current
	evTAP                           // node's host writes data to its TAP
	evFlow                          // flow's generator sends its next frame
	evCall                          // a scheduled action: fn
)

// event is one entry of the queue. It is kept by value so that scheduling
// allocates nothing beyond the queue's own growth.
type event struct {
	at   int64  // virtual unix nanoseconds
	seq  uint64 // insertion order, to break ties deterministically
	data []byte // datagram or frame, from the buffer pool
	fn   func()
	node int32 // receiver, ticking node, or flow index for evFlow
	from int32 // sender of a datagram
	flow int32 // flow the datagram or frame belongs to, -1 for none
	gen  uint32
	kind eventKind
	hop  uint8 // links the frame crossed when this datagram arrives
}

func (e *event) before(o *event) bool {
	return e.at < o.at || e.at == o.at && e.seq < o.seq
}

// queue is a 4-ary min-heap of events ordered by time, then insertion.
// A 4-ary heap halves the depth of a binary one, and sifting moves whole
// events, so fewer levels means fewer copies.
type queue struct {
	items []event
}

func (q *queue) len() int { return len(q.items) }

func (q *queue) peek() *event { return &q.items[0] }

func (q *queue) push(e event) {
	q.items = append(q.items, e)
	i := len(q.items) - 1
	for i > 0 {
		parent := (i - 1) / 4
		if !q.items[i].before(&q.items[parent]) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

func (q *queue) pop() event {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = event{} // drop references for the collector
	q.items = q.items[:last]
	i := 0
	for {
		first := 4*i + 1
		if first >= last {
			break
		}
		best := first
		for c := first + 1; c < first+4 && c < last; c++ {
			if q.items[c].before(&q.items[best]) {
				best = c
			}
		}
		if !q.items[best].before(&q.items[i]) {
			break
		}
		q.items[i], q.items[best] = q.items[best], q.items[i]
		i = best
	}
	return top
}
