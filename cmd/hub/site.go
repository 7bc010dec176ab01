package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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
			r, err := openSiteRoot(root)
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
	siteRootFlag(adopt.Flags(), &root)
	adopt.Flags().BoolVar(&dryRun, "dry-run", false, "count the records, change nothing")
	cmd.AddCommand(adopt, auditRefsCmd(), scrubTargetCmd(), restoreSpaceCmd(), purgeTrashCmd(), leftoversCmd(), forgetMountCmd())
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
			r, err := openSiteRoot(root)
			if err != nil {
				return err
			}
			if err := r.RestoreFromTrash(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s to %s\n", args[0], args[1])
			return err
		},
	}
	siteRootFlag(cmd.Flags(), &root)
	return cmd
}

// forgetMountCmd tells a site_sync's snapdiff that a filesystem mounted
// beneath its managed path was removed on purpose.
func forgetMountCmd() *cobra.Command {
	var root, managed string
	cmd := &cobra.Command{
		Use:   "forget-mount FOLDER",
		Short: "Tell the snapdiff of a managed path that FOLDER, a filesystem of its own beneath it, was removed on purpose: its files are then reported deleted",
		Long: `A site_sync's snapdiff refuses a run in which a folder beneath its managed path that was a
filesystem of its own at the last run (a mount, a btrfs subvolume, a ZFS dataset) is missing or
now on the filesystem above: most likely a volume not mounted, and reporting everything on it
deleted would have the sync delete the replica's copies. When the volume was removed on purpose,
forget-mount rewrites the last run's manifest as if FOLDER had been on the filesystem above, so
the next run reports its files deleted, with the run's other changes. Run it while no sync of the
managed path runs. See docs/jobs.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := openSiteRoot(root)
			if err != nil {
				return err
			}
			n, err := site.ForgetMount(r, managed, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %d entries of the last run are now on the filesystem above; the next run reports those gone as deleted\n", args[0], n)
			return err
		},
	}
	siteRootFlag(cmd.Flags(), &root)
	cmd.Flags().StringVar(&managed, "path", "", "the managed path of the site_sync (its snapdiff's path), as the API names it")
	_ = cmd.MarkFlagRequired("path")
	return cmd
}

// purgeTrashCmd removes an entry of the site trash for good.
func purgeTrashCmd() *cobra.Command {
	var root string
	cmd := &cobra.Command{
		Use:   "purge-trash ENTRY",
		Short: "Remove an entry of the site trash (<root>/.hub/trash/ENTRY, a removed C+J space) for good, with its migration records",
		Long: `purge-trash removes the site trash's entry ENTRY and, on a site without extended attributes,
the migration records kept for it by path, which rm -rf would leave behind. The references its
stubs held on the targets are then leaked: hub site audit-refs --drop removes them and the
collector frees their content. The entry is first renamed purging.<hash> in the trash (a
restore-space of it then finds it gone); run again after a crash, with either name, it
finishes. See docs/cj-api.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := openSiteRoot(root)
			if err != nil {
				return err
			}
			if err := r.PurgeTrash(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "purged %s\n", args[0])
			return err
		},
	}
	siteRootFlag(cmd.Flags(), &root)
	return cmd
}

// targetFlags name targets on the command line: filesystem targets by
// folder, others by a JSON file of targets.Config (both repeatable).
type targetFlags struct{ folders, configs []string }

func (f *targetFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.folders, "target-folder", nil, "a filesystem target's folder (repeatable)")
	cmd.Flags().StringArrayVar(&f.configs, "target-config", nil, "a JSON file holding a target's settings, as targets.Config: StorageType, MigrationTargetFolder, Endpoint, Bucket, Prefix, AccessKeyID, SecretAccessKey, SSLVerify (default true), ... (repeatable)")
}

// open opens every target named, by folder or configuration file name.
func (f *targetFlags) open() (map[string]targets.Driver, error) {
	if len(f.folders)+len(f.configs) == 0 {
		return nil, fmt.Errorf("name the site's targets with --target-folder or --target-config")
	}
	drivers := map[string]targets.Driver{}
	add := func(name string, cfg targets.Config) error {
		cfg.MustExist = true // a folder not mounted is refused, never created
		d, err := targets.Open(cfg)
		if err != nil {
			return fmt.Errorf("target %s: %w", name, err)
		}
		drivers[name] = d
		return nil
	}
	for _, dir := range f.folders {
		if err := add(dir, targets.Config{StorageType: "filesystem", MigrationTargetFolder: dir}); err != nil {
			return nil, err
		}
	}
	for _, file := range f.configs {
		// Certificates are checked unless the file says otherwise
		// ("SSLVerify": false, for a private CA).
		cfg := targets.Config{SSLVerify: true}
		b, err := os.ReadFile(file)
		if err == nil {
			err = json.Unmarshal(b, &cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("target configuration %s: %w", file, err)
		}
		if err := add(file, cfg); err != nil {
			return nil, err
		}
	}
	return drivers, nil
}

// auditRefsCmd lists (and with --drop removes) the references this site
// wrote on its targets that no record on the site names any more.
func auditRefsCmd() *cobra.Command {
	var root string
	var tf targetFlags
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
			drivers, err := tf.open()
			if err != nil {
				return err
			}
			r, err := openSiteRoot(root)
			if err != nil {
				return err
			}
			res, err := site.AuditRefs(cmd.Context(), r, drivers, site.AuditOptions{MinAge: minAge, Drop: drop})
			if errors.Is(err, site.ErrUnreadableRecords) {
				// The listing says which records; the error, that nothing was dropped.
				if perr := printJSON(cmd.OutOrStdout(), res); perr != nil {
					return perr
				}
			}
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), res)
		},
	}
	siteRootFlag(cmd.Flags(), &root)
	tf.add(cmd)
	cmd.Flags().BoolVar(&drop, "drop", false, "remove the leaked references found")
	cmd.Flags().DurationVar(&minAge, "min-age", site.DefaultAuditMinAge, "only references older than this are considered (a younger one may belong to a step in flight)")
	return cmd
}

