package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"burrow/config"
	"burrow/runtime"
)

func init() {
	var path string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a node in the foreground",
		Long: `Run a burrow node in the foreground until SIGINT or SIGTERM.

The node opens its UDP socket and TAP device, links to the configured peers
and switches frames. On shutdown it removes the TAP device together with its
addresses and the control socket. SIGHUP reads the configuration file again
and puts its firewall and publish sections in force, keeping every link
(a publication no longer listed closes with its connections); other changes
need a restart. Needs root (or CAP_NET_ADMIN).`,
		Example: `  burrow up -c /etc/burrow/burrow.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			return runDaemon(cfg)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "/etc/burrow/burrow.yaml", "configuration file")
	rootCmd.AddCommand(cmd)
}

// runDaemon runs a node until SIGINT or SIGTERM.
func runDaemon(cfg *config.Config) error {
	log := newLogger(cfg.Log)
	metricsEndpoint, err := listenMetrics(cfg)
	if err != nil {
		return err
	}
	defer metricsEndpoint.close()
	dashboardEndpoint, err := listenDashboard(cfg)
	if err != nil {
		return err
	}
	defer dashboardEndpoint.close()
	d, err := runtime.Start(cfg, log)
	if err != nil {
		return err
	}
	metricsEndpoint.serve(d, log)
	dashboardEndpoint.serve(d, log)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := waitChan(d)
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				reload(d, cfg.Path, log)
				continue
			}
			log.Info("signal received", "signal", sig.String())
			return d.Close()
		case <-done:
			return d.Wait()
		}
	}
}

// reload reads the configuration file again and puts its firewall and
// publish sections in force, each whole or not at all; a file that does
// not load changes nothing.
func reload(d *runtime.Daemon, path string, log *slog.Logger) {
	cfg, err := config.Load(path)
	if err != nil {
		log.Error("SIGHUP: nothing changed", "config", path, "err", err)
		return
	}
	if err := d.ReloadFirewall(cfg); err != nil {
		log.Error("SIGHUP: the firewall is unchanged", "config", path, "err", err)
	}
	if err := d.ReloadPublications(cfg); err != nil {
		log.Error("SIGHUP: the publications are unchanged", "config", path, "err", err)
	}
}

func waitChan(d *runtime.Daemon) <-chan struct{} {
	ch := make(chan struct{})
	go func() { d.Wait(); close(ch) }()
	return ch
}

func newLogger(c config.Log) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
