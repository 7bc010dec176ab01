package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// The names a sync parks files under (a download about to be exchanged,
// the destination's former file after the exchange, a file a replayed
// deletion sets aside) are private (fsutil.PrivateName): no writer's
// temporary file ever takes them, so no writer reuses, truncates or
// commits a parked file, and a rerun after a kill tells what it finds
// there. These tests play the ways that went wrong when those names were
// writers' temporary names (a review of transfer.go).

// TestAWriterNeverTakesTheDestinationsFormerFile: the destination's file
// carries a stale temporary marker (a commit killed between its rename and
// the marker's removal). While a sync has exchanged it out, a second
// writer of the same path opens its own temporary file: it gets a new,
// empty one, and the former file is neither truncated nor lost.
func TestAWriterNeverTakesTheDestinationsFormerFile(t *testing.T) {
	fx := newTransferFixture(t, false)
	older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
	fx.write(t, "/f.txt", "the user's data, older than the source's", older)
	require.NoError(t, unix.Setxattr(fx.abs("/f.txt"), "user.hub.tmp", []byte("1"), 0))
	var other *os.File
	exchangeRace = func(string) {
		var err error
		other, err = fsutil.OpenTemp(context.Background(), fx.abs("/f.txt")) // a second writer of /f.txt
		require.NoError(t, err)
		fi, err := other.Stat()
		require.NoError(t, err)
		require.Zero(t, fi.Size(), "a temporary file of its own")
		parked, err := os.ReadFile(fx.abs("/" + filepath.Base(fsutil.PrivateName("xchg", "f.txt"))))
		require.NoError(t, err)
		require.Equal(t, "the user's data, older than the source's", string(parked), "the former file is untouched")
	}
	t.Cleanup(func() { exchangeRace = nil })
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
	require.NoError(t, err)
	require.Equal(t, "copied", msg)
	require.NotNil(t, other)
	fsutil.Discard(other)
	fx.requireFile(t, "/f.txt", string(fx.data), time.Unix(0, fx.sent.Mtime))
	requireNoTemp(t, fx.dir)
}

// TestAKilledExchangeBesideAnotherTemp: the download's own temporary name
// was in the way (a leftover temporary file hard-linked by a snapshot
// tool), so the download took a random name. Killed after the exchange,
// the rerun keeps the destination's former file beside the name and
// leaves the leftover alone.
func TestAKilledExchangeBesideAnotherTemp(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	fx := newTransferFixtureAt(t, dir, tdir, false)
	older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
	fx.write(t, "/f.txt", "the destination's older copy", older)
	leftover := fx.abs("/" + fsutil.TmpPrefix + "f.txt")
	require.NoError(t, os.WriteFile(leftover, []byte("half of an old killed download"), 0o600))
	require.NoError(t, unix.Setxattr(leftover, "user.hub.tmp", []byte("1"), 0))
	require.NoError(t, os.MkdirAll(fx.abs("/snap"), 0o755))
	require.NoError(t, os.Link(leftover, fx.abs("/snap/x"))) // two links: not the hub's to reuse
	require.True(t, runChild(t, "^TestSyncReplaceFaultChild$", "HUB_REPLACE_FAULT_ROOT="+dir,
		"HUB_REPLACE_FAULT_TARGET="+tdir, "HUB_REPLACE_FAULT_INDEX=0", "HUB_FAULT_POINT=sync.replace.exchanged@1"))
	msg := syncReplace(t, dir, tdir, false)
	require.Contains(t, msg, "the file an interrupted sync set aside is kept as f.txt.sync-kept-")
	requireKeptOnce(t, fx, "f.txt", "the destination's older copy")
	got, err := os.ReadFile(leftover)
	require.NoError(t, err)
	require.Equal(t, "half of an old killed download", string(got), "the leftover is not taken for the former file")
}

