// Package cluster builds burrow networks on a netlab topology: a CA, a key,
// certificate and configuration per node, and real `burrow up` processes
// in the lab's namespaces. End-to-end tests, benchmarks and the demo use it.
package cluster

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"burrow/config"
	"burrow/identity"
	"burrow/netlab"
	"burrow/nid"
	burrownode "burrow/node"
	"burrow/runtime"
)

// Port is the UDP port every node listens on.
const Port = 51820

// Network is a burrow network being built on a lab.
type Network struct {
	Lab    *netlab.Lab
	Name   string
	Dir    string
	Binary string
	CA     *identity.CA
	Nodes  []*Node
}

// Node is one burrow node of a Network.
type Node struct {
	Name    string
	Host    *netlab.Host
	Dir     string
	Key     identity.NodeKey
	ID      nid.ID
	Address netip.Prefix // the TAP's virtual address
	Config  config.Config
	Process *netlab.Process
	net     *Network
}

// New creates the network's CA in a new directory under the lab's log
// directory. binary is the burrow executable to run.
func New(lab *netlab.Lab, name, binary string) (*Network, error) {
	dir := filepath.Join(lab.LogDir(), "burrow-"+name)
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		dir = filepath.Join(lab.LogDir(), fmt.Sprintf("burrow-%s-%d", name, i))
	}
	ca, err := identity.NewCA(name, crand.Reader)
	if err != nil {
		return nil, err
	}
	if err := ca.Save(filepath.Join(dir, "ca")); err != nil {
		return nil, err
	}
	return &Network{Lab: lab, Name: name, Dir: dir, Binary: binary, CA: ca}, nil
}

// AddNode creates a member on host with a virtual address: state directory,
// key, certificate and a configuration with no peers yet.
func (n *Network) AddNode(host *netlab.Host, name string, addr netip.Prefix) (*Node, error) {
	dir := filepath.Join(n.Dir, name)
	key, _, err := identity.LoadOrCreateNodeKey(dir, crand.Reader)
	if err != nil {
		return nil, err
	}
	certPath := filepath.Join(dir, "node.crt")
	if err := n.certify(certPath, name, key, addr, nil); err != nil {
		return nil, err
	}
	node := &Node{
		Name: name, Host: host, Dir: dir, Key: key, ID: key.ID(), Address: addr, net: n,
		Config: config.Config{
			Network:       n.Name,
			StateDir:      dir,
			CA:            filepath.Join(n.Dir, "ca", identity.CACertFile),
			Cert:          certPath,
			Listen:        netip.AddrPortFrom(host.Addr, Port).String(),
			ControlSocket: filepath.Join(dir, "control.sock"),
			TAP:           config.TAP{Name: "burrow0"},
			Log:           config.Log{Level: "debug"},
		},
	}
	n.Nodes = append(n.Nodes, node)
	return node, nil
}

// certify writes a certificate of the network's CA for key.
func (n *Network) certify(path, name string, key identity.NodeKey, addr netip.Prefix, groups []string) error {
	now := time.Now()
	cert, err := identity.SignCertificate(n.CA, identity.Certificate{
		Name: name, PublicKey: key.Public, Addresses: []netip.Prefix{addr}, Groups: groups,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(90 * 24 * time.Hour),
	})
	if err != nil {
		return err
	}
	return identity.SaveCertificate(path, cert)
}

// SetGroups signs the node's certificate again with groups; it takes
// effect when the node (re)starts.
func (node *Node) SetGroups(groups ...string) error {
	return node.net.certify(node.Config.Cert, node.Name, node.Key, node.Address, groups)
}

// Endpoint is where the node's socket listens.
func (node *Node) Endpoint() netip.AddrPort { return netip.AddrPortFrom(node.Host.Addr, Port) }

// Dial adds other to the node's configured peers, pinned by key.
func (node *Node) Dial(other *Node) {
	node.Config.Peers = append(node.Config.Peers, config.Peer{
		Endpoint:  other.Endpoint().String(),
		PublicKey: base64.StdEncoding.EncodeToString(other.Key.Public[:]),
	})
}

// ConfigPath is where Start writes the node's configuration.
func (node *Node) ConfigPath() string { return filepath.Join(node.Dir, "burrow.yaml") }

