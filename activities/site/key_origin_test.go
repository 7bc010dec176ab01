package site

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/targets"
)

// TestCopiedSiteDropsNoReference: a site copied with its .hub folder
// (cp -a, as an rsync -aX to new storage would) while the original still
// runs shares the original's key. A stub deleted at the copy left the
// reference both share unnamed there, and the copy's audit with --drop
// dropped it: the collector then freed the content the original's stub
// still needs. Now the copy's key file is known for a copy (its inode and
// birth time are not those recorded when the key was made) and the copy
// drops nothing; the original's own audit still drops its leaks, and an
// operator who retired the original lets the copy drop by removing the
// record.
func TestCopiedSiteDropsNoReference(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			target := fsTarget(t)
			drivers := map[string]targets.Driver{"archive": target}
			later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }

			orig := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(orig, "a.txt"), []byte("the original's data"), 0o644))
			root := newRoot(t, orig, index)
			res, err := Migrate(ctx, root, []string{"/a.txt"}, target, "archive", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/a.txt"})

			cp := filepath.Join(t.TempDir(), "copy")
			out, err := exec.Command("cp", "-a", orig, cp).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.NoError(t, os.Remove(filepath.Join(cp, "a.txt"))) // deleted at the copy
			copyRoot := newRoot(t, cp, index)

			ar, err := AuditRefs(ctx, copyRoot, drivers, AuditOptions{Now: later})
			require.NoError(t, err, "an audit that drops nothing runs")
			require.Len(t, ar.Leaked, 1, "the shared reference looks leaked at the copy")
			_, err = AuditRefs(ctx, copyRoot, drivers, AuditOptions{Now: later, Drop: true})
			require.ErrorIs(t, err, ErrKeyCopied)
			_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
			require.NoError(t, err)
			res, err = Recall(ctx, root, []string{"/a.txt"}, only("archive", target), StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/a.txt"})

			// The original's own audit drops its leaks: its key is its own.
			require.NoError(t, os.WriteFile(filepath.Join(orig, "b.txt"), []byte("removed later"), 0o644))
			res, err = Migrate(ctx, root, []string{"/b.txt"}, target, "archive", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/b.txt"})
			require.NoError(t, os.Remove(filepath.Join(orig, "b.txt")))
			ar, err = AuditRefs(ctx, root, drivers, AuditOptions{Now: later, Drop: true})
			require.NoError(t, err)
			require.Len(t, ar.Leaked, 1)
			require.True(t, ar.Leaked[0].Dropped)

			// The original retired, its operator confirms the copy.
			require.NoError(t, os.Remove(filepath.Join(cp, hubDir, keyOriginFile)))
			ar, err = AuditRefs(ctx, copyRoot, drivers, AuditOptions{Now: later, Drop: true})
			require.NoError(t, err)
			require.Len(t, ar.Leaked, 1)
			require.True(t, ar.Leaked[0].Dropped)
			_, err = AuditRefs(ctx, copyRoot, drivers, AuditOptions{Now: later, Drop: true})
			require.NoError(t, err, "the copy's key is its own from now on")
		})
	}
}
