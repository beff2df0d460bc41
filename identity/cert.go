package identity

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"burrow/nid"
)

// Errors from parsing and verification. Returned errors wrap one of these
// with detail, so test them with errors.Is.
var (
	ErrMalformed     = errors.New("identity: malformed")
	ErrBadSignature  = errors.New("identity: bad signature")
	ErrUnknownIssuer = errors.New("identity: unknown issuer")
	ErrWrongNetwork  = errors.New("identity: wrong network")
	ErrExpired       = errors.New("identity: certificate expired")
	ErrNotYetValid   = errors.New("identity: certificate not yet valid")
	ErrWrongKey      = errors.New("identity: certificate is for another key")
)

// Certificate limits.
const (
	MaxAddresses = 8
	MaxGroups    = 8

	// MaxCertificateSize is the longest encoding Marshal can produce: every
	// string at its limit and eight IPv6 addresses. A typical certificate
	// (one address, one group, short names) takes about 160 bytes.
	MaxCertificateSize = 1 + IssuerSize + (1 + MaxNetworkNameLen) + (1 + MaxNodeNameLen) + 32 + 8 + 8 +
		1 + MaxAddresses*(1+16+1) + 1 + MaxGroups*(1+MaxGroupNameLen) + ed25519.SignatureSize
)

// IssuerSize is the length of a CA's issuer ID.
const IssuerSize = 16

const (
	certVersion       = 1
	certSigningPrefix = "burrow certificate v1\x00"
	addrTag4          = 4
	addrTag6          = 6
	// maxUnixSeconds is 9999-12-31T23:59:59Z; later times do not survive
	// a round trip through time.Time.
	maxUnixSeconds = 253402300799
)

// Certificate admits the holder of an X25519 key into a network. The CA
// signs every field but the signature.
//
// Encoding (version 1), integers big-endian, strings a length byte then
// bytes: version, issuer (16), network, name, public key (32), not before
// and not after (uint64 unix seconds), address count then each address as
// tag (4 or 6), 4 or 16 address bytes and prefix length, group count then
// each group, signature (64).
type Certificate struct {
	Network   string
	Name      string
	PublicKey [32]byte
	// Addresses are fixed virtual addresses with their subnet's prefix
	// length, such as 10.0.0.1/24.
	Addresses []netip.Prefix
	Groups    []string
	// NotBefore and NotAfter bound the validity, inclusive, at second
	// precision.
	NotBefore, NotAfter time.Time
	// Issuer is the signing CA's issuer ID (see CA.Issuer).
	Issuer    [IssuerSize]byte
	Signature [ed25519.SignatureSize]byte
}

// ID is the ring position of the certificate's holder.
func (c *Certificate) ID() nid.ID { return nid.FromPublicKey(c.PublicKey) }

// IssuerFingerprint is the signing CA's Fingerprint, for comparing by eye.
func (c *Certificate) IssuerFingerprint() string { return fingerprint(c.Issuer) }

// Marshal encodes a valid certificate (one that SignCertificate or
// ParseCertificate returned); for others the result does not parse.
func (c *Certificate) Marshal() []byte {
	return append(c.appendBody(make([]byte, 0, MaxCertificateSize)), c.Signature[:]...)
}

