package l2

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// OnesComplementSum adds the 16-bit one's complement sum of b (big-endian
// words, an odd last byte padded with zero) to initial and returns it folded
// to 16 bits, not complemented.
func OnesComplementSum(b []byte, initial uint16) uint16 {
	return addSums(bits.ReverseBytes16(sumLittleEndian(b)), initial)
}

// Checksum is the Internet checksum of b on top of initial: the complement of
// OnesComplementSum. A packet whose checksum field is filled in correctly
// sums to zero here.
func Checksum(b []byte, initial uint16) uint16 {
	return ^OnesComplementSum(b, initial)
}

// sumLittleEndian sums b as little-endian words. The one's complement sum of
// byte-swapped words is the byte-swapped sum (RFC 1071), and little-endian
// loads are single instructions on the hosts burrow runs on. Words are
// summed eight bytes at a time with end-around carries: 2^16 ≡ 1 modulo
// 0xffff, so 64-bit lanes fold down to the same 16-bit sum.
func sumLittleEndian(b []byte) uint16 {
	var acc, carry uint64
	for len(b) >= 32 {
		acc, carry = bits.Add64(acc, binary.LittleEndian.Uint64(b[0:8]), carry)
		acc, carry = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:16]), carry)
		acc, carry = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:24]), carry)
		acc, carry = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:32]), carry)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, carry = bits.Add64(acc, binary.LittleEndian.Uint64(b), carry)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, carry = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b)), carry)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, carry = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b)), carry)
		b = b[2:]
	}
	if len(b) == 1 {
		acc, carry = bits.Add64(acc, uint64(b[0]), carry)
	}
	// acc+carry cannot overflow: an all-ones acc with a carry out needs an
	// all-ones acc with a carry in.
	return fold64(acc + carry)
}

func fold64(acc uint64) uint16 {
	s := acc>>32 + acc&0xffffffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	s = s>>16 + s&0xffff
	return uint16(s)
}

func addSums(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s>>16 + s&0xffff)
}

// IPv4HeaderChecksum computes the checksum field of an IPv4 header (all
// IHL*4 bytes, at least 20), ignoring the field's current content.
func IPv4HeaderChecksum(header []byte) uint16 {
	return Checksum(header[12:], OnesComplementSum(header[:10], 0))
}

// PseudoHeaderSum is the one's complement sum of the IPv4 or IPv6 pseudo
// header: src and dst are both 4 or both 16 bytes, l4Len is the length of the
// TCP or UDP header plus payload. Folded and not complemented, it is what the
// L4 checksum field of a "checksum partial" packet holds.
func PseudoHeaderSum(src, dst []byte, proto uint8, l4Len int) uint16 {
	return pseudoHeaderSum(OnesComplementSum(src, OnesComplementSum(dst, 0)), proto, l4Len)
}

// pseudoHeaderSum adds protocol and length to the sum of both addresses.
func pseudoHeaderSum(addrSum uint16, proto uint8, l4Len int) uint16 {
	s := addSums(addrSum, uint16(proto))
	s = addSums(s, uint16(l4Len>>16))
	return addSums(s, uint16(l4Len))
}

var errChecksumBounds = errors.New("l2: checksum field outside the frame")

// CompleteChecksum turns a "checksum partial" frame into one with a full L4
// checksum: it sums frame[csumStart:], which includes the pseudo-header sum
// already in the field, and stores the complement at csumStart+csumOffset.
// Like Linux it writes 0xffff instead of 0, which UDP reads as "no checksum".
func CompleteChecksum(frame []byte, csumStart, csumOffset int) error {
	if csumStart < 0 || csumOffset < 0 || csumStart > len(frame) || csumOffset > len(frame)-csumStart-2 {
		return errChecksumBounds
	}
	field := frame[csumStart+csumOffset:]
	sum := Checksum(frame[csumStart:], 0)
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(field, sum)
	return nil
}
