package site

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// Found by a fifth audit (the collector and the references audit); each
// test failed on the code before its fix.

// requireRecallsIntact recalls p and checks it comes back byte-identical.
func requireRecallsIntact(t *testing.T, root *Root, p string, tf TargetFunc, data []byte) {
	t.Helper()
	res, err := Recall(context.Background(), root, []string{p}, tf, StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeOK, res[0].Code, "%s: the data is lost: %s", p, res[0].Message)
	got, err := os.ReadFile(filepath.Join(root.Dir(), filepath.FromSlash(p)))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "%s: recalled bytes differ", p)
}

// TestAuditKeepsAReferenceWrittenAgain: a migrate killed right after it
// wrote its reference left the marker; eight days later the references
// audit lists it as leaked, and while it runs the migrate is retried,
// which names the same reference (same file, same content): it writes the
// marker again, records it, finds it there and releases the file. The
// audit then dropped the marker it had listed as old, and the collector
// freed the stub's only copy. Now the audit looks at the marker again
// before the drop and, after it, reads the record at the marker's path
// and puts the reference back (the retry lands here between the two).
func TestAuditKeepsAReferenceWrittenAgain(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir, tdir := t.TempDir(), t.TempDir()
			data := []byte("the only copy of this report, once released")
			writeOld(t, filepath.Join(dir, "f.bin"), data)
			root := newRoot(t, dir, index)
			target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
			require.NoError(t, err)

			idx := map[bool]string{false: "0", true: "1"}[index]
			require.True(t, runChild(t, "^TestInterruptedReleaseChild$", "HUB_RELEASE_CHILD_ROOT="+dir,
				"HUB_RELEASE_CHILD_TARGET="+tdir, "HUB_RELEASE_CHILD_INDEX="+idx, "HUB_FAULT_POINT=upload.ref-added@1"))
			fi, err := os.Lstat(filepath.Join(dir, "f.bin"))
			require.NoError(t, err)
			sum := sha(data)
			ref, err := root.refID(fi, birthTime(filepath.Join(dir, "f.bin")), sum)
			require.NoError(t, err)
			marker := filepath.Join(tdir, filepath.FromSlash(refKey(sum, ref)))
			old := time.Now().Add(-DefaultAuditMinAge - 24*time.Hour)
			require.NoError(t, os.Chtimes(marker, old, old))

			var once sync.Once
			hook := &stepHook{Driver: target, onDel: func(key string) {
				if key == refKey(sum, ref) {
					once.Do(func() {
						res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{})
						require.NoError(t, err)
						requireAll(t, res, CodeOK, []string{"/f.bin"})
					})
				}
			}}
			log := &refLog{Driver: hook, to: target.(targets.Syncer)}
			ar, err := AuditRefs(ctx, root, map[string]targets.Driver{"t": log}, AuditOptions{Drop: true})
			require.NoError(t, err)
			require.Len(t, ar.Leaked, 1)
			require.False(t, ar.Leaked[0].Dropped, "put back")
			log.requireRefWrittenAndFlushed(t)
			for range 2 {
				_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
				require.NoError(t, err)
			}
			requireRecallsIntact(t, root, "/f.bin", only("t", target), data)
		})
	}
}

// lockingHook is a stepHook that keeps its filesystem driver's lock.
type lockingHook struct {
	*stepHook
	targets.Locker
}

