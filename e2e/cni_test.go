package e2e

import (
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/node"
	"burrow/runtime/containers"
	"burrow/warrens"
)

// referencePlugins is where Debian's containernetworking-plugins are.
const referencePlugins = "/usr/lib/cni"

var (
	cnitoolOnce sync.Once
	cnitoolPath string
	cnitoolErr  error
)

// cnitool builds the CNI project's own runtime tool from its module.
func cnitool(t *testing.T) string {
	t.Helper()
	cnitoolOnce.Do(func() {
		cnitoolPath = filepath.Join(filepath.Dir(burrowBin), "cnitool")
		out, err := exec.Command("go", "build", "-o", cnitoolPath, "github.com/containernetworking/cni/cnitool").CombinedOutput()
		if err != nil {
			cnitoolErr = fmt.Errorf("building cnitool: %v\n%s", err, out)
		}
	})
	if cnitoolErr != nil {
		t.Fatal(cnitoolErr)
	}
	return cnitoolPath
}

// cniNode is a burrow node with burrow-cni installed for two networks:
// "burrow", chained with the reference plugins (which speak CNI up to
// 1.0.0), and "plain", burrow-cni alone at CNI 1.1.0.
type cniNode struct {
	*cluster.Node
	lab             *netlab.Lab
	binDir, confDir string
}

func installCNI(t *testing.T, lab *netlab.Lab, node *cluster.Node) *cniNode {
	t.Helper()
	c := &cniNode{Node: node, lab: lab, binDir: filepath.Join(node.Dir, "cni-bin"), confDir: filepath.Join(node.Dir, "cni-conf")}
	common := []string{"cni", "install", "-c", node.ConfigPath(), "--cni-bin-dir", c.binDir, "--conf-dir", c.confDir}
	out := burrowCLI(t, append(common, "--chain", "portmap,bandwidth,firewall", "--cni-version", "1.0.0")...)
	if !strings.Contains(out, filepath.Join(c.confDir, "burrow.conflist")) {
		t.Fatalf("burrow cni install said:\n%s", out)
	}
	burrowCLI(t, append(common, "--network", "plain")...)
	return c
}

// cnitool runs cnitool in the node's namespace, as a runtime on that
// machine would run its plugins.
func (c *cniNode) cnitool(t *testing.T, ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := c.Host.Command(ctx, cnitool(t), args...)
	cmd.Env = append(os.Environ(), append([]string{"NETCONFPATH=" + c.confDir, "CNI_PATH=" + c.binDir + ":" + referencePlugins}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("cnitool %s on %s: %v\n%s", strings.Join(args, " "), c.Name, err, out)
	}
	return out, nil
}

// cniResult is what a runtime reads of a CNI ADD's result.
type cniResult struct {
	Interfaces []struct {
		Name    string `json:"name"`
		Sandbox string `json:"sandbox"`
	} `json:"interfaces"`
	IPs []struct {
		Address netip.Prefix `json:"address"`
		Gateway netip.Addr   `json:"gateway"`
	} `json:"ips"`
	DNS struct {
		Nameservers []netip.Addr `json:"nameservers"`
		Domain      string       `json:"domain"`
	} `json:"dns"`
}

func (r cniResult) addr(v6 bool) netip.Addr {
	for _, ip := range r.IPs {
		if ip.Address.Addr().Is6() == v6 {
			return ip.Address.Addr()
		}
	}
	return netip.Addr{}
}

// addContainer runs CNI ADD for a new sandbox named name on the node.
func (c *cniNode) addContainer(t *testing.T, ctx context.Context, network, name string, env ...string) (*netlab.Host, cniResult) {
	t.Helper()
	sandbox := c.addSandbox(t, name)
	out, err := c.cnitool(t, ctx, append(env, "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAME="+name), "add", network, sandbox.NetnsPath())
	if err != nil {
		t.Fatal(err)
	}
	var res cniResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the ADD result: %v\n%s", err, out)
	}
	return sandbox, res
}

// addSandbox adds a container's namespace; cnitool's cached results for
// it go with the test.
func (c *cniNode) addSandbox(t *testing.T, name string) *netlab.Host {
	t.Helper()
	sandbox, err := c.lab.AddSandbox(name)
	if err != nil {
		t.Fatal(err)
	}
	// cnitool's container ID for the namespace, and libcni's cache of it.
	sum := sha512.Sum512([]byte(sandbox.NetnsPath()))
	cached := fmt.Sprintf("/var/lib/cni/results/*-cnitool-%x-*", sum[:10])
	t.Cleanup(func() {
		paths, _ := filepath.Glob(cached)
		for _, p := range paths {
			os.Remove(p)
		}
	})
	return sandbox
}

