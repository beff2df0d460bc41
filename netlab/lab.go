package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"sync"
)

// Address ranges the lab owns. They exist only inside the lab's namespaces.
var (
	// InternetRange addresses internet hosts and site routers' WAN side.
	InternetRange = netip.MustParsePrefix("198.18.0.0/16")
	// PublicLANRange holds the routed LANs of NoNAT sites, one /24 each.
	PublicLANRange = netip.MustParsePrefix("198.19.0.0/16")
	// PrivateLANRange holds the LANs behind NAT routers, one /24 each; it
	// stays clear of the low 10.x ranges an overlay under test may use.
	PrivateLANRange = netip.MustParsePrefix("10.200.0.0/16")
	// InternetRange6 addresses the internet hosts given IPv6 (AddIPv6):
	// global unicast from the documentation prefix, 2001:db8::/32.
	InternetRange6 = netip.MustParsePrefix("2001:db8:b0::/64")
	// SiteRange6 holds the routed IPv6 LANs of sites given IPv6
	// (Site.AddIPv6), one /64 each.
	SiteRange6 = netip.MustParsePrefix("2001:db8:b1::/48")
)

// Options configures a lab. The zero value is ready to use.
type Options struct {
	// Prefix starts every namespace and link name of the lab: 1 to 8
	// lowercase letters or digits, so that link names fit the kernel's
	// 15-byte limit. Default: "bl" and 6 random hex digits.
	Prefix string
	// LogDir receives the output of processes started with Host.Start.
	// Default: a new temporary directory, left in place by Close.
	LogDir string
}

// Lab is one topology of namespaces. Its methods are safe for concurrent use.
type Lab struct {
	prefix string
	logDir string
	inetNS string
	bridge string

	mu     sync.Mutex
	closed bool
	state  labState
	// names holds every host and site name taken, since each becomes a
	// namespace name.
	names map[string]bool
	// attached lists the namespaces with a leg on the internet bridge; each
	// needs a route to every NoNAT site's LAN.
	attached   []*Host
	publicLANs []*Site
	// sites6 are the sites with IPv6, whose LANs every internet host with
	// IPv6 routes to.
	sites6     []*Site
	hostCount  int
	host6Count int
	siteCount  int
	portCount  int
	logCount   int
	processes  []*Process
}

var (
	prefixPattern = regexp.MustCompile(`^[a-z0-9]{1,8}$`)
	namePattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
)

// New creates a lab holding just the internet bridge. It fails when the lab
// cannot run here (see Available) or when the prefix is already in use.
func New(opts Options) (*Lab, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	prefix := opts.Prefix
	if prefix == "" {
		var b [3]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		prefix = "bl" + hex.EncodeToString(b[:])
	}
	if !prefixPattern.MatchString(prefix) {
		return nil, fmt.Errorf("netlab: prefix %q must be 1 to 8 lowercase letters or digits", prefix)
	}
	self, err := currentProcess()
	if err != nil {
		return nil, err
	}
	l := &Lab{
		prefix: prefix,
		logDir: opts.LogDir,
		inetNS: prefix + "-inet",
		bridge: prefix + "-br",
		names:  map[string]bool{"inet": true},
		state:  labState{Prefix: prefix, Owner: self},
	}
	if err := createStateFile(l.state); err != nil {
		return nil, err
	}
	registerOpen(l)
	if l.logDir == "" {
		l.logDir, err = os.MkdirTemp("", "burrow-netlab-"+prefix+"-")
	} else {
		err = os.MkdirAll(l.logDir, 0o755)
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	if err := l.buildInternet(); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// Prefix returns the prefix of every namespace and link name of the lab.
func (l *Lab) Prefix() string { return l.prefix }

// LogDir returns the directory holding the logs of started processes.
func (l *Lab) LogDir() string { return l.logDir }

// Processes returns every process started in the lab, running or not, in
// the order they were started.
func (l *Lab) Processes() []*Process {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Process(nil), l.processes...)
}

// Close stops every process the lab started (SIGTERM, then SIGKILL), kills
// whatever else still runs inside its namespaces, deletes the namespaces and
// with them every link, and removes the state file. It leaves LogDir alone.
// Close is idempotent and safe after a failed construction step, and after
// Cleanup has already removed the lab.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	running := append([]*Process(nil), l.processes...)
	l.mu.Unlock()

	var wg sync.WaitGroup
	errs := make([]error, len(running))
	for i, p := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Stop()
		}()
	}
	wg.Wait()

	l.mu.Lock()
	state := l.state.clone()
	l.mu.Unlock()
	errs = append(errs, teardown(state))
	unregisterOpen(l)
	return errors.Join(errs...)
}

// reserveName claims a host or site name for the lab and returns its
// namespace name.
func (l *Lab) reserveName(name string) (string, error) {
	if l.closed {
		return "", errors.New("netlab: lab is closed")
	}
	if !namePattern.MatchString(name) {
		return "", fmt.Errorf("netlab: name %q must be lowercase letters, digits and dashes, at most 32", name)
	}
	if l.names[name] {
		return "", fmt.Errorf("netlab: name %q is already taken in lab %s", name, l.prefix)
	}
	l.names[name] = true
	return l.prefix + "-" + name, nil
}

// nextPortName names the bridge-side end of a new veth pair.
func (l *Lab) nextPortName() string {
	l.portCount++
	return fmt.Sprintf("%s-p%d", l.prefix, l.portCount)
}
