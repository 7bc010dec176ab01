package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/uptrace/bun/migrate"

	"github.com/thehub/hub/migrations"
	"github.com/thehub/hub/models"
)

func migrateCmd() *cobra.Command {
	cfg := new(Config)
	cmd := &cobra.Command{Use: "migrate", Short: "Apply, roll back or inspect database migrations"}
	cfg.commonFlags(cmd.PersistentFlags())

	run := func(fn func(cmd *cobra.Command) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, _ []string) error {
			if err := cfg.finish(cmd.Flags()); err != nil {
				return err
			}
			return fn(cmd)
		}
	}
	up := &cobra.Command{Use: "up", Short: "Apply every pending migration", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command) error {
			db, err := models.Open(cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer db.Close()
			// Wait for the database and for a hub process that is
			// migrating now, as every process does at start.
			if err := migrateUp(cmd.Context(), cfg, db, cfg.logger()); err != nil {
				return err
			}
			fmt.Println("database is up to date")
			return nil
		})}
	down := &cobra.Command{Use: "down", Short: "Roll back the last group of migrations", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command) error {
			return withMigrator(cmd, cfg, func(m *migrate.Migrator) error {
				g, err := m.Rollback(cmd.Context())
				if err != nil {
					return err
				}
				if g.IsZero() {
					fmt.Println("nothing to roll back")
				} else {
					fmt.Printf("rolled back %s\n", g)
				}
				return nil
			})
		})}
	status := &cobra.Command{Use: "status", Short: "List applied and pending migrations", Args: cobra.NoArgs,
		RunE: run(func(cmd *cobra.Command) error {
			return withMigrator(cmd, cfg, func(m *migrate.Migrator) error {
				ms, err := m.MigrationsWithStatus(cmd.Context())
				if err != nil {
					return err
				}
				for _, mg := range ms {
					state := "pending"
					if mg.IsApplied() {
						state = "applied (group " + fmt.Sprint(mg.GroupID) + ")"
					}
					fmt.Printf("%s  %s  %s\n", mg.Name, mg.Comment, state)
				}
				return nil
			})
		})}
	dir := "migrations"
	create := &cobra.Command{Use: "create NAME", Short: "Create an empty up/down migration pair in --dir", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stamp := time.Now().UTC().Format("20060102150405")
			for _, kind := range []string{"up", "down"} {
				p := filepath.Join(dir, fmt.Sprintf("%s_%s.tx.%s.sql", stamp, args[0], kind))
				body := "-- Use {{.ID}}, {{.JSON}}, {{.TS}}, {{.BLOB}} for types that differ between PostgreSQL and sqlite;\n-- separate statements with a --bun:split line.\n"
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					return err
				}
				fmt.Println("created", p)
			}
			return nil
		}}
	create.Flags().StringVar(&dir, "dir", dir, "folder of the migration files")
	cmd.AddCommand(up, down, status, create)
	return cmd
}

// withMigrator opens the database and an initialised migrator for fn.
func withMigrator(cmd *cobra.Command, cfg *Config, fn func(*migrate.Migrator) error) error {
	db, err := models.Open(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	m, err := migrations.NewMigrator(db)
	if err != nil {
		return err
	}
	if err := m.Init(cmd.Context()); err != nil {
		return err
	}
	return fn(m)
}
