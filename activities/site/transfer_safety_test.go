package site

import (
	"context"
	"io"
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

// The tests below play a user's action at the exact instant a receive
// could lose data to it: through receiveRace (between a replayed
// deletion's or move's check and its change), through a target whose Get
// or reference write does it (hookDriver), or by killing the worker at
// each fault point of a move. Each runs on both state backends.

var stateBackends = map[string]bool{"xattr state": false, "index state": true}

// hookDriver is a target that calls afterGet when a Get's reader reaches
// its end (the download is complete, not yet in place) and afterRef once a
// reference marker is written.
type hookDriver struct {
	targets.Driver
	afterGet, afterRef func()
}

func (h *hookDriver) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := h.Driver.Get(ctx, key)
	if err != nil || h.afterGet == nil {
		return rc, err
	}
	return &eofHook{ReadCloser: rc, fn: h.afterGet}, nil
}

func (h *hookDriver) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	err := h.Driver.Put(ctx, key, r, size)
	if err == nil && strings.HasPrefix(key, refsDir) && h.afterRef != nil {
		h.afterRef()
	}
	return err
}

type eofHook struct {
	io.ReadCloser
	fn   func()
	done bool
}

func (r *eofHook) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err == io.EOF && !r.done {
		r.done = true
		r.fn()
	}
	return n, err
}

// transferFixture is a destination site with a filesystem target "t"
// holding one sent object.
type transferFixture struct {
	dir, tdir string
	root      *Root
	a         *Activities
	target    targets.Driver
	data      []byte
	sent      SentFile
}

func newTransferFixture(t *testing.T, index bool) *transferFixture {
	t.Helper()
	return newTransferFixtureAt(t, t.TempDir(), t.TempDir(), index)
}

// newTransferFixtureAt is newTransferFixture at these folders (a site's,
// a target's), which may hold what an earlier fixture left.
func newTransferFixtureAt(t *testing.T, dir, tdir string, index bool) *transferFixture {
	t.Helper()
	fx := &transferFixture{dir: dir, tdir: tdir, data: []byte("the sent content")}
	fx.root = newRoot(t, fx.dir, index)
	fx.a = &Activities{Root: fx.root, Site: "dst"}
	var err error
	fx.target, err = targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: fx.tdir})
	require.NoError(t, err)
	sum := sha(fx.data)
	require.NoError(t, fx.target.Put(context.Background(), contentKey(sum), strings.NewReader(string(fx.data)), int64(len(fx.data))))
	fx.sent = SentFile{Path: "/f.txt", Type: TypeFile, Target: "t", Key: contentKey(sum), Size: int64(len(fx.data)),
		Mtime: time.Date(2024, 5, 6, 7, 8, 9, 123, time.UTC).UnixNano(), Checksum: sum}
	return fx
}

// receive runs receiveOne with the target d (fx.target if nil).
func (fx *transferFixture) receive(in ReceiveInput, f SentFile, d targets.Driver) (string, error) {
	if d == nil {
		d = fx.target
	}
	ds := newDriverSet(nil, nil)
	ds.opened["t"] = d
	return fx.a.receiveOne(context.Background(), in, f, ds, func(int) {})
}

func (fx *transferFixture) abs(p string) string { return filepath.Join(fx.dir, filepath.FromSlash(p)) }

// write makes a destination file with this content and mtime.
func (fx *transferFixture) write(t *testing.T, p, content string, mtime time.Time) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(fx.abs(p)), 0o755))
	require.NoError(t, os.WriteFile(fx.abs(p), []byte(content), 0o644))
	require.NoError(t, os.Chtimes(fx.abs(p), mtime, mtime))
}

// requireFile checks a destination file's content and mtime.
func (fx *transferFixture) requireFile(t *testing.T, p, content string, mtime time.Time) {
	t.Helper()
	got, err := os.ReadFile(fx.abs(p))
	require.NoError(t, err, p)
	require.Equal(t, content, string(got), p)
	fi, err := os.Stat(fx.abs(p))
	require.NoError(t, err)
	require.True(t, mtime.Equal(fi.ModTime()), "%s mtime %v, want %v", p, fi.ModTime(), mtime)
}

// record is the trusted record of a destination file (nil: resident).
func (fx *transferFixture) record(t *testing.T, p string) *Record {
	t.Helper()
	_, rec, err := fx.root.Stat(p)
	require.NoError(t, err, p)
	return rec
}

// requireRecall recalls p and checks it holds data again.
func (fx *transferFixture) requireRecall(t *testing.T, p string, data []byte) {
	t.Helper()
	res, err := Recall(context.Background(), fx.root, []string{p}, only("t", fx.target), StepOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, CodeOK, res[0].Code, "%s: %s", p, res[0].Message)
	got, err := os.ReadFile(fx.abs(p))
	require.NoError(t, err)
	require.Equal(t, data, got, p)
}

// withReceiveRace plays race at the instant between a replayed deletion's
// or move's check and its change. Tests using it do not run in parallel
// (receiveRace is the package's), so no other receive meets it.
func withReceiveRace(t *testing.T, race func(rel string)) {
	receiveRace = race
	t.Cleanup(func() { receiveRace = nil })
}

