// Package metrics exposes a running node's status to Prometheus, in the
// text exposition format (version 0.0.4). The collector reads one status
// snapshot per scrape through a function, so it knows nothing of the
// daemon beyond the status it reports.
//
// It writes the format itself rather than through Prometheus's client
// library: that library's packages (protobuf descriptors, runtime
// collectors) initialize in every daemon whether metrics are on or not,
// and cost about 4 MiB of resident memory — a fifth of burrow's budget per
// node. The tests check the output with Prometheus's own parser.
package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"burrow/node"
	"burrow/runtime"
)

// StatusFunc returns a snapshot of the node's status.
type StatusFunc func() (runtime.Status, error)

const namespace = "burrow"

// metric describes one metric family. Its label names are in
// alphabetical order, as Prometheus's own libraries write them.
type metric struct {
	name, help, kind string // kind is counter or gauge
	labels           []string
}

func counterOf(name, help string, labels ...string) metric {
	return metric{namespace + "_" + name, help, "counter", labels}
}

func gaugeOf(name, help string, labels ...string) metric {
	return metric{namespace + "_" + name, help, "gauge", labels}
}

var (
	upDesc         = gaugeOf("up", "Whether the node answered the status request of this scrape.")
	infoDesc       = gaugeOf("info", "The node's name, network and node ID.", "name", "network", "node_id")
	linksDesc      = gaugeOf("links", "Links by state, kind (this node's main reason for the link) and path.", "kind", "path", "state")
	linkRxBytes    = counterOf("link_receive_bytes_total", "Bytes received from a peer over its current link.", "node_id", "peer")
	linkTxBytes    = counterOf("link_transmit_bytes_total", "Bytes sent to a peer over its current link.", "node_id", "peer")
	linkRxPackets  = counterOf("link_receive_packets_total", "Packets received from a peer over its current link.", "node_id", "peer")
	linkTxPackets  = counterOf("link_transmit_packets_total", "Packets sent to a peer over its current link.", "node_id", "peer")
	linkRTT        = gaugeOf("link_rtt_seconds", "Round trip of a link's last handshake.", "node_id", "peer")
	peerCertExpiry = gaugeOf("peer_certificate_expiry_timestamp_seconds", "When a linked peer's certificate expires, in seconds since 1970; its links end then.", "node_id", "peer")
	rxBytes        = counterOf("receive_bytes_total", "Bytes received over all links, including links that are gone.")
	txBytes        = counterOf("transmit_bytes_total", "Bytes sent over all links, including links that are gone.")
	rxPackets      = counterOf("receive_packets_total", "Packets received over all links, including links that are gone.")
	txPackets      = counterOf("transmit_packets_total", "Packets sent over all links, including links that are gone.")
	dropsDesc      = counterOf("drops_total", "Datagrams and frames dropped, by reason.", "reason")
	queueDropsDesc = counterOf("queue_drops_total", "Frames the data path's queues dropped so that bulk transfers do not delay other traffic: tap (the fair queues before encryption) and receive (CoDel on the socket reader's backlog).", "queue")
	floodsDesc     = counterOf("floods_total", "Bounded Flood broadcasts started here, received, and forwarded.", "event")
	handshakeDesc  = counterOf("handshakes_total", "Link handshakes by outcome.", "outcome")
	controlDesc    = counterOf("control_messages_total", "Overlay control messages sent, forwarded and received, by type.", "direction", "type")
	relayedDesc    = counterOf("relayed_datagrams_total", "Datagrams this node relayed for other members.")
	odOpenedDesc   = counterOf("on_demand_links_opened_total", "On-demand links opened for heavy traffic.")
	odClosedDesc   = counterOf("on_demand_links_closed_total", "On-demand links closed when traffic fell.")
	odActiveDesc   = gaugeOf("on_demand_links", "On-demand links open now.")
	macsDesc       = gaugeOf("learned_macs", "MAC addresses in the learning table.")
	flowsDesc      = gaugeOf("flows", "Unicast flows in the flow table.")
	ringSizeDesc   = gaugeOf("ring_size_estimate", "The node's estimate of the number of nodes on the ring.")
	joinedDesc     = gaugeOf("ring_joined", "Whether the node has found its place on the ring.")
	settledDesc    = gaugeOf("ring_settled", "Whether both of the node's ring neighbours confirm its place.")
	joinTimeDesc   = gaugeOf("ring_joined_after_seconds", "Seconds from the node's start until it joined the ring; 0 until it has.")
	unjoinsDesc    = counterOf("ring_unjoins_total", "Times the node stopped being joined after it had joined.")
	firewallDrops  = counterOf("firewall_dropped_frames_total", "Frames the firewall kept from entering or leaving the TAP.")
	firewallOpened = counterOf("firewall_connections_opened_total", "Connections a firewall rule allowed.")
	firewallConns  = gaugeOf("firewall_connections", "Connections the firewall tracks now.")
	certExpiry     = gaugeOf("certificate_expiry_timestamp_seconds", "When this node's certificate expires, in seconds since 1970; members refuse it after.")
	dhtRecords     = gaugeOf("dht_records", "DHT record copies this node holds, as primary or replica.")
	dhtOps         = counterOf("dht_operations_total", "This node's own DHT operations, by kind and result.", "op", "result")
	dhtConflicts   = counterOf("dht_conflicts_total", "Replica copies found that their primary lacked, and repaired.")
	dhtForged      = counterOf("dht_forged_total", "DHT writes, copies and answers refused because their owner's signature failed or was too old.")
	dhcpDesc       = counterOf("dhcp_messages_total", "DHCP answers sent and requests handled, by kind; exhausted counts allocations that found no free address.", "kind")
	dhcpLeases     = gaugeOf("dhcp_leases", "DHCP leases this node holds for its clients.")
	dnsDesc        = counterOf("dns_queries_total", "Virtual DNS queries, by result.", "result")
	arpAnswered    = counterOf("arp_answered_total", "ARP requests answered locally from the DHT, each a broadcast saved.")
	ndAnswered     = counterOf("nd_answered_total", "IPv6 neighbour solicitations answered locally from the DHT, each a multicast saved.")
	stunDesc       = counterOf("stun_requests_total", "STUN binding requests sent to discover this node's public address, and those answered.", "event")
	punchDesc      = counterOf("punch_probes_total", "Hole-punching probes sent to peers behind address-dependent NATs.")
	pubConns       = gaugeOf("publication_connections", "Open connections of each publication this node exposes as a gateway.", "listen", "member")
	pubAccepted    = counterOf("publication_accepted_total", "Connections a publication's listener accepted from outside.", "listen", "member")
	pubFailed      = counterOf("publication_failed_total", "Accepted connections closed because the member's service did not answer.", "listen", "member")
	pubRejected    = counterOf("publication_rejected_total", "Accepted connections closed at once because the publication relayed as many as it may.", "listen", "member")
	pubBytes       = counterOf("publication_bytes_total", "Bytes relayed for a publication: in, from outside clients to the member's service; out, back.", "direction", "listen", "member")
	goroutines     = metric{"go_goroutines", "Number of goroutines that currently exist.", "gauge", nil}
	residentBytes  = metric{"process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", nil}
)

