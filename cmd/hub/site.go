package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
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
	cmd.AddCommand(adopt, auditRefsCmd(), restoreSpaceCmd())
	return cmd
}

// restoreSpaceCmd moves a removed C+J space back from the site trash.
func restoreSpaceCmd() *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "restore-space ENTRY PATH",
		Short: "Move a removed C+J space back from the site trash (<root>/.hub/trash/ENTRY) to PATH, with its migration records",
		Long: `restore-space moves the site trash's entry ENTRY (a C+J space removed with its data, named
<space>-<time>) back to PATH, which must not exist. On a site without extended attributes the
migration records are kept by path: a folder moved back with mv would leave them behind, and its
stubs could no longer be recalled. This command moves them with the folder. Run again after a
crash, it finishes. See docs/cj-api.md.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := site.NewRoot(root)
			if err != nil {
				return err
			}
			if err := r.RestoreFromTrash(args[0], args[1]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s to %s\n", args[0], args[1])
			return err
		},
	}
	cmd.Flags().StringVar(&root, "root", env("HUB_ROOT", "/"), "the site's storage root, as given to its workers [HUB_ROOT]")
	return cmd
}

// auditRefsCmd lists (and with --drop removes) the references this site
// wrote on its targets that no record on the site names any more.
func auditRefsCmd() *cobra.Command {
	var root string
	var folders, configs []string
	var drop bool
	var minAge time.Duration
	cmd := &cobra.Command{
		Use:   "audit-refs",
		Short: "List the references this site holds on its targets for files removed outside the hub (stubs deleted with rm); --drop removes them",
		Long: `audit-refs walks the site and lists every reference this site wrote on the given targets that
no record on the site names any more, older than --min-age (a younger one may be a migrate in
flight). With --drop those references are removed. Dropping a reference never deletes data: the
collector moves content nothing refers to into the target's trash and deletes it only after its
grace period. References of other sites sharing a target are never listed. See
docs/remote-copies.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(folders)+len(configs) == 0 {
				return fmt.Errorf("name the site's targets with --target-folder or --target-config")
			}
			r, err := site.NewRoot(root)
			if err != nil {
				return err
			}
			drivers := map[string]targets.Driver{}
			add := func(name string, cfg targets.Config) error {
				d, err := targets.Open(cfg)
				if err != nil {
					return fmt.Errorf("target %s: %w", name, err)
				}
				drivers[name] = d
				return nil
			}
			for _, f := range folders {
				if err := add(f, targets.Config{StorageType: "filesystem", MigrationTargetFolder: f}); err != nil {
					return err
				}
			}
			for _, f := range configs {
				var cfg targets.Config
				b, err := os.ReadFile(f)
				if err == nil {
					err = json.Unmarshal(b, &cfg)
				}
				if err != nil {
					return fmt.Errorf("target configuration %s: %w", f, err)
				}
				if err := add(f, cfg); err != nil {
					return err
				}
			}
			res, err := site.AuditRefs(cmd.Context(), r, drivers, site.AuditOptions{MinAge: minAge, Drop: drop})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	cmd.Flags().StringVar(&root, "root", env("HUB_ROOT", "/"), "the site's storage root, as given to its workers [HUB_ROOT]")
	cmd.Flags().StringArrayVar(&folders, "target-folder", nil, "a filesystem target's folder (repeatable)")
	cmd.Flags().StringArrayVar(&configs, "target-config", nil, "a JSON file holding a target's settings, as targets.Config: StorageType, MigrationTargetFolder, Endpoint, Bucket, Prefix, AccessKeyID, SecretAccessKey, ... (repeatable)")
	cmd.Flags().BoolVar(&drop, "drop", false, "remove the leaked references found")
	cmd.Flags().DurationVar(&minAge, "min-age", site.DefaultAuditMinAge, "only references older than this are considered (a younger one may belong to a step in flight)")
	return cmd
}
