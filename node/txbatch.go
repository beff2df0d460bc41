package node

import "burrow/link"

// TxMsg is one datagram ready to send. To is never a relayed endpoint.
type TxMsg struct {
	Buf []byte
	To  link.Endpoint
}

// TxBatch collects a worker's outgoing datagrams in buffers allocated once,
// so the data path allocates nothing per packet and the runtime can send a
// whole batch with one system call.
type TxBatch struct {
	Msgs  []TxMsg
	bufs  [][]byte
	sizes []int
	flush func([]TxMsg)
}

// MaxSegments is the most frames one super-frame is split into.
const MaxSegments = 64

// NewTxBatch makes a batch of n buffers of bufLen bytes. flush sends the
// collected datagrams; it is called when the batch runs out of buffers and
// by the owner via Flush.
func NewTxBatch(n, bufLen int, flush func([]TxMsg)) *TxBatch {
	n = max(n, 2*MaxSegments)
	b := &TxBatch{Msgs: make([]TxMsg, 0, n), bufs: make([][]byte, n), sizes: make([]int, n), flush: flush}
	for i := range b.bufs {
		b.bufs[i] = make([]byte, bufLen)
	}
	return b
}

// Flush hands the collected datagrams to the flush function and empties
// the batch.
func (b *TxBatch) Flush() {
	if len(b.Msgs) > 0 {
		b.flush(b.Msgs)
	}
	b.Msgs = b.Msgs[:0]
}

// next returns the buffer the next committed datagram will use.
func (b *TxBatch) next() []byte {
	if len(b.Msgs) == len(b.bufs) {
		b.Flush()
	}
	return b.bufs[len(b.Msgs)]
}

// commit queues dgram, which must live in the buffer next returned.
func (b *TxBatch) commit(dgram []byte, to link.Endpoint) {
	b.Msgs = append(b.Msgs, TxMsg{Buf: dgram, To: to})
}

// free returns at least MaxSegments unused buffers, in the order next will
// hand them out, and a sizes slice of the same length.
func (b *TxBatch) free() ([][]byte, []int) {
	if len(b.bufs)-len(b.Msgs) < MaxSegments {
		b.Flush()
	}
	return b.bufs[len(b.Msgs):], b.sizes[len(b.Msgs):]
}
