package site

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// auditSpaceFiles are the files of the space the tests below migrate.
var auditSpaceFiles = map[string]string{"f.txt": "the space's first file", "sub/g.txt": "and its second one"}

// auditSite is a site with a filesystem target, on one state backend.
type auditSite struct {
	a      *Activities
	target targets.Driver
	tdir   string // the target's folder
}

func newAuditSite(t *testing.T, dir, tdir string, index bool) auditSite {
	t.Helper()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	return auditSite{
		a:      &Activities{Root: newRoot(t, dir, index), Site: "s", ConfigDir: filepath.Join(dir, hubDir, "config")},
		target: target,
		tdir:   tdir,
	}
}

// ageMarker makes the marker at key eight days old: older than an
// audit's minimum age.
func (s auditSite) ageMarker(t *testing.T, key string) {
	t.Helper()
	old := time.Now().Add(-8 * 24 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(s.tdir, filepath.FromSlash(key)), old, old))
}

// migrateFiles writes files (name → content) below the folder rel and
// migrates them.
func (s auditSite) migrateFiles(t *testing.T, rel string, files map[string]string) {
	t.Helper()
	var paths []string
	for name, data := range files {
		abs := filepath.Join(s.a.Root.Dir(), filepath.FromSlash(rel), filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
		paths = append(paths, "/"+rel+"/"+name)
	}
	res, err := Migrate(context.Background(), s.a.Root, paths, s.target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
}

// auditAndCollect runs a references audit with --drop, old enough to call
// any reference without a record leaked, then the collector with no
// grace, twice: what destroys the content of a stub whose record the
// audit missed. It requires that nothing was called leaked.
func (s auditSite) auditAndCollect(t *testing.T) {
	t.Helper()
	ar := s.dropLeakedAndCollect(t)
	require.Empty(t, ar.Leaked, "%+v", ar)
}

// dropLeakedAndCollect is auditAndCollect where references may be leaked
// (a stub deleted, a kill between a reference and its record): it drops
// them, and returns what the audit found.
func (s auditSite) dropLeakedAndCollect(t *testing.T) AuditResult {
	t.Helper()
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
	ar, err := AuditRefs(ctx, s.a.Root, map[string]targets.Driver{"archive": s.target}, AuditOptions{Now: later, Drop: true})
	require.NoError(t, err)
	for range 2 {
		_, err := Collect(ctx, s.target, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
	return ar
}

// requireRecalled recalls the files below rel and checks their content.
func (s auditSite) requireRecalled(t *testing.T, rel string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := "/" + rel + "/" + name
		res, err := Recall(context.Background(), s.a.Root, []string{p}, only("archive", s.target), StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{p})
		got, err := os.ReadFile(filepath.Join(s.a.Root.Dir(), filepath.FromSlash(p)))
		require.NoError(t, err)
		require.Equal(t, data, string(got), p)
	}
}

// requireNoRecordsAt checks that the index keeps no record of the
// space's files at rel, a folder that is gone.
func requireNoRecordsAt(t *testing.T, root *Root, rel string) {
	t.Helper()
	for name := range auditSpaceFiles {
		rec, err := root.state.index.get(rel + "/" + name)
		require.NoError(t, err)
		require.Nil(t, rec, "no record is left at the old path of %s", name)
	}
}

// trashEntry is the one entry of the site trash.
func trashEntry(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(trashFolder)))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	return entries[0].Name()
}

// TestAuditKeepsTrashedSpace: a C+J space holding stubs is removed (moved
// to the site trash); a references audit with --drop and the collector
// then leave their content alone, and once an operator restores the
// space its stubs recall. Before, the audit did not walk the trash (nor,
// on the index backend, did the records follow the space there): it
// dropped the stubs' references and the collector deleted their data.
func TestAuditKeepsTrashedSpace(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newAuditSite(t, dir, t.TempDir(), index)
			space := &CJSpace{Name: "lab"}
			_, err := s.a.cjSpace(context.Background(), space, false)
			require.NoError(t, err)
			s.migrateFiles(t, "spaces/lab", auditSpaceFiles)

			msg, err := s.a.cjSpace(context.Background(), space, true)
			require.NoError(t, err)
			require.Contains(t, msg, "kept in")
			require.NoDirExists(t, filepath.Join(dir, "spaces", "lab"))
			trashed := trashEntry(t, dir)
			requireNoRecordsAt(t, s.a.Root, "spaces/lab")

			s.auditAndCollect(t)
			require.NoError(t, s.a.Root.RestoreFromTrash(context.Background(), trashed, "/spaces/lab"))
			s.auditAndCollect(t)
			s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
		})
	}
}

