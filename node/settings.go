package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"burrow/dht"
	"burrow/ipam"
	"burrow/nid"
)

// Network-wide settings (IPOP's network configuration): DHCP options every
// node's DHCP server hands out, set once by any member whose certificate
// carries SettingsGroup (`burrow network set`), kept in one DHT record that
// every node reads. The record's value carries its writer's key and
// certificate, so that a reader checks the writer was allowed, not only
// that the writer signed it; the key is shared, so any allowed member may
// change what another set.

// SettingsGroup is the certificate group whose members may change the
// network's settings.
const SettingsGroup = "network-admin"

const (
	settingsKey = "net:settings"
	// settingsTTL is the record's lease; allowed members renew it.
	settingsTTL = 24 * time.Hour
	// settingsPoll is how often every node of a small network reads the
	// record; see settingsPollEvery.
	settingsPoll = 30 * time.Second
	// settingsRetry is how soon a read that found no holder of the record
	// reachable (a network still forming, or a holder just gone) is tried
	// again, rather than a whole period later.
	settingsRetry = 5 * time.Second
)

// settingsPollEvery is how long a node waits between reads of the record
// in a network of about size nodes: every node reads the one record, so
// in a large network each reads it as seldom as keeps the reads of all of
// them together near one a second, and the nodes that hold it are not
// swamped (at 1,000 nodes a read every 30 s made theirs the busiest links
// of an idle network, at 7 KB/s). A change reaches every node within the
// period. Allowed members renew the lease when they read, so the period
// stays well inside it.
func settingsPollEvery(size float64) time.Duration {
	return min(max(settingsPoll, time.Duration(size*float64(time.Second))), settingsTTL/8)
}

// NetworkSettings are the settings, as they travel and as status shows
// them.
type NetworkSettings struct {
	// DNSSearch is the domain DHCP clients search names in (options 15
	// and 119).
	DNSSearch string `json:"dns_search,omitempty"`
	// MTU is the interface MTU DHCP clients set (option 26).
	MTU int `json:"mtu,omitempty"`
	// Router is the default gateway DHCP clients get (option 3).
	Router string `json:"router,omitempty"`
	// Routes are static routes, prefix to gateway (option 121).
	Routes map[string]string `json:"routes,omitempty"`
}

// SettingNames lists the settings `burrow network set` takes; a route is
// route:PREFIX.
var SettingNames = []string{"dns_search", "mtu", "router", "route:PREFIX"}

// Set changes one setting; an empty value removes it. The error names the
// setting and what is wrong.
func (s *NetworkSettings) Set(name, value string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
	switch {
	case name == "dns_search":
		if value != "" && !validDomain(value) {
			return bad("%q is not a domain name such as corp.example", value)
		}
		s.DNSSearch = value
	case name == "mtu":
		if value == "" {
			s.MTU = 0
			break
		}
		mtu, err := strconv.Atoi(value)
		if err != nil || mtu < 576 || mtu > 9000 {
			return bad("%q is not an MTU from 576 to 9000", value)
		}
		s.MTU = mtu
	case name == "router":
		if a, err := netip.ParseAddr(value); value != "" && (err != nil || !a.Is4()) {
			return bad("%q is not an IPv4 address", value)
		}
		s.Router = value
	case strings.HasPrefix(name, "route:"):
		p, err := netip.ParsePrefix(strings.TrimPrefix(name, "route:"))
		if err != nil || !p.Addr().Is4() || p != p.Masked() || p.Bits() == 0 {
			return bad("%q is not an IPv4 network such as 10.20.0.0/16 (the default route is the router setting)", strings.TrimPrefix(name, "route:"))
		}
		if value == "" {
			delete(s.Routes, p.String())
			break
		}
		if a, err := netip.ParseAddr(value); err != nil || !a.Is4() {
			return bad("gateway %q is not an IPv4 address", value)
		}
		if s.Routes == nil {
			s.Routes = map[string]string{}
		}
		s.Routes[p.String()] = value
	default:
		return fmt.Errorf("%q is not a setting: want one of %s", name, strings.Join(SettingNames, ", "))
	}
	return nil
}

