package runtime

import (
	"errors"
	"fmt"
	"time"

	"burrow/config"
	"burrow/runtime/publish"
)

// ReloadPublications puts the publish section of cfg (the configuration
// file, read again on SIGHUP) in force: listeners of new publications
// open, those of publications no longer listed close with every
// connection they carry. When any file is bad or any listener cannot
// open, the error names it and nothing changes.
func (d *Daemon) ReloadPublications(cfg *config.Config) error {
	now := time.Now()
	pubs := make([]publish.Sourced, 0, len(cfg.Publish))
	for i, path := range cfg.Publish {
		source := fmt.Sprintf("publish[%d] %s", i, path)
		p, err := d.gateway.Load(path, now)
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		pubs = append(pubs, publish.Sourced{Publication: p, Source: source})
	}
	return d.gateway.SetConfigured(pubs)
}

// Publish exposes a publication handed over the control socket until it
// is revoked, expires or the daemon stops.
func (d *Daemon) Publish(raw []byte) (publish.Status, error) {
	if d.dev == nil {
		return publish.Status{}, errors.New("this node has no TAP (tap.enabled is false), so it cannot reach the services of members: it cannot be a gateway")
	}
	return d.gateway.Add(raw, time.Now())
}

// Unpublish honours a publication's revocation.
func (d *Daemon) Unpublish(raw []byte) (*publish.Status, error) {
	return d.gateway.Revoke(raw)
}
