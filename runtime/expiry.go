package runtime

import (
	"log/slog"
	"time"

	"burrow/identity"
)

// CertificateWarning is how long before its certificate expires a node
// starts warning: in status, in metrics and once a day in its log.
const CertificateWarning = 30 * 24 * time.Hour

func certificateExpiresSoon(c *identity.Certificate, now time.Time) bool {
	return now.Add(CertificateWarning).After(c.NotAfter)
}

// expiryWarner logs a warning a day while the certificate is close to its
// end or past it.
type expiryWarner struct {
	cert       *identity.Certificate
	log        *slog.Logger
	nextWarned time.Time
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
