package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestS3Lock runs the lock contract against the in-process fake, with
// keys at the bucket's root and under a prefix.
func TestS3Lock(t *testing.T) {
	t.Parallel()
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		runS3LockContract(t, func(t *testing.T) Config { return newFakeS3(t, false) })
	})
	t.Run("prefix", func(t *testing.T) {
		t.Parallel()
		runS3LockContract(t, func(t *testing.T) Config {
			cfg := newFakeS3(t, false)
			cfg.Prefix = "site-a"
			return cfg
		})
	})
}

// lockS3 opens an S3 driver whose locks live 2 s and are renewed every
// 50 ms, so that tests see renewals, expiries and losses quickly.
func lockS3(t *testing.T, cfg Config) *S3 {
	t.Helper()
	d, err := NewS3(cfg)
	require.NoError(t, err)
	d.lockTTL, d.lockRenew = 2*time.Second, 50*time.Millisecond
	return d
}

// readLock reads the lock object "collect" as it is stored.
func readLock(t *testing.T, d *S3) lockBody {
	t.Helper()
	l := &s3Lock{s: d, name: "collect", key: d.prefix + lockPrefix + "collect"}
	b, _, err := l.read(context.Background())
	require.NoError(t, err)
	return b
}

// writeLock writes the lock object "collect" straight to the server, as
// plain PutObject, bypassing the locking code.
func writeLock(t *testing.T, d *S3, b lockBody) {
	t.Helper()
	data, err := json.Marshal(b)
	require.NoError(t, err)
	_, err = d.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(d.bucket), Key: aws.String(d.prefix + lockPrefix + "collect"), Body: bytes.NewReader(data),
	})
	require.NoError(t, err)
}

// waitLost waits for held to end and returns its cause.
func waitLost(t *testing.T, held context.Context, within time.Duration) error {
	t.Helper()
	select {
	case <-held.Done():
		return context.Cause(held)
	case <-time.After(within):
		t.Fatalf("the lock was not found lost within %s", within)
		return nil
	}
}

