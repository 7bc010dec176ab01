// Command hub is the multi-site storage workflow manager: one binary with
// the dev stack, the API servers, the workers and the migrations.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/thehub/hub/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Site workers report their version in heartbeats: without -ldflags,
	// report what the toolchain recorded rather than "dev".
	worker.Version = buildVersion()
	if err := rootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hub:", err)
		os.Exit(exitCode(err))
	}
}

// rootCmd is the hub command. Each command checks its configuration in
// PreRunE (flags and HUB_* variables, nothing started), which the compose
// test runs alone.
func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "hub",
		Short:         "Multi-site storage workflow manager",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(devCmd(), serveCmd(), workerCmd(), migrateCmd(), siteCmd(), versionCmd(), probeCmd(), clientCmd())
	return root
}

func devCmd() *cobra.Command {
	cfg := new(Config)
	var sites string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole stack in one process: embedded Temporal and its UI, sqlite, the APIs, the hub worker and one site worker per dev site",
		Args:  cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg.DevSites = devSites(sites)
			return cfg.finish(cmd.Flags())
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runDev(cmd.Context(), cfg) },
	}
	cfg.commonFlags(cmd.Flags())
	cfg.serveFlags(cmd.Flags())
	cfg.opsFlags(cmd.Flags(), "127.0.0.1:9090")
	cmd.Flags().StringVar(&cfg.TemporalUIAddr, "temporal-ui-addr", env("HUB_TEMPORAL_UI_ADDR", "127.0.0.1:8233"), "Temporal Web UI listen address [HUB_TEMPORAL_UI_ADDR]")
	cmd.Flags().StringVar(&sites, "dev-sites", env("HUB_DEV_SITES", "site1,site2"), "sites created at start, each with a site worker on queue default [HUB_DEV_SITES]")
	return cmd
}

func serveCmd() *cobra.Command {
	cfg := new(Config)
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Serve the hub API, the C+J API and its token server (production)",
		Args:    cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error { return cfg.finish(cmd.Flags()) },
		RunE:    func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), cfg) },
	}
	cfg.commonFlags(cmd.Flags())
	cfg.serveFlags(cmd.Flags())
	cfg.opsFlags(cmd.Flags(), "127.0.0.1:9090")
	return cmd
}

func workerCmd() *cobra.Command {
	cfg := new(Config)
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the hub worker (--hub) and/or a site worker (--site S --queue Q --root DIR)",
		Args:  cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.finish(cmd.Flags()); err != nil {
				return err
			}
			if !cfg.Hub && cfg.Site == "" {
				return fmt.Errorf("say which worker to run: --hub, or --site NAME (with --queue and --root)")
			}
			if cfg.Site != "" {
				return checkRootSetting(cfg.Root)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runWorker(cmd.Context(), cfg) },
	}
	cfg.commonFlags(cmd.Flags())
	cfg.siteFlags(cmd.Flags())
	cfg.opsFlags(cmd.Flags(), "")
	cmd.Flags().BoolVar(&cfg.Hub, "hub", env("HUB_WORKER_HUB", "") == "1", "run the hub worker: workflows and hub-database activities [HUB_WORKER_HUB=1]")
	return cmd
}