// hostVeths lists the node's burrow-cni veths (bw…).
func (c *cniNode) hostVeths(t *testing.T, ctx context.Context) []string {
	t.Helper()
	out, err := c.Host.Run(ctx, "ip", "-o", "link", "show", "type", "veth")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "bw") {
			names = append(names, strings.TrimSuffix(strings.Split(f[1], "@")[0], ":"))
		}
	}
	return names
}

// cniResolver is where the virtual DNS answers in the CNI tests.
const cniResolver = "10.99.0.254"

// newCNINetwork starts a beacon and two members behind different NATs
// (one endpoint-independent, one symmetric) with container subnets of
// both families and the virtual DNS, and installs burrow-cni on the
// members once their subnets are claimed.
func newCNINetwork(t *testing.T, ctx context.Context) (a, c1 *cniNode) {
	t.Helper()
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	members := []*cluster.Node{n.nodes["a"], n.nodes["c1"]}
	for i, m := range members {
		idFile := filepath.Join(m.Dir, "machine-id")
		if err := os.WriteFile(idFile, fmt.Appendf(nil, "%032x\n", i+1), 0o644); err != nil {
			t.Fatal(err)
		}
		m.Config.Services.Subnets = config.SubnetConfig{Enabled: true, MachineID: idFile}
		m.Config.Services.Network = "10.99.0.0/24"
		m.Config.Services.DNS = config.DNSService{Enabled: true, Address: cniResolver, Domain: "burrow.test"}
	}
	startAll(t, n.net)
	for _, m := range members {
		if err := cluster.WaitFor(ctx, m.Name+"'s subnet claims", func() bool {
			st, err := m.Status()
			return err == nil && len(st.Services.Subnets) == 2 && !slices.ContainsFunc(st.Services.Subnets, func(s node.SubnetStatus) bool {
				return s.State != warrens.Claimed.String()
			})
		}); err != nil {
			t.Fatal(err)
		}
	}
	return installCNI(t, n.lab, members[0]), installCNI(t, n.lab, members[1])
}

