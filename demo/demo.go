// Package demo runs a burrow network in network namespaces on this one
// machine: a beacon on the lab's internet and nodes on sites behind NAT
// routers, every node configured with nothing but the beacon's address.
// It waits for the nodes to find their places on the ring, pings between
// the sites over the virtual Ethernet, serves a dashboard of one node on
// this machine, and removes everything again when it ends.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"burrow/config"
	"burrow/dashboard"
	"burrow/netlab"
	"burrow/netlab/cluster"
)

// MinNodes is the fewest nodes the site layout takes: several on each site.
const MinNodes = 12

// ringTimeout bounds the wait for a consistent ring; the shared test
// machines are slow when busy.
const ringTimeout = 3 * time.Minute

// settleTimeout bounds the wait for relayed links to turn direct.
const settleTimeout = 30 * time.Second

// Options configure a demo run.
type Options struct {
	Nodes  int           // nodes on the sites, besides the beacon (at least MinNodes)
	Binary string        // the burrow executable the nodes run
	Hold   time.Duration // how long to keep the network up after the summary; 0 = until ctx ends
	// Dashboard is the address:port on this machine serving the dashboard
	// of one node; empty serves none.
	Dashboard string
}

// siteLayout is the demo's sites: a home and a campus whose NATs keep one
// mapping per socket (hole punching links them directly), a mobile carrier
// whose NAT maps every destination anew (links there need a relay), and
// an office whose firewall lets only TCP to port 443 out (its nodes reach
// the beacon over WebSocket, everyone else through the beacon's relay).
var siteLayout = []struct {
	name string
	nat  netlab.NAT
}{
	{"home", netlab.EndpointIndependent},
	{"campus", netlab.EndpointIndependent},
	{"mobile", netlab.Symmetric},
	{"office", netlab.UDPBlocked},
}

// webSocketPort is where the beacon takes WebSocket connections: the one
// port the office's firewall lets out.
const webSocketPort = 443

// Site is a NAT'd site and the nodes on its LAN.
type Site struct {
	*netlab.Site
	Nodes []*cluster.Node
}

// Network is the demo network: a beacon on the internet and the sites.
type Network struct {
	Lab    *netlab.Lab
	Net    *cluster.Network
	Beacon *cluster.Node
	Sites  []*Site
}

// siteSizes spreads nodes over the sites: the mobile and office sites get
// about a sixth each (at least two), the endpoint-independent ones share
// the rest evenly.
func siteSizes(nodes int) []int {
	sizes := make([]int, len(siteLayout))
	var shared []int // the endpoint-independent sites
	rest := nodes
	for i, site := range siteLayout {
		if site.nat == netlab.EndpointIndependent {
			shared = append(shared, i)
			continue
		}
		sizes[i] = max(2, nodes/6)
		rest -= sizes[i]
	}
	for k, i := range shared {
		sizes[i] = rest / len(shared)
		if k < rest%len(shared) {
			sizes[i]++
		}
	}
	return sizes
}

// virtualAddress is the i-th node's address on the virtual Ethernet.
func virtualAddress(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 42, 0, byte(i + 1)}), 24)
}

// checkNodes refuses node counts the layout cannot hold: fewer than a few
// per site, or more than the virtual /24 has addresses for.
func checkNodes(nodes int) error {
	if nodes < MinNodes || nodes > 250 {
		return fmt.Errorf("demo: --nodes must be between %d and 250, got %d", MinNodes, nodes)
	}
	return nil
}

