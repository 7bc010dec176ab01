package site

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// The kill tests keep the page cache: a power cut, which loses what was
// not flushed, cannot be played here. These tests check the order that
// makes one harmless: what a record, a reference or a report relies on is
// flushed before it goes or is made. None is parallel: each sets flushSite
// or flushTarget.

// TestRetriedRecallFlushesFirst: a recall's earlier attempt wrote the data
// back and was abandoned in its flush (a worker whose attempt timed out
// while syncfs ran, then killed). The retry finds the data whole, hashes
// it, and must still flush it before the record and the reference
// go: else a power cut leaves the stub's bytes, with no record and no
// reference, and the collector frees the only copy. Before, only a retry
// that wrote data itself flushed.
func TestRetriedRecallFlushesFirst(t *testing.T) {
	for name, index := range stateBackends {
		for _, resident := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/recall", true: "/delete_on_recall"}[resident], func(t *testing.T) {
				ctx := context.Background()
				dir, target := t.TempDir(), fsTarget(t)
				root := newRoot(t, dir, index)
				abs := filepath.Join(dir, "f.bin")
				data := bytes.Repeat([]byte("d"), 64<<10)
				writeOld(t, abs, data)
				paths := []string{"/f.bin"}
				res, err := Migrate(ctx, root, paths, target, "t", StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, paths)
				opts := StepOptions{DeleteOnRecall: resident}

				// The first attempt: its mark, then the data written whole,
				// and no more (a failed flush would cut the file back).
				rec, err := root.state.get(abs, "f.bin")
				require.NoError(t, err)
				rec.Pending = pendingRecall
				require.NoError(t, root.state.set(abs, "f.bin", *rec))
				f, err := os.OpenFile(abs, os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = f.Write(data)
				require.NoError(t, err)
				require.NoError(t, f.Close())

				var flushes int
				t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
				flushSite = func(d *os.File) error {
					flushes++
					rec, err := root.state.get(abs, "f.bin")
					require.NoError(t, err)
					require.NotNil(t, rec, "the record is still there while the data is flushed")
					require.Equal(t, pendingRecall, rec.Pending)
					require.Equal(t, 1, countRefs(t, target), "and the reference")
					return fsutil.SyncFSOf(d)
				}
				res, err = Recall(ctx, root, paths, only("t", target), opts)
				require.NoError(t, err)
				requireAll(t, res, CodeOK, paths)
				require.Contains(t, res[0].Message, "data was local")
				require.Equal(t, 1, flushes, "the retry flushes the data it found")
				if resident {
					require.Equal(t, 0, countRefs(t, target))
				}
			})
		}
	}
}

