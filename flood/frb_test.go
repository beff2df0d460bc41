package flood

import (
	"bytes"
	"errors"
	"testing"

	"burrow/l2"
	"burrow/nid"

	"pgregory.net/rapid"
)

var genID = rapid.Custom(func(t *rapid.T) nid.ID {
	return nid.FromUint128(rapid.Uint64().Draw(t, "hi"), rapid.Uint64().Draw(t, "lo"))
})

var genUnicastMAC = rapid.Custom(func(t *rapid.T) l2.MAC {
	var m l2.MAC
	copy(m[:], rapid.SliceOfN(rapid.Byte(), len(m), len(m)).Draw(t, "mac"))
	m[0] &^= 1
	return m
})

// arpFrame is a minimal broadcast Ethernet frame: header and a short payload.
var arpFrame = []byte{
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06,
	0, 1, 8, 0, 6, 4, 0, 1,
}

func leavesOf(f FRB) []l2.MAC {
	out := make([]l2.MAC, f.NumLeaves())
	for i := range out {
		out[i] = f.Leaf(i)
	}
	return out
}

func TestBroadcastRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		root, bound := genID.Draw(t, "root"), genID.Draw(t, "bound")
		hops := rapid.Uint8().Draw(t, "hops")
		frame := rapid.SliceOfN(rapid.Byte(), l2.EthernetHeaderLen, 300).Draw(t, "frame")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		kind := rapid.SampledFrom([]Kind{Broadcast, Transit}).Draw(t, "kind")

		b := AppendBroadcast(bytes.Clone(prefix), kind, root, bound, hops, frame)
		if !bytes.Equal(b[:len(prefix)], prefix) {
			t.Fatalf("AppendBroadcast overwrote dst")
		}
		msg := b[len(prefix):]
		if len(msg) != BroadcastHeaderLen+len(frame) {
			t.Fatalf("encoded %d bytes, want header %d + frame %d", len(msg), BroadcastHeaderLen, len(frame))
		}
		f, err := Parse(msg)
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if f.Kind != kind || f.Root != root || f.Bound != bound || f.Hops != hops || !bytes.Equal(f.Frame, frame) || f.NumLeaves() != 0 {
			t.Fatalf("Parse = %+v, want root %v bound %v hops %d frame %x", f, root, bound, hops, frame)
		}
	})
}

func TestLeafAdvertRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		root := genID.Draw(t, "root")
		leaves := rapid.SliceOfN(genUnicastMAC, 0, MaxLeaves).Draw(t, "leaves")

		f, err := Parse(AppendLeafAdvert(nil, root, leaves))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		got := leavesOf(f)
		if f.Kind != LeafAdvert || f.Root != root || len(got) != len(leaves) {
			t.Fatalf("Parse = %+v with %d leaves, want root %v and %d leaves", f, len(got), root, len(leaves))
		}
		for i := range leaves {
			if got[i] != leaves[i] {
				t.Fatalf("leaf %d = %v, want %v", i, got[i], leaves[i])
			}
		}
	})
}

func TestAppendLeafAdvertCapsAtMaxLeaves(t *testing.T) {
	leaves := make([]l2.MAC, MaxLeaves+7)
	for i := range leaves {
		leaves[i] = l2.MAC{0x02, 0, 0, 0, byte(i >> 8), byte(i)}
	}
	b := AppendLeafAdvert(nil, nid.ID{1}, leaves)
	if len(b) > 1400 {
		t.Fatalf("a full advert is %d bytes, more than a 1400-byte datagram", len(b))
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if f.NumLeaves() != MaxLeaves || f.Leaf(MaxLeaves-1) != leaves[MaxLeaves-1] {
		t.Fatalf("advert kept %d leaves ending in %v, want the first %d", f.NumLeaves(), f.Leaf(f.NumLeaves()-1), MaxLeaves)
	}
}

func TestLeafPanicsPastTheList(t *testing.T) {
	// The advert is followed by more bytes in the same buffer: Leaf must not
	// read them as a leaf.
	buf := AppendLeafAdvert(nil, nid.ID{1}, []l2.MAC{{0x02, 1, 2, 3, 4, 5}})
	buf = append(buf, 0x02, 9, 9, 9, 9, 9)
	f, err := Parse(buf[:len(buf)-macLen])
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatalf("Leaf(1) of a one-leaf advert did not panic")
		}
	}()
	f.Leaf(1)
}

