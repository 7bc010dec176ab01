package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/internal/fault"
)

// quarantineDir holds content a scrub found not to match its name:
// quarantine/<sha256 of the name>.<unix ns>. Nothing reads it; an
// operator removes it once satisfied.
const quarantineDir = "quarantine/"

// ScrubOptions tunes Scrub.
type ScrubOptions struct {
	// Quarantine moves the content that does not match its name to
	// quarantine/, out of where steps look: only the object read, never
	// one written to its key since (see Scrub).
	Quarantine bool
	// Progress is called now and then, to drive heartbeats.
	Progress func()
}

// ScrubResult says what Scrub found.
type ScrubResult struct {
	Objects int          `json:"objects"` // content objects read (objects/ and trash/)
	Bytes   int64        `json:"bytes"`   // bytes read
	Bad     []BadContent `json:"bad"`
	// Misplaced is good content found in quarantine/ while neither its
	// key under objects/ nor the trash held it (see goodQuarantined).
	Misplaced []Misplaced `json:"misplaced"`
}

// Misplaced is a copy in quarantine/ whose bytes hash to its name.
type Misplaced struct {
	Quarantined string `json:"quarantined"`
	Key         string `json:"key"` // where it belongs
	// Restored: copied back (checked) to Key, with opts.Quarantine. The
	// copy in quarantine/ stays.
	Restored bool `json:"restored"`
}

// BadContent is an object whose bytes do not hash to its name.
type BadContent struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"` // of the bytes found
	// Quarantined is where the bytes were moved; "" when they were left
	// (no quarantine asked, or the object was rewritten meanwhile).
	Quarantined string `json:"quarantined,omitempty"`
	Note        string `json:"note,omitempty"`
}

