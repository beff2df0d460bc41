package runtime

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"burrow/config"
	"burrow/identity"
	"burrow/runtime/publish"
)

// ReloadPublications puts the publish section of cfg (the configuration
// file, read again on SIGHUP) in force: listeners of new publications
// open, those of publications no longer listed close with every
// connection they carry. Expired and revoked publications are left out
// with a warning. When any other file is bad or any listener cannot open,
// the error names it and nothing changes.
func (d *Daemon) ReloadPublications(cfg *config.Config) error {
	now := time.Now()
	pubs := make([]publish.Sourced, 0, len(cfg.Publish))
	for i, path := range cfg.Publish {
		source := fmt.Sprintf("publish[%d] %s", i, path)
		p, err := d.gateway.Load(path, now)
		if errors.Is(err, identity.ErrPublicationExpired) {
			// Its time ran out while listed: no reason to stop the node.
			d.log.Warn("not exposing an expired publication; remove it from publish:", "source", source, "err", err)
			continue
		}
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
	return d.gateway.Add(raw, time.Now())
}

// Unpublish honours a publication's revocation.
func (d *Daemon) Unpublish(raw []byte) (*publish.Status, error) {
	return d.gateway.Revoke(raw)
}

// insideNetwork says why a gateway would not reach a service at addr
// through its TAP: no TAP, an address outside the prefixes of the TAP (or
// of its bridge, or leased there by DHCP), or this node's own address.
// Nil when it would.
func (d *Daemon) insideNetwork(addr netip.Addr) error {
	if d.dev == nil {
		return errors.New("this node has no TAP (tap.enabled is false), so it cannot reach members' services: it cannot be a gateway")
	}
	name := d.dev.Name()
	if d.cfg.TAP.Bridge != "" {
		name = d.cfg.TAP.Bridge
	}
	prefixes := slices.Clone(d.addrs)
	if ifc, err := net.InterfaceByName(name); err == nil {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && !slices.Contains(prefixes, p) {
				prefixes = append(prefixes, p)
			}
		}
	}
	for _, p := range prefixes {
		if p.Addr() == addr.Unmap() {
			return fmt.Errorf("the service address %s is this node's own: a gateway publishes other members' services", addr)
		}
	}
	for _, p := range prefixes {
		if p.Contains(addr.Unmap()) && !p.Addr().IsLinkLocalUnicast() {
			return nil
		}
	}
	return fmt.Errorf("the service address %s is outside the network as this node's %s sees it (%v): a gateway reaches members' services only through the network", addr, name, prefixes)
}
