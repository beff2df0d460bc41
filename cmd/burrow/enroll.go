package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"burrow/config"
	"burrow/identity"
)

// Enrollment lets a node join a network without the CA key or the node key
// ever leaving their machines. Three tokens travel by copy and paste:
//
//	invite   CA machine → new node: the CA certificate, the node's name and
//	         addresses, bootstrap contacts and beacons, an expiry and a
//	         random invite ID,
//	         all signed with the CA key so that nothing can be changed on the
//	         way.
//	request  new node → CA machine: the invite as received plus the node's
//	         new public key.
//	cert     CA machine → new node: the certificate the CA signed for that
//	         key, with exactly the name and addresses of the invite.
//
// Each token is the base64url (no padding) of: kind byte, version byte,
// body, and the first 4 bytes of the SHA-256 of everything before them, so
// a token damaged in copying is caught before anything is parsed.
const (
	tokenVersion  = 1
	tokenSumLen   = 4
	kindInvite    = 'I'
	kindRequest   = 'R'
	kindCert      = 'C'
	inviteIDLen   = 16
	inviteSigning = "burrow invite v1\x00"
	// caCertPEMType is how ca.crt wraps the CA certificate that an invite
	// carries bare.
	caCertPEMType = "BURROW CA"
	maxBootstrap  = 16
	maxBeacons    = 8
	// maxWebSocketURL fits a beacon's URL in a token string.
	maxWebSocketURL = 255
)

var tokenKindNames = map[byte]string{kindInvite: "an invite", kindRequest: "a join request", kindCert: "a certificate"}

// invite is what a new node needs to join, as the CA authorized it.
type invite struct {
	// caCert is the raw CA certificate (ca.crt without its PEM wrapping).
	caCert     []byte
	ca         *identity.CA
	id         [inviteIDLen]byte
	name       string
	addresses  []netip.Prefix
	first      contacts
	expires    time.Time
	certValid  time.Duration
	signature  [ed25519.SignatureSize]byte
	signedPart []byte // the bytes the signature covers, after the prefix and issuer
}

// newInvite builds and signs an invite with the CA's private key.
func newInvite(ca *identity.CA, name string, addresses []netip.Prefix, first contacts, expires time.Time, certValid time.Duration) (*invite, error) {
	caPEM, err := ca.MarshalPublic()
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(caPEM)
	inv := &invite{caCert: block.Bytes, ca: ca, name: name, addresses: addresses, first: first,
		expires: expires.Truncate(time.Second), certValid: certValid.Truncate(time.Second)}
	if _, err := rand.Read(inv.id[:]); err != nil {
		return nil, err
	}
	inv.signedPart = inv.appendSigned(nil)
	inv.signature = [ed25519.SignatureSize]byte(ed25519.Sign(ca.Private, inviteMessage(ca, inv.signedPart)))
	return inv, nil
}

// inviteMessage is what the CA signs: a domain prefix, the CA's issuer ID
// and network (so an invite of one network is no invite to another), then
// the invite's fields.
func inviteMessage(ca *identity.CA, signed []byte) []byte {
	issuer := ca.Issuer()
	msg := append([]byte(inviteSigning), issuer[:]...)
	msg = appendTokenString(msg, ca.Network)
	return append(msg, signed...)
}

func (inv *invite) appendSigned(b []byte) []byte {
	b = append(b, inv.id[:]...)
	b = appendTokenString(b, inv.name)
	b = append(b, byte(len(inv.addresses)))
	for _, p := range inv.addresses {
		b = appendAddr(b, p.Addr())
		b = append(b, byte(p.Bits()))
	}
	b = append(b, byte(len(inv.first.bootstrap)))
	for _, ap := range inv.first.bootstrap {
		b = appendAddrPort(b, ap)
	}
	b = append(b, byte(len(inv.first.beacons)))
	for _, bc := range inv.first.beacons {
		b = appendAddrPort(b, bc.Addr)
		b = appendTokenString(b, bc.WebSocket)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(inv.expires.Unix()))
	return binary.BigEndian.AppendUint64(b, uint64(inv.certValid/time.Second))
}

// appendBody appends the whole invite: CA certificate, signed fields and
// signature.
func (inv *invite) appendBody(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(inv.caCert)))
	b = append(b, inv.caCert...)
	b = append(b, inv.signedPart...)
	return append(b, inv.signature[:]...)
}

