package identity

import (
	"bytes"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	template := testTemplate(t)
	c := mustSign(t, ca, template)
	if c.Network != "home" || c.Issuer != ca.Issuer() {
		t.Fatalf("signing set network %q issuer %x, want %q %x", c.Network, c.Issuer, "home", ca.Issuer())
	}
	wire := c.Marshal()
	parsed, err := ParseCertificate(wire)
	if err != nil {
		t.Fatalf("ParseCertificate: %v", err)
	}
	if !reflect.DeepEqual(parsed, c) {
		t.Fatalf("parsed %+v\nwant   %+v", parsed, c)
	}
	if err := ca.Verify(parsed, testNotBefore.Add(time.Hour)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if parsed.ID() != (NodeKey{Public: template.PublicKey}).ID() {
		t.Fatal("certificate ID differs from the key's ID")
	}
}

func TestVerifyValidityWindow(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	c := mustSign(t, ca, testTemplate(t))
	cases := []struct {
		now  time.Time
		want error
	}{
		{testNotBefore, nil},
		{testNotAfter, nil},
		{testNotBefore.Add(-time.Second), ErrNotYetValid},
		{testNotAfter.Add(time.Second), ErrExpired},
		{testNotAfter.AddDate(5, 0, 0), ErrExpired},
	}
	for _, tc := range cases {
		err := ca.Verify(c, tc.now)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("Verify at %s = %v, want %v", tc.now, err, tc.want)
		}
	}
}

func TestVerifyRefusesOtherAuthorities(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	other := newTestCA(t, "home", 2)
	now := testNotBefore.Add(time.Hour)

	fromOther := mustSign(t, other, testTemplate(t))
	if err := ca.Verify(fromOther, now); !errors.Is(err, ErrUnknownIssuer) {
		t.Errorf("certificate from another CA: %v, want ErrUnknownIssuer", err)
	}

	forged := *fromOther
	forged.Issuer = ca.Issuer()
	if err := ca.Verify(&forged, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("certificate claiming our issuer: %v, want ErrBadSignature", err)
	}

	// The same key configured as another network's CA must not admit
	// members of the first.
	sameKeyOtherNetwork := &CA{Network: "work", Public: ca.Public}
	if err := sameKeyOtherNetwork.Verify(mustSign(t, ca, testTemplate(t)), now); !errors.Is(err, ErrWrongNetwork) {
		t.Errorf("certificate for another network: %v, want ErrWrongNetwork", err)
	}

	if err := ca.Verify(nil, now); !errors.Is(err, ErrMalformed) {
		t.Errorf("nil certificate: %v, want ErrMalformed", err)
	}
}

func TestEverySingleByteChangeIsCaught(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	template := testTemplate(t)
	template.Addresses = append(template.Addresses, netip.MustParsePrefix("fd00::1/64"))
	template.Groups = append(template.Groups, "ops")
	wire := mustSign(t, ca, template).Marshal()
	now := testNotBefore.Add(time.Hour)
	for i := range wire {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			changed := bytes.Clone(wire)
			changed[i] ^= mask
			c, err := ParseCertificate(changed)
			if err == nil {
				err = ca.Verify(c, now)
			}
			if err == nil {
				t.Errorf("byte %d ^ 0x%02x: changed certificate still accepted", i, mask)
			}
		}
	}
}

func TestParseRejectsTruncationAndTrailingBytes(t *testing.T) {
	wire := mustSign(t, newTestCA(t, "home", 1), testTemplate(t)).Marshal()
	for n := range len(wire) {
		if _, err := ParseCertificate(wire[:n]); !errors.Is(err, ErrMalformed) {
			t.Errorf("truncated to %d of %d bytes: %v, want ErrMalformed", n, len(wire), err)
		}
	}
	if _, err := ParseCertificate(append(bytes.Clone(wire), 0)); !errors.Is(err, ErrMalformed) {
		t.Errorf("trailing byte: %v, want ErrMalformed", err)
	}
}

