package metrics

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"burrow/dht"
	"burrow/ipam"
	"burrow/node"
	"burrow/runtime"
	"burrow/runtime/publish"
	"burrow/vdns"
)

const (
	betaID  = "b2b2b2b2000000000000000000000000"
	gammaID = "c3c3c3c3000000000000000000000000"
)

func sampleStatus() runtime.Status {
	return runtime.Status{
		Name: "alpha", Network: "home",
		Queues:       runtime.QueueStatus{TAPDropped: 40, ReceiveDropped: 3},
		Certificate:  runtime.CertificateStatus{NotAfter: time.Unix(1800000000, 0)},
		Publications: []publish.Status{{Member: "board", Listen: "203.0.113.7:443", Open: 2, Accepted: 5, Failed: 1, Rejected: 3, BytesIn: 300, BytesOut: 7000}},
		Status: node.Status{
			NodeID: "a1a1a1a1000000000000000000000000",
			Links: []node.LinkStatus{
				{Peer: "beta", NodeID: betaID, Port: 1, State: "up", Path: "direct", RTT: 2, RxBytes: 1000, TxBytes: 400, RxPackets: 10, TxPackets: 4,
					CertNotAfter: time.Unix(1790000000, 0)},
				{Peer: "gamma", NodeID: gammaID, Port: 2, State: "up", Path: "relay", RxBytes: 500, TxBytes: 100, RxPackets: 5, TxPackets: 1},
				{Port: 3, State: "connecting", Path: "direct", TxBytes: 148, TxPackets: 1},
			},
			LearnedMACs: 7, Flows: 3,
			Drops:      map[string]uint64{"replay": 2, "auth_failed": 0},
			Handshakes: node.HandshakeStatus{Started: 4, Completed: 3, Rejected: 1, TooShort: 2, Cookies: 17},
			Floods:     node.FloodStatus{Started: 5, Received: 6, Forwarded: 9},
			Overlay: node.OverlayStatus{
				Enabled: true, Joined: true, SizeEstimate: 12.5,
				Links: []node.OverlayLink{
					{Peer: betaID, Local: []string{"long-distance", "successor"}, Remote: []string{}},
					{Peer: gammaID, Local: []string{}, Remote: []string{"long-distance"}},
				},
				Sent:      map[string]uint64{"find_successor": 3},
				Forwarded: map[string]uint64{"find_successor": 1},
				Received:  map[string]uint64{"notify": 8},
				OnDemand:  node.OnDemandStatus{Active: 1, Opened: 2, Closed: 1},
			},
			Reach: node.ReachStatus{STUNSent: 4, STUNGot: 3, Punched: 12},
			Services: node.ServicesStatus{
				DHT:         dht.Stats{Records: 9, Conflicts: 1, Forged: 3, Operations: []dht.OperationCount{{Op: "put-if-absent", Result: "ok", N: 2}, {Op: "get", Result: "timeout", N: 1}}},
				DHCP:        &ipam.Stats{Offers: 3, Acks: 2, Exhausted: 1},
				Leases:      []ipam.Lease{{}, {}},
				DNS:         &vdns.Stats{Answered: 5, NXDomain: 2},
				ARPAnswered: 11, NDAnswered: 4,
			},
		},
	}
}

// gather scrapes a collector and parses the text with Prometheus's own
// parser, which also checks the format: types, escaping, duplicate series.
func gather(t *testing.T, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf, c.collect()); err != nil {
		t.Fatal(err)
	}
	return parse(t, buf.Bytes())
}

func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, text)
	}
	return families
}

