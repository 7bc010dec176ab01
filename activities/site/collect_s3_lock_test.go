package site

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestCollectionsOfOneS3TargetDoNotOverlap is
// TestCollectionsOfOneTargetDoNotOverlap on S3: a second collection of
// one target fails while one runs (the S3 driver's lock object), the lock
// object is no object of the target's, and it is gone once the first
// collection ends.
func TestCollectionsOfOneS3TargetDoNotOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	data := []byte("content X, shared by two files over time")
	writeOld(t, filepath.Join(dir, "f1.bin"), data)
	root := newRoot(t, dir, false)
	target, _ := s3TargetAndBackend(t)
	res, err := Migrate(ctx, root, []string{"/f1.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f1.bin"})
	objects := countObjects(t, target)

	// Collector B stops in its trash pass; collector A starts meanwhile.
	inB, done := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	resumeB := sync.OnceFunc(func() { close(done) })
	defer resumeB() // also when the test fails early
	var once sync.Once
	hookB := lockingHook{&stepHook{Driver: target, onList: func(prefix string) {
		if prefix == trashDir {
			once.Do(func() { close(inB); <-done })
		}
	}}, target.(targets.Locker)}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := Collect(ctx, hookB, CollectOptions{})
		assert.NoError(t, err)
	}()
	<-inB
	_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.ErrorContains(t, err, "another collection of this target is running")
	require.ErrorIs(t, err, targets.ErrLocked)
	require.Equal(t, objects, countObjects(t, target), "the lock is in no listing")
	resumeB()
	wg.Wait()

	// B released its lock: the next collection runs.
	_, err = Collect(ctx, target, CollectOptions{})
	require.NoError(t, err)
	requireRecallsIntact(t, root, "/f1.bin", only("t", target), data)
}

// heldSpy is a lockingHook that hands over the context TryLock returns.
type heldSpy struct {
	*stepHook
	targets.Locker
	held chan context.Context
}

func (h heldSpy) TryLock(ctx context.Context, name string) (context.Context, func(), error) {
	held, release, err := h.Locker.TryLock(ctx, name)
	if err == nil {
		h.held <- held
	}
	return held, release, err
}

// TestS3CollectorStopsWhenItsLockIsLost: collector A is paused right
// before it deletes an old trashed copy, long enough for its lock to
// expire (written here with a past expiry) and another process to take
// it over. A's next renewal (within 10 s) finds the lock lost, and A
// deletes nothing after that; its release leaves the new holder's lock.
func TestS3CollectorStopsWhenItsLockIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target, backend := s3TargetAndBackend(t)
	data := []byte("content nothing refers to")
	sum := sha(data)
	require.NoError(t, target.Put(ctx, trashKey(sum), bytes.NewReader(data), int64(len(data))))

	resume := make(chan struct{})
	resumeA := sync.OnceFunc(func() { close(resume) })
	defer resumeA() // also when the test fails early
	spy := heldSpy{&stepHook{Driver: target, onStat: func(key string) {
		if key == trashKey(sum) {
			<-resume
		}
	}}, target.(targets.Locker), make(chan context.Context, 1)}
	errA := make(chan error, 1)
	go func() {
		_, err := Collect(ctx, spy, CollectOptions{Grace: time.Nanosecond})
		errA <- err
	}()
	var heldA context.Context
	select {
	case heldA = <-spy.held:
	case <-time.After(10 * time.Second):
		t.Fatal("collector A took no lock")
	}

	// A's lock as if its renewals had stopped long ago.
	obj, err := backend.GetObject("hub", ".hub-lock-collect", nil)
	require.NoError(t, err)
	body, err := io.ReadAll(obj.Contents)
	obj.Contents.Close()
	require.NoError(t, err)
	var lock map[string]any
	require.NoError(t, json.Unmarshal(body, &lock))
	lock["expires"] = time.Now().Add(-time.Minute)
	body, err = json.Marshal(lock)
	require.NoError(t, err)
	_, err = backend.PutObject("hub", ".hub-lock-collect", map[string]string{}, bytes.NewReader(body), int64(len(body)), nil)
	require.NoError(t, err)

	_, releaseB, err := target.(targets.Locker).TryLock(ctx, "collect")
	require.NoError(t, err, "an expired lock is taken over")
	defer releaseB()
	select {
	case <-heldA.Done():
		require.ErrorIs(t, context.Cause(heldA), targets.ErrLockLost)
	case <-time.After(30 * time.Second):
		t.Fatal("collector A did not find its lock lost")
	}
	resumeA()
	err = <-errA
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, targets.ErrLockLost, "the collection says why it stopped")
	_, err = target.Stat(ctx, trashKey(sum))
	require.NoError(t, err, "A deleted the trashed copy after it lost its lock")

	_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.ErrorIs(t, err, targets.ErrLocked, "A's release left B's lock")
}
