package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// snapshotOfLab is snapshot s1 of space lab, with the audit site's target.
func snapshotOfLab(tdir string) *CJSnapshot {
	return &CJSnapshot{Space: "lab", Name: "s1", Targets: []TargetSpec{{Name: "archive",
		Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}}}
}

// snapshotStubSite is a site whose C+J space lab holds the migrated
// auditSpaceFiles and a resident file.
func snapshotStubSite(t *testing.T, index bool) (dir, tdir string, s auditSite) {
	dir, tdir = t.TempDir(), t.TempDir()
	s = newAuditSite(t, dir, tdir, index)
	_, err := s.a.cjSpace(context.Background(), &CJSpace{Name: "lab"}, false)
	require.NoError(t, err)
	s.migrateFiles(t, "spaces/lab", auditSpaceFiles)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spaces", "lab", "r.txt"), []byte("resident"), 0o644))
	return dir, tdir, s
}

// dropSpaceStubsAndCollect deletes the space's stubs, as a user would,
// then audits with --drop and collects: the content of each is kept only
// by what else references it.
func (s auditSite) dropSpaceStubsAndCollect(t *testing.T) {
	t.Helper()
	for name := range auditSpaceFiles {
		require.NoError(t, os.Remove(filepath.Join(s.a.Root.Dir(), "spaces", "lab", filepath.FromSlash(name))))
	}
	s.dropLeakedAndCollect(t)
}

// TestSnapshotKeepsStubsContent: a snapshot of a space holding stubs
// copies each as a stub of its own (record and reference), so its content
// outlives the space's stub: deleted by its user, its reference dropped by
// an audit and its content collected, the snapshot's copy still recalls.
// Before, the snapshot held an empty placeholder, and the data was lost.
// Removing the snapshot drops its index records; its references are then
// leaked, for the audit.
func TestSnapshotKeepsStubsContent(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, tdir, s := snapshotStubSite(t, index)
			msg, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
			require.NoError(t, err)
			require.Contains(t, msg, "2 migrated files kept as stubs")
			s.auditAndCollect(t) // nothing is leaked: every reference has its record
			requireNoIndexRecordsBelow(t, s.a.Root, snapshotsBuild)

			s.dropSpaceStubsAndCollect(t)
			snap := filepath.Join(cjSnapshotsDir, "lab", "s1")
			got, err := os.ReadFile(filepath.Join(dir, snap, "r.txt"))
			require.NoError(t, err)
			require.Equal(t, "resident", string(got))
			s.requireRecalled(t, filepath.ToSlash(snap), auditSpaceFiles)

			// Removed, the snapshot leaves no record and no reference.
			_, err = s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), true)
			require.NoError(t, err)
			requireNoRecordsAt(t, s.a.Root, filepath.ToSlash(snap))
			s.auditAndCollect(t)
		})
	}
}

// TestSnapshotOfAStubOnAnUnknownTarget: a stub whose target the site's
// hub does not list fails the snapshot, clearly, rather than copying a
// placeholder that holds nothing.
func TestSnapshotOfAStubOnAnUnknownTarget(t *testing.T) {
	t.Parallel()
	dir, _, s := snapshotStubSite(t, false)
	_, err := s.a.cjSnapshot(context.Background(), &CJSnapshot{Space: "lab", Name: "s1"}, false)
	require.ErrorContains(t, err, `is migrated to target "archive", which is not enabled for this site`)
	require.NoDirExists(t, filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))
	s.auditAndCollect(t) // the attempt left no reference
}

// TestSnapshotStubsChild is the worker process TestKillSnapshottingStubs
// kills: it takes snapshot s1 of space lab.
func TestSnapshotStubsChild(t *testing.T) {
	dir := os.Getenv("HUB_SNAPSTUB_CHILD_ROOT")
	if dir == "" {
		return
	}
	a := &Activities{Root: newRoot(t, dir, os.Getenv("HUB_SNAPSTUB_CHILD_INDEX") == "1"), Site: "s",
		ConfigDir: filepath.Join(dir, hubDir, "config")}
	_, err := a.cjSnapshot(context.Background(), snapshotOfLab(os.Getenv("HUB_SNAPSTUB_CHILD_TARGET")), os.Getenv("HUB_SNAPSTUB_CHILD_DELETE") == "1")
	require.NoError(t, err)
}