// appendBody appends everything the signature covers.
func (c *Certificate) appendBody(b []byte) []byte {
	b = append(b, certVersion)
	b = append(b, c.Issuer[:]...)
	b = appendString(b, c.Network)
	b = appendString(b, c.Name)
	b = append(b, c.PublicKey[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(c.NotBefore.Unix()))
	b = binary.BigEndian.AppendUint64(b, uint64(c.NotAfter.Unix()))
	b = append(b, byte(len(c.Addresses)))
	for _, p := range c.Addresses {
		if p.Addr().Is4() {
			b = append(b, addrTag4)
		} else {
			b = append(b, addrTag6)
		}
		b = append(b, p.Addr().AsSlice()...)
		b = append(b, byte(p.Bits()))
	}
	b = append(b, byte(len(c.Groups)))
	for _, g := range c.Groups {
		b = appendString(b, g)
	}
	return b
}

func (c *Certificate) signedMessage() []byte {
	return c.appendBody([]byte(certSigningPrefix))
}

// ParseCertificate decodes a certificate, accepting only what Marshal
// produces for a valid certificate. It does not check the signature; see
// CA.Verify.
func ParseCertificate(b []byte) (*Certificate, error) {
	if len(b) > MaxCertificateSize {
		return nil, fmt.Errorf("%w: certificate of %d bytes exceeds %d", ErrMalformed, len(b), MaxCertificateSize)
	}
	d := decoder{rest: b}
	if v := d.uint8(); d.err == nil && v != certVersion {
		return nil, fmt.Errorf("%w: unknown certificate version %d", ErrMalformed, v)
	}
	c := &Certificate{}
	copy(c.Issuer[:], d.bytes(IssuerSize))
	c.Network = d.string()
	c.Name = d.string()
	copy(c.PublicKey[:], d.bytes(32))
	notBefore, notAfter := d.uint64(), d.uint64()
	if notBefore > maxUnixSeconds || notAfter > maxUnixSeconds {
		return nil, fmt.Errorf("%w: validity beyond year 9999", ErrMalformed)
	}
	c.NotBefore = time.Unix(int64(notBefore), 0).UTC()
	c.NotAfter = time.Unix(int64(notAfter), 0).UTC()
	if n := int(d.uint8()); n > MaxAddresses {
		return nil, fmt.Errorf("%w: %d addresses, at most %d allowed", ErrMalformed, n, MaxAddresses)
	} else if n > 0 {
		c.Addresses = make([]netip.Prefix, n)
		for i := range c.Addresses {
			c.Addresses[i] = decodePrefix(&d)
		}
	}
	if n := int(d.uint8()); n > MaxGroups {
		return nil, fmt.Errorf("%w: %d groups, at most %d allowed", ErrMalformed, n, MaxGroups)
	} else if n > 0 {
		c.Groups = make([]string, n)
		for i := range c.Groups {
			c.Groups[i] = d.string()
		}
	}
	copy(c.Signature[:], d.bytes(ed25519.SignatureSize))
	if err := d.finish(); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return c, nil
}

// decodePrefix reads one address; an unknown tag or a prefix length too long
// for the family yields an invalid prefix, which validate rejects.
func decodePrefix(d *decoder) netip.Prefix {
	var size int
	switch tag := d.uint8(); tag {
	case addrTag4:
		size = 4
	case addrTag6:
		size = 16
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: unknown address tag %d", ErrMalformed, tag)
		}
		return netip.Prefix{}
	}
	addr, _ := netip.AddrFromSlice(d.bytes(size))
	return netip.PrefixFrom(addr, int(d.uint8()))
}

// validate checks everything but the issuer and signature.
func (c *Certificate) validate() error {
	if err := CheckNetworkName(c.Network); err != nil {
		return err
	}
	if err := CheckNodeName(c.Name); err != nil {
		return err
	}
	if c.PublicKey == ([32]byte{}) {
		return errors.New("public key is all zeros")
	}
	if len(c.Addresses) > MaxAddresses {
		return fmt.Errorf("%d addresses, at most %d allowed", len(c.Addresses), MaxAddresses)
	}
	for _, p := range c.Addresses {
		if !p.IsValid() {
			return fmt.Errorf("address %s is not a valid address with prefix length", p)
		}
	}
	if len(c.Groups) > MaxGroups {
		return fmt.Errorf("%d groups, at most %d allowed", len(c.Groups), MaxGroups)
	}
	for _, g := range c.Groups {
		if err := CheckGroupName(g); err != nil {
			return err
		}
	}
	notBefore, notAfter := c.NotBefore.Unix(), c.NotAfter.Unix()
	if notBefore < 0 || notAfter > maxUnixSeconds {
		return errors.New("validity must lie between 1970 and 9999")
	}
	if notAfter <= notBefore {
		return fmt.Errorf("not after (%s) must come later than not before (%s)",
			c.NotAfter.UTC().Format(time.RFC3339), c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// SignCertificate issues a certificate from template, whose Network must be
// empty or the CA's. It truncates the validity times to seconds and sets
// Network, Issuer and Signature.
func SignCertificate(ca *CA, template Certificate) (*Certificate, error) {
	if ca == nil || len(ca.Private) != ed25519.PrivateKeySize {
		return nil, errors.New("identity: signing a certificate needs the CA private key")
	}
	c := template
	if c.Network == "" {
		c.Network = ca.Network
	} else if c.Network != ca.Network {
		return nil, fmt.Errorf("identity: cannot sign a certificate for network %q with the CA of network %q", c.Network, ca.Network)
	}
	c.Addresses = slices.Clone(c.Addresses)
	c.Groups = slices.Clone(c.Groups)
	c.NotBefore = time.Unix(c.NotBefore.Unix(), 0).UTC()
	c.NotAfter = time.Unix(c.NotAfter.Unix(), 0).UTC()
	c.Issuer = ca.Issuer()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("identity: cannot sign certificate: %w", err)
	}
	c.Signature = [ed25519.SignatureSize]byte(ed25519.Sign(ca.Private, c.signedMessage()))
	return &c, nil
}

func fingerprint(issuer [IssuerSize]byte) string {
	return hex.EncodeToString(issuer[:8])
}