// TestStubSendFailureKeepsDestination: a stub send that fails once the
// stub's reference or content is found wanting leaves the destination's
// own file exactly as it was (content, mtime, no record), no temporary
// file and no reference. Before, the empty stub had already replaced the
// file: a failed reference left a 0-byte file with the sent mtime and no
// record, a vanished content removed the path.
func TestStubSendFailureKeepsDestination(t *testing.T) {
	t.Parallel()
	own := time.Date(2023, 1, 2, 3, 4, 5, 6, time.UTC)
	send := ReceiveInput{Step: "send"}
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Run("reference refused", func(t *testing.T) {
				fx := newTransferFixture(t, index)
				fx.write(t, "/f.txt", "the destination's own file", own)
				// The target cannot take the reference marker.
				sum := fx.sent.Checksum
				require.NoError(t, os.MkdirAll(filepath.Join(fx.tdir, "refs"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(fx.tdir, "refs", sum[:2]), nil, 0o644))
				_, err := fx.receive(send, fx.sent, nil)
				require.Error(t, err)
				fx.requireFile(t, "/f.txt", "the destination's own file", own)
				require.Nil(t, fx.record(t, "/f.txt"))
				requireNoTemp(t, fx.dir)
			})
			t.Run("content gone once referenced", func(t *testing.T) {
				fx := newTransferFixture(t, index)
				fx.write(t, "/f.txt", "the destination's own file", own)
				// The object goes (a collector, an operator) just after
				// the stub's reference is written.
				d := &hookDriver{Driver: fx.target, afterRef: func() {
					require.NoError(t, fx.target.Delete(context.Background(), fx.sent.Key))
				}}
				_, err := fx.receive(send, fx.sent, d)
				require.ErrorIs(t, err, targets.ErrNotFound)
				fx.requireFile(t, "/f.txt", "the destination's own file", own)
				require.Nil(t, fx.record(t, "/f.txt"))
				require.Zero(t, countRefs(t, fx.target), "the stub's reference is dropped")
				requireNoTemp(t, fx.dir)
			})
			t.Run("success", func(t *testing.T) {
				fx := newTransferFixture(t, index)
				fx.write(t, "/f.txt", "the destination's own file", own)
				msg, err := fx.receive(send, fx.sent, nil)
				require.NoError(t, err)
				require.Equal(t, "stub", msg)
				fx.requireFile(t, "/f.txt", "", time.Unix(0, fx.sent.Mtime))
				rec := fx.record(t, "/f.txt")
				require.NotNil(t, rec)
				require.Equal(t, Migrated, rec.State)
				require.Equal(t, 1, countRefs(t, fx.target))
				requireNoTemp(t, fx.dir)
				fx.requireRecall(t, "/f.txt", fx.data)
			})
		})
	}
}

// TestSyncDeletionNeverRecurses: a file the source deleted is removed with
// unlink, a directory only when empty, so a folder swapped in for the file
// (RENAME_EXCHANGE) between the check and the removal keeps everything in
// it (it is put back: not the file the deletion chose), and a file swapped
// in for an empty directory stays too. Before, the
// file was removed with RemoveAll, and the directory with os.Remove
// (which unlinks a file).
func TestSyncDeletionNeverRecurses(t *testing.T) {
	sync := ReceiveInput{Step: "site_sync", Preference: "ignore"}
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			fx := newTransferFixture(t, index)
			mtime := time.Unix(0, fx.sent.Mtime)
			fx.write(t, "/x", "synced before", mtime)
			fx.write(t, "/swap/keep.txt", "the destination's own", mtime)
			fx.write(t, "/e.txt", "the destination's own", mtime)
			require.NoError(t, os.Mkdir(fx.abs("/e"), 0o755))
			withReceiveRace(t, func(rel string) {
				switch rel {
				case "x": // the file becomes a folder holding keep.txt
					require.NoError(t, unix.Renameat2(unix.AT_FDCWD, fx.abs("/x"), unix.AT_FDCWD, fx.abs("/swap"), unix.RENAME_EXCHANGE))
				case "e": // the empty folder becomes a file
					require.NoError(t, unix.Renameat2(unix.AT_FDCWD, fx.abs("/e"), unix.AT_FDCWD, fx.abs("/e.txt"), unix.RENAME_EXCHANGE))
				}
			})
			msg, err := fx.receive(sync, SentFile{Path: "/x", Type: TypeFile, Change: Deleted, Size: 13, Mtime: fx.sent.Mtime}, nil)
			require.NoError(t, err)
			require.Equal(t, "kept the destination's copy: it changed during the deletion", msg)
			fx.requireFile(t, "/x/keep.txt", "the destination's own", mtime)

			_, err = fx.receive(sync, SentFile{Path: "/e", Type: TypeDirectory, Change: Deleted}, nil)
			require.Error(t, err)
			fx.requireFile(t, "/e", "the destination's own", mtime)

			// Without a race: a file goes, an empty folder goes, a folder
			// holding files stays.
			receiveRace = nil
			fx.write(t, "/y", "synced before", mtime)
			require.NoError(t, os.MkdirAll(fx.abs("/empty"), 0o755))
			for p, want := range map[string]string{"/y": "deleted", "/empty": "deleted", "/x": "kept the destination's directory: it holds files"} {
				typ := map[bool]string{true: TypeDirectory, false: TypeFile}[p != "/y"]
				msg, err := fx.receive(sync, SentFile{Path: p, Type: typ, Change: Deleted, Size: 13, Mtime: fx.sent.Mtime}, nil)
				require.NoError(t, err, p)
				require.Equal(t, want, msg, p)
			}
			require.NoFileExists(t, fx.abs("/y"))
			require.NoDirExists(t, fx.abs("/empty"))
			fx.requireFile(t, "/x/keep.txt", "the destination's own", mtime)
		})
	}
}

// TestSyncMoveNeverReplaces: a file a user creates at a move's new path
// between the check and the rename is kept (RENAME_NOREPLACE), and so is
// the old path with its record; with sync_preference ignore the source
// wins. Before, the rename replaced the user's file.
func TestSyncMoveNeverReplaces(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			fx := newTransferFixture(t, index)
			old := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)
			fx.write(t, "/old.txt", string(fx.data), old)
			_, err := Migrate(ctx, fx.root, []string{"/old.txt"}, fx.target, "t", StepOptions{})
			require.NoError(t, err)
			require.NotNil(t, fx.record(t, "/old.txt"))
			now := time.Now()
			withReceiveRace(t, func(rel string) {
				if rel == "new.txt" {
					fx.write(t, "/new.txt", "the user's new file", now)
				}
			})
			move := SentFile{Path: "/new.txt", Type: TypeFile, Change: Moved, OldPath: "/old.txt"}
			for _, pref := range []string{"newest", "local"} {
				msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: pref}, move, nil)
				require.NoError(t, err)
				require.Equal(t, keptAtNewPath, msg)
				fx.requireFile(t, "/new.txt", "the user's new file", now)
				rec, err := fx.root.state.index.get("new.txt")
				require.NoError(t, err)
				require.Nil(t, rec, "the records copied for the move are taken back")
				require.NoError(t, os.Remove(fx.abs("/new.txt")))
			}
			require.NotNil(t, fx.record(t, "/old.txt"))

			// The source wins with ignore.
			fx.write(t, "/new.txt", "the user's new file", now)
			msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "ignore"}, move, nil)
			require.NoError(t, err)
			require.Equal(t, "moved", msg)
			require.NoFileExists(t, fx.abs("/old.txt"))
			require.NotNil(t, fx.record(t, "/new.txt"))
			fx.requireRecall(t, "/new.txt", fx.data)
		})
	}
}

