package bench

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/runtime/kernelpath"
)

// peer is one contender: how to check it is installed, start it between
// hosts a and b with addresses from a subnet, and name its version.
type peer struct {
	name  string // as given to --peers
	title string // as shown in the table
	// prepare returns why the peer cannot run here, naming the Debian
	// package or Go module that provides what is missing.
	prepare func(ctx context.Context, b *bencher) error
	start   func(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error
	version func(b *bencher) string
}

var (
	baselinePeer = &peer{
		name:    "none",
		title:   "no VPN (underlay)",
		prepare: func(context.Context, *bencher) error { return nil },
		start: func(_ context.Context, b *bencher, t *tunnel, _ netip.Prefix) error {
			t.target = b.b.Addr
			return nil
		},
		version: func(*bencher) string { return "" },
	}
	burrowPeer = &peer{
		name:  "burrow",
		title: "burrow",
		prepare: func(_ context.Context, b *bencher) error {
			return needFile(b.opts.Burrow, "the burrow binary (--burrow)")
		},
		start: func(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
			return startBurrow(ctx, b, t, subnet, burrowVariant{})
		},
		// The report names burrow's commit and binary in its header.
		version: func(*bencher) string { return "" },
	}
	burrowFirewallPeer = &peer{
		name:  "burrow-firewall",
		title: fmt.Sprintf("burrow, %d-rule firewall", benchFirewallRules),
		prepare: func(_ context.Context, b *bencher) error {
			return needFile(b.opts.Burrow, "the burrow binary (--burrow)")
		},
		start: func(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
			return startBurrow(ctx, b, t, subnet, burrowVariant{firewall: true})
		},
		version: func(*bencher) string { return "" },
	}
	burrowKernelPeer = &peer{
		name:  "burrow-kernel",
		title: "burrow, kernel path (unencrypted)",
		prepare: func(_ context.Context, b *bencher) error {
			if err := needFile(b.opts.Burrow, "the burrow binary (--burrow)"); err != nil {
				return err
			}
			if err := kernelpath.Available(); err != nil {
				return fmt.Errorf("this kernel cannot run burrow's kernel path: %w", err)
			}
			return nil
		},
		start: func(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
			return startBurrow(ctx, b, t, subnet, burrowVariant{kernelPath: true})
		},
		version: func(*bencher) string { return "" },
	}
	upstreamWireguardPeer = &peer{
		name:  "wireguard-go",
		title: "wireguard-go (upstream)",
		prepare: func(ctx context.Context, b *bencher) error {
			if err := needCommands(wireguardTools); err != nil {
				return err
			}
			path, err := upstreamWireguard(ctx, b.opts.CacheDir, b.progress)
			b.upstreamWireguard = path
			return err
		},
		start: func(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
			return startWireguard(ctx, b, t, subnet, b.upstreamWireguard, "wgu")
		},
		version: func(b *bencher) string { return firstLine(b.upstreamWireguard, "--version") },
	}
	debianWireguardPeer = &peer{
		name:  "wireguard-go-debian",
		title: "wireguard-go (Debian)",
		prepare: func(context.Context, *bencher) error {
			return needCommands(tool{debianWireguardGo, "Debian package wireguard-go"}, wireguardTools)
		},
		start: func(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
			return startWireguard(ctx, b, t, subnet, debianWireguardGo, "wgd")
		},
		version: func(*bencher) string {
			return withDebianVersion(firstLine(debianWireguardGo, "--version"), "wireguard-go")
		},
	}
	tincPeer = &peer{
		name:    "tinc",
		title:   "tinc 1.0 (switch mode)",
		prepare: func(context.Context, *bencher) error { return needCommands(tool{"tincd", "Debian package tinc"}) },
		start:   startTinc,
		version: func(*bencher) string { return withDebianVersion(firstLine("tincd", "--version"), "tinc") },
	}
	nebulaPeer = &peer{
		name:  "nebula",
		title: "nebula",
		prepare: func(context.Context, *bencher) error {
			return needCommands(tool{"nebula", "Debian package nebula"}, tool{"nebula-cert", "Debian package nebula"})
		},
		start: startNebula,
		version: func(*bencher) string {
			return withDebianVersion("nebula "+strings.TrimPrefix(firstLine("nebula", "-version"), "Version: "), "nebula")
		},
	}
	n2nPeer = &peer{
		name:  "n2n",
		title: "n2n v1",
		prepare: func(context.Context, *bencher) error {
			return needCommands(tool{"edge", "Debian package n2n"}, tool{"supernode", "Debian package n2n"})
		},
		start: startN2N,
		// n2n v1 has no version flag; its help text starts with a banner.
		version: func(*bencher) string {
			return withDebianVersion(n2nVersion.FindString(firstLine("edge", "-h")), "n2n")
		},
	}

	// allPeers is every contender in the order they run: the baseline
	// first, then burrow, burrow with its kernel path, then their
	// reference, upstream wireguard-go.
	allPeers = []*peer{baselinePeer, burrowPeer, burrowKernelPeer, burrowFirewallPeer, upstreamWireguardPeer, debianWireguardPeer, tincPeer, nebulaPeer, n2nPeer}
)

// debianWireguardGo is where Debian's package installs wireguard-go.
const debianWireguardGo = "/usr/bin/wireguard-go"

// wireguardTools configures both wireguard-go builds.
var wireguardTools = tool{"wg", "Debian package wireguard-tools"}

// n2nVersion finds the version in n2n's banner, "Welcome to n2n v.1.3.2 for".
var n2nVersion = regexp.MustCompile(`n2n v\.[0-9.]+`)

// tool is a program a peer needs and where it comes from.
type tool struct {
	command string
	source  string
}

// needCommands returns an error naming the sources of the missing tools.
func needCommands(tools ...tool) error {
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t.command); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", t.command, t.source))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s; bench/install-peers.sh installs it", strings.Join(missing, ", "))
	}
	return nil
}