// runS3LockContract checks TryLock on the S3 server that open configures
// (a bucket or prefix of its own for each call).
func runS3LockContract(t *testing.T, open func(t *testing.T) Config) {
	ctx := context.Background()

	t.Run("held and renewed, then released", func(t *testing.T) {
		cfg := open(t)
		a, b := lockS3(t, cfg), lockS3(t, cfg)
		heldA, release, err := a.TryLock(ctx, "collect")
		require.NoError(t, err)
		first := readLock(t, a)
		time.Sleep(10 * a.lockRenew)
		require.NoError(t, heldA.Err(), "renewed, not lost")
		renewed := readLock(t, a)
		require.Equal(t, first.Token, renewed.Token)
		require.True(t, renewed.Expires.After(first.Expires), "renewed: %s, then %s", first.Expires, renewed.Expires)

		_, _, err = b.TryLock(ctx, "collect")
		require.ErrorIs(t, err, ErrLocked)
		_, _, err = a.TryLock(ctx, "collect") // a second lock of the same process too
		require.ErrorIs(t, err, ErrLocked)

		release()
		require.Error(t, heldA.Err())
		require.NotErrorIs(t, context.Cause(heldA), ErrLockLost)
		heldB, releaseB, err := b.TryLock(ctx, "collect")
		require.NoError(t, err)
		require.NoError(t, heldB.Err())
		releaseB()
	})

	t.Run("lock objects are in no listing", func(t *testing.T) {
		cfg := open(t)
		d := lockS3(t, cfg)
		// No renewal meanwhile: versitygw lists the temporary file of a
		// write under way.
		d.lockTTL, d.lockRenew = 2*time.Hour, time.Hour
		_, release, err := d.TryLock(ctx, "collect")
		require.NoError(t, err)
		defer release()
		_, release2, err := d.TryLock(ctx, "other")
		require.NoError(t, err)
		defer release2()
		// A page that holds only lock objects is not the last: the listing
		// goes on past them.
		for _, k := range []string{".hub-lock-x", "a", "dir/.hub-lock-y", "dir/b"} {
			require.NoError(t, d.Put(ctx, k, strings.NewReader(k), int64(len(k))))
		}
		var keys []string
		for marker := ""; ; {
			objs, next, err := d.List(ctx, "", marker, 1)
			require.NoError(t, err)
			for _, o := range objs {
				keys = append(keys, o.Key)
			}
			if next == "" {
				break
			}
			marker = next
		}
		require.Equal(t, []string{"a", "dir/b"}, keys)
	})

	t.Run("an expired lock is taken over and its holder stops", func(t *testing.T) {
		cfg := open(t)
		// The old holder renews every 300 ms; its lock is written as if
		// its renewals had stopped (a paused process): a taker takes it
		// over, and the holder finds at its next renewal that it lost it.
		old := lockS3(t, cfg)
		old.lockTTL, old.lockRenew = time.Hour, 300*time.Millisecond
		heldOld, releaseOld, err := old.TryLock(ctx, "collect")
		require.NoError(t, err)
		require.NoError(t, old.Put(ctx, "trash/x", strings.NewReader("x"), 1))
		stale := readLock(t, old)
		stale.Expires = time.Now().Add(-time.Second)
		writeLock(t, old, stale)

		taker := lockS3(t, cfg)
		heldNew, releaseNew, err := taker.TryLock(ctx, "collect")
		require.NoError(t, err)
		require.NotEqual(t, stale.Token, readLock(t, taker).Token)

		cause := waitLost(t, heldOld, 5*old.lockRenew)
		require.ErrorIs(t, cause, ErrLockLost)
		// What the old holder still does with its context fails: the
		// collector deletes nothing more.
		require.ErrorIs(t, old.Delete(heldOld, "trash/x"), context.Canceled)
		_, err = old.Stat(ctx, "trash/x")
		require.NoError(t, err)

		// Its release leaves the new holder's lock alone.
		releaseOld()
		require.NoError(t, heldNew.Err())
		_, _, err = lockS3(t, cfg).TryLock(ctx, "collect")
		require.ErrorIs(t, err, ErrLocked)
		releaseNew()
	})

	t.Run("a lock another wrote is lost at the next renewal", func(t *testing.T) {
		cfg := open(t)
		d := lockS3(t, cfg)
		held, release, err := d.TryLock(ctx, "collect")
		require.NoError(t, err)
		defer release()
		// Replaced under the holder's feet by a lock of someone else that
		// is still valid: the next renewal reads another token.
		writeLock(t, d, lockBody{Token: "someone-else", Holder: "elsewhere", Expires: time.Now().Add(time.Hour)})
		require.ErrorIs(t, waitLost(t, held, 20*d.lockRenew), ErrLockLost)
	})

	t.Run("of concurrent takers one wins", func(t *testing.T) {
		cfg := open(t)
		const takers = 8
		ds := make([]*S3, takers)
		for i := range ds {
			ds[i] = lockS3(t, cfg)
		}
		for round := range 50 {
			// Even rounds: no lock (If-None-Match); odd rounds: a lock that
			// expired (If-Match).
			if round%2 == 1 {
				writeLock(t, ds[0], lockBody{Token: "dead", Holder: "killed", Expires: time.Now().Add(-time.Minute)})
			}
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				releases []func()
				others   int
			)
			start := make(chan struct{})
			for _, d := range ds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, release, err := d.TryLock(ctx, "collect")
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						releases = append(releases, release)
					case errors.Is(err, ErrLocked):
						others++
					default:
						assert.NoError(t, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			require.Len(t, releases, 1, "round %d: winners", round)
			require.Equal(t, takers-1, others, "round %d", round)
			releases[0]()
		}
	})
}

