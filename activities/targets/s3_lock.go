package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	// defaultLockTTL is how long an S3 lock outlives the renewal its
	// holder last wrote: others may take it over after that.
	defaultLockTTL = 60 * time.Second
	// defaultLockRenew is how often its holder renews an S3 lock.
	defaultLockRenew = 10 * time.Second
)

// lockBody is the content of an S3 lock object. Expires is the holder's
// wall clock when it began writing it, plus the TTL, and a taker compares
// it with its own wall clock: the lock trusts the hosts' clocks to agree
// to within half the TTL (see keep).
type lockBody struct {
	Token   string    `json:"token"`
	Holder  string    `json:"holder"` // host and process, for people
	Expires time.Time `json:"expires"`
}

// errConflict: a conditional write of a lock found it changed or gone, or
// being written by someone else at that moment.
var errConflict = errors.New("the lock object changed")

// s3Lock is one lock held on an S3 target.
type s3Lock struct {
	s       *S3
	name    string
	key     string // the full object key
	token   string // ours, random
	holder  string
	mu      sync.Mutex
	written time.Time // when our last write began
}

// check is nil while the lock is surely ours: until lockTTL/2 after our
// last write began, by the monotonic clock and by the wall clock both. The
// monotonic clock stops while the host sleeps (suspended, a VM paused),
// and so do the timers of keep, but a taker's wall clock goes on: a
// holder that slept past that instant has lost the lock, and it is told
// so at its next step (StillHeld), whether or not keep has woken yet.
func (l *s3Lock) check() error {
	l.mu.Lock()
	deadline := l.written.Add(l.s.lockTTL / 2)
	l.mu.Unlock()
	if time.Now().Before(deadline) && l.s.wall().Before(deadline.Round(0)) {
		return nil
	}
	return fmt.Errorf("lock %s: %w: not renewed for %s", l.name, ErrLockLost, l.s.lockTTL/2)
}

// TryLock takes the lock object .hub-lock-<name> at the root of the target
// (which listings leave out) with conditional writes: If-None-Match: *
// creates it only where there is none, and a lock whose expiry has passed
// (its holder stopped renewing it) is replaced with If-Match on the ETag
// read, so of two takers one wins. held ends, with ErrLockLost as its
// cause, when the lock is lost (see keep).
//
// A server that ignores conditional headers lets a second writer replace
// a lock: the lock is read back after it is written, and before every
// renewal, so that two processes that took it in the same instant both
// run only until the first writer's next renewal finds the other's token
// (at most lockRenew).
func (s *S3) TryLock(ctx context.Context, name string) (held context.Context, release func(), err error) {
	key, err := s.key(lockPrefix + name)
	if err != nil {
		return nil, nil, fmt.Errorf("lock %s: %w", name, err)
	}
	host, _ := os.Hostname()
	l := &s3Lock{s: s, name: name, key: key, token: rand.Text(), holder: fmt.Sprintf("%s pid %d", host, os.Getpid())}
	cur, etag, err := l.read(ctx)
	switch {
	case errors.Is(err, ErrNotFound):
		err = l.write(ctx, "")
	case err != nil:
	case time.Now().Before(cur.Expires):
		return nil, nil, l.locked(cur)
	default:
		err = l.write(ctx, etag) // expired: fails if renewed or taken since the read
	}
	if err == nil {
		// Read back: on a server that ignores conditions, a writer just
		// after us replaced our lock and holds it.
		if cur, _, err = l.read(ctx); err == nil && cur.Token != l.token {
			return nil, nil, l.locked(cur)
		}
	}
	switch {
	case errors.Is(err, errConflict), errors.Is(err, ErrNotFound):
		return nil, nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
	case err != nil:
		return nil, nil, fmt.Errorf("lock %s: %w", name, err)
	}
	held, lose := holding(ctx, l.check)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		l.keep(held, lose, stop)
	}()
	var once sync.Once
	release = func() {
		once.Do(func() {
			// A renewal under way ends first: cut short, it could still
			// land after the delete and leave the lock to expire.
			close(stop)
			<-done
			lose(nil) // no-op once lost
			l.remove(context.WithoutCancel(ctx))
		})
	}
	return held, release, nil
}