func TestParseRejectsInvalidFields(t *testing.T) {
	signed := mustSign(t, newTestCA(t, "home", 1), testTemplate(t))
	mutations := map[string]func(c *Certificate){
		"empty name":        func(c *Certificate) { c.Name = "" },
		"long name":         func(c *Certificate) { c.Name = strings.Repeat("n", MaxNodeNameLen+1) },
		"name with space":   func(c *Certificate) { c.Name = "my laptop" },
		"upper network":     func(c *Certificate) { c.Network = "Home" },
		"long network":      func(c *Certificate) { c.Network = strings.Repeat("n", MaxNetworkNameLen+1) },
		"zero public key":   func(c *Certificate) { c.PublicKey = [32]byte{} },
		"too many addrs":    func(c *Certificate) { c.Addresses = make([]netip.Prefix, MaxAddresses+1) },
		"long group":        func(c *Certificate) { c.Groups = []string{strings.Repeat("g", MaxGroupNameLen+1)} },
		"empty group":       func(c *Certificate) { c.Groups = []string{""} },
		"too many groups":   func(c *Certificate) { c.Groups = strings.Split("a,b,c,d,e,f,g,h,i", ",") },
		"empty validity":    func(c *Certificate) { c.NotAfter = c.NotBefore },
		"reversed validity": func(c *Certificate) { c.NotBefore, c.NotAfter = c.NotAfter, c.NotBefore },
		"before 1970":       func(c *Certificate) { c.NotBefore = time.Unix(-1, 0) },
		"after 9999":        func(c *Certificate) { c.NotAfter = time.Unix(maxUnixSeconds+1, 0) },
	}
	for name, mutate := range mutations {
		c := *signed
		mutate(&c)
		if _, err := ParseCertificate(c.Marshal()); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}

	wire := signed.Marshal()
	addrTagAt := 1 + IssuerSize + 1 + len(signed.Network) + 1 + len(signed.Name) + 32 + 16 + 1
	raw := map[string]func(b []byte){
		"unknown version":     func(b []byte) { b[0] = certVersion + 1 },
		"unknown address tag": func(b []byte) { b[addrTagAt] = 5 },
		"IPv4 prefix over 32": func(b []byte) { b[addrTagAt+1+4] = 33 },
	}
	for name, mutate := range raw {
		b := bytes.Clone(wire)
		mutate(b)
		if _, err := ParseCertificate(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := ParseCertificate(make([]byte, MaxCertificateSize+1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized input: %v, want ErrMalformed", err)
	}
}

func TestCertificateSizes(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	if n := len(mustSign(t, ca, testTemplate(t)).Marshal()); n >= 300 {
		t.Errorf("typical certificate takes %d bytes, want well under 300", n)
	}

	largest := testTemplate(t)
	largest.Name = strings.Repeat("n", MaxNodeNameLen)
	largest.Addresses = nil
	for i := range MaxAddresses {
		largest.Addresses = append(largest.Addresses, netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, byte(i)}), 64))
	}
	largest.Groups = nil
	for i := range MaxGroups {
		largest.Groups = append(largest.Groups, strings.Repeat(string(rune('a'+i)), MaxGroupNameLen))
	}
	bigCA := newTestCA(t, strings.Repeat("x", MaxNetworkNameLen), 2)
	wire := mustSign(t, bigCA, largest).Marshal()
	if len(wire) != MaxCertificateSize {
		t.Errorf("largest certificate takes %d bytes, MaxCertificateSize is %d", len(wire), MaxCertificateSize)
	}
	if _, err := ParseCertificate(wire); err != nil {
		t.Errorf("largest certificate does not parse: %v", err)
	}
}

