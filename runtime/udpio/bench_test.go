//go:build linux

package udpio

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	benchDatagrams = 64
	benchSize      = 1200
)

var errShortWrite = errors.New("WriteBatch sent fewer datagrams than asked")

// loopbackPair returns a sender and a receiver on 127.0.0.1, the batches
// that move between them, with GSO and GRO on or off.
func loopbackPair(tb testing.TB, offload bool) (sender, receiver *Conn, out, in []Message) {
	tb.Helper()
	sender, receiver = listen(tb, "127.0.0.1:0"), listen(tb, "127.0.0.1:0")
	if !offload {
		sender.gso.Store(false)
		var err error
		if cerr := receiver.raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, 0) }); cerr != nil {
			tb.Fatal(cerr)
		}
		if err != nil {
			tb.Fatalf("turn GRO off: %v", err)
		}
	}
	out = make([]Message, benchDatagrams)
	for i := range out {
		out[i] = Message{Buf: make([]byte, benchSize), Addr: receiver.LocalAddr()}
	}
	in = make([]Message, BatchSize)
	for i := range in {
		in[i].Buf = make([]byte, ReadBufSize)
	}
	return sender, receiver, out, in
}

// roundTrip sends out and reads until as many datagrams arrived.
func roundTrip(sender, receiver *Conn, out, in []Message) error {
	if n, err := sender.WriteBatch(out); err != nil || n != len(out) {
		return errors.Join(errShortWrite, err)
	}
	for got := 0; got < len(out); {
		n, err := receiver.ReadBatch(in)
		if err != nil {
			return err
		}
		for _, m := range in[:n] {
			got++
			if m.SegmentSize > 0 {
				got += (m.N+m.SegmentSize-1)/m.SegmentSize - 1
			}
		}
	}
	return nil
}

func TestBatchesAllocateNothing(t *testing.T) {
	for _, offload := range []bool{true, false} {
		sender, receiver, out, in := loopbackPair(t, offload)
		watchdog := time.AfterFunc(10*time.Second, func() { receiver.Close() })
		var err error
		allocs := testing.AllocsPerRun(100, func() {
			if err == nil {
				err = roundTrip(sender, receiver, out, in)
			}
		})
		watchdog.Stop()
		if err != nil {
			t.Fatalf("offload %v: %v", offload, err)
		}
		if allocs != 0 {
			t.Errorf("offload %v: %.1f allocations per batch", offload, allocs)
		}
	}
}

// BenchmarkLoopback sends batches of 64 datagrams of 1200 bytes over
// loopback and receives them, with the offloads on and off.
func BenchmarkLoopback(b *testing.B) {
	for _, offload := range []bool{true, false} {
		b.Run(map[bool]string{true: "gso-gro", false: "plain"}[offload], func(b *testing.B) {
			sender, receiver, out, in := loopbackPair(b, offload)
			watchdog := time.AfterFunc(10*time.Second, func() { receiver.Close() })
			defer watchdog.Stop()
			b.SetBytes(benchDatagrams * benchSize)
			b.ReportAllocs()
			for b.Loop() {
				watchdog.Reset(10 * time.Second)
				if err := roundTrip(sender, receiver, out, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(benchDatagrams*b.N)/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}