// TestCollectionsOfOneTargetDoNotOverlap: two collections of one target
// at once (an attempt retried while the first still ran) freed content a
// new stub needed: one listed a trashed copy as old, the other moved the
// content there afresh (its last reference had just gone, and a migrate
// wrote a new one), and the first deleted that fresh copy. Now a second
// collection of a filesystem target fails while one runs, and a copy is
// looked at again right before it is deleted.
func TestCollectionsOfOneTargetDoNotOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	data := []byte("content X, shared by two files over time")
	for _, f := range []string{"f1.bin", "f2.bin"} {
		writeOld(t, filepath.Join(dir, f), data)
	}
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	tf := only("t", target)
	res, err := Migrate(ctx, root, []string{"/f1.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f1.bin"})

	// Collector B stops in its trash pass; collector A starts meanwhile.
	inB, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hookB := lockingHook{&stepHook{Driver: target, onList: func(prefix string) {
		if prefix == trashDir {
			once.Do(func() { close(inB); <-done })
		}
	}}, target.(targets.Locker)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := Collect(ctx, hookB, CollectOptions{})
		assert.NoError(t, err)
	}()
	<-inB
	_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.ErrorContains(t, err, "another collection of this target is running")
	close(done)
	wg.Wait()

	// A trashed copy written again after the listing is not deleted.
	res, err = Recall(ctx, root, []string{"/f1.bin"}, tf, StepOptions{DeleteOnRecall: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f1.bin"})
	sum := sha(data)
	trashed := filepath.Join(tdir, filepath.FromSlash(trashKey(sum)))
	hook := &stepHook{Driver: target, onStat: func(key string) {
		if key == trashKey(sum) { // the listing saw it old; now it is fresh
			now := time.Now()
			require.NoError(t, os.Chtimes(trashed, now, now))
		}
	}}
	_, err = Collect(ctx, target, CollectOptions{Grace: time.Hour}) // into the trash
	require.NoError(t, err)
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(trashed, old, old))
	cr, err := Collect(ctx, hook, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Zero(t, cr.Deleted)
	res, err = Migrate(ctx, root, []string{"/f2.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f2.bin"})
	require.Contains(t, res[0].Message, "identical content", "restored from the trash, not uploaded")
	requireRecallsIntact(t, root, "/f2.bin", tf, data)
}

// collectAside runs a collection of d (grace one hour) on a goroutine of
// its own, and sends its error.
func collectAside(ctx context.Context, d targets.Driver) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := Collect(ctx, d, CollectOptions{Grace: time.Hour})
		done <- err
	}()
	return done
}

// TestARemovedLockFileLetsNoCollectorDeleteANewCopy: collector A has
// judged an old trash copy unreferenced (it looked for markers) and is
// about to delete it. Meanwhile someone removes the lock file ("to free a
// stuck lock"), and collector B takes a lock of a new one: it lists no
// reference for the content, a migrate then takes the content it finds
// under objects/ for a new stub, and B moves it over the trash copy,
// deleting objects/. A deleted that fresh copy, and the stub had no data.
// Now A asks whether its lock is still held right before it deletes, and
// stops; B finds the stub's marker in its trash pass and puts the content
// back.
func TestARemovedLockFileLetsNoCollectorDeleteANewCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	data := []byte("content X, in the trash and under objects/")
	writeOld(t, filepath.Join(dir, "f.bin"), data)
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	sum := sha(data)
	require.NoError(t, target.Put(ctx, trashKey(sum), bytes.NewReader(data), int64(len(data))))
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(tdir, trashKey(sum)), old, old))
	locker := target.(targets.Locker)

	// A stops after it looked for the content's markers, before it deletes.
	inA, resumeA := make(chan struct{}), make(chan struct{})
	var onceA sync.Once
	hookA := lockingHook{&stepHook{Driver: target, onList: func(prefix string) {
		if prefix == refsDir+sum+"/" { // markerOf's last listing
			onceA.Do(func() { close(inA); <-resumeA })
		}
	}}, locker}
	errA := collectAside(ctx, hookA)
	<-inA

	require.NoError(t, target.Put(ctx, contentKey(sum), bytes.NewReader(data), int64(len(data))))
	require.NoError(t, os.Remove(filepath.Join(tdir, ".hub-lock-collect")))
	// B: a migrate takes objects/X while B moves it; B stops at its trash
	// pass, while A goes on.
	inB, resumeB := make(chan struct{}), make(chan struct{})
	var onceMigrate, onceB sync.Once
	hookB := lockingHook{&stepHook{Driver: target,
		onGet: func(key string) {
			if key == contentKey(sum) {
				onceMigrate.Do(func() {
					res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{})
					assert.NoError(t, err)
					requireAll(t, res, CodeOK, []string{"/f.bin"})
					assert.Contains(t, res[0].Message, "identical content", "the copy under objects/ taken")
				})
			}
		},
		onList: func(prefix string) {
			if prefix == trashDir {
				onceB.Do(func() { close(inB); <-resumeB })
			}
		}}, locker}
	errB := collectAside(ctx, hookB)
	<-inB
	close(resumeA)
	err = <-errA
	close(resumeB)
	require.NoError(t, <-errB)
	requireRecallsIntact(t, root, "/f.bin", only("t", target), data)
	require.ErrorIs(t, err, targets.ErrLockLost, "A stops")
}