// TestAKillAtEveryPointOfAnExchange: a sync's replacement killed at each
// of its points, then run again: the destination ends with the download in
// place, its former file either replaced (the kill came after the
// decision) or kept beside it, nothing else kept, and nothing parked or
// temporary left.
func TestAKillAtEveryPointOfAnExchange(t *testing.T) {
	for _, point := range []string{"sync.replace.parked@1", "sync.replace.exchanged@1", "commit.before-rename@1", "commit.renamed@1"} {
		dir, tdir := t.TempDir(), t.TempDir()
		fx := newTransferFixtureAt(t, dir, tdir, false)
		older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
		fx.write(t, "/f.txt", "the destination's older copy", older)
		require.True(t, runChild(t, "^TestSyncReplaceFaultChild$", "HUB_REPLACE_FAULT_ROOT="+dir,
			"HUB_REPLACE_FAULT_TARGET="+tdir, "HUB_REPLACE_FAULT_INDEX=0", "HUB_FAULT_POINT="+point), point)
		// A later write of the path, killed mid-download, left its
		// temporary file (a stale exchange mark at the name must not make
		// it pass for a set-aside file).
		temp := fx.abs("/" + fsutil.TmpPrefix + "f.txt")
		if !fileExists(temp) {
			require.NoError(t, os.WriteFile(temp, []byte("partial dow"), 0o600))
			require.NoError(t, unix.Setxattr(temp, "user.hub.tmp", []byte("1"), 0))
		}
		msg := syncReplace(t, dir, tdir, false)
		require.NotContains(t, msg, "kept the destination's copy", point)
		fx.requireFile(t, "/f.txt", string(fx.data), time.Unix(0, fx.sent.Mtime))
		kept, err := filepath.Glob(fx.abs("/f.txt.sync-kept-*"))
		require.NoError(t, err)
		for _, k := range kept {
			got, err := os.ReadFile(k)
			require.NoError(t, err)
			require.Equal(t, "the destination's older copy", string(got), "%s: only the former file is kept", point)
		}
		if got, err := os.ReadFile(temp); err == nil {
			// A rerun that found the file up to date wrote nothing: the
			// killed write's leftover is as it was, for its own rerun.
			require.Equal(t, "partial dow", string(got), point)
			require.NoError(t, os.Remove(temp))
		}
		requireNoTemp(t, dir)
	}
}

// requireKeptOnce asserts that one file is kept beside name
// (<name>.sync-kept-<ns>), holding content, and answers its name.
func requireKeptOnce(t *testing.T, fx *transferFixture, name, content string) string {
	t.Helper()
	kept, err := filepath.Glob(fx.abs("/" + name + ".sync-kept-*"))
	require.NoError(t, err)
	require.Len(t, kept, 1, name)
	got, err := os.ReadFile(kept[0])
	require.NoError(t, err)
	require.Equal(t, content, string(got), name)
	return filepath.Base(kept[0])
}

func fileExists(name string) bool {
	_, err := os.Lstat(name)
	return err == nil
}

// TestAParkedDownloadGoesWhateverComesNext: a sync killed with its
// download parked, then another version of the file or a deletion of the
// path received: the parked download (untouched since its mark) is
// removed, not shown as the user's kept file nor left hidden.
func TestAParkedDownloadGoesWhateverComesNext(t *testing.T) {
	for _, next := range []string{"another version", "a deletion"} {
		dir, tdir := t.TempDir(), t.TempDir()
		fx := newTransferFixtureAt(t, dir, tdir, false)
		older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
		fx.write(t, "/f.txt", "the destination's older copy", older)
		require.True(t, runChild(t, "^TestSyncReplaceFaultChild$", "HUB_REPLACE_FAULT_ROOT="+dir,
			"HUB_REPLACE_FAULT_TARGET="+tdir, "HUB_REPLACE_FAULT_INDEX=0", "HUB_FAULT_POINT=sync.replace.parked@1"))
		require.FileExists(t, fx.abs("/"+filepath.Base(fsutil.PrivateName("xchg", "f.txt"))))
		f := SentFile{Path: "/f.txt", Type: TypeFile, Change: Deleted, Size: 28, Mtime: older.UnixNano()}
		if next == "another version" {
			f = fx.sent
			f.Mtime++
		}
		msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, f, nil)
		require.NoError(t, err, next)
		require.NotContains(t, msg, "sync-kept", next)
		kept, err := filepath.Glob(fx.abs("/f.txt.sync-kept-*"))
		require.NoError(t, err)
		require.Empty(t, kept, next)
		requireNoTemp(t, dir)
	}
}