// TestReverseStubOfAPremigratedFileFlushesFirst: reverse_stub of a
// premigrated file drops its record and reference, after which the local
// data is the only copy: it is flushed first.
func TestReverseStubOfAPremigratedFileFlushesFirst(t *testing.T) {
	ctx := context.Background()
	dir, target := t.TempDir(), fsTarget(t)
	root := newRoot(t, dir, false)
	abs := filepath.Join(dir, "f.bin")
	writeOld(t, abs, []byte("premigrated data"))
	paths := []string{"/f.bin"}
	res, err := Premigrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	var flushes int
	flushSite = func(d *os.File) error {
		flushes++
		require.Equal(t, 1, countRefs(t, target), "the reference is still there while the data is flushed")
		return fsutil.SyncFSOf(d)
	}
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	res, err = ReverseStub(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	require.Equal(t, 1, flushes)
	require.Equal(t, 0, countRefs(t, target))
}

// TestReceivedStubsAreFlushedOnTheirTarget: a send's stubs get references
// of their own on the shared target; the batch is reported only once the
// target is flushed with them (the source's reference may be gone before
// a power cut comes: a send, then a delete at the source), and a failed
// flush fails the batch. Before, those markers were never flushed.
func TestReceivedStubsAreFlushedOnTheirTarget(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false), Site: "dst"}
	data := []byte("sent content")
	sum := putContent(t, tdir, data)
	target, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: tdir})
	require.NoError(t, err)
	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	in := ReceiveInput{JobID: 1, Step: "send", Targets: []TargetSpec{spec},
		Files: []SentFile{{Path: "/stub.txt", Type: TypeFile, Target: "t", Key: contentKey(sum), Checksum: sum,
			Size: int64(len(data)), Mtime: time.Now().UnixNano()}}}

	real := flushTarget
	t.Cleanup(func() { flushTarget = real })
	flushTarget = func(context.Context, targets.Driver) error { return unix.EIO }
	var out StepOutput
	require.Error(t, runActivity(a, a.Receive, in, &out), "a failed flush of the target fails the batch")

	var refsAtFlush []int
	flushTarget = func(ctx context.Context, d targets.Driver) error {
		refsAtFlush = append(refsAtFlush, countRefs(t, target))
		return real(ctx, d)
	}
	require.NoError(t, runActivity(a, a.Receive, in, &out))
	require.Len(t, out.Outcomes, 1)
	require.Equal(t, OutcomeSuccess, out.Outcomes[0].State, out.Outcomes[0].Message)
	require.Len(t, refsAtFlush, 1, "one flush of the target")
	require.Positive(t, refsAtFlush[0])
	require.Equal(t, countRefs(t, target), refsAtFlush[0], "after the stub's reference was written (the failed attempt's is left for the audit)")
	rec, err := a.Root.state.get(filepath.Join(dir, "stub.txt"), "stub.txt")
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, Migrated, rec.State)
}

// TestSnapshotIsFlushedBeforeItIsPlaced: a snapshot's copies and its
// stubs' references are flushed before the snapshot is placed and reported
// taken (the space's files may be changed or deleted the next instant);
// a failed flush takes no snapshot. Before, nothing of a snapshot was
// flushed.
func TestSnapshotIsFlushedBeforeItIsPlaced(t *testing.T) {
	dir, tdir, s := snapshotStubSite(t, false)
	placed := func() bool {
		_, err := os.Lstat(filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))
		return err == nil
	}
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	flushSite = func(*os.File) error { return unix.EIO }
	_, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
	require.Error(t, err, "a failed flush takes no snapshot")
	require.False(t, placed())

	var log []string
	flushSite = func(d *os.File) error {
		if placed() {
			log = append(log, "site, placed")
			return fsutil.SyncFSOf(d)
		}
		build, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(snapshotsBuild)))
		require.NoError(t, err)
		require.NotEmpty(t, build, "with its copies built")
		log = append(log, "site")
		return fsutil.SyncFSOf(d)
	}
	real := flushTarget
	t.Cleanup(func() { flushTarget = real })
	flushTarget = func(ctx context.Context, d targets.Driver) error {
		require.False(t, placed(), "the target flushed before it is placed")
		log = append(log, "target")
		return real(ctx, d)
	}
	msg, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(msg, "took "), msg)
	require.True(t, placed())
	require.Equal(t, []string{"site", "target", "site, placed"}, log, "its placement is on disk before it is reported")

	// Its removal too: reported once the move to the trash is on disk.
	log = nil
	flushSite = func(d *os.File) error {
		if !placed() {
			log = append(log, "site")
		}
		return fsutil.SyncFSOf(d)
	}
	msg, err = s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), true)
	require.NoError(t, err)
	require.Equal(t, "removed .snapshots/lab/s1", msg)
	require.Equal(t, []string{"site"}, log)
	flushSite = func(*os.File) error { return unix.EIO }
	_, err = s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), true)
	require.Error(t, err, "a removal whose flush fails is not reported")
}

