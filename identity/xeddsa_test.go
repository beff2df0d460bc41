package identity

import (
	"crypto/ed25519"
	"testing"

	"filippo.io/edwards25519"
)

func TestNodeKeySignatureVerifies(t *testing.T) {
	signs := map[byte]int{} // both Edwards signs must occur and work
	for seed := range byte(64) {
		key, err := GenerateNodeKey(seededRand(seed))
		if err != nil {
			t.Fatal(err)
		}
		scalar, _ := edwards25519.NewScalar().SetBytesWithClamping(key.Private[:])
		signs[new(edwards25519.Point).ScalarBaseMult(scalar).Bytes()[31]>>7]++
		msg := []byte("lease 10.0.0.7 for node " + key.ID().String())
		sig := key.Sign(msg, [64]byte{seed})
		if !VerifyNodeSignature(key.Public, msg, sig) {
			t.Fatalf("seed %d: own signature does not verify", seed)
		}
		if VerifyNodeSignature(key.Public, append(msg, '!'), sig) {
			t.Fatalf("seed %d: signature verifies for another message", seed)
		}
		other, _ := GenerateNodeKey(seededRand(seed + 100))
		if VerifyNodeSignature(other.Public, msg, sig) {
			t.Fatalf("seed %d: signature verifies under another key", seed)
		}
		bad := sig
		bad[40] ^= 1
		if VerifyNodeSignature(key.Public, msg, bad) {
			t.Fatalf("seed %d: altered signature verifies", seed)
		}
	}
	if signs[0] == 0 || signs[1] == 0 {
		t.Fatalf("keys covered only one Edwards sign: %v", signs)
	}
}

// The conversion must agree with the library's own Edwards-to-Montgomery
// map, an implementation independent of ours.
func TestEdwardsFromMontgomeryInvertsLibraryMap(t *testing.T) {
	for seed := range byte(32) {
		pub, _, err := ed25519.GenerateKey(seededRand(seed))
		if err != nil {
			t.Fatal(err)
		}
		point, err := new(edwards25519.Point).SetBytes(pub)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := edwardsFromMontgomery([32]byte(point.BytesMontgomery()))
		want := [32]byte(pub)
		want[31] &= 0x7f
		if !ok || got != want {
			t.Fatalf("seed %d: converted %x (ok %v), want %x", seed, got, ok, want)
		}
	}
}

func TestVerifyNodeSignatureRefusesBadKeys(t *testing.T) {
	key, _ := GenerateNodeKey(seededRand(1))
	msg := []byte("m")
	sig := key.Sign(msg, [64]byte{})
	minusOne := [32]byte{0xec} // p−1 = 2^255−20
	for i := 1; i < 31; i++ {
		minusOne[i] = 0xff
	}
	minusOne[31] = 0x7f
	nonCanonical := key.Public
	nonCanonical[31] |= 0x80
	for name, public := range map[string][32]byte{"u = -1": minusOne, "top bit set": nonCanonical, "p itself": {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}} {
		if VerifyNodeSignature(public, msg, sig) {
			t.Errorf("%s: verified", name)
		}
	}
}