// TestCollectorKeepsTheGoodCopy: with content both under objects/ (put
// back by a migrate, which copies) and in the trash, and the trash copy
// damaged (one bit, size and mtime kept), the collector "restored" the
// trash copy over the good one and only then saw the mismatch: the stub
// failed its checksum for good, and every later collection stopped at
// that object. Now a copy already under objects/ is kept (the trash one
// deleted), and a damaged trash copy is checked before it replaces
// anything, counted, and left for the scrub.
func TestCollectorKeepsTheGoodCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	data := []byte("content X: a large archive, in short")
	writeOld(t, filepath.Join(dir, "f1.bin"), data)
	writeOld(t, filepath.Join(dir, "f2.bin"), data)
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	tf := only("t", target)
	sum := sha(data)
	migrate := func(p string) {
		res, err := Migrate(ctx, root, []string{p}, target, "t", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{p})
	}
	migrate("/f1.bin")
	res, err := Recall(ctx, root, []string{"/f1.bin"}, tf, StepOptions{DeleteOnRecall: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f1.bin"})
	_, err = Collect(ctx, target, CollectOptions{})
	require.NoError(t, err)
	migrate("/f2.bin") // X copied back from the trash: in both places
	trashed := filepath.Join(tdir, filepath.FromSlash(trashKey(sum)))
	flipBit(t, trashed)

	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Restored+cr.Damaged)
	requireRecallsIntact(t, root, "/f2.bin", tf, data)

	// Damaged in the trash, and nowhere else: counted, not put back, and
	// a migrate of the same content uploads it again.
	migrate("/f2.bin")
	require.NoError(t, os.Remove(filepath.Join(tdir, filepath.FromSlash(contentKey(sum)))))
	require.NoError(t, os.WriteFile(trashed, data, 0o644))
	flipBit(t, trashed)
	cr, err = Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Damaged)
	require.NoFileExists(t, filepath.Join(tdir, filepath.FromSlash(contentKey(sum))))
	writeOld(t, filepath.Join(dir, "f3.bin"), data)
	migrate("/f3.bin")
	requireRecallsIntact(t, root, "/f3.bin", tf, data)
}

// inBothPlaces puts content data in the trash and under objects/ of a
// filesystem target in tdir, as a migrate that finds it in the trash
// copies it back: f1.bin is migrated, recalled with its reference dropped
// and collected (its content trashed), then f2.bin, of the same content,
// is migrated and stays a stub.
func inBothPlaces(t *testing.T, data []byte) (root *Root, target targets.Driver, tdir string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	tdir = t.TempDir()
	writeOld(t, filepath.Join(dir, "f1.bin"), data)
	writeOld(t, filepath.Join(dir, "f2.bin"), data)
	root = newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	for _, p := range []string{"/f1.bin", "/f2.bin"} {
		res, err := Migrate(ctx, root, []string{p}, target, "t", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{p})
		if p == "/f1.bin" {
			res, err = Recall(ctx, root, []string{p}, only("t", target), StepOptions{DeleteOnRecall: true})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{p})
			_, err = Collect(ctx, target, CollectOptions{})
			require.NoError(t, err)
		}
	}
	require.FileExists(t, filepath.Join(tdir, filepath.FromSlash(trashKey(sha(data)))), "in both places")
	return root, target, tdir
}

// TestCollectorReadsTheCopyItKeeps: content is both in the trash and
// under objects/ (a migrate copied it back), and the copy under objects/
// is damaged (one bit, size and mtime kept, so its stored checksum still
// reads good). The collector kept the copy under objects/ on the word of
// that checksum and deleted the good trash copy: the stub's data was
// gone. Now it reads the copy it keeps first, and puts the good trash
// copy over a damaged one.
func TestCollectorReadsTheCopyItKeeps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := []byte("content X: the copy under objects/ rots")
	root, target, tdir := inBothPlaces(t, data)
	tf := only("t", target)
	sum := sha(data)
	flipBit(t, filepath.Join(tdir, filepath.FromSlash(contentKey(sum))))
	// As rot below the filesystem: a flush stamped after the change (a
	// second after the last stamp) has its checksum trusted unread.
	time.Sleep(1100 * time.Millisecond)
	require.NoError(t, target.(targets.Syncer).Sync(ctx))
	o, err := target.Stat(ctx, contentKey(sum))
	require.NoError(t, err)
	require.False(t, o.Unflushed)
	require.Equal(t, sum, o.Checksum)

	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Restored)
	requireRecallsIntact(t, root, "/f2.bin", tf, data)
}

// notDurableAt reports the object at key NotDurable, as a filesystem
// target's Stat does on NFS for another host's write not yet flushed.
type notDurableAt struct {
	targets.Driver
	key string
}

func (n notDurableAt) Stat(ctx context.Context, key string) (targets.Object, error) {
	o, err := n.Driver.Stat(ctx, key)
	if err == nil && key == n.key {
		o.Unflushed, o.NotDurable = true, true
	}
	return o, err
}