// TestUnfinishedSnapshotRemovalKeepsItsName: a removal of a snapshot that
// moved it to the site trash and then failed for good (its target
// unreachable through every retry) leaves the item to be removed again.
// Before, a retried write of the item took the snapshot anew, with the
// space's content of the day, under the name of the point in time its
// users kept. Now that is refused until the removal is finished.
func TestUnfinishedSnapshotRemovalKeepsItsName(t *testing.T) {
	t.Parallel()
	dir, tdir, s := snapshotStubSite(t, false)
	ctx := context.Background()
	msg, err := s.a.cjSnapshot(ctx, snapshotOfLab(tdir), false)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(msg, "took "), msg)
	_, err = s.a.Root.moveToTrash(".snapshots/lab/s1", snapshotTrashPrefix("lab", "s1")+"1")
	require.NoError(t, err)

	_, err = s.a.cjSnapshot(ctx, snapshotOfLab(tdir), false)
	require.ErrorContains(t, err, "its removal has not finished")
	require.NoDirExists(t, filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))

	msg, err = s.a.cjSnapshot(ctx, snapshotOfLab(tdir), true)
	require.NoError(t, err)
	require.Equal(t, ".snapshots/lab/s1 already removed", msg)
	msg, err = s.a.cjSnapshot(ctx, snapshotOfLab(tdir), false)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(msg, "took "), msg)
}

// TestMigrateFlushesItsMarksBeforeReleasing: with records in the files'
// attributes, the marks a migrate sets before it releases are flushed
// while every file is still whole (a filesystem without a metadata
// journal need not commit an attribute before a later truncation); a
// failed flush releases nothing.
func TestMigrateFlushesItsMarksBeforeReleasing(t *testing.T) {
	ctx := context.Background()
	dir, target := t.TempDir(), fsTarget(t)
	root := newRoot(t, dir, false)
	if !root.state.xattr {
		t.Skip("no user xattrs on this filesystem: marks are in the index, which state.sync flushes")
	}
	data := map[string][]byte{"/a.bin": bytes.Repeat([]byte("a"), 8<<10), "/b.bin": bytes.Repeat([]byte("b"), 8<<10)}
	paths := []string{"/a.bin", "/b.bin"}
	for p, d := range data {
		writeOld(t, filepath.Join(dir, p), d)
	}
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	flushSite = func(*os.File) error { return unix.EIO }
	res, err := Migrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeFailed, paths)
	for p, d := range data {
		got, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Equal(t, d, got, "%s: nothing released after a failed flush", p)
	}

	var flushes int
	flushSite = func(d *os.File) error {
		flushes++
		for p, want := range data {
			abs := filepath.Join(dir, p)
			got, err := os.ReadFile(abs)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s is whole while its mark is flushed", p)
			rec, err := root.state.get(abs, strings.TrimPrefix(p, "/"))
			require.NoError(t, err)
			require.NotNil(t, rec)
			require.Equal(t, pendingRelease, rec.Pending, "%s is marked", p)
		}
		return fsutil.SyncFSOf(d)
	}
	res, err = Migrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	require.Equal(t, 1, flushes)
}