// TestAuditSpaceTrashChild is the worker process
// TestKillTrashingASpaceWithStubs kills: it removes the space, or
// restores it from the trash.
func TestAuditSpaceTrashChild(t *testing.T) {
	dir := os.Getenv("HUB_AUDIT_CHILD_ROOT")
	if dir == "" {
		return
	}
	a := &Activities{Root: newRoot(t, dir, os.Getenv("HUB_AUDIT_CHILD_INDEX") == "1"), Site: "s",
		ConfigDir: filepath.Join(dir, hubDir, "config")}
	if name := os.Getenv("HUB_AUDIT_CHILD_PURGE"); name != "" {
		require.NoError(t, a.Root.PurgeTrash(context.Background(), name))
		return
	}
	if name := os.Getenv("HUB_AUDIT_CHILD_RESTORE"); name != "" {
		require.NoError(t, a.Root.RestoreFromTrash(context.Background(), name, "/spaces/lab"))
		return
	}
	_, err := a.cjSpace(context.Background(), &CJSpace{Name: "lab"}, true)
	require.NoError(t, err)
}

// TestKillTrashingASpaceWithStubs kills the worker at every fault point of
// a space's move to the trash (and of its restore), runs an audit with
// --drop and the collector on what the kill left, then the step again:
// at no instant does the audit miss a stub's record, and the restored
// space's stubs recall.
func TestKillTrashingASpaceWithStubs(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			child := func(dir, restore string, env ...string) bool {
				return runChild(t, "^TestAuditSpaceTrashChild$", append(env, "HUB_AUDIT_CHILD_ROOT="+dir,
					"HUB_AUDIT_CHILD_INDEX="+idx, "HUB_AUDIT_CHILD_RESTORE="+restore)...)
			}
			setup := func(t *testing.T) (string, auditSite) {
				dir := t.TempDir()
				s := newAuditSite(t, dir, t.TempDir(), index)
				_, err := s.a.cjSpace(context.Background(), &CJSpace{Name: "lab"}, false)
				require.NoError(t, err)
				s.migrateFiles(t, "spaces/lab", auditSpaceFiles)
				return dir, s
			}
			trace := func(t *testing.T, dir, restore string) []string {
				file := filepath.Join(t.TempDir(), "trace")
				require.False(t, child(dir, restore, "HUB_FAULT_TRACE="+file))
				b, err := os.ReadFile(file)
				require.NoError(t, err)
				return strings.Fields(string(b))
			}

			dir, _ := setup(t)
			removal := trace(t, dir, "")
			require.Contains(t, removal, "cj.space.records-copied@1")
			require.Contains(t, removal, "trash.renamed@1")
			restore := trace(t, dir, trashEntry(t, dir))
			require.Contains(t, restore, "trash.restore.records-copied@1")
			require.Contains(t, restore, "trash.restored@1")
			if index {
				require.Contains(t, removal, "commit.renamed@2", "the index writes are killed too")
				require.Contains(t, restore, "commit.renamed@2", "the index writes are killed too")
			}

			for _, point := range removal {
				t.Run("remove/"+point, func(t *testing.T) {
					dir, s := setup(t)
					require.True(t, child(dir, "", "HUB_FAULT_POINT="+point), "killed at %s", point)
					s.auditAndCollect(t)
					require.False(t, child(dir, ""), "the retry")
					requireNoRecordsAt(t, s.a.Root, "spaces/lab")
					s.auditAndCollect(t)
					require.NoError(t, s.a.Root.RestoreFromTrash(context.Background(), trashEntry(t, dir), "/spaces/lab"))
					s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
				})
			}
			for _, point := range restore {
				t.Run("restore/"+point, func(t *testing.T) {
					dir, s := setup(t)
					require.False(t, child(dir, ""))
					trashed := trashEntry(t, dir)
					require.True(t, child(dir, trashed, "HUB_FAULT_POINT="+point), "killed at %s", point)
					s.auditAndCollect(t)
					require.False(t, child(dir, trashed), "the retry")
					s.auditAndCollect(t)
					s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
				})
			}
		})
	}
}

