package identity

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// seededRand is a deterministic random source, so failures replay.
func seededRand(seed byte) io.Reader { return rand.NewChaCha8([32]byte{seed}) }

func newTestCA(t testing.TB, network string, seed byte) *CA {
	t.Helper()
	ca, err := NewCA(network, seededRand(seed))
	if err != nil {
		t.Fatalf("NewCA(%q): %v", network, err)
	}
	return ca
}

var (
	testNotBefore = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	testNotAfter  = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
)

func testTemplate(t testing.TB) Certificate {
	t.Helper()
	key, err := GenerateNodeKey(seededRand(99))
	if err != nil {
		t.Fatal(err)
	}
	return Certificate{
		Name:      "laptop",
		PublicKey: key.Public,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")},
		Groups:    []string{"admins"},
		NotBefore: testNotBefore,
		NotAfter:  testNotAfter,
	}
}

func mustSign(t testing.TB, ca *CA, template Certificate) *Certificate {
	t.Helper()
	c, err := SignCertificate(ca, template)
	if err != nil {
		t.Fatalf("SignCertificate: %v", err)
	}
	return c
}

func trustOf(t testing.TB, cas ...*CA) *Trust {
	t.Helper()
	trust, err := NewTrust(cas...)
	if err != nil {
		t.Fatal(err)
	}
	return trust
}
