package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/identity"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
	"burrow/runtime"
)

// overlayNet is one burrow network of the multi-network test, set up the
// way an operator would: 'burrow init --ca' on the first machine, then
// 'burrow invite', 'join', 'invite accept' and 'join --cert' for the second.
type overlayNet struct {
	name    string
	port    uint16
	subnet  [3]byte // the first three bytes of the virtual /24
	members []*member
}

// member is one node of an overlayNet.
type member struct {
	host    *netlab.Host
	network string
	name    string
	dir     string // configuration directory ('--dir')
	state   string // state directory ('--state')
	config  string
	socket  string
	address netip.Addr
	process *netlab.Process
}

func (n *overlayNet) tap() string { return "bw-" + n.name }

// burrowCLI runs the burrow binary outside the lab, as an operator at a
// shell would, and returns its output.
func burrowCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(burrowBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("burrow %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// wordAfter returns the first word after prefix on a line of out.
func wordAfter(t *testing.T, out, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no line starting with %q in:\n%s", prefix, out)
	return ""
}

// setUp creates the network on the hosts, one member each, with the first
// host holding the CA. Each member's control socket is moved into its own
// directory: the lab's hosts share one file system.
func (n *overlayNet) setUp(t *testing.T, root string, hosts ...*netlab.Host) {
	t.Helper()
	for i, h := range hosts {
		base := filepath.Join(root, n.name, h.Name)
		m := &member{
			host: h, network: n.name, name: fmt.Sprintf("%s%d", n.name, i),
			dir: filepath.Join(base, "etc"), state: filepath.Join(base, "state"),
			address: netip.AddrFrom4([4]byte{n.subnet[0], n.subnet[1], n.subnet[2], byte(i + 1)}),
		}
		m.config = filepath.Join(m.dir, n.name+".yaml")
		m.socket = filepath.Join(base, "control.sock")
		n.members = append(n.members, m)
	}
	first := n.members[0]
	caDir := filepath.Join(first.dir, n.name, "ca")
	listen := func(m *member) string { return netip.AddrPortFrom(m.host.Addr, n.port).String() }
	common := func(m *member) []string {
		return []string{"--dir", m.dir, "--state", m.state, "--instance", n.name, "--listen", listen(m), "--log-level", "debug"}
	}
	burrowCLI(t, append(common(first), "init", "--network", n.name, "--ca", "--name", first.name,
		"--address", netip.PrefixFrom(first.address, 24).String())...)
	for _, m := range n.members[1:] {
		invite := wordAfter(t, burrowCLI(t, "invite", "--ca", caDir, "--name", m.name,
			"--address", netip.PrefixFrom(m.address, 24).String(), "--bootstrap", listen(first)), "burrow join ")
		request := wordAfter(t, burrowCLI(t, append(common(m), "join", invite)...), "burrow invite accept ")
		cert := wordAfter(t, burrowCLI(t, "invite", "accept", request, "--ca", caDir), "burrow join --cert ")
		burrowCLI(t, "join", "--dir", m.dir, "--instance", n.name, "--cert", cert)
	}
	for _, m := range n.members {
		data, err := os.ReadFile(m.config)
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.Replace(data, []byte("control_socket: /run/burrow/"+n.name+".sock"), []byte("control_socket: "+m.socket), 1)
		if err := os.WriteFile(m.config, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (n *overlayNet) start(t *testing.T) {
	t.Helper()
	for _, m := range n.members {
		p, err := m.host.Start(burrowBin, "up", "-c", m.config)
		if err != nil {
			t.Fatal(err)
		}
		m.process = p
	}
}

func (m *member) status() (*runtime.Status, error) {
	resp, err := runtime.Query(m.socket, runtime.Request{Command: "status"})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// waitLinked waits until every member has a link up to every other.
func (n *overlayNet) waitLinked(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for _, m := range n.members {
		err := cluster.WaitFor(ctx, m.name+" to link to its network", func() bool {
			st, err := m.status()
			if err != nil {
				return false
			}
			up := 0
			for _, l := range st.Links {
				if l.State == "up" {
					up++
				}
			}
			return up >= len(n.members)-1
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// capture runs tcpdump on a TAP until stop is called, which returns how
// many frames matched the filter.
func capture(t *testing.T, h *netlab.Host, tap, filter string) (stop func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s.txt", h.Name, tap))
	p, err := h.Start("sh", "-c", fmt.Sprintf("exec tcpdump --immediate-mode -i %s -n -l -e '%s' > %s 2>/dev/null", tap, filter, file))
	if err != nil {
		t.Fatal(err)
	}
	return func() int {
		p.Stop()
		data, _ := os.ReadFile(file)
		frames := 0
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.TrimSpace(line) != "" { // tcpdump ends with an empty line when stopped
				frames++
			}
		}
		if frames > 0 {
			t.Logf("tcpdump on %s %s:\n%s", h.Name, tap, data)
		}
		return frames
	}
}

// TestTwoNetworksOnTheSameMachinesStayApart runs two burrow networks —
// different CAs, names, ports, TAPs, state directories and control
// sockets — on the same two namespaces. Each pings within itself; a
// broadcast and a unicast of one never reach the other's TAPs.
func TestTwoNetworksOnTheSameMachinesStayApart(t *testing.T) {
	lab := labtest.New(t)
	var hosts []*netlab.Host
	for _, name := range []string{"m0", "m1"} {
		h, err := lab.AddHost(name)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	root := t.TempDir()
	red := &overlayNet{name: "red", port: 51830, subnet: [3]byte{10, 77, 1}}
	blue := &overlayNet{name: "blue", port: 51831, subnet: [3]byte{10, 77, 2}}
	red.setUp(t, root, hosts...)
	blue.setUp(t, root, hosts...)
	// A peer the node cannot send to (an IPv6 endpoint for an IPv4 socket:
	// nothing leaves the host) makes it log at debug level all along.
	appendToConfig(t, red.members[1], "peers:\n  - endpoint: \"[2001:db8::1]:51830\"\n")
	enableMetrics(t, red.members[0], "127.0.0.1:9101")
	enableMetrics(t, blue.members[0], "127.0.0.1:9101") // the same port on the same host fails
	red.start(t)
	// blue0 cannot bind the metrics port red0 holds: it must refuse to
	// start and say why, not run without metrics. red0 must hold the port
	// before blue0 starts, or the two race for it.
	err := cluster.WaitFor(ctxFor(t, 10*time.Second), "red0 to serve metrics", func() bool {
		conn, err := inside(red.members[0].host, func() (net.Conn, error) { return net.DialTimeout("tcp", "127.0.0.1:9101", time.Second) })
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	blue.start(t)
	exited := make(chan error, 1)
	go func() { exited <- blue.members[0].process.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Fatal("a second node bound the metrics port the first holds")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blue0 still runs 10 s after start although its metrics port is taken")
	}
	if log, _ := os.ReadFile(blue.members[0].process.LogPath()); !bytes.Contains(log, []byte("metrics.listen")) {
		t.Errorf("blue0's error does not name metrics.listen:\n%s", log)
	}
	enableMetrics(t, blue.members[0], "127.0.0.1:9102")
	p, err := blue.members[0].host.Start(burrowBin, "up", "-c", blue.members[0].config)
	if err != nil {
		t.Fatal(err)
	}
	blue.members[0].process = p
	red.waitLinked(t)
	blue.waitLinked(t)

	for _, n := range []*overlayNet{red, blue} {
		for _, m := range n.members {
			st, err := m.status()
			if err != nil {
				t.Fatal(err)
			}
			if st.Network != n.name || st.TAP.Name != n.tap() {
				t.Errorf("%s runs network %q on %s", m.name, st.Network, st.TAP.Name)
			}
			for _, l := range st.Links {
				if !strings.HasPrefix(l.Peer, n.name) {
					t.Errorf("%s of network %s has a link to %q", m.name, n.name, l.Peer)
				}
			}
		}
		a, b := n.members[0], n.members[1]
		ctx := ctxFor(t, 20*time.Second)
		if err := cluster.WaitFor(ctx, a.name+" to ping "+b.name, func() bool {
			r, err := netlab.Ping(ctx, a.host, b.address, 1, 200*time.Millisecond)
			return err == nil && r.Received == 1
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Red's frames, recognised by red's TAP MACs or subnet, are captured on
	// both blue TAPs and, to show the capture works, on red's far TAP.
	var redMACs []string
	for _, m := range red.members {
		st, err := m.status()
		if err != nil {
			t.Fatal(err)
		}
		redMACs = append(redMACs, "ether host "+st.TAP.MAC)
	}
	filter := strings.Join(redMACs, " or ") + " or net 10.77.1.0/24"
	var blueStops []func() int
	for _, m := range blue.members {
		blueStops = append(blueStops, capture(t, m.host, blue.tap(), filter))
	}
	redStop := capture(t, red.members[1].host, red.tap(), filter)
	time.Sleep(time.Second) // tcpdump needs a moment to attach
	sender, target := red.members[0], red.members[1]
	ctx := ctxFor(t, 30*time.Second)
	for _, args := range [][]string{
		{"ping", "-b", "-c", "3", "-i", "0.2", "-W", "1", "10.77.1.255"},                       // IP broadcast
		{"arping", "-c", "3", "-w", "2000000", "-i", red.tap(), target.address.String()},       // ARP broadcast
		{"ping", "-c", "3", "-i", "0.2", "-p", "b0bb1e50", "-W", "1", target.address.String()}, // unicast
	} {
		// A broadcast ping gets no answer by default; only the frames count.
		sender.host.Run(ctx, args[0], args[1:]...)
	}
	time.Sleep(3 * time.Second)
	for i, stop := range blueStops {
		if n := stop(); n != 0 {
			t.Errorf("%d of red's frames appeared on %s's TAP of network blue", n, blue.members[i].name)
		}
	}
	if n := redStop(); n < 6 {
		t.Errorf("red's far TAP saw only %d of red's frames: the capture proves nothing", n)
	}

	checkPeersAndTopology(t, red)
	checkMetrics(t, red.members[0], "red")
	checkMetrics(t, blue.members[0], "blue")

	// Stop everything, then read what the debug-level daemons logged.
	for _, n := range []*overlayNet{red, blue} {
		for _, m := range n.members {
			if err := m.process.Stop(); err != nil {
				t.Errorf("stopping %s: %v", m.name, err)
			}
		}
	}
	checkLogsHoldNoSecrets(t, append(append([]*member{}, red.members...), blue.members...),
		filepath.Join(red.members[0].dir, "red", "ca"), filepath.Join(blue.members[0].dir, "blue", "ca"))
}

func appendToConfig(t *testing.T, m *member, yaml string) {
	t.Helper()
	f, err := os.OpenFile(m.config, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(yaml)
	if err := errors.Join(err, f.Close()); err != nil {
		t.Fatal(err)
	}
}

// enableMetrics sets metrics.listen in a member's configuration.
func enableMetrics(t *testing.T, m *member, listen string) {
	t.Helper()
	data, err := os.ReadFile(m.config)
	if err != nil {
		t.Fatal(err)
	}
	data, ok := replaceLine(data, "metrics:", "metrics:\n  listen: "+listen)
	if !ok {
		t.Fatalf("%s has no metrics section", m.config)
	}
	if err := os.WriteFile(m.config, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceLine replaces the first line equal to old, and any "  listen:"
// line an earlier replacement put after it.
func replaceLine(data []byte, old, new string) ([]byte, bool) {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if l == old {
			rest := lines[i+1:]
			if len(rest) > 0 && strings.HasPrefix(rest[0], "  listen: ") {
				rest = rest[1:]
			}
			lines = append(append(append([]string{}, lines[:i]...), new), rest...)
			return []byte(strings.Join(lines, "\n")), true
		}
	}
	return data, false
}

// checkPeersAndTopology runs 'burrow peers' and 'burrow topology' against a
// running member, as an operator would.
func checkPeersAndTopology(t *testing.T, n *overlayNet) {
	t.Helper()
	m := n.members[0]
	var rows []struct {
		Peer, Path, State string
		Kinds             []string `json:"kinds"`
		PeerKinds         []string `json:"peer_kinds"`
		RTTms             *float64 `json:"rtt_ms"`
		RxBytes           uint64   `json:"rx_bytes"`
	}
	if err := json.Unmarshal([]byte(burrowCLI(t, "peers", "--json", "--socket", m.socket)), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Peer != n.members[1].name || rows[0].State != "up" || rows[0].Path != "direct" ||
		len(rows[0].Kinds)+len(rows[0].PeerKinds) == 0 || rows[0].RxBytes == 0 {
		t.Errorf("burrow peers --json on %s: %+v", m.name, rows)
	}
	text := burrowCLI(t, "peers", "--socket", m.socket)
	if !strings.Contains(text, n.members[1].name) || !strings.Contains(text, "HANDSHAKE") {
		t.Errorf("burrow peers on %s:\n%s", m.name, text)
	}
	dot := burrowCLI(t, "topology", "--format", "dot", "--socket", m.socket)
	if !strings.HasPrefix(dot, "digraph burrow {") || !strings.Contains(dot, n.members[1].name) {
		t.Errorf("burrow topology on %s:\n%s", m.name, dot)
	}
}

// checkMetrics scrapes a member's /metrics inside its namespace.
func checkMetrics(t *testing.T, m *member, network string) {
	t.Helper()
	st, err := m.status()
	if err != nil {
		t.Fatal(err)
	}
	cfgData, _ := os.ReadFile(m.config)
	listen := ""
	for line := range strings.SplitSeq(string(cfgData), "\n") {
		if v, ok := strings.CutPrefix(line, "  listen: "); ok {
			listen = v
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, _, addr string) (net.Conn, error) {
			return inside(m.host, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, 2*time.Second) })
		},
	}}
	resp, err := client.Get("http://" + listen + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", m.name, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`burrow_info{name=%q,network=%q,node_id=%q} 1`, m.name, network, st.NodeID),
		`burrow_links{kind=`,
		`burrow_handshakes_total{outcome="completed"}`,
		`burrow_link_receive_bytes_total{node_id=`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("%s's /metrics lacks %s", m.name, want)
		}
	}
}

// checkLogsHoldNoSecrets reads the daemons' debug-level logs: no node's
// private key and no CA key may appear in them, in any usual encoding.
func checkLogsHoldNoSecrets(t *testing.T, members []*member, caDirs ...string) {
	t.Helper()
	var secrets [][]byte
	for _, m := range members {
		key, err := identity.LoadNodeKey(filepath.Join(m.state, m.network, identity.NodeKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, key.Private[:])
	}
	for _, dir := range caDirs {
		ca, err := identity.LoadCA(dir)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, ca.Private.Seed())
	}
	debugLines := 0
	for _, m := range members {
		log, err := os.ReadFile(m.process.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		debugLines += bytes.Count(log, []byte("level=DEBUG"))
		for _, s := range secrets {
			for _, enc := range []string{base64.StdEncoding.EncodeToString(s), base64.RawStdEncoding.EncodeToString(s),
				base64.URLEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s), hex.EncodeToString(s),
				fmt.Sprint(s), fmt.Sprintf("%x", s)} {
				// A prefix of 16 characters is enough to give a key away.
				if bytes.Contains(log, []byte(enc[:16])) {
					t.Errorf("%s's log holds private key material", m.name)
				}
			}
		}
	}
	if debugLines == 0 {
		t.Error("the daemons logged nothing at debug level: the check proves little")
	}
}