// TestAuditKeepsStubsInTempNamedFolders: a folder a user names like the
// hub's temporary files (.hub-tmp-…) is no temporary file: the hub still
// reaches the files in it by path, so the walk goes into it, and the audit
// keeps the references of its stubs. So does a stub a user renamed to
// such a name (with extended attributes its record goes with it). Before,
// the walk hid every such name, and the audit dropped those references.
func TestAuditKeepsStubsInTempNamedFolders(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := newAuditSite(t, dir, t.TempDir(), index)
			s.migrateFiles(t, ".hub-tmp-d", auditSpaceFiles)
			renamed := map[string]string{"g.txt": "a stub renamed by its user"}
			s.migrateFiles(t, "e", renamed)
			if !index { // the index keeps records by path: a rename by hand loses them
				require.NoError(t, os.Rename(filepath.Join(dir, "e", "g.txt"), filepath.Join(dir, "e", tmpPrefix+"g.txt")))
			}
			// One of the hub's own temporary files, which walks still hide.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "e", tmpPrefix+"x"), []byte("partial"), 0o600))

			s.auditAndCollect(t)

			// Other walks report the files in the folder, not the folder
			// itself (a path the hub refuses) nor the temporary files.
			got := walkAll(t, s.a.Root, []string{"/"}, WalkOptions{})
			require.Contains(t, got, "/.hub-tmp-d/f.txt")
			require.Contains(t, got, "/.hub-tmp-d/sub/g.txt")
			require.Equal(t, Migrated, got["/.hub-tmp-d/sub/g.txt"].State)
			for p := range got {
				require.False(t, strings.HasPrefix(filepath.Base(p), tmpPrefix), p)
			}
			s.requireRecalled(t, ".hub-tmp-d", auditSpaceFiles)
			if !index {
				require.NoError(t, os.Rename(filepath.Join(dir, "e", tmpPrefix+"g.txt"), filepath.Join(dir, "e", "g.txt")))
			}
			s.requireRecalled(t, "e", renamed)
		})
	}
}

// movingSpace is an index site with a C+J space "moving" holding migrated
// files, and late, a resident file in it to migrate while the space moves.
func movingSpace(t *testing.T) (s auditSite, space *CJSpace, late map[string]string) {
	t.Helper()
	s = newAuditSite(t, t.TempDir(), t.TempDir(), true)
	space = &CJSpace{Name: "moving"}
	_, err := s.a.cjSpace(context.Background(), space, false)
	require.NoError(t, err)
	s.migrateFiles(t, "spaces/moving", auditSpaceFiles)
	late = map[string]string{"late.txt": "migrated while its space moves"}
	require.NoError(t, os.WriteFile(filepath.Join(s.a.Root.Dir(), "spaces", "moving", "late.txt"), []byte(late["late.txt"]), 0o644))
	return s, space, late
}

// requireRestoredSpaceRecalls audits and collects, restores the space
// "moving" from the site trash and recalls all its files, late too.
func (s auditSite) requireRestoredSpaceRecalls(t *testing.T, late map[string]string) {
	t.Helper()
	s.auditAndCollect(t)
	require.NoError(t, s.a.Root.RestoreFromTrash(context.Background(), trashEntry(t, s.a.Root.Dir()), "/spaces/moving"))
	s.requireRecalled(t, "spaces/moving", auditSpaceFiles)
	s.requireRecalled(t, "spaces/moving", late)
}

// TestMoveCarriesRecordsWrittenDuringIt: a step that located its file
// before a move writes its record at the old path, after the move copied
// the records there. On the index backend the move then dropped that
// record with the old path's: here a migrate releases a file of a space
// while the space moves to the trash, and the restored stub could not be
// recalled. Now the records written at the old path meanwhile are copied
// too. (Not parallel: the hook is the package's.)
func TestMoveCarriesRecordsWrittenDuringIt(t *testing.T) {
	s, space, late := movingSpace(t)
	recordsCopied = func(oldRel string) {
		if oldRel == "spaces/moving" {
			s.migrateFiles(t, "spaces/moving", late)
		}
	}
	defer func() { recordsCopied = nil }()
	_, err := s.a.cjSpace(context.Background(), space, true)
	require.NoError(t, err)
	recordsCopied = nil
	requireNoRecordsAt(t, s.a.Root, "spaces/moving")

	s.requireRestoredSpaceRecalls(t, late)
}

// TestAKilledRemovalCarriesRecordsWrittenDuringIt: as
// TestMoveCarriesRecordsWrittenDuringIt, but the worker is killed right
// after the rename to the trash, before the records written at the old
// path meanwhile were carried. The retried removal found the folder gone
// and dropped them, and the audit and collector freed the new stub's data
// (a reviewer's finding). Now the retry carries each to its file in the
// space's trash entry.
func TestAKilledRemovalCarriesRecordsWrittenDuringIt(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	s := newAuditSite(t, dir, tdir, true)
	space := &CJSpace{Name: "moving"}
	_, err := s.a.cjSpace(context.Background(), space, false)
	require.NoError(t, err)
	s.migrateFiles(t, "spaces/moving", auditSpaceFiles)
	late := map[string]string{"late.txt": "migrated while its space moves"}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spaces", "moving", "late.txt"), []byte(late["late.txt"]), 0o644))
	require.True(t, runChild(t, "^TestKilledRemovalChild$", "HUB_REMOVAL_CHILD_ROOT="+dir, "HUB_REMOVAL_CHILD_TARGET="+tdir,
		"HUB_FAULT_POINT=trash.renamed@1"), "killed at trash.renamed")
	rec, err := s.a.Root.state.index.get("spaces/moving/late.txt")
	require.NoError(t, err)
	require.NotNil(t, rec, "the record written during the move is at the old path")

	_, err = s.a.cjSpace(context.Background(), space, true) // the retry
	require.NoError(t, err)
	requireNoRecordsAt(t, s.a.Root, "spaces/moving")
	s.requireRestoredSpaceRecalls(t, late)
}

