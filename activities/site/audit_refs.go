package site

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/fault"
)

// refOwner proves that this site wrote the reference ref to content sum:
// a MAC under the site's key, kept in the reference's body. Another site
// sharing the target cannot produce it, so an audit never mistakes
// another site's reference for one of its own.
func (r *Root) refOwner(sum, ref string) (string, error) {
	key, err := r.state.signer.loadKey()
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "hub reference owner v1\x00%s\x00%s", sum, ref)
	return hex.EncodeToString(m.Sum(nil)[:16]), nil
}

// DefaultAuditMinAge is how old a reference must be before an audit may
// call it leaked: far longer than any step runs between writing a
// reference and writing its record (a step is abandoned after the job's
// task_invalidation_timeout, 24 hours by default, and a retried step
// writes its reference again, which makes it young again).
const DefaultAuditMinAge = 7 * 24 * time.Hour

// AuditOptions tunes AuditRefs.
type AuditOptions struct {
	// MinAge: younger references are never reported (default
	// DefaultAuditMinAge); see DefaultAuditMinAge.
	MinAge time.Duration
	// Drop removes the leaked references found.
	Drop bool
	// Now is the audit's clock; nil is time.Now.
	Now func() time.Time
}

// LeakedRef is a reference of this site that no record on the site names.
type LeakedRef struct {
	Target  string    `json:"target"`
	Key     string    `json:"key"`  // refs/<sha256>/<ref>
	Path    string    `json:"path"` // the file that wrote it, as it was named then
	Written time.Time `json:"written"`
	Dropped bool      `json:"dropped"`
	// Kept says why a leaked reference asked to be dropped was not: its
	// file was on a volume mounted beneath the root, not mounted now.
	Kept string `json:"kept,omitempty"`
}

// AuditResult says what AuditRefs found.
type AuditResult struct {
	Records int         `json:"records"` // records on the site that name a reference
	Refs    int         `json:"refs"`    // references on the targets, of any site
	Ours    int         `json:"ours"`    // of them, written by this site
	Young   int         `json:"young"`   // of ours without a record, too young to report
	Unowned int         `json:"unowned"` // references without an owner (written before owners were recorded): never reported
	Leaked  []LeakedRef `json:"leaked"`
	// Unreadable counts the files whose state record could not be read
	// (garbage in its attribute, a read error): the reference it names is
	// unknown, so while there are any, nothing is dropped.
	Unreadable      int      `json:"unreadable"`
	UnreadablePaths []string `json:"unreadable_paths"` // the first maxUnreadablePaths of them
	// Interrupted counts the drops an earlier audit was stopped in (see
	// dropGuard): their content is kept, and an audit asked to drop
	// settles them.
	Interrupted int `json:"interrupted"`
	// InterruptedKept lists the guards of interrupted drops an audit kept
	// (Kept says why): their files' volume is down or replaced.
	InterruptedKept []LeakedRef `json:"interrupted_kept,omitempty"`
}

// maxUnreadablePaths bounds the paths of unreadable records an audit lists.
const maxUnreadablePaths = 100

// ErrUnreadableRecords: an audit asked to drop found records it could not
// read, and dropped nothing.
var ErrUnreadableRecords = errors.New("state records could not be read, so no reference is dropped (one of them may name a reference listed as leaked): repair or recall those files, then audit again")