func validDomain(d string) bool {
	if len(d) > 253 {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "" {
			return false
		}
	}
	return true
}

// dhcpOptions are the settings as a DHCP server hands them out; every
// field was checked when it was set, or when the record was read.
func (s NetworkSettings) dhcpOptions() ipam.NetworkOptions {
	o := ipam.NetworkOptions{DomainSearch: s.DNSSearch, MTU: s.MTU}
	o.Router, _ = netip.ParseAddr(s.Router)
	for _, p := range slices.Sorted(maps.Keys(s.Routes)) {
		o.Routes = append(o.Routes, ipam.Route{Prefix: netip.MustParsePrefix(p), Via: netip.MustParseAddr(s.Routes[p])})
	}
	return o
}

// valid checks settings read from the DHT as Set would have.
func (s NetworkSettings) valid() error {
	var check NetworkSettings
	for name, value := range map[string]string{"dns_search": s.DNSSearch, "router": s.Router} {
		if err := check.Set(name, value); err != nil {
			return err
		}
	}
	if s.MTU != 0 {
		if err := check.Set("mtu", strconv.Itoa(s.MTU)); err != nil {
			return err
		}
	}
	for p, via := range s.Routes {
		if err := check.Set("route:"+p, via); err != nil {
			return err
		}
	}
	return nil
}

// SettingsStatus is what status shows: the settings and who set them.
type SettingsStatus struct {
	NetworkSettings
	SetBy   string    `json:"set_by,omitempty"` // node ID of the last writer
	Expires time.Time `json:"expires,omitzero"`
}

type settingsState struct {
	current SettingsStatus
	// lastRead is when the node last asked for the record, and share the
	// part of a poll period it waits after that, drawn at each read from
	// [½, 1) so that the nodes' reads spread over the period. The period
	// follows the size estimate until the next read is due: a node that
	// read while its estimate was still a first guess (every node, in a
	// cold start) reads next when the network it is in says, not 30 s
	// later; after a cold start of 2,000 nodes those second reads, all at
	// once, were the busiest traffic of the minute that followed.
	lastRead time.Time
	share    float64
	// retryAt, when set, is sooner: a read no holder answered.
	retryAt time.Time
}

// due is when the node reads the settings next.
func (st *settingsState) due(size float64) time.Time {
	if st.lastRead.IsZero() {
		return time.Time{}
	}
	next := st.lastRead.Add(time.Duration(st.share * float64(settingsPollEvery(size))))
	if !st.retryAt.IsZero() && st.retryAt.Before(next) {
		return st.retryAt
	}
	return next
}

// encodeSettings is the record's value: the writer's key and certificate,
// then the settings in JSON.
func (n *Node) encodeSettings(s NetworkSettings) ([]byte, error) {
	body, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	cert := n.cfg.Handshake.Cert
	b := append([]byte(nil), n.cfg.Handshake.Public[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cert)))
	b = append(b, cert...)
	return append(b, body...), nil
}

var errSettingsRecord = errors.New("not a settings record of an allowed member")

// decodeSettings reads a settings record owned by owner, checking that
// its writer is owner and a member allowed to write it.
func (n *Node) decodeSettings(value []byte, owner nid.ID, now time.Time) (NetworkSettings, error) {
	var s NetworkSettings
	if len(value) < 34 {
		return s, errSettingsRecord
	}
	key := [32]byte(value[:32])
	certLen := int(binary.BigEndian.Uint16(value[32:34]))
	if len(value) < 34+certLen || nid.FromPublicKey(key) != owner || !n.mayWriteSettings(value[34:34+certLen], key, now) {
		return s, errSettingsRecord
	}
	if err := json.Unmarshal(value[34+certLen:], &s); err != nil {
		return s, fmt.Errorf("settings record: %w", err)
	}
	return s, s.valid()
}

// mayWriteSettings reports whether the member with cert and key may change
// the network's settings.
func (n *Node) mayWriteSettings(cert []byte, key [32]byte, now time.Time) bool {
	p, err := n.verifyPeer(cert, key, now)
	return err == nil && slices.Contains(p.Groups, SettingsGroup)
}