// TestKilledRemovalChild removes the space "moving" of the site at
// HUB_REMOVAL_CHILD_ROOT, migrating its late.txt once the removal has
// copied the records (the kill comes after the rename); on its own it
// does nothing.
func TestKilledRemovalChild(t *testing.T) {
	dir := os.Getenv("HUB_REMOVAL_CHILD_ROOT")
	if dir == "" {
		return
	}
	s := newAuditSite(t, dir, os.Getenv("HUB_REMOVAL_CHILD_TARGET"), true)
	recordsCopied = func(oldRel string) {
		if oldRel == "spaces/moving" {
			recordsCopied = nil
			s.migrateFiles(t, "spaces/moving", map[string]string{"late.txt": "migrated while its space moves"})
		}
	}
	_, err := s.a.cjSpace(context.Background(), &CJSpace{Name: "moving"}, true)
	require.NoError(t, err)
}

// TestRecordFollowsAFileMovedWhileWritten: a step that located its file
// before a move, and writes its record only once the move has run whole
// (records carried, old path's dropped), wrote it at the old path, where
// nothing would ever read it. On the index backend the migrate below then
// released the file, now in the site trash, without a record: the audit
// dropped its reference, the collector its content. Now the record is
// written again where the file is. (Not parallel: the hook is the
// package's.)
func TestRecordFollowsAFileMovedWhileWritten(t *testing.T) {
	s, space, late := movingSpace(t)
	moved := false
	indexRecordWriting = func(rel string) {
		if rel == "spaces/moving/late.txt" && !moved {
			moved = true
			_, err := s.a.cjSpace(context.Background(), space, true)
			require.NoError(t, err)
		}
	}
	defer func() { indexRecordWriting = nil }()
	res, err := Migrate(context.Background(), s.a.Root, []string{"/spaces/moving/late.txt"}, s.target, "archive", StepOptions{})
	indexRecordWriting = nil
	require.NoError(t, err)
	require.True(t, moved)
	requireAll(t, res, CodeOK, []string{"/spaces/moving/late.txt"})
	rec, err := s.a.Root.state.index.get("spaces/moving/late.txt")
	require.NoError(t, err)
	require.Nil(t, rec, "no record is left at the old path")

	s.requireRestoredSpaceRecalls(t, late)
}

// TestTwoAttemptsOfOneMoveKeepTheRecords: two attempts of one move (a
// retried Receive whose first attempt still runs; here two restores of
// one trash entry) copied the same records to the same path, and the one
// whose rename lost undid its copies: the records of the stubs the other
// had moved there were removed, and the audit then freed their data. Now
// a site's moves run one at a time. The second attempt starts once the
// first has copied the records, and the first goes on once the second has
// ended or waits for it. (Not parallel: the hooks are the package's.)
func TestTwoAttemptsOfOneMoveKeepTheRecords(t *testing.T) {
	s, space, _ := movingSpace(t)
	_, err := s.a.cjSpace(context.Background(), space, true)
	require.NoError(t, err)
	name := trashEntry(t, s.a.Root.Dir())
	from := path.Join(trashFolder, name)

	second := make(chan error, 1)
	waiting := make(chan struct{})
	moveLockWaiting = func() { close(waiting) }
	recordsCopied = func(oldRel string) {
		if oldRel != from {
			return
		}
		recordsCopied = nil
		go func() { second <- s.a.Root.RestoreFromTrash(context.Background(), name, "/spaces/moving") }()
		select {
		case err := <-second:
			second <- err
		case <-waiting:
		}
	}
	defer func() { recordsCopied, moveLockWaiting = nil, nil }()
	first := s.a.Root.RestoreFromTrash(context.Background(), name, "/spaces/moving")
	if err := <-second; (first == nil) == (err == nil) {
		t.Fatalf("one attempt restores the entry, the other finds it gone: %v, %v", first, err)
	}

	s.auditAndCollect(t)
	s.requireRecalled(t, "spaces/moving", auditSpaceFiles)
}