// TestKillSnapshottingStubs kills a snapshot of a space holding stubs at
// every fault point of its writes (references, records, the placement),
// runs an audit with --drop and the collector on what the kill left, then
// the snapshot again; then the space's stubs are deleted and their
// content collected: every stub of the snapshot still recalls, and no
// record is left in the build folder.
func TestKillSnapshottingStubs(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			child := func(dir, tdir string, env ...string) bool {
				return runChild(t, "^TestSnapshotStubsChild$", append(env, "HUB_SNAPSTUB_CHILD_ROOT="+dir,
					"HUB_SNAPSTUB_CHILD_INDEX="+idx, "HUB_SNAPSTUB_CHILD_TARGET="+tdir)...)
			}
			dir, tdir, _ := snapshotStubSite(t, index)
			file := filepath.Join(t.TempDir(), "trace")
			require.False(t, child(dir, tdir, "HUB_FAULT_TRACE="+file))
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			points := strings.Fields(string(b))
			require.Contains(t, points, "snapshot.copied@1")
			require.Contains(t, points, "snapshot.records-copied@1")
			require.Contains(t, points, "snapshot.placed@1")
			if index {
				require.Contains(t, points, "commit.renamed@2", "the index writes are killed too")
			}
			for _, point := range points {
				t.Run(point, func(t *testing.T) {
					dir, tdir, s := snapshotStubSite(t, index)
					require.True(t, child(dir, tdir, "HUB_FAULT_POINT="+point), "killed at %s", point)
					s.dropLeakedAndCollect(t)
					// The retry removes what the killed attempt left; the
					// references of its copies are then leaked, for the audit
					// below.
					require.False(t, child(dir, tdir), "the retry")
					requireNoIndexRecordsBelow(t, s.a.Root, snapshotsBuild)
					s.dropSpaceStubsAndCollect(t)
					s.requireRecalled(t, cjSnapshotsDir+"/lab/s1", auditSpaceFiles)
				})
			}
		})
	}
}

// requireNoIndexRecordsBelow checks that the state index holds no record
// at or below rel.
func requireNoIndexRecordsBelow(t *testing.T, root *Root, rel string) {
	t.Helper()
	_, folder, err := root.state.index.paths(rel)
	require.NoError(t, err)
	err = filepath.WalkDir(folder, func(p string, e os.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return nil
		}
		require.NoError(t, err)
		require.True(t, e.IsDir() || strings.HasPrefix(e.Name(), "."), "a record is left below %s: %s", rel, p)
		return nil
	})
	require.NoError(t, err)
}

