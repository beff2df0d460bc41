package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"burrow/runtime"
)

func init() { rootCmd.AddCommand(newTopologyCmd()) }

func newTopologyCmd() *cobra.Command {
	var (
		sock   socketFlags
		format string
	)
	cmd := &cobra.Command{
		Use:   "topology [--format dot|json|svg]",
		Short: "Show the running node's place in the overlay as a graph",
		Long: `Ask the running node for its view of the overlay: this node, each link with
the reasons either end keeps it for (successor, long-distance, on-demand,
static, bootstrap), its path, and the node's ring neighbours — predecessor
and successors — whether or not it has a link to them yet.

--format dot prints Graphviz source, json the same data for scripts, and
svg a picture rendered by Graphviz's dot, which must then be installed.
In the picture, solid lines are successor links, dashed ones long-distance,
dotted ones on-demand and grey ones static or bootstrap; arrows mark the
ring order (predecessor → this node → successors).`,
		Example: `  burrow topology --format svg > node.svg
  burrow topology --format dot | dot -Tpng > node.png
  burrow topology --format json | jq .successors`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "dot" && format != "json" && format != "svg" {
				return fmt.Errorf("--format %q is not one of dot, json, svg", format)
			}
			var dot string
			if format == "svg" {
				var err error
				if dot, err = exec.LookPath("dot"); err != nil {
					return errors.New("--format svg needs Graphviz's dot, which is not installed here: install it (apt-get install graphviz), or print --format dot and render it elsewhere")
				}
			}
			st, err := sock.status()
			if err != nil {
				return err
			}
			topo := newTopology(st, time.Now())
			out := cmd.OutOrStdout()
			switch format {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(topo)
			case "dot":
				_, err := io.WriteString(out, topo.dot())
				return err
			}
			return renderSVG(dot, topo.dot(), out)
		},
	}
	sock.register(cmd)
	cmd.Flags().StringVar(&format, "format", "dot", "output format: dot, json or svg")
	return cmd
}

// topology is one node's view of the overlay.
type topology struct {
	Name         string    `json:"name"`
	NodeID       string    `json:"node_id"`
	Network      string    `json:"network"`
	Joined       bool      `json:"joined"`
	SizeEstimate float64   `json:"size_estimate"`
	Predecessor  string    `json:"predecessor,omitempty"`
	Successors   []string  `json:"successors"`
	Links        []peerRow `json:"links"`
}

func newTopology(st *runtime.Status, now time.Time) topology {
	return topology{
		Name: st.Name, NodeID: st.NodeID, Network: st.Network,
		Joined: st.Overlay.Joined, SizeEstimate: st.Overlay.SizeEstimate,
		Predecessor: st.Overlay.Predecessor, Successors: nonNil(st.Overlay.Successors),
		Links: peerRows(st, now),
	}
}

// edgeStyle draws a link by its most structural reason.
func edgeStyle(kinds []string) string {
	for _, k := range kinds {
		switch k {
		case "successor":
			return "style=bold"
		case "long-distance":
			return "style=dashed"
		case "on-demand":
			return "style=dotted"
		}
	}
	return `color="gray50"`
}

// dot renders the view as Graphviz source: an undirected-looking edge per
// link, labelled with the reasons of both ends, and arrows for the ring.
func (t topology) dot() string {
	var b strings.Builder
	names := map[string]string{t.NodeID: t.Name}
	for _, l := range t.Links {
		names[l.NodeID] = l.Peer
	}
	label := func(id string) string {
		if n := names[id]; n != "" {
			return n + `\n` + shortID(id)
		}
		return shortID(id)
	}
	fmt.Fprintf(&b, "digraph burrow {\n")
	fmt.Fprintf(&b, "  label=%s;\n", dotQuote(fmt.Sprintf("network %s, seen from %s; about %.0f nodes", t.Network, t.Name, t.SizeEstimate)))
	fmt.Fprintf(&b, "  node [shape=box, style=rounded, fontname=\"sans-serif\"];\n")
	fmt.Fprintf(&b, "  edge [fontname=\"sans-serif\", fontsize=10];\n")
	fmt.Fprintf(&b, "  %s [label=%s, style=\"rounded,bold,filled\", fillcolor=\"lightblue\"];\n", dotQuote(t.NodeID), dotQuote(label(t.NodeID)))
	declared := map[string]bool{t.NodeID: true}
	declare := func(id, extra string) {
		if id == "" || declared[id] {
			return
		}
		declared[id] = true
		fmt.Fprintf(&b, "  %s [label=%s%s];\n", dotQuote(id), dotQuote(label(id)), extra)
	}
	for _, l := range t.Links {
		declare(l.NodeID, "")
		kinds := l.kindText()
		if len(l.Kinds) > 0 && len(l.PeerKinds) > 0 {
			kinds += " / " + strings.Join(l.PeerKinds, ",")
		}
		edgeLabel := kinds
		if l.Path != "" && l.Path != "direct" {
			edgeLabel += " via " + l.Path
		}
		if l.State != "up" {
			edgeLabel += " (" + l.State + ")"
		}
		fmt.Fprintf(&b, "  %s -> %s [dir=none, label=%s, %s];\n", dotQuote(t.NodeID), dotQuote(l.NodeID), dotQuote(edgeLabel), edgeStyle(l.Kinds))
	}
	// The ring neighbours, linked or not: the arrows give the ring order.
	if t.Predecessor != "" {
		declare(t.Predecessor, ", style=\"rounded,dashed\"")
		fmt.Fprintf(&b, "  %s -> %s [label=\"predecessor\", color=\"darkgreen\", constraint=false];\n", dotQuote(t.Predecessor), dotQuote(t.NodeID))
	}
	prev := t.NodeID
	for i, s := range t.Successors {
		declare(s, ", style=\"rounded,dashed\"")
		fmt.Fprintf(&b, "  %s -> %s [label=\"successor %d\", color=\"darkgreen\", constraint=false];\n", dotQuote(prev), dotQuote(s), i+1)
		prev = s
	}
	b.WriteString("}\n")
	return b.String()
}

// dotQuote makes a DOT string literal; "\n" inside stays a line break.
func dotQuote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `"`, `\"`), "\n", `\n`) + `"`
}

func renderSVG(dotPath, source string, out io.Writer) error {
	cmd := exec.Command(dotPath, "-Tsvg")
	cmd.Stdin = strings.NewReader(source)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("dot -Tsvg failed: %v: %s", err, strconv.Quote(strings.TrimSpace(stderr.String())))
	}
	return nil
}
