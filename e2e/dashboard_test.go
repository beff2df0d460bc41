package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/dashboard"
	"burrow/dashboard/chromiumtest"
	"burrow/demo"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
	"burrow/node"
	"burrow/runtime"
)

// TestDemoNetworkOnTheDashboard builds the demo's network (a beacon and
// twelve nodes behind endpoint-independent and symmetric NATs and a
// firewall that lets only TCP 443 out, each told only the beacon's
// address), checks that the ring forms, that NAT traversal picks the
// right paths and that every site pair pings, then
// serves the dashboard of one node and reads it back in headless
// Chromium: the DOM must show exactly the nodes and links the nodes
// themselves report, and a screenshot is kept.
func TestDemoNetworkOnTheDashboard(t *testing.T) {
	lab := labtest.New(t)
	n, err := demo.Build(ctxFor(t, time.Minute), lab, burrowBin, demo.MinNodes)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitRing(ctxFor(t, 3*time.Minute), t.Output()); err != nil {
		t.Fatal(err)
	}

	t.Run("paths", func(t *testing.T) {
		err := cluster.WaitFor(ctxFor(t, time.Minute), "a direct link between two endpoint-independent sites", func() bool {
			return directAcrossSites(n) > 0
		})
		if err != nil {
			t.Error(err)
		}
		for _, a := range n.Nodes() {
			st, err := a.Status()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range st.Links {
				b := nodeByID(n.Net, l.NodeID)
				if b == nil || l.State != "up" {
					continue
				}
				switch {
				case b == n.Beacon:
					want := "direct"
					if n.SiteOf(a).NAT == netlab.UDPBlocked {
						want = "websocket"
					}
					if l.Path != want {
						t.Errorf("%s reaches the beacon on path %q, want %s", a.Name, l.Path, want)
					}
				case !n.Punchable(a, b) && l.Path != "relay":
					// Across a symmetric NAT or the UDP-blocking firewall.
					t.Errorf("%s–%s crosses sites %s and %s on path %q, want relay", a.Name, b.Name, n.SiteOf(a).NAT, n.SiteOf(b).NAT, l.Path)
				}
			}
		}
	})

	t.Run("pings", func(t *testing.T) {
		results := n.Ping(ctxFor(t, 3*time.Minute))
		n.PrintPings(t.Output(), results)
		toBeacon := 0
		for _, r := range results {
			if r.Err != nil || r.Received < r.Sent-1 {
				t.Errorf("%s→%s: %d of %d replies (%v)", r.From.Name, r.To.Name, r.Received, r.Sent, r.Err)
			}
			if r.To == n.Beacon {
				toBeacon++
			}
		}
		// Four sites: six pairs of sites and four within them.
		if toBeacon != len(n.Nodes()) || len(results) != len(n.Nodes())+10 {
			t.Errorf("%d pairs pinged, %d of them to the beacon; want 10 site pairs and all %d nodes", len(results), toBeacon, len(n.Nodes()))
		}
	})

	watched := n.Sites[0].Nodes[0]
	status, topology := dashboard.ControlSocket(watched.Config.ControlSocket)
	srv := httptest.NewServer(dashboard.Handler(status, topology))
	defer srv.Close()

	t.Run("api", func(t *testing.T) {
		var st runtime.Status
		getJSON(t, srv.URL+"/api/status", &st)
		if st.Name != watched.Name || st.NodeID != watched.ID.String() || st.Network != n.Net.Name {
			t.Errorf("/api/status is %s %s of %s, want %s %s of %s", st.Name, st.NodeID, st.Network, watched.Name, watched.ID, n.Net.Name)
		}
		// Every ask keeps the crawl going; it has the whole overlay within
		// a few rounds.
		waitMapped(t, n.Net, srv.URL)
	})

	t.Run("chromium dom", func(t *testing.T) {
		chromiumtest.Require(t)
		// Links come and go while a young network settles (relayed ones
		// turn direct, long-distance ones are redrawn): compare the page
		// with what the nodes report when that held still before and
		// during the load.
		for attempt := 1; attempt <= 5; attempt++ {
			before := waitMapped(t, n.Net, srv.URL)
			dom := chromiumtest.DumpDOM(t, srv.URL+"/", 4*time.Second)
			if after := reportedLinks(t, n.Net); !maps.Equal(before, after) {
				t.Logf("attempt %d: the nodes' links changed while the page loaded", attempt)
				continue
			}
			checkDOM(t, n, watched, dom, before)
			return
		}
		t.Fatal("the nodes' links changed during every page load")
	})

	t.Run("chromium screenshot", func(t *testing.T) {
		chromiumtest.Require(t)
		file := screenshotPath(t)
		chromiumtest.Screenshot(t, srv.URL+"/", file, 1200, 900, 4*time.Second)
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s is no PNG: %v", file, err)
		}
		if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 900 {
			t.Errorf("screenshot is %v, want 1200×900", b)
		}
		// The page's node green and this node's yellow must be on it: the
		// ring was drawn, not just an empty page.
		green, yellow := 0, 0
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				switch [3]uint32{r >> 8, g >> 8, b >> 8} {
				case [3]uint32{0x22, 0xc5, 0x5e}:
					green++
				case [3]uint32{0xfa, 0xcc, 0x15}:
					yellow++
				}
			}
		}
		if green < 500 || yellow < 100 {
			t.Errorf("the screenshot shows %d pixels of node green and %d of this node's yellow: the ring is missing", green, yellow)
		}
		fi, _ := f.Stat()
		t.Logf("dashboard screenshot (%d bytes): %s", fi.Size(), file)
	})
}

