package l2

import (
	"bytes"
	"errors"
	"testing"
)

func TestParseEthernet(t *testing.T) {
	untagged := []byte{
		1, 2, 3, 4, 5, 6, // dst
		7, 8, 9, 10, 11, 12, // src
		0x86, 0xdd, 0xaa,
	}
	e, err := ParseEthernet(untagged)
	want := Ethernet{Dst: MAC{1, 2, 3, 4, 5, 6}, Src: MAC{7, 8, 9, 10, 11, 12}, EtherType: EtherTypeIPv6, PayloadOffset: 14}
	if err != nil || e != want {
		t.Fatalf("untagged: %+v, %v; want %+v", e, err, want)
	}

	tagged := []byte{
		1, 2, 3, 4, 5, 6,
		7, 8, 9, 10, 11, 12,
		0x81, 0x00, 0xa0, 0x2a, // priority 5, VLAN 42
		0x08, 0x06,
	}
	e, err = ParseEthernet(tagged)
	want = Ethernet{Dst: MAC{1, 2, 3, 4, 5, 6}, Src: MAC{7, 8, 9, 10, 11, 12}, Tagged: true, VLANTag: 0xa02a, EtherType: EtherTypeARP, PayloadOffset: 18}
	if err != nil || e != want {
		t.Fatalf("tagged: %+v, %v; want %+v", e, err, want)
	}
	if e.VLANID() != 42 {
		t.Fatalf("VLAN ID %d, want 42", e.VLANID())
	}
	if got := e.AppendHeader([]byte{0xee}); !bytes.Equal(got, append([]byte{0xee}, tagged...)) {
		t.Fatalf("AppendHeader: %x", got)
	}

	for _, short := range [][]byte{nil, untagged[:13], tagged[:17]} {
		if _, err := ParseEthernet(short); err == nil {
			t.Errorf("%d-byte frame accepted", len(short))
		}
	}
	if _, err := ParseEthernet(tagged[:17]); !errors.Is(err, errShortVLAN) {
		t.Errorf("truncated tag: %v", err)
	}
}

func FuzzParseEthernet(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0x45})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x00, 0x07, 0x86, 0xdd})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, frame []byte) {
		e, err := ParseEthernet(frame)
		if err != nil {
			return
		}
		if e.PayloadOffset > len(frame) {
			t.Fatalf("payload offset %d beyond %d-byte frame", e.PayloadOffset, len(frame))
		}
		if header := e.AppendHeader(nil); !bytes.Equal(header, frame[:e.PayloadOffset]) {
			t.Fatalf("header %x rebuilt as %x", frame[:e.PayloadOffset], header)
		}
	})
}