// TestCollectorKeepsTheTrashCopyOverAnUnflushedOne: content is in both
// places, and the copy under objects/ is another host's write not yet
// flushed on an NFS target (which this host can neither flush nor read
// from disk). Reading it whole (TestCollectorReadsTheCopyItKeeps) is not
// enough: the collector deleted the durable trash copy (a reviewer's
// finding). Now it writes the content again itself, flushed, as before.
func TestCollectorKeepsTheTrashCopyOverAnUnflushedOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	data := []byte("content X: the copy under objects/ is another host's, unflushed")
	root, target, tdir := inBothPlaces(t, data)
	tf := only("t", target)
	sum := sha(data)
	kept := filepath.Join(tdir, filepath.FromSlash(contentKey(sum)))
	before, err := os.Stat(kept)
	require.NoError(t, err)

	_, err = Collect(ctx, notDurableAt{Driver: target, key: contentKey(sum)}, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	after, err := os.Stat(kept)
	require.NoError(t, err)
	require.False(t, os.SameFile(before, after), "written again by the collector, flushed, before the trash copy went")
	requireRecallsIntact(t, root, "/f2.bin", tf, data)
}

// flipBit damages one bit of the file name, keeping its size and mtime.
func flipBit(t *testing.T, name string) {
	t.Helper()
	fi, err := os.Stat(name)
	require.NoError(t, err)
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	b[3] ^= 1
	require.NoError(t, os.WriteFile(name, b, fi.Mode()))
	require.NoError(t, os.Chtimes(name, fi.ModTime(), fi.ModTime()))
}

// flushLog is a filesystem target that logs its writes and flushes.
type flushLog struct {
	*targets.Filesystem
	mu  sync.Mutex
	log []string
}

func (f *flushLog) add(e string) { f.mu.Lock(); f.log = append(f.log, e); f.mu.Unlock() }

func (f *flushLog) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	defer f.add("put " + key)
	return f.Filesystem.Put(ctx, key, r, size)
}

func (f *flushLog) Create(ctx context.Context, key string, data []byte) error {
	defer f.add("create " + key)
	return f.Filesystem.Create(ctx, key, data)
}

// NewGroup logs each marker a shared body names as created.
func (f *flushLog) NewGroup(ctx context.Context) (targets.Group, error) {
	g, err := f.Filesystem.NewGroup(ctx)
	if err != nil {
		return nil, err
	}
	return loggedGroup{g, f}, nil
}

type loggedGroup struct {
	targets.Group
	log *flushLog
}

func (g loggedGroup) Add(ctx context.Context, key string, line []byte) error {
	defer g.log.add("create " + key)
	return g.Group.Add(ctx, key, line)
}

func (f *flushLog) Sync(ctx context.Context) error {
	f.add("sync")
	return f.Filesystem.Sync(ctx)
}

