package site

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// TestAKilledAuditLosesNothingItWasDropping kills an audit asked to drop
// at each of its fault points. It drops two references: one of a stub
// its user removed (leaked for good), and the one retriedMigrate's step,
// retried on the renamed file, writes and records right before the audit
// deletes it (which the audit's last walk puts back). Killed after that
// delete and before the last walk, the reference was gone with nothing
// left to say so: the next audit saw no reference to put back, and the
// collector freed the stub's content. Now a guard marker, written before
// any drop, keeps the content until an audit settles it; the next audit
// puts the reference back, and the removed stub's content is freed.
func TestAKilledAuditLosesNothingItWasDropping(t *testing.T) {
	t.Parallel()
	gone := map[string]string{"gone.txt": "a stub its user removed"}
	setup := func(t *testing.T) (s auditSite, data, key string) {
		s, data, key, _, _ = retriedMigrate(t, true)
		s.migrateFiles(t, "c", gone)
		require.NoError(t, os.Remove(filepath.Join(s.a.Root.Dir(), "c", "gone.txt")))
		ageMarkers(t, s.tdir)
		return s, data, key
	}
	child := func(s auditSite, key string, env ...string) (killed bool) {
		return runChild(t, "^TestKilledAuditChild$", append(env, "HUB_AUDIT_KILL_ROOT="+s.a.Root.Dir(),
			"HUB_AUDIT_KILL_TARGET="+s.tdir, "HUB_AUDIT_KILL_KEY="+key)...)
	}

	s, _, key := setup(t)
	file := filepath.Join(t.TempDir(), "trace")
	require.False(t, child(s, key, "HUB_FAULT_TRACE="+file))
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var points []string
	for _, p := range strings.Fields(string(b)) {
		if strings.HasPrefix(p, "audit.") { // not the retried migrate's
			points = append(points, p)
		}
	}
	require.Equal(t, []string{"audit.guarded@1", "audit.dropped@1", "audit.dropped@2", "audit.restored@1"}, points)

	for _, point := range points {
		for _, recallFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recall first %v", point, recallFirst), func(t *testing.T) {
				t.Parallel()
				s, data, key := setup(t)
				require.True(t, child(s, key, "HUB_FAULT_POINT="+point), "killed at %s", point)
				collectTwice(t, s.target) // before anyone audits again

				ar, err := AuditRefs(context.Background(), s.a.Root, map[string]targets.Driver{"archive": s.target}, AuditOptions{})
				require.NoError(t, err)
				require.Equal(t, 2, ar.Interrupted, "the listing tells of the interrupted drops")
				if recallFirst {
					// A stub if the retried migrate ran before the kill: it
					// recalls before the drops are settled.
					requireContent(t, s, "/b/f.txt", data)
				}
				s.dropLeakedAndCollect(t)
				require.Empty(t, guardsOn(t, s.tdir), "settled")
				requireContent(t, s, "/b/f.txt", data)
				sum := sumOf(gone["gone.txt"])
				for _, key := range []string{contentKey(sum), trashKey(sum)} {
					require.NoFileExists(t, filepath.Join(s.tdir, filepath.FromSlash(key)), "the removed stub's content is freed")
				}
			})
		}
	}

	t.Run("not killed", func(t *testing.T) {
		t.Parallel()
		s, data, key := setup(t)
		require.False(t, child(s, key))
		require.Empty(t, guardsOn(t, s.tdir), "an audit that ends leaves no guard")
		collectTwice(t, s.target)
		s.requireRecalled(t, "b", map[string]string{"f.txt": data})
	})
}

// TestKilledAuditChild runs an audit with drop on the site at
// HUB_AUDIT_KILL_ROOT, whose target's marker HUB_AUDIT_KILL_KEY the
// retried migrate of /b/f.txt writes again right before the audit deletes
// it (see retriedMigrate); with HUB_AUDIT_KILL_B set, another audit that
// drops runs first, there. On its own it does nothing.
func TestKilledAuditChild(t *testing.T) {
	dir := os.Getenv("HUB_AUDIT_KILL_ROOT")
	if dir == "" {
		return
	}
	s := newAuditSite(t, dir, os.Getenv("HUB_AUDIT_KILL_TARGET"), false)
	key := os.Getenv("HUB_AUDIT_KILL_KEY")
	ran := false
	hook := &stepHook{Driver: s.target, onDel: func(k string) {
		if k != key || ran {
			return
		}
		ran = true
		if os.Getenv("HUB_AUDIT_KILL_B") != "" {
			_, err := AuditRefs(context.Background(), s.a.Root, map[string]targets.Driver{"archive": s.target}, AuditOptions{Drop: true})
			t.Logf("audit B: %v", err) // refused (the parent checks what is left)
		}
		res, err := Migrate(context.Background(), s.a.Root, []string{"/b/f.txt"}, s.target, "archive", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{"/b/f.txt"})
	}}
	target := lockingHook{hook, s.target.(targets.Locker)}
	_, err := AuditRefs(context.Background(), s.a.Root, map[string]targets.Driver{"archive": target}, AuditOptions{Drop: true})
	require.NoError(t, err)
	require.True(t, ran)
}

// requireContent recalls p if it is a stub and checks its content.
func requireContent(t *testing.T, s auditSite, p, data string) {
	t.Helper()
	res, err := Recall(context.Background(), s.a.Root, []string{p}, only("archive", s.target), StepOptions{})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Contains(t, []Code{CodeOK, CodeSkipped}, res[0].Code, "%s: %s", p, res[0].Message)
	got, err := os.ReadFile(filepath.Join(s.a.Root.Dir(), filepath.FromSlash(p)))
	require.NoError(t, err)
	require.Equal(t, data, string(got), p)
}

