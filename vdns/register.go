package vdns

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	"burrow/dht"
	"burrow/nid"
)

// RegisterState is where a registered name stands.
type RegisterState uint8

// Registration states.
const (
	Registered RegisterState = iota // the name is ours; its lease is renewed
	Conflict                        // another node holds the name
	Retrying                        // the DHT did not answer; trying again
	Invalid                         // the name or its addresses cannot be registered
)

func (s RegisterState) String() string {
	return [...]string{"registered", "conflict", "retrying", "invalid"}[s]
}

// RegisterResult reports a registration.
type RegisterResult struct {
	Name  string
	State RegisterState
	// Holder and Addrs are the other node and its addresses, on Conflict.
	Holder nid.ID
	Addrs  []netip.Addr
}

type registration struct {
	name     string
	value    []byte
	state    RegisterState
	reported bool // cb heard the first outcome
	holder   nid.ID
	theirs   []netip.Addr
	next     time.Time // when to write or renew next
	inFlight bool
	cb       func(RegisterResult)
}

func (g *registration) result() RegisterResult {
	return RegisterResult{Name: g.name, State: g.state, Holder: g.holder, Addrs: slices.Clone(g.theirs)}
}

// Register claims name (relative to the domain; "web" or "db.eu") for
// addrs, first come first served, and keeps it while the resolver runs.
// cb, if set, hears the outcome and every later change of state — a
// conflict when another node holds the name, or later takes it over
// after a lapse.
func (r *Resolver) Register(name string, addrs []netip.Addr, now time.Time, cb func(RegisterResult)) {
	canon, err := canonicalName(name)
	value := encodeAddrs(addrs)
	if err != nil || len(addrs) == 0 || len(value) > dht.DefaultMaxValueLen || len(decodeAddrs(value)) != len(addrs) {
		if cb != nil {
			cb(RegisterResult{Name: name, State: Invalid})
		}
		return
	}
	// A registration in flight for the name is superseded: its answer is
	// ignored, and this one overwrites whatever it wrote.
	g := &registration{name: canon, value: value, state: Retrying, cb: cb}
	r.names[canon] = g
	r.claim(g, now)
}

// Unregister stops renewing name and deletes it from the DHT.
func (r *Resolver) Unregister(name string, now time.Time) {
	canon, err := canonicalName(name)
	if err != nil || r.names[canon] == nil {
		return
	}
	delete(r.names, canon)
	r.kv.Delete(r.key(canon), now, func(dht.Result) {})
}

// Names reports the registrations.
func (r *Resolver) Names() []RegisterResult {
	var out []RegisterResult
	for _, g := range r.names {
		out = append(out, g.result())
	}
	slices.SortFunc(out, func(a, b RegisterResult) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r *Resolver) claim(g *registration, now time.Time) {
	g.inFlight = true
	value := g.value
	r.kv.PutIfAbsent(r.key(g.name), value, r.cfg.NameTTL, now, func(res dht.Result) {
		g.inFlight = false
		switch {
		case r.names[g.name] != g:
			// Unregistered meanwhile.
		case res.Status == dht.OK:
			r.settle(g, Registered, res.At.Add(r.cfg.NameTTL/3))
		case res.Status == dht.Exists && res.Owner == r.self:
			// Ours with other addresses: overwrite.
			g.inFlight = true
			r.kv.Put(r.key(g.name), value, r.cfg.NameTTL, res.At, func(res dht.Result) {
				g.inFlight = false
				r.afterWrite(g, res)
			})
		case res.Status == dht.Exists:
			if g.state != Conflict || !g.reported {
				r.log.Warn("vdns: name already registered by another node", "name", g.name, "holder", res.Owner)
			}
			g.holder, g.theirs = res.Owner, decodeAddrs(res.Value)
			r.settle(g, Conflict, res.At.Add(r.cfg.NameTTL/3))
		case res.Status == dht.TooLarge || res.Status == dht.Invalid:
			r.settle(g, Invalid, time.Time{}) // the DHT's limits are tighter than ours
		default:
			r.settle(g, Retrying, res.At.Add(retryInterval))
		}
	})
}

func (r *Resolver) afterWrite(g *registration, res dht.Result) {
	if r.names[g.name] != g {
		return
	}
	if res.Status == dht.OK {
		r.settle(g, Registered, res.At.Add(r.cfg.NameTTL/3))
		return
	}
	r.settle(g, Retrying, res.At.Add(retryInterval))
}

// settle records an outcome and when to act next, telling cb about the
// first outcome and every change after it.
func (r *Resolver) settle(g *registration, state RegisterState, next time.Time) {
	changed := !g.reported || g.state != state
	g.state, g.next, g.reported = state, next, true
	if state != Conflict {
		g.holder, g.theirs = nid.ID{}, nil
	}
	if changed && g.cb != nil {
		g.cb(g.result())
	}
}

// tickNames renews registered names and retries the others: a name held
// by another node is taken once its holder lets it lapse.
func (r *Resolver) tickNames(now time.Time) {
	for _, name := range sortedNames(r.names) {
		g := r.names[name]
		if g.inFlight || g.next.IsZero() || now.Before(g.next) {
			continue
		}
		if g.state != Registered {
			r.claim(g, now)
			continue
		}
		g.inFlight = true
		r.kv.Renew(r.key(g.name), r.cfg.NameTTL, now, func(res dht.Result) {
			g.inFlight = false
			if r.names[g.name] != g {
				return
			}
			switch res.Status {
			case dht.OK:
				g.next = res.At.Add(r.cfg.NameTTL / 3)
			case dht.NotFound:
				r.claim(g, res.At) // lapsed; probably still free
			case dht.Denied:
				g.holder = res.Owner
				r.log.Warn("vdns: registered name taken over by another node after a lapse", "name", g.name, "holder", res.Owner)
				r.settle(g, Conflict, res.At.Add(r.cfg.NameTTL/3))
			default:
				g.next = res.At.Add(retryInterval)
			}
		})
	}
}

// retryInterval spaces attempts when the DHT does not answer.
const retryInterval = 5 * time.Second

func sortedNames(m map[string]*registration) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
