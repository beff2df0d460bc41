package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// TestMDNSServiceDiscoveryAcrossNATs: Debian's avahi-daemon runs on three
// members behind different NATs; a service avahi-publish announces behind
// an endpoint-independent NAT is found and resolved to its member's
// address by avahi-browse behind a symmetric NAT and behind another
// endpoint-independent one. mDNS is link-local multicast: on burrow's
// virtual Ethernet it crosses the NATs as it would cross a switch.
func TestMDNSServiceDiscoveryAcrossNATs(t *testing.T) {
	for _, tool := range []string{"avahi-daemon", "avahi-browse", "avahi-publish", "dbus-daemon", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed (apt-get install avahi-daemon avahi-utils dbus-daemon util-linux)", tool)
		}
	}
	n := newNATNetwork(t, map[string]netlab.NAT{"a": netlab.EndpointIndependent, "b": netlab.EndpointIndependent, "c1": netlab.Symmetric})
	startAll(t, n.net)
	if err := cluster.WaitFor(ctxFor(t, 60*time.Second), "a consistent ring", func() bool { return cluster.RingConsistent(n.net.Nodes) }); err != nil {
		t.Fatal(err)
	}
	avahi := map[string]*avahiHost{}
	for _, name := range []string{"a", "b", "c1"} {
		avahi[name] = startAvahi(t, n.lab, n.nodes[name])
	}
	publisher := n.nodes["b"]
	if _, err := avahi["b"].start("avahi-publish", "--service", "burrow-web-on-b", "_http._tcp", "8080"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c1", "a"} {
		// avahi-browse's parsable lines: a resolved one starts with "=" and
		// names interface, family, service, type, domain, host, address, port.
		want := fmt.Sprintf(";IPv4;burrow-web-on-b;_http._tcp;local;b.local;%s;8080;", publisher.Address.Addr())
		var out []byte
		err := cluster.WaitFor(ctxFor(t, 30*time.Second), name+" to find b's service", func() bool {
			var err error
			out, err = avahi[name].run(ctxFor(t, 15*time.Second), "avahi-browse", "--terminate", "--resolve", "--parsable", "--no-db-lookup", "_http._tcp")
			return err == nil && strings.Contains(string(out), want)
		})
		if err != nil {
			t.Fatalf("%v: avahi-browse printed\n%s", err, out)
		}
		t.Logf("%s found it: %s", name, firstLineWith(string(out), want))
	}
}

// avahiHost is an avahi-daemon on a node's host, with a D-Bus system bus of
// its own. The lab's hosts share the machine's /run, so every program of
// one runs in a mount namespace of its own where the host's directories
// in the lab stand in for /run: a fresh machine has no /run/avahi-daemon
// to mount over until the daemon ran once.
type avahiHost struct {
	host   *netlab.Host
	runDir string // the directory holding the host's dbus and avahi-daemon
}

func startAvahi(t *testing.T, lab *netlab.Lab, node *cluster.Node) *avahiHost {
	t.Helper()
	a := &avahiHost{host: node.Host, runDir: filepath.Join(lab.LogDir(), node.Name+"-run")}
	for _, dir := range []string{"dbus", "avahi-daemon"} {
		if err := os.MkdirAll(filepath.Join(a.runDir, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.start("dbus-daemon", "--system", "--nofork", "--nopidfile"); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(a.runDir, "dbus", "system_bus_socket")
	if err := cluster.WaitFor(ctxFor(t, 10*time.Second), node.Name+"'s system bus", func() bool { _, err := os.Stat(socket); return err == nil }); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(lab.LogDir(), node.Name+"-avahi.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "[server]\nhost-name=%s\nuse-ipv4=yes\nuse-ipv6=no\nallow-interfaces=%s\n[publish]\npublish-workstation=no\npublish-hinfo=no\n",
		node.Name, node.Config.TAP.Name), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon, err := a.start("avahi-daemon", "--file", conf, "--no-drop-root", "--no-chroot", "--no-rlimits")
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitFor(ctxFor(t, 20*time.Second), node.Name+"'s avahi-daemon", func() bool { return logSays(daemon, "Server startup complete") }); err != nil {
		t.Fatal(err)
	}
	return a
}

// inOwnRun is the command line that runs a program with the host's
// directory over /run.
func (a *avahiHost) inOwnRun(name string, args []string) []string {
	script := `mount --bind "$0" /run && exec "$@"`
	return append([]string{"--mount", "--propagation", "private", "sh", "-c", script, a.runDir, name}, args...)
}

// start starts a program on the host, in the background.
func (a *avahiHost) start(name string, args ...string) (*netlab.Process, error) {
	return a.host.Start("unshare", a.inOwnRun(name, args)...)
}

// run runs a program on the host.
func (a *avahiHost) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return a.host.Run(ctx, "unshare", a.inOwnRun(name, args)...)
}

func logSays(p *netlab.Process, s string) bool {
	data, err := os.ReadFile(p.LogPath())
	return err == nil && strings.Contains(string(data), s)
}

func firstLineWith(out, s string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
