package identity

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

const (
	caKeyPEMType    = "BURROW CA KEY"
	caCertPEMType   = "BURROW CA"
	caCertVersion   = 1
	caSigningPrefix = "burrow ca v1\x00"
)

// CA is a network's certificate authority. Nodes hold only the public half
// (Private nil); the private key stays wherever certificates are signed.
type CA struct {
	Network string
	Public  ed25519.PublicKey
	Private ed25519.PrivateKey
}

// NewCA creates the CA of a new network with a key drawn from rand.
func NewCA(network string, rand io.Reader) (*CA, error) {
	if err := CheckNetworkName(network); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, fmt.Errorf("identity: generating CA key: %w", err)
	}
	private := ed25519.NewKeyFromSeed(seed)
	return &CA{Network: network, Public: private.Public().(ed25519.PublicKey), Private: private}, nil
}

// Issuer identifies the CA inside certificates: the first 16 bytes of the
// SHA-256 of its public key.
func (ca *CA) Issuer() [IssuerSize]byte {
	sum := sha256.Sum256(ca.Public)
	return [IssuerSize]byte(sum[:IssuerSize])
}

// Fingerprint is a short hex form of Issuer for people to compare.
func (ca *CA) Fingerprint() string { return fingerprint(ca.Issuer()) }

// Verify checks that cert was issued by this CA for its network and is
// valid at now.
func (ca *CA) Verify(cert *Certificate, now time.Time) error {
	if cert == nil {
		return fmt.Errorf("%w: no certificate", ErrMalformed)
	}
	if len(ca.Public) != ed25519.PublicKeySize {
		return fmt.Errorf("identity: CA public key has %d bytes, want %d", len(ca.Public), ed25519.PublicKeySize)
	}
	if cert.Issuer != ca.Issuer() {
		return fmt.Errorf("%w: certificate of %q was issued by CA %s, not by %s",
			ErrUnknownIssuer, cert.Name, cert.IssuerFingerprint(), ca.Fingerprint())
	}
	if !ed25519.Verify(ca.Public, cert.signedMessage(), cert.Signature[:]) {
		return fmt.Errorf("%w: certificate of %q does not match its signature", ErrBadSignature, cert.Name)
	}
	if cert.Network != ca.Network {
		return fmt.Errorf("%w: certificate of %q is for network %q, not %q", ErrWrongNetwork, cert.Name, cert.Network, ca.Network)
	}
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("%w: certificate of %q is valid from %s", ErrNotYetValid, cert.Name, cert.NotBefore.Format(time.RFC3339))
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("%w: certificate of %q expired at %s", ErrExpired, cert.Name, cert.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// MarshalPublic encodes the CA certificate that nodes load: the network name
// and public key, signed by the CA itself so that corruption shows. It needs
// the private key.
func (ca *CA) MarshalPublic() ([]byte, error) {
	if len(ca.Private) != ed25519.PrivateKeySize {
		return nil, errors.New("identity: encoding the CA certificate needs the CA private key")
	}
	body := appendCABody(nil, ca.Network, ca.Public)
	signature := ed25519.Sign(ca.Private, append([]byte(caSigningPrefix), body...))
	return pem.EncodeToMemory(&pem.Block{Type: caCertPEMType, Bytes: append(body, signature...)}), nil
}

// ParseCAPublic decodes a CA certificate written by MarshalPublic and checks
// its self-signature. The result has no private key.
func ParseCAPublic(data []byte) (*CA, error) {
	raw, err := decodePEM(data, caCertPEMType)
	if err != nil {
		return nil, err
	}
	return parseCABody(raw)
}

// appendCABody appends the self-signed part of a CA certificate: version,
// network (length byte then bytes) and the 32-byte public key.
func appendCABody(b []byte, network string, public ed25519.PublicKey) []byte {
	b = append(b, caCertVersion)
	b = appendString(b, network)
	return append(b, public...)
}

func parseCABody(raw []byte) (*CA, error) {
	d := decoder{rest: raw}
	if v := d.uint8(); d.err == nil && v != caCertVersion {
		return nil, fmt.Errorf("%w: unknown CA certificate version %d", ErrMalformed, v)
	}
	network := d.string()
	public := slices.Clone(d.bytes(ed25519.PublicKeySize))
	signature := d.bytes(ed25519.SignatureSize)
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := CheckNetworkName(network); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	body := raw[:len(raw)-ed25519.SignatureSize]
	if !ed25519.Verify(public, append([]byte(caSigningPrefix), body...), signature) {
		return nil, fmt.Errorf("%w: CA certificate does not match its self-signature", ErrBadSignature)
	}
	return &CA{Network: network, Public: public}, nil
}

func encodeCAKey(private ed25519.PrivateKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: caKeyPEMType, Bytes: private.Seed()})
}

func decodeCAKey(data []byte) (ed25519.PrivateKey, error) {
	seed, err := decodePEM(data, caKeyPEMType)
	if err != nil {
		return nil, err
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: CA key has %d bytes, want %d", ErrMalformed, len(seed), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
