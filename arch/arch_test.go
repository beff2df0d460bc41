package arch

import (
	"slices"
	"strings"
	"testing"
)

// TestArchitecture checks burrow itself.
func TestArchitecture(t *testing.T) {
	vs, err := Check("..", "layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// TestPlantedViolations proves the checker sees each kind of violation,
// at the right file and line, in a fixture module that plants them.
func TestPlantedViolations(t *testing.T) {
	want := []string{
		"app/app.go:7: layers: app (layer 2) imports tools (layer 3); imports must point down",
		"core/core.go:7: core purity: imports os (the core does no I/O; files and processes belong in runtime)",
		"core/core.go:10: layers: core (layer 1) imports app (layer 2); imports must point down",
		"core/core.go:17: core purity: uses time.Now (inject the clock: use the now passed in)",
		"core/core.go:18: core purity: go statement (the core runs on its driver's goroutine; goroutines belong in runtime)",
		"core/core.go:19: core purity: uses math/rand/v2.IntN (randomness is injected: draw from the *rand.Rand passed in)",
		"core/core.go:20: core purity: uses net.Dial (sockets belong in runtime; the core may use only net's address types)",
		"core/dot.go:3: core purity: dot-imports time, which hides the names used from it; import it by name",
		"layers.yaml:7: layers: gone matches no package; remove it or correct it",
		"stray/stray.go:2: layers: package stray is not in layers.yaml; add it to the layer where it belongs",
	}
	got := check(t, "testdata/planted")
	if !slices.Equal(got, want) {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestCleanFixture proves the checker reports nothing on a module that
// keeps the rules, including what they allow: seeded randomness, net's
// address types, imports within an entry, and test files and non-core
// packages that do what the core must not.
func TestCleanFixture(t *testing.T) {
	if got := check(t, "testdata/clean"); len(got) > 0 {
		t.Errorf("got\n\t%s\nwant nothing", strings.Join(got, "\n\t"))
	}
}

func check(t *testing.T, root string) []string {
	t.Helper()
	vs, err := Check(root, root+"/layers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, v := range vs {
		lines = append(lines, v.String())
	}
	return lines
}
