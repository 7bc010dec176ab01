package site

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/workflows/vocab"
)

// Resource types of the storage-management (C+J) API whose changes have an
// effect at the site. They match the API's collection names.
const (
	CJSpaces    = "spaces"
	CJExposers  = "exposers"
	CJSnapshots = "snapshots"
	CJProfiles  = "profiles"
	CJIlmsteps  = "ilmsteps"
)

// Where C+J objects live, relative to the root and to the config folder.
const (
	cjSpacesDir    = "spaces"     // <root>/spaces/<space>
	cjSnapshotsDir = ".snapshots" // <root>/.snapshots/<space>/<snapshot>
	cjQuotasDir    = "quotas"     // <config>/quotas/<space>.quota
	cjExportsDir   = "exports.d"  // <config>/exports.d/<exposer>.exports (NFS)
	cjSMBDir       = "smb.d"      // <config>/smb.d/<exposer>.conf (SMB)
	cjNativeDir    = "native.d"   // <config>/native.d/<exposer>.conf (GPFS native)
	cjPoliciesDir  = "policies"   // <config>/policies/{profiles,ilmsteps}/<name>.pol
)

// CJChange is one change of a C+J item to apply at the site: make the site
// match the item (or remove the item's effect when Delete). Exactly the
// field of the item's type is set.
type CJChange struct {
	Type   string
	ItemID int64
	Name   string
	Delete bool

	Space    *CJSpace
	Exposer  *CJExposer
	Snapshot *CJSnapshot
	Policy   *CJPolicy
}

// CJSpace is a space: the directory <root>/spaces/<Name>.
type CJSpace struct {
	Name string
	// Quota in bytes, recorded in the config folder; nil means none.
	Quota *int64
	// Directories are created inside the space (its templates' structure):
	// relative paths, never leaving the space.
	Directories []string
	// Mode is the hub API space's permission_mode: an octal mode is set on
	// the folder; anything else leaves it as mkdir made it.
	Mode string
	// KeepNonEmpty, on a deletion made through the hub API, keeps a
	// folder holding data where it is instead of moving it to the trash.
	KeepNonEmpty bool
}

// CJExposer exports a space (or a folder inside it) to clients.
type CJExposer struct {
	Name string
	// Kind is nfs, cifs or gpfsnative.
	Kind  string
	Space string
	// Path is relative to the space's directory; empty exports all of it.
	Path       string
	Clients    []string // nfs
	Options    string   // nfs export options
	ReadOnly   bool     // cifs
	ValidUsers []string // cifs
}

// CJSnapshot is a read-only copy of a space at <root>/.snapshots/<Space>/<Name>.
type CJSnapshot struct {
	Space, Name string
	// Targets are the site's enabled targets, whose drivers keep the
	// content of the space's stubs for the snapshot's copies of them.
	Targets []TargetSpec `json:",omitempty"`
	// LockThreshold is the site's lock_threshold: a snapshot never copies
	// the pool past that many percent full (defaultSnapshotLimit if 0).
	LockThreshold int64 `json:",omitempty"`
}

// CJPolicy is the policy text of a profile or an ilmstep, written to
// <config>/policies/<Kind>/<Name>.pol.
type CJPolicy struct {
	// Kind is profiles or ilmsteps.
	Kind string
	Name string
	Text string
}

// CJResult says what a change did, for the item's job log.
type CJResult struct {
	Message string
}

// cjNameRE is the rule the API applies to names; the site checks it again
// because names become file names here.
var cjNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CJApply applies one change of a C+J item. It is idempotent: applying the
// same change twice leaves the site as applying it once. Errors of type
// vocab.ErrCJ are not retried.
func (a *Activities) CJApply(ctx context.Context, ch CJChange) (CJResult, error) {
	if !cjNameRE.MatchString(ch.Name) {
		return CJResult{}, cjClassify(cjPermanent(fmt.Errorf("invalid name %q", ch.Name)))
	}
	var msg string
	var err error
	switch {
	case ch.Type == CJSpaces && ch.Space != nil:
		msg, err = a.cjSpace(ctx, ch.Space, ch.Delete)
	case ch.Type == CJExposers && ch.Exposer != nil:
		msg, err = a.cjExposer(ch.Exposer, ch.Delete)
	case ch.Type == CJSnapshots && ch.Snapshot != nil:
		msg, err = a.cjSnapshot(ctx, ch.Snapshot, ch.Delete)
	case (ch.Type == CJProfiles || ch.Type == CJIlmsteps) && ch.Policy != nil:
		msg, err = a.cjPolicy(ch.Policy, ch.Delete)
	default:
		err = cjPermanent(fmt.Errorf("nothing to apply for a change of %s %q", ch.Type, ch.Name))
	}
	if err != nil {
		return CJResult{}, cjClassify(err)
	}
	return CJResult{Message: msg}, nil
}

// cjPermanentError marks an error that retrying cannot cure.
type cjPermanentError struct{ err error }

func (e *cjPermanentError) Error() string { return e.err.Error() }
func (e *cjPermanentError) Unwrap() error { return e.err }

func cjPermanent(err error) error { return &cjPermanentError{err} }

// cjClassify turns an error into what Temporal should do with it: a path
// that leaves the root, a file in the way, a permission or read-only
// filesystem error will fail again, so they are not retried; anything else
// (a space still being created, a full disk, an I/O error) is.
func cjClassify(err error) error {
	var perm *cjPermanentError
	switch {
	case errors.As(err, &perm),
		errors.Is(err, ErrOutsideRoot), errors.Is(err, ErrReserved),
		errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrPermission),
		errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EINVAL),
		errors.Is(err, ErrMountedBeneath):
		return temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrCJ, err)
	}
	return err
}

