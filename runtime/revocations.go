package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"burrow/identity"
	"burrow/node"
)

// RevokedDir is where, under the state directory, a node keeps the CA's
// revocations it knows, one file per revoked member: the ones it learned
// from its neighbours, and any an operator drops in, which the node
// honours and spreads within housekeepingEvery.
const RevokedDir = "revoked"

// revocationFileExt ends every revocation file's name.
const revocationFileExt = ".rev"

// revocations keeps the CA's revocations on disk for the core.
type revocations struct {
	dir   string
	trust *identity.Trust
	log   *slog.Logger
	seen  map[string]bool // file names already handed to the core
}

func newRevocations(stateDir string, trust *identity.Trust, log *slog.Logger) *revocations {
	return &revocations{dir: filepath.Join(stateDir, RevokedDir), trust: trust, log: log, seen: map[string]bool{}}
}

// config is the core's RevocationConfig: the kept revocations, checked
// against the CA, and a file for each one learned later.
func (r *revocations) config() node.RevocationConfig {
	return node.RevocationConfig{Verify: r.verify, Known: r.scan(), Learned: r.keep}
}

func (r *revocations) verify(raw []byte) (node.RevokedNode, error) {
	rev, err := r.trust.ParseAndVerifyRevocation(raw)
	if err != nil {
		return node.RevokedNode{}, err
	}
	return node.RevokedNode{ID: rev.Node, Name: rev.Name}, nil
}

// scan returns the revocations in files not seen before; a file that is
// not a revocation of this network is reported once and left alone.
func (r *revocations) scan() [][]byte {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn("cannot read the revocations", "dir", r.dir, "err", err)
		}
		return nil
	}
	var found [][]byte
	for _, e := range entries {
		name := e.Name()
		if r.seen[name] || !strings.HasSuffix(name, revocationFileExt) {
			continue
		}
		r.seen[name] = true
		path := filepath.Join(r.dir, name)
		rev, err := identity.LoadRevocation(path)
		if err == nil {
			err = r.trust.VerifyRevocation(rev)
		}
		if err != nil {
			r.log.Error("ignoring a revocation file", "path", path, "err", err)
			continue
		}
		found = append(found, rev.Marshal())
	}
	return found
}

// keep writes a revocation the core learned (and verified) to its file.
func (r *revocations) keep(raw []byte, revoked node.RevokedNode) {
	name := revoked.ID.String() + revocationFileExt
	r.seen[name] = true
	rev, err := identity.ParseRevocation(raw)
	if err == nil {
		err = os.MkdirAll(r.dir, 0o755)
	}
	if err == nil {
		err = identity.SaveRevocation(filepath.Join(r.dir, name), rev)
	}
	if err != nil {
		r.log.Error("cannot keep a revocation", "node_id", revoked.ID, "err", err)
	}
}

// Revoke hands a revocation to the core, which cuts the member off and
// spreads the revocation; fresh says it was new to this node.
func (d *Daemon) Revoke(raw []byte) (revoked node.RevokedNode, fresh bool, err error) {
	callErr := d.call(func() {
		revoked, fresh, err = d.node.Revoke(raw, time.Now())
	})
	if callErr != nil {
		return revoked, false, callErr
	}
	if err != nil {
		return revoked, false, fmt.Errorf("revocation refused: %w", err)
	}
	return revoked, fresh, nil
}
