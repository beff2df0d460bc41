package xeddsa

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
)

// testKey is an X25519 key pair drawn from a seed, so failures replay.
type testKey struct{ private, public [32]byte }

func newTestKey(t *testing.T, seed byte) testKey {
	t.Helper()
	var k testKey
	rand.NewChaCha8([32]byte{seed}).Read(k.private[:])
	priv, err := ecdh.X25519().NewPrivateKey(k.private[:])
	if err != nil {
		t.Fatal(err)
	}
	copy(k.public[:], priv.PublicKey().Bytes())
	return k
}

func TestNodeKeySignatureVerifies(t *testing.T) {
	signs := map[byte]int{} // both Edwards signs must occur and work
	for seed := range byte(64) {
		key := newTestKey(t, seed)
		scalar, _ := edwards25519.NewScalar().SetBytesWithClamping(key.private[:])
		signs[new(edwards25519.Point).ScalarBaseMult(scalar).Bytes()[31]>>7]++
		msg := []byte("lease 10.0.0.7 for node " + string(key.public[:4]))
		sig := Sign(key.private, msg, [64]byte{seed})
		if !Verify(key.public, msg, sig) {
			t.Fatalf("seed %d: own signature does not verify", seed)
		}
		if Verify(key.public, append(msg, '!'), sig) {
			t.Fatalf("seed %d: signature verifies for another message", seed)
		}
		if Verify(newTestKey(t, seed+100).public, msg, sig) {
			t.Fatalf("seed %d: signature verifies under another key", seed)
		}
		bad := sig
		bad[40] ^= 1
		if Verify(key.public, msg, bad) {
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
		pub, _, err := ed25519.GenerateKey(rand.NewChaCha8([32]byte{seed}))
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
	key := newTestKey(t, 1)
	msg := []byte("m")
	sig := Sign(key.private, msg, [64]byte{})
	minusOne := [32]byte{0xec} // p−1 = 2^255−20
	for i := 1; i < 31; i++ {
		minusOne[i] = 0xff
	}
	minusOne[31] = 0x7f
	nonCanonical := key.public
	nonCanonical[31] |= 0x80
	for name, public := range map[string][32]byte{"u = -1": minusOne, "top bit set": nonCanonical, "p itself": {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}} {
		if Verify(public, msg, sig) {
			t.Errorf("%s: verified", name)
		}
	}
}

// FuzzVerify: any public key, message and signature is checked without a
// panic, and a signature made here verifies under its key only.
func FuzzVerify(f *testing.F) {
	f.Add(make([]byte, 32), []byte("m"), make([]byte, SignatureSize))
	f.Add(bytes.Repeat([]byte{0xff}, 32), []byte{}, bytes.Repeat([]byte{0xff}, SignatureSize))
	f.Fuzz(func(t *testing.T, public, msg, sig []byte) {
		if len(public) != 32 || len(sig) != SignatureSize {
			return
		}
		Verify([32]byte(public), msg, [SignatureSize]byte(sig))
		key := [32]byte(public) // any 32 bytes are an X25519 private key
		own := Sign(key, msg, [64]byte(append(append([]byte{}, sig...), 0)[:64]))
		pub, err := ecdh.X25519().NewPrivateKey(key[:])
		if err != nil {
			t.Fatal(err)
		}
		if !Verify([32]byte(pub.PublicKey().Bytes()), msg, own) {
			t.Fatalf("own signature of %x with key %x does not verify", msg, key)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	var key [32]byte
	msg := make([]byte, 200) // a DHT record's signed content
	for b.Loop() {
		Sign(key, msg, [64]byte{})
	}
}

func BenchmarkVerify(b *testing.B) {
	var key [32]byte
	key[0] = 1
	priv, _ := ecdh.X25519().NewPrivateKey(key[:])
	msg := make([]byte, 200)
	sig := Sign(key, msg, [64]byte{})
	public := [32]byte(priv.PublicKey().Bytes())
	for b.Loop() {
		if !Verify(public, msg, sig) {
			b.Fatal("does not verify")
		}
	}
}