// TestFlushesReachMountsBeneathTheRoot: a site's tree may hold mounts,
// which a syncfs of the root's filesystem does not reach. A recall, a
// migrate's release marks and a received batch on a mount beneath the
// root flush that mount's filesystem too, once, besides the root's.
// Before, only the root's was flushed, and a power cut could lose a
// recalled file whose reference was already dropped.
func TestFlushesReachMountsBeneathTheRoot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mnt := mountTmpfs(t, dir)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(mnt, &st))
	mountDev := st.Dev
	require.NoError(t, unix.Stat(dir, &st))
	rootDev := st.Dev
	require.NotEqual(t, rootDev, mountDev)

	var flushed []uint64 // the devices flushed, in order
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	flushSite = func(d *os.File) error {
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(int(d.Fd()), &st))
		flushed = append(flushed, st.Dev)
		return fsutil.SyncFSOf(d)
	}
	data := bytes.Repeat([]byte("on a mount beneath the root "), 100)
	writeOld(t, filepath.Join(mnt, "d", "s"), data)
	writeOld(t, filepath.Join(dir, "r"), data)
	root := newRoot(t, dir, false)
	tdir := t.TempDir()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	paths := []string{"/mnt/d/s", "/r"}
	res, err := Migrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	if root.state.xattr {
		require.Equal(t, []uint64{rootDev, mountDev}, flushed, "the release marks, on both filesystems")
	}

	flushed = nil
	res, err = Recall(ctx, root, paths, only("t", target), StepOptions{DeleteOnRecall: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	require.Equal(t, []uint64{rootDev, mountDev}, flushed, "the recalled data, on both filesystems")
	got, err := os.ReadFile(filepath.Join(mnt, "d", "s"))
	require.NoError(t, err)
	require.Equal(t, data, got)

	// Received into the mount.
	sum := sha(data)
	require.NoError(t, target.Put(ctx, contentKey(sum), bytes.NewReader(data), int64(len(data))))
	a := &Activities{Root: root, Site: "dst"}
	in := ReceiveInput{JobID: 1, Step: "send", Hydrate: true, DestPath: "/mnt/got",
		Targets: []TargetSpec{{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}},
		Files: []SentFile{{Path: "/f", Type: TypeFile, Target: "t", Key: contentKey(sum), Checksum: sum,
			Size: int64(len(data)), Mtime: time.Now().UnixNano()}}}
	flushed = nil
	out := receive(t, a, in)
	require.Equal(t, OutcomeSuccess, out.Outcomes[0].State, out.Outcomes[0].Message)
	require.Equal(t, []uint64{rootDev, mountDev}, flushed, "the received file's filesystem too")
}

// TestMountsBeneathTheRootDoNotShareReferences: two filesystems mounted
// beneath the root hold one tree, copied: the same inode numbers, and
// birth times that are the same or none. Their files' references must
// still differ: the reverse_stub of one (its reference dropped) left the
// other's stub without its reference, refused at its recall, and its
// content for the collector. Now a file on a mount names its device in
// its reference.
func TestMountsBeneathTheRootDoNotShareReferences(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := mountTmpfs(t, dir)
	b := filepath.Join(dir, "copy")
	require.NoError(t, os.Mkdir(b, 0o755))
	require.NoError(t, unix.Mount("tmpfs", b, "tmpfs", 0, "size=16m"))
	t.Cleanup(func() { _ = unix.Unmount(b, unix.MNT_DETACH) })
	data := []byte("one tree, copied to two filesystems")
	for _, m := range []string{a, b} {
		require.NoError(t, os.WriteFile(filepath.Join(m, "x"), data, 0o644))
	}
	var sa, sb unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(a, "x"), &sa))
	require.NoError(t, unix.Stat(filepath.Join(b, "x"), &sb))
	require.Equal(t, sa.Ino, sb.Ino, "a fresh tmpfs numbers its inodes from the same start")

	root := newRoot(t, dir, true)
	target := fsTarget(t)
	paths := []string{"/mnt/x", "/copy/x"}
	res, err := Migrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	_, ra, err := root.Stat("/mnt/x")
	require.NoError(t, err)
	_, rb, err := root.Stat("/copy/x")
	require.NoError(t, err)
	require.NotEqual(t, ra.Ref, rb.Ref)

	res, err = ReverseStub(ctx, root, []string{"/mnt/x"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/mnt/x"})
	res, err = Recall(ctx, root, []string{"/copy/x"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/copy/x"})
	got, err := os.ReadFile(filepath.Join(b, "x"))
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// TestSpaceRemovalIsFlushedBeforeItIsReported: a C+J space's removal (its
// folder moved to the site trash) is on disk before it is reported: a
// crash rolling the move back would bring the folder back under a name
// freed for another space. A failed flush fails the removal, which its
// retry finishes.
func TestSpaceRemovalIsFlushedBeforeItIsReported(t *testing.T) {
	dir, _, s := snapshotStubSite(t, false)
	gone := func() bool {
		_, err := os.Lstat(filepath.Join(dir, "spaces", "lab"))
		return os.IsNotExist(err)
	}
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	flushSite = func(*os.File) error { return unix.EIO }
	_, err := s.a.cjSpace(context.Background(), &CJSpace{Name: "lab"}, true)
	require.Error(t, err)
	require.True(t, gone(), "moved to the trash, not yet reported")

	flushed := false
	flushSite = func(d *os.File) error {
		flushed = flushed || gone()
		return fsutil.SyncFSOf(d)
	}
	msg, err := s.a.cjSpace(context.Background(), &CJSpace{Name: "lab"}, true)
	require.NoError(t, err)
	require.Contains(t, msg, "removed spaces/lab")
	require.True(t, flushed)
	require.NoError(t, s.a.Root.RestoreFromTrash(context.Background(), trashEntry(t, dir), "/spaces/lab"))
	s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
}

// TestSnapshotFlushHeartbeatsAndAStaleAttemptPlacesNothing: a snapshot
// heartbeats while its flushes run (a slow flush is not taken for a dead
// worker, whose attempt Temporal would retry beside it), and an attempt
// whose time ran out meanwhile places nothing: its item may have been
// given up and removed since. Before, a flush stuck past the heartbeat
// timeout let a retry run beside it, and the stale attempt then placed a
// snapshot no item tracked. (Not parallel: the hooks are the package's.)
func TestSnapshotFlushHeartbeatsAndAStaleAttemptPlacesNothing(t *testing.T) {
	dir, tdir, s := snapshotStubSite(t, false)
	placed := func() bool {
		_, err := os.Lstat(filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))
		return err == nil
	}
	savedEvery, savedBeat := beatEvery, beat
	var beats atomic.Int32
	beatEvery = 5 * time.Millisecond
	beat = func(ctx context.Context, details ...any) { beats.Add(1); savedBeat(ctx, details...) }
	t.Cleanup(func() { flushSite, beatEvery, beat = fsutil.SyncFSOf, savedEvery, savedBeat })

	var during atomic.Int32
	flushSite = func(d *os.File) error {
		before := beats.Load()
		time.Sleep(100 * time.Millisecond)
		during.Add(beats.Load() - before)
		return fsutil.SyncFSOf(d)
	}
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(s.a)
	ch := CJChange{Type: CJSnapshots, Name: "s1", Snapshot: snapshotOfLab(tdir)}
	_, err := env.ExecuteActivity(s.a.CJApply, ch)
	require.NoError(t, err)
	require.True(t, placed())
	require.Positive(t, during.Load(), "heartbeats while the flush runs (%d in all)", beats.Load())
	_, err = s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), true)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	flushSite = func(d *os.File) error {
		cancel() // the attempt's time runs out during its flush
		return fsutil.SyncFSOf(d)
	}
	_, err = s.a.cjSnapshot(ctx, snapshotOfLab(tdir), false)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, placed(), "a stale attempt places nothing")
}

// TestSnapshotRemovalTakesTheMovesLock: a snapshot's removal moves it to
// the trash under the site's moves lock, as every move of a folder does,
// so that a step inside it (a recall of one of its stubs) that checked its
// folder under the lock is not moved away before its rename.
func TestSnapshotRemovalTakesTheMovesLock(t *testing.T) {
	t.Parallel()
	dir, tdir, s := snapshotStubSite(t, false)
	ctx := context.Background()
	_, err := s.a.cjSnapshot(ctx, snapshotOfLab(tdir), false)
	require.NoError(t, err)
	held, err := flockWithin(filepath.Join(dir, hubDir, movesLockFile), time.Second, nil, nil)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = s.a.cjSnapshot(short, snapshotOfLab(tdir), true)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.DirExists(t, filepath.Join(dir, cjSnapshotsDir, "lab", "s1"), "not moved while another move runs")
	held()
	_, err = s.a.cjSnapshot(ctx, snapshotOfLab(tdir), true)
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))
}
