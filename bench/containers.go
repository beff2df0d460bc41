package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"burrow/config"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/runtime/containers"
)

// ContainersOptions configures `burrow bench containers`.
type ContainersOptions struct {
	// Seconds is the length of each iperf3 test; Rounds how many times
	// each path is measured, in turn.
	Seconds, Rounds int
	// Burrow is the burrow executable to measure; it is also the CNI
	// plugin, run as burrow-cni.
	Burrow   string
	Progress io.Writer
}

// containerPath is one way two hosts' processes reach each other over
// burrow, from the host a namespace to the host b one.
type containerPath int

const (
	hostToHost containerPath = iota
	containerToContainer
	containerOverVXLAN
)

var containerPathTitles = [...]string{
	hostToHost:           "burrow, host to host",
	containerToContainer: "containers on burrow-cni",
	containerOverVXLAN:   "containers through kernel VXLAN over burrow",
}

func (p containerPath) String() string { return containerPathTitles[p] }

// The containers run's addresses: the nodes' virtual network and the
// VXLAN segment's.
var (
	containersSubnet = netip.MustParsePrefix("10.79.0.0/24")
	vxlanSubnet      = netip.MustParsePrefix("10.244.0.0/24")
)

// vxlanID and vxlanPort are the segment's VNI and the UDP port it uses,
// flannel's defaults.
const (
	vxlanID   = 1
	vxlanPort = 4789
	// vxlanOverhead is what VXLAN adds to a frame over IPv4: outer IPv4,
	// UDP, VXLAN and inner Ethernet headers.
	vxlanOverhead = 50
)

// ContainersReport is the outcome of a containers run.
type ContainersReport struct {
	Options               ContainersOptions
	Started               time.Time
	LoadBefore, LoadAfter string
	// TAPMTU is the nodes' TAP MTU, which the containers' interfaces
	// take on burrow-cni; the VXLAN segment's is 50 bytes less.
	TAPMTU int
	// Addresses are the server's address on each path.
	Addresses [3]netip.Addr
	// Rounds hold each round's iperf3 result per path.
	Rounds [][3]throughput
}

// containersRun is one run in progress: two members behind
// endpoint-independent NATs that link directly, and the beacon.
type containersRun struct {
	opts    ContainersOptions
	a, b    *cluster.Node
	plugins string // the directory holding burrow-cni
}

// RunContainers measures TCP throughput between two members of a
// network three ways in paired rounds: host to host over burrow, between
// containers burrow-cni attached, and between containers on a kernel
// VXLAN segment whose underlay is burrow's virtual Ethernet (the
// flannel style: static forwarding entries to the other host's TAP
// address).
func RunContainers(ctx context.Context, opts ContainersOptions) (*ContainersReport, error) {
	if opts.Seconds < 1 || opts.Rounds < 1 {
		return nil, fmt.Errorf("bench: seconds and rounds must be at least 1, not %d and %d", opts.Seconds, opts.Rounds)
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	lab, err := newLab("burrow-bench-containers-", opts.Progress)
	if err != nil {
		return nil, err
	}
	defer lab.Close()
	r := &containersRun{opts: opts}
	if err := r.build(lab); err != nil {
		return nil, err
	}
	report := &ContainersReport{Options: opts, Started: time.Now(), LoadBefore: loadAverage()}
	servers, err := r.attach(ctx, lab, report)
	if err != nil {
		return nil, err
	}
	for round := 1; round <= opts.Rounds; round++ {
		var results [3]throughput
		for path := range servers {
			fmt.Fprintf(opts.Progress, "== round %d of %d: %s\n", round, opts.Rounds, containerPath(path))
			server, err := netlab.StartIperf3Server(servers[path][1])
			if err != nil {
				return nil, err
			}
			results[path], err = runIperf3(ctx, servers[path][0], report.Addresses[path], opts.Seconds, 1)
			server.Stop()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", containerPath(path), err)
			}
		}
		report.Rounds = append(report.Rounds, results)
	}
	report.LoadAfter = loadAverage()
	return report, ctx.Err()
}