// Start writes the configuration and runs `burrow up` in the node's namespace.
func (node *Node) Start() error {
	if err := node.writeConfig(); err != nil {
		return err
	}
	var err error
	node.Process, err = node.Host.Start(node.net.Binary, "up", "-c", node.ConfigPath())
	return err
}

func (node *Node) writeConfig() error {
	data, err := yaml.Marshal(&node.Config)
	if err != nil {
		return err
	}
	return os.WriteFile(node.ConfigPath(), data, 0o600)
}

// Reload writes the configuration again and sends the running daemon
// SIGHUP, which puts its firewall section in force.
func (node *Node) Reload() error {
	if node.Process == nil || node.Process.Exited() {
		return fmt.Errorf("cluster: %s is not running", node.Name)
	}
	if err := node.writeConfig(); err != nil {
		return err
	}
	return syscall.Kill(node.Process.Pid(), syscall.SIGHUP)
}

// Stop ends the node gracefully (SIGTERM).
func (node *Node) Stop() error {
	if node.Process == nil {
		return nil
	}
	err := node.Process.Stop()
	node.Process = nil
	return err
}

// Kill ends the node without a word (SIGKILL), as a crash would.
func (node *Node) Kill() error {
	if node.Process == nil {
		return nil
	}
	err := syscall.Kill(node.Process.Pid(), syscall.SIGKILL)
	node.Process.Wait()
	node.Process = nil
	return err
}

// Status asks the running node for its status.
func (node *Node) Status() (*runtime.Status, error) {
	resp, err := runtime.Query(node.Config.ControlSocket, runtime.Request{Command: "status"})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// UpLinks counts the node's links that are up.
func (node *Node) UpLinks() int {
	st, err := node.Status()
	if err != nil {
		return -1
	}
	return upLinks(st)
}

// WaitFor polls cond until it holds or ctx ends.
func WaitFor(ctx context.Context, what string, cond func() bool) error {
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitLinks waits until every running node has at least want[node] links up.
func (n *Network) WaitLinks(ctx context.Context, want map[*Node]int) error {
	var errs []error
	for node, count := range want {
		errs = append(errs, WaitFor(ctx, fmt.Sprintf("%s to have %d links up", node.Name, count), func() bool {
			return node.UpLinks() >= count
		}))
	}
	return errors.Join(errs...)
}

// PathTo is the path (direct, relay, turn, websocket) of node's up link to
// other as node reports it, "" without one.
func (node *Node) PathTo(other *Node) string { return node.upLinkTo(other).Path }

// EndpointTo is where node's up link to other goes as node reports it
// (relay:<relay's short ID> on a relayed path), "" without one.
func (node *Node) EndpointTo(other *Node) string { return node.upLinkTo(other).Endpoint }

// LinkTo is node's up link to other as node reports it, nil without one.
func (node *Node) LinkTo(other *Node) *linkStatus {
	if l := node.upLinkTo(other); l.NodeID != "" {
		return &l
	}
	return nil
}

// upLinkTo is n's link to other if it is up, the zero value otherwise.
func (n *Node) upLinkTo(other *Node) (up linkStatus) {
	st, err := n.Status()
	if err != nil {
		return up
	}
	for _, l := range st.Links {
		if l.NodeID == other.ID.String() && l.State == "up" {
			return l
		}
	}
	return up
}

// linkStatus is one link in a node's status.
type linkStatus = burrownode.LinkStatus

// Placed sorts nodes by whether their first successor, as their own
// status shows, is the next of nodes by ID.
func Placed(nodes []*Node) (placed, misplaced []*Node) {
	ring := slices.Clone(nodes)
	slices.SortFunc(ring, func(a, b *Node) int { return a.ID.Compare(b.ID) })
	for i, node := range ring {
		st, err := node.Status()
		if err == nil && len(st.Overlay.Successors) > 0 && st.Overlay.Successors[0] == ring[(i+1)%len(ring)].ID.String() {
			placed = append(placed, node)
		} else {
			misplaced = append(misplaced, node)
		}
	}
	return placed, misplaced
}

// RingConsistent reports whether every node is placed: the ring the nodes
// form is the true order of their IDs.
func RingConsistent(nodes []*Node) bool {
	_, misplaced := Placed(nodes)
	return len(misplaced) == 0
}
