// Package codel is CoDel, the active queue management of RFC 8289, for
// queues burrow cannot reorder: the UDP socket's receive queue, where a
// bulk TCP stream through the tunnel would otherwise keep a standing queue
// of milliseconds in front of every other packet. The reader takes each
// datagram's time in the queue from the kernel's receive timestamp and asks
// Drop whether to drop it; CoDel drops just enough of a bulk flow's packets
// for its TCP sender to keep the queue near Target. It reads no clock: the
// caller passes the time in.
package codel

import (
	"math"
	"sync/atomic"
	"time"
)

// CoDel is the state of one queue's CoDel. The zero value is not usable:
// make one with New.
type CoDel struct {
	target, interval time.Duration
	// firstAbove is when the sojourn time will have stayed above target
	// for an interval (zero while it is below).
	firstAbove time.Duration
	// dropNext is when the next drop is due while dropping.
	dropNext         time.Duration
	count, lastCount int
	dropping         bool
	// Drops counts the packets Drop said to drop; others may read it
	// while the queue's owner drops.
	Drops atomic.Uint64
}

// Target and Interval are what burrow's queues use: a queue that stays
// above Target for an Interval (a few round trips of a LAN or a nearby
// site) gets a packet dropped, then more, faster, until it shrinks.
const (
	Target   = time.Millisecond
	Interval = 10 * time.Millisecond
)

// New returns a CoDel keeping the queue's sojourn time near target, and
// judging it over interval (about the round trip of the flows it holds).
func New(target, interval time.Duration) *CoDel {
	return &CoDel{target: target, interval: interval}
}

// Drop reports whether the packet leaving the queue at now (any monotonic
// origin) after waiting sojourn in it should be dropped.
func (c *CoDel) Drop(now, sojourn time.Duration) bool {
	okToDrop := c.aboveForAnInterval(now, sojourn)
	if c.dropping {
		if !okToDrop {
			c.dropping = false
			return false
		}
		if now < c.dropNext {
			return false
		}
		c.count++
		c.dropNext = c.controlLaw(c.dropNext)
		c.Drops.Add(1)
		return true
	}
	if !okToDrop {
		return false
	}
	// Enter the dropping state. A queue that needed dropping a moment ago
	// resumes near the drop rate that controlled it then (RFC 8289 §5.5).
	c.dropping = true
	delta := c.count - c.lastCount
	if delta > 1 && now-c.dropNext < 16*c.interval {
		c.count = delta
	} else {
		c.count = 1
	}
	c.lastCount = c.count
	c.dropNext = c.controlLaw(now)
	c.Drops.Add(1)
	return true
}

// aboveForAnInterval tracks whether the sojourn time has stayed above
// target for at least an interval.
func (c *CoDel) aboveForAnInterval(now, sojourn time.Duration) bool {
	if sojourn < c.target {
		c.firstAbove = 0
		return false
	}
	if c.firstAbove == 0 {
		c.firstAbove = now + c.interval
		return false
	}
	return now >= c.firstAbove
}

// controlLaw spaces drops at interval/√count: faster the longer the queue
// stays.
func (c *CoDel) controlLaw(t time.Duration) time.Duration {
	return t + time.Duration(float64(c.interval)/math.Sqrt(float64(c.count)))
}