// ageMarkers makes every marker on the target folder tdir eight days old.
func ageMarkers(t *testing.T, tdir string) {
	t.Helper()
	old := time.Now().Add(-8 * 24 * time.Hour)
	require.NoError(t, filepath.WalkDir(filepath.Join(tdir, refsDir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	}))
}

// guardsOn lists the drop guards on the target folder tdir.
func guardsOn(t *testing.T, tdir string) []string {
	t.Helper()
	var found []string
	require.NoError(t, filepath.WalkDir(filepath.Join(tdir, refsDir), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, dropGuard) {
			found = append(found, p)
		}
		return err
	}))
	return found
}

// killedRetriedOnVolume: /b is a volume (a tmpfs bind-mounted beneath the
// root) holding a stub (other.txt) and f.txt, whose migrate was killed
// long ago after writing its marker. A child audit asked to drop is
// killed right after deleting f.txt's marker, which the retried migrate
// (run by TestKilledAuditChild right before that delete) had just written
// again and recorded: the state guards are for.
func killedRetriedOnVolume(t *testing.T) (s auditSite, vol, mnt, data string) {
	dir := t.TempDir()
	s = newAuditSite(t, dir, t.TempDir(), false)
	vol = mountTmpfs(t, t.TempDir())
	mnt = filepath.Join(dir, "b")
	bindMount(t, vol, mnt)
	s.migrateFiles(t, "b", map[string]string{"other.txt": "another stub on the volume"})
	data = "data of a file whose first migrate was killed"
	key := s.killedMigrate(t, "b/f.txt", data)
	ageMarkers(t, s.tdir)
	require.True(t, runChild(t, "^TestKilledAuditChild$", "HUB_AUDIT_KILL_ROOT="+dir,
		"HUB_AUDIT_KILL_TARGET="+s.tdir, "HUB_AUDIT_KILL_KEY="+key, "HUB_FAULT_POINT=audit.dropped@1"))
	require.Len(t, guardsOn(t, s.tdir), 1, "the killed audit left its guard")
	require.NoFileExists(t, filepath.Join(s.tdir, filepath.FromSlash(key)), "and the marker it dropped is gone")
	return s, vol, mnt, data
}

// TestAGuardStaysWhileItsVolumeIsDown: an audit killed as above; the host
// reboots, and the volume is not mounted yet when the operator audits
// again. The volume's leaked references were kept, but the guard was
// settled as if no record named its reference (none was found: the
// record is on the volume), and the collector freed the stub's content
// (a reviewer's finding). A guard now stays while its file's volume is
// down or replaced, as a marker would; once the volume is back, the
// audit puts the reference back.
func TestAGuardStaysWhileItsVolumeIsDown(t *testing.T) {
	s, vol, mnt, data := killedRetriedOnVolume(t)
	require.NoError(t, unix.Unmount(mnt, 0))
	ar := s.dropLeakedAndCollect(t)
	require.Equal(t, 1, ar.Interrupted)
	require.Len(t, ar.InterruptedKept, 1, "%+v", ar)
	require.Contains(t, ar.InterruptedKept[0].Kept, "not mounted now")
	require.Len(t, guardsOn(t, s.tdir), 1)

	require.NoError(t, unix.Mount(vol, mnt, "", unix.MS_BIND, ""))
	ar = s.dropLeakedAndCollect(t)
	require.Empty(t, ar.InterruptedKept)
	require.Empty(t, guardsOn(t, s.tdir), "settled")
	s.requireRecalled(t, "b", map[string]string{"f.txt": data})
}

// TestAuditsThatDropTakeTurns: audit A guards a reference and, right
// before it deletes the marker, audit B runs whole: it took A's guard
// for one left by an audit stopped, found no record naming the
// reference (the retried migrate had not recorded it yet), and removed
// the guard; the migrate then recorded it, A deleted it and was killed
// before its last walk, and nothing was left to say the reference was
// needed (a reviewer's finding). An audit asked to drop now holds the
// target's "audit" lock: B is refused.
func TestAuditsThatDropTakeTurns(t *testing.T) {
	s, data, key, _, _ := retriedMigrate(t, true)
	require.True(t, runChild(t, "^TestKilledAuditChild$", "HUB_AUDIT_KILL_ROOT="+s.a.Root.Dir(), "HUB_AUDIT_KILL_TARGET="+s.tdir,
		"HUB_AUDIT_KILL_KEY="+key, "HUB_AUDIT_KILL_B=1", "HUB_FAULT_POINT=audit.dropped@1"), "audit A killed")
	ar := s.dropLeakedAndCollect(t)
	require.Equal(t, 1, ar.Interrupted, "audit A's guard was left for this audit")
	require.Empty(t, guardsOn(t, s.tdir))
	requireContent(t, s, "/b/f.txt", data)

	// While the site's audit lock is held: another audit of the site that
	// drops is refused, a listing needs no lock, and another site sharing
	// the target (whose guards are its own) drops.
	held, release, err := s.a.Root.lockAudit(context.Background(), s.target)
	require.NoError(t, err)
	defer release()
	_, err = AuditRefs(held, s.a.Root, map[string]targets.Driver{"archive": s.target}, AuditOptions{Drop: true})
	require.ErrorIs(t, err, targets.ErrLocked)
	_, err = AuditRefs(held, s.a.Root, map[string]targets.Driver{"archive": s.target}, AuditOptions{})
	require.NoError(t, err)
	other := newAuditSite(t, t.TempDir(), s.tdir, false)
	_, err = AuditRefs(held, other.a.Root, map[string]targets.Driver{"archive": other.target}, AuditOptions{Drop: true})
	require.NoError(t, err)
}
