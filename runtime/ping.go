package runtime

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"burrow/l2"

	"burrow/nid"
	"burrow/node"
)

// PingRequest asks the daemon to ping one member once.
type PingRequest struct {
	// Target is the member's certificate name, node ID (or its first
	// digits) or an address inside the network.
	Target  string        `json:"target"`
	Timeout time.Duration `json:"timeout"`
}

// PingAnswer is one ping's outcome, as `burrow ping` prints it.
type PingAnswer struct {
	Target   string  `json:"target"` // the member's name, or its short node ID
	NodeID   string  `json:"node_id"`
	Answered bool    `json:"answered"`
	RTTms    float64 `json:"rtt_ms,omitempty"`
	// Path is lan, direct, relay, turn, websocket or multi-hop.
	Path     string `json:"path,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Via is the relaying member (relay) or the neighbour the answer came
	// from (multi-hop); ViaPath is the kind of this node's link to it.
	Via     string `json:"via,omitempty"`
	ViaPath string `json:"via_path,omitempty"`
	Hops    int    `json:"hops,omitempty"`
}

// Limits of one ping request: the longest wait for an answer, and how
// long a member not known yet is looked for (the topology crawl and the
// DHT answer within a few round trips).
const (
	MaxPingTimeout = 30 * time.Second
	resolveFor     = 5 * time.Second
	resolveEvery   = 100 * time.Millisecond
)

// Ping sends one ping to the member req names and waits for its answer
// or its timeout.
func (d *Daemon) Ping(req PingRequest) (PingAnswer, error) {
	if req.Timeout <= 0 || req.Timeout > MaxPingTimeout {
		return PingAnswer{}, fmt.Errorf("ping timeout %v is not between 0 and %v", req.Timeout, MaxPingTimeout)
	}
	target, err := d.resolveMember(req.Target)
	if err != nil {
		return PingAnswer{}, err
	}
	answered := make(chan node.PingResult, 1)
	var refused error
	err = d.call(func() {
		refused = d.node.Ping(target, req.Timeout, time.Now(), func(r node.PingResult) { answered <- r })
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return PingAnswer{}, fmt.Errorf("%s: %w", req.Target, err)
	}
	var r node.PingResult
	select {
	case r = <-answered:
	case <-d.done:
		return PingAnswer{}, errors.New("daemon stopped")
	}
	a := PingAnswer{Target: r.Name, NodeID: r.Target.String(), Answered: r.Answered, Path: r.Path,
		Endpoint: r.Endpoint, Via: r.Via, ViaPath: r.ViaPath, Hops: r.Hops}
	if a.Target == "" {
		a.Target = req.Target
	}
	if r.Answered {
		a.RTTms = r.RTT.Seconds() * 1000
	}
	return a, nil
}

// resolveMember finds the member query names. One not known yet starts
// the topology crawl (which learns every member's name) and is looked
// for again until resolveFor passes. An address inside the network that
// no certificate of a linked member lists is resolved by this host's
// kernel, as it would for any packet to it (ARP or neighbour discovery
// over the overlay), and its MAC leads to the member behind it.
func (d *Daemon) resolveMember(query string) (nid.ID, error) {
	ip, notAddr := netip.ParseAddr(query)
	isAddr := notAddr == nil
	for _, p := range d.addrs {
		if isAddr && p.Addr() == ip.Unmap() {
			return nid.ID{}, fmt.Errorf("%s: %w", query, node.ErrPingSelf)
		}
	}
	give := time.Now().Add(resolveFor)
	asked := false
	for {
		var id nid.ID
		var found bool
		var ambiguous error
		mac, resolved := l2.MAC{}, false
		if isAddr && d.dev != nil {
			mac, resolved = kernelNeighbour(ip.Unmap())
		}
		err := d.call(func() {
			id, found, ambiguous = d.node.ResolveMember(query)
			if !found && resolved {
				id, found = d.node.BridgeOf(mac)
			}
			if !found && ambiguous == nil {
				d.node.CrawlTopology(time.Now())
			}
		})
		switch {
		case err != nil:
			return id, err
		case ambiguous != nil:
			return id, ambiguous
		case found:
			return id, nil
		case time.Now().After(give):
			return id, errors.New(notAMember(query))
		}
		if isAddr && !resolved && !asked && d.dev != nil {
			askKernelToResolve(ip.Unmap())
			asked = true
		}
		time.Sleep(resolveEvery)
	}
}

// kernelNeighbour is ip's MAC in this host's neighbour table, when the
// kernel has resolved it.
func kernelNeighbour(ip netip.Addr) (l2.MAC, bool) {
	family := netlink.FAMILY_V4
	if ip.Is6() {
		family = netlink.FAMILY_V6
	}
	neighs, err := netlink.NeighList(0, family)
	if err != nil {
		return l2.MAC{}, false
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP)
		if ok && a.Unmap() == ip && len(n.HardwareAddr) == 6 && n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) == 0 {
			return l2.MAC(n.HardwareAddr), true
		}
	}
	return l2.MAC{}, false
}

// askKernelToResolve sends one datagram to ip's discard port, so that the
// kernel resolves its MAC as for any packet to it; the datagram itself is
// dropped there.
func askKernelToResolve(ip netip.Addr) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 9)))
	if err != nil {
		return
	}
	c.Write([]byte{0})
	c.Close()
}

func notAMember(query string) string {
	return fmt.Sprintf("no member %q known to this node: give a member's certificate name (as burrow peers and the dashboard's map show it), its node ID or an address inside the network", query)
}
