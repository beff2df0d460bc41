package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"burrow/cni"
	"burrow/config"
	"burrow/runtime/containers"
)

func init() { rootCmd.AddCommand(newCNICmd()) }

func newCNICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cni",
		Short: "Put containers on burrow's virtual Ethernet (a CNI plugin)",
		Long: `burrow is also a CNI plugin (spec 1.0 and 1.1: ADD, DEL, CHECK, VERSION,
STATUS and GC) for Kubernetes, podman and any runtime that speaks CNI.
Installed as burrow-cni in the runtime's plugin directory, it gives each
container:

  - a veth on this node's container bridge (services.subnets.bridge);
  - addresses from the node's own container subnets (Warrens, see
    "burrow subnet"), which burrow routes over the virtual Ethernet, so
    containers on nodes behind different NATs reach each other;
  - default routes through the bridge;
  - burrow's virtual DNS as resolver, with the container registered
    there under its name (the runtime's K8S_POD_NAME argument, with
    ".NAMESPACE" for a Kubernetes namespace other than default).

The node needs services.subnets.enabled (and services.dns.enabled for
names). Addresses are reserved with the reference host-local allocator and
each attachment is recorded under the node's state directory (containers/)
before anything is configured, so that DEL and GC clean up also when the
daemon is down or restarted, and a failed ADD leaves nothing behind.

The plugin's network configuration:

  {"cniVersion": "1.1.0", "name": "burrow", "type": "burrow-cni",
   "socket": "/run/burrow/burrow.sock",          (the node's control socket)
   "dataDir": "/var/lib/burrow/containers"}      (STATE_DIR/containers)

Reference plugins (portmap, bandwidth, firewall) chain after it in a
network configuration list.`,
	}
	cmd.AddCommand(newCNIInstallCmd())
	return cmd
}

func newCNIInstallCmd() *cobra.Command {
	var (
		configPath, binDir, confDir, network, cniVersion string
		chain                                            []string
	)
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install this binary as the burrow-cni plugin and write its network configuration",
		Long: `Copy this binary into the runtime's plugin directory as burrow-cni and
write a network configuration list NAME.conflist into its configuration
directory, with the control socket and state directory of the node's
configuration file (defaults when the default file does not exist).
--chain adds reference plugins after burrow-cni, with the capabilities
runtimes use to pass them port mappings and bandwidth limits. Every plugin
in the list must speak its --cni-version: reference plugins older than
v1.5 (Debian 12 ships 1.1.1) stop at 1.0.0, which has no STATUS and GC.`,
		Example: `  burrow cni install
  burrow cni install -c /etc/burrow/lab.yaml --network lab --chain portmap,bandwidth --cni-version 1.0.0
  burrow cni install --cni-bin-dir /host/opt/cni/bin --conf-dir /host/etc/cni/net.d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			socket, stateDir, err := nodePaths(configPath, cmd.Flags().Changed("config"))
			if err != nil {
				return err
			}
			for _, p := range chain {
				if _, ok := chainedCapabilities[p]; !ok {
					return fmt.Errorf("--chain: %q is not one of %s", p, strings.Join(slices.Sorted(maps.Keys(chainedCapabilities)), ", "))
				}
			}
			plugin := filepath.Join(binDir, cni.PluginName)
			if err := installBinary(plugin); err != nil {
				return err
			}
			if !slices.Contains(cniVersions, cniVersion) {
				return fmt.Errorf("--cni-version: %q is not one of %s", cniVersion, strings.Join(cniVersions, ", "))
			}
			list, err := networkConfigList(network, cniVersion, socket, containers.DataDir(stateDir), chain)
			if err != nil {
				return err
			}
			confPath := filepath.Join(confDir, network+".conflist")
			if err := replaceFile(confPath, bytes.NewReader(list), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "installed %s\nwrote %s (network %q, node socket %s)\n", plugin, confPath, network, socket)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&configPath, "config", "c", "/etc/burrow/burrow.yaml", "the node's configuration file")
	f.StringVar(&binDir, "cni-bin-dir", "/opt/cni/bin", "the runtime's plugin directory")
	f.StringVar(&confDir, "conf-dir", "/etc/cni/net.d", "the runtime's network configuration directory")
	f.StringVar(&network, "network", "burrow", "the network's name in the runtime")
	f.StringSliceVar(&chain, "chain", nil, "reference plugins to chain after burrow-cni: portmap, bandwidth, firewall")
	f.StringVar(&cniVersion, "cni-version", "1.1.0", "the configuration's CNI version; every chained plugin must speak it (1.1.0 brings STATUS and GC)")
	return cmd
}

// chainedCapabilities are the reference plugins install chains, with the
// runtime capabilities each takes.
var chainedCapabilities = map[string]map[string]bool{
	"portmap":   {"portMappings": true},
	"bandwidth": {"bandwidth": true},
	"firewall":  nil,
}

// nodePaths are the control socket and state directory of the node's
// configuration; without a configuration file, the defaults, unless the
// file was named.
func nodePaths(path string, named bool) (socket, stateDir string, err error) {
	cfg, err := config.Load(path)
	switch {
	case err == nil:
		return cfg.ControlSocket, cfg.StateDir, nil
	case !named && errors.Is(err, fs.ErrNotExist):
		return config.DefaultControlSocket, config.DefaultStateDir, nil
	}
	return "", "", err
}

// cniVersions are the versions a configuration list may have: those
// with network configuration lists.
var cniVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

func networkConfigList(network, cniVersion, socket, dataDir string, chain []string) ([]byte, error) {
	plugins := []map[string]any{{"type": cni.PluginName, "socket": socket, "dataDir": dataDir}}
	for _, p := range chain {
		conf := map[string]any{"type": p}
		if caps := chainedCapabilities[p]; caps != nil {
			conf["capabilities"] = caps
		}
		plugins = append(plugins, conf)
	}
	list, err := json.MarshalIndent(map[string]any{"cniVersion": cniVersion, "name": network, "plugins": plugins}, "", "  ")
	return append(list, '\n'), err
}

// installBinary copies the running binary to path.
func installBinary(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	return replaceFile(path, src, 0o755)
}

// replaceFile writes path from r and puts it in place at once: a runtime
// may run the plugin or read its configuration meanwhile.
func replaceFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, r)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
