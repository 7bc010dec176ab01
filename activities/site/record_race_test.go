package site

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// onSiteFlush runs act once, at the first flush of the site's filesystem
// from then on (a step's flush before it writes its records): the instant
// a user or another worker acts between a step's look at its files and
// its records. Not parallel: flushSite is the package's.
func onSiteFlush(t *testing.T, act func()) {
	t.Helper()
	var fired atomic.Bool
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	flushSite = func(d *os.File) error {
		if fired.CompareAndSwap(false, true) {
			act()
		}
		return fsutil.SyncFSOf(d)
	}
}

// TestRecallEndLeavesAFileMovedToItsPath: once a recall has written a
// stub's data back and before it records the end, the user moves the file
// away and another stub to its path. The recall's end wrote the first
// file's record over the second's, by path: the second stub then read as
// resident, its data only on the target with nothing naming it. Now the
// recall leaves both: the moved stub recalls its own data, the recalled
// file (marked "recall in progress", whole) its own.
func TestRecallEndLeavesAFileMovedToItsPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.bin"), filepath.Join(dir, "b.bin")
	dataA := bytes.Repeat([]byte("the file being recalled "), 300)
	dataB := bytes.Repeat([]byte("another stub, moved to its path "), 300)
	writeOld(t, a, dataA)
	writeOld(t, b, dataB)
	root := newRoot(t, dir, false)
	target := fsTarget(t)
	res, err := Migrate(ctx, root, []string{"/a.bin", "/b.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a.bin", "/b.bin"})

	onSiteFlush(t, func() {
		got, err := os.ReadFile(a)
		assert.NoError(t, err)
		assert.Equal(t, dataA, got, "the data is back when the recall flushes")
		assert.NoError(t, os.Rename(a, a+".old"))
		assert.NoError(t, os.Rename(b, a))
	})
	res, err = Recall(ctx, root, []string{"/a.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code, "%+v", res[0])
	require.Contains(t, res[0].Message, "replaced at its path")
	flushSite = fsutil.SyncFSOf

	for range 2 {
		_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
	res, err = Recall(ctx, root, []string{"/a.bin", "/a.bin.old"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a.bin", "/a.bin.old"})
	for name, want := range map[string][]byte{a: dataB, a + ".old": dataA} {
		got, err := os.ReadFile(name)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s holds other bytes", name)
	}
}

// TestRecallEndLeavesAReleasedStub: a migrate killed after marking a file
// "release in progress" leaves it whole; a recall finds it so ("data was
// local") and, while it flushes, another worker's migrate resumes and
// releases the file, recording the stub. The recall's end then wrote its
// premigrated record, of the whole file, over the stub's: the stub read
// as resident and its data was lost. Now the recall leaves the stub and
// its record, and the stub recalls.
func TestRecallEndLeavesAReleasedStub(t *testing.T) {
	for _, index := range []bool{false, true} {
		t.Run(map[bool]string{false: "xattr", true: "index"}[index], func(t *testing.T) {
			ctx := context.Background()
			dir, tdir := t.TempDir(), t.TempDir()
			abs := filepath.Join(dir, "f.bin")
			data := bytes.Repeat([]byte("released while its recall ran "), 300)
			writeOld(t, abs, data)
			idx := map[bool]string{false: "0", true: "1"}[index]
			require.True(t, runChild(t, "^TestInterruptedReleaseChild$", "HUB_FAULT_POINT=migrate.marked@1",
				"HUB_RELEASE_CHILD_ROOT="+dir, "HUB_RELEASE_CHILD_TARGET="+tdir, "HUB_RELEASE_CHILD_INDEX="+idx), "killed at migrate.marked")
			target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
			require.NoError(t, err)
			recaller, migrator := newRoot(t, dir, index), newRoot(t, dir, index)

			onSiteFlush(t, func() {
				res, err := Migrate(ctx, migrator, []string{"/f.bin"}, target, "t", StepOptions{})
				if assert.NoError(t, err) {
					assert.Equal(t, CodeOK, res[0].Code, "%+v", res[0])
				}
			})
			res, err := Recall(ctx, recaller, []string{"/f.bin"}, only("t", target), StepOptions{})
			require.NoError(t, err)
			require.Equal(t, CodeFailed, res[0].Code, "%+v", res[0])
			flushSite = fsutil.SyncFSOf
			fi, err := os.Stat(abs)
			require.NoError(t, err)
			require.Zero(t, fi.Size(), "the other worker released the file")

			for range 2 {
				_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
				require.NoError(t, err)
			}
			res, err = Recall(ctx, recaller, []string{"/f.bin"}, only("t", target), StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/f.bin"})
			got, err := os.ReadFile(abs)
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, got), "the stub's data is lost")
		})
	}
}

// TestARecallsEndLeavesAnotherProcesssRelease: as
// TestRecallEndLeavesAReleasedStub, but the migrate that resumes the
// release runs in another worker process, which the recall's in-process
// lock does not keep out, and it is held (its fault trace is a FIFO that
// is not read) right after it truncated the file, leased, before it
// records the stub. The recall's end had checked the record (still the
// release's mark) and then wrote its own, premigrated or none, over the
// stub's: the stub read as a resident file of size 0, and the next migrate
// let its content go (a reviewer's finding). Now both hold the file leased
// from their check to their record: the recall's end waits for the
// release, then finds the stub's record and leaves it. Without the fix
// this fails in most runs, not all: the release must record within the
// ~60 ms the recall's end waits to open the file.
func TestARecallsEndLeavesAnotherProcesssRelease(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		index, delete, noLease bool
	}{
		{"xattr", false, false, false}, {"index", true, false, false}, {"xattr, reference dropped on recall", false, true, false},
		// As on NFS: no lease is granted to either side.
		{"no leases, xattr", false, false, true}, {"no leases, index", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir, tdir := t.TempDir(), t.TempDir()
			abs := filepath.Join(dir, "f.bin")
			data := bytes.Repeat([]byte("released by another worker while recalled "), 300)
			writeOld(t, abs, data)
			idx := map[bool]string{false: "0", true: "1"}[tc.index]
			child := []string{"HUB_RELEASE_CHILD_ROOT=" + dir, "HUB_RELEASE_CHILD_TARGET=" + tdir, "HUB_RELEASE_CHILD_INDEX=" + idx}
			if tc.noLease {
				child = append(child, "HUB_RELEASE_CHILD_NO_LEASES=1")
				withoutLeases(t)
			}
			require.True(t, runChild(t, "^TestInterruptedReleaseChild$", append(child, "HUB_FAULT_POINT=migrate.marked@1")...), "killed at migrate.marked")
			target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
			require.NoError(t, err)
			root := newRoot(t, dir, tc.index)

			// The other worker reports each fault point it reaches by opening
			// the FIFO; after target.flushed@1 the next one (migrate.truncated)
			// waits for gate.
			fifo := filepath.Join(t.TempDir(), "trace")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			flushed, gate := make(chan struct{}), make(chan struct{})
			go func() {
				for {
					f, err := os.OpenFile(fifo, os.O_RDONLY, 0)
					if err != nil {
						return
					}
					lines, _ := io.ReadAll(f)
					f.Close()
					// Two points opened in a row may come in one read, and a
					// read may come empty: a point written between the last
					// read's end and its close is lost (EPIPE) and its open
					// may let the next read's open through.
					points := strings.Fields(string(lines))
					if slices.Contains(points, "done") {
						return // the test's own write
					}
					if slices.Contains(points, "target.flushed@1") {
						close(flushed)
						<-gate
					}
				}
			}()
			var out bytes.Buffer
			cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptedReleaseChild$", "-test.count=1")
			cmd.Env = append(append(os.Environ(), child...), "HUB_FAULT_POINT=none@1", "HUB_FAULT_TRACE="+fifo)
			cmd.Stdout, cmd.Stderr = &out, &out
			exited, ended := make(chan error, 1), make(chan struct{})
			var opened sync.Once
			open := func() { opened.Do(func() { close(gate) }) }
			if tc.noLease {
				// Without leases, the recall's end checks at once (after
				// the site's flush): the child is let go once the end has
				// checked, and the end writes once the child has ended.
				recallEndChecked = func(string) { open(); <-ended }
				t.Cleanup(func() { recallEndChecked = nil })
			}
			onSiteFlush(t, func() {
				require.NoError(t, cmd.Start())
				go func() { exited <- cmd.Wait(); close(ended) }()
				select {
				case <-flushed:
				case <-ended:
					t.Fatalf("the other worker ended before its flush: %v\n%s", <-exited, out.String())
				}
				for { // truncated, leased, not yet recorded
					fi, err := os.Stat(abs)
					require.NoError(t, err)
					if fi.Size() == 0 {
						break
					}
					time.Sleep(100 * time.Microsecond)
				}
				// Leased, the child keeps the recall's end from opening
				// the file; the file's lock (Root.lockFile) keeps it from
				// checking until the child has recorded.
				time.AfterFunc(300*time.Millisecond, open)
			})
			res, err := recall(ctx, root, []string{"/f.bin"}, only("t", target), StepOptions{}, tc.delete)
			require.NoError(t, err)
			require.NoError(t, <-exited, "%s", out.String())
			if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
				_, _ = f.WriteString("done\n")
				f.Close()
			}
			flushSite = fsutil.SyncFSOf
			t.Logf("the recall: %+v", res[0])

			for range 2 {
				_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
				require.NoError(t, err)
			}
			requireRecallsIntact(t, root, "/f.bin", only("t", target), data)
		})
	}
}

