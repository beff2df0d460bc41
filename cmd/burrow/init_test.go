package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"burrow/config"
	"burrow/identity"
)

func TestInitWithCAMakesARunnableNode(t *testing.T) {
	m := newMachine(t)
	out := mustRunSetupCLI(t, append(m.flags(), "init", "--network", "home", "--ca", "--name", "alpha",
		"--address", "10.10.0.1/24", "--bootstrap", "192.0.2.7:51820")...)
	cfg, cert := checkMember(t, filepath.Join(m.dir, "burrow.yaml"))
	if cert.Name != "alpha" || !slices.Equal(cert.Addresses, []netip.Prefix{netip.MustParsePrefix("10.10.0.1/24")}) {
		t.Errorf("certificate %+v", cert)
	}
	if cfg.StateDir != m.state || cfg.CA != filepath.Join(m.dir, "ca.crt") || cfg.Cert != filepath.Join(m.dir, "node.crt") ||
		cfg.TAP.Name != config.DefaultTAPName || cfg.ControlSocket != config.DefaultControlSocket ||
		len(cfg.Overlay.BootstrapAddrs) != 1 || cfg.Metrics.Listen != "" || cfg.Log.Level != "info" {
		t.Errorf("configuration %+v", cfg)
	}
	caKey := filepath.Join(m.caDir(), identity.CAKeyFile)
	if info, err := os.Stat(caKey); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("CA key %s: %v %v", caKey, info, err)
	}
	if _, err := identity.LoadCA(m.caDir()); err != nil {
		t.Fatalf("the CA in %s does not load: %v", m.caDir(), err)
	}
	if !strings.Contains(out, "WARNING") || !strings.Contains(out, caKey) || !strings.Contains(out, "offline") {
		t.Errorf("init --ca does not warn that the CA key should go offline:\n%s", out)
	}
	// The node keeps working with the CA directory moved away.
	if err := os.RemoveAll(m.caDir()); err != nil {
		t.Fatal(err)
	}
	checkMember(t, filepath.Join(m.dir, "burrow.yaml"))
}

func TestInitRefusesToOverwriteAndSaysWhatExists(t *testing.T) {
	m := newMachine(t)
	args := append(m.flags(), "init", "--network", "home", "--ca", "--name", "alpha")
	mustRunSetupCLI(t, args...)
	files := []string{filepath.Join(m.dir, "burrow.yaml"), filepath.Join(m.state, identity.NodeKeyFile),
		filepath.Join(m.dir, "node.crt"), filepath.Join(m.caDir(), identity.CAKeyFile)}
	before := map[string][]byte{}
	for _, f := range files {
		before[f], _ = os.ReadFile(f)
	}
	_, err := runSetupCLI(t, args...)
	if err == nil {
		t.Fatal("a second init succeeded")
	}
	for _, f := range files {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("the refusal does not name %s: %v", f, err)
		}
		if after, _ := os.ReadFile(f); !bytes.Equal(after, before[f]) {
			t.Errorf("a refused init changed %s", f)
		}
	}
	if !strings.Contains(err.Error(), "--instance") {
		t.Errorf("the refusal does not say how to proceed: %v", err)
	}
}

func TestInitFailingHalfwayLeavesNothing(t *testing.T) {
	m := newMachine(t)
	// A directory where the configuration file should go makes the last
	// step fail after the CA, key and certificate were written.
	if err := os.MkdirAll(filepath.Join(m.dir, "burrow.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := newNodeLayout("home", m.dir, m.state, "", config.DefaultListen, contacts{})
	if err != nil {
		t.Fatal(err)
	}
	var created createdFiles
	if err := initNode(&bytes.Buffer{}, l, true, m.caDir(), "alpha", nil, time.Hour, &created); err == nil {
		t.Fatal("init wrote its configuration over a directory")
	}
	created.undo()
	for _, f := range []string{l.CACert, l.Cert, l.nodeKeyPath(), filepath.Join(m.caDir(), identity.CAKeyFile)} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s left behind", f)
		}
	}
}