// Build lays out the network on lab and writes every node's configuration;
// Start runs the nodes.
func Build(ctx context.Context, lab *netlab.Lab, binary string, nodes int) (*Network, error) {
	if err := checkNodes(nodes); err != nil {
		return nil, err
	}
	nw, err := cluster.New(lab, "demo", binary)
	if err != nil {
		return nil, err
	}
	n := &Network{Lab: lab, Net: nw}
	beaconHost, err := lab.AddHost("beacon")
	if err != nil {
		return nil, err
	}
	if n.Beacon, err = nw.AddNode(beaconHost, "beacon", virtualAddress(0)); err != nil {
		return nil, err
	}
	n.Beacon.Config.Beacon.Enabled = true
	n.Beacon.Config.Beacon.WebSocket.Listen = netip.AddrPortFrom(beaconHost.Addr, webSocketPort).String()
	for i, size := range siteSizes(nodes) {
		s, err := lab.AddSite(siteLayout[i].name, siteLayout[i].nat)
		if err != nil {
			return nil, err
		}
		site := &Site{Site: s}
		for j := range size {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			name := fmt.Sprintf("%s%d", s.Name, j+1)
			host, err := s.AddHost(name)
			if err != nil {
				return nil, err
			}
			node, err := nw.AddNode(host, name, virtualAddress(len(nw.Nodes)))
			if err != nil {
				return nil, err
			}
			node.Config.Beacons = []config.BeaconRef{n.BeaconRef()}
			site.Nodes = append(site.Nodes, node)
		}
		n.Sites = append(n.Sites, site)
	}
	for _, node := range nw.Nodes {
		// A quicker stabilization round lets the ring settle in seconds;
		// info logs keep a dozen daemons from loading a small machine.
		node.Config.Overlay.Stabilize = time.Second
		node.Config.Log.Level = "info"
	}
	return n, nil
}

// BeaconRef is all every node is told: the beacon's UDP address and its
// WebSocket URL.
func (n *Network) BeaconRef() config.BeaconRef {
	return config.BeaconRef{Address: n.Beacon.Endpoint().String(), WebSocket: "ws://" + n.Beacon.Config.Beacon.WebSocket.Listen + "/burrow"}
}

// Start runs every node, the beacon first.
func (n *Network) Start() error {
	for _, node := range n.Net.Nodes {
		if err := node.Start(); err != nil {
			return err
		}
	}
	return nil
}

// Nodes is every node on the sites, site by site.
func (n *Network) Nodes() []*cluster.Node {
	var out []*cluster.Node
	for _, s := range n.Sites {
		out = append(out, s.Nodes...)
	}
	return out
}

// RingOrder is every node, the beacon too, sorted by node ID.
func (n *Network) RingOrder() []*cluster.Node {
	ring := slices.Clone(n.Net.Nodes)
	slices.SortFunc(ring, func(a, b *cluster.Node) int { return a.ID.Compare(b.ID) })
	return ring
}

// Placed lists the nodes whose first successor, by their own status, is the
// true next node by ID; the ring is consistent when all are.
func (n *Network) Placed() (placed, misplaced []*cluster.Node) { return cluster.Placed(n.Net.Nodes) }

// progressBar draws a bar that redraws in place on a terminal and prints
// each change on its own line in a log.
type progressBar struct {
	w      io.Writer
	label  string
	redraw string
	shown  int
}

func newProgressBar(w io.Writer, label string) *progressBar {
	p := &progressBar{w: w, label: label, redraw: "\n", shown: -1}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.redraw = "\r"
		}
	}
	return p
}

func (p *progressBar) show(done, total int) {
	if done == p.shown {
		return
	}
	if p.shown >= 0 {
		fmt.Fprint(p.w, p.redraw)
	}
	filled := 30 * done / max(total, 1)
	fmt.Fprintf(p.w, "    [%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", 30-filled), done, total, p.label)
	p.shown = done
}

