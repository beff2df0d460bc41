package l2

import (
	"encoding/binary"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// frameWith builds a frame of flow s with the given sequence number, IP ID,
// payload length and flags.
func frameWith(s packetSpec, seq uint32, id uint16, payloadLen int, flags uint8) []byte {
	s.seq, s.ipID, s.flags = seq, id, flags
	s.payload = make([]byte, payloadLen)
	return s.build()
}

// TestCoalescerGroups feeds frames of one flow (plus strangers) and checks
// which of them end up in the same output packet, in which order.
func TestCoalescerGroups(t *testing.T) {
	a := bulkSpec(false, 1)
	seg := segmentsOf(a, 6*1000, 1000)
	arp := append(Ethernet{Dst: Broadcast, Src: a.src, EtherType: EtherTypeARP}.AppendHeader(nil), make([]byte, ARPLen)...)
	fragment := append([]byte{}, seg[2]...)
	binary.BigEndian.PutUint16(fragment[14+6:], 0x2000) // more fragments: a TCP fragment between the same hosts
	otherTOS := append([]byte{}, seg[2]...)
	otherTOS[14+1] = 4
	otherTOS[14+10], otherTOS[14+11] = 0, 0
	binary.BigEndian.PutUint16(otherTOS[14+10:], IPv4HeaderChecksum(otherTOS[14:34]))
	otherWindow := append([]byte{}, seg[2]...)
	otherWindow[a.l4Off()+15]++
	short := frameWith(a, 4000, a.ipID+3, 500, tcpACK)
	afterShort := frameWith(a, 4500, a.ipID+4, 1000, tcpACK)
	syn := frameWith(a, 2999, 0, 0, tcpSYN)
	pureACK := frameWith(a, 3000, 0, 0, tcpACK)
	push := frameWith(a, 2000, a.ipID+1, 1000, tcpACK|tcpPSH)
	otherTimestamp := append([]byte{}, seg[2]...)
	otherTimestamp[a.l4Off()+tcpMinHeaderLen+7]++
	withIPOptions := a
	withIPOptions.ipOptions = []byte{1, 1, 1, 0}
	optSeg := segmentsOf(withIPOptions, 3*1000, 1000)
	partial := a.offload()
	optPartial := withIPOptions.offload()
	full := Offload{}

	v6 := bulkSpec(true, 1)
	v6Seg := segmentsOf(v6, 4*1000, 1000)
	v6Partial := v6.offload()
	otherHopLimit := append([]byte{}, v6Seg[2]...)
	otherHopLimit[14+7]--
	otherFlowLabel := append([]byte{}, v6Seg[2]...)
	otherFlowLabel[14+3]++

	type frame struct {
		b   []byte
		off Offload
	}
	cases := []struct {
		name   string
		frames []frame
		groups [][]int // indexes into frames per output packet, in output order
	}{
		{"one run", []frame{{seg[0], partial}, {seg[1], partial}, {seg[2], partial}}, [][]int{{0, 1, 2}}},
		{"gap", []frame{{seg[0], partial}, {seg[1], partial}, {seg[3], partial}, {seg[4], partial}}, [][]int{{0, 1}, {2, 3}}},
		{"SYN between", []frame{{seg[0], partial}, {seg[1], partial}, {syn, partial}, {seg[2], partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"pure ACK between", []frame{{seg[0], partial}, {seg[1], partial}, {pureACK, partial}, {seg[2], partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"PSH ends a super-frame", []frame{{seg[0], partial}, {push, partial}, {seg[2], partial}}, [][]int{{0, 1}, {2}}},
		{"PSH cannot start one", []frame{{push, partial}, {seg[2], partial}}, [][]int{{0}, {1}}},
		{"shorter segment ends it", []frame{{seg[0], partial}, {seg[1], partial}, {seg[2], partial}, {short, partial}, {afterShort, partial}}, [][]int{{0, 1, 2, 3}, {4}}},
		{"longer segment does not fit", []frame{{short, partial}, {afterShort, partial}}, [][]int{{0}, {1}}},
		{"other TOS", []frame{{seg[0], partial}, {seg[1], partial}, {otherTOS, partial}, {seg[3], partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"other window", []frame{{seg[0], partial}, {seg[1], partial}, {otherWindow, partial}, {seg[3], partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"other TCP timestamp", []frame{{seg[0], partial}, {seg[1], partial}, {otherTimestamp, partial}, {seg[3], partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"IPv4 options", []frame{{optSeg[0], optPartial}, {optSeg[1], optPartial}, {optSeg[2], optPartial}}, [][]int{{0}, {1}, {2}}},
		{"IPv6 run", []frame{{v6Seg[0], v6Partial}, {v6Seg[1], v6Partial}, {v6Seg[2], v6Partial}}, [][]int{{0, 1, 2}}},
		{"other hop limit", []frame{{v6Seg[0], v6Partial}, {v6Seg[1], v6Partial}, {otherHopLimit, v6Partial}, {v6Seg[3], v6Partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"other flow label", []frame{{v6Seg[0], v6Partial}, {v6Seg[1], v6Partial}, {otherFlowLabel, v6Partial}, {v6Seg[3], v6Partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"full checksum is not merged", []frame{{seg[0], partial}, {seg[1], full}, {seg[2], partial}}, [][]int{{0}, {1}, {2}}},
		{"fragment between the same hosts", []frame{{seg[0], partial}, {seg[1], partial}, {fragment, full}, {seg[2], partial}}, [][]int{{0, 1}, {2}, {3}}},
		{"unrelated frame between", []frame{{seg[0], partial}, {arp, full}, {seg[1], partial}}, [][]int{{0, 2}, {1}}},
	}
	for _, tc := range cases {
		c := NewCoalescer(16, 0)
		for i, f := range tc.frames {
			if !c.Add(f.b, f.off) {
				t.Fatalf("%s: Add of frame %d refused", tc.name, i)
			}
		}
		packets := flushAll(t, c)
		if len(packets) != len(tc.groups) {
			t.Errorf("%s: %d packets, want %d", tc.name, len(packets), len(tc.groups))
			continue
		}
		for i, group := range tc.groups {
			var want [][]byte
			for _, j := range group {
				want = append(want, tc.frames[j].b)
			}
			if got := resegment(t, packets[i:i+1], Offload{}); !equalFrames(got, want) {
				t.Errorf("%s: packet %d does not hold frames %v", tc.name, i, group)
			}
		}
	}
}

func TestCoalescerInterleavedFlows(t *testing.T) {
	a := segmentsOf(bulkSpec(false, 1), 6*1448, 1448)
	b := segmentsOf(bulkSpec(true, 2), 6*1448, 1448)
	c := NewCoalescer(16, 0)
	for i := range a {
		if !c.Add(a[i], bulkSpec(false, 1).offload()) || !c.Add(b[i], bulkSpec(true, 2).offload()) {
			t.Fatal("Add refused")
		}
	}
	packets := flushAll(t, c)
	if len(packets) != 2 {
		t.Fatalf("%d packets, want one per flow", len(packets))
	}
	if !equalFrames(resegment(t, packets[:1], Offload{}), a) || !equalFrames(resegment(t, packets[1:], Offload{}), b) {
		t.Fatal("interleaved flows were not coalesced back into their own super-frames")
	}
}

func TestCoalescerIPv4IDs(t *testing.T) {
	s := bulkSpec(false, 1)
	s.dontFragment = false
	seg := segmentsOf(s, 3*1000, 1000)
	if got := len(coalesceAll(t, seg, s.offload())); got != 1 {
		t.Fatalf("segments with consecutive IDs gave %d packets, want 1", got)
	}
	sameID := append([]byte{}, seg[1]...)
	sameID[14+5]--
	binary.BigEndian.PutUint16(sameID[14+10:], IPv4HeaderChecksum(sameID[14:34]))
	if got := len(coalesceAll(t, [][]byte{seg[0], sameID}, s.offload())); got != 2 {
		t.Fatalf("segments without DF and with equal IDs gave %d packets, want 2", got)
	}
}

func TestCoalescerStaysUnder64KiB(t *testing.T) {
	s := bulkSpec(true, 1)
	seg := segmentsOf(s, 40*1448, 1448)
	s.seq += 40 * 1448
	seg = append(seg, segmentsOf(s, 20*1448, 1448)...)
	packets := coalesceAll(t, seg, s.offload())
	if len(packets) != 2 {
		t.Fatalf("%d packets, want 2", len(packets))
	}
	for _, pkt := range packets {
		if ipLen := len(pkt) - VirtioNetHdrLen - s.linkLen(); ipLen > maxIPPacketLen {
			t.Fatalf("super-frame of %d bytes of IP", ipLen)
		}
	}
	if !equalFrames(resegment(t, packets, s.offload()), seg) {
		t.Fatal("split super-frames do not hold the segments")
	}
}

func TestCoalescerCapacity(t *testing.T) {
	c := NewCoalescer(2, 0)
	arp := append(Ethernet{Dst: Broadcast, EtherType: EtherTypeARP}.AppendHeader(nil), make([]byte, ARPLen)...)
	for range 2 {
		if !c.Add(arp, Offload{}) {
			t.Fatal("Add refused below capacity")
		}
	}
	if c.Add(arp, Offload{}) {
		t.Fatal("Add accepted a third frame with room for two")
	}
	flushAll(t, c)
	if !c.Add(make([]byte, MaxFrameLen), Offload{}) {
		t.Fatal("empty Coalescer refused a frame of MaxFrameLen")
	}
	if c.Add(arp, Offload{}) {
		t.Fatal("Add accepted a frame beyond the arena")
	}
	flushAll(t, c)
	if c.Add(make([]byte, MaxFrameLen+1), Offload{}) {
		t.Fatal("Add accepted a frame longer than MaxFrameLen")
	}
}

func TestCoalescerFlushReportsFirstErrorAndEmpties(t *testing.T) {
	c := NewCoalescer(4, 0)
	arp := append(Ethernet{Dst: Broadcast, EtherType: EtherTypeARP}.AppendHeader(nil), make([]byte, ARPLen)...)
	c.Add(arp, Offload{})
	c.Add(arp, Offload{})
	first := errors.New("first")
	calls := 0
	err := c.Flush(func([]byte) error {
		calls++
		if calls == 1 {
			return first
		}
		return errors.New("second")
	})
	if err != first || calls != 2 {
		t.Fatalf("Flush: err=%v after %d writes, want the first error after 2", err, calls)
	}
	if packets := flushAll(t, c); len(packets) != 0 {
		t.Fatalf("%d packets left after Flush", len(packets))
	}
}

// TestCoalescerKeepsPerFlowOrder interleaves several flows, with gaps and
// frames that cannot merge, through a small Coalescer, and checks that
// every flow comes out whole and in order.
func TestCoalescerKeepsPerFlowOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type input struct {
			frame []byte
			off   Offload
			flow  uint16
		}
		var streams [][]input
		for f := range rapid.IntRange(1, 4).Draw(t, "flows") {
			s := bulkSpec(rapid.Bool().Draw(t, "ipv6"), uint16(f+1))
			s.dontFragment = rapid.Bool().Draw(t, "dontFragment")
			mss := rapid.IntRange(1, 1500).Draw(t, "mss")
			segs := segmentsOf(s, rapid.IntRange(1, 40).Draw(t, "segments")*mss, mss)
			var stream []input
			for i, seg := range segs {
				switch rapid.IntRange(0, 9).Draw(t, "event") {
				case 0: // lost on the way
					continue
				case 1: // a window update of the same flow sits in between
					seq := binary.BigEndian.Uint32(seg[s.l4Off()+4:])
					stream = append(stream, input{frameWith(s, seq, 0, 0, tcpACK), s.offload(), s.srcPort})
				case 2: // arrives with a full checksum
					stream = append(stream, input{segs[i], Offload{}, s.srcPort})
					continue
				}
				stream = append(stream, input{seg, s.offload(), s.srcPort})
			}
			streams = append(streams, stream)
		}
		var inputs []input
		for {
			var live []int
			for i, s := range streams {
				if len(s) > 0 {
					live = append(live, i)
				}
			}
			if len(live) == 0 {
				break
			}
			i := rapid.SampledFrom(live).Draw(t, "next")
			inputs = append(inputs, streams[i][0])
			streams[i] = streams[i][1:]
		}

		c := NewCoalescer(rapid.IntRange(1, 32).Draw(t, "maxFrames"), rapid.IntRange(0, 200000).Draw(t, "arena"))
		var packets [][]byte
		for _, in := range inputs {
			if !c.Add(in.frame, in.off) {
				packets = append(packets, flushAll(t, c)...)
				if !c.Add(in.frame, in.off) {
					t.Fatalf("Add refused after Flush")
				}
			}
		}
		packets = append(packets, flushAll(t, c)...)

		perFlow := func(frames [][]byte) map[uint16][][]byte {
			m := map[uint16][][]byte{}
			for _, f := range frames {
				r, err := parseRef(f)
				if err != nil {
					t.Fatalf("output frame: %v", err)
				}
				port := binary.BigEndian.Uint16(f[r.l4Off:])
				m[port] = append(m[port], f)
			}
			return m
		}
		var inFrames [][]byte
		for _, in := range inputs {
			inFrames = append(inFrames, in.frame)
		}
		want, got := perFlow(inFrames), perFlow(resegment(t, packets, Offload{}))
		if len(got) != len(want) {
			t.Fatalf("%d flows out, %d in", len(got), len(want))
		}
		for port, frames := range want {
			if !equalFrames(got[port], frames) {
				t.Fatalf("flow %d: frames out differ from frames in (%d vs %d)", port, len(got[port]), len(frames))
			}
		}
	})
}

func TestCoalescerDoesNotAllocate(t *testing.T) {
	a := segmentsOf(bulkSpec(false, 1), 22*1448, 1448)
	b := segmentsOf(bulkSpec(true, 2), 22*1448, 1448)
	offA, offB := bulkSpec(false, 1).offload(), bulkSpec(true, 2).offload()
	c := NewCoalescer(64, 256<<10)
	discard := func([]byte) error { return nil }
	allocs := testing.AllocsPerRun(100, func() {
		for i := range a {
			c.Add(a[i], offA)
			c.Add(b[i], offB)
		}
		c.Flush(discard)
	})
	if allocs != 0 {
		t.Fatalf("Add and Flush allocate %.1f times per batch", allocs)
	}
}

func benchmarkCoalescer(b *testing.B, flows ...[][]byte) {
	offs := []Offload{bulkSpec(false, 1).offload(), bulkSpec(true, 2).offload()}
	c := NewCoalescer(64, 256<<10)
	total := 0
	for _, f := range flows {
		for _, seg := range f {
			total += len(seg)
		}
	}
	discard := func([]byte) error { return nil }
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for i := range flows[0] {
			for j, f := range flows {
				if !c.Add(f[i], offs[j]) {
					b.Fatal("Add refused")
				}
			}
		}
		if err := c.Flush(discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCoalescer: the 44 segments of one 64 KiB super-frame.
func BenchmarkCoalescer(b *testing.B) {
	benchmarkCoalescer(b, segmentsOf(bulkSpec(false, 1), 44*1448, 1448))
}

// BenchmarkCoalescerInterleaved: two flows alternating, 22 segments each,
// so that every super-frame is gathered from scattered payloads.
func BenchmarkCoalescerInterleaved(b *testing.B) {
	benchmarkCoalescer(b, segmentsOf(bulkSpec(false, 1), 22*1448, 1448), segmentsOf(bulkSpec(true, 2), 22*1448, 1448))
}

// encodeCoalescerInput packs frames and their offloads the way
// FuzzCoalescer unpacks them.
func encodeCoalescerInput(frames [][]byte, off Offload) []byte {
	var b []byte
	for _, f := range frames {
		needsCsum := byte(0)
		if off.NeedsCsum {
			needsCsum = 1
		}
		b = append(b, needsCsum)
		b = binary.BigEndian.AppendUint16(b, off.CsumStart)
		b = binary.BigEndian.AppendUint16(b, off.CsumOffset)
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b
}

// FuzzCoalescer feeds frames from the tunnel, which need not be well formed:
// the Coalescer must not panic, and every packet it writes must carry a
// valid virtio header whose segments are valid packets, one per frame in.
func FuzzCoalescer(f *testing.F) {
	s := bulkSpec(false, 1)
	f.Add(encodeCoalescerInput(segmentsOf(s, 3*600, 600), s.offload()))
	v6 := bulkSpec(true, 2)
	f.Add(encodeCoalescerInput(append(segmentsOf(v6, 2*300, 300), segmentsOf(s, 2*300, 300)...), v6.offload()))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewCoalescer(8, 0)
		inputs := 0
		var packets [][]byte
		for len(data) >= 7 {
			off := Offload{
				NeedsCsum:  data[0]&1 != 0,
				CsumStart:  binary.BigEndian.Uint16(data[1:]),
				CsumOffset: binary.BigEndian.Uint16(data[3:]),
			}
			n := min(int(binary.BigEndian.Uint16(data[5:])), len(data)-7)
			frame := data[7 : 7+n]
			data = data[7+n:]
			if !c.Add(frame, off) {
				packets = append(packets, flushAll(t, c)...)
				if !c.Add(frame, off) {
					t.Fatal("Add refused after Flush")
				}
			}
			inputs++
		}
		packets = append(packets, flushAll(t, c)...)
		outputs := 0
		for _, pkt := range packets {
			var hdr VirtioNetHdr
			if err := hdr.Decode(pkt); err != nil {
				t.Fatalf("bad virtio header: %v", err)
			}
			if hdr.GSOType == VirtioNetHdrGSONone {
				outputs++
				continue
			}
			for _, seg := range resegment(t, [][]byte{pkt}, Offload{}) {
				if err := checkWholePacket(seg, Offload{NeedsCsum: true, CsumStart: hdr.CsumStart, CsumOffset: hdr.CsumOffset}); err != nil {
					t.Fatalf("segment of a coalesced packet: %v", err)
				}
				outputs++
			}
		}
		if outputs != inputs {
			t.Fatalf("%d frames in, %d out", inputs, outputs)
		}
	})
}
