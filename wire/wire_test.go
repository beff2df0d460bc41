package wire

import (
	"bytes"
	"testing"

	"burrow/l2"
)

func TestHandshakeRoundTrip(t *testing.T) {
	h := HandshakeHeader{Type: TypeHandshakeReply, Sender: 7, Receiver: 9}
	b := AppendHandshake(nil, h, []byte("noise"))
	got, body, err := ParseHandshake(b)
	if err != nil || got != h || string(body) != "noise" {
		t.Fatalf("ParseHandshake = %+v %q %v", got, body, err)
	}
	init := AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeInit, Sender: 1, Receiver: 2}, nil)
	if _, _, err := ParseHandshake(init); err == nil {
		t.Fatal("an init naming a receiver index was accepted")
	}
	cookie := HandshakeHeader{Type: TypeHandshakeCookie, Receiver: 9}
	if got, _, err := ParseHandshake(AppendHandshake(nil, cookie, nil)); err != nil || got != cookie {
		t.Fatalf("a cookie answering initiation 9: %+v, %v", got, err)
	}
	if _, _, err := ParseHandshake(AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeCookie, Sender: 1, Receiver: 9}, nil)); err == nil {
		t.Fatal("a cookie naming a sender index was accepted")
	}
}

func TestTransportHeaderRoundTrip(t *testing.T) {
	b := make([]byte, TransportOverhead+3)
	PutTransportHeader(b, 0xdeadbeef, 1<<40+5)
	idx, ctr, err := ParseTransportHeader(b)
	if err != nil || idx != 0xdeadbeef || ctr != 1<<40+5 {
		t.Fatalf("ParseTransportHeader = %x %d %v", idx, ctr, err)
	}
	if !bytes.Equal(Nonce(b), b[4:16]) || len(AdditionalData(b)) != 4 {
		t.Fatal("nonce/AD must cover the whole header")
	}
	if _, _, err := ParseTransportHeader(b[:TransportOverhead-1]); err == nil {
		t.Fatal("short transport accepted")
	}
}

func TestFrameRoundTrip(t *testing.T) {
	eth := make([]byte, 60)
	for _, source := range [][16]byte{{}, {0xb, 15: 1}} {
		for _, off := range []l2.Offload{{}, {NeedsCsum: true, CsumStart: 34, CsumOffset: 16}} {
			b := AppendFrame(nil, off, source, eth)
			got, err := ParseFrame(b)
			if err != nil || got.Offload != off || got.Source != source || len(got.Ethernet) != len(eth) {
				t.Fatalf("ParseFrame(%+v, %x) = %+v, %v", off, source, got, err)
			}
		}
	}
	bad := make([]byte, FrameHeaderLen+60)
	PutFrameHeader(bad, l2.Offload{NeedsCsum: true, CsumStart: 50, CsumOffset: 10})
	if _, err := ParseFrame(bad); err == nil {
		t.Fatal("checksum offset outside the frame accepted")
	}
	zeroSource := AppendFrame(nil, l2.Offload{}, [16]byte{1}, eth)
	clear(zeroSource[FrameHeaderLen : FrameHeaderLen+SourceLen])
	if _, err := ParseFrame(zeroSource); err == nil {
		t.Fatal("a zero source bridge was accepted")
	}
	short := AppendFrame(nil, l2.Offload{}, [16]byte{1}, eth[:10])
	if _, err := ParseFrame(short); err == nil {
		t.Fatal("a frame with a source bridge but no room for an Ethernet header was accepted")
	}
}

func FuzzParseHandshake(f *testing.F) {
	f.Add(AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeInit, Sender: 1}, []byte{1, 2, 3}))
	f.Add(AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeFinish, Sender: 1, Receiver: 2}, nil))
	f.Add(AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeCookie, Receiver: 2}, make([]byte, 16)))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := ParseHandshake(b)
		if err != nil {
			return
		}
		if again := AppendHandshake(nil, h, body); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x vs %x", again, b)
		}
	})
}