// TestReceivedStubFollowsItsFolder: a stub received into a folder that a
// move takes elsewhere between the stub's record and its rename into
// place keeps its record at the folder's new path. (Not parallel: the hook
// is the package's.)
func TestReceivedStubFollowsItsFolder(t *testing.T) {
	fx := newTransferFixture(t, true)
	require.NoError(t, os.Mkdir(fx.abs("/d"), 0o755))
	sent := fx.sent
	sent.Path = "/d/f.txt"
	moved := false
	indexRecordWriting = func(rel string) {
		if rel == "d/f.txt" && !moved {
			moved = true
			require.NoError(t, fx.root.moveWithRecords(context.Background(), "d", "e", nil, func() error {
				return os.Rename(fx.abs("/d"), fx.abs("/e"))
			}))
		}
	}
	defer func() { indexRecordWriting = nil }()
	_, err := fx.receive(ReceiveInput{Step: "send"}, sent, nil)
	indexRecordWriting = nil
	require.NoError(t, err)
	require.True(t, moved)
	require.NotNil(t, fx.record(t, "/e/f.txt"))
	rec, err := fx.root.state.index.get("d/f.txt")
	require.NoError(t, err)
	require.Nil(t, rec)
	fx.requireRecall(t, "/e/f.txt", fx.data)
}

// TestPurgeTrash: an operator purging a trashed space removes it and, on
// the index backend, its records (rm -rf left them, for paths that no
// longer exist); the audit then drops its stubs' references. A rerun
// after a crash finishes; a path outside the trash is refused.
func TestPurgeTrash(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		for _, point := range []string{"trash.claimed@1", "trash.purged@1"} {
			t.Run(name+"/"+point, func(t *testing.T) { purgeKilledAt(t, index, point) })
		}
	}
}

// purgeKilledAt is TestPurgeTrash on one backend, killed at point.
func purgeKilledAt(t *testing.T, index bool, point string) {
	t.Parallel()
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), index)
	space := &CJSpace{Name: "lab"}
	_, err := s.a.cjSpace(context.Background(), space, false)
	require.NoError(t, err)
	s.migrateFiles(t, "spaces/lab", auditSpaceFiles)
	_, err = s.a.cjSpace(context.Background(), space, true)
	require.NoError(t, err)
	entry := trashEntry(t, dir)

	require.ErrorContains(t, s.a.Root.PurgeTrash(context.Background(), "../spaces"), "not an entry of the site trash")
	// Killed between the removal and the records' (the index's
	// writes too), then run again.
	idx := map[bool]string{false: "0", true: "1"}[index]
	purge := func(env ...string) bool {
		return runChild(t, "^TestAuditSpaceTrashChild$", append(env, "HUB_AUDIT_CHILD_ROOT="+dir,
			"HUB_AUDIT_CHILD_INDEX="+idx, "HUB_AUDIT_CHILD_PURGE="+entry)...)
	}
	require.True(t, purge("HUB_FAULT_POINT="+point), "killed")
	for _, name := range []string{purgingName(entry), entry} {
		if err := s.a.Root.RestoreFromTrash(context.Background(), name, "/spaces/lab"); point == "trash.claimed@1" || name != entry {
			require.ErrorContains(t, err, "being purged", name)
		}
	}
	require.False(t, purge(), "run again")
	require.NoDirExists(t, filepath.Join(dir, filepath.FromSlash(trashFolder), entry))
	require.NoDirExists(t, filepath.Join(dir, filepath.FromSlash(trashFolder), purgingName(entry)))
	requireNoIndexRecordsBelow(t, s.a.Root, trashFolder)
	require.Len(t, s.dropLeakedAndCollect(t).Leaked, len(auditSpaceFiles))
}

// TestMoveWaitsForAnotherAsLongAsItsContext: a move waits for the site's
// moves lock as long as its context lasts (one move of a folder of
// thousands of index records holds it for minutes; a fixed wait failed
// the others, a snapshot's placement among them), and fails once its
// context ends.
func TestMoveWaitsForAnotherAsLongAsItsContext(t *testing.T) {
	t.Parallel()
	root := newRoot(t, t.TempDir(), true)
	require.NoError(t, os.Mkdir(filepath.Join(root.Dir(), "a"), 0o755))
	move := func(ctx context.Context, from, to string) error {
		return root.moveWithRecords(ctx, from, to, nil, func() error {
			return os.Rename(filepath.Join(root.Dir(), from), filepath.Join(root.Dir(), to))
		})
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root.Dir(), hubDir), 0o750))
	held, err := flockWithin(filepath.Join(root.Dir(), hubDir, movesLockFile), time.Second, nil, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, move(ctx, "a", "b"), context.DeadlineExceeded)
	require.DirExists(t, filepath.Join(root.Dir(), "a"))

	go func() { time.Sleep(300 * time.Millisecond); held() }()
	require.NoError(t, move(context.Background(), "a", "b"), "waits for the other move to end")
	require.DirExists(t, filepath.Join(root.Dir(), "b"))
}

