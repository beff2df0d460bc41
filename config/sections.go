package config

import (
	"net/netip"
	"time"

	"burrow/l2"
)

// TAP configures the virtual Ethernet device.
type TAP struct {
	Name string `yaml:"name"`
	// MTU of the device; 0 derives it from underlay_mtu.
	MTU int `yaml:"mtu"`
	// MAC of the device; empty derives a stable one from the node ID.
	MAC       string   `yaml:"mac"`
	Addresses []string `yaml:"addresses"`
	// Queues is the number of TAP queues (parallel readers); 0 = one per CPU.
	Queues int `yaml:"queues"`
	// Offload enables the virtio header with TSO/USO; default true.
	Offload *bool `yaml:"offload"`
	// Enabled: create the TAP device; default true. A dedicated beacon
	// needs none.
	Enabled *bool `yaml:"enabled"`
	// Bridge attaches the TAP to this Linux bridge (created if missing),
	// so hosts and containers on the bridge share the virtual Ethernet;
	// addresses then go on the bridge.
	Bridge string `yaml:"bridge"`
	// LocalDHCP says a DHCP server on the bridged LAN serves its hosts:
	// DHCP then stays on this side of the overlay, both ways, and this
	// node's own DHCP server does not answer (IPOP's router mode).
	LocalDHCP bool `yaml:"local_dhcp"`

	Prefixes  []netip.Prefix `yaml:"-"`
	MACAddr   l2.MAC         `yaml:"-"`
	HasMAC    bool           `yaml:"-"`
	OffloadOn bool           `yaml:"-"`
	On        bool           `yaml:"-"`
}

// Peer is a statically configured peer.
type Peer struct {
	Endpoint string `yaml:"endpoint"`
	// PublicKey optionally pins the peer's static key (base64).
	PublicKey string `yaml:"public_key"`

	Addr netip.AddrPort `yaml:"-"`
	Key  *[32]byte      `yaml:"-"`
}

// Links holds link timing.
type Links struct {
	Keepalive          time.Duration `yaml:"keepalive"`
	DeadAfter          time.Duration `yaml:"dead_after"`
	RekeyAfter         time.Duration `yaml:"rekey_after"`
	RekeyAfterMessages uint64        `yaml:"rekey_after_messages"`
	HandshakeRetry     time.Duration `yaml:"handshake_retry"`
}

// Switch holds learning-table limits.
type Switch struct {
	MaxMACs  int           `yaml:"max_macs"`
	MACAge   time.Duration `yaml:"mac_age"`
	FlowIdle time.Duration `yaml:"flow_idle"`
}

// Overlay configures self-organization.
type Overlay struct {
	// Enabled: find a place on the ring and keep its links; default true.
	// When false, the node keeps only its configured peers.
	Enabled *bool `yaml:"enabled"`
	// Bootstrap lists members to join through (address:port); one is enough.
	Bootstrap []string `yaml:"bootstrap"`
	// Advertise lists the endpoints other nodes can reach this one at;
	// default: the listen address, or every interface address with its port.
	Advertise    []string      `yaml:"advertise"`
	Successors   int           `yaml:"successors"`
	LongDistance string        `yaml:"long_distance"` // a number or "auto" (log2 of the size)
	MaxInbound   int           `yaml:"max_inbound"`
	MaxLinks     int           `yaml:"max_links"`
	Stabilize    time.Duration `yaml:"stabilize_every"`
	Heal         time.Duration `yaml:"heal_every"`
	OnDemand     OnDemand      `yaml:"on_demand"`

	On             bool             `yaml:"-"`
	BootstrapAddrs []netip.AddrPort `yaml:"-"`
	AdvertiseAddrs []netip.AddrPort `yaml:"-"`
	K              int              `yaml:"-"`
	AutoK          bool             `yaml:"-"`
}

