package runtime

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"burrow/nid"
	"burrow/overlay"
)

// peersFile keeps the nodes this one knew, so that after a restart it finds
// its ring even when its bootstrap is down or it has none.
const peersFile = "peers.json"

type rememberedPeer struct {
	ID        string   `json:"id"`
	Endpoints []string `json:"endpoints"`
}

func loadRemembered(stateDir string) []overlay.Info {
	data, err := os.ReadFile(filepath.Join(stateDir, peersFile))
	if err != nil {
		return nil
	}
	var saved []rememberedPeer
	if json.Unmarshal(data, &saved) != nil {
		return nil
	}
	var out []overlay.Info
	for _, p := range saved {
		id, err := nid.Parse(p.ID)
		if err != nil {
			continue
		}
		in := overlay.Info{ID: id}
		for _, e := range p.Endpoints {
			if ap, err := netip.ParseAddrPort(e); err == nil {
				in.Endpoints = append(in.Endpoints, ap)
			}
		}
		if len(in.Endpoints) > 0 {
			out = append(out, in)
		}
	}
	return out
}

// saveRemembered writes the list atomically; it returns whether it wrote.
func saveRemembered(stateDir string, peers []overlay.Info, last []overlay.Info) bool {
	if slices.EqualFunc(peers, last, func(a, b overlay.Info) bool { return a.ID == b.ID && slices.Equal(a.Endpoints, b.Endpoints) }) {
		return false
	}
	saved := make([]rememberedPeer, 0, len(peers))
	for _, p := range peers {
		rp := rememberedPeer{ID: p.ID.String()}
		for _, e := range p.Endpoints {
			rp.Endpoints = append(rp.Endpoints, e.String())
		}
		saved = append(saved, rp)
	}
	data, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return false
	}
	tmp := filepath.Join(stateDir, peersFile+".tmp")
	if os.WriteFile(tmp, data, 0o600) != nil {
		return false
	}
	return os.Rename(tmp, filepath.Join(stateDir, peersFile)) == nil
}
