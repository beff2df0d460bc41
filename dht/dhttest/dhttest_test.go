package dhttest

import (
	"testing"
	"time"

	"burrow/dht"
	"burrow/nid"
)

// api is the DHT client API; both the real participant and a Client
// must implement it.
type api interface {
	Get(key string, now time.Time, cb func(dht.Result))
	Put(key string, value []byte, ttl time.Duration, now time.Time, cb func(dht.Result))
	PutIfAbsent(key string, value []byte, ttl time.Duration, now time.Time, cb func(dht.Result))
	Delete(key string, now time.Time, cb func(dht.Result))
	Renew(key string, ttl time.Duration, now time.Time, cb func(dht.Result))
}

var (
	_ api = (*Client)(nil)
	_ api = (*dht.Participant)(nil)
)

func TestClientFollowsTheDHTRules(t *testing.T) {
	s := NewStore(1)
	s.MaxDelay = 50 * time.Millisecond
	now := time.Unix(1000, 0)
	a, b := s.Client(nid.ID{1}), s.Client(nid.ID{2})
	var got []dht.Status
	rec := func(r dht.Result) { got = append(got, r.Status) }
	step := func(f func()) dht.Status {
		got = nil
		f()
		now = now.Add(100 * time.Millisecond)
		s.Advance(now)
		if len(got) != 1 {
			t.Fatalf("%d answers", len(got))
		}
		return got[0]
	}
	checks := []struct {
		name string
		do   func()
		want dht.Status
	}{
		{"create", func() { a.PutIfAbsent("k", []byte("a"), time.Second, now, rec) }, dht.OK},
		{"create again, other owner", func() { b.PutIfAbsent("k", []byte("b"), time.Second, now, rec) }, dht.Exists},
		{"delete by non-owner", func() { b.Delete("k", now, rec) }, dht.Denied},
		{"renew by non-owner", func() { b.Renew("k", time.Second, now, rec) }, dht.Denied},
		{"put by non-owner", func() { b.Put("k", []byte("b"), time.Second, now, rec) }, dht.Denied},
		{"oversize", func() { a.Put("big", make([]byte, dht.DefaultMaxValueLen+1), time.Second, now, rec) }, dht.TooLarge},
		{"renew by owner", func() { a.Renew("k", time.Second, now, rec) }, dht.OK},
		{"delete by owner", func() { a.Delete("k", now, rec) }, dht.OK},
		{"get deleted", func() { b.Get("k", now, rec) }, dht.NotFound},
		{"create after delete", func() { b.PutIfAbsent("k", []byte("b"), 200*time.Millisecond, now, rec) }, dht.OK},
	}
	for _, c := range checks {
		if st := step(c.do); st != c.want {
			t.Fatalf("%s: %v, want %v", c.name, st, c.want)
		}
	}
	now = now.Add(time.Second)
	if st := step(func() { a.PutIfAbsent("k", []byte("a"), time.Second, now, rec) }); st != dht.OK {
		t.Fatalf("create after expiry: %v", st)
	}
}

func TestAnswersComeOnlyFromAdvance(t *testing.T) {
	s := NewStore(2)
	s.MaxDelay = time.Second
	now := time.Unix(1000, 0)
	answered := 0
	for i := range 10 {
		s.Client(nid.ID{byte(i)}).PutIfAbsent("k", []byte{byte(i)}, time.Minute, now, func(dht.Result) { answered++ })
	}
	if answered != 0 || s.Pending() != 10 {
		t.Fatalf("answered %d, pending %d before Advance", answered, s.Pending())
	}
	s.Advance(now.Add(time.Second))
	if answered != 10 || s.Pending() != 0 || !s.NextDue().IsZero() {
		t.Fatalf("answered %d, pending %d after Advance", answered, s.Pending())
	}
}
