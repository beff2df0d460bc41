package identity

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fileMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestLoadOrCreateNodeKey(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	key, created, err := LoadOrCreateNodeKey(stateDir, seededRand(1))
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v, want a new key", created, err)
	}
	if mode := fileMode(t, stateDir); mode != 0o700 {
		t.Errorf("state directory mode %04o, want 0700", mode)
	}
	keyPath := filepath.Join(stateDir, NodeKeyFile)
	if mode := fileMode(t, keyPath); mode != 0o600 {
		t.Errorf("key file mode %04o, want 0600", mode)
	}
	again, created, err := LoadOrCreateNodeKey(stateDir, seededRand(2))
	if err != nil || created || again != key {
		t.Fatalf("second call: created=%v err=%v same=%v, want the existing key", created, err, again == key)
	}
	loaded, err := LoadNodeKey(keyPath)
	if err != nil || loaded != key {
		t.Fatalf("LoadNodeKey: %v, same=%v", err, loaded == key)
	}
	assertNoTempFiles(t, stateDir)
}

func TestLoadNodeKeyRefusesLooseMode(t *testing.T) {
	stateDir := t.TempDir()
	if _, _, err := LoadOrCreateNodeKey(stateDir, seededRand(1)); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(stateDir, NodeKeyFile)
	before, _ := os.ReadFile(keyPath)
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadNodeKey(keyPath)
	if err == nil || !strings.Contains(err.Error(), keyPath) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("LoadNodeKey of a 0644 file: %v, want an error naming the file and the chmod fix", err)
	}
	if _, _, err := LoadOrCreateNodeKey(stateDir, seededRand(2)); err == nil {
		t.Fatal("LoadOrCreateNodeKey accepted a 0644 key file")
	}
	if after, _ := os.ReadFile(keyPath); string(after) != string(before) {
		t.Fatal("a refused key file was replaced")
	}
}

func TestLoadNodeKeyRejectsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), NodeKeyFile)
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadNodeKey(path); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), path) {
		t.Fatalf("LoadNodeKey of garbage: %v, want ErrMalformed naming the file", err)
	}
	if _, err := LoadNodeKey(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadNodeKey of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestCASaveAndLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	ca := newTestCA(t, "home", 1)
	if err := ca.Save(dir); err != nil {
		t.Fatalf("Save: %v", err)
	}
	if mode := fileMode(t, filepath.Join(dir, CAKeyFile)); mode != 0o600 {
		t.Errorf("ca.key mode %04o, want 0600", mode)
	}
	if mode := fileMode(t, filepath.Join(dir, CACertFile)); mode != 0o644 {
		t.Errorf("ca.crt mode %04o, want 0644", mode)
	}
	loaded, err := LoadCA(dir)
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	if !reflect.DeepEqual(loaded, ca) {
		t.Fatalf("LoadCA gave %+v, want %+v", loaded, ca)
	}
	public, err := LoadCAPublic(filepath.Join(dir, CACertFile))
	if err != nil || public.Private != nil || !public.Public.Equal(ca.Public) || public.Network != "home" {
		t.Fatalf("LoadCAPublic: %+v, %v", public, err)
	}
	assertNoTempFiles(t, dir)
}

func TestCASaveDoesNotOverwrite(t *testing.T) {
	dir := t.TempDir()
	first := newTestCA(t, "home", 1)
	if err := first.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := newTestCA(t, "home", 2).Save(dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Save: %v, want fs.ErrExist", err)
	}
	if loaded, err := LoadCA(dir); err != nil || !loaded.Public.Equal(first.Public) {
		t.Fatalf("after a refused Save the directory holds another CA (%v)", err)
	}

	onlyCert := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyCert, CACertFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := first.Save(onlyCert); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Save over a lone ca.crt: %v, want fs.ErrExist", err)
	}
	if _, err := os.Stat(filepath.Join(onlyCert, CAKeyFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused Save still wrote ca.key")
	}
}

func TestLoadCARefusesForeignOrLooseKey(t *testing.T) {
	dir, otherDir := t.TempDir(), t.TempDir()
	if err := newTestCA(t, "home", 1).Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := newTestCA(t, "home", 2).Save(otherDir); err != nil {
		t.Fatal(err)
	}
	foreign, _ := os.ReadFile(filepath.Join(otherDir, CAKeyFile))
	keyPath := filepath.Join(dir, CAKeyFile)
	if err := os.WriteFile(keyPath, foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(dir); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Fatalf("LoadCA with another CA's key: %v", err)
	}
	if err := os.Chmod(filepath.Join(otherDir, CAKeyFile), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(otherDir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("LoadCA with a 0640 key: %v", err)
	}
}

func TestCertificateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "laptop.crt")
	ca := newTestCA(t, "home", 1)
	first := mustSign(t, ca, testTemplate(t))
	if err := SaveCertificate(path, first); err != nil {
		t.Fatal(err)
	}
	if mode := fileMode(t, path); mode != 0o600 {
		t.Errorf("certificate file mode %04o, want 0600", mode)
	}
	loaded, err := LoadCertificate(path)
	if err != nil || !reflect.DeepEqual(loaded, first) {
		t.Fatalf("LoadCertificate: %+v, %v", loaded, err)
	}

	renamed := testTemplate(t)
	renamed.Name = "desktop"
	if err := SaveCertificate(path, mustSign(t, ca, renamed)); err != nil {
		t.Fatalf("replacing a certificate: %v", err)
	}
	if loaded, err := LoadCertificate(path); err != nil || loaded.Name != "desktop" {
		t.Fatalf("after replacing: %+v, %v", loaded, err)
	}
	assertNoTempFiles(t, dir)

	if err := os.WriteFile(path, []byte("-----BEGIN BURROW CERTIFICATE-----\nAAAA\n-----END BURROW CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCertificate(path); !errors.Is(err, ErrMalformed) {
		t.Fatalf("LoadCertificate of garbage: %v, want ErrMalformed", err)
	}
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestWriteFileAtomicWithoutReplaceKeepsExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := writeFileAtomic(path, []byte("first"), 0o600, false); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(path, []byte("second"), 0o600, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second write: %v, want fs.ErrExist", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "first" {
		t.Fatalf("file holds %q, want the first write", data)
	}
	assertNoTempFiles(t, filepath.Dir(path))
}