// sample is one value of a family.
type sample struct {
	labels []string // values, in the order of the family's label names
	value  float64
}

// family is a metric with its samples of one scrape.
type family struct {
	metric
	samples []sample
}

// scrape collects the samples of one scrape, grouped by family in the
// order first added.
type scrape struct {
	order    []string
	families map[string]*family
}

func (s *scrape) add(m metric, v float64, labels ...string) {
	if len(labels) != len(m.labels) {
		panic("metrics: " + m.name + " takes labels " + strings.Join(m.labels, ","))
	}
	f := s.families[m.name]
	if f == nil {
		f = &family{metric: m}
		s.families[m.name] = f
		s.order = append(s.order, m.name)
	}
	f.samples = append(f.samples, sample{labels, v})
}

// count is a counter's value under one label value.
type count struct {
	label string
	n     uint64
}

// addEach adds one sample per count to a family with a single label.
func (s *scrape) addEach(m metric, counts ...count) {
	for _, c := range counts {
		s.add(m, float64(c.n), c.label)
	}
}

// Collector turns status snapshots into metrics.
type Collector struct {
	status StatusFunc

	mu sync.Mutex
	// totals keep counting the traffic of links that are gone, so that the
	// node's totals never go down when a link closes.
	totals   [4]float64
	lastSeen map[linkKey][4]uint64
}

// linkKey identifies one link while it exists.
type linkKey struct {
	port   uint32
	nodeID string
}

// NewCollector reads a status snapshot through status at every scrape.
func NewCollector(status StatusFunc) *Collector {
	return &Collector{status: status, lastSeen: map[linkKey][4]uint64{}}
}

