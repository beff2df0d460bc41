package runtime

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"burrow/identity"
	"burrow/link"
	"burrow/nid"
)

// TestCertificateExpiryIsWarnedADayAtATime: nothing while the certificate
// has more than CertificateWarning left; then one warning a day saying how
// many days remain; once expired, an error.
func TestCertificateExpiryIsWarnedADayAtATime(t *testing.T) {
	notAfter := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	w := expiryWarner{cert: &identity.Certificate{Name: "n", NotAfter: notAfter}, log: slog.New(slog.NewTextHandler(&out, nil))}
	w.check(notAfter.Add(-CertificateWarning - time.Hour))
	if out.Len() != 0 {
		t.Fatalf("warned with more than the warning time left: %s", out.String())
	}
	start := notAfter.Add(-10 * 24 * time.Hour)
	for at := start; at.Before(start.Add(48 * time.Hour)); at = at.Add(2 * time.Second * 600) {
		w.check(at)
	}
	if n := strings.Count(out.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings over two days, want 2:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "days_left=10") || !strings.Contains(out.String(), "days_left=9") {
		t.Errorf("the warnings do not count the days left:\n%s", out.String())
	}
	out.Reset()
	w.check(notAfter.Add(time.Hour))
	if !strings.Contains(out.String(), "level=ERROR") || !strings.Contains(out.String(), "has expired") {
		t.Errorf("after expiry: %s", out.String())
	}
}

// A linked peer whose certificate runs out within the warning time is
// warned of once a day, naming it; a peer far from its end is not, and a
// peer no longer linked is forgotten.
func TestPeersCertificateExpiryIsWarnedADayAtATime(t *testing.T) {
	var out bytes.Buffer
	w := expiryWarner{cert: &identity.Certificate{Name: "n", NotAfter: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, log: slog.New(slog.NewTextHandler(&out, nil))}
	now := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	soon := link.Peer{ID: nid.ID{1}, Name: "soon", NotAfter: now.Add(10 * 24 * time.Hour)}
	later := link.Peer{ID: nid.ID{2}, Name: "later", NotAfter: now.Add(CertificateWarning + 48*time.Hour)}
	for at := now; at.Before(now.Add(36 * time.Hour)); at = at.Add(time.Hour) {
		w.checkPeers([]link.Peer{soon, later}, at)
	}
	if n := strings.Count(out.String(), "level=WARN"); n != 2 || !strings.Contains(out.String(), "peer=soon") || strings.Contains(out.String(), "peer=later") {
		t.Fatalf("want two warnings over 36 hours, of soon only:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "days_left=10") || !strings.Contains(out.String(), "days_left=9") {
		t.Errorf("the warnings do not count the days left:\n%s", out.String())
	}
	w.checkPeers(nil, now.Add(37*time.Hour))
	if len(w.peersWarned) != 0 {
		t.Errorf("peers no longer linked are still remembered: %v", w.peersWarned)
	}
}
