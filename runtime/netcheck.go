package runtime

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"burrow/config"
	"burrow/nat"
	"burrow/runtime/wsock"
)

// NetcheckReport is what `burrow netcheck` finds out about this host's
// NAT, from sockets of its own (the daemon need not run).
type NetcheckReport struct {
	// UDP: a server answered over UDP.
	UDP bool `json:"udp"`
	// Servers are the STUN servers asked: the beacons, each at its own
	// port and the one after it (nat.SecondPort), and the TURN server when
	// one is configured.
	Servers []NetcheckServer `json:"servers"`
	// PublicAddresses are the distinct addresses the servers saw.
	PublicAddresses []string `json:"public_addresses"`
	// Mapping is the NAT's mapping behaviour (RFC 4787): none,
	// endpoint-independent, address-dependent, address-and-port-dependent,
	// dependent (one of the last two) or unknown; MappingWhy says what
	// showed it.
	Mapping    string `json:"mapping"`
	MappingWhy string `json:"mapping_why"`
	// PortAllocation is none, preserved, sequential, random or unknown.
	PortAllocation string `json:"port_allocation"`
	AllocationWhy  string `json:"port_allocation_why"`
	// Filtering is none (no NAT), address-and-port-dependent,
	// endpoint-independent-or-address-dependent (beacons have one address
	// each, so those two look alike) or unknown.
	Filtering    string `json:"filtering"`
	FilteringWhy string `json:"filtering_why"`
	// Mappings are every answer: which socket asked which server, and
	// what it saw, in the order the requests left.
	Mappings   []NetcheckMapping   `json:"mappings"`
	WebSockets []NetcheckWebSocket `json:"websockets,omitempty"`
	// NearestBeacon is the beacon that answered fastest, over UDP when
	// any did, else over WebSocket.
	NearestBeacon *NearestBeacon `json:"nearest_beacon,omitempty"`
}

// NetcheckServer is one STUN server and its answer to the first socket.
type NetcheckServer struct {
	Address  string  `json:"address"`
	Kind     string  `json:"kind"` // beacon or turn
	Answered bool    `json:"answered"`
	Mapped   string  `json:"mapped,omitempty"`
	RTTms    float64 `json:"rtt_ms,omitempty"`
}

// NetcheckMapping is one STUN answer.
type NetcheckMapping struct {
	LocalPort uint16 `json:"local_port"`
	Server    string `json:"server"`
	Mapped    string `json:"mapped"`
}

// NetcheckWebSocket is one beacon's WebSocket, and whether it opened.
type NetcheckWebSocket struct {
	URL   string  `json:"url"`
	OK    bool    `json:"ok"`
	RTTms float64 `json:"rtt_ms,omitempty"` // time to open it (TCP, TLS, upgrade)
	Error string  `json:"error,omitempty"`
}

// NearestBeacon is the fastest beacon and how it was reached.
type NearestBeacon struct {
	Address string  `json:"address"`
	Via     string  `json:"via"` // udp or websocket
	RTTms   float64 `json:"rtt_ms"`
}

// How netcheck asks: several sockets (the mappings of several show the
// port allocation), each asking every server, a few tries each.
const (
	netcheckSockets = 4
	netcheckTries   = 3
	netcheckWait    = 300 * time.Millisecond
	netcheckWSWait  = 3 * time.Second
)

// ErrNoBeacon: netcheck has nobody to ask.
var ErrNoBeacon = errors.New("no beacon configured: add one under beacons in the configuration; netcheck asks the beacons how they see this host")

type stunServer struct {
	addr netip.AddrPort
	kind string
}