func TestParseRejectsGarbage(t *testing.T) {
	root := nid.ID{0xaa}
	broadcast := AppendBroadcast(nil, Broadcast, root, nid.ID{0xbb}, 3, arpFrame)
	advert := AppendLeafAdvert(nil, root, []l2.MAC{{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}})
	with := func(b []byte, i int, v byte) []byte {
		b = bytes.Clone(b)
		b[i] = v
		return b
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"version 0", with(broadcast, 0, 0x01), ErrVersion},
		{"version 2", with(broadcast, 0, 0x21), ErrVersion},
		{"kind 0", with(broadcast, 0, 0x10), ErrKind},
		{"kind 4", with(broadcast, 0, 0x14), ErrKind},
		{"broadcast cut in header", broadcast[:BroadcastHeaderLen-1], ErrTruncated},
		{"broadcast without frame", broadcast[:BroadcastHeaderLen], ErrShortFrame},
		{"broadcast frame 13 bytes", broadcast[:BroadcastHeaderLen+l2.EthernetHeaderLen-1], ErrShortFrame},
		{"advert cut in header", advert[:LeafAdvertHeaderLen-1], ErrTruncated},
		{"advert cut in leaf", advert[:len(advert)-1], ErrTruncated},
		{"advert count too high", with(advert, LeafAdvertHeaderLen-1, 3), ErrTruncated},
		{"advert count over limit", with(advert, LeafAdvertHeaderLen-1, MaxLeaves+1), ErrTooManyLeaves},
		{"advert trailing byte", append(bytes.Clone(advert), 0), ErrTrailing},
		{"advert multicast leaf", with(advert, LeafAdvertHeaderLen+macLen, 0x01), ErrMulticastLeaf},
	}
	for _, c := range cases {
		if f, err := Parse(c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: Parse = %+v, %v; want %v", c.name, f, err, c.want)
		}
	}
	if _, err := Parse(broadcast[:BroadcastHeaderLen+l2.EthernetHeaderLen]); err != nil {
		t.Errorf("a bare 14-byte frame must be accepted: %v", err)
	}
}

func TestCodecDoesNotAllocate(t *testing.T) {
	leaves := []l2.MAC{{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}}
	buf := make([]byte, 0, 1500)
	allocs := testing.AllocsPerRun(100, func() {
		b := AppendBroadcast(buf[:0], Broadcast, nid.ID{1}, nid.ID{2}, 1, arpFrame)
		if _, err := Parse(b); err != nil {
			t.Fatal(err)
		}
		b = AppendLeafAdvert(buf[:0], nid.ID{1}, leaves)
		if _, err := Parse(b); err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b[:3]); err == nil {
			t.Fatal("truncated advert accepted")
		}
	})
	if allocs != 0 {
		t.Fatalf("encode and parse allocate %v times per run, want 0", allocs)
	}
}

// reencode writes f back with the Append functions.
func reencode(f FRB) []byte {
	if f.Kind == LeafAdvert {
		return AppendLeafAdvert(nil, f.Root, leavesOf(f))
	}
	return AppendBroadcast(nil, f.Kind, f.Root, f.Bound, f.Hops, f.Frame)
}

func FuzzParse(f *testing.F) {
	f.Add(AppendBroadcast(nil, Broadcast, nid.ID{1}, nid.ID{2}, 0, arpFrame))
	f.Add(AppendBroadcast(nil, Broadcast, nid.ID{}, nid.ID{}, 255, arpFrame[:l2.EthernetHeaderLen]))
	f.Add(AppendBroadcast(nil, Transit, nid.ID{4}, nid.ID{5}, 2, arpFrame))
	f.Add(AppendLeafAdvert(nil, nid.ID{3}, []l2.MAC{{0x02, 0, 0, 0, 0, 1}}))
	f.Add(AppendLeafAdvert(nil, nid.ID{3}, nil))
	f.Add([]byte{0x12, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		frb, err := Parse(b)
		if err != nil {
			return
		}
		switch frb.Kind {
		case Broadcast, Transit:
			if len(frb.Frame) < l2.EthernetHeaderLen {
				t.Fatalf("accepted a %d-byte frame", len(frb.Frame))
			}
		case LeafAdvert:
			if frb.NumLeaves() > MaxLeaves {
				t.Fatalf("accepted %d leaves", frb.NumLeaves())
			}
		default:
			t.Fatalf("accepted kind %v", frb.Kind)
		}
		if again := reencode(frb); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %+v gave %x, parsed from %x", frb, again, b)
		}
	})
}

func BenchmarkParseBroadcast(b *testing.B) {
	msg := AppendBroadcast(nil, Broadcast, nid.ID{1}, nid.ID{2}, 4, make([]byte, 1400-BroadcastHeaderLen))
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, err := Parse(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseLeafAdvert(b *testing.B) {
	leaves := make([]l2.MAC, MaxLeaves)
	for i := range leaves {
		leaves[i] = l2.MAC{0x02, 0, 0, 0, 0, byte(i)}
	}
	msg := AppendLeafAdvert(nil, nid.ID{1}, leaves)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(msg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBroadcast(b *testing.B) {
	frame := make([]byte, Broadcast, 1400-BroadcastHeaderLen)
	buf := make([]byte, 0, 1400)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBroadcast(buf[:0], Broadcast, nid.ID{1}, nid.ID{2}, 4, frame)
	}
}
