package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"burrow/config"
	"burrow/identity"
)

// nodeLayout is where one node of one network keeps its files. Without an
// instance name everything sits in the default places; with one, several
// networks live side by side on one machine (burrow@NAME.service reads
// /etc/burrow/NAME.yaml).
type nodeLayout struct {
	Network       string
	Instance      string
	ConfigPath    string
	CACert        string // the network's CA certificate, for the node
	Cert          string // this node's certificate
	StateDir      string
	ControlSocket string
	TAPName       string
	Listen        string
	Bootstrap     []string
	Beacons       []config.BeaconRef
	LogLevel      string // empty keeps the default
}

// contacts are the members a new node reaches first: bootstrap contacts
// and beacons.
type contacts struct {
	bootstrap []netip.AddrPort
	beacons   []config.BeaconRef // Addr and WebSocket set
}

// maxInstanceLen keeps "bw-" + instance within an interface name's 15
// characters.
const maxInstanceLen = 12

// newNodeLayout derives the file places from the configuration directory,
// the state directory and the instance name.
func newNodeLayout(network, dir, state, instance, listen string, first contacts) (nodeLayout, error) {
	l := nodeLayout{
		Network:       network,
		Instance:      instance,
		ConfigPath:    filepath.Join(dir, "burrow.yaml"),
		CACert:        filepath.Join(dir, identity.CACertFile),
		Cert:          filepath.Join(dir, "node.crt"),
		StateDir:      state,
		ControlSocket: config.DefaultControlSocket,
		TAPName:       config.DefaultTAPName,
		Listen:        listen,
	}
	if instance != "" {
		if err := identity.CheckNetworkName(instance); err != nil || len(instance) > maxInstanceLen {
			return l, fmt.Errorf("--instance %q is invalid: use 1-%d characters of a-z, 0-9, '.' and '-' (it names the TAP bw-%s)", instance, maxInstanceLen, instance)
		}
		l.ConfigPath = filepath.Join(dir, instance+".yaml")
		l.CACert = filepath.Join(dir, instance, identity.CACertFile)
		l.Cert = filepath.Join(dir, instance, "node.crt")
		l.StateDir = filepath.Join(state, instance)
		l.ControlSocket = filepath.Join(filepath.Dir(config.DefaultControlSocket), instance+".sock")
		l.TAPName = "bw-" + instance
	}
	if _, err := netip.ParseAddrPort(listen); err != nil {
		return l, fmt.Errorf("--listen %q is not an address:port such as [::]:51820 or 0.0.0.0:51820", listen)
	}
	for _, b := range first.bootstrap {
		l.Bootstrap = append(l.Bootstrap, b.String())
	}
	for _, b := range first.beacons {
		l.Beacons = append(l.Beacons, config.BeaconRef{Address: b.Addr.String(), WebSocket: b.WebSocket})
	}
	return l, nil
}

// nodeKeyPath is where the node's private key lives.
func (l nodeLayout) nodeKeyPath() string { return filepath.Join(l.StateDir, identity.NodeKeyFile) }

// existing lists which of paths exist already.
func existing(paths ...string) []string {
	var found []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			found = append(found, p)
		}
	}
	return found
}

// refuseExisting fails, naming every file in the way and what to do, when
// any of paths exists: init and join never overwrite.
func refuseExisting(paths []string, advice string) error {
	found := existing(paths...)
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to overwrite what exists:\n  %s\n%s", strings.Join(found, "\n  "), advice)
}