// TestALongNamesSaveIsKept: a name too long for <name>.sync-kept-<ns>
// within NAME_MAX (about 80 characters of Chinese in UTF-8): a save made
// over the download during the exchange is kept beside the file under a
// shortened name, not left hidden.
func TestALongNamesSaveIsKept(t *testing.T) {
	fx := newTransferFixture(t, false)
	long := strings.Repeat("档", 76) + ".txt" // 232 bytes
	sent := fx.sent
	sent.Path = "/" + long
	older := time.Unix(0, sent.Mtime).Add(-time.Hour)
	fx.write(t, sent.Path, "the destination's older copy", older)
	held, err := os.OpenFile(fx.abs(sent.Path), os.O_WRONLY, 0)
	require.NoError(t, err)
	exchangeRace = func(string) {
		_, _ = held.WriteAt([]byte("written through a descriptor"), 0) // the former file changed: exchanged back
		_ = held.Close()
		fx.write(t, "/swp", "the user's newest save, over the download", time.Now())
		require.NoError(t, os.Rename(fx.abs("/swp"), fx.abs(sent.Path)))
	}
	t.Cleanup(func() { exchangeRace = nil })
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, sent, nil)
	require.NoError(t, err)
	require.Contains(t, msg, "a save made meanwhile is kept as ")
	kept, err := filepath.Glob(fx.abs("/*.sync-kept-*"))
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.LessOrEqual(t, len(filepath.Base(kept[0])), 255)
	require.True(t, strings.HasPrefix(filepath.Base(kept[0]), strings.Repeat("档", 70)), "cut at a character")
	got, err := os.ReadFile(kept[0])
	require.NoError(t, err)
	require.Equal(t, "the user's newest save, over the download", string(got))
	requireNoTemp(t, fx.dir)
}

// TestALocalSyncsRetryFlushesItsWrite: with sync_preference local, a
// retry finds the file its first attempt wrote (then failed before the
// flush): it is up to date, so flushed, not skipped as the destination's
// own copy.
func TestALocalSyncsRetryFlushesItsWrite(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false), Site: "dst"}
	data := []byte("sent content")
	sum := putContent(t, tdir, data)
	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	in := ReceiveInput{JobID: 1, Step: "site_sync", Preference: "local", Targets: []TargetSpec{spec},
		Files: []SentFile{{Path: "/got.txt", Type: TypeFile, Target: "t", Key: contentKey(sum), Checksum: sum,
			Size: int64(len(data)), Mtime: time.Now().UnixNano()}}}
	flushes := 0
	flushSite = func(*os.File) error { flushes++; return unix.EIO }
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	var out StepOutput
	require.ErrorContains(t, runActivity(a, a.Receive, in, &out), "flush received files")

	flushes = 0
	flushSite = func(d *os.File) error { flushes++; return fsutil.SyncFSOf(d) }
	out = *receive(t, a, in)
	require.Equal(t, OutcomeSuccess, out.Outcomes[0].State)
	require.Equal(t, "already up to date", out.Outcomes[0].Message)
	require.Positive(t, flushes, "the retry flushes what its first attempt wrote")
}

// TestADeletionsAsideIsNoWritersTemp: a write of /del-foo in flight and a
// replayed deletion of /foo, which the destination no longer has: the
// deletion takes nothing for foo's set-aside file, and the write commits.
func TestADeletionsAsideIsNoWritersTemp(t *testing.T) {
	fx := newTransferFixture(t, false)
	tmp, err := fsutil.OpenTemp(context.Background(), fx.abs("/del-foo"))
	require.NoError(t, err)
	_, err = tmp.WriteString("half of del-foo's download")
	require.NoError(t, err)
	del := SentFile{Path: "/foo", Type: TypeFile, Change: Deleted, Size: 13, Mtime: fx.sent.Mtime}
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
	require.NoError(t, err)
	require.Equal(t, "already deleted", msg)
	require.NoFileExists(t, fx.abs("/foo"))
	require.NoError(t, fsutil.Commit(tmp, fx.abs("/del-foo")))
	got, err := os.ReadFile(fx.abs("/del-foo"))
	require.NoError(t, err)
	require.Equal(t, "half of del-foo's download", string(got))

	// A set-aside file of a version before private names (the legacy
	// name) is put back, unless the hub marked it as a write's temporary
	// file.
	legacy := fx.abs("/" + fsutil.TmpPrefix + "del-bar")
	require.NoError(t, os.WriteFile(legacy, []byte("bar, edited"), 0o644))
	del.Path = "/bar"
	msg, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
	require.NoError(t, err)
	require.Contains(t, msg, "kept the destination's copy")
	got, err = os.ReadFile(fx.abs("/bar"))
	require.NoError(t, err)
	require.Equal(t, "bar, edited", string(got))
	tmp, err = fsutil.OpenTemp(context.Background(), fx.abs("/del-baz"))
	require.NoError(t, err)
	del.Path = "/baz"
	msg, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
	require.NoError(t, err)
	require.Equal(t, "already deleted", msg)
	require.NoFileExists(t, fx.abs("/baz"))
	fsutil.Discard(tmp)
}

