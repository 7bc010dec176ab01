package site

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// Races of two workers of one site on one file, in the steps a
// reviewer found without the file's lock (thirty-third session). The
// other worker runs on a goroutine from a hook inside the first step's
// window and is given time to finish there; with the lock it waits, as a
// worker process waits for the byte lock (lockFile), and runs after.

// alongside runs other on a goroutine and waits up to a moment for it: it
// finishes inside the caller's window unless a lock holds it. The
// returned wait waits for it to end.
func alongside(other func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		other()
	}()
	select {
	case <-done:
	case <-time.After(300 * time.Millisecond):
	}
	return func() { <-done }
}

// requireData recalls /f.bin if it is a stub (both workers done) and
// requires the data: no step lost it.
func requireData(t *testing.T, root *Root, drivers TargetFunc, data []byte) {
	t.Helper()
	res, err := Recall(context.Background(), root, []string{"/f.bin"}, drivers, StepOptions{})
	require.NoError(t, err)
	require.Contains(t, []Code{CodeOK, CodeSkipped}, res[0].Code, res[0].Message)
	got, err := os.ReadFile(filepath.Join(root.Dir(), "f.bin"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the data is lost: the file holds %d bytes of %d (%s)", len(got), len(data), res[0].Message)
}

// TestAPremigratesRecordNeverLandsOnAnotherWorkersStub: a premigrate
// (a policy's, or site_sync's source half) checked the whole file and is
// about to record it; another worker's migrate releases the file
// meanwhile. The premigrated record of the whole file landed on the
// stub, which then read as a resident file of the stub's size, and the
// next migrate let the content go. The record is now written under the
// file's lock, and only while the file's record is still the one the
// step read.
func TestAPremigratesRecordNeverLandsOnAnotherWorkersStub(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	data := bytes.Repeat([]byte("premigrated while another worker migrates it "), 300)
	writeOld(t, abs, data)
	premigrator, migrator := newRoot(t, dir, true), newRoot(t, dir, true)
	target := fsTarget(t)
	var fired atomic.Bool
	var wait func()
	indexRecordWriting = func(rel string) {
		if rel == "f.bin" && fired.CompareAndSwap(false, true) {
			wait = alongside(func() {
				_, err := Migrate(ctx, migrator, []string{"/f.bin"}, target, "t", StepOptions{})
				assert.NoError(t, err)
			})
		}
	}
	t.Cleanup(func() { indexRecordWriting = nil })
	_, err := Premigrate(ctx, premigrator, []string{"/f.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	require.True(t, fired.Load())
	wait()
	indexRecordWriting = nil

	root := newRoot(t, dir, true)
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{}) // a policy's next run
	require.NoError(t, err)
	t.Logf("next migrate: %+v", res[0])
	collectTwice(t, target)
	requireData(t, root, only("t", target), data)
}

// TestACutBackLeavesAnotherWorkersRecallEnd: a recall wrote a stub's
// data back and its batch flush failed, so it cuts the file back to its
// stub; another worker's retry had found the data whole on disk and ends
// the recall (mtime back, record premigrated or cleared). The cut, which
// took no lock and never read the record, truncated the file that retry
// had just recorded, and the data was lost. Now it cuts under the file's
// lock, only while the record is still its mark, and records the stub it
// made (the retry, waiting, then finds the record changed). Without
// leases (NFS).
func TestACutBackLeavesAnotherWorkersRecallEnd(t *testing.T) {
	for _, resident := range []bool{true, false} {
		t.Run(map[bool]string{true: "reverse-stub", false: "recall"}[resident], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			abs := filepath.Join(dir, "f.bin")
			data := bytes.Repeat([]byte("recalled twice, cut back once "), 300)
			writeOld(t, abs, data)
			first, other := newRoot(t, dir, false), newRoot(t, dir, false)
			target := fsTarget(t)
			res, err := Migrate(ctx, first, []string{"/f.bin"}, target, "t", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/f.bin"})

			var flushes atomic.Int32
			flushSite = func(d *os.File) error {
				if flushes.Add(1) == 1 {
					return syscall.EIO // the first worker's batch flush
				}
				return fsutil.SyncFSOf(d)
			}
			t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
			var fired atomic.Bool
			var wait func()
			cutBackChecked = func(string) {
				if fired.CompareAndSwap(false, true) {
					wait = alongside(func() {
						_, err := recall(ctx, other, []string{"/f.bin"}, only("t", target), StepOptions{}, resident)
						assert.NoError(t, err)
					})
				}
			}
			t.Cleanup(func() { cutBackChecked = nil })
			_, err = recall(ctx, first, []string{"/f.bin"}, only("t", target), StepOptions{}, resident)
			require.NoError(t, err)
			require.True(t, fired.Load())
			wait()
			cutBackChecked = nil

			root := newRoot(t, dir, false)
			res, err = Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{}) // a policy's next run
			require.NoError(t, err)
			t.Logf("next migrate: %+v", res[0])
			collectTwice(t, target)
			requireData(t, root, only("t", target), data)
		})
	}
}

// TestAUsersRewriteToTheStubsSizeIsNotReleased: the user rewrites a file
// marked for release to exactly the stub's size before the release. The
// release took it for a file an earlier release had truncated, and
// recorded a stub of the old data: the next recall wrote the old data
// over the user's bytes. The bytes are now compared with the data's
// first bytes: the user's write wins, and the file stays resident.
func TestAUsersRewriteToTheStubsSizeIsNotReleased(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	data := bytes.Repeat([]byte("rewritten by its user during the migrate "), 300)
	writeOld(t, abs, data)
	root, target := newRoot(t, dir, false), fsTarget(t)
	mine := bytes.Repeat([]byte("u"), 100)
	onSiteFlush(t, func() { assert.NoError(t, os.WriteFile(abs, mine, 0o644)) }) // after the marks
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{StubSize: 100})
	require.NoError(t, err)
	t.Logf("migrate: %+v", res[0])
	require.Equal(t, CodeFailed, res[0].Code)
	requireData(t, root, only("t", target), mine)

	// A file truncated by an earlier release (this one killed, or another
	// worker's) holds the data's first bytes: that release is finished.
	writeOld(t, abs, data)
	onSiteFlush(t, func() { assert.NoError(t, os.Truncate(abs, 100)) })
	res, err = Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{StubSize: 100})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	requireData(t, root, only("t", target), data)
}