// build adds the beacon and the two members and starts them once each
// has its container subnet and they are linked directly.
func (r *containersRun) build(lab *netlab.Lab) error {
	nw, err := cluster.New(lab, "containers", r.opts.Burrow)
	if err != nil {
		return err
	}
	beaconHost, err := lab.AddHost("beacon")
	if err != nil {
		return err
	}
	beacon, err := nw.AddNode(beaconHost, "beacon", hostAddr(containersSubnet, 1))
	if err != nil {
		return err
	}
	beacon.Config.Beacon.Enabled = true
	var members []*cluster.Node
	for i, name := range []string{"a", "b"} {
		site, err := lab.AddSite(name+"-router", netlab.EndpointIndependent)
		if err != nil {
			return err
		}
		host, err := site.AddHost(name)
		if err != nil {
			return err
		}
		n, err := nw.AddNode(host, name, hostAddr(containersSubnet, i+2))
		if err != nil {
			return err
		}
		idFile := filepath.Join(n.Dir, "machine-id")
		if err := os.WriteFile(idFile, fmt.Appendf(nil, "%032x\n", 0xb0+i), 0o644); err != nil {
			return err
		}
		n.Config.Services.Subnets = config.SubnetConfig{Enabled: true, Families: []string{"ipv4"}, MachineID: idFile}
		n.Config.Beacons = []config.BeaconRef{{Address: beacon.Endpoint().String()}}
		members = append(members, n)
	}
	r.a, r.b = members[0], members[1]
	r.plugins = filepath.Join(lab.LogDir(), "cni-bin")
	if err := os.MkdirAll(r.plugins, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(r.opts.Burrow, filepath.Join(r.plugins, "burrow-cni")); err != nil {
		return err
	}
	for _, n := range nw.Nodes {
		n.Config.Log.Level = "info" // debug logging costs the data path time
		n.Config.Overlay.Successors = len(nw.Nodes) - 1
		if err := n.Start(); err != nil {
			return err
		}
	}
	return nil
}

// attach waits for the members' direct link and subnets, then makes a
// container on each for each container path; it returns, per path, the
// iperf3 client's namespace and the server's.
func (r *containersRun) attach(ctx context.Context, lab *netlab.Lab, report *ContainersReport) ([3][2]*netlab.Host, error) {
	var out [3][2]*netlab.Host
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	fmt.Fprintf(r.opts.Progress, "== waiting for a and b to link directly and claim their subnets\n")
	err := cluster.WaitFor(ctx, "a direct link between a and b and both subnets claimed", func() bool {
		return r.ready(r.a, r.b) && r.ready(r.b, r.a)
	})
	if err != nil {
		return out, err
	}
	st, err := r.a.Status()
	if err != nil {
		return out, err
	}
	report.TAPMTU = st.TAP.MTU
	out[hostToHost] = [2]*netlab.Host{r.a.Host, r.b.Host}
	report.Addresses[hostToHost] = r.b.Address.Addr()
	for i, n := range []*cluster.Node{r.a, r.b} {
		sandbox, err := lab.AddSandbox("cni-" + n.Name)
		if err != nil {
			return out, err
		}
		addr, err := r.cniAdd(ctx, n, sandbox)
		if err != nil {
			return out, err
		}
		out[containerToContainer][i], report.Addresses[containerToContainer] = sandbox, addr
	}
	for i, n := range []*cluster.Node{r.a, r.b} {
		peer := []*cluster.Node{r.b, r.a}[i]
		sandbox, err := r.vxlanContainer(ctx, lab, n, peer, hostAddr(vxlanSubnet, i+1), report.TAPMTU-vxlanOverhead)
		if err != nil {
			return out, err
		}
		out[containerOverVXLAN][i], report.Addresses[containerOverVXLAN] = sandbox, hostAddr(vxlanSubnet, i+1).Addr()
	}
	return out, nil
}

// ready reports whether n has claimed its subnet and is linked directly
// to peer.
func (r *containersRun) ready(n, peer *cluster.Node) bool {
	st, err := n.Status()
	if err != nil || len(st.Services.Subnets) == 0 || st.Services.Subnets[0].State != "claimed" {
		return false
	}
	for _, l := range st.Links {
		if l.NodeID == peer.ID.String() && l.State == "up" && l.Path == "direct" {
			return true
		}
	}
	return false
}

// cniAdd runs burrow-cni's ADD for the sandbox on n, as a container
// runtime does, and returns the container's address.
func (r *containersRun) cniAdd(ctx context.Context, n *cluster.Node, sandbox *netlab.Host) (netip.Addr, error) {
	conf, err := json.Marshal(map[string]string{"cniVersion": "1.1.0", "name": "bench", "type": "burrow-cni",
		"socket": n.Config.ControlSocket, "dataDir": containers.DataDir(n.Config.StateDir)})
	if err != nil {
		return netip.Addr{}, err
	}
	cmd := n.Host.Command(ctx, filepath.Join(r.plugins, "burrow-cni"))
	cmd.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID="+sandbox.Namespace,
		"CNI_NETNS="+sandbox.NetnsPath(), "CNI_IFNAME=eth0", "CNI_PATH="+r.plugins)
	cmd.Stdin = bytes.NewReader(conf)
	out, err := cmd.Output()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("burrow-cni ADD on %s: %v: %s", n.Name, err, out)
	}
	var result struct {
		IPs []struct {
			Address netip.Prefix `json:"address"`
		} `json:"ips"`
	}
	if err := json.Unmarshal(out, &result); err != nil || len(result.IPs) == 0 {
		return netip.Addr{}, fmt.Errorf("burrow-cni ADD on %s: no address in %s (%v)", n.Name, out, err)
	}
	return result.IPs[0].Address.Addr(), nil
}

