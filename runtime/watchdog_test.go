package runtime

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// A core that stops turning is reported once, with the stacks of every
// goroutine, the one that blocks included; once it turns again, a new
// stall is reported again.
func TestAStuckCoreIsReportedWithEveryStack(t *testing.T) {
	w := &coreWatch{stallAfter: 60 * time.Millisecond}
	var mu sync.Mutex
	var reports []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.turned(time.Now())
	go w.watch(ctx, func(stalled time.Duration, stacks string) {
		mu.Lock()
		defer mu.Unlock()
		if stalled < w.stallAfter {
			t.Errorf("reported after %v, before %v", stalled, w.stallAfter)
		}
		reports = append(reports, stacks)
	})
	stuck := make(chan struct{})
	go blockedCore(stuck)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(reports)
	}
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		w.turned(time.Now())
	}
	if n := count(); n != 0 {
		t.Fatalf("a core that turns every 20 ms was reported stuck %d times", n)
	}
	time.Sleep(300 * time.Millisecond)
	if n := count(); n != 1 {
		t.Fatalf("a core stuck for 300 ms was reported %d times, want once", n)
	}
	if !strings.Contains(reports[0], "blockedCore") {
		t.Errorf("the report lacks the blocked goroutine's stack:\n%s", reports[0])
	}
	w.turned(time.Now())
	time.Sleep(300 * time.Millisecond)
	if n := count(); n != 2 {
		t.Fatalf("after turning once and sticking again: %d reports, want 2", n)
	}
	close(stuck)
}

func blockedCore(stuck chan struct{}) { <-stuck }
