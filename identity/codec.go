package identity

import (
	"encoding/binary"
	"fmt"
)

// decoder reads the binary encodings field by field. The first failure
// sticks, so a caller decodes everything and checks err once.
type decoder struct {
	rest []byte
	err  error
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.rest) < n {
		d.err = fmt.Errorf("%w: truncated", ErrMalformed)
		return nil
	}
	v := d.rest[:n]
	d.rest = d.rest[n:]
	return v
}

func (d *decoder) uint8() uint8 {
	if v := d.bytes(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) uint64() uint64 {
	if v := d.bytes(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// string reads a one-byte length and that many bytes.
func (d *decoder) string() string {
	return string(d.bytes(int(d.uint8())))
}

// finish fails on bytes left over: every encoding has exactly one form.
func (d *decoder) finish() error {
	if d.err == nil && len(d.rest) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.rest))
	}
	return d.err
}

func appendString(b []byte, s string) []byte {
	return append(append(b, byte(len(s))), s...)
}
