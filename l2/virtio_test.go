package l2

import (
	"bytes"
	"testing"
)

func TestVirtioNetHdrLittleEndianLayout(t *testing.T) {
	h := VirtioNetHdr{
		Flags:      VirtioNetHdrNeedsCsum,
		GSOType:    VirtioNetHdrGSOTCPv4 | VirtioNetHdrGSOECN,
		HdrLen:     0x0142,
		GSOSize:    0x05a8,
		CsumStart:  0x0022,
		CsumOffset: 0x0010,
	}
	wire := []byte{0x01, 0x81, 0x42, 0x01, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00}
	b := make([]byte, VirtioNetHdrLen)
	h.Encode(b)
	if !bytes.Equal(b, wire) {
		t.Fatalf("Encode: %x, want %x", b, wire)
	}
	var back VirtioNetHdr
	if err := back.Decode(append(wire, 0xff)); err != nil || back != h {
		t.Fatalf("Decode: %+v, %v", back, err)
	}
}

func TestVirtioNetHdrDecodeRejects(t *testing.T) {
	for _, b := range [][]byte{
		{1, 1, 0, 0, 0, 0, 0, 0, 0},           // short
		{4, 0, 0, 0, 0, 0, 0, 0, 0, 0},        // unknown flag
		{0, 2, 0, 0, 0, 0, 0, 0, 0, 0},        // unknown GSO type
		{0, 6, 0, 0, 0, 0, 0, 0, 0, 0},        // unknown GSO type
		{0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0},     // ECN without a type
		{0, 0x40 | 1, 0, 0, 0, 0, 0, 0, 0, 0}, // unknown bit
	} {
		var h VirtioNetHdr
		if err := h.Decode(b); err == nil {
			t.Errorf("%x accepted as %+v", b, h)
		}
	}
}

func TestOffloadValidate(t *testing.T) {
	o := Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16}
	if o.Validate(52) != nil || o.Validate(51) == nil {
		t.Fatal("checksum field bounds not checked")
	}
	if (Offload{CsumStart: 1000}).Validate(10) != nil {
		t.Fatal("offsets without NeedsCsum must not matter")
	}
}

func TestOffloadVirtioNetHdr(t *testing.T) {
	if h := (Offload{}).VirtioNetHdr(); h != (VirtioNetHdr{}) {
		t.Fatalf("no offload gave %+v", h)
	}
	want := VirtioNetHdr{Flags: VirtioNetHdrNeedsCsum, HdrLen: 52, CsumStart: 34, CsumOffset: 16}
	if h := (Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16}).VirtioNetHdr(); h != want {
		t.Fatalf("got %+v, want %+v", h, want)
	}
}