// cjSub resolves rel below base (both root-relative) and checks that the
// result, symlinks followed, is still inside base's directory.
func (a *Activities) cjSub(base, rel string) (string, error) {
	clean, err := cleanRel(rel)
	if err != nil {
		return "", cjPermanent(err)
	}
	baseAbs, err := a.Root.Resolve(base)
	if err != nil {
		return "", err
	}
	abs, err := a.Root.Resolve(path.Join(base, clean))
	if err != nil {
		return "", err
	}
	if !within(baseAbs, abs) {
		return "", cjPermanent(fmt.Errorf("%s/%s: %w", base, clean, ErrOutsideRoot))
	}
	return abs, nil
}

// cjConfigFile returns <dir>/<name><ext>, a path below the configuration
// folder (see writeConfig).
func (a *Activities) cjConfigFile(dir, name, ext string) string {
	return path.Join(dir, name+ext)
}

// cjWriteFile replaces the configuration file rel's content atomically,
// creating its folder, so a reader never sees half a file.
func (a *Activities) cjWriteFile(rel string, data []byte) error { return a.writeConfig(rel, data) }

// cjRemoveFile removes the configuration file rel; a missing file is
// already removed.
func (a *Activities) cjRemoveFile(rel string) error {
	_, err := a.removeConfig(rel)
	return err
}

// cjRemoveTree removes dir and everything below it, read-only folders
// (snapshots) included; never with a filesystem mounted beneath it
// (ErrMountedBeneath), not even one mounted while it runs.
func cjRemoveTree(dir string) error {
	if err := mountedBeneath(dir); err != nil {
		return err
	}
	return removeTree(dir)
}

// beatEvery is how often beatWhile heartbeats, and beat how (tests
// shorten the one and count the other: the SDK sends heartbeats on at most
// once per throttle interval). stallAfter is how long beatWhileMoving goes
// on heartbeating without progress.
var (
	beatEvery  = 5 * time.Second
	beat       = activity.RecordHeartbeat
	stallAfter = 2 * time.Minute
)

// beatWhile runs fn, heartbeating every few seconds meanwhile when ctx is
// an activity's (with details' value): a long flush or listing is not
// mistaken for a dead worker, whose attempt would then be retried beside
// it.
func beatWhile(ctx context.Context, details func() any, fn func() error) error {
	return beatWhileMoving(ctx, nil, details, func(context.Context) error { return fn() })
}

// errStalled cancels work that made no progress for stallAfter.
var errStalled = errors.New("no progress")

// beatWhileMoving is beatWhile for work that counts its progress in
// moved: once the count has not changed for stallAfter, the heartbeats
// stop, so Temporal times the attempt out (a walk hung on a dead NFS
// server) instead of waiting for its start-to-close timeout, and fn's
// context is cancelled, so the stalled attempt, should it wake, writes
// nothing beside its retry.
func beatWhileMoving(ctx context.Context, moved func() int64, details func() any, fn func(context.Context) error) error {
	if !activity.IsActivity(ctx) {
		return fn(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(beatEvery)
		defer tick.Stop()
		last, since := int64(-1), time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if moved != nil {
				if n := moved(); n != last {
					last, since = n, time.Now()
				} else if time.Since(since) > stallAfter {
					activity.GetLogger(ctx).Warn("no progress: heartbeats stop, so that Temporal times this attempt out and retries it", "for", time.Since(since).Round(time.Second), "details", details())
					cancel(fmt.Errorf("%w for %v", errStalled, stallAfter))
					return
				}
			}
			beat(ctx, details())
		}
	}()
	err := fn(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
		return cause
	}
	return err
}

// walkProgress counts a walk's units of work (chunks of a folder read,
// entries batched) for beatWhileMoving. It travels in the context, so
// every walk beneath a discovery counts into it.
type walkProgress struct{ n atomic.Int64 }

type progressKey struct{}

func withProgress(ctx context.Context) (context.Context, *walkProgress) {
	p := &walkProgress{}
	return context.WithValue(ctx, progressKey{}, p), p
}

// progressIn is ctx's progress, or nil (whose tick does nothing).
func progressIn(ctx context.Context) *walkProgress {
	p, _ := ctx.Value(progressKey{}).(*walkProgress)
	return p
}

func (p *walkProgress) tick() {
	if p != nil {
		p.n.Add(1)
	}
}

// cjHeartbeat reports progress when running as an activity, so a long copy
// is not mistaken for a dead worker and can be cancelled.
func cjHeartbeat(ctx context.Context, details ...any) error {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
	return ctx.Err()
}

// cjPolicy writes or removes the policy text of a profile or an ilmstep.
func (a *Activities) cjPolicy(p *CJPolicy, del bool) (string, error) {
	if p.Kind != CJProfiles && p.Kind != CJIlmsteps {
		return "", cjPermanent(fmt.Errorf("unknown policy kind %q", p.Kind))
	}
	rel := a.cjConfigFile(path.Join(cjPoliciesDir, p.Kind), p.Name, ".pol")
	if del {
		if err := a.cjRemoveFile(rel); err != nil {
			return "", err
		}
		return "removed policy " + rel, nil
	}
	text := p.Text
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if err := a.cjWriteFile(rel, []byte(text)); err != nil {
		return "", err
	}
	return "wrote policy " + rel, nil
}
