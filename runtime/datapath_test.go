package runtime

import (
	"testing"

	"burrow/runtime/udpio"
)

// TestCompactHandledKeepsTheWaitingInOrderAndEveryBuffer: the messages
// still waiting stay in the order they arrived, and the handled ones'
// buffers are kept behind them for the next read.
func TestCompactHandledKeepsTheWaitingInOrderAndEveryBuffer(t *testing.T) {
	msgs := make([]udpio.Message, 6)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 1)
		msgs[i].Buf[0] = byte(i)
		msgs[i].N = i
	}
	for _, handled := range []int{0, 2, 3} {
		msgs[handled].N = -1
	}
	left := compactHandled(msgs)
	if left != 3 {
		t.Fatalf("%d left, want 3", left)
	}
	seen := map[byte]bool{}
	for i, m := range msgs {
		seen[m.Buf[0]] = true
		if i < left && m.N != []int{1, 4, 5}[i] {
			t.Errorf("message %d is the one that arrived %d-th; want the waiting ones in their order 1, 4, 5", i, m.N)
		}
	}
	if len(seen) != len(msgs) {
		t.Errorf("%d distinct buffers after compacting, want all %d", len(seen), len(msgs))
	}
}
