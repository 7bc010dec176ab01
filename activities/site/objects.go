package site

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/fault"
)

// The layout of the hub's data on an external target (docs/remote-copies.md
// has the reasoning):
//
//	objects/<aa>/<sha256>      file content, named by its SHA-256
//	refs/<aa>/<sha256>.<ref>   one marker per record (premigrated file or
//	                           stub, on any site) that relies on that content
//	trash/<sha256>             content the collector found unreferenced, kept
//	                           for a grace period before it is deleted
//	quarantine/<sha256>.<ns>   content a scrub found not to match its name
//
// Markers written before 2026-11-25 are at refs/<sha256>/<ref> (a folder
// per content, whose mkdir cost a filesystem target more than the rest of
// the marker); they count, are checked and are dropped like the others.
//
// An object's name is its content, so writing it again can only write the
// same bytes: no site can overwrite another's copy. Steps never delete
// objects; they drop their reference, and Collect deletes what nothing
// refers to.
const (
	objectsDir = "objects/"
	refsDir    = "refs/"
	trashDir   = "trash/"
)

// contentKey is where content with this SHA-256 lives.
func contentKey(sum string) string { return objectsDir + shard(sum) + "/" + sum }

// shard is the folder of a content name: its first two characters. It
// answers for any string (a name too short gets "_" before it), so that no
// checksum, however malformed, makes a key function panic; content is only
// ever written and collected under names that pass validSum.
func shard(sum string) string {
	if len(sum) < 2 {
		return "_" + sum
	}
	return sum[:2]
}

