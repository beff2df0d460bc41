package fq

import (
	"net/netip"
	"testing"
	"time"

	"burrow/l2"
)

// udpFrame is an IPv4 UDP frame of size bytes from the given source port,
// so that frames of different ports belong to different flows.
func udpFrame(port uint16, size int) []byte {
	b := make([]byte, max(size, 42))
	copy(b[12:], []byte{0x08, 0x00})
	ip := b[l2.EthernetHeaderLen:]
	ip[0] = 0x45
	total := len(ip)
	ip[2], ip[3] = byte(total>>8), byte(total)
	ip[8], ip[9] = 64, 17
	src, dst := netip.MustParseAddr("10.0.0.1").As4(), netip.MustParseAddr("10.0.0.2").As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	ip[20], ip[21] = byte(port>>8), byte(port)
	ip[22], ip[23] = 0, 53
	return b
}

// put queues frame at now, even a small frame that Admit would leave to
// the reader.
func put(q *Queue, frame []byte, now time.Duration) {
	p := q.Get()
	p.Frame = append(p.Buf[:0], frame...)
	q.mu.Lock()
	q.put(q.flowOf(p), p, now)
	q.mu.Unlock()
}

// TestASparseFlowOvertakesABulkQueue: a ping behind a queue of bulk
// frames waits for no more than the bulk flow's turn, a quantum.
func TestASparseFlowOvertakesABulkQueue(t *testing.T) {
	q := New(64, 2048, 1<<20, 16)
	now := time.Second
	for range 20 {
		put(q, udpFrame(1000, 1500), now)
	}
	q.Release(q.Next(now))
	put(q, udpFrame(2000, 100), now)
	ahead := 0
	for {
		p := q.Next(now)
		if len(p.Frame) == 100 {
			break
		}
		ahead += len(p.Frame)
		q.Release(p)
	}
	if ahead > quantum {
		t.Fatalf("%d bytes of the bulk flow went out before the ping; want at most a quantum, %d", ahead, quantum)
	}
}

// TestFlowsShareByBytes: two backlogged flows, one of big frames and one
// of small ones, get about the same bytes through.
func TestFlowsShareByBytes(t *testing.T) {
	q := New(256, 2048, 1<<20, 16)
	now := time.Second
	for range 40 {
		put(q, udpFrame(1000, 1500), now)
	}
	for range 120 {
		put(q, udpFrame(2000, 500), now)
	}
	sent := map[int]int{}
	for range 40 {
		p := q.Next(now)
		sent[len(p.Frame)] += len(p.Frame)
		q.Release(p)
	}
	big, small := sent[1500], sent[500]
	if big == 0 || small == 0 || float64(big)/float64(small) > 1.5 || float64(small)/float64(big) > 1.5 {
		t.Errorf("bytes sent: %d of 1500-byte frames, %d of 500-byte ones; want about equal", big, small)
	}
}

// TestAStandingQueueIsDropped: a flow whose frames wait longer than the
// target for an interval loses some, and the buffers come back.
func TestAStandingQueueIsDropped(t *testing.T) {
	q := New(64, 2048, 1<<20, 16)
	now := time.Second
	sent := 0
	for range 2000 {
		put(q, udpFrame(1000, 1500), now)
		now += 100 * time.Microsecond
		// Sent 5 ms after it was queued: a standing queue.
		if p := q.Next(now + 5*time.Millisecond); p != nil {
			sent++
			q.Release(p)
		}
	}
	if q.Drops.Load() == 0 {
		t.Fatalf("no drop from a 5 ms standing queue over %d frames", sent)
	}
	for p := q.Next(now); p != nil; p = q.Next(now) {
		q.Release(p)
	}
	if len(q.free) != 64 {
		t.Errorf("%d buffers free of 64 once the queue is empty", len(q.free))
	}
}

