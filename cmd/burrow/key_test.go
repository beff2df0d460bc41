package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"burrow/identity"
)

func TestKeyGenerateThenReuseAndShow(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	first := mustRunIdentityCLI(t, "key", "generate", "--state", state)
	if !strings.HasPrefix(first, "Created ") {
		t.Fatalf("first key generate did not say it created the key:\n%s", first)
	}
	key, err := identity.LoadNodeKey(filepath.Join(state, identity.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	wantLines := []string{
		"public key: " + base64.StdEncoding.EncodeToString(key.Public[:]),
		"node id:    " + key.ID().String(),
	}
	for _, want := range wantLines {
		if !strings.Contains(first, want) {
			t.Errorf("key generate output lacks %q:\n%s", want, first)
		}
	}

	second := mustRunIdentityCLI(t, "key", "generate", "--state", state)
	if !strings.HasPrefix(second, "Reusing ") || !strings.Contains(second, wantLines[0]) {
		t.Fatalf("second key generate did not reuse the key:\n%s", second)
	}
	shown := mustRunIdentityCLI(t, "key", "show", "--state", state)
	if shown != strings.Join(wantLines, "\n")+"\n" {
		t.Fatalf("key show printed:\n%s\nwant:\n%s", shown, strings.Join(wantLines, "\n"))
	}
}

func TestKeyShowErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none")
	_, err := runIdentityCLI(t, "key", "show", "--state", missing)
	if err == nil || !strings.Contains(err.Error(), "burrow key generate --state "+missing) {
		t.Errorf("key show without a key: %v, want advice to run key generate", err)
	}

	state := t.TempDir()
	mustRunIdentityCLI(t, "key", "generate", "--state", state)
	keyPath := filepath.Join(state, identity.NodeKeyFile)
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"show", "generate"} {
		_, err := runIdentityCLI(t, "key", sub, "--state", state)
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+keyPath) {
			t.Errorf("key %s with a 0644 key: %v, want the chmod fix", sub, err)
		}
	}
}