// value finds the sample of a family with exactly the given labels
// (name=value pairs); ok is false when there is none.
func value(families map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		var got []string
		for _, lp := range m.GetLabel() {
			got = append(got, lp.GetName()+"="+lp.GetValue())
		}
		want := slices.Clone(labels)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func TestCollectorReportsTheStatus(t *testing.T) {
	st := sampleStatus()
	fams := gather(t, NewCollector(func() (runtime.Status, error) { return st, nil }))
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"burrow_up", nil, 1},
		{"burrow_info", []string{"name=alpha", "network=home", "node_id=a1a1a1a1000000000000000000000000"}, 1},
		{"burrow_links", []string{"state=up", "kind=successor", "path=direct"}, 1},
		{"burrow_links", []string{"state=up", "kind=peer", "path=relay"}, 1},
		{"burrow_links", []string{"state=connecting", "kind=none", "path=direct"}, 1},
		{"burrow_link_receive_bytes_total", []string{"peer=beta", "node_id=b2b2b2b2"}, 1000},
		{"burrow_link_transmit_packets_total", []string{"peer=gamma", "node_id=c3c3c3c3"}, 1},
		{"burrow_link_rtt_seconds", []string{"peer=beta", "node_id=b2b2b2b2"}, 0.002},
		{"burrow_peer_certificate_expiry_timestamp_seconds", []string{"peer=beta", "node_id=b2b2b2b2"}, 1790000000},
		{"burrow_receive_bytes_total", nil, 1500},
		{"burrow_transmit_bytes_total", nil, 648},
		{"burrow_receive_packets_total", nil, 15},
		{"burrow_transmit_packets_total", nil, 6},
		{"burrow_drops_total", []string{"reason=replay"}, 2},
		{"burrow_drops_total", []string{"reason=auth_failed"}, 0},
		{"burrow_floods_total", []string{"event=started"}, 5},
		{"burrow_floods_total", []string{"event=received"}, 6},
		{"burrow_floods_total", []string{"event=forwarded"}, 9},
		{"burrow_handshakes_total", []string{"outcome=completed"}, 3},
		{"burrow_handshakes_total", []string{"outcome=rejected"}, 1},
		{"burrow_handshakes_total", []string{"outcome=too_short"}, 2},
		{"burrow_handshakes_total", []string{"outcome=cookies"}, 17},
		{"burrow_queue_drops_total", []string{"queue=tap"}, 40},
		{"burrow_queue_drops_total", []string{"queue=receive"}, 3},
		{"burrow_control_messages_total", []string{"direction=sent", "type=find_successor"}, 3},
		{"burrow_control_messages_total", []string{"direction=received", "type=notify"}, 8},
		{"burrow_on_demand_links_opened_total", nil, 2},
		{"burrow_on_demand_links_closed_total", nil, 1},
		{"burrow_on_demand_links", nil, 1},
		{"burrow_learned_macs", nil, 7},
		{"burrow_flows", nil, 3},
		{"burrow_ring_size_estimate", nil, 12.5},
		{"burrow_ring_joined", nil, 1},
		{"burrow_stun_requests_total", []string{"event=answered"}, 3},
		{"burrow_punch_probes_total", nil, 12},
		{"burrow_certificate_expiry_timestamp_seconds", nil, 1800000000},
		{"burrow_dht_records", nil, 9},
		{"burrow_dht_operations_total", []string{"op=put-if-absent", "result=ok"}, 2},
		{"burrow_dht_operations_total", []string{"op=get", "result=timeout"}, 1},
		{"burrow_dht_conflicts_total", nil, 1},
		{"burrow_dht_forged_total", nil, 3},
		{"burrow_dhcp_messages_total", []string{"kind=offer"}, 3},
		{"burrow_dhcp_messages_total", []string{"kind=exhausted"}, 1},
		{"burrow_dhcp_leases", nil, 2},
		{"burrow_dns_queries_total", []string{"result=nxdomain"}, 2},
		{"burrow_arp_answered_total", nil, 11},
		{"burrow_nd_answered_total", nil, 4},
		{"burrow_publication_connections", []string{"listen=203.0.113.7:443", "member=board"}, 2},
		{"burrow_publication_accepted_total", []string{"listen=203.0.113.7:443", "member=board"}, 5},
		{"burrow_publication_failed_total", []string{"listen=203.0.113.7:443", "member=board"}, 1},
		{"burrow_publication_rejected_total", []string{"listen=203.0.113.7:443", "member=board"}, 3},
		{"burrow_publication_bytes_total", []string{"direction=in", "listen=203.0.113.7:443", "member=board"}, 300},
		{"burrow_publication_bytes_total", []string{"direction=out", "listen=203.0.113.7:443", "member=board"}, 7000},
	} {
		got, ok := value(fams, tc.name, tc.labels...)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := value(fams, "burrow_link_rtt_seconds", "peer=gamma", "node_id=c3c3c3c3"); ok {
		t.Error("a link without an RTT measurement reports one")
	}
	if f := fams["burrow_link_receive_bytes_total"]; len(f.GetMetric()) != 2 {
		t.Errorf("per-peer series for %d peers, want 2 (the unnamed connecting link has none)", len(f.GetMetric()))
	}
}

