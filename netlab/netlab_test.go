package netlab_test

import (
	"bufio"
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"burrow/netlab"
	"burrow/netlab/labtest"
)

func addHost(t *testing.T, lab *netlab.Lab, name string) *netlab.Host {
	t.Helper()
	h, err := lab.AddHost(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// addSite adds a site with one host named pc.
func addSite(t *testing.T, lab *netlab.Lab, name string, nat netlab.NAT) (*netlab.Site, *netlab.Host) {
	t.Helper()
	site, err := lab.AddSite(name, nat)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := site.AddHost(name + "-pc")
	if err != nil {
		t.Fatal(err)
	}
	return site, pc
}

// pingUntilAnswered pings once a second for up to 5 s, until a reply
// comes: a new IPv6 path answers only once neighbour discovery on each
// link is done, which a loaded machine can take over a second for.
func pingUntilAnswered(t *testing.T, from *netlab.Host, to netip.Addr) netlab.PingResult {
	t.Helper()
	var r netlab.PingResult
	for range 5 {
		if r = ping(t, from, to, 1); r.Received == 1 {
			break
		}
	}
	return r
}

func ping(t *testing.T, from *netlab.Host, to netip.Addr, count int) netlab.PingResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := netlab.Ping(ctx, from, to, count, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustReach(t *testing.T, from *netlab.Host, network string, localPort int, to netip.AddrPort) netip.AddrPort {
	t.Helper()
	seen, err := probeFrom(t, from, network, localPort, to)
	if err != nil {
		t.Fatalf("%s cannot reach %s over %s: %v", from.Name, to, network, err)
	}
	return seen
}

func mustNotReach(t *testing.T, from *netlab.Host, network string, to netip.AddrPort) {
	t.Helper()
	if seen, err := probeFrom(t, from, network, 0, to); err == nil {
		t.Errorf("%s reached %s over %s (seen as %s), want it blocked", from.Name, to, network, seen)
	}
}

// labNamespaces lists the namespaces whose names start with the prefix.
func labNamespaces(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, prefix+"-") {
			names = append(names, name)
		}
	}
	return names
}

func stateFileExists(prefix string) bool {
	_, err := os.Stat(filepath.Join(netlab.StateDir, prefix+".json"))
	return err == nil
}

// waitEnded fails the test unless the process ends within a few seconds.
func waitEnded(t *testing.T, p *netlab.Process) {
	t.Helper()
	ended := make(chan struct{})
	go func() {
		p.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Errorf("process %d still runs", p.Pid())
	}
}

func TestInternetHostsPingEachOther(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a, b := addHost(t, lab, "a"), addHost(t, lab, "b")
	for _, h := range []*netlab.Host{a, b} {
		if !netlab.InternetRange.Contains(h.Addr) {
			t.Errorf("%s has address %s outside %s", h.Name, h.Addr, netlab.InternetRange)
		}
	}
	if r := ping(t, a, b.Addr, 3); r.Transmitted != 3 || r.Received != 3 || r.AvgRTT <= 0 {
		t.Errorf("ping a to b: %+v, want 3 of 3 replies with a round-trip time", r)
	}
	if r := ping(t, b, a.Addr, 1); r.Received != 1 {
		t.Errorf("ping b to a: %+v, want the reply", r)
	}
	// Any destination has a route, so programs can learn their outbound
	// address; packets to it find no neighbour in the sealed lab.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := a.Run(ctx, "ip", "route", "get", "192.0.2.1"); err != nil || !strings.Contains(string(out), "src "+a.Addr.String()) {
		t.Errorf("route from an internet host to an outside address: %q, %v", out, err)
	}
}

