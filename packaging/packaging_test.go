// Package packaging_test checks burrow's systemd units, 'make install' and
// the Debian package on this machine.
package packaging_test

import (
	"bufio"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// repoRoot is where the Makefile is.
const repoRoot = ".."

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s is not installed", tool)
		}
	}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// unitSettings reads a unit file's Key=Value lines, every value of a key.
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := map[string][]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = append(settings[k], v)
		}
	}
	return settings
}

// TestUnitsAreHardened checks the sandbox each unit promises: only
// CAP_NET_ADMIN, no new privileges, real-time priority 1 at most, a
// read-only system but for burrow's own directories, and the socket
// families and device burrow uses.
func TestUnitsAreHardened(t *testing.T) {
	for unit, config := range map[string]string{"burrow.service": "/etc/burrow/burrow.yaml", "burrow@.service": "/etc/burrow/%i.yaml"} {
		s := unitSettings(t, filepath.Join("systemd", unit))
		for key, want := range map[string]string{
			"ExecStart":                "/usr/bin/burrow up -c " + config,
			"CapabilityBoundingSet":    "CAP_NET_ADMIN",
			"AmbientCapabilities":      "CAP_NET_ADMIN",
			"NoNewPrivileges":          "yes",
			"LimitRTPRIO":              "1",
			"ProtectSystem":            "strict",
			"ReadWritePaths":           "/var/lib/burrow /run/burrow",
			"ProtectHome":              "yes",
			"PrivateTmp":               "yes",
			"RestrictAddressFamilies":  "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
			"DevicePolicy":             "closed",
			"DeviceAllow":              "/dev/net/tun rw",
			"RuntimeDirectory":         "burrow",
			"RuntimeDirectoryPreserve": "yes",
			"StateDirectory":           "burrow",
		} {
			if got := s[key]; !slices.Equal(got, []string{want}) {
				t.Errorf("%s: %s=%v, want exactly %q", unit, key, got, want)
			}
		}
	}
}

// TestUnitsVerify runs systemd-analyze verify on both units, with their
// ExecStart pointing at a freshly built burrow: it must have nothing to
// say.
func TestUnitsVerify(t *testing.T) {
	need(t, "systemd-analyze", "go")
	dir := t.TempDir()
	bin := filepath.Join(dir, "burrow")
	run(t, repoRoot, "go", "build", "-o", bin, "./cmd/burrow")
	var units []string
	for src, dst := range map[string]string{"burrow.service": "burrow.service", "burrow@.service": "burrow@home.service"} {
		data, err := os.ReadFile(filepath.Join("systemd", src))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, dst)
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "/usr/bin/burrow", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, path)
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestMakeInstallHonoursPrefixAndDestdir stages an install and checks
// that every file is there and the units run the installed binary.
func TestMakeInstallHonoursPrefixAndDestdir(t *testing.T) {
	need(t, "make", "go")
	dest := t.TempDir()
	run(t, repoRoot, "make", "install", "DESTDIR="+dest, "PREFIX=/opt/burrow")
	for _, f := range []string{"bin/burrow", "lib/systemd/system/burrow.service", "lib/systemd/system/burrow@.service",
		"share/bash-completion/completions/burrow", "share/zsh/vendor-completions/_burrow",
		"share/fish/vendor_completions.d/burrow.fish", "share/doc/burrow/examples/burrow.yaml"} {
		if _, err := os.Stat(filepath.Join(dest, "opt/burrow", f)); err != nil {
			t.Errorf("make install did not install %s: %v", f, err)
		}
	}
	unit := unitSettings(t, filepath.Join(dest, "opt/burrow/lib/systemd/system/burrow@.service"))
	if got := unit["ExecStart"]; len(got) != 1 || !strings.HasPrefix(got[0], "/opt/burrow/bin/burrow up ") {
		t.Errorf("installed unit runs %v, want /opt/burrow/bin/burrow", got)
	}
	out := run(t, dest, filepath.Join(dest, "opt/burrow/bin/burrow"), "--help")
	if !strings.Contains(out, "init") || !strings.Contains(out, "join") {
		t.Errorf("installed burrow --help:\n%s", out)
	}
	if bash, _ := os.ReadFile(filepath.Join(dest, "opt/burrow/share/bash-completion/completions/burrow")); !strings.Contains(string(bash), "__start_burrow") {
		t.Error("the bash completion is not cobra's")
	}
}