// keep renews the lock every lockRenew until stop or held ends, and ends held
// (lose, ErrLockLost) when the lock is lost: a renewal finds someone
// else's lock (another token read, or 412 on If-Match), or none has
// succeeded for lockTTL/2 since our last write began. A taker waits for
// the expiry written, lockTTL after that same instant, so the holder stops
// lockTTL/2 before anyone may start, whatever the network did meanwhile;
// that half of lockTTL is also how far apart the holder's and a taker's
// clocks may be. The deadline is measured with the monotonic clock, which
// a change of the wall clock does not move.
func (l *s3Lock) keep(held context.Context, lose context.CancelCauseFunc, stop <-chan struct{}) {
	tick := time.NewTicker(l.s.lockRenew)
	defer tick.Stop()
	for {
		l.mu.Lock()
		deadline := l.written.Add(l.s.lockTTL / 2)
		l.mu.Unlock()
		select {
		case <-stop:
			return
		case <-held.Done():
			return
		case <-time.After(time.Until(deadline)):
		case <-tick.C:
		}
		if err := l.check(); err != nil {
			lose(err)
			return
		}
		ctx, cancel := context.WithDeadline(held, deadline)
		err := l.renew(ctx)
		cancel()
		if errors.Is(err, ErrLockLost) {
			lose(err)
			return
		}
		// Any other failure is tried again at the next tick, until the
		// deadline.
	}
}

// renew rewrites the lock, with a later expiry, if it is still ours: the
// version read holds our token, and the write is conditional on that
// version's ETag (which is also right when a write of ours that timed out
// landed after all).
func (l *s3Lock) renew(ctx context.Context) error {
	cur, etag, err := l.read(ctx)
	if err == nil && cur.Token != l.token {
		return fmt.Errorf("lock %s: %w: taken over by %s", l.name, ErrLockLost, cur.Holder)
	}
	if err == nil {
		err = l.write(ctx, etag)
	}
	if errors.Is(err, errConflict) || errors.Is(err, ErrNotFound) {
		return fmt.Errorf("lock %s: %w: %v", l.name, ErrLockLost, err)
	}
	return err
}

// remove deletes the lock if it is still ours: the version read holds our
// token, and the delete has If-Match on its ETag, which AWS S3 and
// versitygw honour. On servers that ignore If-Match on DELETE (gofakes3),
// a lock taken over in the instant between the read and the delete would
// be deleted, but a lock renewed less than lockRenew ago is far from its
// expiry. A failure, or no answer within 10 s, leaves the lock to expire.
func (l *s3Lock) remove(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cur, etag, err := l.read(ctx); err == nil && cur.Token == l.token {
		_, _ = l.s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
			Bucket: aws.String(l.s.bucket), Key: aws.String(l.key), IfMatch: aws.String(etag),
		})
	}
}

// read returns the lock and its ETag. A body that is not a lock (nothing
// of ours writes one) reads as a lock that expired long ago.
func (l *s3Lock) read(ctx context.Context) (lockBody, string, error) {
	out, err := l.s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.s.bucket), Key: aws.String(l.key)})
	if err != nil {
		return lockBody{}, "", wrapS3("read lock", l.name, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, 4<<10))
	if err != nil {
		return lockBody{}, "", fmt.Errorf("read lock %s: %w", l.name, err)
	}
	var b lockBody
	if json.Unmarshal(data, &b) != nil {
		b = lockBody{}
	}
	return b, aws.ToString(out.ETag), nil
}

// write puts our lock, with an expiry lockTTL from now: only where there
// is none when etag is "", else only over the version with that ETag.
// It fails with errConflict when that condition does not hold (412; 409
// when another conditional write of it is under way; 404 when an If-Match
// finds no object).
func (l *s3Lock) write(ctx context.Context, etag string) error {
	start := time.Now()
	// Every write has a body of its own (a later expiry), so a new ETag:
	// an If-Match on an ETag read before a renewal fails after it.
	data, err := json.Marshal(lockBody{Token: l.token, Holder: l.holder, Expires: start.Add(l.s.lockTTL).UTC()})
	if err != nil {
		return err
	}
	in := &s3.PutObjectInput{
		Bucket: aws.String(l.s.bucket), Key: aws.String(l.key),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	}
	if etag == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(etag)
	}
	_, err = l.s.client.PutObject(ctx, in)
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusPreconditionFailed, http.StatusConflict, http.StatusNotFound:
			return fmt.Errorf("write lock %s: %w", l.name, errConflict)
		}
	}
	if err != nil {
		return fmt.Errorf("write lock %s: %w", l.name, err)
	}
	l.mu.Lock()
	l.written = start
	l.mu.Unlock()
	return nil
}

// locked is ErrLocked, saying who holds the lock.
func (l *s3Lock) locked(cur lockBody) error {
	return fmt.Errorf("lock %s: %w (%s, until %s)", l.name, ErrLocked, cur.Holder, cur.Expires.Format(time.RFC3339))
}
