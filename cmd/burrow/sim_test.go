package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func runSimCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "burrow", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newSimCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"sim"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestSimRunsNamedScenarioAndWritesResults(t *testing.T) {
	dir := t.TempDir()
	out, err := runSimCLI(t, "e3", "--seed", "2", "--out", dir)
	// This tests the command; the scenario's own invariants are the sim
	// package's tests, so a failed invariant is fine here.
	if err != nil && !strings.Contains(err.Error(), "invariant") {
		t.Fatalf("burrow sim e3: %v\n%s", err, out)
	}
	for _, want := range []string{"== e3:", "seed 2", "longest interruption", "e3 took"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"e3.json", "e3-probes.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestSimRejectsUnknownScenario(t *testing.T) {
	if _, err := runSimCLI(t, "e42"); err == nil || !strings.Contains(err.Error(), `unknown scenario "e42"`) {
		t.Fatalf("got %v, want an unknown-scenario error", err)
	}
}
