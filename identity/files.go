package identity

import (
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File names inside a node's state directory and a CA directory.
const (
	NodeKeyFile = "node.key"
	CAKeyFile   = "ca.key"
	CACertFile  = "ca.crt"
)

const (
	certPEMType = "BURROW CERTIFICATE"
	secretMode  = 0o600
	// caCertMode lets anyone read ca.crt: it holds only public data.
	caCertMode = 0o644
	// maxFileSize bounds what the loaders read; every file is far smaller.
	maxFileSize = 64 << 10
)

// LoadNodeKey reads a node key file, refusing one that group or others can
// access.
func LoadNodeKey(path string) (NodeKey, error) {
	data, err := readSecretFile(path)
	if err != nil {
		return NodeKey{}, err
	}
	key, err := decodeNodeKey(data)
	if err != nil {
		return NodeKey{}, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// LoadOrCreateNodeKey loads stateDir/node.key, or generates and saves a new
// key when there is none, creating stateDir (mode 0700) if needed.
func LoadOrCreateNodeKey(stateDir string, rand io.Reader) (key NodeKey, created bool, err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return NodeKey{}, false, fmt.Errorf("identity: creating state directory: %w", err)
	}
	path := filepath.Join(stateDir, NodeKeyFile)
	key, err = LoadNodeKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	if key, err = GenerateNodeKey(rand); err != nil {
		return NodeKey{}, false, err
	}
	err = writeFileAtomic(path, encodeNodeKey(key), secretMode, false)
	if errors.Is(err, fs.ErrExist) {
		// Another process created the key first; use theirs.
		key, err = LoadNodeKey(path)
		return key, false, err
	}
	if err != nil {
		return NodeKey{}, false, err
	}
	return key, true, nil
}

// Save writes ca.key and ca.crt into dir, creating dir (mode 0700) if
// needed. It refuses, with an error wrapping fs.ErrExist, when either file
// exists: replacing a CA orphans every certificate it signed.
func (ca *CA) Save(dir string) error {
	if len(ca.Private) != ed25519.PrivateKeySize {
		return errors.New("identity: saving a CA needs its private key")
	}
	caCert, err := ca.MarshalPublic()
	if err != nil {
		return err
	}
	keyPath, certPath := filepath.Join(dir, CAKeyFile), filepath.Join(dir, CACertFile)
	for _, path := range []string{keyPath, certPath} {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("identity: %s already exists: %w", path, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("identity: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("identity: creating CA directory: %w", err)
	}
	if err := writeFileAtomic(keyPath, encodeCAKey(ca.Private), secretMode, false); err != nil {
		return err
	}
	return writeFileAtomic(certPath, caCert, caCertMode, false)
}

// LoadCA reads the CA, private key included, from a directory written by
// Save.
func LoadCA(dir string) (*CA, error) {
	ca, err := LoadCAPublic(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, CAKeyFile)
	data, err := readSecretFile(keyPath)
	if err != nil {
		return nil, err
	}
	private, err := decodeCAKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	if !ca.Public.Equal(private.Public()) {
		return nil, fmt.Errorf("identity: %s does not belong to %s", keyPath, filepath.Join(dir, CACertFile))
	}
	ca.Private = private
	return ca, nil
}

// LoadCAPublic reads a CA certificate (ca.crt), as nodes do.
func LoadCAPublic(path string) (*CA, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	ca, err := ParseCAPublic(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ca, nil
}

// SaveCertificate writes c to path (mode 0600), replacing any file there
// atomically.
func SaveCertificate(path string, c *Certificate) error {
	data := pem.EncodeToMemory(&pem.Block{Type: certPEMType, Bytes: c.Marshal()})
	return writeFileAtomic(path, data, secretMode, true)
}

// LoadCertificate reads a certificate file written by SaveCertificate. It
// does not verify it; see CA.Verify.
func LoadCertificate(path string) (*Certificate, error) {
	return loadPEMFile(path, certPEMType, ParseCertificate)
}

// loadPEMFile reads the file at path, which must hold one PEM block of
// blockType, and parses the block's contents.
func loadPEMFile[T any](path, blockType string, parse func([]byte) (T, error)) (T, error) {
	var none T
	data, err := readFile(path)
	if err != nil {
		return none, err
	}
	raw, err := decodePEM(data, blockType)
	if err != nil {
		return none, fmt.Errorf("%s: %w", path, err)
	}
	v, err := parse(raw)
	if err != nil {
		return none, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readSecretFile reads a private key file, refusing one whose mode lets
// anyone but the owner in: such a key may already be compromised, and
// loading it silently would hide that.
func readSecretFile(path string) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("identity: private key %s is accessible by group or others (mode %04o); restrict it with: chmod 600 %s",
			path, perm, path)
	}
	return readFile(path)
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("identity: reading %s: %w", path, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrMalformed, path, maxFileSize)
	}
	return data, nil
}

// writeFileAtomic makes data appear at path all at once, never half written:
// it writes a temporary file in the same directory, then renames it over
// path (replace) or hard-links it to path, which fails with fs.ErrExist
// when path exists.
func writeFileAtomic(path string, data []byte, perm os.FileMode, replace bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	// After a rename the temporary name is gone and this is a no-op; after
	// a link it drops the extra name.
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("identity: writing %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("identity: %s already exists: %w", path, fs.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("identity: %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a new directory entry durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("identity: syncing %s: %w", dir, err)
	}
	return nil
}