func TestEndpointIndependentSite(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a, b := addHost(t, lab, "a"), addHost(t, lab, "b")
	site, pc := addSite(t, lab, "home", netlab.EndpointIndependent)
	if !netlab.PrivateLANRange.Contains(pc.Addr) || !site.LAN.Contains(pc.Addr) {
		t.Errorf("site host address %s, want one in %s inside %s", pc.Addr, site.LAN, netlab.PrivateLANRange)
	}

	if r := ping(t, pc, a.Addr, 1); r.Received != 1 {
		t.Errorf("ping from the site to the internet: %+v, want the reply", r)
	}
	startServer(t, a, "udp", 7000)
	startServer(t, b, "udp", 7000)
	seenByA := mustReach(t, pc, "udp", 40000, netip.AddrPortFrom(a.Addr, 7000))
	seenByB := mustReach(t, pc, "udp", 40000, netip.AddrPortFrom(b.Addr, 7000))
	if seenByA.Addr() != site.WAN || seenByA != seenByB {
		t.Errorf("one socket seen as %s by a and %s by b, want the same mapping on %s", seenByA, seenByB, site.WAN)
	}

	// An attacker next to the router routes the private LAN through it.
	startServer(t, pc, "tcp", 8080)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.Run(ctx, "ip", "route", "add", site.LAN.String(), "via", site.WAN.String()); err != nil {
		t.Fatal(err)
	}
	mustNotReach(t, a, "tcp", netip.AddrPortFrom(pc.Addr, 8080))
	if r := ping(t, a, site.WAN, 1); r.Received != 0 {
		t.Errorf("the router answered a ping from the internet: %+v", r)
	}
}

func TestNoNATSiteIsRouted(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	before := addHost(t, lab, "before")
	site, pc := addSite(t, lab, "dc", netlab.NoNAT)
	after := addHost(t, lab, "after")
	if !netlab.PublicLANRange.Contains(pc.Addr) {
		t.Errorf("host of a NoNAT site has address %s outside %s", pc.Addr, netlab.PublicLANRange)
	}
	startServer(t, pc, "tcp", 8080)
	startServer(t, before, "udp", 7000)
	// Internet hosts added before and after the site both have its route.
	for _, h := range []*netlab.Host{before, after} {
		if seen := mustReach(t, h, "tcp", 0, netip.AddrPortFrom(pc.Addr, 8080)); seen.Addr() != h.Addr {
			t.Errorf("site host sees %s as %s", h.Name, seen.Addr())
		}
	}
	if seen := mustReach(t, pc, "udp", 0, netip.AddrPortFrom(before.Addr, 7000)); seen.Addr() != pc.Addr {
		t.Errorf("site host seen as %s, want its own address %s untranslated (router %s)", seen.Addr(), pc.Addr, site.WAN)
	}
}

func TestSymmetricSiteMapsEachDestinationAnew(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a, b := addHost(t, lab, "a"), addHost(t, lab, "b")
	site, pc := addSite(t, lab, "cgn", netlab.Symmetric)
	startServer(t, a, "udp", 7000)
	startServer(t, b, "udp", 7000)
	toA, toB := netip.AddrPortFrom(a.Addr, 7000), netip.AddrPortFrom(b.Addr, 7000)

	seenByA := mustReach(t, pc, "udp", 40000, toA)
	seenByB := mustReach(t, pc, "udp", 40000, toB)
	if seenByA.Addr() != site.WAN || seenByB.Addr() != site.WAN {
		t.Errorf("seen as %s and %s, want the router's address %s", seenByA, seenByB, site.WAN)
	}
	// Random ports collide once in tens of thousands of runs.
	if seenByA.Port() == seenByB.Port() {
		t.Errorf("one socket has port %d towards both destinations, want a new port per destination", seenByA.Port())
	}
	if again := mustReach(t, pc, "udp", 40000, toA); again != seenByA {
		t.Errorf("the same flow was mapped to %s, then %s", seenByA, again)
	}
	if err := site.FlushConntrack(); err != nil {
		t.Fatal(err)
	}
	if fresh := mustReach(t, pc, "udp", 40000, toA); fresh == seenByA {
		t.Errorf("mapping %s survived FlushConntrack", fresh)
	}
}