// TestNothingIsRemovedThroughAMount: shared data outside the site root
// is bind-mounted into a space. Removing the space moved the mount along
// into the site trash, and purge-trash then deleted the shared data
// through it (a reviewer's finding); a delete step of the folder would
// have too. Now the removal, the purge and the delete step refuse while a
// filesystem is mounted beneath, and do nothing; unmounted, they go on.
func TestNothingIsRemovedThroughAMount(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			s := newAuditSite(t, dir, t.TempDir(), index)
			space := &CJSpace{Name: "lab"}
			_, err := s.a.cjSpace(ctx, space, false)
			require.NoError(t, err)
			outside := t.TempDir()
			precious := filepath.Join(outside, "precious.txt")
			require.NoError(t, os.WriteFile(precious, []byte("not the lab's"), 0o644))
			bindMount(t, outside, filepath.Join(dir, "spaces", "lab", "shared"))

			_, err = s.a.cjSpace(ctx, space, true)
			require.ErrorIs(t, err, ErrMountedBeneath)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(cjClassify(err), &appErr) && appErr.NonRetryable(), "not retried for ever")
			require.DirExists(t, filepath.Join(dir, "spaces", "lab", "shared"), "the space stays")
			res, err := Delete(ctx, s.a.Root, []string{"/spaces/lab"}, nil, StepOptions{})
			require.NoError(t, err)
			require.Equal(t, CodeFailed, res[0].Code)
			require.Contains(t, res[0].Message, "mounted beneath")
			res, err = Delete(ctx, s.a.Root, []string{"/spaces/lab/shared"}, nil, StepOptions{}) // the mount point itself
			require.NoError(t, err)
			require.Equal(t, CodeFailed, res[0].Code)
			require.FileExists(t, precious)

			// A mount in a trash entry (moved there before this check).
			entry := filepath.Join(dir, trashFolder, "old-1")
			require.NoError(t, os.MkdirAll(entry, 0o755))
			bindMount(t, outside, filepath.Join(entry, "shared"))
			require.ErrorIs(t, s.a.Root.PurgeTrash(context.Background(), "old-1"), ErrMountedBeneath)
			require.FileExists(t, precious)

			require.NoError(t, unix.Unmount(filepath.Join(entry, "shared"), 0))
			require.NoError(t, s.a.Root.PurgeTrash(context.Background(), "old-1"))
			require.NoFileExists(t, entry)
			require.FileExists(t, precious)
		})
	}
}

// TestPurgeTrashLeavesAStubWithOtherNames: on a site keeping records in
// the state index, a stub of a removed space also has a name (a hard
// link) in another space, which the index does not know. A delete step
// refuses such a tree; purge-trash removed it with its record, and the
// audit and the collector then freed the data the other name still needs
// (a reviewer's finding). Now purge-trash refuses too.
func TestPurgeTrashLeavesAStubWithOtherNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), true)
	for _, n := range []string{"lab", "other"} {
		_, err := s.a.cjSpace(ctx, &CJSpace{Name: n}, false)
		require.NoError(t, err)
	}
	s.migrateFiles(t, "spaces/lab", map[string]string{"f.txt": "shared by two spaces"})
	require.NoError(t, os.Link(filepath.Join(dir, "spaces", "lab", "f.txt"), filepath.Join(dir, "spaces", "other", "f.txt")))
	_, err := s.a.cjSpace(ctx, &CJSpace{Name: "lab"}, true)
	require.NoError(t, err)
	entry := trashEntry(t, dir)
	err = s.a.Root.PurgeTrash(context.Background(), entry)
	require.ErrorContains(t, err, "1 stubs here have other names")
	require.Empty(t, s.dropLeakedAndCollect(t).Leaked, "the stub's reference kept")

	require.NoError(t, os.Remove(filepath.Join(dir, "spaces", "other", "f.txt")))
	require.NoError(t, s.a.Root.PurgeTrash(context.Background(), entry))
	require.NoDirExists(t, filepath.Join(dir, trashFolder, entry))
}

