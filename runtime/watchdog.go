package runtime

import (
	"context"
	goruntime "runtime"
	"sync/atomic"
	"time"
)

// coreStallAfter is how long the core's goroutine may go without running
// its loop before the watchdog reports it stuck: the loop runs at least
// every housekeepingEvery, so this is only reached when something it
// called blocks, or never returns.
const coreStallAfter = 15 * time.Second

// coreWatch notes each turn of the core's loop, for the watchdog.
type coreWatch struct {
	stallAfter time.Duration // coreStallAfter in the daemon
	lastTurn   atomic.Int64
}

func (w *coreWatch) turned(now time.Time) { w.lastTurn.Store(now.UnixNano()) }

// watch logs, once per stall, every goroutine's stack when the core's
// loop has not turned for stallAfter: a daemon whose core is stuck
// stops answering its peers and its control socket, and without the
// stacks there is nothing left to tell why.
func (w *coreWatch) watch(ctx context.Context, report func(stalled time.Duration, stacks string)) {
	tick := time.NewTicker(w.stallAfter / 3)
	defer tick.Stop()
	reported := false
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			stalled := now.Sub(time.Unix(0, w.lastTurn.Load()))
			switch {
			case stalled < w.stallAfter:
				reported = false
			case !reported:
				reported = true
				buf := make([]byte, 4<<20)
				report(stalled, string(buf[:goruntime.Stack(buf, true)]))
			}
		}
	}
}