// readHook is a target whose next read of content fails part-way
// (failNext) or waits in its first Read (slowNext: reading is closed then).
type readHook struct {
	targets.Driver
	failNext, slowNext atomic.Bool
	reading            chan struct{}
	delay              time.Duration
}

func (h *readHook) Sync(ctx context.Context) error { return flushTarget(ctx, h.Driver) }

func (h *readHook) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := h.Driver.Get(ctx, key)
	switch {
	case err != nil:
		return rc, err
	case h.failNext.CompareAndSwap(true, false):
		return readCloser{io.MultiReader(io.LimitReader(rc, 10), iotest.ErrReader(errors.New("read tcp: connection reset by peer"))), rc}, nil
	case h.slowNext.CompareAndSwap(true, false):
		return readCloser{io.MultiReader(readerFunc(func([]byte) (int, error) {
			close(h.reading)
			time.Sleep(h.delay)
			return 0, io.EOF
		}), rc), rc}, nil
	}
	return rc, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// TestAReleaseWhoseTargetReadFailsKeepsTheMark: a file an earlier release
// cut to its stub and did not record; the retried release reads the
// data's first bytes from the target to compare, and the read fails
// part-way. A failed read counted as bytes that differ: the user's write,
// so the record was cleared and the reference dropped, and the collector
// freed the content of what was a stub. The mark now stays.
func TestAReleaseWhoseTargetReadFailsKeepsTheMark(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	data := bytes.Repeat([]byte("cut by a release killed before its record "), 300)
	writeOld(t, abs, data)
	root, fs := newRoot(t, dir, false), fsTarget(t)
	target := &readHook{Driver: fs}
	onSiteFlush(t, func() {
		assert.NoError(t, os.Truncate(abs, 100)) // the earlier release's cut
		target.failNext.Store(true)
	})
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{StubSize: 100})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code)
	require.Contains(t, res[0].Message, "connection reset")
	collectTwice(t, fs)
	requireData(t, root, only("t", fs), data)
}