// screenshotPath is where the dashboard screenshot is kept after the test:
// $BURROW_ARTIFACTS/dashboard.png, or burrow-artifacts/dashboard.png in the
// system's temporary directory; outside the repository either way.
func screenshotPath(t *testing.T) string {
	dir := os.Getenv("BURROW_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "burrow-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "dashboard.png")
}

// checkDOM compares the page's drawing with the overlay the nodes report.
func checkDOM(t *testing.T, n *demo.Network, watched *cluster.Node, dom string, want map[[2]string]string) {
	t.Helper()
	counts := chromiumtest.ElementsWith(dom, "data-node-count")
	if len(counts) != 1 || counts[0]["data-refreshes"] == "0" {
		t.Fatalf("the page drew nothing:\n%s", dom)
	}
	if got, wantN := counts[0]["data-node-count"], fmt.Sprint(len(n.Net.Nodes)); got != wantN {
		t.Errorf("data-node-count %s, want %s", got, wantN)
	}
	if got := counts[0]["data-link-count"]; got != fmt.Sprint(len(want)) {
		t.Errorf("data-link-count %s, want %d (the up links the nodes report)", got, len(want))
	}

	ring := n.RingOrder()
	nodes := chromiumtest.ElementsWith(dom, "data-node-id")
	if len(nodes) != len(ring) {
		t.Fatalf("%d nodes drawn, want %d", len(nodes), len(ring))
	}
	for i, el := range nodes {
		// Drawn in ring order, by ID, each with its certificate name.
		if el["data-node-id"] != ring[i].ID.String() || el["data-node-name"] != ring[i].Name || el["data-ring-index"] != fmt.Sprint(i) {
			t.Errorf("node %d drawn as %s %q (index %s), want %s %q", i, el["data-node-id"], el["data-node-name"], el["data-ring-index"], ring[i].ID, ring[i].Name)
		}
		if (el["data-self"] == "true") != (el["data-node-id"] == watched.ID.String()) {
			t.Errorf("node %s: data-self=%s, the page is %s's", el["data-node-name"], el["data-self"], watched.Name)
		}
		if (el["data-beacon"] == "true") != (el["data-node-id"] == n.Beacon.ID.String()) {
			t.Errorf("node %s: data-beacon=%s", el["data-node-name"], el["data-beacon"])
		}
	}

	drawn := map[[2]string]map[string]string{}
	for _, el := range chromiumtest.ElementsWith(dom, "data-link-kind") {
		drawn[pairKey(el["data-link-from"], el["data-link-to"])] = el
	}
	for pair, path := range want {
		el := drawn[pair]
		switch {
		case el == nil:
			t.Errorf("link %s not drawn", pairName(n.Net, pair))
		case el["data-link-path"] != path:
			t.Errorf("link %s drawn with path %s, the nodes report %s", pairName(n.Net, pair), el["data-link-path"], path)
		}
	}
	for pair := range drawn {
		if _, ok := want[pair]; !ok {
			t.Errorf("link %s drawn, but no node reports it", pairName(n.Net, pair))
		}
	}
	// Each node's link to its ring successor is a successor chord.
	for i, a := range ring {
		pair := pairKey(a.ID.String(), ring[(i+1)%len(ring)].ID.String())
		if el := drawn[pair]; el != nil && el["data-link-kind"] != "successor" {
			t.Errorf("link %s between ring neighbours drawn as %s", pairName(n.Net, pair), el["data-link-kind"])
		}
	}
}

// quietFor is how long the links must stay the same before the map is
// compared: longer than the crawl takes to ask every node again.
const quietFor = 6 * time.Second

// waitMapped waits until the links the nodes report have stayed the same
// for quietFor and the dashboard's topology shows exactly those and every
// node, and returns the links.
func waitMapped(t *testing.T, nw *cluster.Network, url string) map[[2]string]string {
	t.Helper()
	links, since := reportedLinks(t, nw), time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		now := reportedLinks(t, nw)
		if !maps.Equal(now, links) {
			links, since = now, time.Now()
			continue
		}
		var v node.TopologyView
		getJSON(t, url+"/api/topology", &v)
		if time.Since(since) >= quietFor && crawlComplete(nw, v) && maps.Equal(crawledLinks(v), links) {
			return links
		}
	}
	t.Fatal("the links never held still for long enough, or the crawl did not map them")
	return nil
}