// TestMoveThroughAFolderMovedMeanwhile: a replayed move locates its
// paths (their folders' descriptors) and then moves the file with its
// records, found by path. Another move of the old path's folder
// completing in between took the file from the folder's new place while
// the records stayed there: the moved stub had no record (its data then
// freed by an audit). The old path is now located under the moves lock,
// so such a move comes before it (the file is not found there), and one
// of the new path's folder is found by the move, which fails for a retry.
// (Not parallel: the hook is the package's.)
func TestMoveThroughAFolderMovedMeanwhile(t *testing.T) {
	for _, moved := range []string{"old", "new"} {
		t.Run(moved, func(t *testing.T) {
			fx := newTransferFixture(t, true)
			require.NoError(t, os.Mkdir(fx.abs("/d"), 0o755))
			require.NoError(t, os.Mkdir(fx.abs("/n"), 0o755))
			fx.write(t, "/d/old.txt", string(fx.data), time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC))
			_, err := Migrate(context.Background(), fx.root, []string{"/d/old.txt"}, fx.target, "t", StepOptions{})
			require.NoError(t, err)
			folder := map[string]string{"old": "d", "new": "n"}[moved]
			moveLocking = func(rel string) {
				if rel == "n/new.txt" {
					moveLocking = nil
					require.NoError(t, fx.root.moveWithRecords(context.Background(), folder, "e", nil, func() error {
						return os.Rename(fx.abs(folder), fx.abs("/e"))
					}))
				}
			}
			defer func() { moveLocking = nil }()
			move := SentFile{Path: "/n/new.txt", Type: TypeFile, Change: Moved, OldPath: "/d/old.txt"}
			_, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, move, nil)
			at := "/d/old.txt"
			if moved == "old" {
				require.ErrorContains(t, err, "which the destination does not have")
				at = "/e/old.txt"
			} else {
				require.ErrorContains(t, err, "moved while it was located")
			}
			require.NoFileExists(t, fx.abs("/n/new.txt"))
			require.NoFileExists(t, fx.abs("/e/new.txt"))
			require.NotNil(t, fx.record(t, at))
			fx.requireRecall(t, at, fx.data)
		})
	}
}

// TestRenameCheckFirst: the rename used where RENAME_NOREPLACE is refused
// (other systems, some filesystems) does not replace an entry it finds.
func TestRenameCheckFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := os.Open(dir)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b"), []byte("b"), 0o644))
	require.ErrorIs(t, renameCheckFirst(fdOf(d), "a", fdOf(d), "b"), unix.EEXIST)
	got, err := os.ReadFile(filepath.Join(dir, "b"))
	require.NoError(t, err)
	require.Equal(t, "b", string(got))
	require.NoError(t, renameCheckFirst(fdOf(d), "a", fdOf(d), "c"))
	require.NoFileExists(t, filepath.Join(dir, "a"))
	require.FileExists(t, filepath.Join(dir, "c"))
}

// TestSyncDeletionKeepsNewerFile: with sync_preference newest a deletion
// removes the destination's file only when it is the version the source
// deleted or older; a file saved at the destination since (newer, or of
// another size) is kept with the reason, as is a file whose version the
// source did not send. With ignore the source wins; with local nothing
// goes. Before, newest deleted whatever was there.
func TestSyncDeletionKeepsNewerFile(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			fx := newTransferFixture(t, index)
			synced := time.Unix(0, fx.sent.Mtime)
			del := SentFile{Path: "/f.txt", Type: TypeFile, Change: Deleted, Size: 13, Mtime: fx.sent.Mtime}
			for _, c := range []struct {
				name, pref, content string
				mtime               time.Time
				sent                func(SentFile) SentFile
				kept                string
			}{
				{name: "as synced", pref: "newest", content: "synced before", mtime: synced},
				{name: "default preference", content: "synced before", mtime: synced},
				{name: "older", pref: "newest", content: "an older one", mtime: synced.Add(-time.Hour)},
				{name: "saved since", pref: "newest", content: "saved since", mtime: synced.Add(time.Hour), kept: "newer"},
				{name: "same mtime, other size", pref: "newest", content: "another size", mtime: synced, kept: "differs"},
				{name: "version unknown", pref: "newest", content: "synced before", mtime: synced, kept: "did not say",
					sent: func(f SentFile) SentFile { f.Mtime, f.Size = 0, 0; return f }},
				{name: "a folder holds files", pref: "newest", content: "x", mtime: synced, kept: "not the kind",
					sent: func(f SentFile) SentFile { f.Type = TypeDirectory; return f }},
				{name: "ignore", pref: "ignore", content: "saved since", mtime: synced.Add(time.Hour)},
				{name: "local", pref: "local", content: "synced before", mtime: synced, kept: "sync_preference local"},
			} {
				fx.write(t, "/f.txt", c.content, c.mtime)
				f := del
				if c.sent != nil {
					f = c.sent(f)
				}
				msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: c.pref}, f, nil)
				require.NoError(t, err, c.name)
				if c.kept == "" {
					require.Equal(t, "deleted", msg, c.name)
					require.NoFileExists(t, fx.abs("/f.txt"), c.name)
					continue
				}
				require.True(t, strings.HasPrefix(msg, "kept "), "%s: %s", c.name, msg)
				require.Contains(t, msg, c.kept, c.name)
				fx.requireFile(t, "/f.txt", c.content, c.mtime)
			}
		})
	}
}

