// Package xeddsa signs with an X25519 key, by the XEdDSA scheme of the
// Signal specification ("The XEdDSA and VXEdDSA Signature Schemes", Trevor
// Perrin, 2016): a node proves what it wrote with the key its certificate
// names, and needs no second key. A signature verifies as Ed25519 under
// the Edwards form of the public key with its sign bit clear.
package xeddsa

import (
	"crypto/ed25519"
	"crypto/sha512"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// SignatureSize is the length of a signature.
const SignatureSize = ed25519.SignatureSize

// hash1Prefix is XEdDSA's domain separation for the nonce hash: 2^256−2 as
// 32 little-endian bytes.
var hash1Prefix = func() [32]byte {
	var p [32]byte
	for i := range p {
		p[i] = 0xff
	}
	p[0] = 0xfe
	return p
}()

// Sign signs msg with the X25519 private key (clamped or not: it is
// clamped here as X25519 does). random must be 64 fresh random bytes; they
// only harden the nonce, which depends on the private key and msg already.
func Sign(private [32]byte, msg []byte, random [64]byte) [SignatureSize]byte {
	scalar, err := edwards25519.NewScalar().SetBytesWithClamping(private[:])
	if err != nil {
		panic(err) // 32 bytes always clamp
	}
	public := new(edwards25519.Point).ScalarBaseMult(scalar).Bytes()
	if public[31]&0x80 != 0 {
		// The Montgomery key stands for both ±point; the Edwards form with
		// sign 0 is the one verifiers use, so sign with its scalar.
		scalar.Negate(scalar)
		public[31] &= 0x7f
	}
	h := sha512.New()
	h.Write(hash1Prefix[:])
	h.Write(scalar.Bytes())
	h.Write(msg)
	h.Write(random[:])
	nonce, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	r := new(edwards25519.Point).ScalarBaseMult(nonce).Bytes()
	h.Reset()
	h.Write(r)
	h.Write(public)
	h.Write(msg)
	challenge, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	s := edwards25519.NewScalar().MultiplyAdd(challenge, scalar, nonce)
	var sig [SignatureSize]byte
	copy(sig[:32], r)
	copy(sig[32:], s.Bytes())
	return sig
}

// Verify reports whether sig is the signature of msg by the holder of the
// X25519 public key.
func Verify(public [32]byte, msg []byte, sig [SignatureSize]byte) bool {
	edwards, ok := edwardsFromMontgomery(public)
	return ok && ed25519.Verify(edwards[:], msg, sig[:])
}

// edwardsFromMontgomery converts a Montgomery u-coordinate to the Edwards
// y-coordinate (u−1)/(u+1) with sign bit 0. Non-canonical encodings and
// u = −1, which has no Edwards form, are refused.
func edwardsFromMontgomery(u [32]byte) (out [32]byte, ok bool) {
	if u[31]&0x80 != 0 {
		return out, false
	}
	var x field.Element
	if _, err := x.SetBytes(u[:]); err != nil || [32]byte(x.Bytes()) != u {
		return out, false
	}
	one := new(field.Element).One()
	var num, den field.Element
	num.Subtract(&x, one)
	den.Add(&x, one)
	if den.Equal(new(field.Element)) == 1 {
		return out, false
	}
	var y field.Element
	y.Multiply(&num, den.Invert(&den))
	copy(out[:], y.Bytes())
	return out, true
}