// TestASetAsideFileWhoseNameWasTaken: a replayed deletion killed once the
// file is set aside; before the rerun, a file is written at its name. The
// rerun keeps the set-aside file beside it (not hidden), and a later
// deletion of the path works.
func TestASetAsideFileWhoseNameWasTaken(t *testing.T) {
	fx := newTransferFixture(t, false)
	synced := time.Unix(0, fx.sent.Mtime)
	fx.write(t, "/f.txt", "synced, then edited on the destination", synced.Add(time.Hour))
	aside := fx.abs("/" + filepath.Base(fsutil.PrivateName("del", "f.txt")))
	require.NoError(t, os.Rename(fx.abs("/f.txt"), aside)) // the kill at sync.delete.aside
	fx.write(t, "/f.txt", "new", time.Now())
	del := SentFile{Path: "/f.txt", Type: TypeFile, Change: Deleted, Size: 3, Mtime: fx.sent.Mtime}
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
	require.NoError(t, err)
	require.Contains(t, msg, "the file an interrupted deletion set aside is kept as f.txt.sync-kept-")
	require.NoFileExists(t, aside)
	requireKeptOnce(t, fx, "f.txt", "synced, then edited on the destination")

	fx.write(t, "/f.txt", "new", synced) // the version the source then deletes
	msg, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
	require.NoError(t, err)
	require.Equal(t, "deleted", msg)
	requireNoTemp(t, fx.dir)
}

// TestASetAsideFileComesBackWhateverComesNext: a replayed deletion was
// killed with the destination's file set aside, and what the next sync
// brings for the path is not that deletion but a new version of the file.
// The receive wrote it at the free name and the set-aside file stayed
// hidden for ever (only hub site leftovers --settle found it). Now every
// receive of a file settles it first: it is back at its name and judged
// like any file of the destination's (here, an edit newer than what is
// sent is kept; an older one is replaced, as it would have been).
func TestASetAsideFileComesBackWhateverComesNext(t *testing.T) {
	fx := newTransferFixture(t, false)
	synced := time.Unix(0, fx.sent.Mtime)
	aside := fx.abs("/" + filepath.Base(fsutil.PrivateName("del", "f.txt")))
	in := ReceiveInput{Step: "site_sync", Preference: "newest"}

	fx.write(t, "/f.txt", "edited on the destination", synced.Add(time.Hour))
	require.NoError(t, os.Rename(fx.abs("/f.txt"), aside)) // the kill at sync.delete.aside
	msg, err := fx.receive(in, fx.sent, nil)
	require.NoError(t, err)
	require.Equal(t, "kept the destination's newer copy", msg)
	require.NoFileExists(t, aside)
	fx.requireFile(t, "/f.txt", "edited on the destination", synced.Add(time.Hour))

	fx.write(t, "/f.txt", "an older copy", synced.Add(-time.Hour))
	require.NoError(t, os.Rename(fx.abs("/f.txt"), aside))
	msg, err = fx.receive(in, fx.sent, nil)
	require.NoError(t, err)
	require.Equal(t, "copied", msg)
	require.NoFileExists(t, aside)
	fx.requireFile(t, "/f.txt", string(fx.data), synced)
	requireNoTemp(t, fx.dir)

	// Earlier versions set files aside under .hub-tmp-del-<name>, also
	// the temporary name of a write of del-<name>: one killed before it
	// marked its file left it empty and unmarked, and a write that reused
	// it unmarked, killed in turn, left part of del-f.txt there. A receive
	// of the path never takes such a file (the reviewer's finding: it
	// became f.txt, "newer" than the file sent), nor does a deletion's
	// rerun an empty one.
	require.NoError(t, os.Remove(fx.abs("/f.txt")))
	killed := fx.abs("/" + fsutil.TmpPrefix + "del-f.txt")
	require.NoError(t, os.WriteFile(killed, []byte("part of del-f.txt"), 0o600))
	msg, err = fx.receive(in, fx.sent, nil)
	require.NoError(t, err)
	require.Equal(t, "copied", msg)
	fx.requireFile(t, "/f.txt", string(fx.data), synced)
	require.NoError(t, os.Remove(fx.abs("/f.txt")))
	require.NoError(t, os.Truncate(killed, 0))
	msg, err = fx.receive(in, SentFile{Path: "/f.txt", Type: TypeFile, Change: Deleted, Size: fx.sent.Size, Mtime: fx.sent.Mtime}, nil)
	require.NoError(t, err)
	require.Equal(t, "already deleted", msg)
	require.NoFileExists(t, fx.abs("/f.txt"))
	require.FileExists(t, killed, "left for hub site leftovers")
}