// TestSyncReplaceRechecksDestination: a sync that found the destination's
// file older (or none) checks it again right before the download replaces
// it: a file saved (or created) there during the download is kept and
// the download discarded. With ignore the source wins. Before, the check
// ran once, before the download, and the user's save was overwritten.
func TestSyncReplaceRechecksDestination(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			fx := newTransferFixture(t, index)
			older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
			saved := time.Now()
			for _, c := range []struct {
				name, pref string
				before     bool // the destination has an older file at first
				kept       bool
			}{
				{name: "saved during the download", pref: "newest", before: true, kept: true},
				{name: "created during the download", pref: "newest", kept: true},
				{name: "created during the download (local)", pref: "local", kept: true},
				{name: "ignore", pref: "ignore", before: true},
			} {
				_ = os.Remove(fx.abs("/f.txt"))
				if c.before {
					fx.write(t, "/f.txt", "the destination's older copy", older)
				}
				d := &hookDriver{Driver: fx.target, afterGet: func() {
					fx.write(t, "/f.txt", "saved by a user", saved)
				}}
				msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: c.pref}, fx.sent, d)
				require.NoError(t, err, c.name)
				if c.kept {
					require.Equal(t, "kept the destination's copy: it changed during the download", msg, c.name)
					fx.requireFile(t, "/f.txt", "saved by a user", saved)
				} else {
					require.Equal(t, "copied", msg, c.name)
					fx.requireFile(t, "/f.txt", string(fx.data), time.Unix(0, fx.sent.Mtime))
				}
				requireNoTemp(t, fx.dir)
			}
		})
	}
}

// moveTree is what the move tests migrate at the destination: a file and
// a folder of files, each with its own content.
var moveTree = map[string]string{"/old.txt": "old", "/dir/a.txt": "a", "/dir/sub/b.txt": "b"}

// movesOf is the moves a sync replays for moveTree: the file, the folder,
// then the folder's files (which its move already took).
var movesOf = []SentFile{
	{Path: "/new.txt", Type: TypeFile, Change: Moved, OldPath: "/old.txt"},
	{Path: "/moved", Type: TypeDirectory, Change: Moved, OldPath: "/dir"},
	{Path: "/moved/a.txt", Type: TypeFile, Change: Moved, OldPath: "/dir/a.txt"},
	{Path: "/moved/sub/b.txt", Type: TypeFile, Change: Moved, OldPath: "/dir/sub/b.txt"},
}

// movedPath is where a path of moveTree is after movesOf.
func movedPath(p string) string {
	if p == "/old.txt" {
		return "/new.txt"
	}
	return "/moved" + strings.TrimPrefix(p, "/dir")
}

// prepareMoves writes moveTree under dir and migrates it to the
// filesystem target at tdir.
func prepareMoves(t *testing.T, dir, tdir string, index bool) {
	t.Helper()
	root := newRoot(t, dir, index)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	var paths []string
	for p, content := range moveTree {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(content), 0o644))
		paths = append(paths, p)
	}
	res, err := Migrate(context.Background(), root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, CodeOK, r.Code, "%s: %s", r.Path, r.Message)
	}
}

// replayMoves runs movesOf at the destination, as a sync (or its retry)
// does.
func replayMoves(t *testing.T, dir, tdir string, index bool) {
	t.Helper()
	root := newRoot(t, dir, index)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	a := &Activities{Root: root, Site: "dst"}
	ds := newDriverSet(nil, nil)
	ds.opened["t"] = target
	for _, f := range movesOf {
		msg, err := a.receiveOne(context.Background(), ReceiveInput{Step: "site_sync", Preference: "newest"}, f, ds, func(int) {})
		require.NoError(t, err, f.Path)
		require.Contains(t, []string{"moved", "already moved"}, msg, f.Path)
	}
	require.NoError(t, root.state.sync())
}

// requireMoved checks that every stub of moveTree is at its new path with
// its record, that no record is left at an old path, and that each
// recalls its data.
func requireMoved(t *testing.T, dir, tdir string, index bool) {
	t.Helper()
	fx := &transferFixture{dir: dir, tdir: tdir, root: newRoot(t, dir, index)}
	var err error
	fx.target, err = targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	for p, content := range moveTree {
		require.NoFileExists(t, fx.abs(p))
		rec, err := fx.root.state.index.get(strings.TrimPrefix(p, "/"))
		require.NoError(t, err)
		require.Nil(t, rec, "a record is left at %s", p)
		np := movedPath(p)
		rec = fx.record(t, np)
		require.NotNil(t, rec, "%s has no record", np)
		require.Equal(t, Migrated, rec.State, np)
		fx.requireRecall(t, np, []byte(content))
	}
	requireNoTemp(t, dir)
}

// TestSyncMoveCarriesRecords: a replayed move takes the records of a stub,
// and of every stub in a moved folder, to the new path, where they recall
// their data. Before, on a site whose records are kept by path (the state
// index), the stubs at the new paths had none and could not be recalled.
func TestSyncMoveCarriesRecords(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			dir, tdir := t.TempDir(), t.TempDir()
			prepareMoves(t, dir, tdir, index)
			replayMoves(t, dir, tdir, index)
			replayMoves(t, dir, tdir, index) // a rerun finds everything moved
			requireMoved(t, dir, tdir, index)
		})
	}
}

// TestSyncMoveFaultChild is the worker TestSyncMoveKillAtEveryFaultPoint
// kills; on its own it does nothing.
func TestSyncMoveFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_MOVE_FAULT_ROOT")
	if dir == "" {
		return
	}
	replayMoves(t, dir, os.Getenv("HUB_MOVE_FAULT_TARGET"), os.Getenv("HUB_MOVE_FAULT_INDEX") == "1")
}