func TestTotalsKeepTheTrafficOfClosedLinks(t *testing.T) {
	st := sampleStatus()
	c := NewCollector(func() (runtime.Status, error) { return st, nil })
	gather(t, c)
	// beta's link closes; gamma's carries 100 more bytes; a new link to
	// beta starts from zero on another port.
	st.Links = []node.LinkStatus{
		{Peer: "gamma", NodeID: gammaID, Port: 2, State: "up", RxBytes: 600},
		{Peer: "beta", NodeID: betaID, Port: 4, State: "up", RxBytes: 30},
	}
	fams := gather(t, c)
	if got, _ := value(fams, "burrow_receive_bytes_total"); got != 1630 {
		t.Errorf("receive total %v after a link closed, want 1630 (1500 + 100 + 30)", got)
	}
	if got, _ := value(fams, "burrow_link_receive_bytes_total", "peer=beta", "node_id=b2b2b2b2"); got != 30 {
		t.Errorf("beta's per-link counter %v, want 30: it counts the current link", got)
	}
}

func TestFailedStatusReportsDown(t *testing.T) {
	fams := gather(t, NewCollector(func() (runtime.Status, error) { return runtime.Status{}, errors.New("daemon stopped") }))
	if got, ok := value(fams, "burrow_up"); !ok || got != 0 {
		t.Fatalf("burrow_up %v %v, want 0", got, ok)
	}
	if len(fams) != 1 {
		t.Errorf("a failed scrape reports %d families, want only burrow_up", len(fams))
	}
}

func TestServeAnswersOverHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, func() (runtime.Status, error) { return sampleStatus(), nil }, slog.New(slog.DiscardHandler))
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q, want the text exposition format", ct)
	}
	fams := parse(t, body)
	if got, _ := value(fams, "burrow_drops_total", "reason=replay"); got != 2 {
		t.Errorf("burrow_drops_total{reason=replay} = %v over HTTP, want 2", got)
	}
	if got, _ := value(fams, "go_goroutines"); got < 1 {
		t.Errorf("go_goroutines = %v, want at least 1", got)
	}
	if got, _ := value(fams, "process_resident_memory_bytes"); got < 1<<20 {
		t.Errorf("process_resident_memory_bytes = %v, want at least a MiB", got)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/metrics"); err == nil {
		t.Error("the server still answers after Close")
	}
}

func TestLabelValuesAreEscaped(t *testing.T) {
	st := sampleStatus()
	st.Name = "odd \"name\"\\with\nnewline"
	fams := gather(t, NewCollector(func() (runtime.Status, error) { return st, nil }))
	if _, ok := value(fams, "burrow_info", "name="+st.Name, "network=home", "node_id=a1a1a1a1000000000000000000000000"); !ok {
		t.Errorf("burrow_info lost the name %q through escaping", st.Name)
	}
}
