// Package dashboard serves a live web page of a running burrow node: the
// overlay ring drawn with the nodes on a circle in node-ID order, links as
// chords colored by why they exist, and the node's status beside it. The
// page is one self-contained HTML file (inline script and SVG, no external
// resources); it polls the JSON endpoints of the same server.
//
//	GET /              the page
//	GET /api/status    runtime.Status of the node
//	GET /api/topology  node.TopologyView: the overlay as the node's crawl knows it
package dashboard

import (
	_ "embed"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"burrow/node"
	"burrow/runtime"
)

// StatusFunc returns the node's status.
type StatusFunc func() (runtime.Status, error)

// TopologyFunc returns the overlay map; asking keeps the node's crawl going.
type TopologyFunc func() (node.TopologyView, error)

//go:embed index.html
var page []byte

// contentPolicy lets the page run its inline script and talk to this server
// only: it loads nothing from anywhere else.
const contentPolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
	"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page and its JSON endpoints.
func Handler(status StatusFunc, topology TopologyFunc) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", contentPolicy)
		w.Write(page)
	})
	mux.HandleFunc("GET /api/status", func(w http.ResponseWriter, r *http.Request) {
		st, err := status()
		writeJSON(w, st, err)
	})
	mux.HandleFunc("GET /api/topology", func(w http.ResponseWriter, r *http.Request) {
		v, err := topology()
		writeJSON(w, v, err)
	})
	return localOnly(mux)
}

// localOnly refuses requests whose Host is a DNS name other than localhost.
// The dashboard names every member of the network: without this check, a
// web page elsewhere could point its own name at this address (DNS
// rebinding) and read the JSON through the visitor's browser.
func localOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if _, err := netip.ParseAddr(host); err != nil && host != "localhost" && !strings.HasSuffix(host, ".localhost") {
			http.Error(w, "the burrow dashboard answers only requests addressed to an IP address or localhost", http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// writeJSON writes v, or a 502 with {"error": ...} when the node did not
// answer: the page shows that message and keeps polling.
func writeJSON(w http.ResponseWriter, v any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	json.NewEncoder(w).Encode(v)
}

// ControlSocket returns status and topology funcs that ask the daemon
// behind the control socket at path, for a dashboard served by another
// process (the demo serves the pages of daemons in network namespaces).
func ControlSocket(path string) (StatusFunc, TopologyFunc) {
	status := func() (runtime.Status, error) {
		resp, err := runtime.Query(path, runtime.Request{Command: "status"})
		if err != nil {
			return runtime.Status{}, err
		}
		if resp.Status == nil {
			return runtime.Status{}, errors.New("the node sent no status")
		}
		return *resp.Status, nil
	}
	topology := func() (node.TopologyView, error) {
		resp, err := runtime.Query(path, runtime.Request{Command: "topology"})
		if err != nil {
			return node.TopologyView{}, err
		}
		if resp.Topology == nil {
			return node.TopologyView{}, errors.New("the node sent no topology")
		}
		return *resp.Topology, nil
	}
	return status, topology
}

// Server serves the dashboard on a listener until closed.
type Server struct {
	srv  *http.Server
	done chan struct{}
}

// Serve serves the dashboard on ln, logging a failure.
func Serve(ln net.Listener, status StatusFunc, topology TopologyFunc, log *slog.Logger) *Server {
	s := &Server{
		srv:  &http.Server{Handler: Handler(status, topology), ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("dashboard server stopped", "err", err)
		}
	}()
	log.Info("serving the dashboard", "url", URL(ln.Addr()))
	return s
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// URL is the address of the page served at addr; an unspecified address
// (0.0.0.0, ::) is shown as loopback, where a browser on this machine
// reaches it.
func URL(addr net.Addr) string {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	ip := ap.Addr().Unmap()
	if ip.IsUnspecified() {
		if ip.Is4() {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		} else {
			ip = netip.IPv6Loopback()
		}
	}
	return "http://" + netip.AddrPortFrom(ip, ap.Port()).String() + "/"
}