// TestCNIPutsContainersOnBurrowAcrossNATs: burrow-cni, installed with
// `burrow cni install` and driven by cnitool as a runtime would, puts a
// container on each of two nodes behind different NATs (one
// endpoint-independent, one symmetric), chained with Debian's reference
// plugins. The containers get addresses from their node's own subnets,
// ping each other over IPv4 and IPv6, resolve each other by name with
// dig at the resolver the result names, and move data with iperf3, also
// through a port the portmap plugin publishes on the node. CHECK passes,
// STATUS and GC work at CNI 1.1, DEL cleans up with the daemon down, and
// an ADD with the daemon down fails clearly, leaving nothing behind.
func TestCNIPutsContainersOnBurrowAcrossNATs(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	a, c1 := newCNINetwork(t, ctx)

	// web-a publishes its iperf3 port on its node, and takes at most
	// 100 Mbit/s in.
	const capArgs = `CAP_ARGS={"portMappings":[{"hostPort":5201,"containerPort":5201,"protocol":"tcp"}],` +
		`"bandwidth":{"ingressRate":100000000,"ingressBurst":1000000,"egressRate":100000000,"egressBurst":1000000}}`
	webA, resA := a.addContainer(t, ctx, "burrow", "web-a", capArgs)
	webC, resC := c1.addContainer(t, ctx, "burrow", "web-c")
	for _, r := range []struct {
		node *cniNode
		res  cniResult
	}{{a, resA}, {c1, resC}} {
		st, err := r.node.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st.Services.Subnets {
			got := r.res.addr(s.Prefix.Addr().Is6())
			if !s.Prefix.Contains(got) || r.res.IPs[0].Gateway != warrens.Bridge(r.res.IPs[0].Address.Masked()) {
				t.Errorf("%s's container got %v (gateway %v), outside its subnet %v", r.node.Name, r.res.IPs, r.res.IPs[0].Gateway, s.Prefix)
			}
		}
		if !slices.Contains(r.res.DNS.Nameservers, netip.MustParseAddr(cniResolver)) || r.res.DNS.Domain != "burrow.test" {
			t.Errorf("%s's result names resolver %v in %q, want %s in burrow.test", r.node.Name, r.res.DNS.Nameservers, r.res.DNS.Domain, cniResolver)
		}
	}
	t.Logf("containers: web-a %v, web-c %v", resA.IPs, resC.IPs)
	sandboxes := []*netlab.Host{webA, webC}
	for _, v6 := range []bool{false, true} {
		pingEachOther(t, ctx, sandboxes, []netip.Addr{resA.addr(v6), resC.addr(v6)})
	}

	// Names, through the resolver the result named, from the other node's container.
	dig := func(from *netlab.Host, name, qtype string) string {
		out, _ := from.Run(ctx, "dig", "@"+cniResolver, "+short", "+time=2", "+tries=1", name, qtype)
		return strings.TrimSpace(string(out))
	}
	for qtype, want := range map[string]netip.Addr{"A": resA.addr(false), "AAAA": resA.addr(true)} {
		if err := cluster.WaitFor(ctx, "web-a."+qtype+" to resolve from web-c", func() bool { return dig(webC, "web-a.burrow.test", qtype) == want.String() }); err != nil {
			t.Errorf("%v: dig answered %q, want %v", err, dig(webC, "web-a.burrow.test", qtype), want)
		}
	}

	server, err := netlab.StartIperf3Server(webA)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Stop()
	for _, to := range []netip.Addr{resA.addr(false), a.Address.Addr()} {
		r, err := netlab.Iperf3(ctx, webC, to, 2)
		if err != nil || r.BitsPerSecond <= 0 || r.BitsPerSecond > 120e6 {
			t.Errorf("iperf3 from web-c to %v (web-a, or its node's published port), capped at 100 Mbit/s: %+v %v", to, r, err)
			continue
		}
		t.Logf("iperf3 web-c → %v: %.0f Mbit/s", to, r.BitsPerSecond/1e6)
	}

	// A daemon restart puts the containers back on the bridge it makes
	// anew.
	if err := c1.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c1.Start(); err != nil {
		t.Fatal(err)
	}
	pingEachOther(t, ctx, sandboxes, []netip.Addr{resA.addr(false), resC.addr(false)})

	// CNI 1.1: STATUS, then GC of a container the runtime no longer lists.
	if _, err := a.cnitool(t, ctx, nil, "status", "plain", webA.NetnsPath()); err != nil {
		t.Error(err)
	}
	// CHECK on the plain network: Debian 12's portmap and bandwidth
	// (1.1.1) fail CHECK of a dual-stack container on their own.
	gone, resPlain := a.addContainer(t, ctx, "plain", "gone")
	if resPlain.addr(false) == resA.addr(false) {
		t.Errorf("two containers on one node share %v", resA.addr(false))
	}
	if _, err := a.cnitool(t, ctx, nil, "check", "plain", gone.NetnsPath()); err != nil {
		t.Error(err)
	}
	if _, err := gone.Run(ctx, "ip", "addr", "del", netip.PrefixFrom(resPlain.addr(false), 28).String(), "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	if out, err := a.cnitool(t, ctx, nil, "check", "plain", gone.NetnsPath()); err == nil || !strings.Contains(string(out), "lacks its address") {
		t.Errorf("CHECK of a container that lost its address: %v\n%s", err, out)
	}
	if _, err := a.cnitool(t, ctx, nil, "gc", "plain", webA.NetnsPath()); err != nil {
		t.Error(err)
	}
	if got := a.hostVeths(t, ctx); len(got) != 1 {
		t.Errorf("after GC of network plain, %s has veths %v, want web-a's alone", a.Name, got)
	}

	// DEL with the daemon up drops the container's name.
	if _, err := c1.cnitool(t, ctx, nil, "del", "burrow", webC.NetnsPath()); err != nil {
		t.Error(err)
	}
	if got := c1.hostVeths(t, ctx); len(got) != 0 {
		t.Errorf("after DEL, %s still has veths %v", c1.Name, got)
	}
	if err := cluster.WaitFor(ctx, "web-c's name to go", func() bool { return dig(webA, "web-c.burrow.test", "A") == "" }); err != nil {
		t.Error(err)
	}

	// With the daemon down, DEL still cleans up and ADD fails clearly,
	// leaving nothing behind.
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cnitool(t, ctx, nil, "del", "burrow", webA.NetnsPath()); err != nil {
		t.Errorf("DEL with the daemon down: %v", err)
	}
	sandbox := a.addSandbox(t, "late")
	out, err := a.cnitool(t, ctx, nil, "add", "burrow", sandbox.NetnsPath())
	if err == nil || !strings.Contains(string(out), "cannot reach burrow") {
		t.Errorf("ADD with the daemon down: %v\n%s", err, out)
	}
	if got := a.hostVeths(t, ctx); len(got) != 0 {
		t.Errorf("with the daemon down, %s has veths %v after a DEL and a failed ADD", a.Name, got)
	}
	if atts, err := containers.All(containers.DataDir(a.Config.StateDir)); err != nil || len(atts) != 0 {
		t.Errorf("attachment records left: %+v %v", atts, err)
	}
}