// TestSnapshotStopsBeforeThePoolFills: a snapshot copies into the pool it
// protects, and a full pool fails every user's writes. The copy stops,
// and leaves nothing, before it would take the pool past the site's
// lock_threshold (95% when unset), however full the pool was when it
// began; a scheduled firing then still removes its expired snapshots.
func TestSnapshotStopsBeforeThePoolFills(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	space := filepath.Join(a.Root.Dir(), "spaces", "s1")
	require.NoError(t, os.MkdirAll(space, 0o755))
	for _, n := range []string{"a", "b"} {
		require.NoError(t, os.WriteFile(filepath.Join(space, n), []byte(strings.Repeat(n, 30)), 0o644))
	}
	// 900 of 1,000 bytes used, plus what the snapshots copied.
	a.Utilisation = func(context.Context, string) (int64, int64, error) {
		var copied int64
		_ = filepath.WalkDir(filepath.Join(a.Root.Dir(), cjSnapshotsDir), func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				fi, _ := d.Info()
				copied += fi.Size()
			}
			return nil
		})
		_ = filepath.WalkDir(filepath.Join(a.Root.Dir(), filepath.FromSlash(snapshotsBuild)), func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				fi, _ := d.Info()
				copied += fi.Size()
			}
			return nil
		})
		return 900 + copied, 1000, nil
	}
	_, err := a.cjSnapshot(ctx, &CJSnapshot{Space: "s1", Name: "full"}, false)
	require.ErrorIs(t, err, errPoolFull)
	require.ErrorContains(t, err, "the copy would take it past 95%")
	require.NoDirExists(t, filepath.Join(a.Root.Dir(), cjSnapshotsDir, "s1", "full"))
	builds, err := os.ReadDir(filepath.Join(a.Root.Dir(), filepath.FromSlash(snapshotsBuild)))
	require.NoError(t, err)
	require.Empty(t, builds, "the partial copy is removed")

	// Room up to 99%: taken.
	_, err = a.cjSnapshot(ctx, &CJSnapshot{Space: "s1", Name: "fits", LockThreshold: 99}, false)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(a.Root.Dir(), cjSnapshotsDir, "s1", "fits", "b"))

	// A scheduled firing (now 96% full with the snapshot above) skips,
	// and still removes the snapshot that expired.
	expired := filepath.Join(a.Root.Dir(), cjSnapshotsDir, "s1", ScheduledSnapshotName(snapshotChildAt.Add(-8*24*time.Hour)))
	require.NoError(t, os.MkdirAll(expired, 0o755))
	res, err := a.TakeSpaceSnapshot(ctx, SpaceSnapshotInput{Space: "s1", Folder: "spaces/s1", At: snapshotChildAt,
		KeepFor: 7 * 24 * time.Hour, LockThreshold: 98})
	require.NoError(t, err)
	require.Empty(t, res.Taken)
	require.Contains(t, res.Skipped, "the copy would take it past 98%")
	require.Len(t, res.Removed, 1)
	require.NoDirExists(t, expired)
}

// TestKillRemovingASnapshotWithStubs: removing a snapshot drops the
// references of its stubs before their files go (before, they were left
// for the references audit, and the target kept their content until an
// operator ran it), and never the space's: the removal is killed at each
// of its fault points and run again; no reference is left leaked, and
// the space's stubs still recall once their content was collected.
func TestKillRemovingASnapshotWithStubs(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			remove := func(dir, tdir string, env ...string) bool {
				return runChild(t, "^TestSnapshotStubsChild$", append(env, "HUB_SNAPSTUB_CHILD_ROOT="+dir,
					"HUB_SNAPSTUB_CHILD_INDEX="+idx, "HUB_SNAPSTUB_CHILD_TARGET="+tdir, "HUB_SNAPSTUB_CHILD_DELETE=1")...)
			}
			setup := func(t *testing.T) (string, string, auditSite) {
				dir, tdir, s := snapshotStubSite(t, index)
				_, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
				require.NoError(t, err)
				return dir, tdir, s
			}
			dir, tdir, s := setup(t)
			file := filepath.Join(t.TempDir(), "trace")
			require.False(t, remove(dir, tdir, "HUB_FAULT_TRACE="+file))
			s.auditAndCollect(t)
			b, err := os.ReadFile(file)
			require.NoError(t, err)
			points := strings.Fields(string(b))
			require.Contains(t, points, "trash.renamed@1")
			require.Contains(t, points, "snapshot.refs-dropped@1")
			for _, point := range points {
				t.Run(point, func(t *testing.T) {
					dir, tdir, s := setup(t)
					require.True(t, remove(dir, tdir, "HUB_FAULT_POINT="+point), "killed at %s", point)
					// Only the snapshot's references may be leaked here (on the
					// index backend its records stay at the old path while its
					// files are in the trash); the space's are all needed.
					for _, l := range s.dropLeakedAndCollect(t).Leaked {
						require.True(t, strings.HasPrefix(l.Path, "/"+cjSnapshotsDir+"/"), "%+v", l)
					}
					require.False(t, remove(dir, tdir), "the retry")
					require.NoDirExists(t, filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))
					requireNoRecordsAt(t, s.a.Root, cjSnapshotsDir+"/lab/s1")
					s.auditAndCollect(t) // and the snapshot's were all dropped
					s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
				})
			}
		})
	}
}
