package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"burrow/dashboard/chromiumtest"
	"burrow/node"
	"burrow/runtime"
)

// ring is a small overlay: ten nodes, listed here out of ID order.
var ring = []node.TopologyNode{
	{ID: "e0000000000000000000000000000000", Name: "echo", Seen: true},
	{ID: "30000000000000000000000000000000", Name: "charlie", Seen: true},
	{ID: "a0000000000000000000000000000000", Name: "alpha", Seen: true},
	{ID: "10000000000000000000000000000000", Name: "beacon", Seen: true},
	{ID: "70000000000000000000000000000000", Name: "golf", Seen: true},
	{ID: "50000000000000000000000000000000", Name: "foxtrot", Seen: true},
	{ID: "c0000000000000000000000000000000", Name: "kilo", Seen: true},
	{ID: "90000000000000000000000000000000", Name: "india", Seen: true},
	{ID: "f0000000000000000000000000000000", Name: "", Seen: false}, // not answered yet
	{ID: "20000000000000000000000000000000", Name: "bravo", Seen: true},
}

// id returns the ID of the ring node with the given first hex digit.
func id(first string) string { return first + strings.Repeat("0", 31) }

// sampleTopology has the successor chords of the ring (each reported by
// both ends), chords of every other kind, paths other than direct, links
// known only from one end (one with no reason yet: its keeper holds it for
// the other end, which has not answered) and a link to a node missing from
// the node list.
func sampleTopology() node.TopologyView {
	v := node.TopologyView{Self: id("a"), Nodes: ring}
	order := "123579acef"
	for i := range order {
		from, to := id(order[i:i+1]), id(order[(i+1)%len(order):(i+1)%len(order)+1])
		v.Links = append(v.Links,
			node.TopologyLink{From: from, To: to, Reasons: []string{"successor"}, Path: "direct"},
			node.TopologyLink{From: to, To: from, Reasons: []string{}, Path: "direct"})
	}
	v.Links = append(v.Links,
		node.TopologyLink{From: id("a"), To: id("3"), Reasons: []string{"long-distance"}, Path: "relay"},
		node.TopologyLink{From: id("3"), To: id("a"), Reasons: []string{}, Path: "relay"},
		node.TopologyLink{From: id("5"), To: id("c"), Reasons: []string{"on-demand"}, Path: "direct"},
		node.TopologyLink{From: id("a"), To: id("1"), Reasons: []string{"beacon"}, Path: "direct"},
		node.TopologyLink{From: id("7"), To: id("e"), Reasons: []string{"static"}, Path: "turn"},
		node.TopologyLink{From: id("9"), To: id("d"), Reasons: []string{"long-distance"}, Path: "websocket"},
		node.TopologyLink{From: id("2"), To: id("9"), Reasons: []string{}, Path: "direct"},
	)
	return v
}

// Chords per kind in sampleTopology: one per pair of nodes, whichever ends
// report it; the link to d makes d an eleventh node.
var sampleKinds = map[string]int{"successor": 10, "long-distance": 2, "on-demand": 1, "beacon": 1, "other": 1, "unknown": 1}

func sampleStatus() runtime.Status {
	return runtime.Status{
		Name: "alpha", Network: "home", Listen: "10.200.1.2:51820",
		Status: node.Status{
			NodeID: id("a"),
			Links: []node.LinkStatus{
				{Peer: "kilo", NodeID: id("c"), Port: 1, State: "up", Path: "direct", Endpoint: "198.18.0.7:51820", RTT: 1.25, RxBytes: 123456, TxBytes: 7890, Cipher: "aes-256-gcm"},
				{Peer: "charlie", NodeID: id("3"), Port: 2, State: "up", Path: "relay", Endpoint: "relay 198.18.0.2:51820", RTT: 4.5},
			},
			LearnedMACs: 17, Flows: 4,
			Drops: map[string]uint64{"replay": 3, "bad_mac": 0, "unknown_peer": 2},
			Reach: node.ReachStatus{NAT: "endpoint-independent", Reflexive: []string{"198.18.0.9:40000"}, Beacon: id("1")},
			Overlay: node.OverlayStatus{
				Enabled: true, Joined: true, SizeEstimate: 11, Predecessor: id("9"), Successors: []string{id("c"), id("e")},
				Links: []node.OverlayLink{{Peer: id("3"), Local: []string{"long-distance"}, Remote: []string{"long-distance"}}},
			},
		},
	}
}

