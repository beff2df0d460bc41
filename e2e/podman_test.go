package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/cluster"
)

// podman runs Debian's podman on a node, with storage and state of its
// own and its CNI backend set to burrow-cni's directories. Its OCI
// runtime is runc: Debian 12's crun refuses a machine with cgroups v1 and
// v2 mounted side by side.
type podman struct {
	node *cniNode
	dir  string
	// runRoot is podman's state; it must be a short path (50 bytes).
	runRoot string
}

func newPodman(t *testing.T, c *cniNode) *podman {
	t.Helper()
	p := &podman{node: c, dir: filepath.Join(c.Dir, "podman")}
	conf := fmt.Sprintf(`[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = %[1]q
runtime = "runc"
[network]
network_backend = "cni"
cni_plugin_dirs = [%[2]q, %[3]q]
network_config_dir = %[4]q
`, filepath.Join(p.dir, "events.log"), c.binDir, referencePlugins, c.confDir)
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if p.runRoot, err = os.MkdirTemp("", "bwpod-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(p.runRoot) })
	if err := os.WriteFile(filepath.Join(p.dir, "containers.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := p.run(ctx, "rm", "--force", "--all", "--time", "0"); err != nil {
			t.Logf("podman rm on %s: %v\n%s", c.Name, err, out)
		}
	})
	return p
}

// run runs podman in the node's network namespace only: its mounts (the
// containers' namespaces under /run/netns among them) stay visible to its
// next runs, which `ip netns exec`'s private mount namespace would hide.
func (p *podman) run(ctx context.Context, args ...string) ([]byte, error) {
	global := []string{"--net=" + p.node.Host.NetnsPath(), "podman",
		"--root", filepath.Join(p.dir, "root"), "--runroot", p.runRoot,
		"--tmpdir", filepath.Join(p.dir, "tmp"), "--storage-driver", "vfs"}
	cmd := exec.CommandContext(ctx, "nsenter", append(global, args...)...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(p.dir, "containers.conf"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("podman %s on %s: %v\n%s", strings.Join(args, " "), p.node.Name, err, out)
	}
	return out, nil
}

// busyboxRoot makes a root filesystem of Debian's static busybox, with
// the machine's /usr (iperf3 and the libraries it needs) to be mounted
// read-only.
func busyboxRoot(t *testing.T, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "usr", "etc", "proc", "sys", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("Debian's busybox-static: %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"lib": "usr/lib", "lib64": "usr/lib64"}
	for _, applet := range []string{"sleep", "nslookup"} {
		links[filepath.Join("bin", applet)] = "busybox"
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// modestLimits are the containers' open-file and process limits:
// podman's defaults (a million open files) raise the hard limits, which
// needs CAP_SYS_RESOURCE, and a sandboxed CI runner may not have it.
var modestLimits = []string{"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}

// startContainer starts a detached container on the burrow network
// running command, and returns its address there.
func (p *podman) startContainer(t *testing.T, ctx context.Context, name string, command ...string) netip.Addr {
	t.Helper()
	args := append([]string{"run", "--detach", "--name", name, "--network", "burrow", "--cap-add", "NET_RAW"}, modestLimits...)
	// --rootfs turns the image argument into a root filesystem's path.
	args = append(append(args, "--volume", "/usr:/usr:ro", "--rootfs", busyboxRoot(t, filepath.Join(p.dir, name))), command...)
	if _, err := p.run(ctx, args...); err != nil {
		t.Fatal(err)
	}
	out, err := p.run(ctx, "inspect", "--format", "{{json .NetworkSettings.Networks}}", name)
	if err != nil {
		t.Fatal(err)
	}
	var networks map[string]struct{ IPAddress string }
	if err := json.Unmarshal(out, &networks); err != nil {
		t.Fatalf("podman inspect %s: %v\n%s", name, err, out)
	}
	addr, err := netip.ParseAddr(networks["burrow"].IPAddress)
	if err != nil {
		t.Fatalf("%s's address on the burrow network: %v (%s)", name, err, out)
	}
	return addr
}

// TestPodmanRunsContainersOnBurrowAcrossNATs: Debian's podman, with its
// CNI backend and burrow-cni as the network, runs a container from a
// local busybox root filesystem on each of two nodes behind different
// NATs; one finds the other by name through the resolver podman wrote
// into its resolv.conf, pings it, and runs iperf3 against it by name.
func TestPodmanRunsContainersOnBurrowAcrossNATs(t *testing.T) {
	ctx := ctxFor(t, 3*time.Minute)
	a, c1 := newCNINetwork(t, ctx)
	server, client := newPodman(t, a), newPodman(t, c1)
	serverAddr := server.startContainer(t, ctx, "web-pa", "/usr/bin/iperf3", "--server")
	client.startContainer(t, ctx, "web-pc", "/bin/sleep", "600")
	t.Logf("web-pa is %v", serverAddr)

	resolv, err := client.run(ctx, "exec", "web-pc", "cat", "/etc/resolv.conf")
	if err != nil || !strings.Contains(string(resolv), cniResolver) {
		t.Errorf("web-pc's resolv.conf does not name burrow's resolver %s: %v\n%s", cniResolver, err, resolv)
	}
	var lookup []byte
	if err := cluster.WaitFor(ctx, "web-pa's name to resolve in web-pc", func() bool {
		lookup, _ = client.run(ctx, "exec", "web-pc", "nslookup", "web-pa.burrow.test", cniResolver)
		return strings.Contains(string(lookup), serverAddr.String())
	}); err != nil {
		t.Fatalf("%v: nslookup said\n%s", err, lookup)
	}
	out, err := client.run(ctx, "exec", "web-pc", "ping", "-c", "3", "-W", "2", serverAddr.String())
	if err != nil || !strings.Contains(string(out), " 3 received") {
		t.Errorf("ping from web-pc to web-pa: %v\n%s", err, out)
	}
	var r netlab.Iperf3Result
	if err := cluster.WaitFor(ctx, "iperf3 from web-pc to web-pa by name", func() bool {
		out, err = client.run(ctx, "exec", "web-pc", "iperf3", "--json", "--client", "web-pa.burrow.test", "--time", "2")
		r, err = netlab.ParseIperf3(out)
		return err == nil && r.BitsPerSecond > 0
	}); err != nil {
		t.Fatalf("%v: %v\n%s", err, err, out)
	}
	t.Logf("iperf3 web-pc → web-pa: %.0f Mbit/s", r.BitsPerSecond/1e6)
}