// Scrub reads every content object on the target, in objects/ and
// trash/, and checks that its bytes hash to its name. A target's own
// checksum label is not enough: it is written when the object is, and
// says nothing of bit rot since, nor of objects an earlier version
// labelled with the checksum the file had before it changed during the
// upload. Steps trust that label to skip an upload, so a migrate of a
// file with such content would release the file onto wrong bytes.
//
// With opts.Quarantine, bad content is moved to quarantine/, out of where
// steps look: the next premigrate or migrate of a file with that content
// uploads it again (they find it missing), and until then stubs naming it
// cannot be recalled, as they could not before (a recall checks the bytes
// it reads). Only the object read is moved (targets.Pinner): a step that
// found the content wrong may upload it again, verify it and release its
// file to a stub while the scrub reads or judges the old object, and that
// upload stays where it is. On a filesystem target the file read is held
// open until it is renamed to quarantine/ and recognized there by its
// inode; a file put at the key meanwhile is renamed back. On S3 the object
// read is copied to quarantine/ and deleted with If-Match on the ETag read
// (and, for servers that ignore the condition, only after a look at the
// ETag: an upload landing between that look and the DELETE is lost
// there). A target that cannot pin the object read gets a copy in
// quarantine/ and keeps the object, reported again by the next scrub.
func Scrub(ctx context.Context, d targets.Driver, opts ScrubOptions) (ScrubResult, error) {
	beat := opts.Progress
	if beat == nil {
		beat = func() {}
	}
	res := ScrubResult{Bad: []BadContent{}, Misplaced: []Misplaced{}}
	if err := findMisplaced(ctx, d, opts.Quarantine, &res); err != nil {
		return res, err
	}
	for _, prefix := range []string{objectsDir, trashDir} {
		err := eachObject(ctx, d, prefix, func(o targets.Object) error {
			beat()
			sum := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
			if !validSum(sum) || (o.Key != contentKey(sum) && o.Key != trashKey(sum)) {
				return nil // not ours
			}
			rc, pin, err := getPinned(ctx, d, o.Key)
			if errors.Is(err, targets.ErrNotFound) {
				return nil // moved or deleted since the listing
			} else if err != nil {
				return fmt.Errorf("read %s: %w", o.Key, err)
			}
			// Open until the object is dealt with: a file's inode, its
			// pin, is then no other file's.
			defer rc.Close()
			got, n, err := hashReader(rc)
			if err != nil {
				return fmt.Errorf("read %s: %w", o.Key, err)
			}
			res.Objects++
			res.Bytes += n
			if got == sum {
				return nil
			}
			bad := BadContent{Key: o.Key, SHA256: got}
			if opts.Quarantine {
				if err := quarantine(ctx, d, o, pin, &bad); err != nil {
					return err
				}
			}
			res.Bad = append(res.Bad, bad)
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// findMisplaced looks in quarantine/ for good content whose key is empty,
// left there by a scrub killed between MovePinned's two renames, and with
// restore copies it back (restoreContent checks the bytes as it goes).
func findMisplaced(ctx context.Context, d targets.Driver, restore bool, res *ScrubResult) error {
	missing := func(key string) (bool, error) {
		_, err := d.Stat(ctx, key)
		if errors.Is(err, targets.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	return eachObject(ctx, d, quarantineDir, func(o targets.Object) error {
		name := strings.TrimPrefix(o.Key, quarantineDir)
		sum, _, _ := strings.Cut(name, ".")
		if !validSum(sum) {
			return nil
		}
		for _, key := range []string{contentKey(sum), trashKey(sum)} {
			if gone, err := missing(key); err != nil || !gone {
				return err
			}
		}
		got, _, err := hashObject(ctx, d, o.Key)
		switch {
		case errors.Is(err, targets.ErrNotFound):
			return nil
		case err != nil:
			return err
		case got != sum:
			return nil // bad bytes: what quarantine/ is for
		}
		m := Misplaced{Quarantined: o.Key, Key: contentKey(sum)}
		if restore {
			if err := restoreContent(ctx, d, o.Key, sum, o.Size); err != nil {
				return fmt.Errorf("restore %s from %s: %w", m.Key, o.Key, err)
			}
			m.Restored = true
		}
		res.Misplaced = append(res.Misplaced, m)
		return nil
	})
}

// getPinned opens an object, pinned where the driver can (pin "" else).
func getPinned(ctx context.Context, d targets.Driver, key string) (io.ReadCloser, string, error) {
	if p, ok := d.(targets.Pinner); ok {
		return p.GetPinned(ctx, key)
	}
	rc, err := d.Get(ctx, key)
	return rc, "", err
}

// rewritten is the note of bad content found rewritten since it was read.
const rewritten = "rewritten since it was read: left in place, to be read again by the next scrub"

// hashObject reads an object whole and returns its SHA-256 and size.
func hashObject(ctx context.Context, d targets.Driver, key string) (string, int64, error) {
	rc, err := d.Get(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	return hashReader(rc)
}

// hashReader reads r to its end and returns its SHA-256 and size.
func hashReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := copyBuffer(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// quarantine moves the bad object o, the one pin names, to quarantine/.
// The fault point scrub.copied is where the bytes are judged bad and are
// still at their key (copied already, where the target cannot pin them).
func quarantine(ctx context.Context, d targets.Driver, o targets.Object, pin string, bad *BadContent) error {
	name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
	to := fmt.Sprintf("%s%s.%d", quarantineDir, name, time.Now().UnixNano())
	p, ok := d.(targets.Pinner)
	if !ok {
		return quarantineCopy(ctx, d, o, to, bad)
	}
	fault.Point("scrub.copied")
	err := p.MovePinned(ctx, o.Key, to, pin)
	switch {
	case errors.Is(err, targets.ErrNotFound):
		bad.Note = "gone before it could be quarantined"
	case errors.Is(err, targets.ErrChanged):
		bad.Note = rewritten
	case err != nil:
		return fmt.Errorf("quarantine %s: %w", o.Key, err)
	default:
		bad.Quarantined = to
	}
	return nil
}

// quarantineCopy is for a target that cannot pin the object read: it
// copies the bad bytes to quarantine/, checking that the copy holds them
// (not content uploaded again since), and leaves o in place. Deleting it
// could delete content a step uploads while o is read once more.
func quarantineCopy(ctx context.Context, d targets.Driver, o targets.Object, to string, bad *BadContent) error {
	rc, err := d.Get(ctx, o.Key)
	if errors.Is(err, targets.ErrNotFound) {
		bad.Note = "gone before it could be quarantined"
		return nil
	} else if err != nil {
		return err
	}
	h := sha256.New()
	err = d.Put(ctx, to, io.TeeReader(rc, h), o.Size)
	rc.Close()
	if err != nil {
		return fmt.Errorf("quarantine %s: %w", o.Key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != bad.SHA256 {
		bad.Note = rewritten
		return d.Delete(ctx, to)
	}
	fault.Point("scrub.copied")
	now, _, err := hashObject(ctx, d, o.Key)
	switch {
	case errors.Is(err, targets.ErrNotFound):
	case err != nil:
		return err
	case now != bad.SHA256:
		bad.Note = rewritten
	default:
		bad.Note = "copied to quarantine and left in place: the target cannot delete only the object read"
	}
	bad.Quarantined = to
	return nil
}
