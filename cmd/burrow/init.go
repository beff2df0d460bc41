package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/identity"
)

func init() { rootCmd.AddCommand(newInitCmd()) }

// defaultConfigDir is where a node's configuration lives unless told
// otherwise.
const defaultConfigDir = "/etc/burrow"

// setupFlags are the flags that init and join share: where the node's
// files go.
type setupFlags struct {
	dir, state, instance, listen, logLevel string
}

func (s *setupFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.dir, "dir", defaultConfigDir, "configuration directory")
	f.StringVar(&s.state, "state", defaultNodeStateDir, "state directory for node.key")
	f.StringVar(&s.instance, "instance", "", "name of this network on this machine, to run several side by side (see burrow@.service)")
	f.StringVar(&s.listen, "listen", config.DefaultListen, "UDP address:port of the node ([::] serves IPv4 and IPv6); each network on a machine needs its own")
	f.StringVar(&s.logLevel, "log-level", "", "log.level to write into the configuration: debug, info, warn or error")
}

// layout is where the node's files go.
func (s setupFlags) layout(network string, first contacts) (nodeLayout, error) {
	l, err := newNodeLayout(network, s.dir, s.state, s.instance, s.listen, first)
	if err != nil {
		return l, err
	}
	switch s.logLevel {
	case "", "debug", "info", "warn", "error":
		l.LogLevel = s.logLevel
	default:
		return l, fmt.Errorf("--log-level %q is not one of debug, info, warn, error", s.logLevel)
	}
	return l, nil
}

// placeFlags repeats the flags that chose where the files are, for
// commands printed as the next step.
func (s setupFlags) placeFlags() string {
	var out string
	if s.dir != defaultConfigDir {
		out += " --dir " + s.dir
	}
	if s.instance != "" {
		out += " --instance " + s.instance
	}
	return out
}

// createdFiles remembers what a command created so that a failure halfway
// leaves nothing behind.
type createdFiles []string

func (c *createdFiles) add(path string) { *c = append(*c, path) }

func (c createdFiles) undo() {
	for _, p := range slices.Backward(c) {
		os.Remove(p)
	}
}

func newInitCmd() *cobra.Command {
	var (
		setup     setupFlags
		network   string
		withCA    bool
		name      string
		addresses []string
		bootstrap []string
		beacons   []string
		certValid time.Duration
	)
	cmd := &cobra.Command{
		Use:   "init --network NAME [--ca] [flags]",
		Short: "Set up this machine as a node: configuration, key and, with --ca, a new network",
		Long: `Write a commented configuration file (every field with its default and what
it does) and create this node's key. Nothing that exists is overwritten: init
names what is in the way and stops.

With --ca, init also creates a new network in one step: its certificate
authority in DIR/ca (ca.key and ca.crt), a copy of ca.crt for the node, and
this node's certificate. The CA key admits nodes to the network: move DIR/ca
to an offline place once the network is set up, and bring it back only to
admit nodes ('burrow invite').

Without --ca, the machine joins an existing network whose CA is elsewhere.
'burrow join TOKEN' does that from an invite and is simpler; init without
--ca is the manual way: it prints the public key to have certified.

Files (with --instance NAME, several networks live side by side):
  DIR/burrow.yaml   configuration        DIR/NAME.yaml
  DIR/ca.crt        network certificate  DIR/NAME/ca.crt
  DIR/node.crt      node certificate     DIR/NAME/node.crt
  STATE/node.key    node private key     STATE/NAME/node.key
  DIR/ca/           CA (with --ca)       DIR/NAME/ca/
The instance also names the TAP (bw-NAME) and the control socket
(/run/burrow/NAME.sock); give each network its own --listen port.`,
		Example: `  # the first node of a new network
  burrow init --network home --ca --name alpha --address 10.10.0.1/24

  # a second network on the same machine, for burrow@lab.service
  burrow init --network lab --ca --instance lab --listen '[::]:51821' \
      --name alpha --address 10.20.0.1/24

  # a node of a network whose CA is elsewhere (or use 'burrow join')
  burrow init --network home --name beta --bootstrap 203.0.113.10:51820`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if network == "" {
				return errors.New("--network is required: the network's name, e.g. --network home")
			}
			if err := identity.CheckNetworkName(network); err != nil {
				return fmt.Errorf("--network: %v", err)
			}
			if name == "" {
				host, _ := os.Hostname()
				if identity.CheckNodeName(host) != nil {
					return fmt.Errorf("--name is required: this host's name %q cannot name a node", host)
				}
				name = host
			}
			if err := identity.CheckNodeName(name); err != nil {
				return fmt.Errorf("--name: %v", err)
			}
			if !withCA && len(addresses) > 0 {
				return errors.New("--address goes into the certificate, which the CA signs: give it to 'burrow cert sign --address' on the CA machine, or use --ca")
			}
			if len(addresses) > identity.MaxAddresses {
				return fmt.Errorf("%d addresses given; a certificate holds at most %d", len(addresses), identity.MaxAddresses)
			}
			if certValid <= 0 {
				return fmt.Errorf("--valid must be positive, e.g. --valid 8760h (got %s)", certValid)
			}
			prefixes, err := parseCertAddresses(addresses)
			if err != nil {
				return err
			}
			first, err := parseContacts(bootstrap, beacons)
			if err != nil {
				return err
			}
			l, err := setup.layout(network, first)
			if err != nil {
				return err
			}
			caDir := filepath.Join(filepath.Dir(l.CACert), "ca")
			inTheWay := []string{l.ConfigPath, l.nodeKeyPath()}
			if withCA {
				inTheWay = append(inTheWay, l.CACert, l.Cert, filepath.Join(caDir, identity.CAKeyFile), filepath.Join(caDir, identity.CACertFile))
			}
			if err := refuseExisting(inTheWay, "This machine is already set up: run it with 'burrow up -c "+l.ConfigPath+
				"', move those files away, or set up another network beside it with --instance NAME."); err != nil {
				return err
			}
			var created createdFiles
			err = initNode(cmd.OutOrStdout(), l, withCA, caDir, name, prefixes, certValid, &created)
			if err != nil {
				created.undo()
			}
			return err
		},
	}
	setup.register(cmd)
	f := cmd.Flags()
	f.StringVar(&network, "network", "", "name of the network: 1-64 characters of a-z, 0-9, '.' and '-'")
	f.BoolVar(&withCA, "ca", false, "also create the network's CA and this node's certificate")
	f.StringVar(&name, "name", "", "this node's name (default: the host name)")
	f.StringSliceVar(&addresses, "address", nil, "with --ca: this node's virtual address with prefix length, e.g. 10.10.0.1/24 (repeatable)")
	f.StringSliceVar(&bootstrap, "bootstrap", nil, "address:port of a member to join through (repeatable)")
	f.StringArrayVar(&beacons, "beacon", nil, "address:port of a beacon, optionally ,ws(s)://URL for networks that let only HTTPS out (repeatable)")
	f.DurationVar(&certValid, "valid", 365*24*time.Hour, "with --ca: how long this node's certificate stays valid")
	return cmd
}