// TestSyncMoveKillAtEveryFaultPoint kills a worker replaying moves at each
// fault point it reaches (records copied, file renamed, and inside each
// index write), then replays them again as the retried step would: every
// stub ends at its new path with its record, none is left at an old path.
func TestSyncMoveKillAtEveryFaultPoint(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			child := func(dir, tdir string, env ...string) bool {
				return runChild(t, "^TestSyncMoveFaultChild$", append(env,
					"HUB_MOVE_FAULT_ROOT="+dir, "HUB_MOVE_FAULT_TARGET="+tdir, "HUB_MOVE_FAULT_INDEX="+idx)...)
			}
			dir, tdir := t.TempDir(), t.TempDir()
			prepareMoves(t, dir, tdir, index)
			trace := filepath.Join(t.TempDir(), "trace")
			require.False(t, child(dir, tdir, "HUB_FAULT_TRACE="+trace))
			requireMoved(t, dir, tdir, index)
			b, err := os.ReadFile(trace)
			require.NoError(t, err)
			points := strings.Fields(string(b))
			require.Contains(t, points, "move.records-copied@2")
			require.Contains(t, points, "move.renamed@2")
			if index {
				require.Contains(t, points, "commit.renamed@1", "the index writes are killed too")
			}
			t.Logf("%d fault points reached (%s)", len(points), newRoot(t, dir, index).StateBackend())
			for _, point := range points {
				dir, tdir := t.TempDir(), t.TempDir()
				prepareMoves(t, dir, tdir, index)
				require.True(t, child(dir, tdir, "HUB_FAULT_POINT="+point), "killed at %s", point)
				replayMoves(t, dir, tdir, index)
				requireMoved(t, dir, tdir, index)
			}
		})
	}
}

// TestReceiveWaitsForTheFlush: a received batch is reported only after
// one flush of the site's filesystem, and a failed flush fails the batch
// (its retry finds the files in place). A power loss cannot be played
// here; what is checked is that nothing is reported done before the flush.
// Not parallel: it sets flushSite.
func TestReceiveWaitsForTheFlush(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false), Site: "dst"}
	data := []byte("sent content")
	sum := putContent(t, tdir, data)
	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	in := ReceiveInput{JobID: 1, Step: "send", Hydrate: true, Targets: []TargetSpec{spec},
		Files: []SentFile{{Path: "/got.txt", Type: TypeFile, Target: "t", Key: contentKey(sum), Checksum: sum,
			Size: int64(len(data)), Mtime: time.Now().UnixNano()}}}
	var flushed []string
	flushSite = func(d *os.File) error {
		flushed = append(flushed, d.Name())
		return unix.EIO
	}
	defer func() { flushSite = fsutil.SyncFSOf }()

	var out StepOutput
	err := runActivity(a, a.Receive, in, &out)
	require.ErrorContains(t, err, "flush received files")
	require.Equal(t, []string{a.Root.Dir()}, flushed)

	flushSite = fsutil.SyncFSOf
	out = *receive(t, a, in)
	require.Equal(t, OutcomeSuccess, out.Outcomes[0].State, out.Outcomes[0].Message)
	require.Equal(t, "already up to date", out.Outcomes[0].Message, "the retry finds the file in place")
}

// TestSyncDeletionSparesAUserSave: a replayed deletion (site_sync,
// newest) checked the destination's file, and the user saved it in the
// instant before the unlink, which removed the save. Now the file is
// renamed aside, leased (nobody has it open, nobody opens it) and
// compared before it goes, and put back otherwise: a save in place, a
// save by rename over the name, and a program holding the file open all
// keep it. (From a sixth audit, helper-34.)
func TestSyncDeletionSparesAUserSave(t *testing.T) {
	for name, index := range stateBackends {
		for _, how := range []string{"in place", "rename over", "held open"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				fx := newTransferFixture(t, index)
				synced := time.Unix(0, fx.sent.Mtime)
				fx.write(t, "/f.txt", "synced before", synced)
				saved, content := time.Now(), "the user's new work, saved just now"
				var held *os.File
				withReceiveRace(t, func(rel string) {
					switch how {
					case "in place":
						fx.write(t, "/f.txt", content, saved)
					case "rename over":
						fx.write(t, "/.f.txt.swp", content, saved)
						require.NoError(t, os.Rename(fx.abs("/.f.txt.swp"), fx.abs("/f.txt")))
					default: // writes once the deletion looked
						var err error
						held, err = os.OpenFile(fx.abs("/f.txt"), os.O_WRONLY, 0)
						require.NoError(t, err)
					}
				})
				del := SentFile{Path: "/f.txt", Type: TypeFile, Change: Deleted, Size: 13, Mtime: fx.sent.Mtime}
				msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
				require.NoError(t, err)
				require.Contains(t, msg, "kept the destination's copy")
				if held != nil {
					_, err := held.WriteAt([]byte(content), 0)
					require.NoError(t, err)
					require.NoError(t, held.Close())
					require.NoError(t, os.Chtimes(fx.abs("/f.txt"), saved, saved))
				}
				fx.requireFile(t, "/f.txt", content, saved)
				requireNoTemp(t, fx.dir)

				// Unchanged, it goes.
				fx.write(t, "/g.txt", "synced before", synced)
				del.Path = "/g.txt"
				msg, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, del, nil)
				require.NoError(t, err)
				require.Equal(t, "deleted", msg)
				require.NoFileExists(t, fx.abs("/g.txt"))
			})
		}
	}
}

