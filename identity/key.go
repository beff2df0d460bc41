package identity

import (
	"crypto/ecdh"
	"encoding/pem"
	"fmt"
	"io"

	"burrow/nid"
)

const nodeKeyPEMType = "BURROW NODE KEY"

// NodeKey is a node's static X25519 key pair; the Noise handshake
// authenticates the node with it and the node's ring ID derives from Public.
type NodeKey struct {
	Private, Public [32]byte
}

// GenerateNodeKey draws a new clamped X25519 key from rand.
func GenerateNodeKey(rand io.Reader) (NodeKey, error) {
	var private [32]byte
	if _, err := io.ReadFull(rand, private[:]); err != nil {
		return NodeKey{}, fmt.Errorf("identity: generating node key: %w", err)
	}
	// RFC 7748 clamping: a multiple of the cofactor 8, with the top bit fixed.
	private[0] &= 248
	private[31] &= 127
	private[31] |= 64
	return nodeKeyFromPrivate(private)
}

func nodeKeyFromPrivate(private [32]byte) (NodeKey, error) {
	key, err := ecdh.X25519().NewPrivateKey(private[:])
	if err != nil {
		return NodeKey{}, fmt.Errorf("%w: node key: %v", ErrMalformed, err)
	}
	k := NodeKey{Private: private}
	copy(k.Public[:], key.PublicKey().Bytes())
	return k, nil
}

// ID is the node's position on the ring.
func (k NodeKey) ID() nid.ID { return nid.FromPublicKey(k.Public) }

func encodeNodeKey(k NodeKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: nodeKeyPEMType, Bytes: k.Private[:]})
}

func decodeNodeKey(data []byte) (NodeKey, error) {
	raw, err := decodePEM(data, nodeKeyPEMType)
	if err != nil {
		return NodeKey{}, err
	}
	if len(raw) != 32 {
		return NodeKey{}, fmt.Errorf("%w: node key has %d bytes, want 32", ErrMalformed, len(raw))
	}
	return nodeKeyFromPrivate([32]byte(raw))
}