func FuzzParseTransportHeader(f *testing.F) {
	b := make([]byte, TransportOverhead)
	PutTransportHeader(b, 1, 2)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, ctr, err := ParseTransportHeader(b)
		if err != nil {
			return
		}
		again := bytes.Clone(b)
		PutTransportHeader(again, idx, ctr)
		if !bytes.Equal(again, b) {
			t.Fatal("header does not re-encode to itself")
		}
	})
}

func FuzzParseFrame(f *testing.F) {
	b := make([]byte, FrameHeaderLen+60)
	PutFrameHeader(b, l2.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16})
	f.Add(b)
	f.Add(AppendFrame(nil, l2.Offload{}, [16]byte{9}, make([]byte, 60)))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := ParseFrame(b)
		if err != nil {
			return
		}
		if off := got.Offload; off.NeedsCsum && int(off.CsumStart)+int(off.CsumOffset)+2 > len(got.Ethernet) {
			t.Fatal("accepted a checksum field outside the frame")
		}
		if again := AppendFrame(nil, got.Offload, got.Source, got.Ethernet); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x vs %x", again, b)
		}
	})
}

func TestProbeRoundTrip(t *testing.T) {
	for _, reply := range []bool{false, true} {
		b := AppendProbe(nil, reply, -12345678901)
		stamp, err := ParseProbe(b)
		if err != nil || stamp != -12345678901 || (Inner(b[0]) == InnerProbeReply) != reply {
			t.Fatalf("ParseProbe(%x) = %d, %v", b, stamp, err)
		}
	}
	if _, err := ParseProbe(append(AppendProbe(nil, false, 1), 0)); err == nil {
		t.Fatal("a probe with trailing bytes was accepted")
	}
	if _, err := ParseProbe([]byte{byte(InnerFrame), 0, 0, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Fatal("a frame was read as a probe")
	}
}

func TestRoutedRoundTrip(t *testing.T) {
	dest := [16]byte{1, 2, 3, 15: 9}
	b := make([]byte, RoutedHeaderLen+FrameHeaderLen+60)
	for _, onward := range []bool{false, true} {
		want := Routed{Dest: dest, Source: [16]byte{0xa, 15: 0xb}, Onward: onward}
		PutRoutedHeader(b, want)
		PutFrameHeader(b[RoutedHeaderLen:], l2.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16})
		got, inner, err := ParseRouted(b)
		if err != nil || got != want || len(inner) != FrameHeaderLen+60 {
			t.Fatalf("ParseRouted = %+v, %d bytes, %v", got, len(inner), err)
		}
	}
	_, inner, _ := ParseRouted(b)
	if f, err := ParseFrame(inner); err != nil || len(f.Ethernet) != 60 {
		t.Fatalf("the routed frame inside does not parse: %v", err)
	}
	if _, _, err := ParseRouted(b[:RoutedHeaderLen+FrameHeaderLen+13]); err == nil {
		t.Fatal("a routed frame too short for an Ethernet header was accepted")
	}
	b[RoutedHeaderLen] = byte(InnerFlood)
	if _, _, err := ParseRouted(b); err == nil {
		t.Fatal("a routed header around something other than a frame was accepted")
	}
}

func FuzzParseProbe(f *testing.F) {
	f.Add(AppendProbe(nil, false, 1))
	f.Add(AppendProbe(nil, true, -1))
	f.Fuzz(func(t *testing.T, b []byte) {
		stamp, err := ParseProbe(b)
		if err != nil {
			return
		}
		if again := AppendProbe(nil, Inner(b[0]) == InnerProbeReply, stamp); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x vs %x", again, b)
		}
	})
}

func FuzzParseRouted(f *testing.F) {
	b := make([]byte, RoutedHeaderLen+FrameHeaderLen+60)
	PutRoutedHeader(b, Routed{Dest: [16]byte{7}, Source: [16]byte{8}})
	PutFrameHeader(b[RoutedHeaderLen:], l2.Offload{})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, inner, err := ParseRouted(b)
		if err != nil {
			return
		}
		again := bytes.Clone(b)
		PutRoutedHeader(again, r)
		if !bytes.Equal(again, b) || &inner[0] != &b[RoutedHeaderLen] {
			t.Fatal("routed header does not re-encode to itself")
		}
	})
}