// TestAUsersSaveDuringTheReleasesTargetReadWins: the release of a file at
// its stub's size read the data's first bytes from the target under the
// file's lock and lease; a slow read outlasted the lease, the user's save
// went through, and the release then cut it to the stub's size. The bytes
// are now read before the lock: the save comes first, and wins.
func TestAUsersSaveDuringTheReleasesTargetReadWins(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	data := bytes.Repeat([]byte("released while its user saves it "), 300)
	writeOld(t, abs, data)
	root, fs := newRoot(t, dir, false), fsTarget(t)
	target := &readHook{Driver: fs, reading: make(chan struct{}), delay: 300 * time.Millisecond}
	mine := bytes.Repeat([]byte("u"), 1000)
	saved := make(chan struct{})
	onSiteFlush(t, func() {
		assert.NoError(t, os.Truncate(abs, 100))
		target.slowNext.Store(true)
		go func() {
			defer close(saved)
			<-target.reading
			assert.NoError(t, os.WriteFile(abs, mine, 0o644)) // the user's save
		}()
	})
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{StubSize: 100})
	require.NoError(t, err)
	<-saved
	t.Logf("migrate: %+v", res[0])
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	require.True(t, bytes.Equal(mine, got), "the user's save is lost: the file holds %d bytes of the user's %d", len(got), len(mine))
}

// TestAReleaseKeepsTheStubsAtime: comparing a stub-sized file's bytes
// read it, and moved its atime, which policies and analytics read as its
// users' last access.
func TestAReleaseKeepsTheStubsAtime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	writeOld(t, abs, bytes.Repeat([]byte("whose last access is years ago "), 300))
	root, target := newRoot(t, dir, false), fsTarget(t)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	onSiteFlush(t, func() {
		assert.NoError(t, os.Truncate(abs, 100))
		fi, err := os.Stat(abs)
		assert.NoError(t, err)
		assert.NoError(t, os.Chtimes(abs, old, fi.ModTime()))
	})
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{StubSize: 100})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	fi, err := os.Stat(abs)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	require.Equal(t, old, time.Unix(st.Atim.Sec, st.Atim.Nsec).UTC(), "the release's read moved the stub's atime")
}

// TestACutBackOverBytesTheDiskLostKeepsTheMark: a recall's flush failed,
// and the disk holds other bytes than the data's at the stub's place; the
// cut back recorded a stub over them (a snapshot then copies it as a
// valid stub). It records one only where the disk holds the stub's bytes;
// otherwise the recall's mark stays, for a recall to look at.
func TestACutBackOverBytesTheDiskLostKeepsTheMark(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.bin")
	writeOld(t, abs, bytes.Repeat([]byte("recalled, flush failed "), 300))
	root, target := newRoot(t, dir, false), fsTarget(t)
	res, err := Migrate(ctx, root, []string{"/f.bin"}, target, "t", StepOptions{StubSize: 64})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	var flushes atomic.Int32
	flushSite = func(d *os.File) error {
		if flushes.Add(1) == 1 { // what the disk holds after the failed writeback
			fi, err := os.Stat(abs)
			assert.NoError(t, err)
			f, err := os.OpenFile(abs, os.O_WRONLY, 0)
			assert.NoError(t, err)
			_, _ = f.WriteAt([]byte("GARBAGE!"), 0)
			assert.NoError(t, f.Close())
			assert.NoError(t, os.Chtimes(abs, fi.ModTime(), fi.ModTime()))
			return syscall.EIO
		}
		return fsutil.SyncFSOf(d)
	}
	t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
	res, err = Recall(ctx, root, []string{"/f.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code)
	rec, err := root.state.get(abs, "f.bin")
	require.NoError(t, err)
	require.Equal(t, pendingRecall, rec.Pending, "a stub recorded over bytes that are not the data's")
}
