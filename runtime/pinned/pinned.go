//go:build linux

// Package pinned runs the data path's loops on operating-system threads
// of their own, at real-time priority, waiting for their file descriptors
// in the kernel rather than in Go's poller.
//
// On a busy machine a frame that arrives for a daemon at normal priority
// waits for the scheduler to give its thread a turn among every other
// runnable program: with a bulk transfer through the tunnel on two cores,
// milliseconds, in front of each ping or keystroke, on each of the four
// wakeups of a round trip. Go's poller adds a second wait, as the thread
// that notices the descriptor is ready must run before the goroutine
// does. A loop pinned here is woken by the kernel itself, on its own
// thread, and runs at once: the network stack's own work in the kernel
// likewise runs ahead of every process. It only ever runs while frames
// are there to move, as the kernel's does.
package pinned

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Pin locks the calling goroutine to its thread for good and, when
// priority is above 0, raises the thread to the round-robin real-time
// policy at that priority (1 is the lowest, above every normal thread).
// The goroutine must never unlock the thread: when it returns, the thread
// ends with it, so no other goroutine ever runs at the raised priority
// (Go starts new threads from a thread of its own, not from a locked one).
// Without the privilege (CAP_SYS_NICE, or an RLIMIT_RTPRIO of at least
// priority) the thread stays locked at normal priority and the error says
// why.
func Pin(priority int) error {
	goruntime.LockOSThread()
	if priority <= 0 {
		return nil
	}
	if err := setPolicy(unix.SCHED_RR, priority); err != nil {
		return fmt.Errorf("real-time priority %d: %w", priority, err)
	}
	return nil
}

// Yielder hands a pinned loop's processor back to Go's scheduler every
// YieldEvery, which a loop that waits in the kernel never does otherwise.
// Go's monitor thread (sysmon) preempts a goroutine that has run for 10 ms
// on one turn of the scheduler, as a pinned loop always has: it signals
// the thread, takes the processor away in each system call, hands it to
// another thread and, having found work each time, wakes again every
// 20 µs for good. On a two-core virtual machine that monitor alone took
// 7 % of the daemons' CPU samples under a bulk stream
// (docs/benchmarks.md); a turn given up every few milliseconds costs two
// thread switches. The loop gives it up as it is about to wait (Idle),
// where nothing waits for it, and with work in hand (Busy) only after
// YieldEvery without a wait: a turn given up right after a wake-up, as a
// ping across an idle link found every time, held the ping for those two
// thread switches at each node it crossed. A loop that waits in the
// kernel for longer has its processor taken by the monitor meanwhile (it
// preempts no goroutine in a system call) and takes an idle one back as
// it wakes, without a thread switch, where one is spare (the daemon keeps
// a processor for each pinned loop).
type Yielder struct {
	last      int64 // when the loop last gave up its turn
	busySince int64 // when the loop's current stretch of work began; 0 while it waits
}

// YieldEvery is how often a loop gives up its turn: well within the
// 10 ms after which Go preempts it.
const YieldEvery = 4 * time.Millisecond

// Busy notes that the loop has work at now (Unix nanoseconds) and gives
// up its turn if it has worked for YieldEvery without waiting since it
// last did; it reports whether it did.
func (y *Yielder) Busy(now int64) bool {
	if y.busySince == 0 {
		y.busySince = now
	}
	if now-max(y.last, y.busySince) < int64(YieldEvery) {
		return false
	}
	return y.yield(now)
}

// Idle notes that the loop is about to wait at now and gives up its turn
// if YieldEvery has passed since it last did; it reports whether it did.
func (y *Yielder) Idle(now int64) bool {
	y.busySince = 0
	if now-y.last < int64(YieldEvery) {
		return false
	}
	return y.yield(now)
}

func (y *Yielder) yield(now int64) bool {
	y.last = now
	goruntime.Gosched()
	return true
}

// Stop ends the waits of every pinned loop: once stopped, Wait returns at
// once, for good. Stop it before closing the descriptors the loops wait
// for, so that none waits for a number the kernel gave to something else.
type Stop struct {
	efd int
}

// NewStop makes a Stop (an eventfd).
func NewStop() (*Stop, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	return &Stop{efd: efd}, nil
}

