package bench

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"burrow/netlab"
)

// The protection-switching stream: constant-rate UDP datagrams, each
// carrying its sequence number and send time, from a socket the bench
// process opens in one ring node's namespace to one it opens in
// another's. Sender and receiver share the process's monotonic clock, so
// send times need no synchronization.
const (
	streamRate     = 10_000 // datagrams per second
	streamInterval = time.Second / streamRate
	streamPort     = 9000
	// streamPayload is a datagram's size: sequence number and send time.
	streamPayload = 16
	// streamFrameSize is what a datagram is on the virtual Ethernet:
	// payload, UDP, IPv4 and Ethernet headers.
	streamFrameSize = streamPayload + 8 + 20 + 14
)

// arrival is one datagram the receiver got.
type arrival struct {
	seq uint64
	// sent and received are on the stream's clock.
	sent, received time.Duration
}

// sentStream is what the sender did: datagrams 0 to Packets-1, sent
// between First and Last on the stream's clock.
type sentStream struct {
	Packets     uint64
	First, Last time.Duration
	// Errors counts datagrams the sender's kernel refused (they are lost).
	Errors int
}

// streamSender paces datagrams at streamRate until stopped.
type streamSender struct {
	conn     *net.UDPConn
	epoch    time.Time
	next     atomic.Uint64 // the sequence number of the next datagram
	stopping atomic.Bool
	done     chan sentStream
}

// startStream opens a socket in from's namespace and starts sending to
// to, with send times on epoch's clock.
func startStream(from *netlab.Host, to netip.AddrPort, epoch time.Time) (*streamSender, error) {
	var conn *net.UDPConn
	err := from.Do(func() (err error) {
		conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
		return err
	})
	if err != nil {
		return nil, err
	}
	s := &streamSender{conn: conn, epoch: epoch, done: make(chan sentStream, 1)}
	go s.run()
	return s, nil
}

// run sends datagram n when n intervals have passed since the first,
// sleeping in between. A sleep that overruns (timers are coarser than
// 100 µs under load) is made up by sending the overdue datagrams at once,
// so the rate holds over any few milliseconds.
func (s *streamSender) run() {
	var out sentStream
	buf := make([]byte, streamPayload)
	start := time.Since(s.epoch)
	for seq := uint64(0); !s.stopping.Load(); seq++ {
		if wait := start + time.Duration(seq)*streamInterval - time.Since(s.epoch); wait > 0 {
			time.Sleep(wait)
		}
		now := time.Since(s.epoch)
		binary.BigEndian.PutUint64(buf, seq)
		binary.BigEndian.PutUint64(buf[8:], uint64(now))
		if _, err := s.conn.Write(buf); err != nil {
			out.Errors++
		}
		if seq == 0 {
			out.First = now
		}
		out.Last, out.Packets = now, seq+1
		s.next.Store(seq + 1)
	}
	s.conn.Close()
	s.done <- out
}

// sequence is the sequence number the next datagram gets.
func (s *streamSender) sequence() uint64 { return s.next.Load() }

// stop ends the stream and says what was sent.
func (s *streamSender) stop() sentStream {
	s.stopping.Store(true)
	return <-s.done
}

// streamReceiver records every datagram that arrives.
type streamReceiver struct {
	conn  *net.UDPConn
	epoch time.Time
	count atomic.Uint64
	done  chan []arrival
}

// listenStream opens a socket in at's namespace on addr.
func listenStream(at *netlab.Host, addr netip.AddrPort, epoch time.Time) (*streamReceiver, error) {
	var conn *net.UDPConn
	err := at.Do(func() (err error) {
		conn, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
		return err
	})
	if err != nil {
		return nil, err
	}
	// Bursts after the sender's overrun sleeps must not overflow it.
	if err := conn.SetReadBuffer(4 << 20); err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	r := &streamReceiver{conn: conn, epoch: epoch, done: make(chan []arrival, 1)}
	go r.run()
	return r, nil
}

func (r *streamReceiver) run() {
	arrivals := make([]arrival, 0, 30*streamRate)
	buf := make([]byte, 64)
	for {
		n, err := r.conn.Read(buf)
		if err != nil {
			break // closed
		}
		if n != streamPayload {
			continue
		}
		arrivals = append(arrivals, arrival{
			seq:      binary.BigEndian.Uint64(buf),
			sent:     time.Duration(binary.BigEndian.Uint64(buf[8:])),
			received: time.Since(r.epoch),
		})
		r.count.Add(1)
	}
	r.done <- arrivals
}

// received is how many datagrams have arrived so far.
func (r *streamReceiver) received() uint64 { return r.count.Load() }

// close stops receiving and returns every arrival, in order.
func (r *streamReceiver) close() []arrival {
	r.conn.Close()
	return <-r.done
}

// streamLoss is what a stream lost around a failure.
type streamLoss struct {
	Sent uint64
	// Rate is the achieved send rate, datagrams per second.
	Rate float64
	// Received counts distinct datagrams; Duplicates the extra copies.
	Received, Duplicates int
	// Lost counts datagrams that never arrived, LostFromFailure those of
	// them sent from the failure on.
	Lost, LostFromFailure int
	// LongestGap is the longest time between the sending of two
	// datagrams that arrived with none in between: the stream's longest
	// blackout, as the sender's clock saw it (the start and end of the
	// stream count as arrived).
	LongestGap time.Duration
}

// SwitchingTime is the datagrams lost from the failure on, as time at the
// stream's nominal rate.
func (l streamLoss) SwitchingTime() time.Duration {
	return time.Duration(l.LostFromFailure) * streamInterval
}

// analyzeStream counts what the stream lost; failureSeq is the sequence
// number the sender was at when the failure began.
func analyzeStream(sent sentStream, failureSeq uint64, arrivals []arrival) streamLoss {
	l := streamLoss{Sent: sent.Packets}
	if sent.Packets > 1 && sent.Last > sent.First {
		l.Rate = float64(sent.Packets-1) / (sent.Last - sent.First).Seconds()
	}
	sentAt := make([]time.Duration, sent.Packets)
	got := make([]bool, sent.Packets)
	for _, a := range arrivals {
		switch {
		case a.seq >= sent.Packets:
			// Not of this stream.
		case got[a.seq]:
			l.Duplicates++
		default:
			got[a.seq], sentAt[a.seq] = true, a.sent
			l.Received++
		}
	}
	previous := sent.First
	for seq := range sent.Packets {
		if !got[seq] {
			l.Lost++
			if seq >= failureSeq {
				l.LostFromFailure++
			}
			continue
		}
		l.LongestGap = max(l.LongestGap, sentAt[seq]-previous)
		previous = sentAt[seq]
	}
	l.LongestGap = max(l.LongestGap, sent.Last-previous)
	return l
}

// deliverySample is the receiver's count at a time after the failure.
type deliverySample struct {
	at       time.Duration
	received uint64
}

// Recovery of the stream: it flows again when, over the last
// recoveryWindow, at least recoveredShare of what was sent arrived.
const (
	recoveryWindow = time.Second
	recoveredShare = 0.9
)

// flowing reports whether the samples, oldest first, show the stream
// arriving at nearly its full rate over the last recoveryWindow.
func flowing(samples []deliverySample) bool {
	if len(samples) < 2 {
		return false
	}
	last := samples[len(samples)-1]
	for i := len(samples) - 2; i >= 0; i-- {
		if span := last.at - samples[i].at; span >= recoveryWindow {
			expected := span.Seconds() * streamRate
			return float64(last.received-samples[i].received) >= recoveredShare*expected
		}
	}
	return false
}
