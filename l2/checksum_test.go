package l2

import (
	"encoding/binary"
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

func TestOnesComplementSumMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "b")
		if rapid.Bool().Draw(t, "allOnes") {
			for i := range b {
				b[i] = 0xff
			}
		}
		initial := rapid.Uint16().Draw(t, "initial")
		got := OnesComplementSum(b, initial)
		want := refSum(append(binary.BigEndian.AppendUint16(nil, initial), b...))
		// 0 and 0xffff are the same number in one's complement.
		if got != want && !(got == 0xffff && want == 0 || got == 0 && want == 0xffff) {
			t.Fatalf("sum %#04x, want %#04x", got, want)
		}
	})
}

func TestIPv4HeaderChecksum(t *testing.T) {
	// The header from RFC 1071's usual example, checksum field 0xb861.
	header := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xde, 0xad, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := IPv4HeaderChecksum(header); got != 0xb861 {
		t.Fatalf("checksum %#04x, want 0xb861", got)
	}
}

func TestPseudoHeaderSum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.SampledFrom([]int{4, 16}).Draw(t, "size")
		src := rapid.SliceOfN(rapid.Byte(), size, size).Draw(t, "src")
		dst := rapid.SliceOfN(rapid.Byte(), size, size).Draw(t, "dst")
		proto := rapid.SampledFrom([]uint8{6, 17}).Draw(t, "proto")
		l4Len := rapid.IntRange(0, 65535).Draw(t, "l4Len")
		got := PseudoHeaderSum(src, dst, proto, l4Len)
		if want := refSum(refPseudoHeader(size == 16, src, dst, proto, l4Len)); got != want {
			t.Fatalf("sum %#04x, want %#04x", got, want)
		}
	})
}

func TestCompleteChecksum(t *testing.T) {
	s := bulkSpec(false, 1)
	s.udp = true
	// This payload makes the UDP checksum come out as zero, which UDP must
	// send as 0xffff.
	s.payload = []byte{0, 0}
	frame := s.build()
	zeroing := ^OnesComplementSum(frame[s.l4Off():], 0)
	binary.BigEndian.PutUint16(frame[len(frame)-2:], zeroing)
	if err := checkWholePacket(frame, s.offload()); err != nil {
		t.Fatal(err)
	}
	if err := CompleteChecksum(frame, s.l4Off(), 6); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint16(frame[s.l4Off()+6:]); got != 0xffff {
		t.Fatalf("UDP checksum %#04x, want 0xffff", got)
	}
	for _, c := range [][2]int{{-1, 0}, {0, -1}, {len(frame), 0}, {len(frame) - 1, 0}, {s.l4Off(), len(frame) - s.l4Off() - 1}, {len(frame) + 5, -10}} {
		if err := CompleteChecksum(frame, c[0], c[1]); err == nil {
			t.Errorf("start %d offset %d accepted", c[0], c[1])
		}
	}
}

func BenchmarkChecksum(b *testing.B) {
	for _, size := range []int{1500, 65536} {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(i * 31)
		}
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				OnesComplementSum(buf, 0)
			}
		})
	}
}