// TestASpaceOnAnotherFilesystemIsNotRetriedForEver: spaces/ is a
// filesystem of its own beneath the root, so no rename takes a space to
// the site trash; its removal failed with EXDEV, retried for ever (a
// reviewer's finding). It now fails at once, not retried, saying why, and
// the space is left whole.
func TestASpaceOnAnotherFilesystemIsNotRetriedForEver(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), true)
	spaces := filepath.Join(dir, "spaces")
	mountTmpfsAt(t, spaces)
	space := &CJSpace{Name: "lab"}
	_, err := s.a.cjSpace(context.Background(), space, false)
	require.NoError(t, err)
	f := filepath.Join(spaces, "lab", "f.txt")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	_, err = s.a.cjSpace(context.Background(), space, true)
	require.ErrorContains(t, err, "on another filesystem than the site trash")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(cjClassify(err), &appErr) && appErr.NonRetryable())
	require.FileExists(t, f)
}

// TestSettledRecordsGoToTheRemovalsOwnEntry: the retry of a killed space
// removal (TestAKilledRemovalCarriesRecordsWrittenDuringIt) gave a record
// left at the old path to the first trash entry of the space holding a
// file of that inode number at that path: an older entry on another
// filesystem (a btrfs subvolume per space numbers its inodes afresh; here
// a tmpfs) took it, and the stub the removal trashed was left without a
// record (a reviewer's finding). Now the newest entry is looked at first,
// and a file takes a record only when the record's identity checks
// (inode and birth time) hold for it.
func TestSettledRecordsGoToTheRemovalsOwnEntry(t *testing.T) {
	site := filepath.Join(t.TempDir(), "site")
	mountTmpfsAt(t, site) // inode numbers from the start
	s := newAuditSite(t, site, t.TempDir(), true)
	space := &CJSpace{Name: "lab"}
	_, err := s.a.cjSpace(context.Background(), space, false)
	require.NoError(t, err)
	s.migrateFiles(t, "spaces/lab", map[string]string{"late.txt": "the stub's data"})
	fi, err := os.Lstat(filepath.Join(site, "spaces/lab/late.txt"))
	require.NoError(t, err)

	// An older entry of "lab" on a filesystem of its own, whose late.txt
	// has the stub's inode number.
	old := filepath.Join(site, trashFolder, "lab-1")
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o750))
	mountTmpfsAt(t, old)
	for i := 0; ; i++ {
		p := filepath.Join(old, fmt.Sprint("pad", i))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
		pfi, err := os.Lstat(p)
		require.NoError(t, err)
		if inode(pfi) == inode(fi) {
			require.NoError(t, os.Rename(p, filepath.Join(old, "late.txt")))
			break
		}
		require.Less(t, inode(pfi), inode(fi), "the inode number was not reached")
	}
	// The removal, killed right after its rename (its records at the old
	// path only, as one written during the move).
	entry := fmt.Sprintf("lab-%d", time.Now().UnixNano())
	require.NoError(t, os.Rename(filepath.Join(site, "spaces/lab"), filepath.Join(site, trashFolder, entry)))
	_, err = s.a.cjSpace(context.Background(), space, true) // the retry
	require.NoError(t, err)

	rec, err := s.a.Root.state.index.get(path.Join(trashFolder, entry, "late.txt"))
	require.NoError(t, err)
	require.NotNil(t, rec, "the stub the removal trashed keeps its record")
	rec, err = s.a.Root.state.index.get(path.Join(trashFolder, "lab-1", "late.txt"))
	require.NoError(t, err)
	require.Nil(t, rec, "an unrelated file took the stub's record")
	require.NoError(t, unix.Unmount(old, unix.MNT_DETACH))
	require.NoError(t, s.a.Root.RestoreFromTrash(context.Background(), entry, "/spaces/back"))
	s.requireRecalled(t, "spaces/back", map[string]string{"late.txt": "the stub's data"})
}