// Netcheck asks every beacon (and the TURN server) from several sockets
// of its own how they see this host, opens each beacon's WebSocket, and
// classifies the NAT.
func Netcheck(ctx context.Context, cfg *config.Config) (NetcheckReport, error) {
	var servers []stunServer
	for _, b := range cfg.Beacons {
		servers = append(servers, stunServer{b.Addr, "beacon"})
		if second, ok := nat.SecondPort(b.Addr); ok {
			servers = append(servers, stunServer{second, "beacon-second-port"})
		}
	}
	if len(servers) == 0 {
		return NetcheckReport{}, ErrNoBeacon
	}
	if cfg.TURN != nil {
		servers = append(servers, stunServer{cfg.TURN.Addr, "turn"})
	}
	own, err := ownAddresses()
	if err != nil {
		return NetcheckReport{}, err
	}
	r := NetcheckReport{Servers: make([]NetcheckServer, len(servers)), PublicAddresses: []string{}, Mappings: []NetcheckMapping{}}
	for i, s := range servers {
		r.Servers[i] = NetcheckServer{Address: s.addr.String(), Kind: s.kind}
	}
	var obs []nat.Observation
	sent := 0
	for i := range netcheckSockets {
		answers, err := askFromNewSocket(ctx, servers, &sent)
		if err != nil {
			return r, err
		}
		if i == 0 {
			for _, a := range answers {
				srv := &r.Servers[slices.IndexFunc(servers, func(s stunServer) bool { return s.addr == a.Server })]
				srv.Answered, srv.Mapped, srv.RTTms = true, a.Mapped.String(), a.rtt.Seconds()*1000
			}
			if len(answers) == 0 {
				break // UDP is blocked: the other sockets would wait as long for nothing
			}
		}
		for _, a := range answers {
			obs = append(obs, a.Observation)
		}
	}
	slices.SortStableFunc(obs, func(a, b nat.Observation) int { return a.Sent - b.Sent })
	for _, o := range obs {
		r.Mappings = append(r.Mappings, NetcheckMapping{LocalPort: o.Local.Port(), Server: o.Server.String(), Mapped: o.Mapped.String()})
		if m := o.Mapped.String(); !slices.Contains(r.PublicAddresses, m) {
			r.PublicAddresses = append(r.PublicAddresses, m)
		}
	}
	r.UDP = len(obs) > 0
	isOwn := func(a netip.Addr) bool { return slices.Contains(own, a.Unmap()) }
	r.Mapping, r.MappingWhy = nat.ClassifyMapping(obs, isOwn)
	r.PortAllocation, r.AllocationWhy = nat.ClassifyAllocation(obs, isOwn)
	switch {
	case !r.UDP:
		r.Mapping, r.MappingWhy = nat.Undetermined, "no server answered over UDP: UDP is blocked on the way out, or every beacon is down"
		r.PortAllocation, r.AllocationWhy = nat.Undetermined, r.MappingWhy
		r.Filtering, r.FilteringWhy = nat.Undetermined, r.MappingWhy
	case r.Mapping == nat.MappingNone:
		r.Filtering, r.FilteringWhy = nat.FilteringNone, "no NAT (a host firewall may still filter)"
	default:
		r.Filtering, r.FilteringWhy = filtering(ctx, r.Servers)
	}
	for _, b := range cfg.Beacons {
		if b.WebSocket != "" {
			r.WebSockets = append(r.WebSockets, openWebSocket(ctx, b))
		}
	}
	r.NearestBeacon = nearestBeacon(r)
	return r, nil
}

// filtering asks a beacon that answered at both its ports, from a socket
// that has sent nothing yet, to answer a request at its second port from
// its own: whether that answer gets in tells whether the NAT lets in
// only the address and port a socket sent to.
func filtering(ctx context.Context, servers []NetcheckServer) (kind, why string) {
	for i, s := range servers[:len(servers)-1] {
		second := servers[i+1]
		if s.Kind != "beacon" || second.Kind != "beacon-second-port" || !s.Answered || !second.Answered {
			continue
		}
		from, err := askForTheOtherPort(ctx, netip.MustParseAddrPort(second.Address))
		switch {
		case err != nil:
			return nat.Undetermined, err.Error()
		case from == netip.MustParseAddrPort(s.Address):
			return nat.FilteringNotPortDependent, "an answer from " + s.Address + ", the beacon's other port, which this socket never sent to, got in; a server at another address would tell endpoint-independent from address-dependent"
		case from.IsValid():
			return nat.Undetermined, "the beacon at " + second.Address + " answered from the port it was asked at (an older burrow)"
		}
		return nat.FilteringAddressAndPortDependent, "no answer from " + s.Address + ", the beacon's other port, which this socket never sent to, got in, while " + second.Address + " answered"
	}
	return nat.Undetermined, "no beacon answered at both its ports (the second is the one after its own), which the test needs"
}