func TestUDPBlockedSiteAllowsOnlyTCP443Out(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a := addHost(t, lab, "a")
	site, pc := addSite(t, lab, "corp", netlab.UDPBlocked)
	startServer(t, a, "udp", 7000)
	startServer(t, a, "tcp", 443)
	startServer(t, a, "tcp", 8443)

	if seen := mustReach(t, pc, "tcp", 0, netip.AddrPortFrom(a.Addr, 443)); seen.Addr() != site.WAN {
		t.Errorf("TCP 443 seen from %s, want the router's address %s", seen.Addr(), site.WAN)
	}
	mustNotReach(t, pc, "udp", netip.AddrPortFrom(a.Addr, 7000))
	mustNotReach(t, pc, "tcp", netip.AddrPortFrom(a.Addr, 8443))
}

func TestCloseRemovesEverything(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	t.Parallel()
	lab, err := netlab.New(netlab.Options{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	addHost(t, lab, "a")
	_, pc := addSite(t, lab, "home", netlab.EndpointIndependent)
	p, err := pc.Start("sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	if got := labNamespaces(t, lab.Prefix()); len(got) != 4 {
		t.Errorf("namespaces of the lab: %v, want inet, a, home and home-pc", got)
	}
	if !stateFileExists(lab.Prefix()) {
		t.Error("no state file while the lab is open")
	}

	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, p)
	if err := syscall.Kill(p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d after Close: %v, want it gone", p.Pid(), err)
	}
	if got := labNamespaces(t, lab.Prefix()); len(got) != 0 {
		t.Errorf("namespaces left after Close: %v", got)
	}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), lab.Prefix()) {
		t.Errorf("links named after the lab after Close:\n%s", out)
	}
	if stateFileExists(lab.Prefix()) {
		t.Error("state file left after Close")
	}
	if err := lab.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := lab.AddHost("b"); err == nil {
		t.Error("AddHost succeeded on a closed lab")
	}
}

func TestCleanupRemovesLabThatWasNotClosed(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	t.Parallel()
	lab, err := netlab.New(netlab.Options{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lab.Close() })
	a := addHost(t, lab, "a")
	addSite(t, lab, "home", netlab.Symmetric)
	p, err := a.Start("sleep", "60")
	if err != nil {
		t.Fatal(err)
	}

	if err := netlab.Cleanup(lab.Prefix()); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, p)
	if got := labNamespaces(t, lab.Prefix()); len(got) != 0 {
		t.Errorf("namespaces left after Cleanup: %v", got)
	}
	if stateFileExists(lab.Prefix()) {
		t.Error("state file left after Cleanup")
	}
	if err := netlab.Cleanup(lab.Prefix()); err == nil {
		t.Error("a second Cleanup found the lab again")
	}
	if err := lab.Close(); err != nil {
		t.Errorf("Close after Cleanup: %v", err)
	}
	if stateFileExists(lab.Prefix()) {
		t.Error("Close after Cleanup recreated the state file")
	}
}

func TestCleanupAllRemovesOnlyLabsOfEndedPrograms(t *testing.T) {
	t.Parallel()
	live := labtest.New(t)
	addHost(t, live, "a")

	crashed, err := exec.Command(testExecutable(t), helperArg, "crash", t.TempDir()).Output()
	if err != nil {
		t.Fatalf("crashing helper: %v", err)
	}
	prefix := string(crashed)
	t.Cleanup(func() { netlab.Cleanup(prefix) })
	if len(labNamespaces(t, prefix)) != 2 || !stateFileExists(prefix) {
		t.Fatalf("the crashed helper left namespaces %v, want inet and a with a state file", labNamespaces(t, prefix))
	}
	// The kernel kills the processes of a lab whose program died.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, err := exec.Command("ip", "netns", "pids", prefix+"-a").Output()
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the crashed lab still run: %s", out)
		}
	}

	if err := netlab.CleanupAll(); err != nil {
		t.Fatal(err)
	}
	if got := labNamespaces(t, prefix); len(got) != 0 || stateFileExists(prefix) {
		t.Errorf("left of the crashed lab: namespaces %v, state file %v", got, stateFileExists(prefix))
	}
	if got := labNamespaces(t, live.Prefix()); len(got) != 2 || !stateFileExists(live.Prefix()) {
		t.Errorf("CleanupAll touched a live lab: namespaces %v, state file %v", got, stateFileExists(live.Prefix()))
	}
}