func needFile(path, what string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// firstLine returns the first non-empty line a program prints, whatever
// its exit status: how the peers tell their version.
func firstLine(program string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, program, args...).CombinedOutput()
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// withDebianVersion adds the version of the Debian package that installed
// the program, which pins the build more exactly than the program's own.
func withDebianVersion(version, pkg string) string {
	out, err := exec.Command("dpkg-query", "--show", "--showformat=${Version}", pkg).Output()
	if err != nil || len(out) == 0 {
		return version
	}
	return fmt.Sprintf("%s (Debian package %s %s)", version, pkg, out)
}

// ends returns the two hosts, a first.
func (b *bencher) ends() []*netlab.Host { return []*netlab.Host{b.a, b.b} }

// other returns the host at the far end from h.
func (b *bencher) other(h *netlab.Host) *netlab.Host {
	if h == b.a {
		return b.b
	}
	return b.a
}

// virtualAddr is h's address inside the tunnel: .1 for a, .2 for b.
func (b *bencher) virtualAddr(h *netlab.Host, subnet netip.Prefix) netip.Prefix {
	if h == b.a {
		return hostAddr(subnet, 1)
	}
	return hostAddr(subnet, 2)
}

// run runs a configuration command inside the host's namespace.
func run(ctx context.Context, h *netlab.Host, name string, args ...string) error {
	_, err := h.Run(ctx, name, args...)
	return err
}

// waitLink waits until the VPN has created its interface on h.
func waitLink(ctx context.Context, t *tunnel, h *netlab.Host, ifname string) error {
	return t.waitFor(ctx, fmt.Sprintf("interface %s on %s", ifname, h.Name), func() bool {
		return run(ctx, h, "ip", "link", "show", "dev", ifname) == nil
	})
}

// addressLink gives the VPN's interface on h its tunnel address and brings
// it up.
func addressLink(ctx context.Context, h *netlab.Host, ifname string, addr netip.Prefix) error {
	if err := run(ctx, h, "ip", "addr", "add", addr.String(), "dev", ifname); err != nil {
		return err
	}
	return run(ctx, h, "ip", "link", "set", "dev", ifname, "up")
}

// kernelPathUp is what a burrow daemon logs once its kernel path carries
// the frames for a peer (runtime/kernelpath.go).
const kernelPathUp = "kernel path to peer up"

// burrowVariant says how the benchmark's burrow daemons differ from the
// defaults.
type burrowVariant struct {
	// kernelPath: both daemons carry their frames to each other in the
	// kernel, unencrypted.
	kernelPath bool
	// firewall: both daemons run a firewall of benchFirewallRules inbound
	// rules, the last of which allows the benchmark's traffic.
	firewall bool
}

// benchFirewallRules is the size of the firewall the burrow-firewall
// contender runs: its cost is to stay within 5 % of none.
const benchFirewallRules = 20

// benchFirewall is a firewall section of benchFirewallRules inbound rules:
// all but the last name ports and groups the benchmark never uses, so a
// new connection is checked against every rule before the last allows it.
func benchFirewall() *config.Firewall {
	fw := &config.Firewall{Outbound: []config.FirewallRule{{Host: "any"}}}
	for i := range benchFirewallRules - 1 {
		fw.Inbound = append(fw.Inbound, config.FirewallRule{Proto: "tcp", Port: fmt.Sprint(20000 + i), Group: fmt.Sprintf("g%d", i)})
	}
	fw.Inbound = append(fw.Inbound, config.FirewallRule{Host: "any"})
	return fw
}

// startBurrow runs a two-node burrow network, a dialling b. With the
// kernel path it returns once both logs say it carries the frames.
func startBurrow(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix, v burrowVariant) error {
	nw, err := cluster.New(b.lab, "bench", b.opts.Burrow)
	if err != nil {
		return err
	}
	var nodes []*cluster.Node
	for _, h := range b.ends() {
		node, err := nw.AddNode(h, h.Name, b.virtualAddr(h, subnet))
		if err != nil {
			return err
		}
		// Debug logging would cost the data path time it does not spend
		// in production.
		node.Config.Log.Level = "info"
		if v.firewall {
			node.Config.Firewall = benchFirewall()
		}
		if v.kernelPath {
			// The lab's hosts have addresses of 198.18.0.0/16, which is
			// not a private network, so trusting them takes
			// allow_public; their underlay is a bridge inside this
			// machine, and nothing crosses a network nobody here
			// controls.
			node.Config.KernelPath = config.KernelPath{Enabled: true, AllowPublic: true, Trusted: []string{
				netip.PrefixFrom(b.a.Addr, 32).String(), netip.PrefixFrom(b.b.Addr, 32).String(),
			}}
		}
		nodes = append(nodes, node)
	}
	nodes[0].Dial(nodes[1])
	for _, node := range nodes {
		if err := node.Start(); err != nil {
			return err
		}
		t.add(node.Name, node.Process)
	}
	t.target = nodes[1].Address.Addr()
	if err := t.waitFor(ctx, "the burrow link", func() bool {
		return nodes[0].UpLinks() >= 1 && nodes[1].UpLinks() >= 1
	}); err != nil || !v.kernelPath {
		return err
	}
	if err := t.waitFor(ctx, fmt.Sprintf("%q in both daemons' logs", kernelPathUp), func() bool {
		for _, node := range nodes {
			log, err := os.ReadFile(node.Process.LogPath())
			if err != nil || !bytes.Contains(log, []byte(kernelPathUp)) {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	return b.countProgramRunTime(t, nodes[0].Config.TAP.Name)
}

// The kernel path's programs whose run time the benchmark counts: those
// that carry iperf3's data from a to b.
const (
	sendingProgram   = "a's sending program (TAP egress)"
	receivingProgram = "b's receiving program (underlay ingress)"
)

// countProgramRunTime has the kernel count the run time of the kernel
// path's programs while the tunnel runs: the figure the Warrens paper
// gives for its eBPF tunnel. Both ends' TAPs have the same name.
func (b *bencher) countProgramRunTime(t *tunnel, tap string) error {
	stats, err := kernelpath.EnableRunTime()
	if err != nil {
		fmt.Fprintf(b.progress, "   the kernel keeps no run time of eBPF programs (%v): the programs' own cost is not measured\n", err)
		return nil
	}
	t.closers = append(t.closers, stats)
	t.programs = []kernelProgram{
		{label: sendingProgram, host: b.a, device: tap, egress: true},
		{label: receivingProgram, host: b.b, device: "eth0"},
	}
	return nil
}

// wireguardPort is the UDP port both wireguard-go ends listen on.
const wireguardPort = 51821

// startWireguard runs a wireguard-go binary on both hosts, configured with
// wg and ip. Interfaces are named <prefix>-a and -b: wireguard-go's control
// sockets live in the file system, shared by all namespaces.
func startWireguard(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix, binary, prefix string) error {
	dir, err := b.configDir(prefix)
	if err != nil {
		return err
	}
	public := map[*netlab.Host]string{}
	for _, h := range b.ends() {
		key, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, h.Name+".key")
		if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key.Bytes())+"\n"), 0o600); err != nil {
			return err
		}
		public[h] = base64.StdEncoding.EncodeToString(key.PublicKey().Bytes())
	}
	for _, h := range b.ends() {
		ifname := prefix + "-" + h.Name
		p, err := h.Start("env", "WG_PROCESS_FOREGROUND=1", binary, "-f", ifname)
		if err != nil {
			return err
		}
		t.add(h.Name, p)
		if err := t.waitFor(ctx, "the wireguard-go control socket of "+ifname, func() bool {
			return run(ctx, h, "wg", "show", ifname) == nil
		}); err != nil {
			return err
		}
		far := b.other(h)
		if err := run(ctx, h, "wg", "set", ifname,
			"listen-port", fmt.Sprint(wireguardPort),
			"private-key", filepath.Join(dir, h.Name+".key"),
			"peer", public[far],
			"endpoint", netip.AddrPortFrom(far.Addr, wireguardPort).String(),
			"allowed-ips", netip.PrefixFrom(b.virtualAddr(far, subnet).Addr(), 32).String()); err != nil {
			return err
		}
		if err := addressLink(ctx, h, ifname, b.virtualAddr(h, subnet)); err != nil {
			return err
		}
	}
	t.target = b.virtualAddr(b.b, subnet).Addr()
	return nil
}

// startTinc runs tinc 1.0 in switch mode, its layer-2 mode: a connects to
// b, each knows the other's host file with address and RSA public key.
func startTinc(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
	const ifname, port = "tinc0", 655
	dirs := map[*netlab.Host]string{}
	hostFiles := map[*netlab.Host][]byte{}
	for _, h := range b.ends() {
		dir, err := b.configDir("tinc", h.Name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, "hosts"), 0o700); err != nil {
			return err
		}
		conf := fmt.Sprintf("Name = %s\nMode = switch\nInterface = %s\nPort = %d\nAddressFamily = ipv4\n", h.Name, ifname, port)
		if h == b.a {
			conf += fmt.Sprintf("ConnectTo = %s\n", b.b.Name)
		}
		if err := os.WriteFile(filepath.Join(dir, "tinc.conf"), []byte(conf), 0o600); err != nil {
			return err
		}
		hostFile := filepath.Join(dir, "hosts", h.Name)
		if err := os.WriteFile(hostFile, fmt.Appendf(nil, "Address = %s\nPort = %d\n", h.Addr, port), 0o600); err != nil {
			return err
		}
		// Without a terminal, tincd -K saves the keys where tinc.conf
		// says without asking: the private key in the directory, the
		// public key appended to the host file.
		if err := run(ctx, h, "tincd", "-c", dir, "-K", "2048"); err != nil {
			return err
		}
		data, err := os.ReadFile(hostFile)
		if err != nil {
			return err
		}
		dirs[h], hostFiles[h] = dir, data
	}
	for _, h := range b.ends() {
		far := b.other(h)
		if err := os.WriteFile(filepath.Join(dirs[h], "hosts", far.Name), hostFiles[far], 0o600); err != nil {
			return err
		}
	}
	// b first: a connects to it, and would wait out tinc's retry delay
	// if b were not listening yet.
	for _, h := range []*netlab.Host{b.b, b.a} {
		// tincd's default PID file is one path for every namespace.
		p, err := h.Start("tincd", "-D", "-c", dirs[h], "--pidfile="+filepath.Join(dirs[h], "tinc.pid"))
		if err != nil {
			return err
		}
		t.add(h.Name, p)
		if err := waitLink(ctx, t, h, ifname); err != nil {
			return err
		}
		if err := addressLink(ctx, h, ifname, b.virtualAddr(h, subnet)); err != nil {
			return err
		}
	}
	t.target = b.virtualAddr(b.b, subnet).Addr()
	return nil
}

