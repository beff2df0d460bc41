//go:build linux

package pinned

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newStop(t *testing.T) *Stop {
	t.Helper()
	s, err := NewStop()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// waitResult runs s.Wait(fd) in a goroutine and returns its result.
func waitResult(s *Stop, fd int) <-chan error {
	done := make(chan error, 1)
	go func() {
		stopped, err := s.Wait(fd)
		if err == nil && stopped {
			err = errStopped
		}
		done <- err
	}()
	return done
}

var errStopped = errors.New("stopped")

func TestWaitReturnsOnceTheDescriptorIsReadable(t *testing.T) {
	s := newStop(t)
	r, w := pipe(t)
	done := waitResult(s, int(r.Fd()))
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) before anything was written", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.Write([]byte{1})
	if err := awaited(t, done, "Wait after the pipe became readable"); err != nil {
		t.Fatalf("Wait: %v, want readable and not stopped", err)
	}
}

func TestStopEndsEveryWaitForGood(t *testing.T) {
	s := newStop(t)
	r, _ := pipe(t)
	first, second := waitResult(s, int(r.Fd())), waitResult(s, int(r.Fd()))
	time.Sleep(20 * time.Millisecond)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, done := range []<-chan error{first, second, waitResult(s, int(r.Fd()))} {
		if err := awaited(t, done, "Wait after Stop"); err != errStopped {
			t.Fatalf("Wait after Stop: %v, want stopped", err)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}
}

// TestDoorbellWakesOnlyAnArmedSleeper: a Ring before Arm writes nothing
// (the sleeper looks for work once more after arming), a Ring after Arm
// wakes the Wait, and the Wait leaves the doorbell quiet again.
func TestDoorbellWakesOnlyAnArmedSleeper(t *testing.T) {
	s := newStop(t)
	b, err := NewDoorbell()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.Ring()
	if readable(t, b.efd) {
		t.Fatal("a Ring with nobody armed made the doorbell readable")
	}
	b.Arm()
	b.Ring()
	if stopped, err := b.Wait(s); stopped || err != nil {
		t.Fatalf("Wait after a Ring: stopped %v, %v", stopped, err)
	}
	if readable(t, b.efd) {
		t.Fatal("the doorbell is still readable after Wait")
	}
	b.Arm()
	done := make(chan struct{})
	go func() {
		b.Wait(s)
		close(done)
	}()
	time.Sleep(20 * time.Millisecond)
	b.Ring()
	awaited(t, done, "the armed sleeper after a Ring")
}

// awaited is what ch yields, or fails the test when it yields nothing
// within 5 s.
func awaited[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
	}
	t.Fatalf("%s: still blocked after 5 s", what)
	var none T
	return none
}