// AuditRefs lists the references this site wrote on the given targets
// that no record on the site names any more: a stub removed with rm, a
// file overwritten by its user, a stub replaced outside the hub. Such a
// reference keeps its content on the target for ever. With opts.Drop they
// are removed; dropping a reference never deletes data, the collector
// trashes content nothing refers to and deletes it only after its grace
// period.
//
// A reference is written before its record (see addRef), so a reference
// without a record may be a step in flight: only references older than
// opts.MinAge are reported. A file renamed while the site is walked can
// be missed by the walk; before dropping anything the site is walked a
// second time, and only references missing from both walks go.
// References written by other sites sharing a target (their owner MAC is
// not this site's) and references from before owners were recorded are
// never reported.
func AuditRefs(ctx context.Context, root *Root, drivers map[string]targets.Driver, opts AuditOptions) (AuditResult, error) {
	if opts.MinAge <= 0 {
		opts.MinAge = DefaultAuditMinAge
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	res := AuditResult{Leaked: []LeakedRef{}, UnreadablePaths: []string{}}
	// One audit that drops at a time on a target: another's guards would
	// look left by an audit stopped (see dropGuard), and be settled under it.
	held := map[string]context.Context{}
	for _, name := range slices.Sorted(maps.Keys(drivers)) {
		if !opts.Drop {
			break
		}
		h, release, err := root.lockAudit(ctx, drivers[name])
		if err != nil {
			return res, fmt.Errorf("target %s: %w", name, err)
		}
		defer release()
		held[name] = h
	}
	live, err := liveRefs(ctx, root, &res)
	if err != nil {
		return res, err
	}
	res.Records = len(live.refs)
	cutoff := now().Add(-opts.MinAge)
	var guards []*guard // left by an audit stopped while it dropped
	for _, name := range slices.Sorted(maps.Keys(drivers)) {
		d := drivers[name]
		err := eachObject(ctx, d, refsDir, func(o targets.Object) error {
			sum, ref, ok := parseRefKey(o.Key)
			if !ok {
				return nil // not a reference
			}
			res.Refs++
			body, err := readRefBody(ctx, d, o.Key)
			if errors.Is(err, targets.ErrNotFound) {
				return nil // dropped since the listing
			}
			if err != nil {
				return err
			}
			if body.Owner == "" {
				res.Unowned++
				return nil
			}
			mine, err := root.refOwner(sum, ref)
			if err != nil {
				return err
			}
			if !hmac.Equal([]byte(body.Owner), []byte(mine)) {
				return nil // another site's
			}
			if orig, ok := strings.CutSuffix(ref, dropGuard); ok {
				guards = append(guards, &guard{target: name, sum: sum, ref: orig, pending: true})
				res.Interrupted++
				return nil
			}
			res.Ours++
			if _, ok := live.refs[sum+"/"+ref]; ok {
				return nil
			}
			written := refWritten(o, body)
			if written.IsZero() || written.After(cutoff) {
				res.Young++
				return nil
			}
			res.Leaked = append(res.Leaked, LeakedRef{Target: name, Key: o.Key, Path: body.Path, Written: written.UTC()})
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("audit references on target %s: %w", name, err)
		}
	}
	if !opts.Drop || len(res.Leaked)+len(guards) == 0 {
		return res, nil
	}
	if res.Unreadable > 0 {
		return res, fmt.Errorf("%d files: %w", res.Unreadable, ErrUnreadableRecords)
	}
	if err := root.state.signer.checkKeyOrigin(); err != nil {
		return res, err
	}
	var second AuditResult
	again, err := liveRefs(ctx, root, &second)
	if err != nil {
		return res, err
	}
	if second.Unreadable > 0 {
		res.Unreadable, res.UnreadablePaths = second.Unreadable, second.UnreadablePaths
		return res, fmt.Errorf("%d files: %w", res.Unreadable, ErrUnreadableRecords)
	}
	return res, root.dropAll(ctx, drivers, held, &res, guards, cutoff, live, again)
}

// lockAudit takes the site's audit lock of the target where it has locks
// (targets.Locker): "audit-" and a name of the site (other sites' guards
// are not this site's to settle, so their audits need not wait). held
// ends when the lock is lost.
func (r *Root) lockAudit(ctx context.Context, d targets.Driver) (held context.Context, release func(), err error) {
	l, ok := d.(targets.Locker)
	if !ok {
		return ctx, func() {}, nil
	}
	site, err := r.refOwner("", "audit lock")
	if err != nil {
		return nil, nil, err
	}
	held, release, err = l.TryLock(ctx, "audit-"+site[:12])
	if errors.Is(err, targets.ErrLocked) {
		err = fmt.Errorf("another audit asked to drop references is running on this target (%w); the lock ends with its holder's process (on S3, a minute after a killed holder's last renewal): never remove it by hand", err)
	}
	return held, release, err
}

// dropGuard ends the name of the guard marker an audit writes before it
// drops a reference: refs/<aa>/<sha256>.<ref>-dropping, a marker of the
// same content that no record names (a reference's name is hex). The
// collector keeps the content while a guard is there. An audit settles
// its guards once its last walk has put back what a record still names;
// one killed before leaves them, and the next audit asked to drop
// settles them: it puts back each reference a record names, then removes
// the guard. Without them, a kill between a drop and the last walk lost
// the content of a stub whose retried step had written that very
// reference (see AuditRefs): the next audit saw no reference to put back.
const dropGuard = "-dropping"

// guard is a reference an audit drops, or one an earlier audit was
// dropping (pending), and its guard marker.
type guard struct {
	target, sum, ref string
	pending          bool       // its guard was found on the target
	leaked           *LeakedRef // the leaked reference this audit drops
	keep             bool       // settled badly: the guard stays
}

// guardKeeps says why the guard g, left by an audit stopped while it
// dropped g's reference, must stay though no walk found a record naming
// that reference: the file the guard's body names is on a volume that is
// down or replaced (see volumeKeeps); "" when it may go.
func (r *Root) guardKeeps(ctx context.Context, d targets.Driver, g *guard, walks ...liveSet) string {
	body, err := readRefBody(ctx, d, refKey(g.sum, g.ref+dropGuard))
	if errors.Is(err, targets.ErrNotFound) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("its body could not be read (%v)", err)
	}
	var vols []map[string]bool
	for _, w := range walks {
		vols = append(vols, w.vols)
	}
	return r.volumeKeeps(body, vols...)
}

// dropAll drops the references the audit found leaked in both walks:
// guards first, durable before any marker goes (writeGuards), then the
// drops (dropLeaked), then a last walk that puts back every dropped
// reference a record names, and the guards go (settleGuards).
func (r *Root) dropAll(ctx context.Context, drivers map[string]targets.Driver, held map[string]context.Context, res *AuditResult, pending []*guard, cutoff time.Time, live, again liveSet) error {
	guards, err := r.writeGuards(ctx, drivers, res, pending, again)
	if err != nil {
		return err
	}
	var dropErr error
	restore := len(pending) > 0
	for _, g := range guards {
		if g.leaked == nil {
			continue
		}
		l := g.leaked
		if err := targets.StillHeld(held[l.Target]); err != nil {
			dropErr = fmt.Errorf("the audit lock of target %s: %w", l.Target, err)
			break
		}
		l.Dropped, l.Kept, err = r.dropLeaked(ctx, drivers[l.Target], l.Key, g.sum, g.ref, cutoff, live.vols, again.vols)
		restore = restore || l.Dropped
		if err != nil {
			dropErr = fmt.Errorf("drop reference %s on target %s: %w", l.Key, l.Target, err)
			break // the references dropped so far are checked below
		}
	}
	return errors.Join(dropErr, r.settleGuards(context.WithoutCancel(ctx), drivers, res, guards, restore, live, again))
}

// writeGuards writes the guard of every reference to drop (the leaked
// ones missing from both walks) and flushes the targets, and returns them
// with the guards left by an earlier audit (pending), in key order.
func (r *Root) writeGuards(ctx context.Context, drivers map[string]targets.Driver, res *AuditResult, pending []*guard, again liveSet) ([]*guard, error) {
	byKey := map[string]*guard{}
	for _, g := range pending {
		byKey[g.target+"\x00"+refKey(g.sum, g.ref)] = g
	}
	flush := map[string]bool{}
	for i := range res.Leaked {
		l := &res.Leaked[i]
		sum, ref, _ := parseRefKey(l.Key)
		if _, ok := again.refs[sum+"/"+ref]; ok {
			continue // its file was moved during the first walk
		}
		// The guard's body is the marker's (its path and volume: see
		// guardKeeps), under an owner of its own.
		body, err := readRefBody(ctx, drivers[l.Target], l.Key)
		if errors.Is(err, targets.ErrNotFound) {
			continue // dropped since the listing
		}
		if err == nil {
			body.Sum, body.Ref, body.Created = "", "", time.Now().UTC().Format(time.RFC3339)
			body.Owner, err = r.refOwner(sum, ref+dropGuard)
		}
		if err == nil {
			err = putRef(ctx, drivers[l.Target], sum, ref+dropGuard, body)
		}
		if err != nil {
			// Nothing dropped yet: the guards written are settled by the next audit.
			return nil, fmt.Errorf("guard reference %s on target %s before its drop: %w", l.Key, l.Target, err)
		}
		k := l.Target + "\x00" + refKey(sum, ref)
		if byKey[k] == nil {
			byKey[k] = &guard{target: l.Target, sum: sum, ref: ref}
		}
		byKey[k].leaked = l
		flush[l.Target] = true
	}
	for _, name := range slices.Sorted(maps.Keys(flush)) {
		if err := flushTarget(ctx, drivers[name]); err != nil {
			return nil, fmt.Errorf("flush the drop guards on target %s: %w", name, err)
		}
	}
	fault.Point("audit.guarded")
	var guards []*guard
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		guards = append(guards, byKey[k])
	}
	return guards, nil
}

