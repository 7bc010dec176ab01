package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/migrations"
)

// Backoff between attempts at start: quick at first (a database that is
// a second late), then every half minute, jittered so replicas started
// together do not retry in step.
const (
	retryFirst = 500 * time.Millisecond
	retryMax   = 30 * time.Second
)

// errPermanent marks an error retry must not retry.
type errPermanent struct{ err error }

func (e errPermanent) Error() string { return e.err.Error() }
func (e errPermanent) Unwrap() error { return e.err }

// retry calls fn until it succeeds, returns an errPermanent, ctx ends or
// cfg.StartTimeout (0: none) passes, waiting longer after each failure.
// Each failure is logged and shown by /readyz (cfg.waiting), so an
// operator sees what the process waits for.
func retry(ctx context.Context, cfg *Config, log *slog.Logger, what string, fn func(context.Context) error) error {
	if timeout := cfg.StartTimeout; timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	wait := retryFirst
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		var perm errPermanent
		switch {
		case err == nil:
			if attempt > 1 {
				log.Info("connected at last", "what", what, "attempts", attempt)
			}
			return nil
		case errors.As(err, &perm):
			return perm.err
		case ctx.Err() != nil:
			return fmt.Errorf("gave up after %d attempts (HUB_START_TIMEOUT): %w", attempt, err)
		}
		sleep := wait/2 + rand.N(wait/2+1)
		if cfg.waiting != nil {
			cfg.waiting(fmt.Sprintf("cannot %s (attempt %d): %v", what, attempt, err))
		}
		log.Warn("cannot "+what+"; retrying", "attempt", attempt, "retry_in", sleep.Round(time.Millisecond), "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %d attempts (HUB_START_TIMEOUT): %w", attempt, err)
		case <-time.After(sleep):
		}
		wait = min(2*wait, retryMax)
	}
}

// migrateUp waits for the database, then applies the migrations. Several
// processes starting together (hub serve replicas, hub worker --hub) race
// for the migration lock: the losers wait for the winner to finish rather
// than fail. A lock left by a process killed mid-migration is never freed
// by itself: the warnings say how to clear it.
func migrateUp(ctx context.Context, cfg *Config, db *bun.DB, log *slog.Logger) error {
	if err := retry(ctx, cfg, log, "reach the database", db.PingContext); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return retry(ctx, cfg, log, "take the migration lock (held by another hub process; "+
		"if none is running, one was killed mid-migration: check `hub migrate status` and delete the row of bun_migration_locks)",
		func(ctx context.Context) error {
			err := migrations.Up(ctx, db)
			if err == nil || lockContention(err) {
				return err
			}
			return errPermanent{err}
		})
}

// lockContention tells a lost race for the migration lock (or for
// creating the migration tables, which PostgreSQL can refuse to the
// second of two concurrent CREATE TABLE IF NOT EXISTS) from a failed
// migration. migrations.Up prefixes those two steps' errors.
func lockContention(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "lock migrations:") || strings.HasPrefix(msg, "init migrations:")
}
