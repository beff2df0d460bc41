package identity

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"burrow/nid"
)

const (
	publicationVersion                 = 1
	publicationSigningPrefix           = "burrow publication v1\x00"
	publicationPEMType                 = "BURROW PUBLICATION"
	publicationRevocationVersion       = 1
	publicationRevocationSigningPrefix = "burrow publication revocation v1\x00"
	publicationRevocationPEMType       = "BURROW PUBLICATION REVOCATION"
	// maxAddrPortLen is the longest text of an address:port,
	// "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535".
	maxAddrPortLen = 47
)

// SerialSize is the length of a publication's serial number.
const SerialSize = 16

var (
	// ErrNotThisGateway: the publication names another member as its
	// gateway.
	ErrNotThisGateway = errors.New("identity: publication is for another gateway")
	// ErrPublicationExpired: the publication's time is up.
	ErrPublicationExpired = errors.New("identity: publication expired")
)

// MaxPublicationSize is the longest encoding of a publication.
const MaxPublicationSize = 1 + IssuerSize + (1 + MaxNetworkNameLen) + SerialSize +
	2*(nid.Size+1+MaxNodeNameLen) + 2*(1+maxAddrPortLen) + 8 + 8 + ed25519.SignatureSize

// MaxPublicationRevocationSize is the longest encoding of a publication's
// revocation.
const MaxPublicationRevocationSize = 1 + IssuerSize + (1 + MaxNetworkNameLen) + SerialSize + nid.Size + 8 + ed25519.SignatureSize

// Publication lets non-members reach one TCP service of a member: signed
// by the network's CA, it names the member and the address:port of the
// service inside the network, the member (the gateway) that may expose it,
// and the address:port the gateway listens on for anyone. The gateway
// relays bytes both ways and nothing else, so TLS between the outside
// client and the service passes through it untouched. The CA signs the
// exact destination: a gateway never dials anything a lookup told it.
//
// Encoding (version 1), integers big-endian, strings a length byte then
// bytes: version, issuer (16), network, serial (16), member ID (16),
// member name, service address:port (text), gateway ID (16), gateway name,
// listen address:port (text), issued at and not after (uint64 unix
// seconds), signature (64) over everything before it.
type Publication struct {
	Network     string
	Serial      [SerialSize]byte
	Member      nid.ID
	MemberName  string
	Service     netip.AddrPort
	Gateway     nid.ID
	GatewayName string
	Listen      netip.AddrPort
	IssuedAt    time.Time
	NotAfter    time.Time
	Issuer      [IssuerSize]byte
	Signature   [ed25519.SignatureSize]byte
}

// SerialString is the publication's serial in hex, as status and the CLI
// show it.
func (p *Publication) SerialString() string { return fmt.Sprintf("%x", p.Serial) }

// Marshal encodes a publication that SignPublication or ParsePublication
// returned.
func (p *Publication) Marshal() []byte {
	return append(p.appendBody(make([]byte, 0, MaxPublicationSize)), p.Signature[:]...)
}

func (p *Publication) appendBody(b []byte) []byte {
	b = append(b, publicationVersion)
	b = append(b, p.Issuer[:]...)
	b = appendString(b, p.Network)
	b = append(b, p.Serial[:]...)
	b = append(b, p.Member[:]...)
	b = appendString(b, p.MemberName)
	b = appendString(b, p.Service.String())
	b = append(b, p.Gateway[:]...)
	b = appendString(b, p.GatewayName)
	b = appendString(b, p.Listen.String())
	b = binary.BigEndian.AppendUint64(b, uint64(p.IssuedAt.Unix()))
	return binary.BigEndian.AppendUint64(b, uint64(p.NotAfter.Unix()))
}

// ParsePublication decodes a publication, accepting only what Marshal
// produces. It does not check the signature; see Trust.VerifyPublication.
func ParsePublication(b []byte) (*Publication, error) {
	if len(b) > MaxPublicationSize {
		return nil, fmt.Errorf("%w: publication of %d bytes exceeds %d", ErrMalformed, len(b), MaxPublicationSize)
	}
	d := decoder{rest: b}
	if v := d.uint8(); d.err == nil && v != publicationVersion {
		return nil, fmt.Errorf("%w: unknown publication version %d", ErrMalformed, v)
	}
	p := &Publication{}
	copy(p.Issuer[:], d.bytes(IssuerSize))
	p.Network = d.string()
	copy(p.Serial[:], d.bytes(SerialSize))
	copy(p.Member[:], d.bytes(nid.Size))
	p.MemberName = d.string()
	service := d.string()
	copy(p.Gateway[:], d.bytes(nid.Size))
	p.GatewayName = d.string()
	listen := d.string()
	issued, notAfter := d.uint64(), d.uint64()
	copy(p.Signature[:], d.bytes(ed25519.SignatureSize))
	if err := d.finish(); err != nil {
		return nil, err
	}
	var err error
	if p.Service, err = parseCanonicalAddrPort(service); err != nil {
		return nil, fmt.Errorf("%w: service %v", ErrMalformed, err)
	}
	if p.Listen, err = parseCanonicalAddrPort(listen); err != nil {
		return nil, fmt.Errorf("%w: listen %v", ErrMalformed, err)
	}
	if issued > maxUnixSeconds || notAfter > maxUnixSeconds || issued >= notAfter {
		return nil, fmt.Errorf("%w: publication times %d..%d out of range", ErrMalformed, issued, notAfter)
	}
	p.IssuedAt, p.NotAfter = time.Unix(int64(issued), 0).UTC(), time.Unix(int64(notAfter), 0).UTC()
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return p, nil
}

