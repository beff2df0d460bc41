package identity

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"time"

	"burrow/nid"
)

const (
	revocationVersion       = 1
	revocationSigningPrefix = "burrow revocation v1\x00"
	revocationPEMType       = "BURROW REVOCATION"
)

// MaxRevocationSize is the longest encoding of a revocation; it fits one
// datagram with room to spare.
const MaxRevocationSize = 1 + IssuerSize + (1 + MaxNetworkNameLen) + nid.Size + (1 + MaxNodeNameLen) + 8 + ed25519.SignatureSize

// Revocation cuts a member off: signed by the network's CA, it names the
// node (by its ID, the hash of its key) whose certificates no member may
// accept any more. It is final: a revoked key stays revoked, and the node
// needs a new key to come back.
//
// Encoding (version 1), integers big-endian, strings a length byte then
// bytes: version, issuer (16), network, node ID (16), the node's name (for
// people; it decides nothing), revoked at (uint64 unix seconds),
// signature (64) over everything before it.
type Revocation struct {
	Network   string
	Node      nid.ID
	Name      string
	RevokedAt time.Time
	Issuer    [IssuerSize]byte
	Signature [ed25519.SignatureSize]byte
}

// Marshal encodes a revocation that SignRevocation or ParseRevocation
// returned.
func (r *Revocation) Marshal() []byte {
	return append(r.appendBody(make([]byte, 0, MaxRevocationSize)), r.Signature[:]...)
}

func (r *Revocation) appendBody(b []byte) []byte {
	b = append(b, revocationVersion)
	b = append(b, r.Issuer[:]...)
	b = appendString(b, r.Network)
	b = append(b, r.Node[:]...)
	b = appendString(b, r.Name)
	return binary.BigEndian.AppendUint64(b, uint64(r.RevokedAt.Unix()))
}

// ParseRevocation decodes a revocation, accepting only what Marshal
// produces. It does not check the signature; see CA.VerifyRevocation.
func ParseRevocation(b []byte) (*Revocation, error) {
	if len(b) > MaxRevocationSize {
		return nil, fmt.Errorf("%w: revocation of %d bytes exceeds %d", ErrMalformed, len(b), MaxRevocationSize)
	}
	d := decoder{rest: b}
	if v := d.uint8(); d.err == nil && v != revocationVersion {
		return nil, fmt.Errorf("%w: unknown revocation version %d", ErrMalformed, v)
	}
	r := &Revocation{}
	copy(r.Issuer[:], d.bytes(IssuerSize))
	r.Network = d.string()
	copy(r.Node[:], d.bytes(nid.Size))
	r.Name = d.string()
	at := d.uint64()
	copy(r.Signature[:], d.bytes(ed25519.SignatureSize))
	if err := d.finish(); err != nil {
		return nil, err
	}
	if at > maxUnixSeconds {
		return nil, fmt.Errorf("%w: revocation time %d out of range", ErrMalformed, at)
	}
	r.RevokedAt = time.Unix(int64(at), 0).UTC()
	if err := CheckNetworkName(r.Network); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if r.Name != "" {
		if err := CheckNodeName(r.Name); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	if r.Node == (nid.ID{}) {
		return nil, fmt.Errorf("%w: revocation names no node", ErrMalformed)
	}
	return r, nil
}

// SignRevocation revokes node (named name, for people) at revokedAt.
func SignRevocation(ca *CA, node nid.ID, name string, revokedAt time.Time) (*Revocation, error) {
	if len(ca.Private) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("identity: signing a revocation needs the CA's private key")
	}
	if node == (nid.ID{}) {
		return nil, fmt.Errorf("identity: a revocation must name a node")
	}
	if name != "" {
		if err := CheckNodeName(name); err != nil {
			return nil, fmt.Errorf("identity: %w", err)
		}
	}
	r := &Revocation{Network: ca.Network, Node: node, Name: name, RevokedAt: revokedAt.Truncate(time.Second).UTC(), Issuer: ca.Issuer()}
	copy(r.Signature[:], ed25519.Sign(ca.Private, r.appendBody([]byte(revocationSigningPrefix))))
	return r, nil
}

// VerifyRevocation checks that r was signed by this CA for its network.
func (ca *CA) VerifyRevocation(r *Revocation) error {
	if r.Issuer != ca.Issuer() {
		return fmt.Errorf("%w: revocation of %s was issued by CA %s, not by %s", ErrUnknownIssuer, r.Node.Short(), fingerprint(r.Issuer), ca.Fingerprint())
	}
	if len(ca.Public) != ed25519.PublicKeySize || !ed25519.Verify(ca.Public, r.appendBody([]byte(revocationSigningPrefix)), r.Signature[:]) {
		return fmt.Errorf("%w: revocation of %s does not match its signature", ErrBadSignature, r.Node.Short())
	}
	if r.Network != ca.Network {
		return fmt.Errorf("%w: revocation of %s is for network %q, not %q", ErrWrongNetwork, r.Node.Short(), r.Network, ca.Network)
	}
	return nil
}

// SaveRevocation writes r to path (mode 0644: a revocation is public),
// replacing any file there atomically.
func SaveRevocation(path string, r *Revocation) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: revocationPEMType, Bytes: r.Marshal()}), 0o644, true)
}

// LoadRevocation reads a revocation file written by SaveRevocation. It
// does not verify it; see CA.VerifyRevocation.
func LoadRevocation(path string) (*Revocation, error) {
	return loadPEMFile(path, revocationPEMType, ParseRevocation)
}