func TestSignalClosesOpenLabs(t *testing.T) {
	if err := netlab.Available(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	t.Parallel()
	helper := exec.Command(testExecutable(t), helperArg, "await-signal", t.TempDir())
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	prefix, err := bufio.NewReader(stdout).ReadString('\n')
	prefix = strings.TrimSpace(prefix)
	if prefix != "" {
		t.Cleanup(func() { netlab.Cleanup(prefix) })
	}
	if err != nil {
		helper.Process.Kill()
		t.Fatalf("helper: %v, %v", err, helper.Wait())
	}
	if len(labNamespaces(t, prefix)) != 2 {
		t.Fatalf("namespaces of the helper's lab: %v", labNamespaces(t, prefix))
	}
	helper.Process.Signal(os.Interrupt)
	err = helper.Wait()
	if status, ok := helper.ProcessState.Sys().(syscall.WaitStatus); !ok || status.Signal() != os.Interrupt {
		t.Errorf("helper ended with %v, want death by SIGINT", err)
	}
	if got := labNamespaces(t, prefix); len(got) != 0 || stateFileExists(prefix) {
		t.Errorf("left after SIGINT: namespaces %v, state file %v", got, stateFileExists(prefix))
	}
}

func TestTwoLabsAtOnce(t *testing.T) {
	t.Parallel()
	type built struct {
		lab  *netlab.Lab
		a, b *netlab.Host
		pc   *netlab.Host
	}
	labs := []*built{{lab: labtest.New(t)}, {lab: labtest.New(t)}}
	if labs[0].lab.Prefix() == labs[1].lab.Prefix() {
		t.Fatalf("both labs have prefix %s", labs[0].lab.Prefix())
	}
	var wg sync.WaitGroup
	errs := make([]error, len(labs))
	for i, x := range labs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			var site *netlab.Site
			x.a, err = x.lab.AddHost("a")
			if err == nil {
				x.b, err = x.lab.AddHost("b")
			}
			if err == nil {
				site, err = x.lab.AddSite("home", netlab.EndpointIndependent)
			}
			if err == nil {
				x.pc, err = site.AddHost("pc")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, x := range labs {
		if r := ping(t, x.pc, x.a.Addr, 1); r.Received != 1 {
			t.Errorf("lab %s: ping from the site to a: %+v", x.lab.Prefix(), r)
		}
	}
	// Both labs use the same addresses; each must reach only its own hosts.
	startServer(t, labs[0].a, "tcp", 8080)
	mustReach(t, labs[0].b, "tcp", 0, netip.AddrPortFrom(labs[0].a.Addr, 8080))
	mustNotReach(t, labs[1].b, "tcp", netip.AddrPortFrom(labs[1].a.Addr, 8080))
}

func TestIperf3(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("skipping: iperf3 is not installed (Debian package iperf3)")
	}
	t.Parallel()
	lab := labtest.New(t)
	client, server := addHost(t, lab, "client"), addHost(t, lab, "server")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := netlab.Iperf3(ctx, client, server.Addr, 1); err == nil {
		t.Error("iperf3 succeeded without a server")
	}
	if _, err := netlab.StartIperf3Server(server); err != nil {
		t.Fatal(err)
	}
	r, err := netlab.Iperf3(ctx, client, server.Addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.BitsPerSecond < 1e6 {
		t.Errorf("iperf3 result %+v, want at least 1 Mbit/s", r)
	}
}

func TestProcessesAndCommands(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a := addHost(t, lab, "a")
	p, err := a.Start("sh", "-c", "echo out; echo err >&2; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := p.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("Wait: %v, want exit status 3", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop after the end: %v", err)
	}
	if filepath.Dir(p.LogPath()) != lab.LogDir() || !strings.HasPrefix(filepath.Base(p.LogPath()), "a-sh-") {
		t.Errorf("log path %s, want %s/a-sh-<n>.log", p.LogPath(), lab.LogDir())
	}
	if log, err := os.ReadFile(p.LogPath()); err != nil || !strings.Contains(string(log), "out\n") || !strings.Contains(string(log), "err\n") {
		t.Errorf("log %q (%v), want both output streams", log, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := a.Run(ctx, "ip", "-o", "-4", "addr", "show", "dev", "eth0")
	if err != nil || !strings.Contains(string(out), a.Addr.String()) {
		t.Errorf("eth0 inside the host: %q (%v), want address %s", out, err, a.Addr)
	}
	if _, err := a.Run(ctx, "sh", "-c", "echo reason; exit 1"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Errorf("failing Run: %v, want an error with the output", err)
	}
	if _, err := a.Start("burrow-netlab-no-such-program"); err == nil {
		t.Error("Start of a missing program succeeded")
	}
}

func TestNewRejectsTakenPrefix(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	if _, err := netlab.New(netlab.Options{Prefix: lab.Prefix()}); err == nil {
		t.Error("a second lab got the prefix of an open one")
	}
	if _, err := netlab.New(netlab.Options{Prefix: "much-too-long"}); err == nil {
		t.Error("New accepted a prefix too long for link names")
	}
	if _, err := lab.AddHost("inet"); err == nil {
		t.Error("AddHost took the name of the internet namespace")
	}
	if _, err := lab.AddSite("x", netlab.NAT(42)); err == nil {
		t.Error("AddSite accepted an unknown NAT kind")
	}
}

func TestWaitListeningTimesOut(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a := addHost(t, lab, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.WaitListening(ctx, "tcp", 9); err == nil {
		t.Error("WaitListening succeeded with nothing listening")
	}
}

func TestIPv6HostsAndSites(t *testing.T) {
	t.Parallel()
	lab := labtest.New(t)
	a, b, four := addHost(t, lab, "a"), addHost(t, lab, "b"), addHost(t, lab, "four")
	for _, h := range []*netlab.Host{a, b} {
		if err := h.AddIPv6(); err != nil {
			t.Fatal(err)
		}
		if !netlab.InternetRange6.Contains(h.Addr6) {
			t.Errorf("%s has IPv6 address %s outside %s", h.Name, h.Addr6, netlab.InternetRange6)
		}
	}
	if four.Addr6.IsValid() {
		t.Errorf("a host not given IPv6 has %s", four.Addr6)
	}
	site, err := lab.AddSite("home", netlab.EndpointIndependent)
	if err != nil {
		t.Fatal(err)
	}
	if err := site.AddIPv6(); err != nil {
		t.Fatal(err)
	}
	pc, err := site.AddHost("home-pc")
	if err != nil {
		t.Fatal(err)
	}
	if !netlab.SiteRange6.Contains(site.LAN6.Addr()) || !site.LAN6.Contains(pc.Addr6) {
		t.Errorf("site host IPv6 address %s, want one in %s inside %s", pc.Addr6, site.LAN6, netlab.SiteRange6)
	}
	if r := pingUntilAnswered(t, a, b.Addr6); r.Received != 1 {
		t.Errorf("ping a to b over IPv6: %+v, want the reply", r)
	}
	// Routed to the site host's own address, but the router's firewall
	// lets nothing new in: only answers.
	if r := pingUntilAnswered(t, pc, a.Addr6); r.Received != 1 {
		t.Errorf("ping from the site host to a over IPv6: %+v, want the reply", r)
	}
	if r := ping(t, a, pc.Addr6, 1); r.Received != 0 {
		t.Errorf("ping from a into the site over IPv6: %+v, want it dropped", r)
	}
}
