package link

// replayWindow rejects duplicated and too-old counters with the bitmap
// scheme of RFC 6479: a ring of 64-bit blocks, cleared block by block as
// the highest counter advances, so every check is O(1).
type replayWindow struct {
	highest uint64
	seen    bool
	blocks  [replayBlocks]uint64
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
	if !w.seen || counter > w.highest {
		current := w.highest / 64
		if !w.seen {
			w.blocks = [replayBlocks]uint64{}
		} else {
			steps := min(block-current, replayBlocks)
			for i := uint64(1); i <= steps; i++ {
				w.blocks[(current+i)%replayBlocks] = 0
			}
		}
		w.highest, w.seen = counter, true
	} else if w.highest-counter > ReplayWindowSize {
		return false
	}
	slot, bit := &w.blocks[block%replayBlocks], uint64(1)<<(counter%64)
	if *slot&bit != 0 {
		return false
	}
	*slot |= bit
	return true
}
