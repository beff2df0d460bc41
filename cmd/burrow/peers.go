package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/node"
	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newPeersCmd()) }

// socketFlags choose the running node to ask: --socket, or --instance for
// a network set up with 'burrow init/join --instance'.
type socketFlags struct{ socket, instance string }

func (s *socketFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&s.socket, "socket", config.DefaultControlSocket, "control socket of the node")
	cmd.Flags().StringVar(&s.instance, "instance", "", "ask the node of this instance (its socket is /run/burrow/NAME.sock)")
}

// path is the control socket to ask.
func (s socketFlags) path() string {
	if s.instance != "" {
		return filepath.Join(filepath.Dir(config.DefaultControlSocket), s.instance+".sock")
	}
	return s.socket
}

func (s socketFlags) status() (*runtime.Status, error) {
	resp, err := runtime.Query(s.path(), runtime.Request{Command: "status"})
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

func newPeersCmd() *cobra.Command {
	var (
		sock   socketFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "peers [--json]",
		Short: "List the running node's links: peer, kind, path, RTT, traffic",
		Long: `Ask the running node for its links, one row each:

  PEER       the peer's name from its certificate
  NODE ID    the first 8 hex digits of its node ID
  KIND       why this node keeps the link: successor, long-distance,
             on-demand, static (configured in peers) or bootstrap; when only
             the peer wants the link, its reasons followed by "(peer's)"
  STATE      up or connecting
  PATH       direct, relay (through a member), turn or websocket
  ENDPOINT   where the peer's datagrams come from
  RTT        round trip of the last handshake, "-" when not measured
  RX, TX     bytes received from and sent to the peer
  HANDSHAKE  how long ago the current session keys were made`,
		Example: `  burrow peers
  burrow peers --json | jq '.[] | select(.path != "direct") | .peer'
  burrow peers --instance lab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := sock.status()
			if err != nil {
				return err
			}
			now := time.Now()
			rows := peerRows(st, now)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			printPeers(cmd.OutOrStdout(), rows, now)
			return nil
		},
	}
	sock.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}

// peerRow is one link as 'burrow peers' shows it.
type peerRow struct {
	Peer      string   `json:"peer"`
	NodeID    string   `json:"node_id"`
	Kinds     []string `json:"kinds"`      // this node's reasons for the link
	PeerKinds []string `json:"peer_kinds"` // the peer's reasons
	State     string   `json:"state"`
	Path      string   `json:"path"`
	Endpoint  string   `json:"endpoint"`
	// RTTms is absent when the link has no measurement yet.
	RTTms         *float64  `json:"rtt_ms,omitempty"`
	RxBytes       uint64    `json:"rx_bytes"`
	TxBytes       uint64    `json:"tx_bytes"`
	RxPackets     uint64    `json:"rx_packets"`
	TxPackets     uint64    `json:"tx_packets"`
	LastHandshake time.Time `json:"last_handshake,omitzero"`
	// HandshakeAge is seconds since LastHandshake, absent without one.
	HandshakeAge *float64 `json:"handshake_age_s,omitempty"`
	// Punch is the birthday probing toward the peer, when there was any.
	Punch *node.PunchStatus `json:"punch,omitempty"`
	// CertNotAfter is when the peer's certificate expires.
	CertNotAfter time.Time `json:"cert_not_after,omitzero"`
}

// peerRows joins each link with the overlay's reasons for it.
func peerRows(st *runtime.Status, now time.Time) []peerRow {
	reasons := map[string]node.OverlayLink{}
	for _, ol := range st.Overlay.Links {
		reasons[ol.Peer] = ol
	}
	rows := []peerRow{}
	for _, l := range st.Links {
		ol := reasons[l.NodeID]
		r := peerRow{
			Peer: l.Peer, NodeID: l.NodeID, Kinds: nonNil(ol.Local), PeerKinds: nonNil(ol.Remote),
			State: l.State, Path: l.Path, Endpoint: l.Endpoint,
			RxBytes: l.RxBytes, TxBytes: l.TxBytes, RxPackets: l.RxPackets, TxPackets: l.TxPackets,
			LastHandshake: l.LastHandshake, Punch: l.Punch, CertNotAfter: l.CertNotAfter,
		}
		if l.RTT > 0 {
			rtt := l.RTT
			r.RTTms = &rtt
		}
		if !l.LastHandshake.IsZero() {
			age := now.Sub(l.LastHandshake).Seconds()
			r.HandshakeAge = &age
		}
		rows = append(rows, r)
	}
	return rows
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// pathText is the PATH column: the path, and for one that birthday
// probing opened, how long that took.
func (r peerRow) pathText() string {
	if p := r.Punch; p != nil && p.DirectAfter > 0 && r.Path == "direct" {
		return fmt.Sprintf("direct (birthday probing, %.2f s)", p.DirectAfter/1000)
	}
	return orDash(r.Path)
}

// kindText is the KIND column: this node's reasons, else the peer's.
func (r peerRow) kindText() string {
	switch {
	case len(r.Kinds) > 0:
		return strings.Join(r.Kinds, ",")
	case len(r.PeerKinds) > 0:
		return strings.Join(r.PeerKinds, ",") + " (peer's)"
	}
	return "-"
}

func printPeers(w io.Writer, rows []peerRow, now time.Time) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tNODE ID\tKIND\tSTATE\tPATH\tENDPOINT\tRTT\tRX\tTX\tHANDSHAKE")
	for _, r := range rows {
		rtt, hs := "-", "-"
		if r.RTTms != nil {
			rtt = fmt.Sprintf("%.2f ms", *r.RTTms)
		}
		if r.HandshakeAge != nil {
			hs = (time.Duration(*r.HandshakeAge * float64(time.Second))).Round(time.Second).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(r.Peer), shortID(r.NodeID), r.kindText(), r.State,
			r.pathText(), orDash(r.Endpoint), rtt, bytesHuman(r.RxBytes), bytesHuman(r.TxBytes), hs)
	}
	tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(w, "no links yet: check overlay.bootstrap or peers in the configuration, and 'burrow status' for dials")
	}
	for _, r := range rows {
		if !r.CertNotAfter.IsZero() && now.Add(runtime.CertificateWarning).After(r.CertNotAfter) {
			fmt.Fprintf(w, "%s's certificate expires on %s, in %d days: its links end then; sign it a new one where the CA key is (burrow cert sign) and install it on that node\n",
				orDash(r.Peer), r.CertNotAfter.Format(time.DateOnly), int(r.CertNotAfter.Sub(now).Hours()/24))
		}
	}
}

// shortID is the first 8 hex digits of a node ID, the way status and
// logs show it.
func shortID(id string) string {
	if len(id) < 8 {
		return orDash(id)
	}
	return id[:8]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