// parseContacts checks --bootstrap and --beacon values: address:port
// only, no host names; a beacon may add its WebSocket URL after a comma.
func parseContacts(bootstrap, beacons []string) (contacts, error) {
	var c contacts
	addrPort := func(flag, v string) (netip.AddrPort, error) {
		ap, err := netip.ParseAddrPort(v)
		if err != nil || ap.Port() == 0 {
			return ap, fmt.Errorf("--%s %q is not an address:port such as 203.0.113.10:51820 (host names are not accepted)", flag, v)
		}
		return ap, nil
	}
	for _, v := range bootstrap {
		ap, err := addrPort("bootstrap", v)
		if err != nil {
			return c, err
		}
		c.bootstrap = append(c.bootstrap, ap)
	}
	for _, v := range beacons {
		addr, ws, _ := strings.Cut(v, ",")
		ap, err := addrPort("beacon", addr)
		if err != nil {
			return c, err
		}
		if ws != "" && (!strings.HasPrefix(ws, "ws://") && !strings.HasPrefix(ws, "wss://") || len(ws) > maxWebSocketURL) {
			return c, fmt.Errorf("--beacon %q: after the comma comes the beacon's ws:// or wss:// URL (at most %d characters), e.g. 203.0.113.10:51820,wss://203.0.113.10/burrow", v, maxWebSocketURL)
		}
		c.beacons = append(c.beacons, config.BeaconRef{Addr: ap, WebSocket: ws})
	}
	switch {
	case len(c.bootstrap) > maxBootstrap:
		return c, fmt.Errorf("%d bootstrap contacts given; at most %d are kept (one is enough)", len(c.bootstrap), maxBootstrap)
	case len(c.beacons) > maxBeacons:
		return c, fmt.Errorf("%d beacons given; at most %d are kept", len(c.beacons), maxBeacons)
	}
	return c, nil
}

// writeNewFile creates path with data, failing if it exists; parent
// directories are created with dirMode.
func writeNewFile(path string, data []byte, mode, dirMode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), dirMode); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s already exists; refusing to overwrite it", path)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// renderConfig writes the commented configuration file for a node: every
// field with its default and a line saying what it does, the values that
// init or join chose set, the rest commented out.
func renderConfig(l nodeLayout) []byte {
	var buf bytes.Buffer
	if err := configTemplate.Execute(&buf, l); err != nil {
		panic(err) // the template and its data are fixed at compile time
	}
	return buf.Bytes()
}

// yamlScalar quotes s unless it is plainly safe: "[::]:51820" unquoted
// would be a YAML list.
func yamlScalar(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_./-", r))
	}) {
		return s
	}
	return strconv.Quote(s)
}

