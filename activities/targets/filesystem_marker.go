package targets

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/thehub/hub/activities/fsutil"
)

// A filesystem target's folder holds a marker, .hub-target, with a random
// id written when a site first used the folder. Each site remembers the
// ids of the target folders it has used (Config.Seen), so that a folder
// whose volume is not mounted (an empty mountpoint, a volume missing from
// a container) is refused instead of written to: objects written there
// would sit on the local disk, hidden once the volume is mounted, while
// their files were released to stubs.
const targetMarker = ".hub-target"

// ErrTargetNotMounted: a filesystem target's folder is missing its marker,
// or holds another one, than the site saw when it last used it.
var ErrTargetNotMounted = errors.New("is not the folder this site used before (is its volume mounted?)")

// checkMarker applies the rule above to folder dir (as configured) before
// the driver creates anything in it. seen is the site's memory folder.
func checkMarker(dir, seen string) error {
	sum := sha256.Sum256([]byte(dir))
	memo := filepath.Join(seen, hex.EncodeToString(sum[:12]))
	if err := checkMarkerAt(dir, seen, memo); err != nil {
		return err
	}
	return checkVolumesBeneath(dir, memo+".mounts")
}

// checkVolumesBeneath applies the same rule to the volumes mounted beneath
// dir (a refs/ or objects/ on a volume of its own): the site remembers
// them, in memo, one folder (relative to dir, quoted) a line, and refuses the
// target while one it remembers is not mounted there: written to, the
// empty mountpoint would take markers the volume hides once it is back;
// collected, it would show none, and every content would go (a reviewer's
// finding). A volume removed on purpose is forgotten once its line goes.
func checkVolumesBeneath(dir, memo string) error {
	b, err := os.ReadFile(memo)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filesystem target %s: %w", dir, err)
	}
	base := dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		base = real // as mountsBeneath gives them
	}
	now := map[string]bool{}
	for _, p := range mountsBeneath(dir) {
		if rel, err := filepath.Rel(base, p); err == nil {
			now[rel] = true
		}
	}
	remembered := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		rel, err := strconv.Unquote(line)
		if err != nil {
			continue // an empty line, or one an operator left
		}
		if !now[rel] {
			return fmt.Errorf("filesystem target %s %w: the volume mounted at %s beneath it when this site last used it is not mounted now; a volume removed on purpose is forgotten once its line is removed from %s",
				dir, ErrTargetNotMounted, filepath.Join(dir, rel), memo)
		}
		remembered[rel] = true
	}
	var all []string
	for rel := range now {
		all = append(all, strconv.Quote(rel)) // any name, a space or a newline in it
	}
	if len(all) == len(remembered) {
		return nil
	}
	sort.Strings(all)
	return fsutil.WriteFile(memo, []byte(strings.Join(all, "\n")+"\n"), 0o644)
}

// checkMarkerAt is checkMarker's rule for the folder itself, memo the
// site's memory of it.
func checkMarkerAt(dir, seen, memo string) error {
	remembered, err := os.ReadFile(memo)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filesystem target %s: %w", dir, err)
	}
	marker := filepath.Join(dir, targetMarker)
	if len(remembered) > 0 {
		found, err := os.ReadFile(marker)
		switch {
		case err == nil && string(found) == string(remembered):
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("filesystem target %s: marker: %w", dir, err)
		}
		why := "its marker " + targetMarker + " is missing"
		if err == nil {
			why = "its marker " + targetMarker + " is another folder's"
		}
		return fmt.Errorf("filesystem target %s %w: %s; a folder replaced on purpose is taken again once %s is removed",
			dir, ErrTargetNotMounted, why, memo)
	}
	// First use by this site: the folder must exist (one beneath a volume
	// not mounted does not), and gets its marker if it has none.
	if err := mustBeFolder(dir); err != nil {
		return err
	}
	if mp := fsutil.UnmountedVolume(dir); mp != "" {
		return fmt.Errorf("filesystem target %s %w: it lies beneath %s, which /etc/fstab mounts and is not mounted", dir, ErrTargetNotMounted, mp)
	}
	id, err := os.ReadFile(marker)
	if errors.Is(err, fs.ErrNotExist) {
		if err = newMarker(marker); err == nil {
			id, err = os.ReadFile(marker) // another site's, if it came first
		}
	}
	if err != nil {
		return fmt.Errorf("filesystem target %s: marker: %w", dir, err)
	}
	if strings.TrimSpace(string(id)) == "" {
		return fmt.Errorf("filesystem target %s: its marker %s is empty", dir, targetMarker)
	}
	if err := os.MkdirAll(seen, 0o750); err != nil {
		return fmt.Errorf("filesystem target %s: %w", dir, err)
	}
	return fsutil.WriteFile(memo, id, 0o644)
}

// newMarker makes marker with a fresh id unless it exists (linkNew: two
// sites making it at once agree on one id).
func newMarker(marker string) error {
	fresh := make([]byte, 16)
	_, _ = rand.Read(fresh)
	err := linkNew(marker, fsutil.TmpPrefix+targetMarker+"-", func(tmp *os.File) error {
		_, err := tmp.WriteString(hex.EncodeToString(fresh))
		return err
	})
	if err != nil {
		return err
	}
	return fsutil.SyncDir(filepath.Dir(marker))
}

// mustBeFolder refuses a target folder dir that does not exist (or is no
// folder): it is never created where its volume may be missing.
func mustBeFolder(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a folder")
	}
	if err != nil {
		return fmt.Errorf("filesystem target %s %w: it is no folder here (%v); create it, or mount its volume",
			dir, ErrTargetNotMounted, err)
	}
	return nil
}
