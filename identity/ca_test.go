package identity

import (
	"bytes"
	"encoding/pem"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewCAValidatesNetworkName(t *testing.T) {
	for _, good := range []string{"a", "home", "lab-1.example", strings.Repeat("z", MaxNetworkNameLen)} {
		if _, err := NewCA(good, seededRand(1)); err != nil {
			t.Errorf("NewCA(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"", "Home", "a_b", "a b", "é", strings.Repeat("z", MaxNetworkNameLen+1)} {
		if _, err := NewCA(bad, seededRand(1)); err == nil {
			t.Errorf("NewCA(%q) accepted a bad network name", bad)
		}
	}
}

func TestCAPublicRoundTrip(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	data, err := ca.MarshalPublic()
	if err != nil {
		t.Fatal(err)
	}
	public, err := ParseCAPublic(data)
	if err != nil {
		t.Fatalf("ParseCAPublic: %v", err)
	}
	if public.Network != ca.Network || !public.Public.Equal(ca.Public) || public.Private != nil {
		t.Fatalf("parsed %+v, want network %q, the same public key and no private key", public, ca.Network)
	}
	if _, err := public.MarshalPublic(); err == nil {
		t.Error("MarshalPublic worked without the private key")
	}
	cert := mustSign(t, ca, testTemplate(t))
	if err := public.Verify(cert, testNotBefore); err != nil {
		t.Errorf("public half does not verify a certificate: %v", err)
	}
}

func TestCAPublicDetectsCorruption(t *testing.T) {
	data, err := newTestCA(t, "home", 1).MarshalPublic()
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	for i := range block.Bytes {
		raw := bytes.Clone(block.Bytes)
		raw[i] ^= 0x04
		changed := pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: raw})
		if _, err := ParseCAPublic(changed); err == nil {
			t.Errorf("byte %d changed: corrupted CA certificate accepted", i)
		}
	}
	for _, n := range []int{0, 1, len(block.Bytes) - 1} {
		truncated := pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes[:n]})
		if _, err := ParseCAPublic(truncated); !errors.Is(err, ErrMalformed) {
			t.Errorf("truncated to %d bytes: %v, want ErrMalformed", n, err)
		}
	}
}

func TestFingerprintMatchesCertificateIssuer(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	fp := ca.Fingerprint()
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(fp) {
		t.Fatalf("fingerprint %q is not 16 hex digits", fp)
	}
	if got := mustSign(t, ca, testTemplate(t)).IssuerFingerprint(); got != fp {
		t.Errorf("certificate issuer fingerprint %q, CA fingerprint %q", got, fp)
	}
	if newTestCA(t, "home", 2).Fingerprint() == fp {
		t.Error("two CAs share a fingerprint")
	}
}

func TestVerifyPeerChecksTheHandshakeKey(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	trust := trustOf(t, ca)
	template := testTemplate(t)
	wire := mustSign(t, ca, template).Marshal()
	now := testNotBefore.Add(time.Hour)
	c, err := trust.VerifyPeer(wire, template.PublicKey, now)
	if err != nil || c.Name != template.Name {
		t.Fatalf("VerifyPeer with the right key: %+v, %v", c, err)
	}
	other, _ := GenerateNodeKey(seededRand(7))
	if _, err := trust.VerifyPeer(wire, other.Public, now); !errors.Is(err, ErrWrongKey) {
		t.Errorf("VerifyPeer with another key: %v, want ErrWrongKey", err)
	}
	if _, err := trust.VerifyPeer(wire[1:], template.PublicKey, now); !errors.Is(err, ErrMalformed) {
		t.Errorf("VerifyPeer of garbage: %v, want ErrMalformed", err)
	}
	if _, err := trust.VerifyPeer(wire, template.PublicKey, testNotAfter.Add(time.Second)); !errors.Is(err, ErrExpired) {
		t.Errorf("VerifyPeer after expiry: %v, want ErrExpired", err)
	}
}