// sharedSettings is the DHT's Shared rule: the settings key takes any
// allowed member's writes.
func (n *Node) sharedSettings(key string, cert []byte, writer [32]byte, now time.Time) (shared, allowed bool) {
	if key != settingsKey {
		return false, false
	}
	return true, n.mayWriteSettings(cert, writer, now)
}

// settingsTick reads the settings record every settingsPollEvery, at a
// time of its own within the period, and applies it; an allowed member
// renews a record whose lease runs low.
func (n *Node) settingsTick(now time.Time) {
	st := &n.settings
	if now.Before(st.due(n.ov.ring.EstimateSize())) {
		return
	}
	st.lastRead, st.share, st.retryAt = now, 0.5+n.ov.rng.Float64()/2, time.Time{}
	settled := !n.ov.formation.settled.IsZero()
	n.svc.kv.Get(settingsKey, now, func(r dht.Result) {
		if answered := r.Status == dht.OK || r.Status == dht.NotFound; !answered || !settled {
			// No holder answered (what was read last stays), or the node
			// asked before it had its place on the ring, maybe not of the
			// record's holders: ask again soon.
			st.retryAt = r.At.Add(settingsRetry + n.ov.jitter(settingsRetry))
		}
		if r.Status != dht.OK {
			return // nothing set, or nothing read
		}
		s, err := n.decodeSettings(r.Value, r.Owner, r.At)
		if err != nil {
			n.log.Warn("network settings record refused", "owner", r.Owner.Short(), "err", err)
			return
		}
		n.applySettings(SettingsStatus{NetworkSettings: s, SetBy: r.Owner.String(), Expires: r.Expires})
		if r.Expires.Sub(r.At) < settingsTTL/3 && n.mayWriteSettings(n.cfg.Handshake.Cert, n.cfg.Handshake.Public, r.At) {
			n.writeSettings(s, r.At, func(NetworkSettings, error) {})
		}
	})
}

func (n *Node) applySettings(s SettingsStatus) {
	n.settings.current = s
	if n.svc.dhcp != nil {
		n.svc.dhcp.SetNetworkOptions(s.dhcpOptions())
	}
}

// ChangeSetting sets one network-wide setting (an empty value removes
// it) in this node's name: it reads the record, changes the setting and
// writes the record back. done gets the settings now in force, or why not.
func (n *Node) ChangeSetting(name, value string, now time.Time, done func(NetworkSettings, error)) {
	n.now = now
	if !n.mayWriteSettings(n.cfg.Handshake.Cert, n.cfg.Handshake.Public, now) {
		done(NetworkSettings{}, fmt.Errorf("this node's certificate lacks group %s: only its members may change the network's settings", SettingsGroup))
		return
	}
	if err := new(NetworkSettings).Set(name, value); err != nil {
		done(NetworkSettings{}, err)
		return
	}
	n.svc.kv.Get(settingsKey, now, func(r dht.Result) {
		var s NetworkSettings
		switch r.Status {
		case dht.OK:
			var err error
			if s, err = n.decodeSettings(r.Value, r.Owner, r.At); err != nil {
				s = NetworkSettings{} // an unreadable record is replaced
			}
		case dht.NotFound:
		default:
			done(s, fmt.Errorf("reading the settings: %v", r.Status))
			return
		}
		if err := s.Set(name, value); err != nil {
			done(s, err)
			return
		}
		n.writeSettings(s, r.At, done)
	})
}

func (n *Node) writeSettings(s NetworkSettings, now time.Time, done func(NetworkSettings, error)) {
	value, err := n.encodeSettings(s)
	if err != nil {
		done(s, err)
		return
	}
	n.svc.kv.Put(settingsKey, value, settingsTTL, now, func(r dht.Result) {
		if r.Status != dht.OK {
			done(s, fmt.Errorf("writing the settings: %v", r.Status))
			return
		}
		n.applySettings(SettingsStatus{NetworkSettings: s, SetBy: n.self.String(), Expires: r.Expires})
		done(s, nil)
	})
}
