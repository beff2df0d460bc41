package link

// replayWindow rejects duplicated and too-old counters with the bitmap
// scheme of RFC 6479: a ring of 64-bit blocks, cleared block by block as
// the highest counter advances, so every check is O(1).
//
// The ring grows, by doubling, to its full replayBlocks as the counters
// advance. It does not wrap before it is full, so until then it holds every
// counter seen and accepts exactly what the full ring would; a session
// that carries a few hundred messages, as links with only control traffic
// do, keeps a few blocks instead of 1 KB (the simulator holds 100,000 such
// sessions). Growing allocates at most seven times per session.
type replayWindow struct {
	highest uint64
	seen    bool
	blocks  []uint64
}

const (
	replayBlocks = 128
	replayBits   = replayBlocks * 64
	// ReplayWindowSize is how far behind the highest counter a message may
	// arrive and still be accepted: reordering tolerated by the data path.
	ReplayWindowSize = replayBits - 64
)

// accept reports whether counter is new and inside the window, and records it.
func (w *replayWindow) accept(counter uint64) bool {
	block := counter / 64
	if block >= uint64(len(w.blocks)) && len(w.blocks) < replayBlocks {
		w.grow(block)
	}
	size := uint64(len(w.blocks))
	if !w.seen || counter > w.highest {
		if w.seen {
			current := w.highest / 64
			steps := min(block-current, size)
			for i := uint64(1); i <= steps; i++ {
				w.blocks[(current+i)%size] = 0
			}
		}
		w.highest, w.seen = counter, true
	} else if w.highest-counter > ReplayWindowSize {
		return false
	}
	slot, bit := &w.blocks[block%size], uint64(1)<<(counter%64)
	if *slot&bit != 0 {
		return false
	}
	*slot |= bit
	return true
}

// grow makes the ring hold block, or gives it its full size. Blocks keep
// their places: the ring has not wrapped yet, so block i is at index i.
func (w *replayWindow) grow(block uint64) {
	size := max(2, 2*len(w.blocks))
	for uint64(size) <= block && size < replayBlocks {
		size *= 2
	}
	blocks := make([]uint64, min(size, replayBlocks))
	copy(blocks, w.blocks)
	w.blocks = blocks
}