// TestAFullQueueDropsFromTheLongestFlow: with every buffer queued, the
// reader's next buffer comes from the longest flow, never from the ping.
func TestAFullQueueDropsFromTheLongestFlow(t *testing.T) {
	q := New(8, 2048, 1<<20, 16)
	now := time.Second
	put(q, udpFrame(2000, 100), now)
	for range 7 {
		put(q, udpFrame(1000, 1500), now)
	}
	p := q.Get()
	if p == nil || q.Drops.Load() != 1 {
		t.Fatalf("full queue: got %v, %d drops", p, q.Drops.Load())
	}
	q.Release(p)
	if first := q.Next(now); len(first.Frame) != 100 {
		t.Errorf("the ping was dropped to make room: first out is %d bytes", len(first.Frame))
	}
}

func TestGetAdmitNextAllocateNothing(t *testing.T) {
	q := New(8, 2048, 1<<20, 16)
	frame := udpFrame(1000, 1500)
	now := time.Second
	allocs := testing.AllocsPerRun(1000, func() {
		p := q.Get()
		p.Frame = append(p.Buf[:0], frame...)
		if !q.Admit(p, now) {
			t.Fatal("a bulk frame was left to the reader")
		}
		q.Release(q.Next(now))
	})
	if allocs != 0 {
		t.Errorf("%v allocations per frame", allocs)
	}
}

// TestABulkFlowIsHeldToTheByteLimit: with buffers to spare, a flow of big
// frames still may not queue more than the limit; small frames of another
// flow arriving then are all queued, the big flow giving way.
func TestABulkFlowIsHeldToTheByteLimit(t *testing.T) {
	const limit = 10 * 1500
	q := New(64, 2048, limit, 16)
	now := time.Second
	for range 20 {
		put(q, udpFrame(1000, 1500), now)
	}
	if q.bytes > limit || q.Drops.Load() != 10 {
		t.Fatalf("20 frames of 1500 bytes under a %d-byte limit: %d bytes queued, %d dropped", limit, q.bytes, q.Drops.Load())
	}
	for range 40 {
		put(q, udpFrame(2000, 100), now)
	}
	if q.bytes > limit {
		t.Errorf("%d bytes queued over the %d-byte limit", q.bytes, limit)
	}
	small := 0
	for p := q.Next(now); p != nil; p = q.Next(now) {
		if len(p.Frame) == 100 {
			small++
		}
		q.Release(p)
	}
	if small != 40 {
		t.Errorf("%d of the 40 small frames were queued", small)
	}
}

// TestOnlyASilentFlowsSmallFrameSkipsTheQueue: the first small frame of a
// flow silent for SparseGap may be sent at once; not a second one right
// behind it, nor a bulk frame, nor a frame of a flow with frames queued.
func TestOnlyASilentFlowsSmallFrameSkipsTheQueue(t *testing.T) {
	q := New(64, 2048, 1<<20, 16)
	now := time.Second
	skips := func(frame []byte, at time.Duration) bool {
		p := q.Get()
		p.Frame = append(p.Buf[:0], frame...)
		if q.Admit(p, at) {
			return false
		}
		q.Release(p)
		return true
	}
	drain := func(at time.Duration) {
		for p := q.Next(at); p != nil; p = q.Next(at) {
			q.Release(p)
		}
	}
	if !skips(udpFrame(2000, 100), now) {
		t.Fatal("a silent flow's small frame must skip the queue")
	}
	if skips(udpFrame(2000, 100), now+SparseGap/2) {
		t.Fatal("a small frame right behind one that skipped must be queued: its flow is not silent")
	}
	drain(now + SparseGap/2)
	if !skips(udpFrame(2000, 100), now+3*SparseGap) {
		t.Fatal("the flow was silent for SparseGap again: its small frame must skip the queue")
	}
	if skips(udpFrame(3000, SparseFrameLen+1), now) {
		t.Fatal("a frame larger than SparseFrameLen must be queued")
	}
	put(q, udpFrame(4000, 1500), now)
	if skips(udpFrame(4000, 100), now+2*SparseGap) {
		t.Fatal("a small frame of a flow with frames queued must be queued behind them")
	}
}