// TestSymlinksDeletionsAreNotReplayed: symlinks are never sent, so the
// destination's symlink at a path is its own: a deletion or a move of a
// symlink at the source leaves it; the source does not even send them.
func TestSymlinksDeletionsAreNotReplayed(t *testing.T) {
	fx := newTransferFixture(t, false)
	require.NoError(t, os.Symlink("../my/own/target", fx.abs("/link")))
	old := time.Unix(0, fx.sent.Mtime).Add(-time.Hour).UnixNano()
	require.NoError(t, unix.UtimesNanoAt(unix.AT_FDCWD, fx.abs("/link"),
		[]unix.Timespec{unix.NsecToTimespec(old), unix.NsecToTimespec(old)}, unix.AT_SYMLINK_NOFOLLOW))
	for _, change := range []Change{Deleted, Moved} {
		f := SentFile{Path: "/link", Type: TypeSymlink, Change: change, OldPath: "/link", Size: 5, Mtime: fx.sent.Mtime}
		msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, f, nil)
		require.NoError(t, err)
		require.Contains(t, msg, "only files and directories are synced")
		target, err := os.Readlink(fx.abs("/link"))
		require.NoError(t, err)
		require.Equal(t, "../my/own/target", target)
	}
	a := &Activities{Root: fx.root, Site: "src"}
	outs, err := a.sendChunk(StepInput{}, nil)(context.Background(), []batchEntry{{Path: "/gone", Type: TypeSymlink, Change: Deleted}})
	require.NoError(t, err)
	require.Equal(t, OutcomeSkipped, outs[0].State)
	require.Nil(t, outs[0].Sent)
}

// TestAnEarlierVersionsExchangeIsFinished: a worker of an earlier version
// killed after its exchange left the download at the name (marked
// "exchange", without size and mtime) and the destination's former file
// under the download's temporary name, here with a stale temporary marker
// of its own. The rerun keeps that file beside the name: no later write
// reuses and truncates it.
func TestAnEarlierVersionsExchangeIsFinished(t *testing.T) {
	fx := newTransferFixture(t, false)
	fx.write(t, "/f.txt", string(fx.data), time.Unix(0, fx.sent.Mtime))
	require.NoError(t, unix.Setxattr(fx.abs("/f.txt"), "user.hub.tmp", []byte("exchange"), 0))
	former := fx.abs("/" + fsutil.TmpPrefix + "f.txt")
	require.NoError(t, os.WriteFile(former, []byte("the destination's older copy"), 0o644))
	require.NoError(t, unix.Setxattr(former, "user.hub.tmp", []byte("1"), 0))
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
	require.NoError(t, err)
	require.Contains(t, msg, "the file an interrupted sync set aside is kept as f.txt.sync-kept-")
	requireKeptOnce(t, fx, "f.txt", "the destination's older copy")
	require.NoFileExists(t, former)
}