// TestReverseStubOfARunningProgram: a premigrated program that runs (a
// daemon started from the site) is made resident. The lease taken for
// TestARecallsEndLeavesAnotherProcesssRelease opened it for writing,
// which a running program refuses (ETXTBSY), and the step failed for as
// long as the program ran (a reviewer's finding). It is opened for
// reading instead, or checked by path.
func TestReverseStubOfARunningProgram(t *testing.T) {
	for _, index := range []bool{false, true} {
		t.Run(map[bool]string{false: "xattr", true: "index"}[index], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			bin := filepath.Join(dir, "daemon")
			data, err := os.ReadFile("/bin/sleep")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(bin, data, 0o755))
			root, target := newRoot(t, dir, index), fsTarget(t)
			res, err := Premigrate(ctx, root, []string{"/daemon"}, target, "t", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/daemon"})
			cmd := exec.Command(bin, "30")
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			_, err = os.OpenFile(bin, os.O_WRONLY, 0)
			require.ErrorIs(t, err, syscall.ETXTBSY, "running")

			res, err = ReverseStub(ctx, root, []string{"/daemon"}, only("t", target), StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/daemon"})
		})
	}
}

// afterStat is a target that runs fn after each Stat: the instant between
// a step's check of an object and what it does next.
type afterStat struct {
	targets.Driver
	fn func(key string)
}