// TestReceiveIntoAFolderMovedMeanwhile: a sync checked /d/f.txt (absent,
// or older) through its pinned folder, then replaced the file by path
// after the download: the user had renamed /d and saved a new /d/f.txt,
// and the sync replaced that one. Now the check and the replacement go
// through the same pinned folder: the copy lands in the renamed folder,
// and the user's new file stays. (From a sixth audit, helper-34.)
func TestReceiveIntoAFolderMovedMeanwhile(t *testing.T) {
	for name, index := range stateBackends {
		for _, pref := range []string{"local", "newest"} {
			t.Run(name+"/"+pref, func(t *testing.T) {
				fx := newTransferFixture(t, index)
				require.NoError(t, os.MkdirAll(fx.abs("/d"), 0o755))
				if pref == "newest" {
					fx.write(t, "/d/f.txt", "older copy", time.Unix(0, fx.sent.Mtime).Add(-time.Hour))
				}
				saved := time.Now()
				d := &stepHook{Driver: fx.target}
				d.onGet = func(string) {
					d.onGet = nil
					require.NoError(t, os.Rename(fx.abs("/d"), fx.abs("/d.old")))
					fx.write(t, "/d/f.txt", "the user's newest work", saved)
				}
				sent := fx.sent
				sent.Path = "/d/f.txt"
				msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: pref}, sent, d)
				require.NoError(t, err)
				require.Equal(t, "copied", msg)
				fx.requireFile(t, "/d/f.txt", "the user's newest work", saved)
				fx.requireFile(t, "/d.old/f.txt", string(fx.data), time.Unix(0, fx.sent.Mtime))
			})
		}
	}
}

// syncDeletion replays the deletion of /f.txt (newest) on the site at dir.
func syncDeletion(t *testing.T, dir string, index bool, mtime int64) string {
	t.Helper()
	fx := &transferFixture{dir: dir, root: newRoot(t, dir, index)}
	fx.a = &Activities{Root: fx.root, Site: "dst"}
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"},
		SentFile{Path: "/f.txt", Type: TypeFile, Change: Deleted, Size: 13, Mtime: mtime}, nil)
	require.NoError(t, err)
	return msg
}

// TestSyncDeletionFaultChild is the worker TestKillReplayingADeletion
// kills; on its own it does nothing.
func TestSyncDeletionFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_DELETE_FAULT_ROOT")
	if dir == "" {
		return
	}
	syncDeletion(t, dir, os.Getenv("HUB_DELETE_FAULT_INDEX") == "1", syncedMtime.UnixNano())
}

var syncedMtime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// TestKillReplayingADeletion: a replayed deletion killed once the file is
// set aside leaves it under a temporary name, hidden from the hub's walks;
// the rerun puts it back and decides again: the version the source
// deleted goes, and one its user saved since (here, after the kill) stays
// at its name.
func TestKillReplayingADeletion(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			for _, saved := range []bool{false, true} {
				dir := t.TempDir()
				fx := &transferFixture{dir: dir}
				fx.write(t, "/f.txt", "synced before", syncedMtime)
				require.True(t, runChild(t, "^TestSyncDeletionFaultChild$", "HUB_DELETE_FAULT_ROOT="+dir,
					"HUB_DELETE_FAULT_INDEX="+idx, "HUB_FAULT_POINT=sync.delete.aside@1"))
				require.NoFileExists(t, fx.abs("/f.txt"))
				if saved { // the user writes the set-aside file (an fd opened before)
					aside := "/" + filepath.Base(fsutil.PrivateName("del", "f.txt"))
					fx.write(t, aside, "saved after the kill", time.Now())
					aside = fx.abs(aside)
					require.FileExists(t, aside)
				}
				msg := syncDeletion(t, dir, index, syncedMtime.UnixNano())
				if saved {
					require.Contains(t, msg, "kept the destination's copy")
					got, err := os.ReadFile(fx.abs("/f.txt"))
					require.NoError(t, err)
					require.Equal(t, "saved after the kill", string(got))
				} else {
					require.Equal(t, "deleted", msg)
					require.NoFileExists(t, fx.abs("/f.txt"))
				}
				requireNoTemp(t, dir)
			}
		})
	}
}

// stubSendFixture is a destination site whose /f.txt is a stub of its
// own (migrated "the destination's own data"), and a target also holding
// the content a stub send will name.
type stubSendFixture struct {
	dir, tdir string
	index     bool
	sent      SentFile
}

const (
	destinationsOwn = "the destination's own data, migrated"
	stubSendContent = "the content a stub send names"
)

// stubSent is the stub send of stubSendContent to /f.txt.
func stubSent() SentFile {
	sum := sha([]byte(stubSendContent))
	return SentFile{Path: "/f.txt", Type: TypeFile, Target: "t", Key: contentKey(sum), Size: int64(len(stubSendContent)),
		Mtime: syncedMtime.UnixNano(), Checksum: sum}
}

func newStubSendFixture(t *testing.T, index bool) stubSendFixture {
	t.Helper()
	fx := stubSendFixture{dir: t.TempDir(), tdir: t.TempDir(), index: index, sent: stubSent()}
	data := []byte(stubSendContent)
	writeOld(t, filepath.Join(fx.dir, "f.txt"), []byte(destinationsOwn))
	root, target := fx.open(t)
	res, err := Migrate(context.Background(), root, []string{"/f.txt"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	require.NoError(t, target.Put(context.Background(), fx.sent.Key, strings.NewReader(string(data)), fx.sent.Size))
	return fx
}

func (fx stubSendFixture) open(t *testing.T) (*Root, targets.Driver) {
	t.Helper()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: fx.tdir})
	require.NoError(t, err)
	return newRoot(t, fx.dir, fx.index), target
}

// send receives the stub send of /f.txt, as the destination's worker.
func (fx stubSendFixture) send(t *testing.T) {
	t.Helper()
	root, target := fx.open(t)
	tf := &transferFixture{dir: fx.dir, root: root, a: &Activities{Root: root, Site: "dst"}}
	_, err := tf.receive(ReceiveInput{Step: "send"}, fx.sent, target)
	require.NoError(t, err)
	require.NoError(t, root.state.sync())
}

// TestStubSendFaultChild is the worker TestKilledStubSendKeepsTheDestinationsStub
// kills; on its own it does nothing.
func TestStubSendFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_STUB_SEND_ROOT")
	if dir == "" {
		return
	}
	stubSendFixture{dir: dir, tdir: os.Getenv("HUB_STUB_SEND_TARGET"), index: os.Getenv("HUB_STUB_SEND_INDEX") == "1",
		sent: stubSent()}.send(t)
}

