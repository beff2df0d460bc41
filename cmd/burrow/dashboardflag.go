package main

import (
	"fmt"
	"log/slog"
	"net"

	"burrow/config"
	"burrow/dashboard"
	"burrow/runtime"
)

// dashboardEndpoint is the node's web dashboard (dashboard.listen). Its
// methods do nothing on a nil endpoint, which is what the dashboard off
// gives.
type dashboardEndpoint struct {
	ln  net.Listener
	srv *dashboard.Server
}

// listenDashboard binds dashboard.listen, if set, before the daemon
// starts, so that a taken port fails before the TAP and socket exist.
func listenDashboard(cfg *config.Config) (*dashboardEndpoint, error) {
	if cfg.Dashboard.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Dashboard.ListenAddr.String())
	if err != nil {
		return nil, fmt.Errorf("dashboard.listen in %s: %w (choose a free port, or leave it empty for no dashboard)", cfg.Path, err)
	}
	return &dashboardEndpoint{ln: ln}, nil
}

// serve starts answering with the daemon's status and overlay map.
func (e *dashboardEndpoint) serve(d *runtime.Daemon, log *slog.Logger) {
	if e != nil {
		e.srv = dashboard.Serve(e.ln, d.Status, d.Topology, log)
	}
}

func (e *dashboardEndpoint) close() {
	switch {
	case e == nil:
	case e.srv != nil:
		e.srv.Close()
	default:
		e.ln.Close()
	}
}
