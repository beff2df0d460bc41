package identity

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"burrow/nid"
)

var (
	testMember  = nid.ID{0xaa, 1}
	testGateway = nid.ID{0xbb, 2}
	testIssued  = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
)

func testPublication(t testing.TB, ca *CA, service, listen string) *Publication {
	t.Helper()
	p, err := SignPublication(ca, Publication{
		Member: testMember, MemberName: "board", Service: netip.MustParseAddrPort(service),
		Gateway: testGateway, GatewayName: "gateway", Listen: netip.MustParseAddrPort(listen),
	}, testIssued, 24*time.Hour, seededRand(7))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPublicationSignVerifyRoundTrip(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	for _, addrs := range [][2]string{{"10.99.0.3:8443", "203.0.113.7:443"}, {"[fd00::3]:22", "[2001:db8::7]:2222"}} {
		p := testPublication(t, ca, addrs[0], addrs[1])
		got, err := ParsePublication(p.Marshal())
		if err != nil {
			t.Fatal(err)
		}
		if *got != *p {
			t.Fatalf("round trip gave %+v, want %+v", got, p)
		}
		if err := trustOf(t, ca).VerifyPublication(got, testGateway, testIssued.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "board.pub")
		if err := SavePublication(path, p); err != nil {
			t.Fatal(err)
		}
		if loaded, err := LoadPublication(path); err != nil || *loaded != *p {
			t.Fatalf("LoadPublication = %+v, %v; want %+v", loaded, err, p)
		}
	}
}

// TestAPublicationIsHonouredOnlyFromItsCAByItsGatewayInItsTime: another
// CA, another gateway, a changed byte anywhere, a time past its end, a
// CA without its private key: all refused, each with its own error.
func TestAPublicationIsHonouredOnlyFromItsCAByItsGatewayInItsTime(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	trust := trustOf(t, ca)
	p := testPublication(t, ca, "10.99.0.3:8443", "203.0.113.7:443")
	during := testIssued.Add(time.Hour)
	if err := trustOf(t, newTestCA(t, "home", 2)).VerifyPublication(p, testGateway, during); !errors.Is(err, ErrUnknownIssuer) {
		t.Errorf("another CA's check: %v, want ErrUnknownIssuer", err)
	}
	if err := trust.VerifyPublication(p, testMember, during); !errors.Is(err, ErrNotThisGateway) {
		t.Errorf("checked by the member instead of the gateway: %v, want ErrNotThisGateway", err)
	}
	if err := trust.VerifyPublication(p, testGateway, p.NotAfter); !errors.Is(err, ErrPublicationExpired) {
		t.Errorf("checked at its end: %v, want ErrPublicationExpired", err)
	}
	raw := p.Marshal()
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		q, err := ParsePublication(b)
		if err == nil {
			err = trust.VerifyPublication(q, testGateway, during)
		}
		if err == nil {
			t.Fatalf("byte %d changed and the publication still verifies", i)
		}
	}
	public := &CA{Network: ca.Network, Public: ca.Public}
	template := Publication{Member: testMember, MemberName: "board", Service: p.Service, Gateway: testGateway, GatewayName: "gateway", Listen: p.Listen}
	if _, err := SignPublication(public, template, testIssued, time.Hour, seededRand(1)); err == nil {
		t.Error("signed a publication without the CA's private key")
	}
	unspecified := template
	unspecified.Listen = netip.MustParseAddrPort("0.0.0.0:443")
	if _, err := SignPublication(ca, unspecified, testIssued, time.Hour, seededRand(1)); err == nil {
		t.Error("signed a publication listening on every address")
	}
	if _, err := SignPublication(ca, template, testIssued, 0, seededRand(1)); err == nil {
		t.Error("signed a publication valid for no time")
	}
}

func TestAPublicationRevocationIsHonouredOnlyFromItsCA(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	trust := trustOf(t, ca)
	p := testPublication(t, ca, "10.99.0.3:8443", "203.0.113.7:443")
	r, err := SignPublicationRevocation(ca, p, testIssued.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParsePublicationRevocation(r.Marshal())
	if err != nil || *got != *r {
		t.Fatalf("round trip gave %+v, %v; want %+v", got, err, r)
	}
	if got.Serial != p.Serial || got.Gateway != p.Gateway {
		t.Errorf("the revocation names serial %x of gateway %s, not the publication's", got.Serial, got.Gateway.Short())
	}
	if err := trust.VerifyPublicationRevocation(got); err != nil {
		t.Fatal(err)
	}
	if err := trustOf(t, newTestCA(t, "home", 2)).VerifyPublicationRevocation(got); !errors.Is(err, ErrUnknownIssuer) {
		t.Errorf("another CA's check: %v, want ErrUnknownIssuer", err)
	}
	raw := r.Marshal()
	for i := range raw {
		b := bytes.Clone(raw)
		b[i] ^= 0x01
		q, err := ParsePublicationRevocation(b)
		if err == nil {
			err = trust.VerifyPublicationRevocation(q)
		}
		if err == nil {
			t.Fatalf("byte %d changed and the revocation still verifies", i)
		}
	}
	path := filepath.Join(t.TempDir(), "board.pubrev")
	if err := SavePublicationRevocation(path, r); err != nil {
		t.Fatal(err)
	}
	if loaded, err := LoadPublicationRevocation(path); err != nil || *loaded != *r {
		t.Fatalf("LoadPublicationRevocation = %+v, %v; want %+v", loaded, err, r)
	}
	if _, err := LoadPublication(path); err == nil {
		t.Error("a revocation file loaded as a publication")
	}
}

func FuzzParsePublication(f *testing.F) {
	ca := newTestCA(f, "home", 1)
	for _, seed := range [][]byte{
		testPublication(f, ca, "10.99.0.3:8443", "203.0.113.7:443").Marshal(),
		testPublication(f, ca, "[fd00::3]:22", "[2001:db8::7]:2222").Marshal(),
	} {
		f.Add(seed)
		f.Add(seed[:len(seed)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{publicationVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePublication(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			return
		}
		if again := p.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("Marshal(Parse(b)) differs from b:\n%x\n%x", again, b)
		}
	})
}

func FuzzParsePublicationRevocation(f *testing.F) {
	ca := newTestCA(f, "home", 1)
	r, err := SignPublicationRevocation(ca, testPublication(f, ca, "10.99.0.3:8443", "203.0.113.7:443"), testIssued)
	if err != nil {
		f.Fatal(err)
	}
	seed := r.Marshal()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{})
	f.Add([]byte{publicationRevocationVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParsePublicationRevocation(b)
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