// reportedLinks is every up link as its ends report it in their status:
// pair of node IDs → path.
func reportedLinks(t *testing.T, nw *cluster.Network) map[[2]string]string {
	t.Helper()
	links := map[[2]string]string{}
	for _, a := range nw.Nodes {
		st, err := a.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range st.Links {
			if l.State == "up" && l.NodeID != "" {
				links[pairKey(a.ID.String(), l.NodeID)] = l.Path
			}
		}
	}
	return links
}

// crawledLinks is every link of a topology view: pair → path.
func crawledLinks(v node.TopologyView) map[[2]string]string {
	links := map[[2]string]string{}
	for _, l := range v.Links {
		links[pairKey(l.From, l.To)] = l.Path
	}
	return links
}

// crawlComplete tells whether the view names every node of the network
// and each has answered the crawl.
func crawlComplete(nw *cluster.Network, v node.TopologyView) bool {
	seen := map[string]string{}
	for _, tn := range v.Nodes {
		if tn.Seen {
			seen[tn.ID] = tn.Name
		}
	}
	for _, node := range nw.Nodes {
		if seen[node.ID.String()] != node.Name {
			return false
		}
	}
	return len(v.Nodes) == len(nw.Nodes)
}

func pairKey(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

func pairName(nw *cluster.Network, pair [2]string) string {
	name := func(id string) string {
		if node := nodeByID(nw, id); node != nil {
			return node.Name
		}
		return id
	}
	return name(pair[0]) + "–" + name(pair[1])
}

func nodeByID(nw *cluster.Network, id string) *cluster.Node {
	for _, node := range nw.Nodes {
		if node.ID.String() == id {
			return node
		}
	}
	return nil
}

// directAcrossSites counts direct links between nodes of two different
// sites: hole punching (or birthday probing) made them.
func directAcrossSites(n *demo.Network) int {
	direct := 0
	for _, a := range n.Nodes() {
		st, err := a.Status()
		if err != nil {
			continue
		}
		for _, l := range st.Links {
			b := nodeByID(n.Net, l.NodeID)
			if b == nil || l.State != "up" || l.Path != "direct" || !n.Punchable(a, b) {
				continue
			}
			if n.SiteOf(a) != n.SiteOf(b) {
				direct++
			}
		}
	}
	return direct
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestDaemonServesItsDashboard: dashboard.listen makes `burrow up` serve
// the page and the node's JSON, and a taken port stops the daemon before
// it starts, naming the field.
func TestDaemonServesItsDashboard(t *testing.T) {
	_, nw := newSelfOrganizing(t, 2)
	first, second := nw.Nodes[0], nw.Nodes[1]
	second.Config.Overlay.Bootstrap = []string{first.Endpoint().String()}
	for _, node := range nw.Nodes {
		node.Config.Dashboard.Listen = "127.0.0.1:8080"
	}
	// Something else holds the second host's port.
	taken, err := inside(second.Host, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:8080") })
	if err != nil {
		t.Fatal(err)
	}
	// Not startAll: the second daemon is meant to exit at once.
	for _, node := range nw.Nodes {
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.Process.Wait(); err == nil {
		t.Fatal("burrow up ran although its dashboard port was taken")
	}
	if log, _ := os.ReadFile(second.Process.LogPath()); !strings.Contains(string(log), "dashboard.listen") {
		t.Errorf("the error does not name dashboard.listen:\n%s", log)
	}
	if _, err := os.Stat(second.Config.ControlSocket); err == nil {
		t.Error("the daemon started (its control socket exists) before finding its dashboard port taken")
	}
	taken.Close()
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctxFor(t, time.Minute), "a ring of two", func() bool { return cluster.RingConsistent(nw.Nodes) }); err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			return inside(first.Host, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 2*time.Second) })
		},
	}}
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := client.Get("http://127.0.0.1:8080" + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return resp
	}
	if ct := get("/").Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("GET /: Content-Type %q", ct)
	}
	var st runtime.Status
	if err := json.NewDecoder(get("/api/status").Body).Decode(&st); err != nil || st.NodeID != first.ID.String() {
		t.Errorf("/api/status: node %s (%v), want %s", st.NodeID, err, first.ID)
	}
	err = cluster.WaitFor(ctxFor(t, 30*time.Second), "the topology to show both nodes", func() bool {
		var v node.TopologyView
		return json.NewDecoder(get("/api/topology").Body).Decode(&v) == nil && crawlComplete(nw, v)
	})
	if err != nil {
		t.Error(err)
	}
}
