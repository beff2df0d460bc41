package identity

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/nid"
)

func caFile(t *testing.T, ca *CA) []byte {
	t.Helper()
	b, err := ca.MarshalPublic()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrustDuringACARotation: a file holding the old and the new CA, as
// `cat old/ca.crt new/ca.crt` writes it, accepts certificates and
// revocations of either, and refuses a third CA naming all it trusts.
func TestTrustDuringACARotation(t *testing.T) {
	old, next, stranger := newTestCA(t, "home", 1), newTestCA(t, "home", 2), newTestCA(t, "home", 3)
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, append(caFile(t, old), caFile(t, next)...), 0o644); err != nil {
		t.Fatal(err)
	}
	trust, err := LoadTrust(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(trust.CAs) != 2 || trust.Network() != "home" {
		t.Fatalf("loaded %d CAs of %q", len(trust.CAs), trust.Network())
	}
	now := testNotBefore.Add(time.Hour)
	for _, ca := range []*CA{old, next} {
		template := testTemplate(t)
		if _, err := trust.VerifyPeer(mustSign(t, ca, template).Marshal(), template.PublicKey, now); err != nil {
			t.Errorf("certificate of CA %s: %v", ca.Fingerprint(), err)
		}
		r, err := SignRevocation(ca, nid.ID{7}, "laptop", now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trust.ParseAndVerifyRevocation(r.Marshal()); err != nil {
			t.Errorf("revocation of CA %s: %v", ca.Fingerprint(), err)
		}
	}
	template := testTemplate(t)
	_, err = trust.VerifyPeer(mustSign(t, stranger, template).Marshal(), template.PublicKey, now)
	if !errors.Is(err, ErrUnknownIssuer) || !strings.Contains(err.Error(), old.Fingerprint()) || !strings.Contains(err.Error(), next.Fingerprint()) {
		t.Errorf("certificate of an untrusted CA: %v, want ErrUnknownIssuer naming both trusted CAs", err)
	}
	r, _ := SignRevocation(stranger, nid.ID{7}, "", now)
	if _, err := trust.ParseAndVerifyRevocation(r.Marshal()); !errors.Is(err, ErrUnknownIssuer) {
		t.Errorf("revocation of an untrusted CA: %v, want ErrUnknownIssuer", err)
	}
}

func TestTrustFileErrorsSayWhatIsWrong(t *testing.T) {
	home1, home2 := newTestCA(t, "home", 1), newTestCA(t, "home", 2)
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"empty":              {nil, "no CA"},
		"two networks":       {append(caFile(t, home1), caFile(t, newTestCA(t, "work", 4))...), "one file holds the CAs of one network"},
		"the same CA twice":  {append(caFile(t, home1), caFile(t, home1)...), "listed twice"},
		"text between":       {append(append(caFile(t, home1), "garbage\n"...), caFile(t, home2)...), "no PEM block"},
		"a broken second CA": {append(caFile(t, home1), bytes.Replace(caFile(t, home2), []byte("BURROW CA"), []byte("BURROW XX"), 2)...), "CA certificate 2"},
		"too many": {bytes.Join([][]byte{caFile(t, home1), caFile(t, home2), caFile(t, newTestCA(t, "home", 5)),
			caFile(t, newTestCA(t, "home", 6)), caFile(t, newTestCA(t, "home", 7))}, nil), "at most 4"},
	} {
		if _, err := ParseTrust(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}