// TestMigrateFlushesWhatItDidNotUpload: a migrate flushed the target only
// when it had uploaded something, so a file whose content was already
// there (an identical file, or content put back from the target's trash)
// was released before its reference marker, or the restored content, was
// durable: a power loss on the target's host then lost them.
func TestMigrateFlushesWhatItDidNotUpload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	data := []byte("content restored from the target's trash")
	for _, f := range []string{"f1.bin", "f2.bin", "f3.bin"} {
		writeOld(t, filepath.Join(dir, f), data)
	}
	root := newRoot(t, dir, false)
	fs, err := targets.NewFilesystem(targets.Config{MigrationTargetFolder: tdir})
	require.NoError(t, err)
	target := &flushLog{Filesystem: fs}
	tf := only("t", target)
	res, err := Migrate(ctx, root, []string{"/f1.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f1.bin"})
	res, err = Recall(ctx, root, []string{"/f1.bin"}, tf, StepOptions{DeleteOnRecall: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f1.bin"})
	_, err = Collect(ctx, target, CollectOptions{})
	require.NoError(t, err)

	for _, p := range []string{"/f2.bin", "/f3.bin"} { // from the trash, then already there
		target.log = nil
		res, err = Migrate(ctx, root, []string{p}, target, "t", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{p})
		require.Contains(t, res[0].Message, "identical content")
		last := map[string]int{}
		for i, e := range target.log {
			last[strings.SplitN(e, "/", 2)[0]] = i
		}
		require.Contains(t, last, "create refs", "%s: %q", p, target.log)
		require.Greater(t, last["sync"], last["create refs"], "%s: %q", p, target.log)
		if p == "/f2.bin" {
			require.Contains(t, last, "put objects", "%s: %q", p, target.log)
			require.Greater(t, last["sync"], last["put objects"], "%s: %q", p, target.log)
		}
	}
}

// TestRestoreChild runs a collection of the filesystem target in
// HUB_RESTORE_CHILD_TARGET, in a child process a fault point kills.
func TestRestoreChild(t *testing.T) {
	tdir := os.Getenv("HUB_RESTORE_CHILD_TARGET")
	if tdir == "" {
		return
	}
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	_, err = Collect(context.Background(), target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
}

// TestKillRestoringFromTheTrash: content a stub needs is in the trash
// (moved there just before its reference was written); a collection puts
// it back (read and checked, copied, flushed, the trash copy removed) and
// is killed at every fault point on the way, then runs again. The stub
// recalls, and one copy is left, under objects/.
func TestKillRestoringFromTheTrash(t *testing.T) {
	t.Parallel()
	data := []byte("content the collector trashed an instant too early")
	sum := sha(data)
	setup := func() (*Root, string, targets.Driver) {
		dir, tdir := t.TempDir(), t.TempDir()
		writeOld(t, filepath.Join(dir, "f.bin"), data)
		root := newRoot(t, dir, false)
		target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
		require.NoError(t, err)
		res, err := Migrate(context.Background(), root, []string{"/f.bin"}, target, "t", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{"/f.bin"})
		trashed := filepath.Join(tdir, filepath.FromSlash(trashKey(sum)))
		require.NoError(t, os.MkdirAll(filepath.Dir(trashed), 0o755))
		require.NoError(t, os.Rename(filepath.Join(tdir, filepath.FromSlash(contentKey(sum))), trashed))
		return root, tdir, target
	}
	_, tdir, _ := setup()
	trace := filepath.Join(t.TempDir(), "trace")
	require.False(t, runChild(t, "^TestRestoreChild$", "HUB_RESTORE_CHILD_TARGET="+tdir, "HUB_FAULT_TRACE="+trace))
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	points := strings.Fields(string(b))
	require.Contains(t, points, "collect.copied@1")
	t.Logf("fault points: %v", points)
	for _, point := range points {
		root, tdir, target := setup()
		require.True(t, runChild(t, "^TestRestoreChild$", "HUB_RESTORE_CHILD_TARGET="+tdir, "HUB_FAULT_POINT="+point), point)
		cr, err := Collect(context.Background(), target, CollectOptions{Grace: time.Hour})
		require.NoError(t, err, point)
		require.Zero(t, cr.Damaged, point)
		require.FileExists(t, filepath.Join(tdir, filepath.FromSlash(contentKey(sum))), point)
		require.NoFileExists(t, filepath.Join(tdir, filepath.FromSlash(trashKey(sum))), point)
		requireRecallsIntact(t, root, "/f.bin", only("t", target), data)
	}
}

// shortListing is a target whose listing of a pair of markers
// (refs/<aa>) comes back empty, as from a server that cut it short.
type shortListing struct{ targets.Driver }

func (s shortListing) List(ctx context.Context, prefix, marker string, max int) ([]targets.Object, string, error) {
	if strings.HasPrefix(prefix, refsDir) && len(prefix) == len(refsDir)+2 {
		return nil, "", nil
	}
	return s.Driver.List(ctx, prefix, marker, max)
}

// TestCollectorLooksForMarkersBeforeItDeletes: the collector's passes go
// by one listing of markers per pair, and a listing cut short hides a
// stub's marker: its content goes to the trash, which a recall still
// reads. Before a trash copy is deleted, its own markers are looked for,
// and the copy stays. Before, it was deleted, and the stub had no data.
func TestCollectorLooksForMarkersBeforeItDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, target := t.TempDir(), fsTarget(t)
	root := newRoot(t, dir, false)
	data := "the stub's only copy"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte(data), 0o644))
	paths := []string{"/f.txt"}
	res, err := Migrate(ctx, root, paths, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)

	short := shortListing{target}
	for range 2 {
		_, err := Collect(ctx, short, CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
	res, err = Recall(ctx, root, paths, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, paths)
	got, err := os.ReadFile(filepath.Join(dir, "f.txt"))
	require.NoError(t, err)
	require.Equal(t, data, string(got))
}

// swappedTrash is a target that keeps no checksums, whose trash copy of
// one content reads good the first time and is then replaced by damaged
// bytes of the same size (a collector moving a damaged copy over it).
type swappedTrash struct {
	targets.Driver
	key, bad string
	reads    int
}

func (s *swappedTrash) Stat(ctx context.Context, key string) (targets.Object, error) {
	o, err := s.Driver.Stat(ctx, key)
	o.Checksum, o.Unflushed = "", false
	return o, err
}

func (s *swappedTrash) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == s.key {
		if s.reads++; s.reads > 1 {
			return io.NopCloser(strings.NewReader(s.bad)), nil
		}
	}
	return s.Driver.Get(ctx, key)
}