// WaitRing shows a progress bar while the nodes find their places, until
// the ring is consistent.
func (n *Network) WaitRing(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, ringTimeout)
	defer cancel()
	start := time.Now()
	bar := newProgressBar(w, "nodes know their successor")
	for {
		placed, misplaced := n.Placed()
		bar.show(len(placed), len(n.Net.Nodes))
		if len(misplaced) == 0 {
			fmt.Fprintf(w, " after %v\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			var names []string
			for _, node := range misplaced {
				names = append(names, node.Name)
			}
			fmt.Fprintln(w)
			return fmt.Errorf("the ring did not become consistent (still wrong: %s): %w", strings.Join(names, ", "), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Punchable tells whether hole punching can link nodes a and b directly:
// they share a site, both sites' NATs keep one mapping per socket, or one
// does and the other maps every destination anew (birthday probing).
func (n *Network) Punchable(a, b *cluster.Node) bool {
	sa, sb := n.SiteOf(a), n.SiteOf(b)
	if sa == nil || sb == nil {
		return false
	}
	easy := func(s *Site) bool { return s.NAT == netlab.EndpointIndependent }
	hard := func(s *Site) bool { return s.NAT == netlab.Symmetric }
	return sa == sb || easy(sa) && (easy(sb) || hard(sb)) || hard(sa) && easy(sb)
}

// PunchableLinks counts the up links between nodes that hole punching can
// link directly, and how many of them are direct (over the internet or
// their LAN) now.
func (n *Network) PunchableLinks() (direct, total int) {
	for _, a := range n.Nodes() {
		st, err := a.Status()
		if err != nil {
			continue
		}
		for _, l := range st.Links {
			b := n.nodeByID(l.NodeID)
			// Each link once, from the end with the smaller ID.
			if b == nil || l.State != "up" || !n.Punchable(a, b) || a.ID.Compare(b.ID) > 0 {
				continue
			}
			total++
			if l.Path == "direct" || l.Path == "lan" {
				direct++
			}
		}
	}
	return direct, total
}

// WaitDirect shows a progress bar while relayed links between punchable
// nodes turn direct, for at most d; some take longer, and the summary
// shows them as they are. It fails only when ctx ends.
func (n *Network) WaitDirect(ctx context.Context, w io.Writer, d time.Duration) error {
	deadline := time.After(d)
	bar := newProgressBar(w, "links between punchable NATs are direct")
	for {
		direct, total := n.PunchableLinks()
		bar.show(direct, total)
		if direct == total {
			fmt.Fprintln(w)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return ctx.Err()
		case <-deadline:
			fmt.Fprintf(w, "\n    %d still relayed after %v: a relayed link turns direct when a punch gets through\n", total-direct, d)
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (n *Network) nodeByID(id string) *cluster.Node {
	for _, node := range n.Net.Nodes {
		if node.ID.String() == id {
			return node
		}
	}
	return nil
}

// PingResult is one pinged pair.
type PingResult struct {
	From, To *cluster.Node
	// Path is how From's own link to To carries traffic (direct, relay,
	// turn, websocket), or "multi-hop" when the two have no link and
	// frames cross other nodes.
	Path     string
	Sent     int
	Received int
	RTT      time.Duration // mean of the replies
	Err      error
}

// pingCount is how many echo requests each pair sends after a first reply.
const pingCount = 5

// PingPairs lists what the demo pings: a representative pair for every
// pair of sites and within every site, preferring nodes that keep a link
// to each other (so the path shows how NAT traversal went), then every
// node to the beacon.
func (n *Network) PingPairs() [][2]*cluster.Node {
	var pairs [][2]*cluster.Node
	for i, a := range n.Sites {
		for _, b := range n.Sites[i:] {
			var candidates [][2]*cluster.Node
			for _, x := range a.Nodes {
				for _, y := range b.Nodes {
					if x != y && (a != b || x.Name < y.Name) {
						candidates = append(candidates, [2]*cluster.Node{x, y})
					}
				}
			}
			if len(candidates) == 0 {
				continue
			}
			pick := candidates[0]
			for _, c := range candidates {
				if c[0].PathTo(c[1]) != "" {
					pick = c
					break
				}
			}
			pairs = append(pairs, pick)
		}
	}
	for _, node := range n.Nodes() {
		pairs = append(pairs, [2]*cluster.Node{node, n.Beacon})
	}
	return pairs
}

// Ping pings every pair of PingPairs, a few at a time. Each pair first
// waits for one reply (the first frames find their way by flooding), then
// sends pingCount requests that are counted.
func (n *Network) Ping(ctx context.Context) []PingResult {
	pairs := n.PingPairs()
	results := make([]PingResult, len(pairs))
	slots := make(chan struct{}, 4)
	done := make(chan struct{})
	for i, p := range pairs {
		go func() {
			defer func() { done <- struct{}{} }()
			slots <- struct{}{}
			defer func() { <-slots }()
			results[i] = ping(ctx, p[0], p[1])
		}()
	}
	for range pairs {
		<-done
	}
	return results
}

func ping(ctx context.Context, from, to *cluster.Node) PingResult {
	r := PingResult{From: from, To: to}
	warm, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cluster.WaitFor(warm, "a first reply", func() bool {
		res, err := netlab.Ping(warm, from.Host, to.Address.Addr(), 1, 200*time.Millisecond)
		return err == nil && res.Received == 1
	})
	res, err := netlab.Ping(ctx, from.Host, to.Address.Addr(), pingCount, 200*time.Millisecond)
	r.Sent, r.Received, r.RTT, r.Err = res.Transmitted, res.Received, res.AvgRTT, err
	if r.Sent == 0 {
		r.Sent = pingCount
	}
	r.Path = from.PathTo(to)
	if r.Path == "" {
		r.Path = "multi-hop"
	}
	return r
}

// SiteOf is the site a node is on; nil for the beacon.
func (n *Network) SiteOf(node *cluster.Node) *Site {
	for _, s := range n.Sites {
		if slices.Contains(s.Nodes, node) {
			return s
		}
	}
	return nil
}

// siteName names a node's site and its NAT.
func (n *Network) siteName(node *cluster.Node) string {
	if s := n.SiteOf(node); s != nil {
		return fmt.Sprintf("%s (%s)", s.Name, s.NAT)
	}
	return "internet"
}

// PrintPings writes the results as a table.
func (n *Network) PrintPings(w io.Writer, results []PingResult) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    from\tsite\tto\tsite\tpath\tRTT\tlost\t")
	for _, r := range results {
		rtt := "-"
		if r.Received > 0 {
			rtt = fmt.Sprintf("%.2f ms", float64(r.RTT.Microseconds())/1000)
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t\n", r.From.Name, n.siteName(r.From), r.To.Name, n.siteName(r.To), r.Path, rtt, r.Sent-r.Received, r.Sent)
	}
	tw.Flush()
}

// Run builds, shows and tears down the demo network. It returns when the
// demo is over or ctx is cancelled (Ctrl-C), always cleaning up.
func Run(ctx context.Context, opts Options, w io.Writer) (err error) {
	if err := checkNodes(opts.Nodes); err != nil {
		return err
	}
	if err := netlab.Available(); err != nil {
		return fmt.Errorf("%w\n(the demo needs root and iproute2, iptables, iputils-ping: apt-get install -y iproute2 iptables iputils-ping)", err)
	}
	step := func(format string, args ...any) { fmt.Fprintf(w, "==> "+format+"\n", args...) }

	// The dashboard's port is taken first, so a busy one fails before
	// anything is built.
	var dashboardListener net.Listener
	if opts.Dashboard != "" {
		if dashboardListener, err = net.Listen("tcp", opts.Dashboard); err != nil {
			return fmt.Errorf("--dashboard %s: %w (choose a free port, or --dashboard \"\" for none)", opts.Dashboard, err)
		}
		defer dashboardListener.Close()
	}

	logs, err := os.MkdirTemp("", "burrow-demo-")
	if err != nil {
		return err
	}
	lab, err := netlab.New(netlab.Options{LogDir: logs})
	if err != nil {
		os.RemoveAll(logs)
		return err
	}
	defer func() {
		step("removing namespaces, links and processes of lab %s", lab.Prefix())
		err = errors.Join(err, lab.Close())
		if err == nil {
			os.RemoveAll(logs)
		} else {
			fmt.Fprintf(w, "the daemons' logs are kept in %s\n", logs)
		}
	}()
	n, err := Build(ctx, lab, opts.Binary, opts.Nodes)
	if err != nil {
		return interrupted(ctx, err)
	}
	step("lab %s (logs in %s): a beacon on the internet, %d nodes on %d sites behind NAT routers:", lab.Prefix(), lab.LogDir(), opts.Nodes, len(n.Sites))
	fmt.Fprintf(w, "    %-8s %-22s %s\n", "beacon", "internet "+n.Beacon.Host.Addr.String(), n.Beacon.Address.Addr())
	for _, s := range n.Sites {
		var names []string
		for _, node := range s.Nodes {
			names = append(names, node.Name)
		}
		fmt.Fprintf(w, "    %-8s %-22s %s\n", s.Name, s.NAT.String()+" NAT", strings.Join(names, " "))
	}
	step("every node knows only the beacon: UDP %s, WebSocket %s; starting %d daemons", n.BeaconRef().Address, n.BeaconRef().WebSocket, len(n.Net.Nodes))
	if err := n.Start(); err != nil {
		return err
	}
	watched := n.Sites[0].Nodes[0]
	if dashboardListener != nil {
		status, topology := dashboard.ControlSocket(watched.Config.ControlSocket)
		srv := dashboard.Serve(dashboardListener, status, topology, slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})))
		defer srv.Close()
		step("dashboard of %s: %s  (watch the ring form)", watched.Name, dashboard.URL(dashboardListener.Addr()))
	}
	// Ctrl-C ends the demo at any step; only the cleanup follows.
	step("waiting for the ring: each node's first successor must be the next node by ID")
	if err := n.WaitRing(ctx, w); err != nil {
		return interrupted(ctx, err)
	}
	step("waiting up to %v for hole punching to turn relayed links direct where the NATs allow", settleTimeout)
	if err := n.WaitDirect(ctx, w, settleTimeout); err != nil {
		return interrupted(ctx, err)
	}
	step("pinging over the virtual Ethernet: a pair per pair of sites, then every node to the beacon")
	results := n.Ping(ctx)
	if ctx.Err() != nil {
		return nil
	}
	n.PrintPings(w, results)
	var unreachable []string
	for _, r := range results {
		if r.Received == 0 {
			unreachable = append(unreachable, r.From.Name+"→"+r.To.Name)
		}
	}
	if st, err := watched.Status(); err == nil {
		step("links of %s (NAT %s; what `burrow peers` shows):", watched.Name, st.Reach.NAT)
		for _, l := range st.Links {
			fmt.Fprintf(w, "    %-10s %-10s %-6s %-30s rtt %6.2f ms  rx %d B  tx %d B\n", l.Peer, l.State, l.Path, l.Endpoint, l.RTT, l.RxBytes, l.TxBytes)
		}
	}
	for _, s := range n.Sites {
		if s.NAT == netlab.Symmetric {
			fmt.Fprintf(w, "\nTry it: ip netns exec %s ping %s   (%s to %s, behind the symmetric NAT)\n", watched.Host.Namespace, s.Nodes[0].Address.Addr(), watched.Name, s.Nodes[0].Name)
		}
	}
	if dashboardListener != nil {
		fmt.Fprintf(w, "Dashboard: %s\n", dashboard.URL(dashboardListener.Addr()))
	}
	if opts.Hold > 0 {
		fmt.Fprintf(w, "The network stays up for %v (Ctrl-C ends it sooner).\n", opts.Hold)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Hold)
		defer cancel()
	} else {
		fmt.Fprintln(w, "The network stays up until Ctrl-C.")
	}
	<-ctx.Done()
	if len(unreachable) > 0 {
		return fmt.Errorf("no reply at all between %s", strings.Join(unreachable, ", "))
	}
	return nil
}

// interrupted drops err when ctx ended, which is the user's Ctrl-C: the
// demo then just cleans up.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