// settleGuards ends the drops of guards: with restore (a reference was
// dropped, or guards were left by an earlier audit), a last walk puts
// back every dropped or guarded reference a record names — a step
// retried on a file renamed since its first attempt writes the very
// marker being dropped, with its new path in the body, records it and
// relies on it, and the drop read the earlier body; then every guard
// goes but those whose restore failed, or whose file's volume is down
// (guardKeeps). Every restore is tried, whatever failed before.
func (r *Root) settleGuards(ctx context.Context, drivers map[string]targets.Driver, res *AuditResult, guards []*guard, restore bool, live, again liveSet) error {
	var errs error
	if restore {
		last, err := liveRefs(ctx, r, &AuditResult{})
		if err != nil {
			return fmt.Errorf("the last walk, which puts back a dropped reference a record still names, failed (guards keep the content): audit again: %w", err)
		}
		for _, g := range guards {
			if !g.pending && (g.leaked == nil || !g.leaked.Dropped) {
				continue
			}
			h, ok := last.refs[g.sum+"/"+g.ref]
			if !ok && g.pending { // named in an earlier walk: put back all the same
				h, ok = again.refs[g.sum+"/"+g.ref]
				if !ok {
					h, ok = live.refs[g.sum+"/"+g.ref]
				}
			}
			if !ok {
				if g.pending && g.leaked == nil {
					// Its marker is gone, and no walk found a record naming
					// it: unless its file's volume is down or replaced.
					if why := r.guardKeeps(ctx, drivers[g.target], g, live, again, last); why != "" {
						g.keep = true
						res.InterruptedKept = append(res.InterruptedKept, LeakedRef{Target: g.target, Key: refKey(g.sum, g.ref+dropGuard), Kept: why})
					}
				}
				continue
			}
			if err := r.restoreRef(ctx, drivers[g.target], g.sum, g.ref, h); err != nil {
				errs = errors.Join(errs, fmt.Errorf("put back reference %s on target %s (its guard stays): %w", refKey(g.sum, g.ref), g.target, err))
				g.keep = true
				continue
			}
			if g.leaked != nil {
				g.leaked.Dropped = false
			}
		}
		fault.Point("audit.restored")
	}
	for _, g := range guards {
		if g.keep {
			continue
		}
		if err := drivers[g.target].Delete(ctx, refKey(g.sum, g.ref+dropGuard)); err != nil && !errors.Is(err, targets.ErrNotFound) {
			errs = errors.Join(errs, fmt.Errorf("remove the drop guard of %s on target %s: %w", refKey(g.sum, g.ref), g.target, err))
		}
	}
	return errs
}