// verify checks the invite's signature with ca, which must be the CA the
// invite names, and that it has not expired at now.
func (inv *invite) verify(ca *identity.CA, now time.Time) error {
	if ca.Issuer() != inv.ca.Issuer() {
		return fmt.Errorf("the invite was issued by CA %s of network %q, not by this CA %s of network %q",
			inv.ca.Fingerprint(), inv.ca.Network, ca.Fingerprint(), ca.Network)
	}
	if !ed25519.Verify(ca.Public, inviteMessage(ca, inv.signedPart), inv.signature[:]) {
		return errors.New("the invite's signature does not match: it was altered after the CA issued it; ask for a new invite")
	}
	if now.After(inv.expires) {
		return fmt.Errorf("the invite expired at %s; ask the CA for a new one (burrow invite --valid sets its lifetime)", inv.expires.Format(time.RFC3339))
	}
	return nil
}

// readInviteBody decodes what appendBody wrote and checks that the CA
// certificate and the signature belong together.
func readInviteBody(r *tokenReader) (*invite, error) {
	inv := &invite{}
	inv.caCert = slices.Clone(r.bytes(int(r.uint16())))
	start := r.off
	inv.id = [inviteIDLen]byte(r.bytesOrZero(inviteIDLen))
	inv.name = r.string()
	for range r.count(identity.MaxAddresses) {
		addr := r.addr()
		bits := int(r.uint8())
		inv.addresses = append(inv.addresses, netip.PrefixFrom(addr, bits))
	}
	for range r.count(maxBootstrap) {
		inv.first.bootstrap = append(inv.first.bootstrap, netip.AddrPortFrom(r.addr(), r.uint16()))
	}
	for range r.count(maxBeacons) {
		inv.first.beacons = append(inv.first.beacons, config.BeaconRef{Addr: netip.AddrPortFrom(r.addr(), r.uint16()), WebSocket: r.string()})
	}
	inv.expires = time.Unix(int64(r.uint64()), 0)
	inv.certValid = time.Duration(r.uint64()) * time.Second
	inv.signedPart = r.buf[start:r.off]
	inv.signature = [ed25519.SignatureSize]byte(r.bytesOrZero(ed25519.SignatureSize))
	if r.err != nil {
		return nil, r.err
	}
	ca, err := identity.ParseCAPublic(pem.EncodeToMemory(&pem.Block{Type: caCertPEMType, Bytes: inv.caCert}))
	if err != nil {
		return nil, fmt.Errorf("its CA certificate is invalid: %v", err)
	}
	inv.ca = ca
	if err := identity.CheckNodeName(inv.name); err != nil {
		return nil, err
	}
	for _, p := range inv.addresses {
		if !p.IsValid() {
			return nil, errors.New("it holds an invalid address")
		}
	}
	if !ed25519.Verify(ca.Public, inviteMessage(ca, inv.signedPart), inv.signature[:]) {
		return nil, errors.New("its signature does not match its CA: it was altered after the CA issued it")
	}
	return inv, nil
}

// encodeToken frames a body as a token of the given kind.
func encodeToken(kind byte, body []byte) string {
	b := append([]byte{kind, tokenVersion}, body...)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(append(b, sum[:tokenSumLen]...))
}

// decodeToken checks a token's framing and kind and returns its body.
// want is the kind the caller expects; the error for another kind says
// what the token is and where it belongs.
func decodeToken(token string, want byte) ([]byte, error) {
	token = strings.Join(strings.Fields(token), "") // terminals wrap long lines
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 2+tokenSumLen {
		return nil, fmt.Errorf("this is not a burrow token (expected %s): it was damaged or cut in copying; copy it again whole", tokenKindNames[want])
	}
	b, sum := raw[:len(raw)-tokenSumLen], raw[len(raw)-tokenSumLen:]
	if got := sha256.Sum256(b); string(got[:tokenSumLen]) != string(sum) {
		return nil, fmt.Errorf("the token's checksum does not match (expected %s): it was damaged or cut in copying; copy it again whole", tokenKindNames[want])
	}
	if b[0] != want {
		name, ok := tokenKindNames[b[0]]
		if !ok {
			name = "an unknown kind of token"
		}
		return nil, fmt.Errorf("this token is %s, not %s; %s", name, tokenKindNames[want], tokenAdvice[b[0]])
	}
	if b[1] != tokenVersion {
		return nil, fmt.Errorf("the token has version %d; this burrow reads version %d: use the same burrow version on both machines", b[1], tokenVersion)
	}
	return b[2:], nil
}