// TestKilledStubSendKeepsTheDestinationsStub: a stub send onto a path
// where the destination has a stub of its own is killed at every fault
// point. On the index backend the new stub's record was written at the
// path before the rename, over the destination's stub's only record: a
// kill in between left that stub unrecallable (and, once the audit
// dropped its reference, its content collected) if the send was never
// retried. Now the record follows the rename. After each kill the
// destination's file is either its own stub, which recalls, or the new
// stub; a retried send then leaves the new stub, which recalls the sent
// content. (From a sixth audit, helper-34.)
func TestKilledStubSendKeepsTheDestinationsStub(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			child := func(fx stubSendFixture, env ...string) bool {
				return runChild(t, "^TestStubSendFaultChild$", append(env, "HUB_STUB_SEND_ROOT="+fx.dir,
					"HUB_STUB_SEND_TARGET="+fx.tdir, "HUB_STUB_SEND_INDEX="+idx)...)
			}
			fx := newStubSendFixture(t, index)
			trace := filepath.Join(t.TempDir(), "trace")
			require.False(t, child(fx, "HUB_FAULT_TRACE="+trace))
			b, err := os.ReadFile(trace)
			require.NoError(t, err)
			points := strings.Fields(string(b))
			require.Contains(t, points, "commit.renamed@1")
			for _, point := range points {
				fx := newStubSendFixture(t, index)
				before, err := os.Lstat(filepath.Join(fx.dir, "f.txt"))
				require.NoError(t, err)
				require.True(t, child(fx, "HUB_FAULT_POINT="+point), point)
				root, target := fx.open(t)
				if after, err := os.Lstat(filepath.Join(fx.dir, "f.txt")); err == nil && os.SameFile(before, after) {
					requireRecallsIntact(t, root, "/f.txt", only("t", target), []byte(destinationsOwn))
					continue
				}
				fx.send(t) // the retry
				requireRecallsIntact(t, root, "/f.txt", only("t", target), []byte(stubSendContent))
			}
		})
	}
}

// TestSyncLocalKeepsTheDestinationsMetadata: with sync_preference local a
// site_sync keeps the destination's files, but replaced the metadata of
// every folder it received with the source's: the destination user's
// fields and tags on it were gone. Now an entry the destination had keeps
// its metadata; a new one gets the source's. (From helper-34.)
func TestSyncLocalKeepsTheDestinationsMetadata(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			fx := newTransferFixture(t, index)
			fx.write(t, "/d/own.txt", "x", syncedMtime)
			note := "the destination user's note"
			_, err := fx.a.SetMetadata(context.Background(), SetMetadataInput{Paths: []string{"/d"},
				Change: MetaChange{Set: map[string]*string{"note": &note}, AddTags: []string{"dst-tag"}}})
			require.NoError(t, err)
			src := Meta{Fields: map[string]string{"project": "from the source"}}
			receive(t, fx.a, ReceiveInput{Step: "site_sync", Preference: "local", Files: []SentFile{
				{Path: "/d", Type: TypeDirectory, Change: "updated", Meta: &src},
				{Path: "/new", Type: TypeDirectory, Change: "created", Meta: &src}}})
			kept := fx.a.fileMeta(context.Background(), fx.abs("/d"), "/d")
			require.Equal(t, note, kept.Fields["note"])
			require.Contains(t, kept.Tags, "dst-tag")
			require.NotContains(t, kept.Fields, "project")
			made := fx.a.fileMeta(context.Background(), fx.abs("/new"), "/new")
			require.Equal(t, "from the source", made.Fields["project"])
		})
	}
}

// TestSyncKeepsAStubWithOtherNames: on a site keeping records by path
// (the state index), a stub with a second name (a hard link) is led to
// its data by its first path's record only. A sync replacing or deleting
// that path (or replaying a move onto it), or a send over it, forgot the
// record, and the data was reachable from no name. Now the stub is kept, as the Delete step keeps
// it, and still recalls.
func TestSyncKeepsAStubWithOtherNames(t *testing.T) {
	for _, change := range []Change{Updated, Deleted, Moved} {
		for _, step := range []string{"site_sync", "send"} {
			if change != Updated && step == "send" {
				continue
			}
			t.Run(string(change)+"/"+step, func(t *testing.T) {
				ctx := context.Background()
				fx := newTransferFixture(t, true)
				old := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
				const data = "the destination's stub's data"
				fx.write(t, "/f.txt", data, old)
				paths := []string{"/f.txt"}
				res, err := Migrate(ctx, fx.root, paths, fx.target, "t", StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, paths)
				require.NoError(t, os.Link(fx.abs("/f.txt"), fx.abs("/g.txt")))

				f, pref := fx.sent, "newest"
				f.Change = change
				if change == Moved { // onto the stub's path, replacing what is there
					fx.write(t, "/moved.txt", "moved at the source", time.Now())
					f.OldPath, pref = "/moved.txt", "ignore"
				}
				msg, err := fx.receive(ReceiveInput{Step: step, Preference: pref, Hydrate: true}, f, nil)
				require.NoError(t, err)
				require.Equal(t, keptLinkedStub, msg)
				res, err = Recall(ctx, fx.root, paths, only("t", fx.target), StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, paths)
				got, err := os.ReadFile(fx.abs("/g.txt"))
				require.NoError(t, err)
				require.Equal(t, data, string(got), "the other name holds the data again")
			})
		}
	}
}

// TestStubOfContentNotYetDurable: a send's stub at a destination that
// reaches the target over NFS, of content the host that wrote it has not
// flushed yet (NotDurable), is not made: nothing at the destination could
// rely on that copy. The path fails saying why, for a retry.
func TestStubOfContentNotYetDurable(t *testing.T) {
	fx := newTransferFixture(t, false)
	_, err := fx.receive(ReceiveInput{Step: "send"}, fx.sent, &notDurable{Driver: fx.target})
	require.ErrorContains(t, err, "not yet flushed by the host that wrote it")
	require.NoFileExists(t, fx.abs("/f.txt"))
}

