package identity

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

// certificateSeeds are valid encodings covering each field's shapes.
func certificateSeeds(t testing.TB) [][]byte {
	ca := newTestCA(t, "home", 1)
	typical := testTemplate(t)
	bare := testTemplate(t)
	bare.Addresses, bare.Groups = nil, nil
	full := testTemplate(t)
	full.Addresses = append(full.Addresses, netip.MustParsePrefix("fd00::1/64"), netip.MustParsePrefix("::ffff:10.0.0.2/128"))
	full.Groups = append(full.Groups, "ops", "k8s_nodes")
	var seeds [][]byte
	for _, template := range []Certificate{typical, bare, full} {
		seeds = append(seeds, mustSign(t, ca, template).Marshal())
	}
	return seeds
}

func FuzzParseCertificate(f *testing.F) {
	for _, seed := range certificateSeeds(f) {
		f.Add(seed)
		f.Add(seed[:len(seed)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{certVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCertificate(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %q does not wrap ErrMalformed", err)
			}
			return
		}
		if again := c.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("Marshal(Parse(b)) differs from b:\n%x\n%x", again, b)
		}
	})
}

func FuzzParseCABody(f *testing.F) {
	ca := newTestCA(f, "home", 1)
	data, err := ca.MarshalPublic()
	if err != nil {
		f.Fatal(err)
	}
	raw, err := decodePEM(data, caCertPEMType)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(raw[:len(raw)-1])
	f.Add([]byte{caCertVersion, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		parsed, err := parseCABody(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) {
				t.Fatalf("error %q wraps neither ErrMalformed nor ErrBadSignature", err)
			}
			return
		}
		if body := appendCABody(nil, parsed.Network, parsed.Public); !bytes.HasPrefix(b, body) || len(b) != len(body)+64 {
			t.Fatalf("accepted %x, which is not the encoding of %+v plus a signature", b, parsed)
		}
	})
}