func get(t *testing.T, h http.Handler, method, target, host string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	req.Host = "127.0.0.1:8080"
	if host != "" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func sampleHandler() http.Handler {
	return Handler(func() (runtime.Status, error) { return sampleStatus(), nil },
		func() (node.TopologyView, error) { return sampleTopology(), nil })
}

func TestJSONEndpointsServeTheNodesAnswers(t *testing.T) {
	h := sampleHandler()
	for path, want := range map[string]any{"/api/status": sampleStatus(), "/api/topology": sampleTopology()} {
		rec := get(t, h, "GET", path, "")
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %q", path, rec.Code, rec.Header().Get("Content-Type"))
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.TrimSpace(rec.Body.Bytes()); !bytes.Equal(got, wantJSON) {
			t.Errorf("%s served\n%s\nwant\n%s", path, got, wantJSON)
		}
	}
	var st runtime.Status
	if err := json.Unmarshal(get(t, h, "GET", "/api/status", "").Body.Bytes(), &st); err != nil || st.Reach.NAT != "endpoint-independent" || st.Links[0].RTT != 1.25 {
		t.Errorf("status does not decode back: %+v %v", st, err)
	}
}

func TestNodeFailureIsABadGatewayWithTheReason(t *testing.T) {
	down := errors.New("cannot reach burrow at /run/burrow/burrow.sock")
	h := Handler(func() (runtime.Status, error) { return runtime.Status{}, down },
		func() (node.TopologyView, error) { return node.TopologyView{}, down })
	for _, path := range []string{"/api/status", "/api/topology"} {
		rec := get(t, h, "GET", path, "")
		var body struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusBadGateway || body.Error != down.Error() {
			t.Errorf("%s: %d %q", path, rec.Code, body.Error)
		}
	}
}

// externalReference finds anything in the page that could load or send to
// another origin: URLs with a scheme or scheme-relative ones, src and href
// attributes, CSS imports.
var externalReference = regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|\bsrc\s*=|\bhref\s*=|@import|url\(`)

func TestPageIsServedSelfContained(t *testing.T) {
	rec := get(t, sampleHandler(), "GET", "/", "")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	csp := rec.Header().Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q lets the page reach other origins", csp)
	}
	body := rec.Body.String()
	for _, want := range []string{"<svg", "data-node-count", "data-link-count", `fetch(path`, "api/status", "api/topology"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The SVG namespace is a name, not a resource: nothing is fetched from it.
	page := strings.ReplaceAll(body, `"http://www.w3.org/2000/svg"`, "")
	if refs := externalReference.FindAllString(page, -1); len(refs) > 0 {
		t.Errorf("the page references outside resources: %q", refs)
	}
}

func TestOnlyGETOfKnownPaths(t *testing.T) {
	h := sampleHandler()
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/api/status", http.StatusMethodNotAllowed},
		{"DELETE", "/", http.StatusMethodNotAllowed},
		{"GET", "/api/peers", http.StatusNotFound},
		{"GET", "/index.html", http.StatusNotFound},
		{"HEAD", "/api/topology", http.StatusOK},
	} {
		if rec := get(t, h, c.method, c.path, ""); rec.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, rec.Code, c.code)
		}
	}
}

func TestRefusesRequestsForOtherHostNames(t *testing.T) {
	h := sampleHandler()
	for host, code := range map[string]int{
		"127.0.0.1:8080":        http.StatusOK,
		"[::1]:8080":            http.StatusOK,
		"localhost:8080":        http.StatusOK,
		"dash.localhost":        http.StatusOK,
		"192.0.2.7":             http.StatusOK,
		"attacker.example:8080": http.StatusMisdirectedRequest,
		"localhost.example":     http.StatusMisdirectedRequest,
	} {
		if rec := get(t, h, "GET", "/api/status", host); rec.Code != code {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, code)
		}
	}
}

func TestServeAnswersUntilClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := Serve(ln, func() (runtime.Status, error) { return sampleStatus(), nil },
		func() (node.TopologyView, error) { return sampleTopology(), nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	url := URL(ln.Addr())
	resp, err := http.Get(url + "api/status")
	if err != nil {
		t.Fatal(err)
	}
	var st runtime.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.Name != "alpha" {
		t.Fatalf("status over %s: %+v %v", url, st.Name, err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("still answering after Close")
	}
}

func TestURLShowsAnUnspecifiedAddressAsLoopback(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":   "http://127.0.0.1:8080/",
		"[::]:8080":      "http://[::1]:8080/",
		"127.0.0.1:9000": "http://127.0.0.1:9000/",
		"[::1]:9000":     "http://[::1]:9000/",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := URL(tcp); got != want {
			t.Errorf("URL(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestPageDrawsTheRingInChromium loads the page in headless Chromium and
// reads back what its script drew from the sample answers.
func TestPageDrawsTheRingInChromium(t *testing.T) {
	chromiumtest.Require(t)
	srv := httptest.NewServer(sampleHandler())
	defer srv.Close()
	dom := chromiumtest.DumpDOM(t, srv.URL+"/", 5*time.Second)

	counts := chromiumtest.ElementsWith(dom, "data-node-count")
	if len(counts) != 1 {
		t.Fatalf("%d count elements in the DOM:\n%s", len(counts), dom)
	}
	if counts[0]["data-refreshes"] == "0" {
		t.Fatalf("the page never drew the answers:\n%s", dom)
	}
	if got := counts[0]["data-node-count"]; got != "11" {
		t.Errorf("data-node-count %s, want 11 (ten nodes and one only named by a link)", got)
	}
	wantLinks := 0
	for _, n := range sampleKinds {
		wantLinks += n
	}
	if got := counts[0]["data-link-count"]; got != strconv.Itoa(wantLinks) {
		t.Errorf("data-link-count %s, want %d (one chord per pair, whichever ends report it)", got, wantLinks)
	}

	nodes := chromiumtest.ElementsWith(dom, "data-node-id")
	var drawn []string
	for _, n := range nodes {
		if n["data-ring-index"] != strconv.Itoa(len(drawn)) {
			t.Errorf("node %s has ring index %s, want %d", n["data-node-id"], n["data-ring-index"], len(drawn))
		}
		drawn = append(drawn, n["data-node-id"])
		if (n["data-self"] == "true") != (n["data-node-id"] == id("a")) {
			t.Errorf("node %s: data-self=%s", n["data-node-id"], n["data-self"])
		}
	}
	if !slices.IsSorted(drawn) || len(drawn) != 11 || !slices.Contains(drawn, id("d")) {
		t.Errorf("nodes drawn in order %v, want the 11 IDs sorted", drawn)
	}
	for _, n := range nodes {
		switch n["data-node-id"] {
		case id("1"):
			if n["data-beacon"] != "true" {
				t.Errorf("the node linked to for beacon reasons is not marked a beacon: %v", n)
			}
		case id("f"):
			if n["data-seen"] != "false" {
				t.Errorf("a node that has not answered the crawl is drawn as seen: %v", n)
			}
		}
	}

	links := chromiumtest.ElementsWith(dom, "data-link-kind")
	kinds := map[string]int{}
	for _, l := range links {
		kinds[l["data-link-kind"]]++
	}
	if fmt.Sprint(kinds) != fmt.Sprint(sampleKinds) {
		t.Errorf("links by kind %v, want %v", kinds, sampleKinds)
	}
	paths := map[string]string{}
	for _, l := range links {
		paths[l["data-link-from"]+"-"+l["data-link-to"]] = l["data-link-path"]
	}
	for pair, want := range map[string]string{
		id("3") + "-" + id("a"): "relay", id("7") + "-" + id("e"): "turn",
		id("9") + "-" + id("d"): "websocket", id("5") + "-" + id("c"): "direct",
	} {
		if paths[pair] != want {
			t.Errorf("link %s drawn with path %q, want %q", pair, paths[pair], want)
		}
	}
	dashed := 0
	for _, line := range chromiumtest.ElementsWith(dom, "stroke-dasharray") {
		if line["class"] == "vis" {
			dashed++
		}
	}
	if dashed != 3 {
		t.Errorf("%d dashed chords, want 3 (relay, turn, websocket)", dashed)
	}

	for _, want := range []string{"endpoint-independent", "198.18.0.9:40000", "home", "17"} {
		if !strings.Contains(dom, ">"+want+"<") {
			t.Errorf("the status panel does not show %q", want)
		}
	}
	if d := chromiumtest.ElementsWith(dom, "data-drops-total"); len(d) != 1 || d[0]["data-drops-total"] != "5" {
		t.Errorf("drops total %v, want 5", d)
	}
	own := map[string]string{}
	for _, e := range chromiumtest.ElementsWith(dom, "data-self-link-kind") {
		own[e["data-self-link-kind"]] = e["data-count"]
	}
	// alpha's chords: successor to c, long-distance to 3 (relay), beacon to
	// 1; its predecessor 9 links to it as a successor too.
	if want := map[string]string{"successor": "2", "long-distance": "1", "on-demand": "0", "beacon": "1", "other": "0", "unknown": "0"}; fmt.Sprint(own) != fmt.Sprint(want) {
		t.Errorf("this node's links by kind %v, want %v", own, want)
	}
}

// TestSelectionShowsThisNodesMeasurements opens the page with a node and a
// link selected (as a click keeps them in the address) and reads the
// details panel: for this node's own links it shows the status's RTT,
// traffic and endpoint.
func TestSelectionShowsThisNodesMeasurements(t *testing.T) {
	chromiumtest.Require(t)
	srv := httptest.NewServer(sampleHandler())
	defer srv.Close()
	for selection, want := range map[string][]string{
		"#node=" + id("c"):                 {"kilo", "c0000000", "198.18.0.7:51820", "1.25 ms", "120.6 KiB (0 packets)", "aes-256-gcm", "successor"},
		"#link=" + id("3") + "|" + id("a"): {"charlie — alpha", "long-distance", "relay", "4.50 ms", "relay 198.18.0.2:51820"},
		"#node=" + id("1"):                 {"beacon", "10000000"},
	} {
		dom := chromiumtest.DumpDOM(t, srv.URL+"/"+selection, 3*time.Second)
		_, panel, ok := strings.Cut(dom, `id="selection"`)
		if !ok {
			t.Fatalf("no selection panel:\n%s", dom)
		}
		panel, _, _ = strings.Cut(panel, "</table>")
		for _, w := range want {
			if !strings.Contains(panel, ">"+w+"<") {
				t.Errorf("%s: the details lack %q:\n%s", selection, w, panel)
			}
		}
	}
}