// collect takes one status snapshot and turns it into samples.
func (c *Collector) collect() *scrape {
	s := &scrape{families: map[string]*family{}}
	st, err := c.status()
	if err != nil {
		s.add(upDesc, 0)
		return s
	}
	s.add(upDesc, 1)
	s.add(infoDesc, 1, st.Name, st.Network, st.NodeID)
	s.add(certExpiry, float64(st.Certificate.NotAfter.Unix()))
	if fw := st.Firewall; fw != nil {
		s.add(firewallDrops, float64(fw.Dropped))
		s.add(firewallOpened, float64(fw.Opened))
		s.add(firewallConns, float64(fw.Connections))
	}
	c.collectLinks(s, st)
	for _, reason := range sortedKeys(st.Drops) {
		s.add(dropsDesc, float64(st.Drops[reason]), reason)
	}
	s.addEach(queueDropsDesc, count{"tap", st.Queues.TAPDropped}, count{"receive", st.Queues.ReceiveDropped})
	s.addEach(floodsDesc, count{"started", st.Floods.Started}, count{"received", st.Floods.Received}, count{"forwarded", st.Floods.Forwarded})
	hs := st.Handshakes
	s.addEach(handshakeDesc, count{"started", hs.Started}, count{"completed", hs.Completed}, count{"rejected", hs.Rejected}, count{"invalid", hs.Invalid}, count{"rate_limited", hs.RateLimited}, count{"too_short", hs.TooShort}, count{"cookies", hs.Cookies})
	ov := st.Overlay
	for _, d := range []struct {
		direction string
		counts    map[string]uint64
	}{{"sent", ov.Sent}, {"forwarded", ov.Forwarded}, {"received", ov.Received}} {
		for _, typ := range sortedKeys(d.counts) {
			s.add(controlDesc, float64(d.counts[typ]), d.direction, typ)
		}
	}
	s.add(relayedDesc, float64(st.Relayed))
	s.add(odOpenedDesc, float64(ov.OnDemand.Opened))
	s.add(odClosedDesc, float64(ov.OnDemand.Closed))
	s.add(odActiveDesc, float64(ov.OnDemand.Active))
	s.add(macsDesc, float64(st.LearnedMACs))
	s.add(flowsDesc, float64(st.Flows))
	s.add(ringSizeDesc, ov.SizeEstimate)
	s.add(joinedDesc, boolValue(ov.Joined))
	s.add(settledDesc, boolValue(ov.Formation.Settled))
	s.add(joinTimeDesc, ov.Formation.JoinedAfter)
	s.add(unjoinsDesc, float64(ov.Formation.Unjoins))
	s.addEach(stunDesc, count{"sent", st.Reach.STUNSent}, count{"answered", st.Reach.STUNGot})
	s.add(punchDesc, float64(st.Reach.Punched))
	collectServices(s, st.Services)
	for _, p := range st.Publications {
		s.add(pubConns, float64(p.Open), p.Listen, p.Member)
		s.add(pubAccepted, float64(p.Accepted), p.Listen, p.Member)
		s.add(pubFailed, float64(p.Failed), p.Listen, p.Member)
		s.add(pubRejected, float64(p.Rejected), p.Listen, p.Member)
		s.add(pubBytes, float64(p.BytesIn), "in", p.Listen, p.Member)
		s.add(pubBytes, float64(p.BytesOut), "out", p.Listen, p.Member)
	}
	return s
}

func collectServices(s *scrape, sv node.ServicesStatus) {
	s.add(dhtRecords, float64(sv.DHT.Records))
	for _, o := range sv.DHT.Operations {
		s.add(dhtOps, float64(o.N), o.Op, o.Result)
	}
	s.add(dhtConflicts, float64(sv.DHT.Conflicts))
	s.add(dhtForged, float64(sv.DHT.Forged))
	if d := sv.DHCP; d != nil {
		s.addEach(dhcpDesc, count{"offer", d.Offers}, count{"ack", d.Acks}, count{"nak", d.Naks}, count{"inform", d.Informs},
			count{"release", d.Releases}, count{"decline", d.Declines}, count{"exhausted", d.Exhausted}, count{"ignored", d.Ignored})
		s.add(dhcpLeases, float64(len(sv.Leases)))
	}
	if d := sv.DNS; d != nil {
		s.addEach(dnsDesc, count{"answered", d.Answered}, count{"nxdomain", d.NXDomain}, count{"refused", d.Refused}, count{"servfail", d.ServFail},
			count{"formerr", d.FormErr}, count{"forwarded", d.Forwarded}, count{"dropped", d.Dropped})
	}
	s.add(arpAnswered, float64(sv.ARPAnswered))
	s.add(ndAnswered, float64(sv.NDAnswered))
}

func sortedKeys[V any](m map[string]V) []string {
	return sortedBy(m, func(k string) string { return k })
}

// sortedBy returns m's keys in the order of their sort strings, so that
// every scrape lists series in the same order.
func sortedBy[K comparable, V any](m map[K]V, by func(K) string) []K {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(by(a), by(b)) })
	return keys
}

// linkKind is the main reason this node keeps a link, the most structural
// first; "peer" when only the other end wants it, "none" when neither
// says (yet).
func linkKind(local, remote []string) string {
	for _, k := range []string{"successor", "long-distance", "on-demand", "static", "bootstrap"} {
		for _, r := range local {
			if r == k {
				return k
			}
		}
	}
	if len(remote) > 0 {
		return "peer"
	}
	return "none"
}

