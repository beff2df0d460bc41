package bench

import (
	"net/netip"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
)

// pathClass is a kind of path a link can take in the NAT lab; it orders
// the report's rows.
type pathClass int

const (
	directToBeacon pathClass = iota
	holePunched
	webSocketToBeacon
	beaconRelay
	beaconRelayOverWebSocket
)

var pathClassTitles = [...]string{
	directToBeacon:           "direct to the public beacon",
	holePunched:              "direct, hole-punched",
	webSocketToBeacon:        "WebSocket to the beacon",
	beaconRelay:              "relayed by the beacon",
	beaconRelayOverWebSocket: "relayed by the beacon, one end on WebSocket",
}

func (c pathClass) String() string { return pathClassTitles[c] }

// statusPath is the path `burrow status` names for a link of the class.
func (c pathClass) statusPath() string {
	switch c {
	case webSocketToBeacon:
		return "websocket"
	case beaconRelay, beaconRelayOverWebSocket:
		return "relay"
	}
	return "direct"
}

// classify returns the path burrow has to settle on between nodes behind
// NATs of kinds x and y in the lab, where the beacon is the only node
// without a NAT (docs/nat-traversal.md): a UDP-blocked node reaches the
// beacon over WebSocket and everyone else through the beacon's relay; the
// public beacon is reached directly from any UDP-capable NAT; two
// endpoint-independent NATs punch through; a symmetric NAT anywhere else
// leaves only the relay.
func classify(x, y netlab.NAT) pathClass {
	pair := map[netlab.NAT]bool{x: true, y: true}
	switch {
	case pair[netlab.UDPBlocked] && pair[netlab.NoNAT]:
		return webSocketToBeacon
	case pair[netlab.UDPBlocked]:
		return beaconRelayOverWebSocket
	case pair[netlab.NoNAT]:
		return directToBeacon
	case pair[netlab.Symmetric]:
		return beaconRelay
	}
	return holePunched
}

// The lab's member sites, in the order they are built; the beacon is on
// the lab's internet.
var pathSites = []struct {
	name string
	nat  netlab.NAT
}{
	{"a", netlab.EndpointIndependent},
	{"b", netlab.EndpointIndependent},
	{"c1", netlab.Symmetric},
	{"c2", netlab.Symmetric},
	{"d", netlab.UDPBlocked},
}

// beaconWebSocketPort is where the beacon serves plain ws://, the port a
// UDP-blocked site lets out.
const beaconWebSocketPort = 443

// pathsSubnet holds the nodes' virtual addresses.
var pathsSubnet = netip.MustParsePrefix("10.78.0.0/24")

// pathNode is one burrow node of the NAT lab.
type pathNode struct {
	*cluster.Node
	nat  netlab.NAT   // NoNAT for the beacon
	site *netlab.Site // nil for the beacon
	// ended is closed when the running process ends; nil while stopped.
	ended chan struct{}
}

func (n *pathNode) start() error {
	if err := n.Node.Start(); err != nil {
		return err
	}
	ended, p := make(chan struct{}), n.Process
	go func() {
		p.Wait()
		close(ended)
	}()
	n.ended = ended
	return nil
}

func (n *pathNode) stop() error {
	n.ended = nil
	return n.Node.Stop()
}

// upPath is the path of n's link to peer when it is up, "" otherwise.
func (n *pathNode) upPath(peer *pathNode) string {
	st, err := n.Status()
	if err != nil {
		return ""
	}
	for _, l := range st.Links {
		if l.NodeID == peer.ID.String() && l.State == "up" {
			return l.Path
		}
	}
	return ""
}

// build adds the beacon, the sites and one node per site to the lab and
// configures them: every member knows only the beacon, and links to every
// other member.
func (r *pathsRun) build(lab *netlab.Lab) error {
	nw, err := cluster.New(lab, "paths", r.opts.Burrow)
	if err != nil {
		return err
	}
	add := func(host *netlab.Host, name string, site *netlab.Site) error {
		node, err := nw.AddNode(host, name, hostAddr(pathsSubnet, len(r.nodes)+1))
		if err != nil {
			return err
		}
		n := &pathNode{Node: node, nat: netlab.NoNAT, site: site}
		if site != nil {
			n.nat = site.NAT
		}
		r.nodes = append(r.nodes, n)
		r.byName[name], r.byID[node.ID.String()] = n, n
		return nil
	}
	beaconHost, err := lab.AddHost("beacon")
	if err != nil {
		return err
	}
	if err := add(beaconHost, "beacon", nil); err != nil {
		return err
	}
	r.beacon = r.nodes[0]
	for _, s := range pathSites {
		site, err := lab.AddSite(s.name+"-router", s.nat)
		if err != nil {
			return err
		}
		host, err := site.AddHost(s.name)
		if err != nil {
			return err
		}
		if err := add(host, s.name, site); err != nil {
			return err
		}
	}
	webSocket := netip.AddrPortFrom(beaconHost.Addr, beaconWebSocketPort)
	r.beacon.Config.Beacon.Enabled = true
	r.beacon.Config.Beacon.WebSocket.Listen = webSocket.String()
	for _, n := range r.nodes {
		// Debug logging would cost the data path time it does not spend
		// in production.
		n.Config.Log.Level = "info"
		n.Config.Links.Keepalive = pathsKeepalive
		n.Config.Links.DeadAfter = pathsDeadAfter
		n.Config.Overlay.Stabilize = pathsStabilize
		n.Config.Overlay.Successors = len(r.nodes) - 1 // a full mesh
		if n != r.beacon {
			n.Config.Beacons = []config.BeaconRef{{
				Address:   r.beacon.Endpoint().String(),
				WebSocket: "ws://" + webSocket.String() + "/burrow",
			}}
		}
	}
	return nil
}
