package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSnapshotCopySkipsAFIFO is the worst instant of a snapshot copy for
// a FIFO: the entry was listed as a file and is a FIFO when it is opened.
// Opening it blocked until a writer came, then copied what it sent.
func TestSnapshotCopySkipsAFIFO(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	fifo := filepath.Join(a.Root.Dir(), "spaces", "s1", "f.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(fifo), 0o755))
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	dst := filepath.Join(t.TempDir(), "copy")
	done := make(chan error, 1)
	go func() {
		_, err := cjCopyFile(context.Background(), a.Root, "spaces/s1/f.txt", dst, nil)
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, errNotRegular)
		require.NoFileExists(t, dst)
	case <-time.After(10 * time.Second):
		// Unblock the copy (a writer opening the FIFO) before failing.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("the copy waited for a writer of the FIFO")
	}
}

// TestSnapshotTrashIsTheSnapshotsOwn: removing a snapshot empties the
// trash of that snapshot only, never a trashed space's data, whatever the
// space is named, nor another snapshot's entry.
func TestSnapshotTrashIsTheSnapshotsOwn(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	ctx := context.Background()
	trash := filepath.Join(a.Root.Dir(), filepath.FromSlash(trashFolder))
	// Spaces holding data deleted: moved to the trash as <name>-<ns>.
	trashSpace := func(name string) {
		_, err := a.CJApply(ctx, CJChange{Type: CJSpaces, Name: name, Space: &CJSpace{Name: name}})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(a.Root.Dir(), "spaces", name, "data"), []byte("precious"), 0o644))
		_, err = a.CJApply(ctx, CJChange{Type: CJSpaces, Name: name, Delete: true, Space: &CJSpace{Name: name}})
		require.NoError(t, err)
	}
	for _, n := range []string{"snapshot-x-a", "snapshot-lab-scheduled-20200101T000000Z"} {
		trashSpace(n)
	}
	spaces, err := os.ReadDir(trash)
	require.NoError(t, err)
	require.Len(t, spaces, 2)
	// Entries of other snapshots: of space a-b, and of snapshot a-1 of x.
	others := []string{snapshotTrashPrefix("a-b", "c") + "1", snapshotTrashPrefix("x", "a-1") + "2"}
	for _, n := range others {
		require.NoError(t, os.MkdirAll(filepath.Join(trash, n), 0o755))
	}

	// Snapshot a of space x, taken and removed.
	_, err = a.CJApply(ctx, CJChange{Type: CJSpaces, Name: "x", Space: &CJSpace{Name: "x"}})
	require.NoError(t, err)
	snap := CJChange{Type: CJSnapshots, Name: "a", Snapshot: &CJSnapshot{Space: "x", Name: "a"}}
	_, err = a.CJApply(ctx, snap)
	require.NoError(t, err)
	snap.Delete = true
	_, err = a.CJApply(ctx, snap)
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Join(a.Root.Dir(), cjSnapshotsDir, "x", "a"))
	// Snapshot b-c of space a, removed (never taken).
	_, err = a.snapshot(ctx, "", &CJSnapshot{Space: "a", Name: "b-c"}, true)
	require.NoError(t, err)
	// A scheduled firing of space lab empties its scheduled snapshots' trash.
	require.NoError(t, os.MkdirAll(filepath.Join(a.Root.Dir(), "spaces", "lab"), 0o755))
	_, err = a.TakeSpaceSnapshot(ctx, SpaceSnapshotInput{Space: "lab", Folder: "/spaces/lab", At: time.Now(), KeepFor: time.Hour})
	require.NoError(t, err)

	for _, s := range spaces {
		b, err := os.ReadFile(filepath.Join(trash, s.Name(), "data"))
		require.NoError(t, err, "trashed space %s kept", s.Name())
		require.Equal(t, "precious", string(b))
	}
	for _, n := range others {
		require.DirExists(t, filepath.Join(trash, n))
	}
	left, err := os.ReadDir(trash)
	require.NoError(t, err)
	require.Len(t, left, len(spaces)+len(others), "the removed snapshot's own entry is gone")
}

// stopAt is a context whose n-th Err call (the snapshot copy calls it
// once per entry) signals reached, then blocks until release is closed:
// an attempt paused at an exact entry of its copy.
type stopAt struct {
	context.Context
	n                 int64
	calls             atomic.Int64
	reached, released chan struct{}
	release           func()
}

// newStopAt's attempt is released at the latest when the test ends.
func newStopAt(t *testing.T, n int64) *stopAt {
	c := &stopAt{Context: context.Background(), n: n, reached: make(chan struct{}), released: make(chan struct{})}
	c.release = sync.OnceFunc(func() { close(c.released) })
	t.Cleanup(c.release)
	return c
}

// waitPaused waits until the attempt pauses at c's stop; one that ends
// first fails the test.
func waitPaused(t *testing.T, c *stopAt, done <-chan string) {
	t.Helper()
	select {
	case <-c.reached:
	case msg := <-done:
		t.Fatalf("the attempt ended before its pause at entry %d: %s", c.n, msg)
	}
}

func (c *stopAt) Err() error {
	if c.calls.Add(1) == c.n {
		close(c.reached)
		<-c.released
	}
	return c.Context.Err()
}

// snapshotAttempt runs one snapshot build with ctx in the background.
func snapshotAttempt(a *Activities, ctx context.Context, space, name string) <-chan string {
	out := make(chan string, 1)
	go func() {
		msg, err := a.snapshot(ctx, "spaces/"+space, &CJSnapshot{Space: space, Name: name}, false)
		if err != nil {
			msg = "error: " + err.Error()
		}
		out <- msg
	}()
	return out
}