// askForTheOtherPort sends change-port requests to server from a new
// socket, and returns where an answer came from, the zero AddrPort when
// none did.
func askForTheOtherPort(ctx context.Context, server netip.AddrPort) (netip.AddrPort, error) {
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("netcheck: opening a UDP socket: %w", err)
	}
	defer conn.Close()
	var id nat.TxID
	if _, err := rand.Read(id[:]); err != nil {
		return netip.AddrPort{}, err
	}
	buf := make([]byte, 1500)
	for range netcheckTries {
		if _, err := conn.WriteToUDPAddrPort(nat.ChangePortRequest(id), server); err != nil {
			return netip.AddrPort{}, fmt.Errorf("netcheck: %w", err)
		}
		conn.SetReadDeadline(time.Now().Add(netcheckWait))
		for ctx.Err() == nil {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				break
			}
			if m, err := nat.Parse(buf[:n]); err == nil && !m.Request && m.TxID == id {
				return netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), nil
			}
		}
	}
	return netip.AddrPort{}, ctx.Err()
}

// answer is one server's answer to one socket.
type answer struct {
	nat.Observation
	rtt time.Duration
}

// askFromNewSocket opens a socket and asks every server from it, in
// order, numbering the requests from *sent on; unanswered requests are
// sent again, netcheckTries times in all.
func askFromNewSocket(ctx context.Context, servers []stunServer, sent *int) ([]answer, error) {
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, fmt.Errorf("netcheck: opening a UDP socket: %w", err)
	}
	defer conn.Close()
	local := netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(conn.LocalAddr().(*net.UDPAddr).Port))
	type request struct {
		server int
		order  int
		at     time.Time
	}
	pending := map[nat.TxID]request{}
	answered := map[int]answer{}
	order := make([]int, len(servers))
	for i := range servers {
		order[i] = *sent
		*sent++
	}
	buf := make([]byte, 1500)
	for range netcheckTries {
		for i, s := range servers {
			if _, ok := answered[i]; ok {
				continue
			}
			var id nat.TxID
			if _, err := rand.Read(id[:]); err != nil {
				return nil, err
			}
			pending[id] = request{server: i, order: order[i], at: time.Now()}
			if _, err := conn.WriteToUDPAddrPort(nat.BindingRequest(id), s.addr); err != nil {
				continue // unreachable now: counts as unanswered
			}
		}
		conn.SetReadDeadline(time.Now().Add(netcheckWait))
		for len(answered) < len(servers) && ctx.Err() == nil {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				break // the wait is over
			}
			m, err := nat.Parse(buf[:n])
			req, ok := pending[m.TxID]
			if err != nil || m.Request || !ok || servers[req.server].addr != netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) {
				continue
			}
			if _, done := answered[req.server]; !done {
				answered[req.server] = answer{nat.Observation{Local: local, Server: servers[req.server].addr, Mapped: m.Mapped, Sent: req.order}, time.Since(req.at)}
			}
		}
		if len(answered) == len(servers) || ctx.Err() != nil {
			break
		}
	}
	out := make([]answer, 0, len(answered))
	for i := range servers {
		if a, ok := answered[i]; ok {
			out = append(out, a)
		}
	}
	return out, ctx.Err()
}

// openWebSocket opens a beacon's WebSocket, as a node on a UDP-blocked
// site would, and closes it again.
func openWebSocket(ctx context.Context, b config.BeaconRef) NetcheckWebSocket {
	ctx, cancel := context.WithTimeout(ctx, netcheckWSWait)
	defer cancel()
	var tlsConfig *tls.Config
	if b.TLSInsecure {
		tlsConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // operator's explicit choice for tests
	}
	start := time.Now()
	c, err := wsock.Dial(ctx, wsock.ClientConfig{URL: b.WebSocket, TLS: tlsConfig, Deliver: func([]byte) {}})
	if err != nil {
		return NetcheckWebSocket{URL: b.WebSocket, Error: err.Error()}
	}
	took := time.Since(start)
	c.Close()
	return NetcheckWebSocket{URL: b.WebSocket, OK: true, RTTms: took.Seconds() * 1000}
}

func nearestBeacon(r NetcheckReport) *NearestBeacon {
	var best *NearestBeacon
	for _, s := range r.Servers {
		if s.Kind == "beacon" && s.Answered && (best == nil || s.RTTms < best.RTTms) {
			best = &NearestBeacon{Address: s.Address, Via: "udp", RTTms: s.RTTms}
		}
	}
	if best != nil {
		return best
	}
	for _, w := range r.WebSockets {
		if w.OK && (best == nil || w.RTTms < best.RTTms) {
			best = &NearestBeacon{Address: w.URL, Via: "websocket", RTTms: w.RTTms}
		}
	}
	return best
}

// ownAddresses are the addresses of this host's interfaces: a server
// that sees one of them sees the host without a NAT between.
func ownAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("netcheck: listing this host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}