// Stop wakes every Wait and makes every later one return at once.
func (s *Stop) Stop() error {
	var one = [8]byte{1}
	_, err := unix.Write(s.efd, one[:])
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		return os.NewSyscallError("eventfd write", err)
	}
	return nil
}

// Close releases the eventfd; no Wait may be running or follow.
func (s *Stop) Close() error { return unix.Close(s.efd) }

// Wait blocks the calling thread until fd is readable (or has an error
// or hung up, which the next read reports) or s is stopped, and reports
// whether s is stopped.
func (s *Stop) Wait(fd int) (stopped bool, err error) {
	fds := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(s.efd), Events: unix.POLLIN}}
	for {
		_, err := unix.Ppoll(fds[:], nil, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false, os.NewSyscallError("ppoll", err)
		}
		return fds[1].Revents != 0, nil
	}
}

// Doorbell wakes one pinned loop that waits for work another thread
// hands it, in the kernel, without Go's scheduler: the sleeper Arms it,
// looks for work once more and Waits; the producer Rings it after handing
// work over, which costs a system call only when the sleeper is armed.
type Doorbell struct {
	efd   int
	armed atomic.Bool
}

// NewDoorbell makes a Doorbell (an eventfd).
func NewDoorbell() (*Doorbell, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	return &Doorbell{efd: efd}, nil
}

// Arm says the sleeper is about to wait; it must look for work once more
// before it does, as a Ring before the Arm woke nobody.
func (b *Doorbell) Arm() { b.armed.Store(true) }

// Ring wakes the sleeper if it is armed.
func (b *Doorbell) Ring() {
	if b.armed.CompareAndSwap(true, false) {
		var one = [8]byte{1}
		_, _ = unix.Write(b.efd, one[:]) // EAGAIN: a wakeup is pending already
	}
}

// Wait blocks the calling thread until the doorbell rings or s is
// stopped, and reports whether s is stopped.
func (b *Doorbell) Wait(s *Stop) (stopped bool, err error) {
	stopped, err = s.Wait(b.efd)
	var count [8]byte
	_, _ = unix.Read(b.efd, count[:]) // reset it; EAGAIN when only s woke us
	b.armed.Store(false)
	return stopped, err
}

// Close releases the eventfd; no Wait may be running or follow.
func (b *Doorbell) Close() error { return unix.Close(b.efd) }

// Budget keeps a real-time loop from taking a CPU from everything else:
// a loop busy for more than its share of a window goes on at normal
// priority, sharing the CPU fairly, until the next window. The kernel
// likewise hands its own network processing to a normal thread
// (ksoftirqd) when it runs too long. A Budget belongs to the pinned
// thread that uses it.
type Budget struct {
	priority      int
	share, window int64 // nanoseconds
	windowStart   int64
	used          int64 // busy in this window, before the current stretch
	busySince     int64 // start of the current stretch; 0 while idle
	demoted       bool
}

// NewBudget makes the budget of a loop pinned at priority: busy for at
// most share of each window at that priority.
func NewBudget(priority int, share, window time.Duration) *Budget {
	return &Budget{priority: priority, share: share.Nanoseconds(), window: window.Nanoseconds()}
}

// Busy notes, at now (Unix nanoseconds), that the loop has work.
func (b *Budget) Busy(now int64) {
	if b.priority <= 0 {
		return
	}
	if now-b.windowStart >= b.window {
		b.windowStart, b.used = now, 0
		if b.busySince != 0 {
			b.busySince = now
		}
		if b.demoted {
			b.demoted = setPolicy(unix.SCHED_RR, b.priority) != nil
		}
	}
	if b.busySince == 0 {
		b.busySince = now
		return
	}
	if !b.demoted && b.used+now-b.busySince > b.share {
		b.demoted = setPolicy(unix.SCHED_NORMAL, 0) == nil
	}
}

// Idle notes, at now, that the loop ran out of work and is about to wait.
func (b *Budget) Idle(now int64) {
	if b.busySince != 0 {
		b.used += now - b.busySince
		b.busySince = 0
	}
}

// Demoted reports whether the loop runs at normal priority for now.
func (b *Budget) Demoted() bool { return b.demoted }

// setPolicy sets the calling thread's scheduling policy.
func setPolicy(policy uint32, priority int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Priority: uint32(priority)}
	return unix.SchedSetAttr(0, &attr, 0)
}
