package site

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// flakyTarget: Put fails when failPut says so; Delete deletes, then
// returns delErr when it says so (a request that took effect but timed
// out); every call fails once ctx is done (as S3's would).
type flakyTarget struct {
	targets.Driver
	failPut func(key string) error
	delErr  func(key string) error
}

func (d flakyTarget) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.failPut != nil {
		if err := d.failPut(key); err != nil {
			return err
		}
	}
	return d.Driver.Put(ctx, key, r, size)
}

func (d flakyTarget) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := d.Driver.Delete(ctx, key)
	if err == nil && d.delErr != nil {
		err = d.delErr(key)
	}
	return err
}

func (d flakyTarget) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return d.Driver.Get(ctx, key)
}

func (d flakyTarget) Stat(ctx context.Context, key string) (targets.Object, error) {
	if err := ctx.Err(); err != nil {
		return targets.Object{}, err
	}
	return d.Driver.Stat(ctx, key)
}

// TestAuditPutsBackAMarkerWhoseRestoreFailed: a retried migrate records
// the reference the audit is dropping, and the audit's put-back of it
// fails once (a transient target error): the marker stayed dropped, the
// audit said "not dropped", and its last walk did not run (a reviewer's
// finding). A drop counts from its delete on, whatever fails after.
func TestAuditPutsBackAMarkerWhoseRestoreFailed(t *testing.T) {
	s, data, key, hook, ran := retriedMigrate(t, false)
	putFails := 0
	d := flakyTarget{Driver: hook, failPut: func(k string) error {
		if k == key && *ran && putFails == 0 {
			putFails++
			return errors.New("503 slow down")
		}
		return nil
	}}
	auditThenRecall(t, context.Background(), s, d, key, data, ran)
}

// TestAuditPutsBackAMarkerWhoseDeleteFailedAfterTakingEffect: the delete
// took effect but the call failed (a timeout): taken for not dropped, the
// marker was never put back (a reviewer's finding).
func TestAuditPutsBackAMarkerWhoseDeleteFailedAfterTakingEffect(t *testing.T) {
	s, data, key, hook, ran := retriedMigrate(t, false)
	d := flakyTarget{Driver: hook, delErr: func(k string) error {
		if k == key {
			return errors.New("context deadline exceeded (request sent)")
		}
		return nil
	}}
	auditThenRecall(t, context.Background(), s, d, key, data, ran)
}

// TestAuditPutsBackAMarkerWhenCancelledAfterItsDelete: the audit is
// cancelled right after a delete: the put-back ran on the cancelled
// context and failed (a reviewer's finding). Nothing after a delete heeds
// a cancel.
func TestAuditPutsBackAMarkerWhenCancelledAfterItsDelete(t *testing.T) {
	s, data, key, hook, ran := retriedMigrate(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hook.afterDel = func(k string) {
		if k == key {
			cancel()
		}
	}
	d := flakyTarget{Driver: hook}
	auditThenRecall(t, ctx, s, d, key, data, ran)
}

// auditThenRecall runs an audit with --drop through d, whose retried
// migrate (retriedMigrate) must have run, then requires the marker at key
// back and the file's recall whole after two collections.
func auditThenRecall(t *testing.T, ctx context.Context, s auditSite, d targets.Driver, key, data string, ran *bool) {
	t.Helper()
	ar, err := AuditRefs(ctx, s.a.Root, map[string]targets.Driver{"archive": d}, AuditOptions{Drop: true})
	t.Logf("audit err: %v; leaked: %+v", err, ar.Leaked)
	require.True(t, *ran)
	require.FileExists(t, filepath.Join(s.tdir, filepath.FromSlash(key)), "the marker is back")
	collectTwice(t, s.target)
	s.requireRecalled(t, "a", map[string]string{"f.txt": data})
}