// TestRestoreCopiesWhatItChecked: content restored from the trash is
// checked by one read and copied by another; on a target that keeps no
// checksum the copy was checked by its size alone, so damaged bytes put
// over the trash copy between the two reads went to objects/ as the
// content, and a migrate would release its file onto them. Now the bytes
// copied are hashed as they go, and the restore fails (the content is to
// be uploaded again).
func TestRestoreCopiesWhatItChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	const good = "the content, in the trash"
	sum := sumOf(good)
	require.NoError(t, target.Put(ctx, trashKey(sum), strings.NewReader(good), int64(len(good))))
	d := &swappedTrash{Driver: target, key: trashKey(sum), bad: strings.ToUpper(good)}
	ok, err := ensureContent(ctx, d, sum, int64(len(good)))
	require.NoError(t, err)
	require.False(t, ok, "to be uploaded again")
	require.Equal(t, 2, d.reads)
	_, err = target.Stat(ctx, contentKey(sum))
	require.ErrorIs(t, err, targets.ErrNotFound, "no damaged bytes under objects/")
}

// TestCollectorLeavesADamagedCopy: an unreferenced copy under objects/
// whose bytes do not match its name is not moved over the trash's good
// copy of that content: it is counted damaged and quarantined (left for the
// scrub where that fails), and the collection goes on. Before, the move
// replaced the good trash copy with it, then failed its check and the
// whole collection.
func TestCollectorLeavesADamagedCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	const good = "content kept in the trash"
	sum := sumOf(good)
	require.NoError(t, target.Put(ctx, trashKey(sum), strings.NewReader(good), int64(len(good))))
	bad := strings.ToUpper(good)
	require.NoError(t, target.Put(ctx, contentKey(sum), strings.NewReader(bad), int64(len(bad))))
	res, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, CollectResult{Objects: 1, Damaged: 1}, res)
	requireObject(t, target, trashKey(sum), good)
	// Out of the key, where a step would have taken it for the content
	// (TestADamagedUnreferencedCopyIsNeverTakenForTheContent).
	_, err = target.Stat(ctx, contentKey(sum))
	require.ErrorIs(t, err, targets.ErrNotFound)
	var quarantined []string
	require.NoError(t, eachObject(ctx, target, quarantineDir, func(o targets.Object) error {
		quarantined = append(quarantined, o.Key)
		return nil
	}))
	require.Len(t, quarantined, 1)
	requireObject(t, target, quarantined[0], bad)
}

// notDurable is a target whose objects are all another host's, not yet
// flushed there (targets.Object.NotDurable), and which counts the content
// it is sent.
type notDurable struct {
	targets.Driver
	contentPuts int
}

func (n *notDurable) Stat(ctx context.Context, key string) (targets.Object, error) {
	o, err := n.Driver.Stat(ctx, key)
	o.Unflushed, o.NotDurable = true, true
	return o, err
}

func (n *notDurable) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if strings.HasPrefix(key, objectsDir) {
		n.contentPuts++
	}
	return n.Driver.Put(ctx, key, r, size)
}

// TestStepWritesAgainWhatIsNotDurable: content already on a network
// target, written there by another host and not yet flushed by it, is
// not relied on (its bytes are read from the server's cache): a migrate
// sends it again, which flushes it.
func TestStepWritesAgainWhatIsNotDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, target := t.TempDir(), fsTarget(t)
	root := newRoot(t, dir, false)
	const data = "content another host wrote"
	require.NoError(t, target.Put(ctx, contentKey(sumOf(data)), strings.NewReader(data), int64(len(data))))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.txt"), []byte(data), 0o644))
	d := &notDurable{Driver: target}
	res, err := Migrate(ctx, root, []string{"/f.txt"}, d, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	require.Equal(t, 1, d.contentPuts, "sent again")
}