// vxlanContainer makes, on n, a VXLAN device over its TAP with a
// forwarding entry to peer's TAP address, a bridge holding it, and a
// container on the bridge with addr.
func (r *containersRun) vxlanContainer(ctx context.Context, lab *netlab.Lab, n, peer *cluster.Node, addr netip.Prefix, mtu int) (*netlab.Host, error) {
	st, err := n.Status()
	if err != nil {
		return nil, err
	}
	h := n.Host
	for _, args := range [][]string{
		{"link", "add", "vxbench", "type", "vxlan", "id", strconv.Itoa(vxlanID), "dstport", strconv.Itoa(vxlanPort),
			"local", n.Address.Addr().String(), "dev", st.TAP.Name, "nolearning"},
		{"link", "set", "vxbench", "mtu", strconv.Itoa(mtu)},
		{"link", "add", "vxbr", "type", "bridge"},
		{"link", "set", "vxbench", "master", "vxbr", "up"},
		{"link", "set", "vxbr", "up"},
	} {
		if out, err := h.Run(ctx, "ip", args...); err != nil {
			return nil, fmt.Errorf("%s: ip %v: %v %s", n.Name, args, err, out)
		}
	}
	if out, err := h.Run(ctx, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "vxbench", "dst", peer.Address.Addr().String()); err != nil {
		return nil, fmt.Errorf("%s: bridge fdb: %v %s", n.Name, err, out)
	}
	c, err := h.AddContainer("vx-"+n.Name, "vxbr")
	if err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"link", "set", "eth0", "mtu", strconv.Itoa(mtu)}, {"addr", "add", addr.String(), "dev", "eth0"}} {
		if out, err := c.Run(ctx, "ip", args...); err != nil {
			return nil, fmt.Errorf("%s: ip %v: %v %s", c.Name, args, err, out)
		}
	}
	return c, nil
}
