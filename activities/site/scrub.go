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

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/targets"
)

// quarantineDir holds content a scrub found not to match its name:
// quarantine/<sha256 of the name>.<unix ns>. Nothing reads it; an
// operator removes it once satisfied.
const quarantineDir = "quarantine/"

// ScrubOptions tunes Scrub.
type ScrubOptions struct {
	// Quarantine moves the content that does not match its name to
	// quarantine/ (copied, then deleted from where steps look).
	Quarantine bool
	// Progress is called now and then, to drive heartbeats.
	Progress func()
}

// ScrubResult says what Scrub found.
type ScrubResult struct {
	Objects int          `json:"objects"` // content objects read (objects/ and trash/)
	Bytes   int64        `json:"bytes"`   // bytes read
	Bad     []BadContent `json:"bad"`
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
// With opts.Quarantine, bad content is copied to quarantine/ and then
// deleted where steps look: the next premigrate or migrate of a file with
// that content uploads it again (they find it missing), and until then
// stubs naming it cannot be recalled, as they could not before (a recall
// checks the bytes it reads). An object rewritten between the read and
// the deletion (a step uploaded the content again) is left in place: it
// is read once more right before it is deleted.
func Scrub(ctx context.Context, d targets.Driver, opts ScrubOptions) (ScrubResult, error) {
	beat := opts.Progress
	if beat == nil {
		beat = func() {}
	}
	res := ScrubResult{Bad: []BadContent{}}
	for _, prefix := range []string{objectsDir, trashDir} {
		err := eachObject(ctx, d, prefix, func(o targets.Object) error {
			beat()
			sum := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
			if !validSum(sum) || (o.Key != contentKey(sum) && o.Key != trashKey(sum)) {
				return nil // not ours
			}
			got, n, err := hashObject(ctx, d, o.Key)
			if errors.Is(err, targets.ErrNotFound) {
				return nil // moved or deleted since the listing
			} else if err != nil {
				return fmt.Errorf("read %s: %w", o.Key, err)
			}
			res.Objects++
			res.Bytes += n
			if got == sum {
				return nil
			}
			bad := BadContent{Key: o.Key, SHA256: got}
			if opts.Quarantine {
				if err := quarantine(ctx, d, o, &bad); err != nil {
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

// hashObject reads an object whole and returns its SHA-256 and size.
func hashObject(ctx context.Context, d targets.Driver, key string) (string, int64, error) {
	rc, err := d.Get(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := copyBuffer(h, rc)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// quarantine copies the bad object o to quarantine/, checking that the
// copy holds the bad bytes found (not content uploaded again since), then
// deletes o if it still holds them.
func quarantine(ctx context.Context, d targets.Driver, o targets.Object, bad *BadContent) error {
	name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
	to := fmt.Sprintf("%s%s.%d", quarantineDir, name, time.Now().UnixNano())
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
		bad.Note = "rewritten since it was read: left in place, to be read again by the next scrub"
		return d.Delete(ctx, to)
	}
	if s, ok := d.(targets.Syncer); ok {
		if err := s.Sync(ctx); err != nil {
			return err
		}
	}
	fsutil.Fault("scrub.copied")
	// Read once more right before the deletion: a step that uploaded
	// the content again meanwhile put the good bytes there.
	now, _, err := hashObject(ctx, d, o.Key)
	switch {
	case errors.Is(err, targets.ErrNotFound):
	case err != nil:
		return err
	case now != bad.SHA256:
		bad.Note = "rewritten since it was read: left in place, to be read again by the next scrub"
	default:
		if err := d.Delete(ctx, o.Key); err != nil {
			return fmt.Errorf("quarantine %s: %w", o.Key, err)
		}
	}
	bad.Quarantined = to
	return nil
}