// OnDemand configures direct links for heavy traffic.
type OnDemand struct {
	Enabled   *bool         `yaml:"enabled"`   // default true
	Threshold float64       `yaml:"threshold"` // bytes per second toward one bridge
	Window    time.Duration `yaml:"window"`
	Idle      time.Duration `yaml:"idle"`

	On bool `yaml:"-"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// Listen is the TCP address:port serving /metrics; empty turns it off.
	Listen string `yaml:"listen"`

	ListenAddr netip.AddrPort `yaml:"-"`
}

// Dashboard configures the web page showing the node and the overlay.
type Dashboard struct {
	// Listen is the TCP address:port serving the dashboard; empty turns it
	// off.
	Listen string `yaml:"listen"`

	ListenAddr netip.AddrPort `yaml:"-"`
}

// BeaconRef names one beacon.
type BeaconRef struct {
	Address string `yaml:"address"` // UDP address:port of its burrow socket
	// WebSocket is the beacon's ws:// or wss:// URL, used when UDP is blocked.
	WebSocket string `yaml:"websocket"`
	// TLSInsecure skips verifying the beacon's certificate on wss:// (tests).
	TLSInsecure bool `yaml:"tls_insecure"`

	Addr netip.AddrPort `yaml:"-"`
}

// BeaconMode configures a node serving as a beacon.
type BeaconMode struct {
	Enabled bool `yaml:"enabled"`
	// WebSocket serves datagrams over WebSocket for nodes whose network
	// only lets HTTPS out, e.g. listen ":443" with a TLS certificate.
	WebSocket WebSocketListen `yaml:"websocket"`
}

// WebSocketListen is a WebSocket listener.
type WebSocketListen struct {
	Listen string `yaml:"listen"`
	Path   string `yaml:"path"` // default /burrow
	Cert   string `yaml:"cert"` // TLS certificate and key; without them plain ws
	Key    string `yaml:"key"`
}

// NAT tunes hole punching.
type NAT struct {
	// PunchBudget is how many random ports of a peer's public address one
	// round of birthday probing guesses, when the peer's NAT maps each
	// destination to a new port and the link between them is relayed.
	// Default 1000; -1 turns birthday probing off.
	PunchBudget int `yaml:"punch_budget"`
}

// DefaultPunchBudget is the punch budget when none is configured.
const DefaultPunchBudget = 1000

// Budget is the effective punch budget.
func (n NAT) Budget() int {
	switch {
	case n.PunchBudget < 0:
		return 0
	case n.PunchBudget == 0:
		return DefaultPunchBudget
	}
	return n.PunchBudget
}

// TURN is a TURN server with long-term credentials.
type TURN struct {
	Server   string `yaml:"server"` // address:port
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	Realm    string `yaml:"realm"`

	Addr netip.AddrPort `yaml:"-"`
}

// Services configures the self-configuring services.
type Services struct {
	// Network is the virtual IPv4 network, e.g. 10.99.0.0/24; DHCP and
	// DNS need it, and every node of the network should say the same.
	Network   string       `yaml:"network"`
	DHCP      DHCPService  `yaml:"dhcp"`
	DNS       DNSService   `yaml:"dns"`
	ARPAnswer *bool        `yaml:"arp_answer"` // default true
	Subnets   SubnetConfig `yaml:"subnets"`

	Prefix netip.Prefix `yaml:"-"`
	ARPOn  bool         `yaml:"-"`
}

// DHCPService configures the DHCP server on the TAP.
type DHCPService struct {
	Enabled bool `yaml:"enabled"`
	// Range is "first-last"; default the whole network.
	Range     string        `yaml:"range"`
	LeaseTime time.Duration `yaml:"lease_time"` // default 1h
	Gateway   string        `yaml:"gateway"`    // announced router, optional
	Reserved  []string      `yaml:"reserved"`   // never handed out

	First, Last  netip.Addr   `yaml:"-"`
	GatewayAddr  netip.Addr   `yaml:"-"`
	ReservedAddr []netip.Addr `yaml:"-"`
}

// DNSService configures the virtual DNS.
type DNSService struct {
	// Enabled serves DNS on Address; DHCP switches it on too (its server
	// identity is that address).
	Enabled bool `yaml:"enabled"`
	// Address is where every node answers; default the network's lowest
	// host address.
	Address string `yaml:"address"`
	Domain  string `yaml:"domain"` // default burrow.internal
	// Forward sends other names to Upstream (default: this machine's
	// resolv.conf); otherwise they are refused.
	Forward  bool     `yaml:"forward"`
	Upstream []string `yaml:"upstream"`
	// Name registers this node's name (default its certificate name).
	Name string `yaml:"name"`

	Addr          netip.Addr       `yaml:"-"`
	UpstreamAddrs []netip.AddrPort `yaml:"-"`
}

// SubnetConfig configures self-assigned container subnets (Warrens).
type SubnetConfig struct {
	Enabled bool `yaml:"enabled"`
	// Families to claim: ipv4, ipv6; default both.
	Families []string `yaml:"families"`
	// MachineID is the file the subnet is derived from.
	MachineID string `yaml:"machine_id"` // default /etc/machine-id
	// Bridge is the local bridge containers attach to (created).
	Bridge string `yaml:"bridge"` // default bw-cni0
}

// Relay configures relaying for other members whose direct path failed.
// Relayed traffic stays encrypted end to end.
type Relay struct {
	Enabled *bool `yaml:"enabled"` // default true
	// MaxRate caps relayed bytes per second (default 10 MiB/s).
	MaxRate float64 `yaml:"max_rate"`
}

// Default relay caps when none is configured: members relay a little,
// beacons exist to relay.
const (
	DefaultRelayRate       = 10 << 20
	DefaultBeaconRelayRate = 100 << 20
)

// RelayRate is the effective relay cap in bytes per second; 0 when disabled.
func (c *Config) RelayRate() float64 {
	r := c.Relay
	switch {
	case r.Enabled != nil && !*r.Enabled:
		return 0
	case r.MaxRate > 0:
		return r.MaxRate
	case c.Beacon.Enabled:
		return DefaultBeaconRelayRate
	}
	return DefaultRelayRate
}

// KernelPath configures the kernel path: for peers in trusted underlay
// prefixes (inside one datacenter or cluster), frames travel in plain
// Ethernet-in-UDP, encapsulated and decapsulated by eBPF programs in the
// kernel, unencrypted. The daemon still does discovery and the control
// plane over its encrypted links.
type KernelPath struct {
	// Enabled turns the kernel path on; default false.
	Enabled bool `yaml:"enabled"`
	// Trusted lists the IPv4 underlay prefixes whose peers may be reached
	// unencrypted.
	Trusted []string `yaml:"trusted"`
	// Port is the kernel path's UDP port, the same on every node and not
	// that of listen; default 51819.
	Port int `yaml:"port"`
	// AllowPublic must be true to trust a prefix that is not private
	// (RFC 1918 or link-local): its frames may cross networks nobody
	// here controls, in the clear.
	AllowPublic bool `yaml:"allow_public"`

	Prefixes []netip.Prefix `yaml:"-"`
}

// DefaultKernelPathPort is the kernel path's UDP port when none is
// configured: just below the default listen port, since further instances
// on one machine conventionally listen on 51821 and up.
const DefaultKernelPathPort = 51819

// KernelPathOverhead is what the kernel path adds to a frame on the
// underlay: outer IPv4 and UDP headers and the frame's Ethernet header.
const KernelPathOverhead = 20 + 8 + 14

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}
