package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"burrow/identity"
)

// runIdentityCLI runs burrow with args on a freshly built ca/key/cert tree,
// so no flag value survives from an earlier run, and returns what it printed.
func runIdentityCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "burrow", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newCACmd(), newKeyCmd(), newCertCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// mustRunIdentityCLI is runIdentityCLI for steps that must succeed.
func mustRunIdentityCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runIdentityCLI(t, args...)
	if err != nil {
		t.Fatalf("burrow %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestCAInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	out := mustRunIdentityCLI(t, "ca", "init", "--network", "home", "--dir", dir)
	ca, err := identity.LoadCA(dir)
	if err != nil {
		t.Fatalf("LoadCA after ca init: %v", err)
	}
	for _, want := range []string{dir, `"home"`, ca.Fingerprint()} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if ca.Network != "home" {
		t.Errorf("CA network %q, want home", ca.Network)
	}

	keyBefore, _ := os.ReadFile(filepath.Join(dir, identity.CAKeyFile))
	_, err = runIdentityCLI(t, "ca", "init", "--network", "other", "--dir", dir)
	if err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Fatalf("second ca init: %v, want a refusal", err)
	}
	if keyAfter, _ := os.ReadFile(filepath.Join(dir, identity.CAKeyFile)); !bytes.Equal(keyAfter, keyBefore) {
		t.Fatal("a refused ca init replaced ca.key")
	}
}

func TestCAInitDefaultDir(t *testing.T) {
	t.Chdir(t.TempDir())
	mustRunIdentityCLI(t, "ca", "init", "--network", "home")
	if _, err := identity.LoadCA("burrow-ca"); err != nil {
		t.Fatalf("ca init without --dir did not create ./burrow-ca: %v", err)
	}
}

func TestCAInitErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ca", "init", "--dir", dir}, "--network is required"},
		{[]string{"ca", "init", "--network", "Home", "--dir", dir}, "a-z, 0-9"},
		{[]string{"ca", "init", "--network", "home", "--dir", dir, "extra"}, "unknown command"},
	}
	for _, tc := range cases {
		_, err := runIdentityCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("burrow %s: %v, want a one-line error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a failed ca init created the directory")
	}
}

func TestIdentityCommandsRegisteredAndDocumented(t *testing.T) {
	for _, path := range [][]string{{"ca", "init"}, {"key", "generate"}, {"key", "show"}, {"cert", "sign"}, {"cert", "show"}} {
		cmd, _, err := rootCmd.Find(path)
		if err != nil || cmd.Name() != path[1] || cmd.Parent().Name() != path[0] {
			t.Errorf("rootCmd has no %q command (%v)", strings.Join(path, " "), err)
		}
	}
	var check func(cmd *cobra.Command)
	check = func(cmd *cobra.Command) {
		if cmd.Short == "" || cmd.Long == "" || cmd.Example == "" {
			t.Errorf("%q lacks Short, Long or Example", cmd.CommandPath())
		}
		for _, sub := range cmd.Commands() {
			check(sub)
		}
	}
	for _, cmd := range []*cobra.Command{newCACmd(), newKeyCmd(), newCertCmd()} {
		check(cmd)
	}
}
