// Package config reads and validates a burrow node's YAML configuration.
// Every error names the offending field and says what is wrong with it;
// unknown fields are errors too, so a typo never silently becomes a default.
package config

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"burrow/l2"
)

// Config is a node's configuration file.
type Config struct {
	// Network is the name of the burrow network; it must match the CA.
	Network string `yaml:"network"`
	// StateDir holds the node's private key (node.key).
	StateDir string `yaml:"state_dir"`
	// CA is the network's CA certificate (ca.crt).
	CA string `yaml:"ca"`
	// Cert is this node's certificate, signed by the CA.
	Cert string `yaml:"cert"`
	// Listen is the UDP address all links share.
	Listen string `yaml:"listen"`
	// UnderlayMTU is the MTU of the path between nodes; the TAP MTU is
	// derived from it so encapsulated frames never fragment.
	UnderlayMTU int     `yaml:"underlay_mtu"`
	TAP         TAP     `yaml:"tap"`
	Peers       []Peer  `yaml:"peers"`
	Links       Links   `yaml:"links"`
	Switch      Switch  `yaml:"switch"`
	Overlay     Overlay `yaml:"overlay"`
	Relay       Relay   `yaml:"relay"`
	// Services are what a node offers on its TAP: DHCP, DNS, ARP answers
	// and self-assigned container subnets, all resting on the DHT.
	Services Services `yaml:"services"`
	// Beacons are well-known members this node contacts first, asks how
	// it is seen (STUN) and relays through when nothing direct works.
	Beacons []BeaconRef `yaml:"beacons"`
	// Beacon turns this node into a beacon for others.
	Beacon BeaconMode `yaml:"beacon"`
	// TURN adds a standard TURN server's relay as a candidate.
	TURN *TURN `yaml:"turn"`
	NAT  NAT   `yaml:"nat"`
	// ControlSocket is where `burrow status` reaches the daemon.
	ControlSocket string    `yaml:"control_socket"`
	Metrics       Metrics   `yaml:"metrics"`
	Dashboard     Dashboard `yaml:"dashboard"`
	Log           Log       `yaml:"log"`

	// Derived by Load.
	ListenAddr netip.AddrPort `yaml:"-"`
	Path       string         `yaml:"-"`
}

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
	// PunchBudget is how many random ports of a peer's public address a
	// first dial probes, for NATs that map each destination to a new port.
	// Default 32; -1 turns it off.
	PunchBudget int `yaml:"punch_budget"`
}

// DefaultPunchBudget is the punch budget when none is configured.
const DefaultPunchBudget = 32

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

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// Defaults.
const (
	DefaultStateDir      = "/var/lib/burrow"
	DefaultListen        = "0.0.0.0:51820"
	DefaultUnderlayMTU   = 1500
	DefaultTAPName       = "burrow0"
	DefaultControlSocket = "/run/burrow/burrow.sock"
)

// FieldError is a validation failure of one field.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Load reads, defaults and validates the configuration at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Parse decodes, defaults and validates YAML.
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, yamlError(err)
	}
	c.applyDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// yamlError turns the YAML decoder's errors into one line each: unknown
// fields are typos more often than not.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		line, rest, ok := strings.Cut(e, ": field ")
		if ok && strings.Contains(rest, " not found in type ") {
			field, _, _ := strings.Cut(rest, " not found")
			e = fmt.Sprintf("%s: unknown field %q (a typo? the README lists every field)", line, field)
		}
		msgs = append(msgs, e)
	}
	return errors.New(strings.Join(msgs, "; "))
}