// TestAPurgeRacingARestoreLosesNothing: a purge of a trash entry emptied
// the folder it had opened by path; a restore of the same entry in the
// midst of it moved that folder back to the space, and the purge went on
// emptying it there: both reported success over a restored space emptied
// (a reviewer's scratch test). The purge now claims the entry first,
// under the moves lock the restore takes: whichever comes second finds the
// entry gone.
func TestAPurgeRacingARestoreLosesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), true)
	_, err := s.a.cjSpace(ctx, &CJSpace{Name: "lab"}, false)
	require.NoError(t, err)
	for i := range 40 {
		d := filepath.Join(dir, "spaces", "lab", fmt.Sprintf("d%02d", i))
		require.NoError(t, os.Mkdir(d, 0o755))
		for j := range 100 {
			require.NoError(t, os.WriteFile(filepath.Join(d, fmt.Sprint(j)), []byte("x"), 0o644))
		}
	}
	_, err = s.a.cjSpace(ctx, &CJSpace{Name: "lab"}, true)
	require.NoError(t, err)
	entry := trashEntry(t, dir)
	trash := filepath.Join(dir, filepath.FromSlash(trashFolder))
	files := func(at string) (n int) {
		_ = filepath.WalkDir(at, func(_ string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}
	done := make(chan error, 1)
	go func() { done <- s.a.Root.PurgeTrash(ctx, entry) }()
	// The restore comes once the purge has removed a file, wherever the
	// entry is by then.
	for files(trash) == 4000 {
		time.Sleep(time.Millisecond)
	}
	restoreErr := s.a.Root.RestoreFromTrash(ctx, entry, "/spaces/lab")
	restored := files(filepath.Join(dir, "spaces", "lab"))
	require.NoError(t, <-done)
	if restoreErr == nil {
		require.Equal(t, restored, files(filepath.Join(dir, "spaces", "lab")), "the purge removed restored files")
		return
	}
	if !errors.Is(restoreErr, fs.ErrNotExist) {
		require.ErrorContains(t, restoreErr, "being purged")
	}
	require.NoDirExists(t, filepath.Join(dir, "spaces", "lab"))
}

// TestASnapshotsTrashEntryTakesItsRecords: a snapshot's removal killed
// after its move to the trash leaves snapshot.lab.s1.<ns> there, its index
// records at the snapshot's path (its removal's retry reads them there).
// A restore-space of that entry moved no records, so its stubs were read
// as resident and their content freed; a purge left the records behind (a
// reviewer's scratch test). A purge takes the records from the snapshot's
// path now. A restore is refused: the removal's retry drops the stubs'
// references before it removes the entry, and a restore in between (or
// one run again after the snapshot was taken anew, or to the snapshot's
// own path) lost data (a second reviewer's scratch tests).
func TestASnapshotsTrashEntryTakesItsRecords(t *testing.T) {
	for _, purge := range []bool{false, true} {
		t.Run(map[bool]string{false: "restore", true: "purge"}[purge], func(t *testing.T) {
			dir, tdir, s := snapshotStubSite(t, true)
			_, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
			require.NoError(t, err)
			require.True(t, runChild(t, "^TestSnapshotStubsChild$", "HUB_SNAPSTUB_CHILD_ROOT="+dir,
				"HUB_SNAPSTUB_CHILD_INDEX=1", "HUB_SNAPSTUB_CHILD_TARGET="+tdir, "HUB_SNAPSTUB_CHILD_DELETE=1",
				"HUB_FAULT_POINT=trash.renamed@1"))
			entry := trashEntry(t, dir)
			if purge {
				require.NoError(t, s.a.Root.PurgeTrash(context.Background(), entry))
				requireNoIndexRecordsBelow(t, s.a.Root, ".snapshots")
				requireNoIndexRecordsBelow(t, s.a.Root, trashFolder)
				return
			}
			for _, to := range []string{"/spaces/kept", "/.snapshots/lab/s1"} {
				require.ErrorContains(t, s.a.Root.RestoreFromTrash(context.Background(), entry, to), "a removed snapshot's copy, not restored")
			}
			// The removal again finishes; the stubs' content stays with
			// the space's own stubs.
			_, err = s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), true)
			require.NoError(t, err)
			requireNoIndexRecordsBelow(t, s.a.Root, ".snapshots")
			requireNoIndexRecordsBelow(t, s.a.Root, trashFolder)
			s.dropLeakedAndCollect(t)
			s.requireRecalled(t, "spaces/lab", auditSpaceFiles)
		})
	}
}

// TestARemovalsStaleAttemptLeavesASnapshotTakenAnew: a removal of a
// snapshot drops its index records once its trash entry is emptied. A
// stale attempt of it (one that outlived its retry, which finished the
// removal) did so after the snapshot was taken again under its name, and
// the new snapshot's stubs lost their records (a reviewer's finding,
// unconfirmed by them: no hook between the two). The records are dropped
// under the moves lock, and only while no snapshot is at the path.
func TestARemovalsStaleAttemptLeavesASnapshotTakenAnew(t *testing.T) {
	_, tdir, s := snapshotStubSite(t, true)
	_, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
	require.NoError(t, err)
	// What the stale attempt does last, with the snapshot there.
	require.NoError(t, s.a.Root.forgetRemovedSnapshot(context.Background(), ".snapshots/lab/s1"))
	s.dropSpaceStubsAndCollect(t)
	s.requireRecalled(t, ".snapshots/lab/s1", auditSpaceFiles)
}