// initNode creates the files of a node, and with withCA those of a new
// network, recording each in created.
func initNode(out io.Writer, l nodeLayout, withCA bool, caDir, name string, addresses []netip.Prefix, certValid time.Duration, created *createdFiles) error {
	var ca *identity.CA
	if withCA {
		var err error
		if ca, err = identity.NewCA(l.Network, rand.Reader); err != nil {
			return err
		}
		if err := ca.Save(caDir); err != nil {
			return fmt.Errorf("cannot create the CA in %s: %v", caDir, err)
		}
		created.add(filepath.Join(caDir, identity.CAKeyFile))
		created.add(filepath.Join(caDir, identity.CACertFile))
		caCert, err := ca.MarshalPublic()
		if err != nil {
			return err
		}
		if err := writeNewFile(l.CACert, caCert, 0o644, 0o755); err != nil {
			return fmt.Errorf("cannot write the network certificate: %v", err)
		}
		created.add(l.CACert)
	}
	key, _, err := identity.LoadOrCreateNodeKey(l.StateDir, rand.Reader)
	if err != nil {
		return fmt.Errorf("cannot create the node key in %s: %v", l.StateDir, err)
	}
	created.add(l.nodeKeyPath())
	if withCA {
		now := time.Now()
		cert, err := identity.SignCertificate(ca, identity.Certificate{
			Name: name, PublicKey: key.Public, Addresses: addresses,
			NotBefore: now.Add(-certBackdate), NotAfter: now.Add(certValid),
		})
		if err != nil {
			return err
		}
		if err := identity.SaveCertificate(l.Cert, cert); err != nil {
			return fmt.Errorf("cannot write the node certificate: %v", err)
		}
		created.add(l.Cert)
	}
	if err := writeNewFile(l.ConfigPath, renderConfig(l), 0o644, 0o755); err != nil {
		return fmt.Errorf("cannot write the configuration: %v", err)
	}
	created.add(l.ConfigPath)

	fmt.Fprintf(out, "Wrote %s\n", l.ConfigPath)
	fmt.Fprintf(out, "Created %s (node %q, id %s)\n", l.nodeKeyPath(), name, key.ID())
	if withCA {
		fmt.Fprintf(out, "Created the CA of network %q in %s (fingerprint %s)\n", l.Network, caDir, ca.Fingerprint())
		fmt.Fprintf(out, "Wrote %s and this node's certificate %s\n", l.CACert, l.Cert)
		fmt.Fprintf(out, "\nWARNING: %s admits nodes to the network. Move %s to an offline place\n", filepath.Join(caDir, identity.CAKeyFile), caDir)
		fmt.Fprintf(out, "once the network is set up; the node needs only %s.\n", l.CACert)
		fmt.Fprintf(out, "\nNext: burrow up -c %s\n", l.ConfigPath)
		fmt.Fprintf(out, "Invite another node: burrow invite --ca %s --name NAME --address ADDR --bootstrap THIS_HOST:PORT\n", caDir)
		return nil
	}
	fmt.Fprintf(out, "\nNext, from the network's CA:\n")
	fmt.Fprintf(out, "  1. copy its ca.crt to %s\n", l.CACert)
	fmt.Fprintf(out, "  2. have it certify this node, then copy the certificate to %s:\n", l.Cert)
	fmt.Fprintf(out, "     burrow cert sign --ca CA_DIR --name %s --public-key %s --address ADDR --out %s.crt\n",
		name, base64.StdEncoding.EncodeToString(key.Public[:]), name)
	fmt.Fprintf(out, "  3. burrow up -c %s\n", l.ConfigPath)
	return nil
}