// refWritten is when the marker o was written: its mtime, or where the
// target keeps none, the time its body gives.
func refWritten(o targets.Object, body refBody) time.Time {
	if !o.Mtime.IsZero() {
		return o.Mtime
	}
	t, _ := time.Parse(time.RFC3339, body.Created)
	return t
}

// dropLeaked drops a reference the audit found leaked, unless it was
// written again since it was listed, and puts it back if, once it is gone,
// a record relies on it. A reference is named by its file and content, so
// a step retried on the file (a migrate killed long ago, run again) writes
// the very marker the audit is about to drop, records it, checks that it
// is there and releases the file: the marker is looked at again before
// the drop, and after the drop the record at the path the marker names
// (its last writer's) is read; a step whose check came before the drop
// wrote that record before it.
//
// A reference of a file on a volume mounted beneath the root (its body
// names the folder the volume was mounted at) is kept while its file's
// folder is on another mount (a filesystem mounted over it, or its volume
// not mounted), and unless both walks found records the site wrote on the
// volume its folder is on now (vols): unmounted, or with another
// filesystem in its place, the volume's folder holds none of its stubs,
// and all its references look leaked. (Neither "something is mounted
// there" nor the device number would do: the kernel gives a freed number
// to the next volume mounted.) So is one whose path is beneath a mount
// point of /etc/fstab not mounted now (bodies written before volumes were
// named).
func (r *Root) dropLeaked(ctx context.Context, d targets.Driver, key, sum, ref string, cutoff time.Time, vols ...map[string]bool) (dropped bool, kept string, err error) {
	body, err := readRefBody(ctx, d, key)
	if errors.Is(err, targets.ErrNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	if why := r.volumeKeeps(body, vols...); why != "" {
		return false, why, nil
	}
	o, err := d.Stat(ctx, key)
	if errors.Is(err, targets.ErrNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	if written := refWritten(o, body); written.IsZero() || written.After(cutoff) {
		return false, "", nil // written again: young
	}
	// From the delete on, the marker may be gone (a delete can fail after
	// taking effect): the reference counts as dropped on every path, so
	// that the audit's last walk puts it back if a record names it, and
	// nothing here heeds a cancel.
	ctx = context.WithoutCancel(ctx)
	if err := d.Delete(ctx, key); err != nil && !errors.Is(err, targets.ErrNotFound) {
		return true, "", err
	}
	fault.Point("audit.dropped")
	l, err := r.locate(body.Path)
	if err != nil {
		return true, "", nil
	}
	defer l.close()
	fi, err := os.Lstat(l.path())
	if err != nil {
		return true, "", nil
	}
	rec, err := r.state.get(l.path(), l.rel)
	if err != nil {
		// Unknown: the marker goes back (its content is still there).
		if err := r.addRef(ctx, d, sum, ref, l.rel, inode(fi)); err != nil {
			return true, "", err
		}
		return false, fmt.Sprintf("the record at its path could not be read (%v)", err), nil
	}
	if rec == nil || rec.Ref != ref || rec.Checksum != sum {
		return true, "", nil
	}
	if err := r.restoreRef(ctx, d, sum, ref, holder{rel: l.rel, ino: inode(fi), size: rec.Size}); err != nil {
		return true, "", err
	}
	return false, "", nil
}

// volumeKeeps says why a reference whose marker (or guard) has this
// body must be kept while its file's volume is not as when it was written
// (see dropLeaked), or "" when it may be dropped.
func (r *Root) volumeKeeps(body refBody, vols ...map[string]bool) string {
	now := r.volumeOf(strings.TrimPrefix(path.Clean(body.Path), "/"))
	switch {
	case body.Vol == rootVolume && now != "":
		// Another filesystem (the site's own volume, moved) mounted over
		// a folder of stubs of the root's own: it holds records the site
		// wrote (a reviewer's finding).
		return fmt.Sprintf("its file was on the root's own filesystem, and its folder is on the volume mounted at %s now: a filesystem mounted over it", now)
	case body.Vol != "" && body.Vol != rootVolume && now != body.Vol:
		return fmt.Sprintf("its file's folder is on another mount (%q) than its volume's (%q): a filesystem mounted over it, or its volume not mounted now", now, body.Vol)
	}
	if body.Vol != "" && body.Vol != rootVolume {
		switch from := r.mountFrom(now); {
		case body.VolFrom != "" && from != body.VolFrom:
			return fmt.Sprintf("its volume %s is mounted from %q now, not from %q as when the reference was written: a part or a snapshot of it, or its device renamed", now, from, body.VolFrom)
		case body.VolFrom == "" && !strings.HasSuffix(from, " /"):
			// Written before markers said what was mounted: only a whole
			// filesystem at the volume's folder can be the volume whole.
			return fmt.Sprintf("written before markers said what was mounted, and the volume %s is a folder of a filesystem (%q): maybe a part of its volume", now, from)
		}
	}
	for _, seen := range vols {
		// Its folder is on a volume (named by the marker or not, as
		// markers written before volumes were named): one both walks
		// found the site's records on.
		if now != "" && !seen[now] {
			return fmt.Sprintf("its file was on the volume mounted at %s, where the audit found none of the site's records: not mounted now, or another filesystem is there", now)
		}
	}
	if vol := fsutil.UnmountedVolume(filepath.Join(r.dir, filepath.FromSlash(path.Dir(body.Path)))); vol != "" {
		return fmt.Sprintf("its file was beneath %s, a mount point of /etc/fstab that is not mounted now", vol)
	}
	return ""
}

// restoreRef writes again a reference the audit dropped that a record
// relies on, and its content if the collector took it meanwhile.
func (r *Root) restoreRef(ctx context.Context, d targets.Driver, sum, ref string, h holder) error {
	if err := r.addRef(ctx, d, sum, ref, h.rel, h.ino); err != nil {
		return err
	}
	if ok, err := ensureContent(ctx, d, sum, h.size); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("the content is gone from the target (objects/ and trash/), and %s relies on it: its recall will fail", apiPath(h.rel))
	}
	// The stub may rely on it already: durable before the audit goes on.
	return flushTarget(ctx, d)
}

// holder is a file whose record names a reference.
type holder struct {
	rel  string
	ino  uint64
	size int64 // the content's
}

// liveSet is what a walk of the site found: the references its records
// name ("<sha256>/<ref>", with a file holding each), and the volumes
// mounted beneath the root where it found records (see volumeOf).
type liveSet struct {
	refs map[string]holder
	vols map[string]bool
}

// liveRefs walks the whole site and returns the references its records
// name. Every record counts, trusted or not: a reference any record names
// is never called leaked. That includes the records of files the hub
// keeps out of other walks: those in the site trash (a removed C+J space
// is kept there for an operator to restore) and files named like the
// hub's temporary files. Files whose record cannot be read are counted in
// res (Unreadable).
//
// The state index keeps records by path, and a file moved with mv leaves
// its record at its old path: an index record counts too when the walk
// finds a file of its inode anywhere (moved back, the file is its stub
// again). One whose inode no walked file has is a file deleted.
func liveRefs(ctx context.Context, root *Root, res *AuditResult) (liveSet, error) {
	root.forgetMounts()
	found := liveSet{refs: map[string]holder{}, vols: map[string]bool{}}
	unread := func(p string) {
		res.Unreadable++
		if len(res.UnreadablePaths) < maxUnreadablePaths {
			res.UnreadablePaths = append(res.UnreadablePaths, p)
		}
	}
	var walked map[uint64]bool // the inodes of the files walked, where the index has records
	if !root.state.index.empty() {
		walked = map[uint64]bool{}
	}
	files, _ := newFilter(WalkOptions{Types: []string{TypeFile}})
	err := walkTree(ctx, root, []string{"/"}, walkConfig{filter: files, audit: true}, func(items []item) error {
		for _, it := range items {
			if it.recUnread {
				unread(it.Path)
			}
			if it.rec != nil && it.rec.Ref != "" {
				rel := strings.TrimPrefix(it.Path, "/")
				found.refs[it.rec.Checksum+"/"+it.rec.Ref] = holder{rel: rel, ino: it.ino, size: it.rec.Size}
				if vol := root.volumeOf(rel); vol != "" && !found.vols[vol] && root.owns(it.rec, it.ino, rel) {
					found.vols[vol] = true
				}
			}
			if walked != nil {
				walked[it.ino] = true
			}
		}
		return nil
	})
	if err != nil || walked == nil {
		return found, err
	}
	err = root.state.index.each(func(rel string, rec *Record) error {
		key := ""
		switch {
		case rec == nil:
			unread(apiPath(hubDir + "/" + indexDir + "/" + rel))
		case rec.Ref != "":
			key = rec.Checksum + "/" + rec.Ref
		}
		if _, ok := found.refs[key]; key != "" && !ok && walked[rec.Ino] {
			found.refs[key] = holder{rel: rel, ino: rec.Ino, size: rec.Size}
		}
		return nil
	})
	return found, err
}

// owns tells whether rec, read for the file rel with inode ino, is a
// record the site wrote for that very file: a volume another site's (or
// a copy of this one's) mounted in place of the site's own holds only
// records that are not.
func (r *Root) owns(rec *Record, ino uint64, rel string) bool {
	stale, err := r.state.trust(rec, ino, func() int64 { return birthTime(filepath.Join(r.dir, filepath.FromSlash(rel))) })
	return err == nil && !stale
}

// readRefBody reads a reference marker's body (findRefBody: a body that
// is not ours has no owner).
func readRefBody(ctx context.Context, d targets.Driver, key string) (refBody, error) {
	rc, err := d.Get(ctx, key)
	if err != nil {
		return refBody{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxRefBody))
	if err != nil {
		return refBody{}, err
	}
	sum, ref, _ := parseRefKey(key)
	return findRefBody(b, sum, ref), nil
}

// maxRefBody bounds what is read of a marker's body: a shared body of
// refsPerBody lines is a few KiB; anything much larger is not ours.
const maxRefBody = 1 << 20