// leftoversCmd lists (and settles) what killed writes left under the
// hub's reserved prefix in the site's folders.
func leftoversCmd() *cobra.Command {
	var root string
	var opts site.LeftoverOptions
	cmd := &cobra.Command{
		Use:   "leftovers",
		Short: "List the files killed writes left under the hub's reserved prefix (.hub-tmp-); --settle brings users' files back into view, --remove-temporaries removes the hub's own",
		Long: `leftovers walks the site for files under the hub's reserved prefix (.hub-tmp-), hidden from
walks and the API, and lists each with its kind: "temporary" (a write's temporary file, or a
download parked before a sync's exchange: a copy of data held elsewhere), "parked by an
interrupted sync" (the destination's own file, left under the exchange's private name by a
worker killed mid-replacement), "set aside by an interrupted deletion" (a file a replayed
deletion had set aside), or "not marked as the hub's" (a user's, one parked by an earlier
version, a delete step's entry moved beside itself: never touched). A rerun of the same write
settles its own leftovers; a path never written again keeps them. Only leftovers older than
--min-age (by their change time) are acted on: with --settle, a set-aside file goes back to its
name if free, and otherwise, like a parked file, is kept beside it as <name>.sync-kept-<ns>;
with --remove-temporaries, the hub's temporary files that no write holds (a lock) are removed
(the hub's by their marker, an attribute whoever can write the file can set). Nothing else is
ever removed. The result is JSON. See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := openSiteRoot(root)
			if err != nil {
				return err
			}
			found, err := site.Leftovers(cmd.Context(), r, opts)
			if err != nil {
				return err
			}
			if found == nil {
				found = []site.Leftover{}
			}
			return printJSON(cmd.OutOrStdout(), found)
		},
	}
	siteRootFlag(cmd.Flags(), &root)
	cmd.Flags().BoolVar(&opts.Settle, "settle", false, "bring users' files left parked or set aside back into view")
	cmd.Flags().BoolVar(&opts.RemoveTemporaries, "remove-temporaries", false, "remove the hub's temporary files that no write holds")
	cmd.Flags().DurationVar(&opts.MinAge, "min-age", site.DefaultLeftoverMinAge, "only leftovers older than this are acted on (a younger one may belong to a write in flight)")
	return cmd
}

// scrubTargetCmd reads every content object on the targets and checks it
// against its name; --quarantine moves the bad ones aside.
func scrubTargetCmd() *cobra.Command {
	var tf targetFlags
	var move bool
	cmd := &cobra.Command{
		Use:   "scrub-target",
		Short: "Read every content object on the targets and check its bytes against its SHA-256 name; --quarantine moves bad ones aside so they are uploaded again",
		Long: `scrub-target reads every content object (objects/ and trash/) on the given targets and checks
that its bytes hash to its name. It finds bit rot, and objects an earlier version labelled with
the checksum a file had before it changed during the upload: steps trust a target's label to
skip an upload, so a migrate of a file with such content would release it onto wrong bytes.
With --quarantine each bad object is moved to quarantine/<sha256>.<ns>, out of where steps
look, so that the next premigrate or migrate of that content uploads it again; only the object
read is moved, never content uploaded to its key since. Good content found in quarantine/ with
its key empty (a scrub killed mid-move) is listed as misplaced, and with --quarantine copied
back. Nothing is ever deleted outright. The result is JSON; the command fails (exit 1) when bad
content was found, or misplaced content left where it is.
See docs/remote-copies.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			drivers, err := tf.open()
			if err != nil {
				return err
			}
			results := map[string]site.ScrubResult{}
			bad, misplaced := 0, 0
			for name, d := range drivers {
				res, err := site.Scrub(cmd.Context(), d, site.ScrubOptions{Quarantine: move})
				if err != nil {
					return fmt.Errorf("target %s: %w", name, err)
				}
				results[name] = res
				bad += len(res.Bad)
				for _, m := range res.Misplaced {
					if !m.Restored {
						misplaced++
					}
				}
			}
			if err := printJSON(cmd.OutOrStdout(), results); err != nil {
				return err
			}
			if bad > 0 {
				return fmt.Errorf("%d objects do not match their names", bad)
			}
			if misplaced > 0 {
				return fmt.Errorf("%d good copies are only in quarantine/: run with --quarantine to put them back", misplaced)
			}
			return nil
		},
	}
	tf.add(cmd)
	cmd.Flags().BoolVar(&move, "quarantine", false, "move the objects that do not match to quarantine/")
	return cmd
}

// siteRootFlag adds --root, the site's storage root (no default).
func siteRootFlag(fs *pflag.FlagSet, root *string) {
	fs.StringVar(root, "root", env("HUB_ROOT", ""), "the site's storage root, as given to its workers [HUB_ROOT]")
}

// openSiteRoot opens a site's root for a maintenance command: one its
// workers have used (checkRoot), never /.
func openSiteRoot(root string) (*site.Root, error) {
	if err := checkRootSetting(root); err != nil {
		return nil, err
	}
	if err := checkRoot(root, false); err != nil {
		return nil, err
	}
	return site.NewRoot(root)
}
