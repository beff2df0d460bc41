package identity

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"burrow/nid"
)

// MaxTrustedCAs bounds the CAs one file may hold: two during a rotation,
// with room for a rotation that overlaps the next.
const MaxTrustedCAs = 4

// Trust is the set of CAs a member accepts certificates and revocations
// from: one CA normally, two while a network moves to a new CA (members
// trust both, certificates are signed again by the new one, then the old
// one is dropped). Every CA is of the same network.
type Trust struct {
	CAs []*CA
}

// NewTrust checks that cas are of one network, without duplicates.
func NewTrust(cas ...*CA) (*Trust, error) {
	if len(cas) == 0 {
		return nil, fmt.Errorf("%w: no CA", ErrMalformed)
	}
	if len(cas) > MaxTrustedCAs {
		return nil, fmt.Errorf("%w: %d CAs, at most %d may be trusted at once", ErrMalformed, len(cas), MaxTrustedCAs)
	}
	for i, ca := range cas {
		if ca.Network != cas[0].Network {
			return nil, fmt.Errorf("%w: CA %s is for network %q, CA %s for network %q; one file holds the CAs of one network",
				ErrWrongNetwork, cas[0].Fingerprint(), cas[0].Network, ca.Fingerprint(), ca.Network)
		}
		for _, earlier := range cas[:i] {
			if earlier.Issuer() == ca.Issuer() {
				return nil, fmt.Errorf("%w: CA %s is listed twice", ErrMalformed, ca.Fingerprint())
			}
		}
	}
	return &Trust{CAs: cas}, nil
}

// ParseTrust decodes one or more CA certificates, one after the other as
// `cat old/ca.crt new/ca.crt` writes them.
func ParseTrust(data []byte) (*Trust, error) {
	var cas []*CA
	for rest := bytes.TrimSpace(data); len(rest) > 0; {
		// pem.Decode skips text before a block; a CA file holds none.
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return nil, fmt.Errorf("%w: text after CA certificate %d that is no PEM block", ErrMalformed, len(cas))
		}
		raw, after, err := nextPEM(rest, caCertPEMType)
		if err == nil {
			var ca *CA
			if ca, err = parseCABody(raw); err == nil {
				cas = append(cas, ca)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("CA certificate %d: %w", len(cas)+1, err)
		}
		rest = bytes.TrimSpace(after)
	}
	return NewTrust(cas...)
}

// LoadTrust reads a CA file (ca.crt) holding one CA certificate or several.
func LoadTrust(path string) (*Trust, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseTrust(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Network is the network of the trusted CAs.
func (t *Trust) Network() string { return t.CAs[0].Network }

// Fingerprints lists the trusted CAs for people, comma-separated.
func (t *Trust) Fingerprints() string {
	names := make([]string, len(t.CAs))
	for i, ca := range t.CAs {
		names[i] = ca.Fingerprint()
	}
	return strings.Join(names, ", ")
}

// issuedBy finds the trusted CA with the given issuer ID.
func (t *Trust) issuedBy(issuer [IssuerSize]byte, what string) (*CA, error) {
	for _, ca := range t.CAs {
		if ca.Issuer() == issuer {
			return ca, nil
		}
	}
	return nil, fmt.Errorf("%w: %s was issued by CA %s; this node trusts %s", ErrUnknownIssuer, what, fingerprint(issuer), t.Fingerprints())
}

// Verify checks cert against the trusted CA that issued it, at now.
func (t *Trust) Verify(cert *Certificate, now time.Time) error {
	if cert == nil {
		return fmt.Errorf("%w: no certificate", ErrMalformed)
	}
	ca, err := t.issuedBy(cert.Issuer, fmt.Sprintf("the certificate of %q", cert.Name))
	if err != nil {
		return err
	}
	return ca.Verify(cert, now)
}

// VerifyPeer parses a certificate received from a peer, verifies it at now
// against the trusted CA that issued it, and checks that it was issued for
// static, the key the peer proved it holds in the handshake.
func (t *Trust) VerifyPeer(cert []byte, static [32]byte, now time.Time) (*Certificate, error) {
	c, err := ParseCertificate(cert)
	if err != nil {
		return nil, err
	}
	if err := t.Verify(c, now); err != nil {
		return nil, err
	}
	if c.PublicKey != static {
		return nil, fmt.Errorf("%w: certificate of %q names key %s, the peer holds %s",
			ErrWrongKey, c.Name, c.ID().Short(), nid.FromPublicKey(static).Short())
	}
	return c, nil
}

// VerifyRevocation checks r against the trusted CA that signed it.
func (t *Trust) VerifyRevocation(r *Revocation) error {
	ca, err := t.issuedBy(r.Issuer, "the revocation of "+r.Node.Short())
	if err != nil {
		return err
	}
	return ca.VerifyRevocation(r)
}

// ParseAndVerifyRevocation parses a revocation received from anyone and
// verifies it against the trusted CA that signed it.
func (t *Trust) ParseAndVerifyRevocation(b []byte) (*Revocation, error) {
	r, err := ParseRevocation(b)
	if err != nil {
		return nil, err
	}
	if err := t.VerifyRevocation(r); err != nil {
		return nil, err
	}
	return r, nil
}