func (c *Collector) collectLinks(s *scrape, st runtime.Status) {
	reasons := map[string][2][]string{}
	for _, ol := range st.Overlay.Links {
		reasons[ol.Peer] = [2][]string{ol.Local, ol.Remote}
	}
	type labels struct{ state, kind, path string }
	counts := map[labels]int{}
	type peerKey struct{ name, id string }
	perPeer := map[peerKey][4]uint64{}
	rtt := map[peerKey]float64{}
	certExpiries := map[peerKey]float64{}

	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[linkKey][4]uint64{}
	for _, l := range st.Links {
		r := reasons[l.NodeID]
		counts[labels{l.State, linkKind(r[0], r[1]), l.Path}]++
		now := [4]uint64{l.RxBytes, l.TxBytes, l.RxPackets, l.TxPackets}
		key := linkKey{l.Port, l.NodeID}
		before := c.lastSeen[key]
		for i := range now {
			if now[i] >= before[i] {
				c.totals[i] += float64(now[i] - before[i])
			} else { // the link was replaced under the same key
				c.totals[i] += float64(now[i])
			}
		}
		seen[key] = now
		if l.Peer == "" {
			continue // not authenticated yet: no name to label it with
		}
		pk := peerKey{l.Peer, shortID(l.NodeID)}
		sum := perPeer[pk]
		for i := range now {
			sum[i] += now[i]
		}
		perPeer[pk] = sum
		if l.RTT > 0 {
			rtt[pk] = l.RTT / 1000
		}
		if !l.CertNotAfter.IsZero() {
			certExpiries[pk] = float64(l.CertNotAfter.Unix())
		}
	}
	c.lastSeen = seen

	for _, lb := range sortedBy(counts, func(l labels) string { return l.kind + " " + l.path + " " + l.state }) {
		s.add(linksDesc, float64(counts[lb]), lb.kind, lb.path, lb.state)
	}
	for _, pk := range sortedBy(perPeer, func(p peerKey) string { return p.name + " " + p.id }) {
		v := perPeer[pk]
		s.add(linkRxBytes, float64(v[0]), pk.id, pk.name)
		s.add(linkTxBytes, float64(v[1]), pk.id, pk.name)
		s.add(linkRxPackets, float64(v[2]), pk.id, pk.name)
		s.add(linkTxPackets, float64(v[3]), pk.id, pk.name)
	}
	for _, pk := range sortedBy(rtt, func(p peerKey) string { return p.name + " " + p.id }) {
		s.add(linkRTT, rtt[pk], pk.id, pk.name)
	}
	for _, pk := range sortedBy(certExpiries, func(p peerKey) string { return p.name + " " + p.id }) {
		s.add(peerCertExpiry, certExpiries[pk], pk.id, pk.name)
	}
	s.add(rxBytes, c.totals[0])
	s.add(txBytes, c.totals[1])
	s.add(rxPackets, c.totals[2])
	s.add(txPackets, c.totals[3])
}

func shortID(id string) string { return id[:min(len(id), 8)] }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// process adds the Go runtime's and the process's basic metrics.
func process(s *scrape) {
	s.add(goroutines, float64(goruntime.NumGoroutine()))
	if data, err := readStatm(); err == nil {
		s.add(residentBytes, data)
	}
}

// readStatm reads the resident set from /proc/self/statm, in bytes.
func readStatm() (float64, error) {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var size, resident uint64
	if _, err := fmt.Fscan(f, &size, &resident); err != nil {
		return 0, err
	}
	return float64(resident) * float64(os.Getpagesize()), nil
}

// write renders a scrape in the text exposition format.
func write(w io.Writer, s *scrape) error {
	bw := bufio.NewWriter(w)
	for _, name := range s.order {
		f := s.families[name]
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", f.name, escapeHelp(f.help), f.name, f.kind)
		for _, smp := range f.samples {
			bw.WriteString(f.name)
			if len(f.labels) > 0 {
				bw.WriteByte('{')
				for i, l := range f.labels {
					if i > 0 {
						bw.WriteByte(',')
					}
					fmt.Fprintf(bw, "%s=\"%s\"", l, escapeLabel(smp.labels[i]))
				}
				bw.WriteByte('}')
			}
			bw.WriteByte(' ')
			bw.WriteString(formatValue(smp.value))
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Handler serves the node's metrics, and the Go runtime's and process's
// basics, in the Prometheus text format.
func Handler(status StatusFunc) http.Handler {
	c := NewCollector(status)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.collect()
		process(s)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		write(w, s)
	})
}

// Server serves /metrics on a listener until closed.
type Server struct {
	srv  *http.Server
	done chan struct{}
}

// Serve serves the metrics of status at /metrics on ln, logging a failure.
func Serve(ln net.Listener, status StatusFunc, log *slog.Logger) *Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(status))
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return s
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}
