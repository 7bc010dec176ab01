package main

import (
	"encoding/json"
	"os"

	"github.com/spf13/cobra"

	"github.com/thehub/hub/activities/site"
)

// siteCmd holds the commands an operator runs on a site's own host.
func siteCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "site", Short: "Maintenance commands run on a site's host, on its storage root"}
	var root string
	var dryRun bool
	adopt := &cobra.Command{
		Use:   "adopt-records",
		Short: "Sign the migration records written before records were signed, so those files can be recalled (run once when upgrading)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := site.NewRoot(root)
			if err != nil {
				return err
			}
			res, err := site.AdoptRecords(cmd.Context(), r, dryRun)
			if err != nil {
				return err
			}
			return json.NewEncoder(os.Stdout).Encode(res)
		},
	}
	adopt.Flags().StringVar(&root, "root", env("HUB_ROOT", "/"), "the site's storage root, as given to its workers [HUB_ROOT]")
	adopt.Flags().BoolVar(&dryRun, "dry-run", false, "count the records, change nothing")
	cmd.AddCommand(adopt)
	return cmd
}
