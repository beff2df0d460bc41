package sim

import (
	"crypto/sha256"
	"errors"
	"io"

	"github.com/flynn/noise"
)

// simDH stands in for X25519 in the simulated handshakes, which took a
// quarter of the simulator's time. It is no secret at all — a shared
// value anyone can compute from the two public keys — but it agrees on
// both ends like a Diffie-Hellman function, draws the same 32 random bytes
// per ephemeral key, and keeps every node's real static key and so its ID:
// a run with it takes the same course as one with X25519.
//
// A private key maps to its public key through statics for the nodes'
// static keys (their real X25519 pairs) and by flipping every bit for
// ephemeral ones.
type simDH struct {
	statics map[[32]byte][32]byte
}

func (d *simDH) GenerateKeypair(rng io.Reader) (noise.DHKey, error) {
	var priv [32]byte
	if _, err := io.ReadFull(rng, priv[:]); err != nil {
		return noise.DHKey{}, err
	}
	pub := flipped(priv)
	return noise.DHKey{Private: priv[:], Public: pub[:]}, nil
}

func (d *simDH) DH(privkey, pubkey []byte) ([]byte, error) {
	if len(privkey) != 32 || len(pubkey) != 32 {
		return nil, errors.New("sim: DH keys must be 32 bytes")
	}
	priv := [32]byte(privkey)
	own, static := d.statics[priv]
	if !static {
		own = flipped(priv)
	}
	lo, hi := own[:], pubkey
	if string(lo) > string(hi) {
		lo, hi = hi, lo
	}
	h := sha256.New()
	h.Write(lo)
	h.Write(hi)
	return h.Sum(nil), nil
}

func (d *simDH) DHLen() int     { return 32 }
func (d *simDH) DHName() string { return "sim" }

func flipped(k [32]byte) [32]byte {
	for i := range k {
		k[i] ^= 0xff
	}
	return k
}