// spaceOf makes space name with n files named <name>-<i>.
func spaceOf(t *testing.T, a *Activities, name string, n int) []string {
	t.Helper()
	dir := filepath.Join(a.Root.Dir(), "spaces", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var names []string
	for i := range n {
		f := fmt.Sprintf("%s-%03d", name, i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644))
		names = append(names, f)
	}
	sort.Strings(names)
	return names
}

// requireSnapshot checks that snapshot space/name holds exactly files,
// each with its own name as content.
func requireSnapshot(t *testing.T, a *Activities, space, name string, files []string) {
	t.Helper()
	dir := filepath.Join(a.Root.Dir(), cjSnapshotsDir, space, name)
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		require.NoError(t, err)
		require.Equal(t, de.Name(), string(b))
		got = append(got, de.Name())
	}
	require.Equal(t, files, got, "snapshot %s/%s", space, name)
}

// requireNoBuilds checks that no build folder is left.
func requireNoBuilds(t *testing.T, a *Activities) {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(a.Root.Dir(), filepath.FromSlash(snapshotsBuild)))
	require.NoError(t, err)
	require.Empty(t, des)
}

// TestOverlappingSnapshotBuilds: attempt A pauses at entry 400 of its
// copy, attempt B starts and pauses at entry 200, A finishes, then B. With
// one temporary folder per snapshot name, B removed A's tree, A wrote on
// into B's and placed it: a snapshot of 400 files, mixed from two spaces
// (space a's snapshot b-c against space a-b's snapshot c: both built at
// a-b-c), or 400 of 600 files and B "already taken" for ever (the same
// snapshot attempted twice, as Temporal does after a heartbeat timeout).
func TestOverlappingSnapshotBuilds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, spaceA, nameA, spaceB, nameB string }{
		{"names colliding", "a", "b-c", "a-b", "c"},
		{"the same snapshot", "a", "n", "a", "n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newCJActivities(t)
			filesA := spaceOf(t, a, tc.spaceA, 600)
			filesB := filesA
			if tc.spaceB != tc.spaceA {
				filesB = spaceOf(t, a, tc.spaceB, 600)
			}
			ctxA, ctxB := newStopAt(t, 400), newStopAt(t, 200)
			doneA := snapshotAttempt(a, ctxA, tc.spaceA, tc.nameA)
			waitPaused(t, ctxA, doneA)
			doneB := snapshotAttempt(a, ctxB, tc.spaceB, tc.nameB)
			waitPaused(t, ctxB, doneB)
			ctxA.release()
			require.Contains(t, <-doneA, "600 files")
			ctxB.release()
			msgB := <-doneB
			require.NotContains(t, msgB, "error", msgB)

			requireSnapshot(t, a, tc.spaceA, tc.nameA, filesA)
			requireSnapshot(t, a, tc.spaceB, tc.nameB, filesB)
			requireNoBuilds(t, a)
			msg, err := a.snapshot(context.Background(), "spaces/"+tc.spaceB, &CJSnapshot{Space: tc.spaceB, Name: tc.nameB}, false)
			require.NoError(t, err)
			require.Contains(t, msg, "already taken")
		})
	}
}

// TestSnapshotBuildRemovesOnlyDeadLeftovers: a folder in the build folder
// that no live attempt holds locked is a killed attempt's leftover and
// goes; one that an attempt holds stays.
func TestSnapshotBuildRemovesOnlyDeadLeftovers(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	files := spaceOf(t, a, "s", 3)
	build := filepath.Join(a.Root.Dir(), filepath.FromSlash(snapshotsBuild))
	for _, n := range []string{"dead", "live"} {
		require.NoError(t, os.MkdirAll(filepath.Join(build, n, snapshotTree), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(build, n, snapshotTree, "f"), []byte(n), 0o644))
	}
	live, err := os.Open(filepath.Join(build, "live"))
	require.NoError(t, err)
	defer live.Close()
	require.NoError(t, unix.Flock(int(live.Fd()), unix.LOCK_EX|unix.LOCK_NB))

	_, err = a.snapshot(context.Background(), "spaces/s", &CJSnapshot{Space: "s", Name: "n"}, false)
	require.NoError(t, err)
	requireSnapshot(t, a, "s", "n", files)
	des, err := os.ReadDir(build)
	require.NoError(t, err)
	require.Len(t, des, 1)
	require.Equal(t, "live", des[0].Name())
	require.FileExists(t, filepath.Join(build, "live", snapshotTree, "f"))
}

// countErr counts the Err calls (the heartbeats) of a snapshot copy.
type countErr struct {
	context.Context
	calls atomic.Int64
}

func (c *countErr) Err() error { c.calls.Add(1); return c.Context.Err() }

// TestSnapshotCopyHeartbeatsInALargeFile: copying one large file beats
// every cjSnapshotHeartbeatBytes, not only every so many entries, so a
// live attempt is not taken for dead.
func TestSnapshotCopyHeartbeatsInALargeFile(t *testing.T) {
	t.Parallel()
	a := newCJActivities(t)
	dir := filepath.Join(a.Root.Dir(), "spaces", "s")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	const size = 2*cjSnapshotHeartbeatBytes + 1<<20
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat("x", size)), 0o644))
	ctx := &countErr{Context: context.Background()}
	msg, err := a.snapshot(ctx, "spaces/s", &CJSnapshot{Space: "s", Name: "n"}, false)
	require.NoError(t, err)
	require.Contains(t, msg, fmt.Sprintf("1 files, %d bytes", size))
	require.GreaterOrEqual(t, ctx.calls.Load(), int64(1+size/cjSnapshotHeartbeatBytes), "one beat for the entry, one per %d bytes", cjSnapshotHeartbeatBytes)
}