// startNebula runs nebula with a fresh CA and one certificate per host.
// The two hosts know each other from static_host_map, so no lighthouse
// is needed; the firewall lets everything through, as the other VPNs do.
func startNebula(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
	const ifname, port = "nebula1", 4242
	dir, err := b.configDir("nebula")
	if err != nil {
		return err
	}
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := run(ctx, b.a, "nebula-cert", "ca", "-name", "burrow-bench", "-out-crt", caCert, "-out-key", caKey); err != nil {
		return err
	}
	for _, h := range b.ends() {
		cert, key := filepath.Join(dir, h.Name+".crt"), filepath.Join(dir, h.Name+".key")
		if err := run(ctx, h, "nebula-cert", "sign", "-ca-crt", caCert, "-ca-key", caKey,
			"-name", h.Name, "-ip", b.virtualAddr(h, subnet).String(), "-out-crt", cert, "-out-key", key); err != nil {
			return err
		}
		far := b.other(h)
		config := fmt.Sprintf(`pki:
  ca: %s
  cert: %s
  key: %s
static_host_map:
  "%s": ["%s"]
lighthouse:
  am_lighthouse: false
listen:
  host: 0.0.0.0
  port: %d
tun:
  dev: %s
firewall:
  outbound:
    - {port: any, proto: any, host: any}
  inbound:
    - {port: any, proto: any, host: any}
logging:
  level: info
`, caCert, cert, key, b.virtualAddr(far, subnet).Addr(), netip.AddrPortFrom(far.Addr, port), port, ifname)
		path := filepath.Join(dir, h.Name+".yml")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			return err
		}
		p, err := h.Start("nebula", "-config", path)
		if err != nil {
			return err
		}
		t.add(h.Name, p)
	}
	for _, h := range b.ends() {
		if err := waitLink(ctx, t, h, ifname); err != nil {
			return err
		}
	}
	t.target = b.virtualAddr(b.b, subnet).Addr()
	return nil
}