func TestSignCertificateRefusesInvalidTemplates(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	mutations := map[string]func(c *Certificate){
		"other network":  func(c *Certificate) { c.Network = "work" },
		"bad name":       func(c *Certificate) { c.Name = "a/b" },
		"bad group":      func(c *Certificate) { c.Groups = []string{"a b"} },
		"invalid prefix": func(c *Certificate) { c.Addresses = []netip.Prefix{{}} },
		"no validity":    func(c *Certificate) { c.NotBefore, c.NotAfter = time.Time{}, time.Time{} },
		"sub-second":     func(c *Certificate) { c.NotAfter = c.NotBefore.Add(time.Second / 2) },
	}
	for name, mutate := range mutations {
		template := testTemplate(t)
		mutate(&template)
		if c, err := SignCertificate(ca, template); err == nil {
			t.Errorf("%s: signed %+v", name, c)
		}
	}
	public := &CA{Network: ca.Network, Public: ca.Public}
	if _, err := SignCertificate(public, testTemplate(t)); err == nil {
		t.Error("signed without the CA private key")
	}
}

func TestSignCertificateTruncatesTimesAndCopiesSlices(t *testing.T) {
	ca := newTestCA(t, "home", 1)
	template := testTemplate(t)
	template.NotBefore = testNotBefore.Add(1500 * time.Millisecond)
	c := mustSign(t, ca, template)
	if want := testNotBefore.Add(time.Second); !c.NotBefore.Equal(want) {
		t.Errorf("NotBefore %s, want %s", c.NotBefore, want)
	}
	template.Groups[0] = "changed"
	if c.Groups[0] != "admins" {
		t.Error("the certificate shares its Groups slice with the template")
	}
	if err := ca.Verify(c, c.NotBefore); err != nil {
		t.Errorf("Verify at the truncated NotBefore: %v", err)
	}
}

func TestCertificateRoundTripProperty(t *testing.T) {
	ca := newTestCA(t, "prop.test", 1)
	nameChars := []rune("abcXYZ019._-")
	name := func(max int) *rapid.Generator[string] {
		return rapid.StringOfN(rapid.SampledFrom(nameChars), 1, max, -1)
	}
	rapid.Check(t, func(t *rapid.T) {
		var key [32]byte
		copy(key[:], rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, "key"))
		if key == ([32]byte{}) {
			key[0] = 1
		}
		var addrs []netip.Prefix
		for range rapid.IntRange(0, MaxAddresses).Draw(t, "addresses") {
			raw := rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "address")
			addr := netip.AddrFrom16([16]byte(raw))
			if rapid.Bool().Draw(t, "v4") {
				addr = netip.AddrFrom4([4]byte(raw[:4]))
			}
			addrs = append(addrs, netip.PrefixFrom(addr, rapid.IntRange(0, addr.BitLen()).Draw(t, "bits")))
		}
		notBefore := rapid.Int64Range(0, maxUnixSeconds-1).Draw(t, "notBefore")
		notAfter := rapid.Int64Range(notBefore+1, maxUnixSeconds).Draw(t, "notAfter")
		template := Certificate{
			Name:      name(MaxNodeNameLen).Draw(t, "name"),
			PublicKey: key,
			Addresses: addrs,
			Groups:    rapid.SliceOfN(name(MaxGroupNameLen), 0, MaxGroups).Draw(t, "groups"),
			NotBefore: time.Unix(notBefore, 0),
			NotAfter:  time.Unix(notAfter, 0),
		}
		c, err := SignCertificate(ca, template)
		if err != nil {
			t.Fatalf("SignCertificate: %v", err)
		}
		parsed, err := ParseCertificate(c.Marshal())
		if err != nil {
			t.Fatalf("ParseCertificate: %v", err)
		}
		if !bytes.Equal(parsed.Marshal(), c.Marshal()) {
			t.Fatalf("round trip changed the certificate:\n%+v\n%+v", parsed, c)
		}
		if err := ca.Verify(parsed, parsed.NotAfter); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
}