// TestASentPathNeverLeavesTheDestinationPath: the list a destination
// receives comes from another site. A path with ".." was joined under
// destination_path (path.Join drops it): a send replaced a file outside
// it, a move took one from outside it (a reviewer's scratch tests).
// Such paths are refused, the files outside untouched.
func TestASentPathNeverLeavesTheDestinationPath(t *testing.T) {
	fx := newTransferFixture(t, false)
	mine := time.Now().Add(-time.Hour)
	fx.write(t, "/victim.txt", "the destination's own file outside /inbox", mine)
	fx.write(t, "/private/secret.txt", "outside /inbox", mine)
	require.NoError(t, os.MkdirAll(fx.abs("/inbox"), 0o755))

	sent := fx.sent
	sent.Path = "/../victim.txt"
	_, err := fx.receive(ReceiveInput{Step: "send", DestPath: "/inbox", Hydrate: true}, sent, nil)
	require.ErrorContains(t, err, "not a clean absolute path")
	fx.requireFile(t, "/victim.txt", "the destination's own file outside /inbox", mine)

	for _, old := range []string{"/../private/secret.txt", "private/secret.txt", "/inbox/../private/secret.txt"} {
		mv := SentFile{Path: "/x.txt", Type: TypeFile, Change: Moved, OldPath: old}
		_, err = fx.receive(ReceiveInput{Step: "site_sync", DestPath: "/inbox", Preference: "newest"}, mv, nil)
		require.ErrorContains(t, err, "not a clean absolute path", old)
		fx.requireFile(t, "/private/secret.txt", "outside /inbox", mine)
	}
	// A move onto itself, or into or out of its own tree, carried the
	// stub's records onto themselves and dropped them (a second reviewer's
	// scratch test); refused.
	for _, mv := range []SentFile{{Path: "/private/secret.txt", OldPath: "/private/secret.txt"},
		{Path: "/private/secret.txt/x", OldPath: "/private/secret.txt"}, {Path: "/private", OldPath: "/private/secret.txt"}, {Path: "/x.txt"}} {
		mv.Type, mv.Change = TypeFile, Moved
		_, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "ignore"}, mv, nil)
		require.ErrorContains(t, err, "not from another path", mv.OldPath)
	}
	fx.requireFile(t, "/private/secret.txt", "outside /inbox", mine)
	for _, to := range []string{"private", "private/x"} { // and whoever else moves records
		require.ErrorContains(t, fx.root.moveWithRecords(context.Background(), "private", to, nil, func() error { return nil }), "at or below itself")
	}
	del := SentFile{Path: "/../victim.txt", Type: TypeFile, Change: Deleted, Size: 41, Mtime: mine.UnixNano()}
	_, err = fx.receive(ReceiveInput{Step: "site_sync", DestPath: "/inbox", Preference: "ignore"}, del, nil)
	require.ErrorContains(t, err, "not a clean absolute path")
	fx.requireFile(t, "/victim.txt", "the destination's own file outside /inbox", mine)
}

// TestAMoveNeverDropsTheRecordOfAStubSetAside: on a site keeping records
// by path, sync 1 replays a deletion of the stub /a.txt and sets it aside
// for an instant; sync 2 replays its source's move /a.txt → /b.txt, finds
// nothing at /a.txt and drops the records there as describing no file.
// Sync 1 then puts the stub back (open in another program), without its
// record: an empty resident file whose data an audit frees (a reviewer's
// scratch test). Replayed moves and deletions take the moves lock now,
// and a move settles what a killed sync left at its old path first.
// (Not parallel: the hooks are the package's.)
func TestAMoveNeverDropsTheRecordOfAStubSetAside(t *testing.T) {
	for _, killed := range []bool{false, true} {
		t.Run(map[bool]string{false: "live", true: "killed"}[killed], func(t *testing.T) {
			fx := newTransferFixture(t, true)
			data := "the destination's data"
			fx.write(t, "/a.txt", data, time.Now().Add(-time.Hour))
			res, err := Migrate(t.Context(), fx.root, []string{"/a.txt"}, fx.target, "t", StepOptions{})
			require.NoError(t, err)
			require.Equal(t, CodeOK, res[0].Code, res[0].Message)
			fx.write(t, "/b.txt", "sync 2's copy, synced earlier", time.Now().Add(-time.Hour))
			fi, err := os.Lstat(fx.abs("/a.txt"))
			require.NoError(t, err)
			deletion := SentFile{Path: "/a.txt", Type: TypeFile, Change: Deleted, Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
			move := SentFile{Path: "/b.txt", Type: TypeFile, Change: Moved, OldPath: "/a.txt"}
			sync := ReceiveInput{Step: "site_sync", Preference: "newest"}

			if killed {
				// Sync 1 killed at sync.delete.aside: the stub is aside.
				l, err := fx.root.locate("/a.txt")
				require.NoError(t, err)
				require.NoError(t, renameBeneath(l, asideOf(l), false))
				l.close()
				msg, err := fx.receive(sync, move, nil)
				require.NoError(t, err)
				require.Equal(t, keptAtNewPath, msg)
			} else {
				// Sync 1 finds the stub open in another program, and puts
				// it back; sync 2's move comes while it is aside.
				open, err := os.Open(fx.abs("/a.txt"))
				require.NoError(t, err)
				defer open.Close()
				moved := make(chan error, 1)
				deletionAside = func(string) {
					deletionAside = nil
					go func() {
						_, err := fx.receive(sync, move, nil)
						moved <- err
					}()
					select {
					case err := <-moved:
						moved <- err
					case <-time.After(300 * time.Millisecond): // waiting for the lock, as it should
					}
				}
				defer func() { deletionAside = nil }()
				msg, err := fx.receive(sync, deletion, nil)
				require.NoError(t, err)
				require.Contains(t, msg, "open in another program")
				require.NoError(t, <-moved)
				require.NoError(t, open.Close())
			}
			require.NotNil(t, fx.record(t, "/a.txt"), "the stub at /a.txt lost its record")
			fx.requireRecall(t, "/a.txt", []byte(data))
		})
	}
}
