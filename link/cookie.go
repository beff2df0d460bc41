package link

import (
	"crypto/hmac"
	"crypto/sha256"
	"io"
	"time"

	"burrow/wire"
)

// CookieLen is the length of a cookie, which a busy node sends instead of
// answering an initiation, and which the initiator appends to it.
const CookieLen = 16

// cookieRotation is how long a cookie secret is used; a cookie stays
// valid for up to twice that.
const cookieRotation = 2 * time.Minute

// cookieJar makes and checks cookies: a MAC of the initiator's address
// under a secret drawn anew every cookieRotation. Only someone who
// receives at the address can present it, so an initiation with a valid
// cookie does not come from a spoofed address.
type cookieJar struct {
	rand            io.Reader
	secret, old     [32]byte
	rotated         time.Time
	haveOld, seeded bool
}

func (j *cookieJar) rotate(now time.Time) {
	if j.seeded && now.Sub(j.rotated) < cookieRotation {
		return
	}
	j.old, j.haveOld = j.secret, j.seeded
	if _, err := io.ReadFull(j.rand, j.secret[:]); err != nil {
		// Without randomness the old secret stays; cookies keep working.
		return
	}
	j.rotated, j.seeded = now, true
}

func cookieFor(secret *[32]byte, from Endpoint) []byte {
	mac := hmac.New(sha256.New, secret[:])
	mac.Write([]byte(from.String()))
	return mac.Sum(nil)[:CookieLen]
}

// make returns the cookie for from.
func (j *cookieJar) make(from Endpoint, now time.Time) []byte {
	j.rotate(now)
	return cookieFor(&j.secret, from)
}

// valid reports whether cookie is from's, under the current or the
// previous secret.
func (j *cookieJar) valid(cookie []byte, from Endpoint, now time.Time) bool {
	j.rotate(now)
	return j.seeded && (hmac.Equal(cookie, cookieFor(&j.secret, from)) || j.haveOld && hmac.Equal(cookie, cookieFor(&j.old, from)))
}

// splitCookie separates an initiation's Noise message from the cookie
// after it, when there is one.
func splitCookie(body []byte) (msg, cookie []byte) {
	if len(body) == InitLen-wire.HandshakeHeaderLen+CookieLen {
		return body[:len(body)-CookieLen], body[len(body)-CookieLen:]
	}
	return body, nil
}
