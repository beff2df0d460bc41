package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A report names the commit the measured binary was built from, as its
// build information says, and whether uncommitted changes went into it:
// the binary run may come from another work tree than the one the bench
// runs in.
func TestTheCommitIsTheMeasuredBinarys(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipping: git is not installed")
	}
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(body string) {
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {"+body+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module probe\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("")
	run("git", "init", "-q")
	run("git", "add", ".")
	run("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "probe")
	commit := run("git", "rev-parse", "--short=7", "HEAD")
	bin := filepath.Join(dir, "probe")
	run("go", "build", "-o", bin, ".")
	if got, modified := builtFrom(bin); got != commit || modified {
		t.Fatalf("builtFrom = %q, %v; want %q, unmodified", got, modified, commit)
	}
	write(" println() ")
	run("go", "build", "-o", bin, ".")
	if got, modified := builtFrom(bin); got != commit || !modified {
		t.Fatalf("after a change: builtFrom = %q, %v; want %q, modified", got, modified, commit)
	}
	if got, _ := builtFrom(filepath.Join(dir, "go.mod")); got != "" {
		t.Fatalf("builtFrom of a file that is no binary = %q", got)
	}
}