var configTemplate = template.Must(template.New("config").Funcs(template.FuncMap{"q": yamlScalar}).Parse(`# burrow configuration of a node of network "{{.Network}}".
# Every field is listed with its default; a field commented out with '#'
# keeps its default. Unknown fields are errors, so a typo never passes.
# Run the node with: burrow up -c {{.ConfigPath}}

# Name of the network; must match the CA certificate.
network: {{q .Network}}
# The network's CA certificate (public, the same on every node). While the
# network moves to a new CA, a file holding both CA certificates.
ca: {{q .CACert}}
# This node's certificate, signed by the network's CA.
cert: {{q .Cert}}
# Holds node.key (this node's private key, mode 0600) and remembered peers.
state_dir: {{q .StateDir}}
# UDP address:port that every link shares; open this port in firewalls.
listen: {{q .Listen}}
# MTU of the network between nodes; the TAP MTU is derived from it.
# underlay_mtu: 1500

tap:
  # Name of the virtual Ethernet device.
  name: {{q .TAPName}}
  # Device MTU; 0 derives the largest that never fragments on the underlay.
  # mtu: 0
  # MAC address; empty derives a stable one from the node ID.
  # mac: ""
  # Addresses with prefix length; empty takes those in the certificate.
  # addresses: [10.10.0.1/24]
  # Queues, each read by its own thread; 0 is one per CPU, at most 4.
  # queues: 0
  # Virtio header with TSO/USO: the kernel hands over 64 KiB TCP frames.
  # offload: true
  # Create the device at all; a dedicated beacon needs none.
  # enabled: true
  # Attach the device to this Linux bridge (created if missing); hosts and
  # containers on the bridge join the virtual Ethernet, addresses go on it.
  # bridge: ""
  # The bridged LAN has a DHCP server of its own: DHCP stays on this side
  # of the overlay both ways, and this node's DHCP server does not answer.
  # local_dhcp: false

# Nodes to always keep a link to, besides those the overlay chooses;
# public_key optionally pins the node's key (from 'burrow key show').
# peers:
#   - endpoint: 203.0.113.7:51820
#     public_key: ""

links:
  # Send a keepalive when a link was silent this long.
  # keepalive: 2s
  # Declare a peer dead after this much silence; at least 2 x keepalive.
  # dead_after: 6s
  # Make new session keys this often...
  # rekey_after: 2m
  # ...or after this many messages.
  # rekey_after_messages: 1099511627776
  # First handshake retry interval; it doubles up to 8s.
  # handshake_retry: 1s

overlay:
  # Find a place on the ring and keep its links; false keeps only peers.
  # enabled: true
  # Members to join through (address:port); one is enough.
{{- if .Bootstrap}}
  bootstrap:
{{- range .Bootstrap}}
    - {{q .}}
{{- end}}
{{- else}}
  # bootstrap: [203.0.113.10:51820]
{{- end}}
  # Endpoints other nodes reach this one at; empty: the listen address,
  # or every interface address when listening on [::] or 0.0.0.0 (global
  # IPv6 ones too, but not link-local or unique local ones).
  # advertise: []
  # Successor links; the ring survives successors-1 adjacent failures.
  # successors: 2
  # Long-distance links, or "auto" for log2 of the estimated size.
  # long_distance: "4"
  # Long-distance links accepted from others; 0 is 2 x long_distance.
  # max_inbound: 0
  # Refuse link requests beyond this many links; 0 is no limit.
  # max_links: 0
  # How often to check the successor's view of the ring.
  # stabilize_every: 5s
  # How often to contact a remembered node, to merge split rings.
  # heal_every: 60s
  on_demand:
    # Open direct links for heavy traffic between two bridges.
    # enabled: true
    # Bytes per second toward one bridge that call for a direct link.
    # threshold: 1048576
    # How long the rate must stay above the threshold.
    # window: 3s
    # How long it must stay below before the direct link goes.
    # idle: 30s

switch:
  # Size of the MAC learning table.
  # max_macs: 8192
  # Forget a MAC not seen this long.
  # mac_age: 5m
  # Remove a unicast flow unused this long.
  # flow_idle: 60s

# What this node offers on its TAP, resting on the DHT the nodes keep on
# the ring. Every node of the network should describe the same network.
services:
  # The virtual IPv4 network; DHCP and DNS need it.
  # network: 10.99.0.0/24
  dhcp:
    # Answer DHCP clients on the TAP (and its bridge); each lease is an
    # atomic write in the DHT, so no two clients anywhere get one address.
    # enabled: false
    # Addresses handed out, first-last; empty is the whole network.
    # range: 10.99.0.100-10.99.0.199
    # lease_time: 1h
    # Router announced to clients, optional.
    # gateway: ""
    # Addresses never handed out.
    # reserved: []
  dns:
    # Answer DNS on a reserved address every node serves locally (on when
    # DHCP is, which announces it).
    # enabled: false
    # The reserved address; empty is the network's lowest host address.
    # address: ""
    # domain: burrow.internal
    # Send other names to the upstream resolvers instead of refusing them.
    # forward: false
    # upstream: []   # default: this machine's /etc/resolv.conf
    # Name this node registers (default: its certificate name).
    # name: ""
  # Answer ARP requests and IPv6 neighbour solicitations for known
  # addresses locally instead of flooding.
  # arp_answer: true
  subnets:
    # Claim a container subnet derived from the machine id (Warrens) and
    # route it over the virtual Ethernet.
    # enabled: false
    # families: [ipv4, ipv6]
    # machine_id: /etc/machine-id
    # bridge: bw-cni0

relay:
  # Relay, still end-to-end encrypted, for members whose direct path failed.
  # enabled: true
  # Cap on relayed bytes per second; 0 is 10 MiB/s, 100 MiB/s on a beacon.
  # max_rate: 0

# Well-known members contacted first: they tell this node how it is seen
# from outside (STUN) and relay for it when nothing direct works; websocket
# is their ws:// or wss:// URL, for networks that let only HTTPS out.
{{- if .Beacons}}
beacons:
{{- range .Beacons}}
  - address: {{q .Address}}
{{- if .WebSocket}}
    websocket: {{q .WebSocket}}
{{- end}}
    # tls_insecure: false
{{- end}}
{{- else}}
# beacons:
#   - address: 203.0.113.10:51820
#     websocket: wss://203.0.113.10/burrow
#     tls_insecure: false
{{- end}}

beacon:
  # Serve as a beacon for the other members.
  # enabled: false
  websocket:
    # Serve datagrams over WebSocket, e.g. on ":443"; empty is off.
    # listen: ""
    # URL path of the WebSocket endpoint.
    # path: /burrow
    # TLS certificate and key for wss://; without them plain ws://.
    # cert: ""
    # key: ""

# An XMPP server for first contact without a beacon (README: Meeting
# through an XMPP server); accounts prove nothing, certificates do:
# rendezvous:
#   xmpp:
#     server: xmpp.example.org:5222   # default the JID's domain, port 5222
#     jid: NAME@xmpp.example.org
#     password: ""                    # or:
#     password_file: /etc/burrow/xmpp.pass
#     ca: ""                          # the server certificate's CA; default the system's
#     pubsub: pubsub.xmpp.example.org
#     node: burrow-NETWORK            # the list of the members' cards
#     max_items: 32                   # cards it keeps and a joiner reads
#     contacts: 3                     # members a node without a link asks

# A standard TURN server whose relay becomes a candidate path:
# turn:
#   server: 203.0.113.20:3478
#   username: NAME
#   password: PASSWORD
#   realm: ""

nat:
  # Birthday probing, for a peer whose NAT maps each destination to a new
  # port, while the link to it is relayed: how many ports of its public
  # address one round guesses (it sends from 512 spare sockets meanwhile);
  # -1 turns it off.
  # punch_budget: 1000

# The kernel path, for links inside one datacenter or cluster: frames to
# peers in a trusted underlay travel in plain UDP, put in and taken out by
# eBPF programs in the kernel. UNENCRYPTED on the wire. Off by default.
kernel_path:
  # Turn it on (needs Linux 6.6 or later, and CAP_BPF besides CAP_NET_ADMIN).
  # enabled: false
  # IPv4 underlay prefixes whose peers may be reached unencrypted.
  # trusted: [10.0.0.0/8]
  # UDP port of the kernel path, the same on every node; not listen's.
  # port: 51819
  # Needed to trust a prefix that is not private (RFC 1918, link-local),
  # whose frames would cross networks nobody here controls in the clear.
  # allow_public: false

# The firewall: which frames may enter and leave the TAP. Without this
# section everything passes; with it, only what a rule allows. A rule
# matches the other member's certificate (host: its name, group/groups:
# groups it must all hold) or its address (cidr), and at least one of host,
# group, groups and cidr is required (host: any for every member). Port is
# the destination port (a number, a range 8000-8080, or any) of tcp and udp;
# icmp_type (8: ping) limits an icmp rule. An allowed packet opens a
# connection whose answers pass both ways. ARP, IPv6 neighbour discovery and
# multicast group membership (IGMP, MLD) always pass. 'kill -HUP' reloads
# this section; 'burrow firewall check'
# explains a verdict.
# firewall:
#   other_ethertypes: drop
#   conntrack:
#     tcp_timeout: 12m
#     udp_timeout: 3m
#     icmp_timeout: 10m
#   outbound:
#     - proto: any
#       port: any
#       host: any
#     - proto: icmp
#       icmp_type: 8
#       group: ops
#       groups: [prod]
#       cidr: 10.9.0.0/16
#   inbound:
#     - proto: tcp
#       port: 5432
#       group: app
#       groups: [prod]
#       host: app1
#       cidr: 10.9.0.0/16
#     - proto: icmp
#       icmp_type: 8
#       host: any

# Services of other members this node exposes to non-members, as their
# gateway, each by a publication file the CA signed ('burrow publish sign').
# Anyone reaching the listen address a publication names is relayed, byte
# for byte, to the member's service. Nothing by default; 'kill -HUP' reads
# the list again, closing what is no longer listed.
# publish:
#   - /etc/burrow/board-https.pub

# Where 'burrow status' and 'burrow peers' reach this node.
control_socket: {{q .ControlSocket}}

metrics:
  # Serve Prometheus metrics at http://LISTEN/metrics; empty is off. Keep
  # it on loopback: the metrics name the network's members.
  # listen: 127.0.0.1:9101

dashboard:
  # Serve a live web page of this node and the overlay ring at
  # http://LISTEN/; empty is off. Keep it on loopback: it names the
  # network's members and their addresses.
  # listen: 127.0.0.1:8080

log:
  # debug, info, warn or error.
{{- if .LogLevel}}
  level: {{q .LogLevel}}
{{- else}}
  # level: info
{{- end}}
  # text or json.
  # format: text
`))