// startN2N runs n2n v1: a supernode on a and an edge on each host. The
// edges register with the supernode and then exchange packets directly.
func startN2N(ctx context.Context, b *bencher, t *tunnel, subnet netip.Prefix) error {
	const ifname, supernodePort = "n2n0", 7654
	var secret [16]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return err
	}
	supernode, err := b.a.Start("supernode", "-l", fmt.Sprint(supernodePort))
	if err != nil {
		return err
	}
	t.add("supernode", supernode)
	if err := b.a.WaitListening(ctx, "udp", supernodePort); err != nil {
		return err
	}
	for _, h := range b.ends() {
		// edge reads the key from N2N_KEY so that it stays out of ps.
		p, err := h.Start("env", "N2N_KEY="+hex.EncodeToString(secret[:]), "edge",
			"-d", ifname, "-a", b.virtualAddr(h, subnet).Addr().String(),
			"-s", net.IP(net.CIDRMask(subnet.Bits(), 32)).String(), "-c", "burrowbench",
			"-l", netip.AddrPortFrom(b.a.Addr, supernodePort).String())
		if err != nil {
			return err
		}
		t.add("edge "+h.Name, p)
	}
	for _, h := range b.ends() {
		if err := waitLink(ctx, t, h, ifname); err != nil {
			return err
		}
	}
	t.target = b.virtualAddr(b.b, subnet).Addr()
	return nil
}