func readable(t *testing.T, fd int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestPinRaisesOnlyItsOwnThread: the pinned goroutine's thread runs
// round-robin at the priority asked for; a goroutine started afterwards
// does not.
func TestPinRaisesOnlyItsOwnThread(t *testing.T) {
	type policy struct {
		policy, priority uint32
		err              error
	}
	pinnedPolicy := make(chan policy, 1)
	go func() {
		err := Pin(1)
		attr, getErr := unix.SchedGetAttr(0, 0)
		if err == nil {
			err = getErr
		}
		pinnedPolicy <- policy{attr.Policy, attr.Priority, err}
	}()
	got := <-pinnedPolicy
	if errors.Is(got.err, unix.EPERM) {
		t.Skipf("skipping: no privilege for real-time priority here (%v)", got.err)
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.policy != unix.SCHED_RR || got.priority != 1 {
		t.Fatalf("pinned thread: policy %d priority %d, want SCHED_RR (%d) at 1", got.policy, got.priority, unix.SCHED_RR)
	}
	for range 20 {
		other := make(chan policy, 1)
		go func() {
			attr, err := unix.SchedGetAttr(0, 0)
			other <- policy{attr.Policy, attr.Priority, err}
		}()
		if o := <-other; o.err != nil || o.policy != unix.SCHED_NORMAL {
			t.Fatalf("another goroutine runs with policy %d priority %d (%v): the raised thread leaked", o.policy, o.priority, o.err)
		}
	}
}

// TestBudgetDemotesALoopBusyBeyondItsShare: the busy time of a window
// adds up across pauses; past the share the thread runs at normal
// priority, and the next window gives the real-time priority back.
func TestBudgetDemotesALoopBusyBeyondItsShare(t *testing.T) {
	type step struct {
		idle    bool
		at      time.Duration
		demoted bool
		policy  uint32
	}
	steps := []step{
		{at: 0},
		{idle: true, at: 3 * time.Millisecond},
		{at: 10 * time.Millisecond},
		{at: 12 * time.Millisecond}, // 5 ms busy: the share, not beyond
		{at: 13 * time.Millisecond, demoted: true, policy: unix.SCHED_NORMAL},
		{idle: true, at: 14 * time.Millisecond, demoted: true, policy: unix.SCHED_NORMAL},
		{at: 60 * time.Millisecond, policy: unix.SCHED_RR}, // the next window
	}
	type result struct {
		steps []step
		err   error
	}
	done := make(chan result, 1)
	go func() {
		if err := Pin(1); err != nil {
			done <- result{err: err}
			return
		}
		b := NewBudget(1, 5*time.Millisecond, 50*time.Millisecond)
		start := int64(time.Hour)
		var got []step
		for _, s := range steps {
			now := start + int64(s.at)
			if s.idle {
				b.Idle(now)
			} else {
				b.Busy(now)
			}
			attr, err := unix.SchedGetAttr(0, 0)
			if err != nil {
				done <- result{err: err}
				return
			}
			got = append(got, step{idle: s.idle, at: s.at, demoted: b.Demoted(), policy: attr.Policy})
		}
		done <- result{steps: got}
	}()
	r := <-done
	if errors.Is(r.err, unix.EPERM) {
		t.Skipf("skipping: no privilege for real-time priority here (%v)", r.err)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i, want := range steps {
		if want.policy == 0 && !want.demoted {
			want.policy = unix.SCHED_RR
		}
		if got := r.steps[i]; got.demoted != want.demoted || got.policy != want.policy {
			t.Errorf("after %s at %v: demoted %v with policy %d, want demoted %v with policy %d",
				map[bool]string{true: "Idle", false: "Busy"}[want.idle], want.at, got.demoted, got.policy, want.demoted, want.policy)
		}
	}
}

func TestYielderGivesUpItsTurnWhereNothingWaits(t *testing.T) {
	start := int64(time.Hour)
	steps := []struct {
		at      time.Duration
		idle    bool // Idle, about to wait; else Busy, with work in hand
		yielded bool
	}{
		{0, true, true}, // a loop's first turn is long past
		{time.Millisecond, false, false},
		{2 * time.Millisecond, true, false},
		{YieldEvery, true, true},
		// Woken after a wait longer than YieldEvery: the work in hand
		// goes first.
		{3 * YieldEvery, false, false},
		{3*YieldEvery + time.Millisecond, true, true},
		// Work without a wait gives up its turn YieldEvery after the
		// later of its start and the last turn given up.
		{5 * YieldEvery, false, false},
		{6*YieldEvery - 1, false, false},
		{6 * YieldEvery, false, true},
		{6*YieldEvery + time.Millisecond, false, false},
		{7 * YieldEvery, false, true},
		{7*YieldEvery + time.Millisecond, true, false},
	}
	var y Yielder
	for _, s := range steps {
		note := y.Busy
		if s.idle {
			note = y.Idle
		}
		if yielded := note(start + int64(s.at)); yielded != s.yielded {
			t.Errorf("at %v (idle %v) yielded %v, want %v", s.at, s.idle, yielded, s.yielded)
		}
	}
}
