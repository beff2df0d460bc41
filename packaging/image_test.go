package packaging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"burrow/cni"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
	burrowrt "burrow/runtime"
)

// podmanStore is podman with storage of its own, removed with the test:
// whatever the test builds or runs never touches the machine's images
// and containers, also when it fails halfway.
type podmanStore struct {
	global []string // podman's global flags
	env    []string
}

func newPodmanStore(t *testing.T) *podmanStore {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: running containers with podman's own storage needs root")
	}
	need(t, "podman", "runc", "make", "go")
	dir := t.TempDir()
	// podman's state must be a short path (50 bytes).
	runRoot, err := os.MkdirTemp("", "bwimg-")
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "containers.conf")
	// runc: Debian 12's crun refuses a machine with cgroups v1 and v2
	// mounted side by side.
	if err := os.WriteFile(conf, fmt.Appendf(nil, `[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = %q
runtime = "runc"
`, filepath.Join(dir, "events.log")), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &podmanStore{
		global: []string{"--root", filepath.Join(dir, "storage"), "--runroot", runRoot, "--storage-driver", "vfs"},
		env:    append(os.Environ(), "CONTAINERS_CONF="+conf),
	}
	t.Cleanup(func() {
		for _, args := range [][]string{{"rm", "--all", "--force", "--time", "0"}, {"rmi", "--all", "--force"}} {
			if out, err := p.command(args...).CombinedOutput(); err != nil {
				t.Logf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		os.RemoveAll(runRoot)
	})
	return p
}

func (p *podmanStore) command(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", append(append([]string{}, p.global...), args...)...)
	cmd.Env = p.env
	return cmd
}

func (p *podmanStore) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.command(args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// makeImage runs 'make image' with this store's podman.
func (p *podmanStore) makeImage(t *testing.T, debArch, image string) {
	t.Helper()
	cmd := exec.Command("make", "image", "DEB_ARCH="+debArch, "IMAGE="+image, "PODMAN=podman "+strings.Join(p.global, " "))
	cmd.Dir, cmd.Env = repoRoot, p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image DEB_ARCH=%s: %v\n%s", debArch, err, out)
	}
}

// nativeDebArch is this machine's architecture as Debian and the
// Makefile's DEB_ARCH name it.
func nativeDebArch() string {
	if runtime.GOARCH == "arm" {
		return "armhf"
	}
	return runtime.GOARCH
}

// podmanVolumes are podman's --volume flags for the container's mounts,
// the node's host paths taken under root (but its devices as they are),
// its ConfigMap and Secret files made as the kubelet would for nodeName.
func podmanVolumes(t *testing.T, m *manifest, c *corev1.Container, root, nodeName string, secret map[string][]byte) []string {
	t.Helper()
	var args []string
	for _, vm := range c.VolumeMounts {
		v := m.volume(vm.Name)
		var source string
		switch {
		case v == nil:
			t.Fatalf("%s mounts volume %s, which the DaemonSet does not have", c.Name, vm.Name)
		case v.ConfigMap != nil:
			source = filepath.Join(t.TempDir(), vm.SubPath)
			if err := os.WriteFile(source, []byte(m.config.Data[vm.SubPath]), 0o644); err != nil {
				t.Fatal(err)
			}
		case v.Secret != nil:
			source = secretFile(t, v, vm, nodeName, secret)
		case v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate:
			source = filepath.Join(root, v.HostPath.Path)
			if err := os.MkdirAll(source, 0o755); err != nil {
				t.Fatal(err)
			}
		case v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathCharDev:
			source = v.HostPath.Path
		case v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathFile:
			// The one file the DaemonSet takes from the node is its
			// machine id.
			source = filepath.Join(root, v.HostPath.Path)
			if err := os.MkdirAll(filepath.Dir(source), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(source, fmt.Appendf(nil, "%032x\n", os.Getpid()), 0o444); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s mounts %s, of a kind this test cannot give it", c.Name, vm.Name)
		}
		mode := "rw"
		if vm.ReadOnly {
			mode = "ro"
		}
		args = append(args, "--volume", source+":"+vm.MountPath+":"+mode)
	}
	return args
}

// runArgs are podman's flags for a container of no network; podman's
// default limits (a million open files) raise hard limits, which a
// sandboxed runner may not be allowed to.
var runArgs = []string{"run", "--rm", "--network", "none", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}

// TestImageRunsBurrowAndInstallsTheCNIPlugin builds the image with
// 'make image' and Debian's podman, runs burrow in it, and runs the
// manifest's install-cni container as a node's runtime would, with its
// securityContext, its ConfigMap and temporary directories for the
// node's CNI directories. The arm64 image is built too, without
// emulation, and only inspected.
func TestImageRunsBurrowAndInstallsTheCNIPlugin(t *testing.T) {
	p := newPodmanStore(t)
	image := fmt.Sprintf("localhost/burrow-test-%d:native", os.Getpid())
	p.makeImage(t, nativeDebArch(), image)

	out := p.run(t, append(runArgs, image, "version")...)
	if fields := strings.Fields(out); len(fields) != 4 || fields[0] != "burrow" || !strings.HasPrefix(fields[2], "linux/"+runtime.GOARCH) {
		t.Errorf("burrow version in the image printed %q", out)
	}
	if arch := strings.TrimSpace(p.run(t, "image", "inspect", "--format", "{{.Architecture}}", image)); arch != runtime.GOARCH {
		t.Errorf("the image is for %s, want %s", arch, runtime.GOARCH)
	}
	t.Logf("image size: %s", p.run(t, "image", "inspect", "--format", "{{.Size}}", image))

	// install-cni as the DaemonSet runs it.
	m := loadManifest(t)
	install := m.container(t, "install-cni")
	args := append([]string{}, runArgs...)
	if sc := install.SecurityContext; sc != nil {
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Drop {
				args = append(args, "--cap-drop", string(c))
			}
		}
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			args = append(args, "--read-only")
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			args = append(args, "--security-opt", "no-new-privileges")
		}
	}
	node := t.TempDir() // the node's file system
	args = append(args, podmanVolumes(t, m, install, node, "", nil)...)
	args = append(append(args, image), install.Args...)
	t.Logf("install-cni said: %s", p.run(t, args...))

	plugin, err := os.ReadFile(filepath.Join(node, "opt/cni/bin", cni.PluginName))
	if err != nil {
		t.Fatalf("install-cni put no plugin into the node's /opt/cni/bin: %v", err)
	}
	binary, err := os.ReadFile(filepath.Join(repoRoot, "out/image", nativeDebArch(), "burrow"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plugin, binary) {
		t.Error("the node's burrow-cni is not the image's burrow")
	}
	cfg := m.nodeConfig(t, install)
	data, err := os.ReadFile(filepath.Join(node, "etc/cni/net.d/burrow.conflist"))
	if err != nil {
		t.Fatalf("install-cni wrote no burrow.conflist into the node's /etc/cni/net.d: %v", err)
	}
	var list struct {
		Plugins []struct{ Type, Socket, DataDir string }
	}
	if err := json.Unmarshal(data, &list); err != nil || len(list.Plugins) == 0 {
		t.Fatalf("burrow.conflist: %v\n%s", err, data)
	}
	if got := list.Plugins[0]; got.Type != cni.PluginName || got.Socket != cfg.ControlSocket || got.DataDir != filepath.Join(cfg.StateDir, "containers") {
		t.Errorf("burrow.conflist names %+v; the daemon's socket is %s and its state %s", got, cfg.ControlSocket, cfg.StateDir)
	}

	// The image of an arm64 node: FROM scratch and COPY need no emulator.
	arm := fmt.Sprintf("localhost/burrow-test-%d:arm64", os.Getpid())
	p.makeImage(t, "arm64", arm)
	if got := strings.TrimSpace(p.run(t, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", arm)); got != "linux/arm64" {
		t.Errorf("make image DEB_ARCH=arm64 built an image for %s", got)
	}
}

// TestImageRunsTheDaemonAsTheDaemonSetDoes runs the manifest's burrow
// container from the image with podman, on the network of a namespace
// standing for a node's, with the node's files of a Secret made as
// documented: the daemon starts with the mounted key and certificate,
// makes its TAP on the node's network and answers on the control socket
// burrow-cni uses, at the node's path; stopped, it removes its TAP.
func TestImageRunsTheDaemonAsTheDaemonSetDoes(t *testing.T) {
	p := newPodmanStore(t)
	lab := labtest.New(t)
	host, err := lab.AddSandbox("k8snode")
	if err != nil {
		t.Fatal(err)
	}
	m := loadManifest(t)
	daemon := m.container(t, "burrow")
	cfg := m.nodeConfig(t, daemon)
	const nodeName = "worker-1"
	secret := nodeSecret(t, m, cfg.Network, nodeName)
	image := fmt.Sprintf("localhost/burrow-test-%d:daemon", os.Getpid())
	p.makeImage(t, nativeDebArch(), image)

	args := []string{"run", "--detach", "--name", fmt.Sprintf("burrow-test-%d", os.Getpid()),
		"--network", "ns:" + host.NetnsPath(), "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}
	if sc := daemon.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
		args = append(args, "--privileged")
	}
	node := t.TempDir()
	args = append(append(args, podmanVolumes(t, m, daemon, node, nodeName, secret)...), image)
	container := strings.TrimSpace(p.run(t, append(args, daemon.Args...)...))

	socket := filepath.Join(node, cfg.ControlSocket)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st *burrowrt.Status
	if err := cluster.WaitFor(ctx, "the daemon to answer on "+socket, func() bool {
		resp, err := burrowrt.Query(socket, burrowrt.Request{Command: "status"})
		st = nil
		if err == nil {
			st = resp.Status
		}
		return st != nil
	}); err != nil {
		t.Fatalf("%v; the container's log:\n%s", err, p.run(t, "logs", container))
	}
	if st.Name != nodeName || st.Network != cfg.Network || st.TAP.Name != cfg.TAP.Name {
		t.Errorf("the daemon is %s of network %s with TAP %q; want %s of %s with %s", st.Name, st.Network, st.TAP.Name, nodeName, cfg.Network, cfg.TAP.Name)
	}
	if out, err := host.Run(ctx, "ip", "link", "show", cfg.TAP.Name); err != nil {
		t.Errorf("no TAP on the node's network: %v\n%s", err, out)
	}
	p.run(t, "stop", "--time", "10", container)
	if out, err := host.Run(ctx, "ip", "link", "show", cfg.TAP.Name); err == nil {
		t.Errorf("the stopped daemon left its TAP behind:\n%s", out)
	}
}
