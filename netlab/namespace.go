package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// createNamespace records a namespace in the state file, then creates it
// with lo up and the lab's sysctls; the caller holds l.mu. Recording first
// means a crash can never leave an unrecorded namespace.
func (l *Lab) createNamespace(name string, forwarding bool) error {
	if len(l.state.Namespaces)+1 == roomyLab {
		if err := raiseNeighbourLimits(); err != nil {
			return err
		}
	}
	l.state.Namespaces = append(l.state.Namespaces, name)
	if err := l.saveLocked(); err != nil {
		return err
	}
	if err := runIP("netns", "add", name); err != nil {
		return err
	}
	if err := runIP("-n", name, "link", "set", "lo", "up"); err != nil {
		return err
	}
	return setSysctls(name, forwarding)
}

// roomyLab is the number of namespaces from which a lab needs more room in
// the kernel's neighbour (ARP) table than a machine has by default.
const roomyLab = 32

// raiseNeighbourLimits makes room in the kernel's IPv4 neighbour table
// for a lab of many hosts talking to each other. The table is shared by
// every namespace and holds 1,024 entries by default; a hundred hosts in a
// mesh need thousands, and past the limit new neighbours are never
// resolved, so packets to them vanish ("neighbor table overflow" in the
// kernel log). The limits are only ever raised, and stay raised: another
// lab may need them.
func raiseNeighbourLimits() error {
	for key, want := range map[string]int{"gc_thresh1": 8192, "gc_thresh2": 32768, "gc_thresh3": 65536} {
		path := "/proc/sys/net/ipv4/neigh/default/" + key
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("netlab: neighbour table limit: %w", err)
		}
		if have, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && have >= want {
			continue
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0); err != nil {
			return fmt.Errorf("netlab: raising the neighbour table limit %s: %w", key, err)
		}
	}
	return nil
}

func deleteNamespace(name string) error {
	if _, err := os.Stat(filepath.Join("/run/netns", name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return runIP("netns", "delete", name)
}

// setSysctls configures a new namespace. Loose reverse-path filtering
// (rp_filter 2) accepts asymmetric and NATed paths but no unroutable
// sources; it is set explicitly because new namespaces inherit the IPv4
// settings of the machine's own. Bridges are made plain switches that do
// not pass frames through iptables, whatever br_netfilter's defaults.
func setSysctls(namespace string, forwarding bool) error {
	settings := map[string]string{
		"net/ipv4/conf/all/rp_filter":     "2",
		"net/ipv4/conf/default/rp_filter": "2",
	}
	if forwarding {
		settings["net/ipv4/ip_forward"] = "1"
	}
	// Set to 0 where they exist. Without duplicate address detection the
	// link-local address of every new interface is usable at once: a
	// router cannot even ask for a neighbour's address until it is.
	optional := []string{
		"net/ipv6/conf/all/accept_dad",
		"net/ipv6/conf/default/accept_dad",
		"net/bridge/bridge-nf-call-iptables",
		"net/bridge/bridge-nf-call-ip6tables",
		"net/bridge/bridge-nf-call-arptables",
	}
	return inNamespace(namespace, func() error {
		for key, value := range settings {
			if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0); err != nil {
				return fmt.Errorf("netlab: sysctl %s in %s: %w", key, namespace, err)
			}
		}
		for _, key := range optional {
			err := os.WriteFile("/proc/sys/"+key, []byte("0"), 0)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("netlab: sysctl %s in %s: %w", key, namespace, err)
			}
		}
		return nil
	})
}

// inNamespace runs fn on an OS thread switched into the named network
// namespace. The thread is thrown away if it cannot be switched back, so no
// other goroutine ever runs inside the lab by accident.
func inNamespace(name string, fn func() error) error {
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return err
	}
	defer target.Close()
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			result <- err
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			result <- fmt.Errorf("netlab: enter namespace %s: %w", name, err)
			return
		}
		fnErr := fn()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			// Returning while still locked ends this thread.
			result <- errors.Join(fnErr, fmt.Errorf("netlab: leave namespace %s: %w", name, err))
			return
		}
		runtime.UnlockOSThread()
		result <- fnErr
	}()
	return <-result
}

// waitLinksReady waits until the kernel has finished bringing up the links
// in the namespace. It applies carrier changes asynchronously, for bridges
// up to a second later, and drops what is sent before: the first ARP
// request would be lost and retried only after another second.
func waitLinksReady(namespace string, links ...string) error {
	deadline := time.Now().Add(5 * time.Second)
	for _, link := range links {
		for {
			cmd := exec.Command("ip", "-n", namespace, "-d", "-o", "link", "show", "dev", link)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return commandError(cmd, err, out)
			}
			up := strings.Contains(string(out), " state UP ")
			forwarding := !strings.Contains(string(out), "bridge_slave") || strings.Contains(string(out), "bridge_slave state forwarding")
			if up && forwarding {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("netlab: link %s in %s did not come up: %s", link, namespace, out)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

func runIP(args ...string) error {
	return runTool("", "ip", args...)
}

// runTool runs a command of the lab's plumbing with stdin as its input.
func runTool(stdin, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return commandError(cmd, err, out)
	}
	return nil
}

// commandError describes a failed command with its output.
func commandError(cmd *exec.Cmd, err error, output []byte) error {
	return fmt.Errorf("netlab: %s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(output))
}