// TestDebInstallsAndPurges builds the package, installs it on this
// machine, checks it, and purges it again, leaving the machine as it was.
func TestDebInstallsAndPurges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: installing a package needs root")
	}
	need(t, "make", "go", "dpkg", "dpkg-deb")
	if err := exec.Command("dpkg-query", "-W", "burrow").Run(); err == nil {
		t.Skip("skipping: a burrow package is installed here already; not touching it")
	}
	for _, f := range []string{"/usr/bin/burrow", "/lib/systemd/system/burrow.service", "/lib/systemd/system/burrow@.service"} {
		if _, err := os.Lstat(f); err == nil {
			t.Skipf("skipping: %s exists and is not from a package; not touching it", f)
		}
	}
	existedBefore := map[string]bool{}
	for _, d := range []string{"/var/lib/burrow", "/etc/burrow"} {
		_, err := os.Stat(d)
		existedBefore[d] = err == nil
	}

	run(t, repoRoot, "make", "deb")
	debs, _ := filepath.Glob(filepath.Join(repoRoot, "out", "burrow_*.deb"))
	deb := newest(debs)
	if deb == "" {
		t.Fatal("make deb made no out/burrow_*.deb")
	}
	deb, _ = filepath.Abs(deb)
	t.Cleanup(func() {
		exec.Command("dpkg", "--purge", "burrow").Run()
		for _, d := range []string{"/var/lib/burrow", "/etc/burrow"} {
			if !existedBefore[d] {
				os.Remove(d) // only if empty: anything else is not ours
			}
		}
	})
	run(t, "/", "dpkg", "-i", deb)

	out := run(t, "/", "/usr/bin/burrow", "--help")
	if !strings.Contains(out, "burrow joins machines anywhere") {
		t.Errorf("/usr/bin/burrow --help:\n%s", out)
	}
	for _, f := range []string{"/lib/systemd/system/burrow.service", "/lib/systemd/system/burrow@.service",
		"/usr/share/bash-completion/completions/burrow", "/usr/share/zsh/vendor-completions/_burrow",
		"/usr/share/fish/vendor_completions.d/burrow.fish", "/usr/share/doc/burrow/examples/burrow.yaml"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the package did not install %s: %v", f, err)
		}
	}
	if info, err := os.Stat("/var/lib/burrow"); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("postinst did not create /var/lib/burrow with mode 0700: %v %v", info, err)
	}

	run(t, "/", "dpkg", "--purge", "burrow")
	for _, f := range []string{"/usr/bin/burrow", "/lib/systemd/system/burrow.service", "/usr/share/doc/burrow/examples/burrow.yaml"} {
		if _, err := os.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after the purge", f)
		}
	}
	if !existedBefore["/var/lib/burrow"] {
		if _, err := os.Stat("/var/lib/burrow"); err == nil {
			t.Error("the purge left the empty /var/lib/burrow behind")
		}
	}
}

// TestDebForEachBoard builds the package of each release architecture
// with 'make deb DEB_ARCH=...' and checks what a board's dpkg and kernel
// will see: the Architecture field, and a static ELF binary for that CPU,
// built for ARMv7 on armhf.
func TestDebForEachBoard(t *testing.T) {
	need(t, "make", "go", "dpkg-deb")
	for _, board := range []struct {
		debArch string
		machine elf.Machine
		build   []string // settings 'go version -m' must list
	}{
		{"amd64", elf.EM_X86_64, []string{"GOARCH=amd64"}},
		{"arm64", elf.EM_AARCH64, []string{"GOARCH=arm64"}},
		{"armhf", elf.EM_ARM, []string{"GOARCH=arm", "GOARM=7"}},
	} {
		t.Run(board.debArch, func(t *testing.T) {
			run(t, repoRoot, "make", "deb", "DEB_ARCH="+board.debArch)
			debs, _ := filepath.Glob(filepath.Join(repoRoot, "out", "burrow_*_"+board.debArch+".deb"))
			deb := newest(debs)
			if deb == "" {
				t.Fatalf("make deb DEB_ARCH=%s made no out/burrow_*_%s.deb", board.debArch, board.debArch)
			}
			deb, _ = filepath.Abs(deb)
			if arch := strings.TrimSpace(run(t, repoRoot, "dpkg-deb", "--field", deb, "Architecture")); arch != board.debArch {
				t.Errorf("%s says Architecture: %s", deb, arch)
			}
			root := t.TempDir()
			run(t, repoRoot, "dpkg-deb", "--extract", deb, root)
			bin := filepath.Join(root, "usr/bin/burrow")
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Machine != board.machine {
				t.Errorf("usr/bin/burrow is for %v, want %v", f.Machine, board.machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("usr/bin/burrow is dynamically linked (%v): a board's libc may differ", p.Type)
				}
			}
			settings := run(t, repoRoot, "go", "version", "-m", bin)
			for _, want := range append(board.build, "CGO_ENABLED=0") {
				if !strings.Contains(settings, "\t"+want+"\n") {
					t.Errorf("usr/bin/burrow was not built with %s:\n%s", want, settings)
				}
			}
		})
	}
}

// newest is the most recently written of the files, "" for none: out/ may
// hold older packages.
func newest(files []string) string {
	var path string
	var newest time.Time
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && info.ModTime().After(newest) {
			path, newest = f, info.ModTime()
		}
	}
	return path
}
