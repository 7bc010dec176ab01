package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// probeCmd asks a running hub process's ops listener whether it is alive
// or ready: container healthchecks use it, as the image has no shell or
// curl.
func probeCmd() *cobra.Command {
	var addr string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "probe healthz|readyz",
		Short: "Exit 0 when the hub process at --ops-addr answers /healthz (alive) or /readyz (ready) with 200, else 1 (for container healthchecks)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "healthz" && args[0] != "readyz" {
				return fmt.Errorf("probe healthz or readyz, not %q", args[0])
			}
			if addr == "" {
				return fmt.Errorf("no ops listener to probe: set HUB_OPS_ADDR (or --ops-addr)")
			}
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return fmt.Errorf("HUB_OPS_ADDR %q: %w", addr, err)
			}
			if host == "" || host == "0.0.0.0" || host == "::" {
				host = "127.0.0.1" // a listener on every address answers on loopback
			}
			client := &http.Client{Timeout: timeout}
			url := "http://" + net.JoinHostPort(host, port) + "/" + args[0]
			r, err := client.Get(url)
			if err != nil {
				return err
			}
			defer r.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
			if r.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s %s", url, r.Status, strings.TrimSpace(string(body)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "ops-addr", env("HUB_OPS_ADDR", ""), "the ops listener of the process to probe [HUB_OPS_ADDR]")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}
