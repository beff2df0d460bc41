// Package containers keeps the records of the containers burrow's CNI
// plugin attached to a node: the plugin writes them, so that DEL and GC
// clean up whether or not the daemon is running, and the daemon reads
// them to register each container's name in the network's DNS.
package containers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DataDir is where the plugin keeps its records for a daemon whose state
// directory is stateDir; the daemon reads the attachments there.
func DataDir(stateDir string) string { return filepath.Join(stateDir, "containers") }

// Attachment is one container interface the plugin configured.
type Attachment struct {
	ContainerID string `json:"container_id"`
	IfName      string `json:"ifname"`
	// Name is the container's name in the network's DNS; empty when the
	// runtime gave none.
	Name          string         `json:"name,omitempty"`
	HostInterface string         `json:"host_interface"`
	Addresses     []netip.Prefix `json:"addresses"`
}

// Addrs are the attachment's addresses without their prefix lengths.
func (a Attachment) Addrs() []netip.Addr {
	out := make([]netip.Addr, len(a.Addresses))
	for i, p := range a.Addresses {
		out[i] = p.Addr()
	}
	return out
}

func attachmentsDir(dataDir, network string) string {
	return filepath.Join(dataDir, "attachments", network)
}

// attachmentPath names the record of one interface. Runtimes' container
// IDs and interface names are checked by the CNI library to hold no path
// separators.
func attachmentPath(dataDir, network, containerID, ifName string) string {
	return filepath.Join(attachmentsDir(dataDir, network), containerID+"-"+ifName+".json")
}

// Write records a, replacing any record of the same interface
// at once, so that a reader never sees half of one.
func Write(dataDir, network string, a Attachment) error {
	path := attachmentPath(dataDir, network, a.ContainerID, a.IfName)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Read reads the record of one interface; ok is false when
// there is none.
func Read(dataDir, network, containerID, ifName string) (a Attachment, ok bool, err error) {
	data, err := os.ReadFile(attachmentPath(dataDir, network, containerID, ifName))
	if errors.Is(err, fs.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, err
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, false, fmt.Errorf("attachment record of container %s: %w", containerID, err)
	}
	return a, true, nil
}

// Remove deletes the record of one interface, if there is one.
func Remove(dataDir, network, containerID, ifName string) error {
	err := os.Remove(attachmentPath(dataDir, network, containerID, ifName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// OfNetwork lists the records of one network.
func OfNetwork(dataDir, network string) ([]Attachment, error) {
	return readAttachments(filepath.Join(attachmentsDir(dataDir, network), "*.json"))
}

// All lists the records of every network under dataDir, sorted by
// container and interface; records that cannot be read are skipped.
func All(dataDir string) ([]Attachment, error) {
	return readAttachments(filepath.Join(dataDir, "attachments", "*", "*.json"))
}

func readAttachments(pattern string) ([]Attachment, error) {
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, err
	}
	var out []Attachment
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // removed by a DEL meanwhile
		}
		var a Attachment
		if json.Unmarshal(data, &a) == nil {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Attachment) int {
		return strings.Compare(a.ContainerID+"/"+a.IfName, b.ContainerID+"/"+b.IfName)
	})
	return out, nil
}