// TestCollectorRefusesASymlinkInTheTarget: an operator moved a filesystem
// target's refs/ to another volume and left a symlink. Writes followed it,
// listings skipped it, so the collector found no marker and freed every
// stub's content. Now a listing that meets a symlink fails, and so does
// the collection: nothing is freed.
func TestCollectorRefusesASymlinkInTheTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	data := []byte("released to a target whose references moved")
	writeOld(t, filepath.Join(dir, "f.bin"), data)
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	objects := func() []string {
		var keys []string
		require.NoError(t, filepath.WalkDir(filepath.Join(tdir, "objects"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				keys = append(keys, p)
			}
			return err
		}))
		return keys
	}
	stored := objects()
	require.Len(t, stored, 1)

	moved := filepath.Join(elsewhere, "refs")
	require.NoError(t, os.Rename(filepath.Join(tdir, "refs"), moved))
	require.NoError(t, os.Symlink(moved, filepath.Join(tdir, "refs")))
	for range 2 {
		_, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
		require.ErrorIs(t, err, targets.ErrSymlinkInTarget)
	}
	require.Equal(t, stored, objects(), "the content is kept")

	// One shard of refs/ linked elsewhere: the same.
	require.NoError(t, os.Remove(filepath.Join(tdir, "refs")))
	require.NoError(t, os.Rename(moved, filepath.Join(tdir, "refs")))
	shards, err := os.ReadDir(filepath.Join(tdir, "refs"))
	require.NoError(t, err)
	require.NotEmpty(t, shards)
	shard := filepath.Join(tdir, "refs", shards[0].Name())
	require.NoError(t, os.Rename(shard, filepath.Join(elsewhere, "shard")))
	require.NoError(t, os.Symlink(filepath.Join(elsewhere, "shard"), shard))
	_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.ErrorIs(t, err, targets.ErrSymlinkInTarget)
	require.Equal(t, stored, objects(), "the content is kept")
}

// TestATargetWhoseVolumeIsNotMountedIsRefused: a filesystem target's
// volume not mounted (its folder missing, or an empty mountpoint, or
// another volume there) was written to all the same: the objects went to
// the local disk, hidden once the volume came back, and their files were
// released. A site now refuses a target folder it used before that lacks
// the marker it saw there.
func TestATargetWhoseVolumeIsNotMountedIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, mnt := t.TempDir(), t.TempDir()
	tdir := filepath.Join(mnt, "archive")
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	specs := []TargetSpec{{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}}
	open := func() (targets.Driver, error) { return a.drivers(specs).get("t") }
	data := []byte("released to the archive volume")
	writeOld(t, filepath.Join(dir, "f.bin"), data)
	_, err := open()
	require.ErrorIs(t, err, targets.ErrTargetNotMounted, "first use of a folder that is not there (beneath a volume not mounted)")
	require.NoDirExists(t, tdir)
	require.NoError(t, os.Mkdir(tdir, 0o755))
	d, err := open()
	require.NoError(t, err, "first use: the folder gets its marker")
	res, err := Migrate(ctx, a.Root, []string{"/f.bin"}, d, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})

	// Unmounted: the folder gone, then an empty mountpoint, then another
	// volume with a marker of its own.
	require.NoError(t, os.Rename(tdir, tdir+".vol"))
	_, err = open()
	require.ErrorIs(t, err, targets.ErrTargetNotMounted)
	require.NoDirExists(t, tdir, "nothing made where the volume belongs")
	require.NoError(t, os.Mkdir(tdir, 0o755))
	_, err = open()
	require.ErrorIs(t, err, targets.ErrTargetNotMounted)
	require.NoError(t, os.WriteFile(filepath.Join(tdir, ".hub-target"), []byte("another volume"), 0o644))
	_, err = open()
	require.ErrorIs(t, err, targets.ErrTargetNotMounted)
	entries, err := os.ReadDir(tdir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing written to the wrong folder")

	// Mounted again: taken, and its content is there.
	require.NoError(t, os.RemoveAll(tdir))
	require.NoError(t, os.Rename(tdir+".vol", tdir))
	d, err = open()
	require.NoError(t, err)
	requireRecallsIntact(t, a.Root, "/f.bin", only("t", d), data)
	objs, _, err := d.List(ctx, "", "", 1000)
	require.NoError(t, err)
	for _, o := range objs {
		require.NotEqual(t, ".hub-target", o.Key, "the marker is no object")
	}

	// Another site sharing the target takes its marker on first use.
	other := &Activities{Root: newRoot(t, t.TempDir(), false), Site: "o"}
	_, err = other.drivers(specs).get("t")
	require.NoError(t, err)
}

