package runtime

import (
	"log/slog"
	"maps"
	"time"

	"burrow/identity"
	"burrow/link"
	"burrow/nid"
)

// CertificateWarning is how long before its certificate expires a node
// starts warning: in status, in metrics and once a day in its log.
const CertificateWarning = 30 * 24 * time.Hour

func certificateExpiresSoon(c *identity.Certificate, now time.Time) bool {
	return now.Add(CertificateWarning).After(c.NotAfter)
}

// expiryWarner logs a warning a day while the certificate is close to its
// end or past it, and one a day for each linked peer whose certificate is.
type expiryWarner struct {
	cert       *identity.Certificate
	log        *slog.Logger
	nextWarned time.Time
	// peersWarned is when each peer was last warned of, by node ID.
	peersWarned map[nid.ID]time.Time
}

func (w *expiryWarner) check(now time.Time) {
	if !certificateExpiresSoon(w.cert, now) || now.Before(w.nextWarned) {
		return
	}
	w.nextWarned = now.Add(24 * time.Hour)
	left := w.cert.NotAfter.Sub(now)
	if left <= 0 {
		w.log.Error("this node's certificate has expired: no member accepts it; sign a new one where the CA key is (burrow cert sign) and install it (burrow join --cert FILE --force), then restart the node",
			"expired", w.cert.NotAfter.Format(time.RFC3339))
		return
	}
	w.log.Warn("this node's certificate expires soon; members refuse it from then on: sign a new one where the CA key is (burrow cert sign) and install it (burrow join --cert FILE --force), then restart the node",
		"expires", w.cert.NotAfter.Format(time.RFC3339), "days_left", int(left.Hours()/24))
}

// checkPeers warns, once a day for each, of the linked peers whose
// certificates expire within CertificateWarning: their links end then,
// unless the CA signs them new ones.
func (w *expiryWarner) checkPeers(peers []link.Peer, now time.Time) {
	if w.peersWarned == nil {
		w.peersWarned = map[nid.ID]time.Time{}
	}
	linked := map[nid.ID]bool{}
	for _, p := range peers {
		linked[p.ID] = true
		if p.NotAfter.IsZero() || !now.Add(CertificateWarning).After(p.NotAfter) || now.Before(w.peersWarned[p.ID].Add(24*time.Hour)) {
			continue
		}
		w.peersWarned[p.ID] = now
		w.log.Warn("a peer's certificate expires soon: its links end then; sign it a new one where the CA key is (burrow cert sign), to install on that node",
			"peer", p.Name, "nid", p.ID.Short(), "expires", p.NotAfter.Format(time.RFC3339), "days_left", int(p.NotAfter.Sub(now).Hours()/24))
	}
	maps.DeleteFunc(w.peersWarned, func(id nid.ID, _ time.Time) bool { return !linked[id] })
}
