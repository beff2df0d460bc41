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
	flush func([]TxMsg)
}

// minTxBatch is the fewest datagrams a batch holds: the 46 segments of a
// bulk TCP stream's super-frame, twice over, go out in one system call.
const minTxBatch = 128

// NewTxBatch makes a batch of n buffers of bufLen bytes. flush sends the
// collected datagrams; it is called when the batch runs out of buffers and
// by the owner via Flush.
func NewTxBatch(n, bufLen int, flush func([]TxMsg)) *TxBatch {
	n = max(n, minTxBatch)
	b := &TxBatch{Msgs: make([]TxMsg, 0, n), bufs: make([][]byte, n), flush: flush}
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