// TestS3LockWithoutConditions: on a server that ignores If-Match and
// If-None-Match (here a proxy strips them), the lock still refuses a
// second taker that reads it held, and its holder still finds at its next
// renewal that another wrote it. Only two takers in the same instant can
// both win, until the first renewal.
func TestS3LockWithoutConditions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	fake := gofakes3.New(backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("If-Match")
		r.Header.Del("If-None-Match")
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := Config{StorageType: "s3", Endpoint: srv.URL, Bucket: "hub", AccessKeyID: "test", SecretAccessKey: "test-secret"}

	a := lockS3(t, cfg)
	held, release, err := a.TryLock(ctx, "collect")
	require.NoError(t, err)
	defer release()
	_, _, err = lockS3(t, cfg).TryLock(ctx, "collect")
	require.ErrorIs(t, err, ErrLocked)
	writeLock(t, a, lockBody{Token: "someone-else", Holder: "elsewhere", Expires: time.Now().Add(time.Hour)})
	require.ErrorIs(t, waitLost(t, held, 20*a.lockRenew), ErrLockLost)
}

// TestS3LockAfterTheHostSlept: the host of a holder sleeps (suspended, a
// VM paused) past the lock's expiry. Its monotonic clock and timers stood
// still, so its renewals had not even failed yet; a taker's wall clock
// went on, and the lock could be taken over. The holder is told at its
// next step (StillHeld), by the wall clock. Before, it went on until
// keep woke and looked, as long as a renewal interval.
func TestS3LockAfterTheHostSlept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := lockS3(t, newFakeS3(t, false))
	var slept atomic.Int64
	d.wall = func() time.Time { return time.Now().Round(0).Add(time.Duration(slept.Load())) }
	d.lockRenew = time.Hour // no renewal in this test
	held, release, err := d.TryLock(ctx, "collect")
	require.NoError(t, err)
	defer release()
	require.NoError(t, StillHeld(held))
	slept.Store(int64(d.lockTTL))
	err = StillHeld(held)
	require.ErrorIs(t, err, ErrLockLost)
	require.ErrorContains(t, err, "not renewed")
	require.ErrorIs(t, context.Cause(held), ErrLockLost)
}

// TestS3LockNotRenewedInTime: a holder whose renewals fail (the server
// answers 503) gives the lock up lockTTL/2 after its last write began,
// before anyone may take it over.
func TestS3LockNotRenewedInTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	fake := gofakes3.New(backend).Server()
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := Config{StorageType: "s3", Endpoint: srv.URL, Bucket: "hub", AccessKeyID: "test", SecretAccessKey: "test-secret"}

	d := lockS3(t, cfg)
	held, release, err := d.TryLock(ctx, "collect")
	require.NoError(t, err)
	defer release()
	expires := readLock(t, d).Expires
	down.Store(true)
	cause := waitLost(t, held, d.lockTTL)
	require.ErrorIs(t, cause, ErrLockLost)
	require.ErrorContains(t, cause, "not renewed")
	require.True(t, time.Now().Before(expires), "given up before its expiry")
	down.Store(false)
}

// TestS3ListGoesOnPastAnEmptyPage: a server answers a page with no key
// that says more follow (S3 promises only "up to MaxKeys"; a bucket with
// many delete markers), here played by a proxy once per listing. The
// listing reads on by the page's token and finds every key; before, it
// ended there, and a collection took the content whose markers came after
// for unreferenced.
func TestS3ListGoesOnPastAnEmptyPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("hub"))
	fake := gofakes3.New(backend).Server()
	var empties atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodGet && q.Get("list-type") == "2" {
			if q.Get("continuation-token") == "" {
				empties.Add(1)
				w.Header().Set("Content-Type", "application/xml")
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>hub</Name><Prefix>%s</Prefix><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>go-on</NextContinuationToken></ListBucketResult>`, q.Get("prefix"))
				return
			}
			q.Del("continuation-token") // the fake's own listing, from where the empty page stood
			r.URL.RawQuery = q.Encode()
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	d, err := Open(Config{StorageType: "s3", Endpoint: srv.URL, Bucket: "hub", AccessKeyID: "test", SecretAccessKey: "test-secret"})
	require.NoError(t, err)
	for _, k := range []string{"refs/ab/1", "refs/ab/2"} {
		require.NoError(t, d.Put(ctx, k, strings.NewReader(k), int64(len(k))))
	}
	objs, next, err := d.List(ctx, "refs/ab/", "", 100)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, objs, 2, "%+v", objs)
	require.NotZero(t, empties.Load(), "the empty page was played")
}