func (a *afterStat) Stat(ctx context.Context, key string) (targets.Object, error) {
	obj, err := a.Driver.Stat(ctx, key)
	a.fn(key)
	return obj, err
}

// TestReleaseLeavesAFileReverseStubbed: a migrate has marked a file and
// checked its reference; before it releases the file, another worker
// reverse-stubs it (the data is local: it clears the record and drops the
// reference). The release truncated the file all the same and recorded a
// stub whose reference was gone: the collector then freed its only copy.
// Now the release finds the record it marked gone and leaves the file
// whole.
func TestReleaseLeavesAFileReverseStubbed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	data := bytes.Repeat([]byte("made resident while it was released "), 300)
	writeOld(t, abs, data)
	migrator, other := newRoot(t, dir, false), newRoot(t, dir, false)
	target := fsTarget(t)
	var fired atomic.Bool
	hook := &afterStat{Driver: target, fn: func(key string) {
		rec, _ := migrator.state.get(abs, "f.bin")
		if !strings.HasPrefix(key, refsDir) || rec == nil || rec.Pending != pendingRelease || !fired.CompareAndSwap(false, true) {
			return
		}
		res, err := ReverseStub(ctx, other, []string{"/f.bin"}, only("t", target), StepOptions{})
		if assert.NoError(t, err) {
			assert.Equal(t, CodeOK, res[0].Code, "%+v", res[0])
		}
	}}
	res, err := Migrate(ctx, migrator, []string{"/f.bin"}, hook, "t", StepOptions{})
	require.NoError(t, err)
	require.True(t, fired.Load(), "the reverse stub did not run between the reference's check and the release")
	require.Equal(t, CodeFailed, res[0].Code, "%+v", res[0])

	for range 2 {
		_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
	res, err = Recall(ctx, migrator, []string{"/f.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	t.Logf("recall: %+v", res[0])
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the file's data is lost")
}

// TestFailedStubReceiveKeepsTheIndexRecord: on a site keeping records in
// attributes, a file whose record is in the index instead (its attributes
// could not be written) is the destination of a received stub. The new
// stub's record went into its attributes and the index's record of the
// file at the path was removed before the stub's rename, which then
// failed: the destination's own stub was left without a record, its data
// unreachable. Now the index's record goes only once the rename is done.
func TestFailedStubReceiveKeepsTheIndexRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newTransferFixture(t, false)
	data := bytes.Repeat([]byte("the destination's own stub, recorded in the index "), 100)
	abs := fx.abs("/f.txt")
	writeOld(t, abs, data)
	res, err := Migrate(ctx, newRoot(t, fx.dir, true), []string{"/f.txt"}, fx.target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	// Immutable, the file cannot be renamed over (EPERM, also for root).
	if err := exec.Command("chattr", "+i", abs).Run(); err != nil {
		t.Skipf("cannot make a file immutable here (chattr +i: %v): no rename to fail", err)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", abs).Run() })
	_, err = fx.receive(ReceiveInput{Step: "send"}, fx.sent, nil)
	require.Error(t, err)
	require.NoError(t, exec.Command("chattr", "-i", abs).Run())
	fx.requireRecall(t, "/f.txt", data)
}

// migratedStub is /f.bin, holding data, migrated to a filesystem target
// (t) of a new site.
func migratedStub(t *testing.T, data []byte) (abs string, root *Root, target targets.Driver) {
	t.Helper()
	dir := t.TempDir()
	abs = filepath.Join(dir, "f.bin")
	writeOld(t, abs, data)
	root, target = newRoot(t, dir, false), fsTarget(t)
	res, err := Migrate(context.Background(), root, []string{"/f.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	return abs, root, target
}

// TestRecallRefusesAFileOpenElsewhere: a stub another program has open
// is not recalled (a write through its descriptor would mix with the data
// written back); closed, it is.
func TestRecallRefusesAFileOpenElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := bytes.Repeat([]byte("recalled once nobody has it open "), 300)
	abs, root, target := migratedStub(t, data)
	other, err := os.Open(abs)
	require.NoError(t, err)
	res, err := Recall(ctx, root, []string{"/f.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code, "%+v", res[0])
	require.Contains(t, res[0].Message, errOpenElsewhere.Error())
	require.NoError(t, other.Close())
	res, err = Recall(ctx, root, []string{"/f.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
}

// TestRecallLetsAWriterInAfterIt: a program opens a stub to save over it
// (O_TRUNC) while the recall writes its data back. The save went through
// at once and the recall's copy went on at its own offset: the file
// ended as the save, zeros and the data's tail, recorded as the
// original. Now the program's open waits until the recall is done with
// the file, and its save is the file's content, resident.
func TestRecallLetsAWriterInAfterIt(t *testing.T) {
	ctx := context.Background()
	abs, root, target := migratedStub(t, bytes.Repeat([]byte("the data written back "), 3000))
	saved := make(chan error, 1)
	t.Cleanup(func() { recallWriting = nil })
	recallWriting = func(string) {
		recallWriting = nil
		go func() {
			f, err := os.OpenFile(abs, os.O_WRONLY|os.O_TRUNC, 0)
			if err == nil {
				_, err = f.WriteString("the user's save")
				err = errors.Join(err, f.Close())
			}
			saved <- err
		}()
		select { // the save, where nothing makes it wait
		case err := <-saved:
			saved <- err
		case <-time.After(300 * time.Millisecond):
		}
	}
	res, err := Recall(ctx, root, []string{"/f.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	t.Logf("recall: %+v", res[0])
	require.NoError(t, <-saved)
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	require.True(t, string(got) == "the user's save", "the save was mixed with the data: %d bytes", len(got))
	_, rec, err := root.Stat("/f.bin")
	require.NoError(t, err)
	require.Nil(t, rec, "the save is resident")
}

// markRecallInterrupted marks the stub at rel "recall in progress", as a
// recall killed after its mark leaves it, then writes content over it in
// place, as its user may do since (a size a recall's could have).
func markRecallInterrupted(t *testing.T, root *Root, rel, content string) {
	t.Helper()
	abs := filepath.Join(root.Dir(), filepath.FromSlash(rel))
	rec, err := root.state.get(abs, rel)
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Less(t, len(content), int(rec.Size))
	rec.Pending = pendingRecall
	require.NoError(t, root.state.set(abs, rel, *rec))
	require.NoError(t, os.WriteFile(abs, []byte(content), 0o644))
	_, cur, err := root.Stat("/" + rel)
	require.NoError(t, err)
	require.NotNil(t, cur, "the user's content passes for a recall's")
}

// TestInterruptedRecallIsNotTakenForAStub: a file whose recall was
// interrupted, and which its user wrote since, passed for a stub: a
// premigrate or migrate skipped it as "already migrated" (a success, so
// a send sent the old content's key), and a snapshot kept it as a stub of
// the old content, without the user's bytes. Now the steps skip it saying
// why (not a success: a send sends nothing) and a snapshot fails, until a
// recall has looked.
func TestInterruptedRecallIsNotTakenForAStub(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir, tdir, s := snapshotStubSite(t, index)
			markRecallInterrupted(t, s.a.Root, "spaces/lab/f.txt", "new work")
			for _, migrate := range []bool{false, true} {
				step := Premigrate
				if migrate {
					step = Migrate
				}
				res, err := step(ctx, s.a.Root, []string{"/spaces/lab/f.txt"}, s.target, "archive", StepOptions{})
				require.NoError(t, err)
				require.Equal(t, CodeSkipped, res[0].Code, "%+v", res[0])
				require.Equal(t, OutcomeSkipped, toOutcomes(res)[0].State, "not a success: a send sends nothing")
				require.Contains(t, res[0].Message, errRecallInterrupted.Error())
			}
			_, err := s.a.cjSnapshot(ctx, snapshotOfLab(tdir), false)
			require.ErrorIs(t, err, errRecallInterrupted)
			require.NoDirExists(t, filepath.Join(dir, cjSnapshotsDir, "lab", "s1"))
			got, err := os.ReadFile(filepath.Join(dir, "spaces", "lab", "f.txt"))
			require.NoError(t, err)
			require.Equal(t, "new work", string(got))
		})
	}
}

// TestTimesOfATemporaryFileSwappedForASymlink: a received or recalled
// file is written under a temporary name in its user's folder, where the
// user may move it away and put a symlink to any other file in its place
// before its times are set; they were set by name, following the symlink
// (a root worker set the other file's mtime). They are set through the
// file's descriptor now, and its birth time read there.
func TestTimesOfATemporaryFileSwappedForASymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	writeOld(t, victim, []byte("somebody else's file"))
	before, err := os.Stat(victim)
	require.NoError(t, err)
	tmp, err := fsutil.OpenTemp(context.Background(), filepath.Join(dir, "f.txt"))
	require.NoError(t, err)
	defer tmp.Close()
	moved := filepath.Join(dir, "moved")
	require.NoError(t, os.Rename(tmp.Name(), moved))
	require.NoError(t, os.Symlink(victim, tmp.Name()))

	when := time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)
	require.NoError(t, setAtimeMtimeOf(tmp, when))
	after, err := os.Stat(victim)
	require.NoError(t, err)
	require.True(t, before.ModTime().Equal(after.ModTime()), "the symlink's target was touched")
	fi, err := os.Stat(moved)
	require.NoError(t, err)
	require.True(t, when.Equal(fi.ModTime()))
	require.Equal(t, birthTime(moved), birthTimeOf(tmp))
}

// TestTouchedStubStaysMigrated: an empty stub whose mtime its user
// changed (touch, a backup's restore) holds no byte of its user's. It was
// taken for resident: a premigrate hashed the placeholder, recorded it
// over the stub's record and dropped the stub's reference, and the
// collector then freed the data. Now it stays migrated: a premigrate skips
// it, the data survives an audit and a collection, and it recalls. A
// small file kept whole as its own stub (stub_size above its size) and
// rewritten at the same size is its user's new content: resident, and
// premigrated anew.
func TestTouchedStubStaysMigrated(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir, target := t.TempDir(), fsTarget(t)
			root := newRoot(t, dir, index)
			abs, small := filepath.Join(dir, "f.txt"), filepath.Join(dir, "small.txt")
			kept, rewritten := filepath.Join(dir, "kept.txt"), filepath.Join(dir, "rewritten.txt")
			const data = "the data of a stub its user touched"
			const keptData = "the data of an 8-byte stub its user touched"
			require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
			require.NoError(t, os.WriteFile(kept, []byte(keptData), 0o644))
			require.NoError(t, os.WriteFile(rewritten, []byte("the data of a stub its user rewrote"), 0o644))
			require.NoError(t, os.WriteFile(small, []byte("small, kept whole"), 0o644))
			res, err := Migrate(ctx, root, []string{"/f.txt"}, target, "t", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/f.txt"})
			res, err = Migrate(ctx, root, []string{"/small.txt"}, target, "t", StepOptions{StubSize: 4096})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/small.txt"})
			res, err = Migrate(ctx, root, []string{"/kept.txt", "/rewritten.txt"}, target, "t", StepOptions{StubSize: 8})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/kept.txt", "/rewritten.txt"})
			now := time.Now()
			require.NoError(t, os.Chtimes(abs, now, now))
			require.NoError(t, os.Chtimes(kept, now, now))
			require.NoError(t, os.WriteFile(rewritten, []byte("THE DATA"), 0o644)) // its 8 bytes, its user's
			require.NoError(t, os.WriteFile(small, []byte("SMALL, KEPT WHOLE"), 0o644))

			// A stub keeping 8 bytes, touched: its record stays (checked
			// against the target's first bytes); rewritten: its user's.
			premigrate := func(p string, code Code) {
				t.Helper()
				res, err := Premigrate(ctx, root, []string{p}, target, "t", StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, code, []string{p})
			}
			premigrate("/kept.txt", CodeSkipped)
			premigrate("/rewritten.txt", CodeOK)

			e, _, err := root.Stat("/f.txt")
			require.NoError(t, err)
			require.Equal(t, Migrated, e.State)
			e, _, err = root.Stat("/small.txt")
			require.NoError(t, err)
			require.Equal(t, Resident, e.State, "rewritten at the same size")
			premigrate("/f.txt", CodeSkipped)
			premigrate("/small.txt", CodeOK)
			_, rec, err := root.Stat("/small.txt")
			require.NoError(t, err)
			require.Equal(t, sumOf("SMALL, KEPT WHOLE"), rec.Checksum)

			later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
			_, err = AuditRefs(ctx, root, map[string]targets.Driver{"t": target}, AuditOptions{Now: later, Drop: true})
			require.NoError(t, err)
			for range 2 {
				_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
				require.NoError(t, err)
			}
			res, err = Recall(ctx, root, []string{"/f.txt"}, only("t", target), StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/f.txt"})
			got, err := os.ReadFile(abs)
			require.NoError(t, err)
			require.Equal(t, data, string(got))
			// The touched 8-byte stub's data survived too.
			requireObject(t, target, contentKey(sumOf(keptData)), keptData)
		})
	}
}

// withoutLeases stands in for a kernel that grants no lease (NFS) until
// the test ends. Tests using it are not parallel.
func withoutLeases(t testing.TB) {
	exclusiveLease = func(*os.File) error { return nil }
	t.Cleanup(func() { exclusiveLease = writeLease })
}