// parseCanonicalAddrPort accepts an address:port in the one form
// AddrPort.String writes, with an address and a port that can be used.
func parseCanonicalAddrPort(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		return ap, err
	case ap.String() != s:
		return ap, fmt.Errorf("%q is not written as %q", s, ap.String())
	case ap.Port() == 0 || ap.Addr().Zone() != "":
		return ap, fmt.Errorf("%q has no port or has a zone", s)
	}
	return ap, nil
}

// check holds what every publication must be, signed or parsed.
func (p *Publication) check() error {
	if err := CheckNetworkName(p.Network); err != nil {
		return err
	}
	if p.Member == (nid.ID{}) || p.Gateway == (nid.ID{}) {
		return errors.New("a publication names a member and a gateway")
	}
	for _, name := range []string{p.MemberName, p.GatewayName} {
		if err := CheckNodeName(name); err != nil {
			return err
		}
	}
	if p.Listen.Addr().IsUnspecified() || p.Service.Addr().IsUnspecified() {
		return errors.New("a publication names the exact service and listen addresses, not 0.0.0.0 or :: (unspecified)")
	}
	return nil
}

// SignPublication signs p with the CA: it fills in the network, the
// issuer, a random serial from rand and the times (issued now, valid for
// valid).
func SignPublication(ca *CA, p Publication, now time.Time, valid time.Duration, rand io.Reader) (*Publication, error) {
	if len(ca.Private) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("identity: signing a publication needs the CA's private key")
	}
	if valid < time.Second {
		return nil, fmt.Errorf("identity: a publication must be valid for at least a second, not %v", valid)
	}
	p.Network, p.Issuer = ca.Network, ca.Issuer()
	p.IssuedAt = now.Truncate(time.Second).UTC()
	p.NotAfter = p.IssuedAt.Add(valid.Truncate(time.Second))
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if p.NotAfter.Unix() > maxUnixSeconds {
		return nil, fmt.Errorf("identity: a publication valid until %s outlives year 9999", p.NotAfter)
	}
	if _, err := io.ReadFull(rand, p.Serial[:]); err != nil {
		return nil, fmt.Errorf("identity: publication serial: %w", err)
	}
	copy(p.Signature[:], ed25519.Sign(ca.Private, p.appendBody([]byte(publicationSigningPrefix))))
	return &p, nil
}

// VerifyPublication checks that p was signed by a trusted CA for this
// network, names gateway as its gateway, and is valid at now.
func (t *Trust) VerifyPublication(p *Publication, gateway nid.ID, now time.Time) error {
	what := fmt.Sprintf("publication %s of %s (%s)", p.SerialString()[:8], p.Service, p.MemberName)
	ca, err := t.issuedBy(p.Issuer, "the "+what)
	if err != nil {
		return err
	}
	if !ed25519.Verify(ca.Public, p.appendBody([]byte(publicationSigningPrefix)), p.Signature[:]) {
		return fmt.Errorf("%w: %s does not match its signature", ErrBadSignature, what)
	}
	if p.Network != ca.Network {
		return fmt.Errorf("%w: %s is for network %q, not %q", ErrWrongNetwork, what, p.Network, ca.Network)
	}
	if p.Gateway != gateway {
		return fmt.Errorf("%w: %s is to be exposed by gateway %q (%s), and this node is %s", ErrNotThisGateway, what, p.GatewayName, p.Gateway.Short(), gateway.Short())
	}
	if !now.Before(p.NotAfter) {
		return fmt.Errorf("%w: %s expired at %s", ErrPublicationExpired, what, p.NotAfter.Format(time.RFC3339))
	}
	return nil
}

// SavePublication writes p to path (mode 0644: it holds nothing secret),
// replacing any file there atomically.
func SavePublication(path string, p *Publication) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: publicationPEMType, Bytes: p.Marshal()}), 0o644, true)
}