var tokenAdvice = map[byte]string{
	kindInvite:  "give it to 'burrow join' on the new node",
	kindRequest: "give it to 'burrow invite accept' on the CA machine",
	kindCert:    "give it to 'burrow join --cert' on the new node",
}

func encodeInvite(inv *invite) string { return encodeToken(kindInvite, inv.appendBody(nil)) }

func decodeInvite(token string) (*invite, error) {
	body, err := decodeToken(token, kindInvite)
	if err != nil {
		return nil, err
	}
	r := &tokenReader{buf: body}
	inv, err := readInviteBody(r)
	if err == nil {
		err = r.finish()
	}
	if err != nil {
		return nil, fmt.Errorf("the invite is unusable: %v", err)
	}
	return inv, nil
}

// joinRequest is a new node's answer to an invite.
type joinRequest struct {
	invite    *invite
	publicKey [32]byte
}

func encodeRequest(req joinRequest) string {
	b := req.invite.appendBody(nil)
	return encodeToken(kindRequest, append(b, req.publicKey[:]...))
}

func decodeRequest(token string) (joinRequest, error) {
	body, err := decodeToken(token, kindRequest)
	if err != nil {
		return joinRequest{}, err
	}
	r := &tokenReader{buf: body}
	inv, err := readInviteBody(r)
	if err != nil {
		return joinRequest{}, fmt.Errorf("the join request is unusable: %v", err)
	}
	req := joinRequest{invite: inv, publicKey: [32]byte(r.bytesOrZero(32))}
	if err := r.finish(); err != nil {
		return joinRequest{}, fmt.Errorf("the join request is unusable: %v", err)
	}
	return req, nil
}

func encodeCertToken(c *identity.Certificate) string { return encodeToken(kindCert, c.Marshal()) }

func decodeCertToken(token string) (*identity.Certificate, error) {
	body, err := decodeToken(token, kindCert)
	if err != nil {
		return nil, err
	}
	c, err := identity.ParseCertificate(body)
	if err != nil {
		return nil, fmt.Errorf("the certificate token is unusable: %v", err)
	}
	return c, nil
}

// tokenReader reads token fields from buf; the first failure sticks.
type tokenReader struct {
	buf []byte
	off int
	err error
}

func (r *tokenReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.buf)-r.off < n {
		r.err = errors.New("it is truncated")
		return nil
	}
	v := r.buf[r.off : r.off+n]
	r.off += n
	return v
}

// bytesOrZero is bytes that returns n zero bytes after a failure, for
// fixed-size arrays.
func (r *tokenReader) bytesOrZero(n int) []byte {
	if v := r.bytes(n); v != nil {
		return v
	}
	return make([]byte, n)
}

func (r *tokenReader) uint8() uint8 { return r.bytesOrZero(1)[0] }

func (r *tokenReader) uint16() uint16 { return binary.BigEndian.Uint16(r.bytesOrZero(2)) }

func (r *tokenReader) uint64() uint64 { return binary.BigEndian.Uint64(r.bytesOrZero(8)) }

func (r *tokenReader) string() string { return string(r.bytes(int(r.uint8()))) }

// count reads a list length and refuses one above limit.
func (r *tokenReader) count(limit int) int {
	n := int(r.uint8())
	if n > limit && r.err == nil {
		r.err = fmt.Errorf("it lists %d entries where at most %d are allowed", n, limit)
	}
	if r.err != nil {
		return 0
	}
	return n
}

// addr reads a tag (4 or 6) and the address bytes.
func (r *tokenReader) addr() netip.Addr {
	switch tag := r.uint8(); tag {
	case 4:
		return netip.AddrFrom4([4]byte(r.bytesOrZero(4)))
	case 6:
		return netip.AddrFrom16([16]byte(r.bytesOrZero(16)))
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown address tag %d", tag)
		}
		return netip.Addr{}
	}
}

func (r *tokenReader) finish() error {
	if r.err == nil && r.off != len(r.buf) {
		r.err = fmt.Errorf("%d unexpected trailing bytes", len(r.buf)-r.off)
	}
	return r.err
}

func appendTokenString(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }

func appendAddrPort(b []byte, ap netip.AddrPort) []byte {
	return binary.BigEndian.AppendUint16(appendAddr(b, ap.Addr()), ap.Port())
}

func appendAddr(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		a4 := a.As4()
		return append(append(b, 4), a4[:]...)
	}
	a16 := a.As16()
	return append(append(b, 6), a16[:]...)
}
