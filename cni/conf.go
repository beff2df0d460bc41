// Package cni is burrow's container network plugin (CNI 1.0 and 1.1).
// It gives each container a veth on the node's container bridge,
// addresses from the node's self-assigned subnets (Warrens), default
// routes through the bridge and burrow's virtual DNS; the daemon routes
// the subnets over the virtual Ethernet, so containers on nodes behind
// different NATs reach each other. Addresses are reserved with the
// reference host-local allocator, and each attachment is recorded on
// disk (runtime/containers) before anything is configured, so that DEL
// and GC clean up whether or not the daemon is running.
package cni

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"burrow/config"
	"burrow/runtime/containers"
)

// PluginName is the file name container runtimes run the plugin by, and
// the type in its network configuration.
const PluginName = "burrow-cni"

// NetConf is the plugin's network configuration.
type NetConf struct {
	types.NetConf
	// Socket is the control socket of the node's burrow daemon.
	Socket string `json:"socket,omitempty"`
	// DataDir keeps address reservations and attachment records; the
	// daemon reads the records under its state directory, so this is
	// that directory's "containers".
	DataDir string `json:"dataDir,omitempty"`
}

// networkName is what a network name may be: it names a directory.
var networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// parseConf decodes and checks a network configuration; its errors are
// CNI errors naming the field.
func parseConf(data []byte) (*NetConf, error) {
	conf := &NetConf{Socket: config.DefaultControlSocket, DataDir: containers.DataDir(config.DefaultStateDir)}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "burrow-cni: the network configuration is not valid JSON", err.Error())
	}
	switch {
	case conf.Type != PluginName:
		return nil, confErr("type", "is %q, want %q", conf.Type, PluginName)
	case !networkName.MatchString(conf.Name):
		return nil, confErr("name", "%q is not a network name (letters, digits, '_', '.' and '-')", conf.Name)
	case !filepath.IsAbs(conf.Socket):
		return nil, confErr("socket", "%q is not an absolute path to burrow's control socket", conf.Socket)
	case !filepath.IsAbs(conf.DataDir):
		return nil, confErr("dataDir", "%q is not an absolute path", conf.DataDir)
	case conf.IPAM.Type != "":
		return nil, confErr("ipam", "burrow-cni assigns addresses from the node's own subnets and takes no IPAM plugin (%q)", conf.IPAM.Type)
	}
	return conf, nil
}

func confErr(field, format string, args ...any) error {
	return types.NewError(types.ErrInvalidNetworkConfig, "burrow-cni: "+field+": "+fmt.Sprintf(format, args...), "")
}

// containerName is the name the container gets in the network's DNS,
// from the arguments runtimes pass: Kubernetes and podman give the pod's
// or container's name (K8S_POD_NAME), Kubernetes its namespace too;
// empty when there is none.
func containerName(cniArgs string) string {
	var name, namespace string
	for kv := range strings.SplitSeq(cniArgs, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAME":
			name = v
		case "K8S_POD_NAMESPACE":
			namespace = v
		}
	}
	if name == "" || namespace == "" || namespace == "default" {
		return name
	}
	return name + "." + namespace
}