// LoadPublication reads a file written by SavePublication. It does not
// verify it; see Trust.VerifyPublication.
func LoadPublication(path string) (*Publication, error) {
	return loadPEMFile(path, publicationPEMType, ParsePublication)
}

// PublicationRevocation withdraws a publication: signed by the CA, it
// names the publication's serial and its gateway, which closes the
// listener and every connection of the publication and refuses the
// publication from then on.
//
// Encoding (version 1): version, issuer (16), network, serial (16),
// gateway ID (16), revoked at (uint64 unix seconds), signature (64) over
// everything before it.
type PublicationRevocation struct {
	Network   string
	Serial    [SerialSize]byte
	Gateway   nid.ID
	RevokedAt time.Time
	Issuer    [IssuerSize]byte
	Signature [ed25519.SignatureSize]byte
}

// SerialString is the revoked publication's serial in hex.
func (r *PublicationRevocation) SerialString() string { return fmt.Sprintf("%x", r.Serial) }

// Marshal encodes a revocation that SignPublicationRevocation or
// ParsePublicationRevocation returned.
func (r *PublicationRevocation) Marshal() []byte {
	return append(r.appendBody(make([]byte, 0, MaxPublicationRevocationSize)), r.Signature[:]...)
}

func (r *PublicationRevocation) appendBody(b []byte) []byte {
	b = append(b, publicationRevocationVersion)
	b = append(b, r.Issuer[:]...)
	b = appendString(b, r.Network)
	b = append(b, r.Serial[:]...)
	b = append(b, r.Gateway[:]...)
	return binary.BigEndian.AppendUint64(b, uint64(r.RevokedAt.Unix()))
}

// ParsePublicationRevocation decodes a publication's revocation, accepting
// only what Marshal produces. It does not check the signature.
func ParsePublicationRevocation(b []byte) (*PublicationRevocation, error) {
	if len(b) > MaxPublicationRevocationSize {
		return nil, fmt.Errorf("%w: publication revocation of %d bytes exceeds %d", ErrMalformed, len(b), MaxPublicationRevocationSize)
	}
	d := decoder{rest: b}
	if v := d.uint8(); d.err == nil && v != publicationRevocationVersion {
		return nil, fmt.Errorf("%w: unknown publication revocation version %d", ErrMalformed, v)
	}
	r := &PublicationRevocation{}
	copy(r.Issuer[:], d.bytes(IssuerSize))
	r.Network = d.string()
	copy(r.Serial[:], d.bytes(SerialSize))
	copy(r.Gateway[:], d.bytes(nid.Size))
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
	if r.Gateway == (nid.ID{}) {
		return nil, fmt.Errorf("%w: publication revocation names no gateway", ErrMalformed)
	}
	return r, nil
}

// SignPublicationRevocation revokes publication p at revokedAt.
func SignPublicationRevocation(ca *CA, p *Publication, revokedAt time.Time) (*PublicationRevocation, error) {
	if len(ca.Private) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("identity: signing a revocation needs the CA's private key")
	}
	if p.Network != ca.Network {
		return nil, fmt.Errorf("identity: the publication is of network %q, the CA of %q", p.Network, ca.Network)
	}
	r := &PublicationRevocation{Network: ca.Network, Serial: p.Serial, Gateway: p.Gateway, RevokedAt: revokedAt.Truncate(time.Second).UTC(), Issuer: ca.Issuer()}
	copy(r.Signature[:], ed25519.Sign(ca.Private, r.appendBody([]byte(publicationRevocationSigningPrefix))))
	return r, nil
}

// VerifyPublicationRevocation checks that r was signed by a trusted CA
// for this network.
func (t *Trust) VerifyPublicationRevocation(r *PublicationRevocation) error {
	what := "the revocation of publication " + r.SerialString()[:8]
	ca, err := t.issuedBy(r.Issuer, what)
	if err != nil {
		return err
	}
	if !ed25519.Verify(ca.Public, r.appendBody([]byte(publicationRevocationSigningPrefix)), r.Signature[:]) {
		return fmt.Errorf("%w: %s does not match its signature", ErrBadSignature, what)
	}
	if r.Network != ca.Network {
		return fmt.Errorf("%w: %s is for network %q, not %q", ErrWrongNetwork, what, r.Network, ca.Network)
	}
	return nil
}

// SavePublicationRevocation writes r to path, replacing any file there
// atomically.
func SavePublicationRevocation(path string, r *PublicationRevocation) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: publicationRevocationPEMType, Bytes: r.Marshal()}), 0o644, true)
}

// LoadPublicationRevocation reads a file written by
// SavePublicationRevocation. It does not verify it.
func LoadPublicationRevocation(path string) (*PublicationRevocation, error) {
	return loadPEMFile(path, publicationRevocationPEMType, ParsePublicationRevocation)
}
