package vdns

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"burrow/dht"
	"burrow/dht/dhttest"
	"burrow/l2"
	"burrow/l2/udp4"
	"burrow/nid"

	"pgregory.net/rapid"
)

var (
	serverIP  = netip.MustParseAddr("10.5.0.2")
	serverMAC = l2.MAC{0xfe, 0xfd, 0, 0, 0, 2}
	clientMAC = l2.MAC{0x52, 0x54, 0, 0, 0, 9}
	clientIP  = netip.MustParseAddrPort("10.5.3.9:41000")
	start     = time.Unix(1_700_000_000, 0)
)

func baseConfig() Config {
	return Config{
		Domain:    "burrow.test",
		Network:   netip.MustParsePrefix("10.0.0.0/8"),
		Server:    serverIP,
		ServerMAC: serverMAC,
	}
}

// rig is resolvers on several nodes sharing one slow store.
type rig struct {
	t         *testing.T
	store     *dhttest.Store
	now       time.Time
	resolvers []*Resolver
	out       [][]byte
	forwards  []ForwardRequest
	results   map[string][]RegisterResult
}

func newRig(t *testing.T, nodes int, cfg Config) *rig {
	r := &rig{t: t, store: dhttest.NewStore(1), now: start, results: make(map[string][]RegisterResult)}
	r.store.MaxDelay = 100 * time.Millisecond
	for i := range nodes {
		res, err := New(cfg, nid.ID{byte(i + 1)}, r.store.Client(nid.ID{byte(i + 1)}),
			func(f []byte) { r.out = append(r.out, bytes.Clone(f)) },
			func(req ForwardRequest) { r.forwards = append(r.forwards, req) }, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.resolvers = append(r.resolvers, res)
	}
	return r
}

func (r *rig) run(d time.Duration) {
	end := r.now.Add(d)
	for r.now.Before(end) {
		r.now = r.now.Add(20 * time.Millisecond)
		r.store.Advance(r.now)
		for _, res := range r.resolvers {
			if next := res.NextDeadline(); !next.IsZero() && !r.now.Before(next) {
				res.Tick(r.now)
			}
		}
	}
}

func (r *rig) register(node int, name string, addrs ...string) {
	var as []netip.Addr
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	key := fmt.Sprint(node, "/", name)
	r.resolvers[node].Register(name, as, r.now, func(res RegisterResult) { r.results[key] = append(r.results[key], res) })
	r.run(time.Second)
}

func (r *rig) last(node int, name string) RegisterResult {
	got := r.results[fmt.Sprint(node, "/", name)]
	if len(got) == 0 {
		r.t.Fatalf("no outcome for %s on node %d", name, node)
	}
	return got[len(got)-1]
}

func queryFrame(t *testing.T, payload []byte) []byte {
	f, err := udp4.Append(nil, udp4.Datagram{SrcMAC: clientMAC, DstMAC: serverMAC, Src: clientIP, Dst: netip.AddrPortFrom(serverIP, 53), Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkReply asserts that a frame is a well-formed DNS answer to the test
// client and returns the message.
func (r *rig) checkReply(frame []byte) *dns.Msg {
	r.t.Helper()
	m, d := r.checkAnswer(frame)
	if d.DstMAC != clientMAC || d.Dst != clientIP {
		r.t.Fatalf("answer to %v %v", d.DstMAC, d.Dst)
	}
	return m
}

// checkAnswer asserts that a frame is a well-formed DNS answer from the
// server.
func (r *rig) checkAnswer(frame []byte) (*dns.Msg, udp4.Datagram) {
	r.t.Helper()
	ip := frame[l2.EthernetHeaderLen:]
	if l2.Checksum(ip[:udp4.IPv4HeaderLen], 0) != 0 {
		r.t.Fatal("bad IPv4 header checksum")
	}
	udp := ip[udp4.IPv4HeaderLen:]
	if l2.Checksum(udp, l2.PseudoHeaderSum(ip[12:16], ip[16:20], 17, len(udp))) != 0 {
		r.t.Fatal("bad UDP checksum")
	}
	d, err := udp4.Parse(frame)
	if err != nil {
		r.t.Fatal(err)
	}
	if d.SrcMAC != serverMAC || d.Src != netip.AddrPortFrom(serverIP, 53) {
		r.t.Fatalf("answer from %v %v", d.SrcMAC, d.Src)
	}
	var m dns.Msg
	if err := m.Unpack(d.Payload); err != nil {
		r.t.Fatalf("answer does not parse: %v", err)
	}
	if !m.Response {
		r.t.Fatal("answer without QR")
	}
	return &m, d
}

// ask sends a query to node's resolver and returns its answer, or nil.
func (r *rig) ask(node int, q *dns.Msg) *dns.Msg {
	r.t.Helper()
	payload, err := q.Pack()
	if err != nil {
		r.t.Fatal(err)
	}
	r.out = nil
	if !r.resolvers[node].HandleFrame(queryFrame(r.t, payload), r.now) {
		r.t.Fatal("query to the DNS address not consumed")
	}
	r.run(time.Second)
	if len(r.out) == 0 {
		return nil
	}
	if len(r.out) != 1 {
		r.t.Fatalf("%d answers", len(r.out))
	}
	m := r.checkReply(r.out[0])
	if m.Id != q.Id {
		r.t.Fatalf("answer ID %d to query %d", m.Id, q.Id)
	}
	return m
}

func question(name string, qtype uint16) *dns.Msg {
	q := new(dns.Msg)
	q.Id = 4242
	q.RecursionDesired = true
	q.Question = []dns.Question{{Name: dns.Fqdn(name), Qtype: qtype, Qclass: dns.ClassINET}}
	return q
}

func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		case *dns.PTR:
			out = append(out, rr.Ptr)
		}
	}
	return out
}

func expectAnswer(t *testing.T, m *dns.Msg, rcode int, want ...string) {
	t.Helper()
	if m == nil {
		t.Fatal("no answer")
	}
	if m.Rcode != rcode || strings.Join(answers(m), " ") != strings.Join(want, " ") {
		t.Fatalf("answer %s %v, want %s %v", dns.RcodeToString[m.Rcode], answers(m), dns.RcodeToString[rcode], want)
	}
}

func TestARPForTheServerAddressIsAnswered(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	res := r.resolvers[0]
	arp := func(sender, target string) []byte {
		b := l2.Ethernet{Dst: l2.Broadcast, Src: clientMAC, EtherType: l2.EtherTypeARP}.AppendHeader(nil)
		b, _ = l2.AppendARP(b, l2.ARP{Op: l2.ARPRequest, SenderMAC: clientMAC, SenderIP: netip.MustParseAddr(sender), TargetIP: netip.MustParseAddr(target)})
		return b
	}
	for _, sender := range []string{"10.5.3.9", "0.0.0.0"} { // a lookup, and a duplicate-address probe
		r.out = nil
		if !res.HandleFrame(arp(sender, "10.5.0.2"), r.now) || len(r.out) != 1 {
			t.Fatalf("ARP from %s: %d replies", sender, len(r.out))
		}
		eth, _ := l2.ParseEthernet(r.out[0])
		a, err := l2.ParseARP(r.out[0][eth.PayloadOffset:])
		if err != nil || eth.Dst != clientMAC || eth.Src != serverMAC || eth.EtherType != l2.EtherTypeARP ||
			a.Op != l2.ARPReply || a.SenderMAC != serverMAC || a.SenderIP != serverIP || a.TargetMAC != clientMAC || a.TargetIP.String() != sender {
			t.Fatalf("ARP reply %+v %+v %v", eth, a, err)
		}
	}
	r.out = nil
	if res.HandleFrame(arp("10.5.3.9", "10.5.3.10"), r.now) || len(r.out) != 0 {
		t.Fatal("ARP for another address consumed or answered")
	}
}

func TestAutomaticNamesFollowTheNetwork(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	expectAnswer(t, r.ask(0, question("C005123044.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.123.44")
	expectAnswer(t, r.ask(0, question("c005123044.BURROW.test", dns.TypeA)), dns.RcodeSuccess, "10.5.123.44")
	m := r.ask(0, question("C005123044.burrow.test", dns.TypeAAAA))
	expectAnswer(t, m, dns.RcodeSuccess)
	if len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA || !m.Authoritative {
		t.Fatalf("NODATA without SOA or AA: %v", m)
	}
	expectAnswer(t, r.ask(0, question("C300000000.burrow.test", dns.TypeA)), dns.RcodeNameError)

	cfg := baseConfig()
	cfg.Network = netip.MustParsePrefix("10.5.0.0/16")
	r = newRig(t, 1, cfg)
	expectAnswer(t, r.ask(0, question("C123044.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.123.44")
	expectAnswer(t, r.ask(0, question("44.123.5.10.in-addr.arpa", dns.TypePTR)), dns.RcodeSuccess, "C123044.burrow.test.")
}

func TestAutoNameMatchesThePaper(t *testing.T) {
	name, ok := AutoName(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParseAddr("10.5.123.44"))
	if !ok || name != "C005123044" {
		t.Fatalf("AutoName = %q, %v", name, ok)
	}
	if _, ok := AutoName(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParseAddr("11.0.0.1")); ok {
		t.Fatal("named an address outside the network")
	}
}

func TestAutoNamesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := [4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "addr"))
		bits := rapid.IntRange(1, 24).Draw(t, "bits")
		ip := netip.AddrFrom4(b)
		network := netip.PrefixFrom(ip, bits).Masked()
		name, ok := AutoName(network, ip)
		if !ok {
			t.Fatalf("no name for %v in %v", ip, network)
		}
		back, ok := ParseAutoName(network, name)
		if !ok || back != ip {
			t.Fatalf("%v -> %s -> %v", ip, name, back)
		}
		if !looksAutomatic(name) {
			t.Fatalf("%s does not look automatic", name)
		}
	})
}

func TestRegisteredNamesAnswerFromEveryNode(t *testing.T) {
	r := newRig(t, 3, baseConfig())
	r.register(0, "Web", "10.5.0.7", "fd00::7")
	if res := r.last(0, "Web"); res.State != Registered || res.Name != "web" {
		t.Fatalf("register: %+v", res)
	}
	for node := range 3 {
		expectAnswer(t, r.ask(node, question("web.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.0.7")
		expectAnswer(t, r.ask(node, question("WEB.burrow.test", dns.TypeAAAA)), dns.RcodeSuccess, "fd00::7")
		expectAnswer(t, r.ask(node, question("web.burrow.test", dns.TypeANY)), dns.RcodeSuccess, "10.5.0.7", "fd00::7")
	}
	r.register(1, "db.eu", "10.5.0.8")
	expectAnswer(t, r.ask(2, question("db.eu.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.0.8")
}

func TestConflictingRegistrationIsReported(t *testing.T) {
	r := newRig(t, 2, baseConfig())
	r.register(0, "web", "10.5.0.7")
	r.register(1, "web", "10.5.0.99")
	res := r.last(1, "web")
	if res.State != Conflict || res.Holder != (nid.ID{1}) || len(res.Addrs) != 1 || res.Addrs[0].String() != "10.5.0.7" {
		t.Fatalf("second registration: %+v", res)
	}
	expectAnswer(t, r.ask(1, question("web.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.0.7")
	if names := r.resolvers[1].Names(); len(names) != 1 || names[0].State != Conflict {
		t.Fatalf("Names = %+v", names)
	}
	// The holder leaves the name: the other node gets it on its next try.
	r.resolvers[0].Unregister("web", r.now)
	r.run(DefaultNameTTL/3 + time.Second)
	if res := r.last(1, "web"); res.State != Registered {
		t.Fatalf("after the holder let go: %+v", res)
	}
	expectAnswer(t, r.ask(0, question("web.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.0.99")
}

func TestSimultaneousRegistrationsHaveOneWinner(t *testing.T) {
	r := newRig(t, 5, baseConfig())
	for node := range 5 {
		r.resolvers[node].Register("contested", []netip.Addr{netip.AddrFrom4([4]byte{10, 5, 0, byte(node + 1)})}, r.now,
			func(res RegisterResult) { r.results[fmt.Sprint(node)] = append(r.results[fmt.Sprint(node)], res) })
	}
	r.run(time.Second)
	winners := 0
	for node := range 5 {
		got := r.results[fmt.Sprint(node)]
		if len(got) != 1 {
			t.Fatalf("node %d heard %d outcomes", node, len(got))
		}
		if got[0].State == Registered {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners", winners)
	}
}

func TestReregisteringWithNewAddressesOverwrites(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	r.register(0, "web", "10.5.0.7")
	r.register(0, "web", "10.5.0.8")
	if res := r.last(0, "web"); res.State != Registered {
		t.Fatalf("%+v", res)
	}
	expectAnswer(t, r.ask(0, question("web.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.0.8")
}

func TestRegisteredNamesOutliveTheirTTL(t *testing.T) {
	cfg := baseConfig()
	cfg.NameTTL = 3 * time.Second
	r := newRig(t, 2, cfg)
	r.register(0, "web", "10.5.0.7")
	r.run(20 * time.Second)
	expectAnswer(t, r.ask(1, question("web.burrow.test", dns.TypeA)), dns.RcodeSuccess, "10.5.0.7")
}

func TestInvalidRegistrationsAreRefused(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	for _, name := range []string{"", "C005123044", "c12", "bad_name", "-x", strings.Repeat("a", 64), "a..b"} {
		r.register(0, name, "10.5.0.7")
		if res := r.last(0, name); res.State != Invalid {
			t.Errorf("%q: %+v", name, res)
		}
	}
	r.register(0, "noaddr")
	if res := r.last(0, "noaddr"); res.State != Invalid {
		t.Errorf("no addresses: %+v", res)
	}
	r.store.MaxValueLen = 10 // a DHT with a tighter value limit
	r.register(0, "long", "10.5.0.7", "10.5.0.8")
	if res := r.last(0, "long"); res.State != Invalid || !r.resolvers[0].NextDeadline().IsZero() {
		t.Errorf("value over the DHT's limit: %+v", res)
	}
}

func TestUnknownNamesAndOutsideNames(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	m := r.ask(0, question("nobody.burrow.test", dns.TypeA))
	expectAnswer(t, m, dns.RcodeNameError)
	if len(m.Ns) != 1 || !m.Authoritative {
		t.Fatalf("NXDOMAIN without SOA: %v", m)
	}
	expectAnswer(t, r.ask(0, question("_sip._udp.burrow.test", dns.TypeSRV)), dns.RcodeNameError)
	expectAnswer(t, r.ask(0, question("example.org", dns.TypeA)), dns.RcodeRefused)
	expectAnswer(t, r.ask(0, question("1.1.168.192.in-addr.arpa", dns.TypePTR)), dns.RcodeRefused)
	m = r.ask(0, question("burrow.test", dns.TypeSOA))
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("apex SOA: %v", m)
	}
	if len(r.forwards) != 0 {
		t.Fatal("forwarded with forwarding off")
	}
}

func TestForwardingRelaysTheAnswer(t *testing.T) {
	cfg := baseConfig()
	cfg.Forward = true
	r := newRig(t, 1, cfg)
	res := r.resolvers[0]
	q := question("example.org", dns.TypeA)
	payload, _ := q.Pack()
	res.HandleFrame(queryFrame(t, payload), r.now)
	if len(r.forwards) != 1 || !bytes.Equal(r.forwards[0].Query, payload) || len(r.out) != 0 {
		t.Fatalf("forward requests %+v, %d frames", r.forwards, len(r.out))
	}
	upstream := new(dns.Msg)
	upstream.SetReply(q)
	upstream.Id = 777 // the runtime may have used its own ID upstream
	rr, _ := dns.NewRR("example.org. 300 IN A 93.184.216.34")
	upstream.Answer = append(upstream.Answer, rr)
	answer, _ := upstream.Pack()
	res.Forwarded(r.forwards[0].ID, answer, r.now)
	if len(r.out) != 1 {
		t.Fatalf("%d frames after the forwarded answer", len(r.out))
	}
	m := r.checkReply(r.out[0])
	if m.Id != q.Id || strings.Join(answers(m), " ") != "93.184.216.34" {
		t.Fatalf("relayed %v", m)
	}
	res.Forwarded(r.forwards[0].ID, answer, r.now) // a duplicate is ignored
	if len(r.out) != 1 {
		t.Fatal("answered twice")
	}

	// An answer to another question, and no answer at all: SERVFAIL.
	r.out, r.forwards = nil, nil
	res.HandleFrame(queryFrame(t, payload), r.now)
	other, _ := question("evil.example", dns.TypeA).SetReply(question("evil.example", dns.TypeA)).Pack()
	res.Forwarded(r.forwards[0].ID, other, r.now)
	res.HandleFrame(queryFrame(t, payload), r.now)
	r.run(cfg.ForwardTimeout + DefaultForwardTimeout)
	if len(r.out) != 2 {
		t.Fatalf("%d answers, want two SERVFAILs", len(r.out))
	}
	for _, f := range r.out {
		if m := r.checkReply(f); m.Rcode != dns.RcodeServerFailure || m.Id != q.Id {
			t.Fatalf("answer %v", m)
		}
	}
}

func TestMalformedQueriesGetFormErrOrNothing(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	res := r.resolvers[0]
	send := func(payload []byte) *dns.Msg {
		r.out = nil
		if !res.HandleFrame(queryFrame(t, payload), r.now) {
			t.Fatal("not consumed")
		}
		r.run(time.Second)
		if len(r.out) == 0 {
			return nil
		}
		return r.checkReply(r.out[0])
	}
	header := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	if m := send(append(header, 0xff, 0xff)); m == nil || m.Rcode != dns.RcodeFormatError || m.Id != 0x1234 {
		t.Fatalf("garbage question: %v", m)
	}
	if m := send([]byte{1, 2, 3}); m != nil {
		t.Fatal("answered a fragment of a header")
	}
	response := question("web.burrow.test", dns.TypeA)
	response.Response = true
	b, _ := response.Pack()
	if m := send(b); m != nil {
		t.Fatal("answered a response")
	}
	two := question("a.burrow.test", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "b.burrow.test.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	b, _ = two.Pack()
	if m := send(b); m == nil || m.Rcode != dns.RcodeFormatError {
		t.Fatalf("two questions: %v", m)
	}
	notify := question("burrow.test", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	b, _ = notify.Pack()
	if m := send(b); m == nil || m.Rcode != dns.RcodeNotImplemented {
		t.Fatalf("NOTIFY: %v", m)
	}
	chaos := question("version.bind", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	b, _ = chaos.Pack()
	if m := send(b); m == nil || m.Rcode != dns.RcodeRefused {
		t.Fatalf("CHAOS: %v", m)
	}
	tcp := append(l2.Ethernet{Dst: serverMAC, Src: clientMAC, EtherType: l2.EtherTypeIPv4}.AppendHeader(nil), make([]byte, 40)...)
	ip := tcp[l2.EthernetHeaderLen:]
	ip[0], ip[3], ip[9] = 0x45, 40, 6
	copy(ip[12:], []byte{10, 5, 3, 9, 10, 5, 0, 2})
	if !res.HandleFrame(tcp, r.now) {
		t.Fatal("TCP to the DNS address not consumed")
	}
	dhcp, _ := udp4.Append(nil, udp4.Datagram{SrcMAC: clientMAC, DstMAC: serverMAC, Src: netip.MustParseAddrPort("10.5.3.9:68"), Dst: netip.AddrPortFrom(serverIP, 67), Payload: []byte("renew")})
	if res.HandleFrame(dhcp, r.now) {
		t.Fatal("DHCP to the shared address consumed")
	}
}

func TestLargeAnswersAreTruncatedToWhatTheClientAccepts(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	var addrs []string
	for i := range 30 { // 30 AAAA records: more than 512 bytes, less than 1232
		addrs = append(addrs, fmt.Sprintf("fd00::%x", i+1))
	}
	r.register(0, "many", addrs...)
	m := r.ask(0, question("many.burrow.test", dns.TypeAAAA))
	if !m.Truncated || len(m.Answer) == 0 || len(m.Answer) == 30 {
		t.Fatalf("plain UDP: TC=%v with %d answers", m.Truncated, len(m.Answer))
	}
	q := question("many.burrow.test", dns.TypeAAAA)
	q.SetEdns0(4096, false)
	m = r.ask(0, q)
	if m.Truncated || len(m.Answer) != 30 || m.IsEdns0() == nil {
		t.Fatalf("EDNS: TC=%v with %d answers", m.Truncated, len(m.Answer))
	}
}

// The node hands its DHT participant over as the dht.Client.
var _ dht.Client = (*dht.Participant)(nil)

func TestNewValidates(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Domain = "" },
		func(c *Config) { c.Domain = "bad_domain.test" },
		func(c *Config) { c.Server = netip.MustParseAddr("fd00::53") },
		func(c *Config) { c.Network = netip.MustParsePrefix("10.5.0.0/25") },
		func(c *Config) { c.Forward = true },
	}
	for i, mutate := range bad {
		cfg := baseConfig()
		mutate(&cfg)
		var forward func(ForwardRequest)
		if i < 4 {
			forward = func(ForwardRequest) {}
		}
		if _, err := New(cfg, nid.ID{}, dhttest.NewStore(1).Client(nid.ID{}), func([]byte) {}, forward, nil); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

// FuzzHandleFrame feeds arbitrary frames, and arbitrary DNS payloads in
// well-formed frames, to a resolver: nothing may panic, and every frame it
// writes must be a valid ARP reply or DNS answer.
func FuzzHandleFrame(f *testing.F) {
	for _, q := range []*dns.Msg{question("web.burrow.test", dns.TypeA), question("C005123044.burrow.test", dns.TypeANY), question("44.123.5.10.in-addr.arpa", dns.TypePTR)} {
		b, _ := q.Pack()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := baseConfig()
		cfg.Forward = true
		r := newRig(t, 1, cfg)
		r.register(0, "web", "10.5.0.7")
		r.out = nil
		res := r.resolvers[0]
		res.HandleFrame(b, r.now)
		res.HandleFrame(queryFrame(t, b), r.now)
		for _, fw := range r.forwards {
			res.Forwarded(fw.ID, b, r.now)
		}
		r.run(cfg.ForwardTimeout + time.Second)
		for _, frame := range r.out {
			if eth, err := l2.ParseEthernet(frame); err == nil && eth.EtherType == l2.EtherTypeARP {
				continue
			}
			r.checkAnswer(frame)
		}
	})
}

// Every frame from the TAP passes through HandleFrame, so frames that are
// not for the DNS address must cost no allocation.
func TestOtherFramesCostNoAllocation(t *testing.T) {
	r := newRig(t, 1, baseConfig())
	res := r.resolvers[0]
	data, _ := udp4.Append(nil, udp4.Datagram{Src: clientIP, Dst: netip.MustParseAddrPort("10.5.0.10:5201"), Payload: make([]byte, 1400)})
	arp := l2.Ethernet{Dst: l2.Broadcast, Src: clientMAC, EtherType: l2.EtherTypeARP}.AppendHeader(nil)
	arp, _ = l2.AppendARP(arp, l2.ARP{Op: l2.ARPRequest, SenderMAC: clientMAC, SenderIP: netip.MustParseAddr("10.5.3.9"), TargetIP: netip.MustParseAddr("10.5.3.10")})
	for name, f := range map[string][]byte{"UDP data": data, "ARP for another host": arp} {
		if n := testing.AllocsPerRun(100, func() { res.HandleFrame(f, r.now) }); n != 0 {
			t.Errorf("%s: %v allocations per frame", name, n)
		}
	}
}

func BenchmarkHandleFrameNotDNS(b *testing.B) {
	res, _ := New(baseConfig(), nid.ID{}, dhttest.NewStore(1).Client(nid.ID{}), func([]byte) {}, nil, nil)
	frame, _ := udp4.Append(nil, udp4.Datagram{Src: clientIP, Dst: netip.MustParseAddrPort("10.5.0.10:5201"), Payload: make([]byte, 1400)})
	b.ReportAllocs()
	for b.Loop() {
		res.HandleFrame(frame, start)
	}
}

// FuzzDecodeAddrs: a name's DHT value comes from another member; reading
// it never panics, keeps only addresses, and what it keeps encodes and
// reads back the same.
func FuzzDecodeAddrs(f *testing.F) {
	f.Add([]byte("10.0.0.7"))
	f.Add([]byte("10.0.0.7,fd00::7"))
	f.Add([]byte("::ffff:10.0.0.7,fe80::1%eth0,,junk"))
	f.Fuzz(func(t *testing.T, v []byte) {
		addrs := decodeAddrs(v)
		if again := decodeAddrs(encodeAddrs(addrs)); !slices.Equal(again, addrs) {
			t.Fatalf("%q read as %v, which encodes and reads back as %v", v, addrs, again)
		}
	})
}