// damagedBesideTrash is a filesystem target (at tdir) holding a content
// of data twice, unreferenced: a good copy in the trash, past a grace of
// an hour, and a damaged one (a bit flipped) at its key.
func damagedBesideTrash(t *testing.T) (target targets.Driver, tdir string, data []byte) {
	t.Helper()
	tdir = t.TempDir()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	data = []byte("content X: common to many users' files")
	sum := sha(data)
	for _, key := range []string{trashKey(sum), contentKey(sum)} {
		require.NoError(t, target.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))))
	}
	old := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(tdir, trashKey(sum)), old, old))
	flipBit(t, filepath.Join(tdir, filepath.FromSlash(contentKey(sum))))
	return target, tdir, data
}

// TestADamagedUnreferencedCopyIsNeverTakenForTheContent: an unreferenced
// copy under objects/ has rotted (its size, mtime and stored checksum
// kept), and a good copy of the content waits in the trash. The collector
// counted the damaged one and left it at its key, then deleted the good
// one after its grace; a migrate of a file of that content took the
// damaged copy for it (by its stored checksum) and released the file: its
// recall failed the checksum (a reviewer's scratch test). The damaged copy
// is quarantined, the trash copy kept while a copy is at the key, and the
// migrate uploads the content again.
func TestADamagedUnreferencedCopyIsNeverTakenForTheContent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := newRoot(t, dir, false)
	target, tdir, data := damagedBesideTrash(t)
	sum := sha(data)

	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Damaged)
	require.NoFileExists(t, filepath.Join(tdir, filepath.FromSlash(contentKey(sum))), "the damaged copy is quarantined")

	writeOld(t, filepath.Join(dir, "f.bin"), data)
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	requireRecallsIntact(t, root, "/f.bin", only("t", target), data)
}

// TestAGoodTrashCopyStaysWhileADamagedOneHoldsTheKey: as above, where the
// damaged copy cannot be quarantined (here quarantine/ is taken by a
// file): the good trash copy, perhaps the only one, is not deleted while a
// copy is at the content's key.
func TestAGoodTrashCopyStaysWhileADamagedOneHoldsTheKey(t *testing.T) {
	ctx := context.Background()
	target, tdir, data := damagedBesideTrash(t)
	sum := sha(data)
	require.NoError(t, os.WriteFile(filepath.Join(tdir, "quarantine"), nil, 0o644))

	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Damaged)
	require.Zero(t, cr.Deleted)
	require.FileExists(t, filepath.Join(tdir, trashKey(sum)), "the good copy is kept")
}

// TestAVolumeBeneathATargetThatIsNotMountedIsRefused: a filesystem target
// whose refs/ is a volume of its own. With that volume not mounted the
// target still opened (its own marker was there): the collector saw no
// marker and freed every content, and a migrate wrote its marker into the
// empty mountpoint, hidden once the volume was back, and released its
// file (a reviewer's scratch tests). A site remembers the volumes beneath
// a target it used and refuses the target while one is missing; a driver
// made while it was mounted refuses to write where it is not any more.
func TestAVolumeBeneathATargetThatIsNotMountedIsRefused(t *testing.T) {
	ctx := context.Background()
	dir, tdir, vol := t.TempDir(), t.TempDir(), t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	specs := []TargetSpec{{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}}
	refs := filepath.Join(tdir, "refs")
	bindMount(t, vol, refs)
	data := []byte("the only copy, released to a stub")
	writeOld(t, filepath.Join(dir, "f.bin"), data)
	d, err := a.drivers(specs).get("t")
	require.NoError(t, err)
	res, err := Migrate(ctx, a.Root, []string{"/f.bin"}, d, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})

	require.NoError(t, unix.Unmount(refs, 0))
	_, err = a.drivers(specs).get("t")
	require.ErrorIs(t, err, targets.ErrTargetNotMounted)
	require.ErrorContains(t, err, "the volume mounted at "+refs)
	// The driver made before: nothing is written into the mountpoint.
	writeOld(t, filepath.Join(dir, "g.bin"), []byte("migrated while the volume is away"))
	res, err = Migrate(ctx, a.Root, []string{"/g.bin"}, d, "t", StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code)
	require.Contains(t, res[0].Message, "is not mounted now")
	require.NoError(t, filepath.WalkDir(refs, func(p string, e fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.True(t, e.IsDir(), "written into the empty mountpoint: %s", p)
		return nil
	}))

	require.NoError(t, unix.Mount(vol, refs, "", unix.MS_BIND, ""))
	d, err = a.drivers(specs).get("t")
	require.NoError(t, err)
	_, err = Collect(ctx, d, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	requireRecallsIntact(t, a.Root, "/f.bin", only("t", d), data)
}