// validSum tells a content name, a SHA-256 in lowercase hex as the site
// writes it, from anything else found on a target or in a record.
func validSum(sum string) bool {
	if len(sum) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(sum) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ContentKey is the object key of content with this hex SHA-256 on any
// target the hub writes to.
func ContentKey(sum string) string { return contentKey(sum) }

func refKey(sum, ref string) string { return refsDir + shard(sum) + "/" + sum + "." + ref }

// legacyRefKey is where refKey was before (see the layout above).
func legacyRefKey(sum, ref string) string { return refsDir + sum + "/" + ref }

// parseRefKey reads the content and reference names of a marker key of
// either layout.
func parseRefKey(key string) (sum, ref string, ok bool) {
	rest, ok := strings.CutPrefix(key, refsDir)
	if !ok {
		return "", "", false
	}
	dir, name, ok := strings.Cut(rest, "/")
	if !ok || dir == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	if len(dir) != 2 {
		return dir, name, true // refs/<sha256>/<ref>
	}
	sum, ref, ok = strings.Cut(name, ".")
	if !ok || len(sum) <= 2 || sum[:2] != dir || ref == "" {
		return "", "", false
	}
	return sum, ref, true
}

func trashKey(sum string) string { return trashDir + sum }

// contentAddressed tells a record of this layout from a legacy one, whose
// key was the file's path and which has no reference.
func (rec *Record) contentAddressed() bool { return rec.Ref != "" }

// refBody is what a reference marker holds, for operators reading the
// target; steps only ever check that a marker exists. Owner proves which
// site wrote it (see refOwner), so that an audit of one site never drops
// another's reference (AuditRefs).
//
// A marker has a body of its own, or shares one with others (a step's
// markers on a filesystem target, see refGroups): then the body has a
// line per marker, and Sum and Ref say which marker a line is for.
type refBody struct {
	Sum  string `json:"sum,omitempty"`
	Ref  string `json:"ref,omitempty"`
	Path string `json:"path"`
	Ino  uint64 `json:"ino"`
	// Vol is, for a file on a filesystem mounted beneath the root, the
	// folder it is mounted at: an audit drops a reference of a volume only
	// where it finds the site's records on it.
	Vol string `json:"vol,omitempty"`
	// VolFrom says what was mounted at Vol (see Root.mountFrom): an audit
	// drops the reference only while the same is mounted there.
	VolFrom string `json:"vol_from,omitempty"`
	Created string `json:"created"`
	Owner   string `json:"owner,omitempty"`
}

// newRefBody is the body of the marker of reference ref to content sum,
// held by the file rel with inode ino.
func (r *Root) newRefBody(sum, ref, rel string, ino uint64) (refBody, error) {
	return r.refBodyAt(filepath.Join(r.dir, filepath.FromSlash(rel)), false, sum, ref, rel, ino)
}

// refBodyAt is newRefBody for the file a step reaches at at (strict: see
// markerVolume).
func (r *Root) refBodyAt(at string, strict bool, sum, ref, rel string, ino uint64) (refBody, error) {
	owner, err := r.refOwner(sum, ref)
	if err != nil {
		return refBody{}, err
	}
	vol, from, err := r.markerVolume(at, rel, ino, strict)
	return refBody{Path: apiPath(rel), Ino: ino, Vol: vol, VolFrom: from, Created: time.Now().UTC().Format(time.RFC3339), Owner: owner}, err
}

// findRefBody reads the body of marker (sum, ref) from what its key holds:
// a body of its own, or the line naming it in a shared one. A body it
// cannot read is the zero refBody (no owner): unknown, never absent.
func findRefBody(b []byte, sum, ref string) refBody {
	var body refBody
	if json.Unmarshal(b, &body) == nil && body.Ref == "" {
		return body // the marker's own
	}
	for line := range bytes.Lines(b) {
		body = refBody{}
		if bytes.Contains(line, []byte(ref)) && json.Unmarshal(line, &body) == nil && body.Sum == sum && body.Ref == ref {
			return body
		}
	}
	return refBody{}
}

// addRef records on the target that a record relies on rec.Checksum. It is
// written before the record, so a crash leaves at worst a reference without
// a record, which keeps the content (safe) rather than a record without a
// reference.
func (r *Root) addRef(ctx context.Context, d targets.Driver, sum, ref, rel string, ino uint64) error {
	body, err := r.newRefBody(sum, ref, rel, ino)
	if err != nil {
		return err
	}
	return putRef(ctx, d, sum, ref, body)
}

// putRef writes the marker of reference ref to content sum with a body
// of its own.
func putRef(ctx context.Context, d targets.Driver, sum, ref string, body refBody) error {
	b, _ := json.Marshal(body)
	// A marker counts from the moment it exists, so where the target can,
	// it is created in place. Anything already at its key (an earlier
	// attempt's marker, complete or torn by a crash) is replaced whole.
	if c, ok := d.(targets.Creator); ok && c.Create(ctx, refKey(sum, ref), b) == nil {
		return nil
	}
	if err := d.Put(ctx, refKey(sum, ref), strings.NewReader(string(b)), int64(len(b))); err != nil {
		return fmt.Errorf("record the reference to the remote copy: %w", err)
	}
	return nil
}

// refGroups are the shared bodies of a step's new markers, on a target
// that can share one (targets.Grouper): a file on the target for every
// refsPerBody markers instead of one each, which is most of what a
// small file's premigration costs a filesystem target (allocating the
// inodes). Each body is used by one worker at a time; close closes them
// all once the step's uploads are done.
type refGroups struct {
	mu   sync.Mutex
	idle []targets.Group
	none bool // the target could not start one
}

// refsPerBody is how many markers share a body: its lines are read
// whole by an audit of any one of them (a few KiB).
const refsPerBody = 32

// add is Root.addRef, for the file the step reaches at at, through one of
// the step's shared bodies where the target has them. A marker a shared
// body cannot name (one already there, written by an earlier attempt, or
// a filesystem without unnamed files) is written with a body of its own
// (putRef).
func (g *refGroups) add(ctx context.Context, root *Root, d targets.Driver, sum, ref, at, rel string, ino uint64) error {
	body, err := root.refBodyAt(at, true, sum, ref, rel, ino)
	if err != nil {
		return err
	}
	if group := g.take(ctx, d); group != nil {
		entry := body
		entry.Sum, entry.Ref = sum, ref
		line, _ := json.Marshal(entry)
		err := group.Add(ctx, refKey(sum, ref), append(line, '\n'))
		switch {
		case err == nil:
			g.give(group)
			return nil
		case errors.Is(err, fs.ErrExist): // an earlier attempt's marker
			g.give(group)
		default:
			_ = group.Close() // rare: an error leaves it behind
		}
	}
	return putRef(ctx, d, sum, ref, body)
}

func (g *refGroups) take(ctx context.Context, d targets.Driver) targets.Group {
	g.mu.Lock()
	if n := len(g.idle); n > 0 {
		group := g.idle[n-1]
		g.idle = g.idle[:n-1]
		g.mu.Unlock()
		return group
	}
	none := g.none
	g.mu.Unlock()
	gr, ok := d.(targets.Grouper)
	if !ok || none {
		return nil
	}
	group, err := gr.NewGroup(ctx)
	if err != nil {
		g.mu.Lock()
		g.none = true
		g.mu.Unlock()
		return nil
	}
	return group
}

func (g *refGroups) give(group targets.Group) {
	if group.Len() >= refsPerBody {
		_ = group.Close()
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.idle = append(g.idle, group)
}

func (g *refGroups) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, group := range g.idle {
		_ = group.Close()
	}
	g.idle = nil
}

// dropRef removes a record's reference once the record is gone.
func dropRef(ctx context.Context, d targets.Driver, rec Record) error {
	if !rec.contentAddressed() {
		return nil // legacy objects are never collected
	}
	for _, key := range []string{refKey(rec.Checksum, rec.Ref), legacyRefKey(rec.Checksum, rec.Ref)} {
		if err := d.Delete(ctx, key); err != nil {
			return fmt.Errorf("drop the reference to the remote copy: %w", err)
		}
	}
	return nil
}

// hasRef reports whether the record's reference is still on the target.
func hasRef(ctx context.Context, d targets.Driver, rec Record) (bool, error) {
	_, err := d.Stat(ctx, refKey(rec.Checksum, rec.Ref))
	if errors.Is(err, targets.ErrNotFound) {
		_, err = d.Stat(ctx, legacyRefKey(rec.Checksum, rec.Ref))
	}
	if errors.Is(err, targets.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// guardedRef tells whether the guard an audit writes before it drops
// rec's reference is on the target: the audit was stopped before it
// settled the drop (see dropGuard).
func guardedRef(ctx context.Context, d targets.Driver, rec Record) (bool, error) {
	_, err := d.Stat(ctx, refKey(rec.Checksum, rec.Ref+dropGuard))
	if errors.Is(err, targets.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// getContent opens the object at key, whose content is sum. Content the
// collector moved aside (because the reference that keeps it was written
// just after the collector looked) is read from the trash, where it stays
// until the collector sees that reference and puts it back; failing that,
// from a good copy in quarantine/ (see goodQuarantined).
func getContent(ctx context.Context, d targets.Driver, key, sum string) (io.ReadCloser, error) {
	rc, err := d.Get(ctx, key)
	if errors.Is(err, targets.ErrNotFound) && validSum(sum) && key == contentKey(sum) {
		if rc, terr := d.Get(ctx, trashKey(sum)); terr == nil {
			return rc, nil
		}
		if q, qerr := goodQuarantined(ctx, d, sum); qerr == nil {
			if rc, qerr := d.Get(ctx, q); qerr == nil {
				return rc, nil
			}
		}
	}
	return rc, err
}

// goodQuarantined returns the key of a copy in quarantine/ named for sum
// whose bytes hash to sum, or targets.ErrNotFound. A scrub moves only bad
// bytes there, but one killed between the two renames of a filesystem
// target's MovePinned (the object moved was not the one it read: a step
// had just uploaded the content again, and released its file onto it)
// leaves the good upload there and its key empty.
func goodQuarantined(ctx context.Context, d targets.Driver, sum string) (string, error) {
	found := ""
	err := eachObject(ctx, d, quarantineDir+sum+".", func(o targets.Object) error {
		if found != "" {
			return nil
		}
		got, _, err := hashObject(ctx, d, o.Key)
		switch {
		case errors.Is(err, targets.ErrNotFound):
		case err != nil:
			return err
		case got == sum:
			found = o.Key
		}
		return nil
	})
	if err == nil && found == "" {
		err = targets.ErrNotFound
	}
	return found, err
}

// ensureContent makes sure content sum of the given size is under
// objects/, restoring it from the trash if the collector moved it there.
// It is called after the caller's reference is written. ok is false when
// the content is nowhere and must be uploaded.
func ensureContent(ctx context.Context, d targets.Driver, sum string, size int64) (ok bool, err error) {
	if remoteHas(ctx, d, contentKey(sum), size, sum) {
		return true, nil
	}
	err = restoreContent(ctx, d, trashKey(sum), sum, size)
	switch {
	case errors.Is(err, targets.ErrNotFound), errors.Is(err, errDamagedCopy):
		return false, nil // to be uploaded again
	case err != nil:
		return false, fmt.Errorf("restore %s from the trash: %w", sum, err)
	}
	return true, nil
}

// errDamagedCopy: a copy's bytes do not match the content its name says
// it holds (bit rot on the target).
var errDamagedCopy = errors.New("its bytes do not match its checksum (damaged)")

// restoreContent copies content sum from key from (in the trash) to its
// key under objects/. The copy is read once first and its bytes checked:
// a damaged copy replaces nothing and is errDamagedCopy, since a Put
// replaces whatever the key held, and some S3 servers do not check what
// they are sent.
func restoreContent(ctx context.Context, d targets.Driver, from, sum string, size int64) error {
	rc, err := d.Get(ctx, from)
	if err != nil {
		return err
	}
	got, err := sha256Of(rc)
	rc.Close()
	if err != nil {
		return err
	}
	if got != sum {
		return fmt.Errorf("%s: %w", from, errDamagedCopy)
	}
	if rc, err = d.Get(ctx, from); err != nil {
		return err
	}
	defer rc.Close()
	return putChecked(ctx, d, contentKey(sum), checked(rc, sum), sum, size)
}

// checkedReader passes r through, and at its end fails (errDamagedCopy)
// if what it passed does not hash to sum: the bytes a first read checked
// may be replaced before the read that copies them (a collector moving a
// damaged copy over them), and a target that keeps no checksum has its
// copies checked by size alone.
type checkedReader struct {
	r   io.Reader
	h   hash.Hash
	sum string
}

func checked(r io.Reader, sum string) *checkedReader {
	return &checkedReader{r: r, h: sha256.New(), sum: sum}
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(c.h.Sum(nil)) != c.sum {
		return n, fmt.Errorf("copied from a read: %w", errDamagedCopy)
	}
	return n, err
}

// putChecked stores a stream under key and checks that the target holds
// exactly the content named sum.
func putChecked(ctx context.Context, d targets.Driver, key string, r io.Reader, sum string, size int64) error {
	if err := d.Put(ctx, key, r, size); err != nil {
		return err
	}
	obj, err := d.Stat(ctx, key)
	if err != nil {
		return err
	}
	if obj.Size != size || (obj.Checksum != "" && obj.Checksum != sum) {
		return fmt.Errorf("%s: stored content does not match sha256 %s", key, sum)
	}
	return nil
}

// CollectOptions tunes Collect.
type CollectOptions struct {
	// Grace is how long unreferenced content stays in the trash before it
	// is deleted (default 7 days).
	Grace time.Duration
	// Progress is called now and then, to drive heartbeats.
	Progress func()
}

// CollectResult counts what a collection did.
type CollectResult struct {
	Objects  int `json:"objects"`  // content objects seen
	Trashed  int `json:"trashed"`  // moved to the trash: nothing referred to them
	Restored int `json:"restored"` // put back from the trash: a reference appeared
	Deleted  int `json:"deleted"`  // deleted: unreferenced for the whole grace period
	Damaged  int `json:"damaged"`  // damaged copies left where they are (hub site scrub-target): one in the trash that is referenced again, one unreferenced in objects/ that is not moved over the trash
}

// DefaultCollectGrace is how long unreferenced content is kept in the trash.
const DefaultCollectGrace = 7 * 24 * time.Hour

// Collect frees the content nothing refers to, in two passes over the
// target: content without a reference moves to the trash; trashed content
// still without a reference after Grace is deleted, and trashed content
// that gained one goes back. One collector may run per target at a time
// (the hub runs it as a workflow with one ID per target, and CollectTarget
// heartbeats so that an attempt still running is not retried beside it);
// on targets that can lock (targets.Locker: the filesystem, S3), a second
// collection fails at once, and one that loses its lock stops: it asks
// (targets.StillHeld) right before each move and deletion.
//
// Why no reference can lose its content: a writer records its reference
// before it relies on content it did not upload. If the collector listed
// the references before that, it may move the content to the trash, but
// it deletes trashed content only after listing the references again at
// least Grace later, when it sees the writer's reference and restores the
// content instead. Meanwhile recalls read from the trash.
func Collect(ctx context.Context, d targets.Driver, opts CollectOptions) (CollectResult, error) {
	if opts.Grace <= 0 {
		opts.Grace = DefaultCollectGrace
	}
	l, ok := d.(targets.Locker)
	if !ok {
		return collect(ctx, d, opts)
	}
	held, release, err := l.TryLock(ctx, "collect")
	if errors.Is(err, targets.ErrLocked) {
		return CollectResult{}, fmt.Errorf("another collection of this target is running (%w); the lock ends with its holder's process (on S3, a minute after a killed holder's last renewal): never remove it by hand", err)
	} else if err != nil {
		return CollectResult{}, err
	}
	defer release()
	// held ends when the lock is lost: nothing is moved or deleted after.
	res, err := collect(held, d, opts)
	if cause := context.Cause(held); err != nil && !errors.Is(err, targets.ErrLockLost) && errors.Is(cause, targets.ErrLockLost) {
		err = fmt.Errorf("%w (%w)", cause, err)
	}
	return res, err
}

// collect is Collect once its lock is held.
func collect(ctx context.Context, d targets.Driver, opts CollectOptions) (CollectResult, error) {
	beat := opts.Progress
	if beat == nil {
		beat = func() {}
	}
	var res CollectResult
	refs := &refIndex{d: d}
	err := eachObject(ctx, d, objectsDir, func(o targets.Object) error {
		beat()
		sum := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		if !validSum(sum) || o.Key != contentKey(sum) {
			return nil // not ours: a temporary file, or anything an operator left there
		}
		res.Objects++
		referenced, err := refs.has(ctx, sum)
		if err != nil || referenced {
			return err
		}
		if err := targets.StillHeld(ctx); err != nil {
			return err
		}
		err = moveObject(ctx, d, o.Key, trashKey(sum), sum, o.Size)
		if errors.Is(err, errDamagedCopy) {
			// A good trash copy stays (see below). Left at its key, the
			// damaged one would be taken by a step for the content (by
			// its stored checksum) and a file released onto it (a
			// reviewer's finding): quarantined, as a scrub does.
			// Where that fails, it is left for hub site scrub-target.
			res.Damaged++
			_ = quarantineDamaged(ctx, d, o, sum)
			return nil
		}
		if err != nil {
			return err
		}
		res.Trashed++
		return nil
	})
	if err != nil {
		return res, err
	}
	now := time.Now()
	refs = &refIndex{d: d} // read again: a marker written during the first pass restores its content
	err = eachObject(ctx, d, trashDir, func(o targets.Object) error {
		beat()
		sum := strings.TrimPrefix(o.Key, trashDir)
		if !validSum(sum) {
			return nil // not ours
		}
		referenced, err := refs.has(ctx, sum)
		switch {
		case err != nil:
			return err
		case referenced:
			if err := targets.StillHeld(ctx); err != nil {
				return err
			}
			err := moveObject(ctx, d, o.Key, contentKey(sum), sum, o.Size)
			if errors.Is(err, errDamagedCopy) {
				res.Damaged++ // left for hub site scrub-target
				return nil
			}
			if err != nil {
				return err
			}
			res.Restored++
		case now.Sub(o.Mtime) >= opts.Grace:
			// Looked at again: a copy trashed afresh since the listing
			// starts a grace period of its own.
			cur, err := d.Stat(ctx, o.Key)
			if errors.Is(err, targets.ErrNotFound) || (err == nil && time.Since(cur.Mtime) < opts.Grace) {
				return nil
			}
			// Before the only step that loses content, its own markers
			// are looked for: a listing a server cut short may have
			// hidden them from the pass over the pair.
			if err == nil {
				var kept bool
				if kept, err = markerOf(ctx, d, sum); kept {
					return nil
				}
			}
			// Nor while a copy is at the content's key: a damaged one
			// that could not be quarantined, or one a killed pass put
			// back; this may be the only good copy. The next pass over
			// objects/ moves a good one here.
			if err == nil {
				if _, serr := d.Stat(ctx, contentKey(sum)); serr == nil {
					return nil
				}
			}
			if err == nil {
				err = targets.StillHeld(ctx)
			}
			if err == nil {
				err = d.Delete(ctx, o.Key)
			}
			if err != nil {
				return err
			}
			res.Deleted++
		}
		return nil
	})
	return res, err
}

// eachObject lists every object under prefix, in key order: in one visit
// where the driver can (targets.Walker), else page by page.
func eachObject(ctx context.Context, d targets.Driver, prefix string, fn func(targets.Object) error) error {
	if w, ok := d.(targets.Walker); ok {
		return w.Each(ctx, prefix, fn)
	}
	marker := ""
	for {
		objs, next, err := d.List(ctx, prefix, marker, 1000)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := fn(o); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		marker = next
	}
}

// refIndex answers whether content has a marker for a pass over content
// in key order: it lists the markers of one leading pair of hex digits at
// a time (refs/<aa> covers refs/<aa>/... and the old refs/<aa...>/...),
// one listing per 1,000 markers instead of a listing per content, which a
// filesystem target answers by reading refs/<aa>/ whole. A marker written
// after its pair was read is missed, as one written just after a check of
// that content alone would be: its writer then restores or uploads the content
// (ensureContent), and the trash pass reads the markers again.
type refIndex struct {
	d      targets.Driver
	bucket string              // the pair read
	sums   map[string]struct{} // contents with a marker in it
}

func (x *refIndex) has(ctx context.Context, sum string) (bool, error) {
	if bucket := shard(sum); x.sums == nil || bucket != x.bucket {
		sums := map[string]struct{}{}
		err := eachObject(ctx, x.d, refsDir+bucket, func(o targets.Object) error {
			if s, _, ok := parseRefKey(o.Key); ok {
				sums[s] = struct{}{}
			}
			return nil
		})
		if err != nil {
			return false, err
		}
		x.bucket, x.sums = bucket, sums
	}
	_, ok := x.sums[sum]
	return ok, nil
}

// markerOf looks for any marker of content sum, in both layouts.
func markerOf(ctx context.Context, d targets.Driver, sum string) (bool, error) {
	found := false
	for _, prefix := range []string{refsDir + shard(sum) + "/" + sum + ".", refsDir + sum + "/"} {
		objs, _, err := d.List(ctx, prefix, "", 1)
		if err != nil {
			return false, err
		}
		found = found || len(objs) > 0
	}
	return found, nil
}

// holdsWhole: the object at key is content sum, read whole (its stored
// checksum alone would not do: rot keeps it, with size and mtime), and
// durable (not another host's write not yet flushed, which only a write
// of our own makes durable: see remoteHas).
func holdsWhole(ctx context.Context, d targets.Driver, key, sum string, size int64) bool {
	if obj, err := d.Stat(ctx, key); err != nil || obj.Size != size || obj.NotDurable {
		return false
	}
	got, _, err := hashObject(ctx, d, key)
	return err == nil && got == sum
}

// moveObject copies content to its new key, checked against its name, and
// then deletes the old key: a crash in between leaves two copies, never
// none.
//
// Content put back under objects/ is checked before it replaces anything
// (restoreContent), and not copied at all when objects/ already holds it
// (a writer put it back, or uploaded it, since), read whole: a damaged
// copy in the trash never replaces a good one, and a damaged one under
// objects/ is replaced by the good trash copy instead of outliving it.
func moveObject(ctx context.Context, d targets.Driver, from, to, sum string, size int64) error {
	var err error
	switch {
	case to == contentKey(sum) && holdsWhole(ctx, d, to, sum, size):
		// The trash copy goes: the one kept is durable and was read whole.
	case to == contentKey(sum):
		err = restoreContent(ctx, d, from, sum, size)
	default:
		var rc io.ReadCloser
		if rc, err = d.Get(ctx, from); err == nil {
			err = putChecked(ctx, d, to, checked(rc, sum), sum, size)
			rc.Close()
		}
	}
	if errors.Is(err, targets.ErrNotFound) {
		return nil // moved or deleted since the listing
	}
	if err != nil {
		return fmt.Errorf("move %s to %s: %w", from, to, err)
	}
	if err := flushTarget(ctx, d); err != nil {
		return err
	}
	fault.Point("collect.copied")
	if err := targets.StillHeld(ctx); err != nil {
		return err
	}
	return d.Delete(ctx, from)
}

// quarantineDamaged moves the object o, found not to hold the content sum
// its key names, to quarantine/ where the target can pin it (see Scrub),
// or copies it there; read again first, it stays if it is good now (a
// step uploaded the content since).
func quarantineDamaged(ctx context.Context, d targets.Driver, o targets.Object, sum string) error {
	rc, pin, err := getPinned(ctx, d, o.Key)
	if errors.Is(err, targets.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	defer rc.Close()
	got, _, err := hashReader(rc)
	if err != nil || got == sum {
		return err
	}
	return quarantine(ctx, d, o, pin, &BadContent{Key: o.Key, SHA256: got})
}
