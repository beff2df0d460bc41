// Package metrics exposes a running node's status to Prometheus. The
// collector reads one status snapshot per scrape through a function, so it
// knows nothing of the daemon beyond the status it reports.
package metrics

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"burrow/runtime"
)

// StatusFunc returns a snapshot of the node's status.
type StatusFunc func() (runtime.Status, error)

const namespace = "burrow"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
}

var (
	upDesc        = desc("up", "Whether the node answered the status request of this scrape.")
	infoDesc      = desc("info", "The node's name, network and node ID.", "name", "network", "node_id")
	linksDesc     = desc("links", "Links by state, kind (this node's main reason for the link) and path.", "state", "kind", "path")
	linkRxBytes   = desc("link_receive_bytes_total", "Bytes received from a peer over its current link.", "peer", "node_id")
	linkTxBytes   = desc("link_transmit_bytes_total", "Bytes sent to a peer over its current link.", "peer", "node_id")
	linkRxPackets = desc("link_receive_packets_total", "Packets received from a peer over its current link.", "peer", "node_id")
	linkTxPackets = desc("link_transmit_packets_total", "Packets sent to a peer over its current link.", "peer", "node_id")
	linkRTT       = desc("link_rtt_seconds", "Round trip of a link's last handshake.", "peer", "node_id")
	rxBytes       = desc("receive_bytes_total", "Bytes received over all links, including links that are gone.")
	txBytes       = desc("transmit_bytes_total", "Bytes sent over all links, including links that are gone.")
	rxPackets     = desc("receive_packets_total", "Packets received over all links, including links that are gone.")
	txPackets     = desc("transmit_packets_total", "Packets sent over all links, including links that are gone.")
	dropsDesc     = desc("drops_total", "Datagrams and frames dropped, by reason.", "reason")
	floodsDesc    = desc("floods_total", "Bounded Flood broadcasts started here, received, and forwarded.", "event")
	handshakeDesc = desc("handshakes_total", "Link handshakes by outcome.", "outcome")
	controlDesc   = desc("control_messages_total", "Overlay control messages sent, forwarded and received, by type.", "direction", "type")
	odOpenedDesc  = desc("on_demand_links_opened_total", "On-demand links opened for heavy traffic.")
	odClosedDesc  = desc("on_demand_links_closed_total", "On-demand links closed when traffic fell.")
	odActiveDesc  = desc("on_demand_links", "On-demand links open now.")
	macsDesc      = desc("learned_macs", "MAC addresses in the learning table.")
	flowsDesc     = desc("flows", "Unicast flows in the flow table.")
	ringSizeDesc  = desc("ring_size_estimate", "The node's estimate of the number of nodes on the ring.")
	joinedDesc    = desc("ring_joined", "Whether the node has found its place on the ring.")
)

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

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, infoDesc, linksDesc, linkRxBytes, linkTxBytes, linkRxPackets, linkTxPackets, linkRTT,
		rxBytes, txBytes, rxPackets, txPackets, dropsDesc, floodsDesc, handshakeDesc, controlDesc,
		odOpenedDesc, odClosedDesc, odActiveDesc, macsDesc, flowsDesc, ringSizeDesc, joinedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.status()
	if err != nil {
		ch <- gauge(upDesc, 0)
		return
	}
	ch <- gauge(upDesc, 1)
	ch <- gauge(infoDesc, 1, st.Name, st.Network, st.NodeID)
	c.collectLinks(ch, st)
	for reason, n := range st.Drops {
		ch <- counter(dropsDesc, float64(n), reason)
	}
	ch <- counter(floodsDesc, float64(st.Floods.Started), "started")
	ch <- counter(floodsDesc, float64(st.Floods.Received), "received")
	ch <- counter(floodsDesc, float64(st.Floods.Forwarded), "forwarded")
	hs := st.Handshakes
	for outcome, n := range map[string]uint64{"started": hs.Started, "completed": hs.Completed, "rejected": hs.Rejected, "invalid": hs.Invalid, "rate_limited": hs.RateLimited} {
		ch <- counter(handshakeDesc, float64(n), outcome)
	}
	ov := st.Overlay
	for direction, counts := range map[string]map[string]uint64{"sent": ov.Sent, "forwarded": ov.Forwarded, "received": ov.Received} {
		for typ, n := range counts {
			ch <- counter(controlDesc, float64(n), direction, typ)
		}
	}
	ch <- counter(odOpenedDesc, float64(ov.OnDemand.Opened))
	ch <- counter(odClosedDesc, float64(ov.OnDemand.Closed))
	ch <- gauge(odActiveDesc, float64(ov.OnDemand.Active))
	ch <- gauge(macsDesc, float64(st.LearnedMACs))
	ch <- gauge(flowsDesc, float64(st.Flows))
	ch <- gauge(ringSizeDesc, ov.SizeEstimate)
	ch <- gauge(joinedDesc, boolValue(ov.Joined))
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

func (c *Collector) collectLinks(ch chan<- prometheus.Metric, st runtime.Status) {
	reasons := map[string][2][]string{}
	for _, ol := range st.Overlay.Links {
		reasons[ol.Peer] = [2][]string{ol.Local, ol.Remote}
	}
	type labels struct{ state, kind, path string }
	counts := map[labels]int{}
	type peerKey struct{ name, id string }
	perPeer := map[peerKey][4]uint64{}
	rtt := map[peerKey]float64{}

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
	}
	c.lastSeen = seen

	for lb, n := range counts {
		ch <- gauge(linksDesc, float64(n), lb.state, lb.kind, lb.path)
	}
	for pk, v := range perPeer {
		ch <- counter(linkRxBytes, float64(v[0]), pk.name, pk.id)
		ch <- counter(linkTxBytes, float64(v[1]), pk.name, pk.id)
		ch <- counter(linkRxPackets, float64(v[2]), pk.name, pk.id)
		ch <- counter(linkTxPackets, float64(v[3]), pk.name, pk.id)
	}
	for pk, seconds := range rtt {
		ch <- gauge(linkRTT, seconds, pk.name, pk.id)
	}
	ch <- counter(rxBytes, c.totals[0])
	ch <- counter(txBytes, c.totals[1])
	ch <- counter(rxPackets, c.totals[2])
	ch <- counter(txPackets, c.totals[3])
}

func shortID(id string) string { return id[:min(len(id), 8)] }

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Handler serves the node's metrics, and the Go runtime's and process's,
// in the Prometheus text format.
func Handler(status StatusFunc) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(status), prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
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
