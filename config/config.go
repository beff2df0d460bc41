// Package config reads and validates a burrow node's YAML configuration.
// Every error names the offending field and says what is wrong with it;
// unknown fields are errors too, so a typo never silently becomes a default.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
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
	// Listen is the UDP address all links share; the default [::] serves
	// IPv4 and IPv6 on one socket.
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
	// Rendezvous names servers for first contact without a beacon.
	Rendezvous Rendezvous `yaml:"rendezvous"`
	// TURN adds a standard TURN server's relay as a candidate.
	TURN *TURN `yaml:"turn"`
	NAT  NAT   `yaml:"nat"`
	// Firewall, when present, decides which frames may enter and leave
	// the TAP; without it everything passes.
	Firewall *Firewall `yaml:"firewall"`
	// KernelPath carries frames to peers in trusted underlays in the
	// kernel, unencrypted; off by default.
	KernelPath KernelPath `yaml:"kernel_path,omitempty"`
	// Publish lists publication files (`burrow publish sign`): services of
	// members this node, as their gateway, exposes to non-members. Empty:
	// nothing is exposed.
	Publish []string `yaml:"publish,omitempty"`
	// ControlSocket is where `burrow status` reaches the daemon.
	ControlSocket string    `yaml:"control_socket"`
	Metrics       Metrics   `yaml:"metrics"`
	Dashboard     Dashboard `yaml:"dashboard"`
	Log           Log       `yaml:"log"`

	// Derived by Load.
	ListenAddr netip.AddrPort `yaml:"-"`
	Path       string         `yaml:"-"`
}

// Defaults.
const (
	DefaultStateDir      = "/var/lib/burrow"
	DefaultListen        = "[::]:51820"
	DefaultUnderlayMTU   = 1500
	DefaultTAPName       = "burrow0"
	DefaultControlSocket = "/run/burrow/burrow.sock"
)

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
	if c.KernelPath.Port == 0 {
		c.KernelPath.Port = DefaultKernelPathPort
	}
	if c.Overlay.LongDistance == "" {
		c.Overlay.LongDistance = "4"
	}
}
