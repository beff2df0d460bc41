package main

import (
	"fmt"
	"log/slog"
	"net"

	"burrow/config"
	"burrow/metrics"
	"burrow/runtime"
)

// metricsEndpoint is the node's /metrics server (metrics.listen). Its
// methods do nothing on a nil endpoint, which is what metrics off gives.
type metricsEndpoint struct {
	ln  net.Listener
	srv *metrics.Server
}

// listenMetrics binds metrics.listen, if set, before the daemon starts, so
// that a taken port fails before the TAP and socket exist.
func listenMetrics(cfg *config.Config) (*metricsEndpoint, error) {
	if cfg.Metrics.Listen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Metrics.ListenAddr.String())
	if err != nil {
		return nil, fmt.Errorf("metrics.listen in %s: %w (choose a free port, or leave it empty for no metrics)", cfg.Path, err)
	}
	return &metricsEndpoint{ln: ln}, nil
}

// serve starts answering scrapes with the daemon's status.
func (m *metricsEndpoint) serve(d *runtime.Daemon, log *slog.Logger) {
	if m != nil {
		m.srv = metrics.Serve(m.ln, d.Status, log)
	}
}

func (m *metricsEndpoint) close() {
	switch {
	case m == nil:
	case m.srv != nil:
		m.srv.Close()
	default:
		m.ln.Close()
	}
}
