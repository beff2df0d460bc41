// Package nid defines burrow node IDs: 128-bit positions on the overlay ring,
// the NIDs of the EdgeVPN seed's Symphony ring (section 3.2.3, Fig. 2),
// derived from a hash of the node's static public key so that they spread
// evenly and cannot be chosen.
package nid

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"slices"
)

// Size is the length of an ID in bytes.
const Size = 16

// ID is a node's position on the ring, read as a big-endian 128-bit integer.
type ID [Size]byte

// FromPublicKey derives the ID of the node owning the X25519 public key.
func FromPublicKey(pub [32]byte) ID {
	sum := sha256.Sum256(append([]byte("burrow node id v1\x00"), pub[:]...))
	var id ID
	copy(id[:], sum[:Size])
	return id
}

// Parse reads the 32-digit hex form written by String.
func Parse(s string) (ID, error) {
	var id ID
	if len(s) != 2*Size {
		return id, errors.New("nid: want 32 hex digits")
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, errors.New("nid: not hex")
	}
	return id, nil
}

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Short is the first 8 hex digits, for logs and tables.
func (id ID) Short() string { return hex.EncodeToString(id[:4]) }

// Uint128 returns the ID as (high, low) 64-bit halves.
func (id ID) Uint128() (hi, lo uint64) {
	return binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])
}

// FromUint128 builds an ID from its 64-bit halves.
func FromUint128(hi, lo uint64) ID {
	var id ID
	binary.BigEndian.PutUint64(id[:8], hi)
	binary.BigEndian.PutUint64(id[8:], lo)
	return id
}

// Compare orders IDs as integers: -1, 0 or +1.
func (id ID) Compare(other ID) int {
	ah, al := id.Uint128()
	bh, bl := other.Uint128()
	switch {
	case ah < bh || (ah == bh && al < bl):
		return -1
	case ah == bh && al == bl:
		return 0
	}
	return 1
}

// Distance is the clockwise distance from id to other on the ring
// (other - id mod 2^128); zero when they are equal.
func (id ID) Distance(other ID) ID {
	ah, al := id.Uint128()
	bh, bl := other.Uint128()
	lo, borrow := bits.Sub64(bl, al, 0)
	hi, _ := bits.Sub64(bh, ah, borrow)
	return FromUint128(hi, lo)
}

// Gap is the distance between id and other the short way round the ring,
// in either direction; zero when they are equal.
func (id ID) Gap(other ID) ID {
	cw, ccw := id.Distance(other), other.Distance(id)
	if cw.Compare(ccw) <= 0 {
		return cw
	}
	return ccw
}

// Add returns id + delta mod 2^128.
func (id ID) Add(delta ID) ID {
	ah, al := id.Uint128()
	bh, bl := delta.Uint128()
	lo, carry := bits.Add64(al, bl, 0)
	hi, _ := bits.Add64(ah, bh, carry)
	return FromUint128(hi, lo)
}

// InOpen reports whether x lies strictly inside the clockwise interval
// (from, to). When from == to the interval is the whole ring but from.
func InOpen(x, from, to ID) bool {
	if x == from {
		return false
	}
	if from == to {
		return true
	}
	return from.Distance(x).Compare(from.Distance(to)) < 0
}

// Fraction returns the clockwise distance as a fraction of the ring in [0, 1).
func (id ID) Fraction() float64 {
	hi, lo := id.Uint128()
	return (float64(hi) + float64(lo)/(1<<64)) / (1 << 64)
}

// FromFraction returns the ID at fraction f of the ring, f in [0, 1).
func FromFraction(f float64) ID {
	if f <= 0 {
		return ID{}
	}
	if f >= 1 {
		return FromUint128(^uint64(0), ^uint64(0))
	}
	x := f * (1 << 64)
	hi := uint64(x)
	lo := uint64((x - float64(hi)) * (1 << 64))
	return FromUint128(hi, lo)
}

// SortedKeys returns the keys of m in ascending order. The core iterates
// maps through it wherever the order shows in its output, so that a run is
// reproducible from its seed.
func SortedKeys[V any](m map[ID]V) []ID {
	return AppendSortedKeys(make([]ID, 0, len(m)), m)
}

// AppendSortedKeys appends the keys of m to dst in ascending order, for
// callers that reuse a slice rather than allocate one per call.
func AppendSortedKeys[V any](dst []ID, m map[ID]V) []ID {
	n := len(dst)
	for k := range m {
		dst = append(dst, k)
	}
	Sort(dst[n:])
	return dst
}

// Sort sorts ids in ascending order. The core sorts the keys of its maps
// after most events, a few dozen at most: an insertion sort comparing the
// IDs' halves in place is several times faster there than SortFunc.
func Sort(ids []ID) {
	if len(ids) > 32 {
		slices.SortFunc(ids, ID.Compare)
		return
	}
	for i := 1; i < len(ids); i++ {
		x := ids[i]
		xh, xl := x.Uint128()
		j := i
		for ; j > 0; j-- {
			if h, l := ids[j-1].Uint128(); h < xh || h == xh && l <= xl {
				break
			}
			ids[j] = ids[j-1]
		}
		ids[j] = x
	}
}
