package e2e

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"burrow/identity"
	"burrow/netlab"
	"burrow/netlab/cluster"
	"burrow/netlab/labtest"
)

// TestStartupErrorsAreClearAndLeaveNothing is the table of things an
// operator gets wrong: each makes `burrow up` exit non-zero with one line
// naming the problem and the fix, and leaves no TAP device, address or
// control socket behind.
func TestStartupErrorsAreClearAndLeaveNothing(t *testing.T) {
	lab := labtest.New(t)
	nw, err := cluster.New(lab, "errs", burrowBin)
	if err != nil {
		t.Fatal(err)
	}
	host, err := lab.AddHost("h")
	if err != nil {
		t.Fatal(err)
	}
	good, err := nw.AddNode(host, "good", virtual(0))
	if err != nil {
		t.Fatal(err)
	}

	type setup func(t *testing.T, dir string, cfg map[string]any) []string // returns a command prefix, if any
	cases := []struct {
		name  string
		setup setup
		want  []string // all must appear in the error
	}{
		{"missing field", func(t *testing.T, dir string, cfg map[string]any) []string {
			delete(cfg, "cert")
			return nil
		}, []string{"cert", "is required"}},
		{"unknown field", func(t *testing.T, dir string, cfg map[string]any) []string {
			cfg["lisen"] = "0.0.0.0:1"
			return nil
		}, []string{"lisen"}},
		{"bad value", func(t *testing.T, dir string, cfg map[string]any) []string {
			cfg["tap"] = map[string]any{"mtu": 99999}
			return nil
		}, []string{"tap.mtu", "out of range"}},
		{"unreadable key", func(t *testing.T, dir string, cfg map[string]any) []string {
			os.Chmod(filepath.Join(dir, "node.key"), 0o644)
			return nil
		}, []string{"node.key", "chmod 600"}},
		{"expired certificate", func(t *testing.T, dir string, cfg map[string]any) []string {
			key, err := identity.LoadNodeKey(filepath.Join(dir, "node.key"))
			if err != nil {
				t.Fatal(err)
			}
			cert, err := identity.SignCertificate(nw.CA, identity.Certificate{Name: "old", PublicKey: key.Public,
				NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if err := identity.SaveCertificate(filepath.Join(dir, "old.crt"), cert); err != nil {
				t.Fatal(err)
			}
			cfg["cert"] = filepath.Join(dir, "old.crt")
			return nil
		}, []string{"old.crt", "expired"}},
		{"certificate for another key", func(t *testing.T, dir string, cfg map[string]any) []string {
			cfg["cert"] = good.Config.Cert
			return nil
		}, []string{"another key", "burrow cert sign"}},
		{"port in use", func(t *testing.T, dir string, cfg map[string]any) []string {
			taken, err := inside(host, func() (*net.UDPConn, error) {
				return net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(host.Addr, cluster.Port)))
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { taken.Close() })
			return nil
		}, []string{"address already in use", "listen"}},
		{"no permission for the TAP", func(t *testing.T, dir string, cfg map[string]any) []string {
			// An unprivileged user with its own copy of everything it reads.
			own, err := os.MkdirTemp("", "burrow-unprivileged-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(own) })
			for field, src := range map[string]string{"ca": cfg["ca"].(string), "cert": cfg["cert"].(string), "state_dir": filepath.Join(dir, "node.key")} {
				data, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				dst := filepath.Join(own, filepath.Base(src))
				if err := os.WriteFile(dst, data, 0o600); err != nil {
					t.Fatal(err)
				}
				if field == "state_dir" {
					dst = own
				}
				cfg[field] = dst
			}
			cfg["control_socket"] = filepath.Join(own, "control.sock")
			if err := exec.Command("chown", "-R", "nobody:nogroup", own).Run(); err != nil {
				t.Fatal(err)
			}
			os.Chmod(own, 0o700)
			return []string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"}
		}, []string{"root or CAP_NET_ADMIN"}},
		{"publication for another gateway", func(t *testing.T, dir string, cfg map[string]any) []string {
			cfg["publish"] = []string{publicationFile(t, nw, good, good.Dir, netip.AddrPortFrom(host.Addr, 8443))}
			return nil
		}, []string{"publish[0]", "to be exposed by gateway"}},
		{"publication on a taken address", func(t *testing.T, dir string, cfg map[string]any) []string {
			listen := netip.AddrPortFrom(host.Addr, 8443)
			taken, err := inside(host, func() (net.Listener, error) { return net.Listen("tcp", listen.String()) })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { taken.Close() })
			cfg["publish"] = []string{publicationFile(t, nw, good, dir, listen)}
			return nil
		}, []string{"publish[0]", "address already in use"}},
		{"kernel path trusting the internet", func(t *testing.T, dir string, cfg map[string]any) []string {
			// The lab's internet, 198.18.0.0/16, is not a private network.
			cfg["kernel_path"] = map[string]any{"enabled": true, "trusted": []string{netlab.InternetRange.String()}}
			return nil
		}, []string{"kernel_path.trusted[0]", "not a private network", "unencrypted", "kernel_path.allow_public: true"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := nw.AddNode(host, "n"+string(rune('a'+i)), virtual(i+1))
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			raw, _ := yaml.Marshal(&n.Config)
			yaml.Unmarshal(raw, &cfg)
			prefix := tc.setup(t, n.Dir, cfg)
			raw, _ = yaml.Marshal(cfg)
			conf, err := os.CreateTemp("", "burrow-*.yaml") // readable by the unprivileged case
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(conf.Name()) })
			conf.Write(raw)
			conf.Close()
			os.Chmod(conf.Name(), 0o644)
			path := conf.Name()
			args := append(prefix, burrowBin, "up", "-c", path)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := host.Command(ctx, args[0], args[1:]...).CombinedOutput()
			msg := strings.TrimSpace(string(out))
			if err == nil {
				t.Fatalf("burrow up succeeded:\n%s", msg)
			}
			if ctx.Err() != nil {
				t.Fatalf("burrow up hung instead of failing:\n%s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not mention %q:\n%s", w, msg)
				}
			}
			lines := strings.Split(msg, "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "burrow: ") {
				t.Errorf("the last line is not one error line:\n%s", msg)
			}
			leftovers(t, host, cfg)
		})
	}
}

// leftovers fails if a failed start left a TAP device, an address or a
// control socket.
func leftovers(t *testing.T, host *netlab.Host, cfg map[string]any) {
	t.Helper()
	out, _ := host.Run(context.Background(), "ip", "-o", "link", "show")
	if strings.Contains(string(out), "burrow0") {
		t.Errorf("a TAP device was left:\n%s", out)
	}
	out, _ = host.Run(context.Background(), "ip", "-o", "addr", "show")
	if strings.Contains(string(out), "10.99.0.") {
		t.Errorf("a virtual address was left:\n%s", out)
	}
	if sock, ok := cfg["control_socket"].(string); ok {
		if _, err := os.Stat(sock); err == nil {
			t.Errorf("the control socket %s was left", sock)
		}
	}
}