func (c *Config) applyDefaults() {
	if c.StateDir == "" {
		c.StateDir = DefaultStateDir
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.UnderlayMTU == 0 {
		c.UnderlayMTU = DefaultUnderlayMTU
	}
	if c.TAP.Name == "" {
		c.TAP.Name = DefaultTAPName
	}
	c.TAP.OffloadOn = c.TAP.Offload == nil || *c.TAP.Offload
	c.TAP.On = c.TAP.Enabled == nil || *c.TAP.Enabled
	if c.ControlSocket == "" {
		c.ControlSocket = DefaultControlSocket
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	c.Overlay.On = c.Overlay.Enabled == nil || *c.Overlay.Enabled
	c.Overlay.OnDemand.On = c.Overlay.OnDemand.Enabled == nil || *c.Overlay.OnDemand.Enabled
	if c.Overlay.LongDistance == "" {
		c.Overlay.LongDistance = "4"
	}
}

func (c *Config) validate() error {
	if c.Network == "" {
		return fieldErr("network", "is required: the name of the burrow network (as given to `burrow ca init --network`)")
	}
	if c.CA == "" {
		return fieldErr("ca", "is required: path of the network's CA certificate (ca.crt)")
	}
	if c.Cert == "" {
		return fieldErr("cert", "is required: path of this node's certificate (from `burrow cert sign`)")
	}
	var err error
	if c.ListenAddr, err = netip.ParseAddrPort(c.Listen); err != nil {
		return fieldErr("listen", "%q is not an address:port such as 0.0.0.0:51820", c.Listen)
	}
	if c.UnderlayMTU < 1280 || c.UnderlayMTU > 65535 {
		return fieldErr("underlay_mtu", "%d is out of range 1280..65535", c.UnderlayMTU)
	}
	if err := c.TAP.validate(); err != nil {
		return err
	}
	for i := range c.Peers {
		if err := c.Peers[i].validate(fmt.Sprintf("peers[%d]", i)); err != nil {
			return err
		}
	}
	if err := c.Links.validate(); err != nil {
		return err
	}
	if err := c.Overlay.validate(); err != nil {
		return err
	}
	for i := range c.Beacons {
		b := &c.Beacons[i]
		field := fmt.Sprintf("beacons[%d]", i)
		ap, err := netip.ParseAddrPort(b.Address)
		if err != nil || ap.Port() == 0 {
			return fieldErr(field+".address", "%q is not an address:port such as 203.0.113.7:51820", b.Address)
		}
		b.Addr = ap
		if b.WebSocket != "" && !strings.HasPrefix(b.WebSocket, "ws://") && !strings.HasPrefix(b.WebSocket, "wss://") {
			return fieldErr(field+".websocket", "%q is not a ws:// or wss:// URL", b.WebSocket)
		}
	}
	if ws := c.Beacon.WebSocket; ws.Listen != "" {
		if (ws.Cert == "") != (ws.Key == "") {
			return fieldErr("beacon.websocket.cert", "cert and key go together: give both for wss, neither for plain ws")
		}
	}
	if t := c.TURN; t != nil {
		ap, err := netip.ParseAddrPort(t.Server)
		if err != nil || ap.Port() == 0 {
			return fieldErr("turn.server", "%q is not an address:port such as 203.0.113.7:3478", t.Server)
		}
		t.Addr = ap
		if t.Username == "" || t.Password == "" {
			return fieldErr("turn.username", "TURN needs long-term credentials: username and password")
		}
	}
	if c.NAT.PunchBudget > 4096 {
		return fieldErr("nat.punch_budget", "%d probes per dial is a flood; at most 4096", c.NAT.PunchBudget)
	}
	if err := c.Services.validate(); err != nil {
		return err
	}
	if c.Relay.MaxRate < 0 {
		return fieldErr("relay.max_rate", "must not be negative (use relay.enabled: false to stop relaying)")
	}
	if c.Switch.MaxMACs < 0 {
		return fieldErr("switch.max_macs", "must not be negative")
	}
	if c.Metrics.Listen != "" {
		ap, err := netip.ParseAddrPort(c.Metrics.Listen)
		if err != nil || ap.Port() == 0 {
			return fieldErr("metrics.listen", "%q is not an address:port such as 127.0.0.1:9101 (leave it empty to serve no metrics)", c.Metrics.Listen)
		}
		c.Metrics.ListenAddr = ap
	}
	if c.Dashboard.Listen != "" {
		ap, err := netip.ParseAddrPort(c.Dashboard.Listen)
		if err != nil || ap.Port() == 0 {
			return fieldErr("dashboard.listen", "%q is not an address:port such as 127.0.0.1:8080 (leave it empty to serve no dashboard)", c.Dashboard.Listen)
		}
		if ap == c.Metrics.ListenAddr {
			return fieldErr("dashboard.listen", "%s is also metrics.listen; give each its own port", c.Dashboard.Listen)
		}
		c.Dashboard.ListenAddr = ap
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fieldErr("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		return fieldErr("log.format", "%q is not text or json", c.Log.Format)
	}
	return nil
}

func (t *TAP) validate() error {
	if len(t.Name) > 15 || strings.ContainsAny(t.Name, "/ \t%") {
		return fieldErr("tap.name", "%q is not a valid interface name (at most 15 characters, no '/', '%%' or spaces)", t.Name)
	}
	if t.MTU != 0 && (t.MTU < 576 || t.MTU > 65000) {
		return fieldErr("tap.mtu", "%d is out of range 576..65000 (0 derives it from underlay_mtu)", t.MTU)
	}
	if t.MAC != "" {
		m, err := l2.ParseMAC(t.MAC)
		if err != nil {
			return fieldErr("tap.mac", "%q is not a MAC address such as 02:00:00:00:00:01", t.MAC)
		}
		if m.IsMulticast() {
			return fieldErr("tap.mac", "%s is a multicast address; use a unicast one (first byte even)", t.MAC)
		}
		t.MACAddr, t.HasMAC = m, true
	}
	for i, a := range t.Addresses {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return fieldErr(fmt.Sprintf("tap.addresses[%d]", i), "%q is not an address with prefix length such as 10.10.0.1/24", a)
		}
		t.Prefixes = append(t.Prefixes, p)
	}
	if t.Queues < 0 || t.Queues > 16 {
		return fieldErr("tap.queues", "%d is out of range 0..16 (0 = one per CPU)", t.Queues)
	}
	return nil
}

func (p *Peer) validate(field string) error {
	ap, err := netip.ParseAddrPort(p.Endpoint)
	if err != nil || ap.Port() == 0 {
		return fieldErr(field+".endpoint", "%q is not an address:port such as 203.0.113.7:51820", p.Endpoint)
	}
	p.Addr = ap
	if p.PublicKey != "" {
		raw, err := base64.StdEncoding.DecodeString(p.PublicKey)
		if err != nil || len(raw) != 32 {
			return fieldErr(field+".public_key", "is not a base64 X25519 public key (see `burrow key show` on that node)")
		}
		p.Key = new([32]byte)
		copy(p.Key[:], raw)
	}
	return nil
}

func (s *Services) validate() error {
	s.ARPOn = s.ARPAnswer == nil || *s.ARPAnswer
	if s.DHCP.Enabled {
		s.DNS.Enabled = true
	}
	if s.Network == "" {
		if s.DHCP.Enabled || s.DNS.Enabled {
			return fieldErr("services.network", "is required for DHCP and DNS: the virtual IPv4 network, such as 10.99.0.0/24")
		}
	} else {
		p, err := netip.ParsePrefix(s.Network)
		if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
			return fieldErr("services.network", "%q is not an IPv4 network of at most /30 such as 10.99.0.0/24", s.Network)
		}
		s.Prefix = p.Masked()
	}
	inNet := func(field, a string) (netip.Addr, error) {
		addr, err := netip.ParseAddr(a)
		if err != nil || !s.Prefix.Contains(addr) {
			return addr, fieldErr(field, "%q is not an address in services.network %v", a, s.Prefix)
		}
		return addr, nil
	}
	var err error
	if d := &s.DHCP; d.Enabled {
		if d.Range != "" {
			first, last, ok := strings.Cut(d.Range, "-")
			if !ok {
				return fieldErr("services.dhcp.range", "%q is not first-last, such as 10.99.0.100-10.99.0.199", d.Range)
			}
			if d.First, err = inNet("services.dhcp.range", strings.TrimSpace(first)); err != nil {
				return err
			}
			if d.Last, err = inNet("services.dhcp.range", strings.TrimSpace(last)); err != nil {
				return err
			}
			if d.Last.Less(d.First) {
				return fieldErr("services.dhcp.range", "%q ends before it starts", d.Range)
			}
		}
		if d.Gateway != "" {
			if d.GatewayAddr, err = inNet("services.dhcp.gateway", d.Gateway); err != nil {
				return err
			}
		}
		for i, r := range d.Reserved {
			a, err := inNet(fmt.Sprintf("services.dhcp.reserved[%d]", i), r)
			if err != nil {
				return err
			}
			d.ReservedAddr = append(d.ReservedAddr, a)
		}
		if d.LeaseTime < 0 {
			return fieldErr("services.dhcp.lease_time", "must not be negative")
		}
	}
	if d := &s.DNS; d.Enabled {
		if d.Address == "" {
			d.Addr = s.Prefix.Addr().Next()
		} else if d.Addr, err = inNet("services.dns.address", d.Address); err != nil {
			return err
		}
		if d.Domain == "" {
			d.Domain = "burrow.internal"
		}
		for i, u := range d.Upstream {
			ap, err := netip.ParseAddrPort(u)
			if err != nil {
				if a, aerr := netip.ParseAddr(u); aerr == nil {
					ap, err = netip.AddrPortFrom(a, 53), nil
				}
			}
			if err != nil {
				return fieldErr(fmt.Sprintf("services.dns.upstream[%d]", i), "%q is not an address or address:port of a resolver", u)
			}
			d.UpstreamAddrs = append(d.UpstreamAddrs, ap)
		}
	}
	if sn := &s.Subnets; sn.Enabled {
		if len(sn.Families) == 0 {
			sn.Families = []string{"ipv4", "ipv6"}
		}
		for i, f := range sn.Families {
			if f != "ipv4" && f != "ipv6" {
				return fieldErr(fmt.Sprintf("services.subnets.families[%d]", i), "%q is not ipv4 or ipv6", f)
			}
		}
		if sn.MachineID == "" {
			sn.MachineID = "/etc/machine-id"
		}
		if sn.Bridge == "" {
			sn.Bridge = "bw-cni0"
		}
		if len(sn.Bridge) > 15 {
			return fieldErr("services.subnets.bridge", "%q is longer than an interface name may be (15)", sn.Bridge)
		}
	}
	return nil
}

func (o *Overlay) validate() error {
	for i, b := range o.Bootstrap {
		ap, err := netip.ParseAddrPort(b)
		if err != nil || ap.Port() == 0 {
			return fieldErr(fmt.Sprintf("overlay.bootstrap[%d]", i), "%q is not an address:port such as 203.0.113.7:51820", b)
		}
		o.BootstrapAddrs = append(o.BootstrapAddrs, ap)
	}
	for i, a := range o.Advertise {
		ap, err := netip.ParseAddrPort(a)
		if err != nil || ap.Port() == 0 || ap.Addr().IsUnspecified() {
			return fieldErr(fmt.Sprintf("overlay.advertise[%d]", i), "%q is not a reachable address:port such as 203.0.113.7:51820", a)
		}
		o.AdvertiseAddrs = append(o.AdvertiseAddrs, ap)
	}
	if o.Successors < 0 || o.Successors > 8 {
		return fieldErr("overlay.successors", "%d is out of range 1..8 (0 = default 2)", o.Successors)
	}
	if o.LongDistance == "auto" {
		o.AutoK = true
	} else if k, err := strconv.Atoi(o.LongDistance); err != nil || k < 0 || k > 32 {
		return fieldErr("overlay.long_distance", "%q is not a number of links 0..32 or \"auto\"", o.LongDistance)
	} else {
		o.K = k
	}
	if o.MaxInbound < 0 || o.MaxLinks < 0 {
		return fieldErr("overlay.max_links", "limits must not be negative")
	}
	if o.Stabilize < 0 || o.Heal < 0 {
		return fieldErr("overlay.stabilize_every", "intervals must not be negative")
	}
	if o.OnDemand.Threshold < 0 || o.OnDemand.Window < 0 || o.OnDemand.Idle < 0 {
		return fieldErr("overlay.on_demand", "threshold, window and idle must not be negative")
	}
	return nil
}

func (l *Links) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"links.keepalive", l.Keepalive}, {"links.dead_after", l.DeadAfter}, {"links.rekey_after", l.RekeyAfter}, {"links.handshake_retry", l.HandshakeRetry}} {
		if d.v < 0 {
			return fieldErr(d.name, "must not be negative")
		}
	}
	if l.Keepalive > 0 && l.DeadAfter > 0 && l.DeadAfter < 2*l.Keepalive {
		return fieldErr("links.dead_after", "%v must be at least twice links.keepalive (%v), or live peers are declared dead", l.DeadAfter, l.Keepalive)
	}
	return nil
}