func TestInitWithoutCAPrintsWhatToCertify(t *testing.T) {
	m := newMachine(t)
	out := mustRunSetupCLI(t, append(m.flags(), "init", "--network", "home", "--name", "beta")...)
	key, err := identity.LoadNodeKey(filepath.Join(m.state, identity.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "burrow cert sign --ca CA_DIR --name beta --public-key ") || !strings.Contains(out, key.ID().String()) {
		t.Errorf("init without --ca does not say how to get a certificate:\n%s", out)
	}
	if _, err := config.Load(filepath.Join(m.dir, "burrow.yaml")); err != nil {
		t.Errorf("configuration does not load: %v", err)
	}
	if _, err := os.Stat(m.caDir()); err == nil {
		t.Error("init without --ca created a CA")
	}
}

func TestInitErrorsNameTheFix(t *testing.T) {
	m := newMachine(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"init", "--name", "a"}, "--network is required"},
		{[]string{"init", "--network", "Home", "--name", "a"}, "a-z, 0-9"},
		{[]string{"init", "--network", "home", "--name", "a", "--address", "10.0.0.1/24"}, "burrow cert sign --address"},
		{[]string{"init", "--network", "home", "--name", "a", "--ca", "--address", "10.0.0.1"}, "prefix length"},
		{[]string{"init", "--network", "home", "--name", "a", "--bootstrap", "beacon.example:51820"}, "host names"},
		{[]string{"init", "--network", "home", "--name", "a", "--listen", "51820"}, "--listen"},
		{[]string{"init", "--network", "home", "--name", "a", "--instance", "Way_Too_Long_Name"}, "--instance"},
		{[]string{"init", "--network", "home", "--name", "a", "--log-level", "loud"}, "--log-level"},
		{[]string{"init", "--network", "home", "--name", "no spaces"}, "--name"},
	}
	for _, tc := range cases {
		_, err := runSetupCLI(t, append(m.flags(), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("burrow %s: %v, want an error mentioning %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(m.dir)); len(entries) != 0 {
		t.Errorf("failed inits left %d entries behind", len(entries))
	}
}

func TestInstancesLiveSideBySide(t *testing.T) {
	m := newMachine(t)
	mustRunSetupCLI(t, append(m.flags(), "init", "--network", "home", "--ca", "--name", "alpha")...)
	mustRunSetupCLI(t, append(m.flags(), "init", "--network", "lab", "--ca", "--name", "alpha",
		"--instance", "lab", "--listen", "0.0.0.0:51821", "--log-level", "debug")...)
	home, _ := checkMember(t, filepath.Join(m.dir, "burrow.yaml"))
	lab, _ := checkMember(t, filepath.Join(m.dir, "lab.yaml"))
	if lab.Network != "lab" || lab.StateDir != filepath.Join(m.state, "lab") || lab.TAP.Name != "bw-lab" ||
		lab.ControlSocket != "/run/burrow/lab.sock" || lab.ListenAddr.Port() != 51821 || lab.Log.Level != "debug" ||
		lab.CA != filepath.Join(m.dir, "lab", "ca.crt") {
		t.Errorf("instance configuration %+v", lab)
	}
	if home.StateDir == lab.StateDir || home.TAP.Name == lab.TAP.Name || home.ControlSocket == lab.ControlSocket || home.Listen == lab.Listen {
		t.Error("the two networks share a state directory, TAP, control socket or port")
	}
}

// commentedField is a commented-out field in the configuration template:
// "# key: value" or a list item of the peers example.
var commentedField = regexp.MustCompile(`^(\s*)# (\s*(?:- )?[a-z_]+:(?: .*)?)$`)

// TestConfigTemplateDocumentsEveryField uncomments every field of the
// rendered configuration: the result must be a valid configuration whose
// keys are exactly those of config.Config, so a field added to the config
// package without a line here, or a line for a field that does not exist,
// fails.
func TestConfigTemplateDocumentsEveryField(t *testing.T) {
	l, err := newNodeLayout("home", "/etc/burrow", "/var/lib/burrow", "", "[::]:51820",
		contacts{bootstrap: []netip.AddrPort{netip.MustParseAddrPort("[2001:db8::1]:51820")},
			beacons: []config.BeaconRef{{Addr: netip.MustParseAddrPort("192.0.2.9:51820"), WebSocket: "wss://192.0.2.9/burrow"}}})
	if err != nil {
		t.Fatal(err)
	}
	rendered := renderConfig(l)
	if _, err := config.Parse(rendered); err != nil {
		t.Fatalf("the rendered configuration does not parse: %v\n%s", err, rendered)
	}
	var lines []string
	for line := range strings.SplitSeq(string(rendered), "\n") {
		if m := commentedField.FindStringSubmatch(line); m != nil {
			line = m[1] + m[2]
		}
		lines = append(lines, line)
	}
	full := []byte(strings.Join(lines, "\n"))
	if _, err := config.Parse(full); err != nil {
		t.Fatalf("with every field uncommented the configuration does not parse: %v\n%s", err, full)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(full, &doc); err != nil {
		t.Fatal(err)
	}
	got := keyPaths("", doc)
	want := fieldPaths("", reflect.TypeFor[config.Config]())
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("the configuration template in configfile.go documents\n  %v\nconfig.Config has\n  %v\nadd each new field there with its default and a line saying what it does", got, want)
	}
}

func keyPaths(prefix string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		var out []string
		for k, sub := range v {
			out = append(out, keyPaths(joinKey(prefix, k), sub)...)
		}
		return out
	case []any:
		// A list documents its items' fields across its examples, which
		// may need several (a rule with ports, a rule with ICMP types).
		var out []string
		for _, item := range v {
			if m, ok := item.(map[string]any); ok {
				for _, k := range keyPaths(prefix+"[]", m) {
					if !slices.Contains(out, k) {
						out = append(out, k)
					}
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return []string{prefix}
}

// fieldPaths lists the YAML keys of a struct type, nested ones joined with
// dots, the fields of list items after "[]".
func fieldPaths(prefix string, t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, fieldPaths(joinKey(prefix, tag), f.Type)...)
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, fieldPaths(joinKey(prefix, tag), f.Type.Elem())...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, fieldPaths(joinKey(prefix, tag)+"[]", f.Type.Elem())...)
		default:
			out = append(out, joinKey(prefix, tag))
		}
	}
	return out
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}
