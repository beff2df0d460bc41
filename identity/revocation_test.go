package identity

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"burrow/nid"
)

func testRevocation(t testing.TB, ca *CA) *Revocation {
	t.Helper()
	r, err := SignRevocation(ca, nid.ID{1, 2, 3}, "laptop", time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRevocationSignVerifyRoundTrip(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	r := testRevocation(t, ca)
	got, err := trustOf(t, ca).ParseAndVerifyRevocation(r.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if *got != *r {
		t.Fatalf("round trip gave %+v, want %+v", got, r)
	}
	path := filepath.Join(t.TempDir(), "laptop.rev")
	if err := SaveRevocation(path, r); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadRevocation(path)
	if err != nil || *loaded != *r {
		t.Fatalf("LoadRevocation = %+v, %v; want %+v", loaded, err, r)
	}
}

// TestARevocationIsHonouredOnlyFromItsOwnCA: another network's CA, a
// changed byte anywhere, a CA without its private key: all refused.
func TestARevocationIsHonouredOnlyFromItsOwnCA(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	r := testRevocation(t, ca)
	other := newTestCA(t, "home", 2)
	if err := other.VerifyRevocation(r); !errors.Is(err, ErrUnknownIssuer) {
		t.Errorf("another CA's check: %v, want ErrUnknownIssuer", err)
	}
	raw := r.Marshal()
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		if _, err := trustOf(t, ca).ParseAndVerifyRevocation(b); err == nil {
			t.Fatalf("byte %d changed and the revocation still verifies", i)
		}
	}
	public := &CA{Network: ca.Network, Public: ca.Public}
	if _, err := SignRevocation(public, nid.ID{1}, "", time.Now()); err == nil {
		t.Error("signed a revocation without the CA's private key")
	}
	if _, err := SignRevocation(ca, nid.ID{}, "", time.Now()); err == nil {
		t.Error("signed a revocation naming no node")
	}
}

func FuzzParseRevocation(f *testing.F) {
	ca := newTestCA(f, "home", 1)
	seed := testRevocation(f, ca).Marshal()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	unnamed, err := SignRevocation(ca, nid.ID{9}, "", time.Unix(0, 0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(unnamed.Marshal())
	f.Add([]byte{})
	f.Add([]byte{revocationVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRevocation(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			return
		}
		if again := r.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("Marshal(Parse(b)) differs from b:\n%x\n%x", again, b)
		}
	})
}
