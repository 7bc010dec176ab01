package site

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Scheduled snapshots of a hub space are taken by the space's snapshot
// schedule (docs/schedules-policies.md) with the same operation as C+J
// snapshots: a read-only copy at .snapshots/<space>/<name>. Their names
// carry the firing's time, which is what retention measures.
const scheduledPrefix = "scheduled-"

// scheduledLayout is the time in a scheduled snapshot's name (UTC).
const scheduledLayout = "20060102T150405Z"

// ScheduledSnapshotName names the scheduled snapshot taken at t.
func ScheduledSnapshotName(t time.Time) string {
	return scheduledPrefix + t.UTC().Format(scheduledLayout)
}

// scheduledTime is the time in a scheduled snapshot's name, ok false for
// any other name. The C+J API refuses snapshot names starting with
// scheduled- (api/cj checkSnapshot), so a name of this form is always the
// schedule's own.
func scheduledTime(name string) (at time.Time, ok bool) {
	rest, ok := strings.CutPrefix(name, scheduledPrefix)
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(scheduledLayout, rest)
	return at, err == nil
}

func isScheduledName(name string) bool {
	_, ok := scheduledTime(name)
	return ok
}

// SpaceSnapshotInput asks a site to take a space's scheduled snapshot and
// to remove the space's scheduled snapshots older than KeepFor.
type SpaceSnapshotInput struct {
	Space  string // the space's name
	Folder string // the space's folder (its mountpoint), root-relative
	At     time.Time
	// KeepFor is the retention: scheduled snapshots taken more than
	// KeepFor before At are removed (0 keeps them all).
	KeepFor time.Duration
	// LockThreshold, when above 0, is the pool utilisation (percent) at
	// or above which no new snapshot is taken; old ones are still removed.
	// A copy also stops before it takes the pool past it (past
	// defaultSnapshotLimit when 0).
	LockThreshold int64
	// Targets are the site's enabled targets (see CJSnapshot.Targets).
	Targets []TargetSpec `json:",omitempty"`
}

// SpaceSnapshotResult says what the site did.
type SpaceSnapshotResult struct {
	Taken   string   `json:",omitempty"`
	Skipped string   `json:",omitempty"`
	Removed []string `json:",omitempty"`
}

// TakeSpaceSnapshot takes a space's scheduled snapshot (idempotent: a
// snapshot already taken is kept), then removes the expired ones. Only
// snapshots the schedule took (named scheduled-<time>) are ever removed.
func (a *Activities) TakeSpaceSnapshot(ctx context.Context, in SpaceSnapshotInput) (*SpaceSnapshotResult, error) {
	res := &SpaceSnapshotResult{}
	name := ScheduledSnapshotName(in.At)
	full := false
	if in.LockThreshold > 0 {
		used, total, err := a.measurePool(ctx, cjPoolName)
		if err != nil {
			return nil, err
		}
		if total > 0 && used*100 >= in.LockThreshold*total {
			full = true
			res.Skipped = fmt.Sprintf("not taken: the pool is %d%% full, at or above the site's lock_threshold %d%%",
				used*100/total, in.LockThreshold)
		}
	}
	if !full {
		_, err := a.snapshot(ctx, strings.TrimPrefix(path.Clean("/"+in.Folder), "/"), &CJSnapshot{Space: in.Space, Name: name, Targets: in.Targets, LockThreshold: in.LockThreshold}, false)
		switch {
		case errors.Is(err, errPoolFull):
			res.Skipped = "not taken: " + err.Error() // the expired ones still go, freeing room
		case err != nil:
			return nil, cjClassify(err)
		default:
			res.Taken = name
		}
	}
	// Scheduled snapshots of the space an earlier attempt was killed
	// removing are still in the site trash.
	if err := a.emptySnapshotTrash(ctx, a.drivers(in.Targets), in.Space, isScheduledName); err != nil {
		return nil, err
	}
	if in.KeepFor <= 0 {
		return res, nil
	}
	var entries []os.DirEntry
	dir, err := a.Root.openDir(path.Join(cjSnapshotsDir, in.Space))
	switch {
	case err == nil:
		entries, err = dir.ReadDir(-1)
		dir.Close()
		if err != nil {
			return nil, err
		}
	case !isNotExist(err):
		return nil, err
	}
	var expired []string
	for _, e := range entries {
		at, ok := scheduledTime(e.Name())
		if !e.IsDir() || !ok || e.Name() == name {
			continue
		}
		if in.At.Sub(at) > in.KeepFor {
			expired = append(expired, e.Name())
		}
	}
	sort.Strings(expired)
	for _, n := range expired {
		if _, err := a.snapshot(ctx, "", &CJSnapshot{Space: in.Space, Name: n, Targets: in.Targets}, true); err != nil {
			return nil, err
		}
		res.Removed = append(res.Removed, n)
	}
	return res, nil
}
