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
	for _, off := range []l2.Offload{{}, {NeedsCsum: true, CsumStart: 34, CsumOffset: 16}} {
		b := make([]byte, FrameHeaderLen, FrameHeaderLen+len(eth))
		PutFrameHeader(b, off)
		b = append(b, eth...)
		got, frame, err := ParseFrame(b)
		if err != nil || got != off || len(frame) != len(eth) {
			t.Fatalf("ParseFrame(%+v) = %+v, %d bytes, %v", off, got, len(frame), err)
		}
	}
	bad := make([]byte, FrameHeaderLen+60)
	PutFrameHeader(bad, l2.Offload{NeedsCsum: true, CsumStart: 50, CsumOffset: 10})
	if _, _, err := ParseFrame(bad); err == nil {
		t.Fatal("checksum offset outside the frame accepted")
	}
}

func FuzzParseHandshake(f *testing.F) {
	f.Add(AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeInit, Sender: 1}, []byte{1, 2, 3}))
	f.Add(AppendHandshake(nil, HandshakeHeader{Type: TypeHandshakeFinish, Sender: 1, Receiver: 2}, nil))
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
	f.Fuzz(func(t *testing.T, b []byte) {
		off, frame, err := ParseFrame(b)
		if err != nil {
			return
		}
		if off.NeedsCsum && int(off.CsumStart)+int(off.CsumOffset)+2 > len(frame) {
			t.Fatal("accepted a checksum field outside the frame")
		}
	})
}
