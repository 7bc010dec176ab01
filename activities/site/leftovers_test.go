package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
)

// TestLeftoversAreListedAndSettled: what killed writes leave under the
// hub's reserved prefix is listed by kind; settled, users' files come back
// into view (a deletion's set-aside file to its name, a sync's parked file
// beside it), the hub's temporary files no write holds go, and unknown
// files stay. Nothing younger than the minimum age is touched.
func TestLeftoversAreListedAndSettled(t *testing.T) {
	dir, tdir := t.TempDir(), t.TempDir()
	fx := newTransferFixtureAt(t, dir, tdir, false)
	older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
	fx.write(t, "/f.txt", "the destination's older copy", older)
	// A real kill: a sync's exchange, the former file parked.
	require.True(t, runChild(t, "^TestSyncReplaceFaultChild$", "HUB_REPLACE_FAULT_ROOT="+dir,
		"HUB_REPLACE_FAULT_TARGET="+tdir, "HUB_REPLACE_FAULT_INDEX=0", "HUB_FAULT_POINT=sync.replace.exchanged@1"))
	put := func(name, content, mark string) {
		fx.write(t, "/"+name, content, older)
		if mark != "" {
			require.NoError(t, unix.Setxattr(fx.abs("/"+name), "user.hub.tmp", []byte(mark), 0))
		}
	}
	put(filepath.Base(fsutil.PrivateName("xchg", "g.txt")), "a download never put in place", "")
	g, err := os.Open(fx.abs("/" + filepath.Base(fsutil.PrivateName("xchg", "g.txt"))))
	require.NoError(t, err)
	require.NoError(t, fsutil.MarkExchange(g))
	require.NoError(t, g.Close())
	put(filepath.Base(fsutil.PrivateName("del", "h.txt")), "h, set aside", "")
	put(filepath.Base(fsutil.PrivateName("del", "i.txt")), "i, set aside", "")
	put("i.txt", "i, written since", "")
	put(fsutil.TmpPrefix+"j.txt", "half of a download", "1")
	put(fsutil.TmpPrefix+"delete-1-2-abc", "a delete step's entry beside itself", "")
	inUse, err := fsutil.OpenTemp(context.Background(), fx.abs("/k.txt"))
	require.NoError(t, err)
	t.Cleanup(func() { fsutil.Discard(inUse) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".hub", fsutil.TmpPrefix+"x"), nil, 0o644))

	kinds := func(found []Leftover) map[string]string {
		m := map[string]string{}
		for _, lo := range found {
			m[lo.Path] = lo.Kind + " " + lo.Action
		}
		return m
	}
	want := map[string]string{
		"/" + filepath.Base(fsutil.PrivateName("xchg", "f.txt")): LeftoverParked,
		"/" + filepath.Base(fsutil.PrivateName("xchg", "g.txt")): LeftoverTemporary,
		"/" + filepath.Base(fsutil.PrivateName("del", "h.txt")):  LeftoverSetAside,
		"/" + filepath.Base(fsutil.PrivateName("del", "i.txt")):  LeftoverSetAside,
		"/" + fsutil.TmpPrefix + "j.txt":                         LeftoverTemporary,
		"/" + fsutil.TmpPrefix + "k.txt":                         LeftoverTemporary,
		"/" + fsutil.TmpPrefix + "delete-1-2-abc":                LeftoverUnknown,
	}
	listed := func(actions map[string]string) map[string]string {
		m := map[string]string{}
		for p, k := range want {
			m[p] = k + " " + actions[p]
		}
		return m
	}
	// Listed only; then too young to settle.
	found, err := Leftovers(context.Background(), fx.root, LeftoverOptions{})
	require.NoError(t, err)
	require.Equal(t, listed(nil), kinds(found))
	found, err = Leftovers(context.Background(), fx.root, LeftoverOptions{MinAge: time.Hour, Settle: true, RemoveTemporaries: true})
	require.NoError(t, err)
	require.Equal(t, listed(nil), kinds(found))

	found, err = Leftovers(context.Background(), fx.root, LeftoverOptions{Settle: true, RemoveTemporaries: true})
	require.NoError(t, err)
	got := kinds(found)
	keptF := requireKeptOnce(t, fx, "f.txt", "the destination's older copy")
	keptI := requireKeptOnce(t, fx, "i.txt", "i, set aside")
	require.Equal(t, listed(map[string]string{
		"/" + filepath.Base(fsutil.PrivateName("xchg", "f.txt")): "kept as " + keptF,
		"/" + filepath.Base(fsutil.PrivateName("xchg", "g.txt")): "removed",
		"/" + filepath.Base(fsutil.PrivateName("del", "h.txt")):  "restored to h.txt",
		"/" + filepath.Base(fsutil.PrivateName("del", "i.txt")):  "kept as " + keptI,
		"/" + fsutil.TmpPrefix + "j.txt":                         "removed",
	}), got)
	for name, content := range map[string]string{"h.txt": "h, set aside", "i.txt": "i, written since",
		fsutil.TmpPrefix + "delete-1-2-abc": "a delete step's entry beside itself"} {
		b, err := os.ReadFile(fx.abs("/" + name))
		require.NoError(t, err, name)
		require.Equal(t, content, string(b), name)
	}
	require.FileExists(t, inUse.Name(), "a write in flight keeps its temporary file")
	found, err = Leftovers(context.Background(), fx.root, LeftoverOptions{})
	require.NoError(t, err)
	var left []string
	for _, lo := range found {
		left = append(left, lo.Path)
	}
	sort.Strings(left)
	require.Equal(t, []string{"/" + fsutil.TmpPrefix + "delete-1-2-abc", "/" + fsutil.TmpPrefix + "k.txt"}, left)
}

// TestALongNamedStubSettledKeepsItsRecord: a stub whose name is too long
// for a private prefix (hashed: fsutil.PrivateName), set aside by a
// deletion or parked by an exchange that a kill left, on a site keeping
// records by path. Settled, it came back under the hash while its record
// stayed at its name: read as resident, its reference dropped by an audit
// once a new file took the name (a reviewer's scratch tests). The name is
// found (the download at it, or the index's record of it) and the stub
// comes back to it, or beside it, with its record.
func TestALongNamedStubSettledKeepsItsRecord(t *testing.T) {
	for _, kind := range []string{"del", "xchg"} {
		for _, long := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/long=%v", kind, long), func(t *testing.T) {
				ctx := context.Background()
				dir := t.TempDir()
				s := newAuditSite(t, dir, t.TempDir(), true)
				name := strings.Repeat("n", map[bool]int{false: 20, true: 240}[long]) + ".dat"
				data := strings.Repeat("precious user data ", 100)
				s.migrateFiles(t, "d", map[string]string{name: data})
				// What a kill right after the hub's rename leaves.
				abs := filepath.Join(dir, "d", name)
				require.NoError(t, os.Rename(abs, filepath.Join(dir, "d", filepath.Base(fsutil.PrivateName(kind, name)))))
				if kind == "xchg" {
					require.NoError(t, os.WriteFile(abs, []byte("the download"), 0o644))
				}
				found, err := Leftovers(ctx, s.a.Root, LeftoverOptions{Settle: true})
				require.NoError(t, err)
				require.Len(t, found, 1)
				require.Empty(t, found[0].Error)
				at := name
				if kind == "xchg" {
					kept, ok := strings.CutPrefix(found[0].Action, "kept as ")
					require.True(t, ok, found[0].Action)
					require.True(t, strings.HasPrefix(kept, name[:min(len(name), 200)]), kept)
					at = kept
				} else {
					require.Equal(t, "restored to "+name, found[0].Action)
				}
				if kind == "xchg" {
					// The download at the name is migrated in its turn.
					s.migrateFiles(t, "d", map[string]string{name: "a new file"})
				}
				requireNoneDropped(t, s.dropLeakedAndCollect(t))
				s.requireRecalled(t, "d", map[string]string{at: data})
			})
		}
	}
}

// TestLeftoversKeepALegacyExchangesFormerFile: an exchange of a version
// before exchangeOf, killed, left the destination's former file under the
// download's temporary name (.hub-tmp-<name>), maybe with a stale
// temporary marker, and the download at the name with that version's
// mark. The sync's rerun keeps the former file beside the name; Leftovers
// removed it as a temporary file, and the next write of the name reused
// and emptied it, or the write after that one, once the first had replaced
// the marked download (reviewers' findings). Leftovers keep it beside the
// name, and a write moves it to the private name exchanges park files
// under now, where no write takes it and the settling keeps it.
func TestLeftoversKeepALegacyExchangesFormerFile(t *testing.T) {
	former := "the destination's own file, saved in that instant"
	for _, write := range []bool{false, true} {
		t.Run(map[bool]string{false: "settled", true: "written twice, then settled"}[write], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			root := newRoot(t, dir, false)
			at, temp := filepath.Join(dir, "f.txt"), filepath.Join(dir, fsutil.TmpPrefix+"f.txt")
			require.NoError(t, os.WriteFile(at, []byte("the download"), 0o644))
			require.NoError(t, unix.Setxattr(at, "user.hub.tmp", []byte("exchange"), 0)) // that version's mark
			require.NoError(t, os.WriteFile(temp, []byte(former), 0o644))
			require.NoError(t, unix.Setxattr(temp, "user.hub.tmp", []byte("1"), 0)) // a stale marker
			if write {
				for _, data := range []string{"a first write", "a second write"} {
					f, err := fsutil.OpenTemp(ctx, at)
					require.NoError(t, err)
					_, err = f.WriteString(data)
					require.NoError(t, err)
					require.NoError(t, f.Close())
					require.NoError(t, os.Rename(f.Name(), at)) // in place: the mark at the name goes
				}
				got, err := os.ReadFile(fsutil.PrivateName("xchg", at))
				require.NoError(t, err, "the former file is at the exchanges' private name")
				require.Equal(t, former, string(got))
			}
			found, err := Leftovers(ctx, root, LeftoverOptions{Settle: true, RemoveTemporaries: true})
			require.NoError(t, err)
			require.Len(t, found, 1)
			require.Equal(t, LeftoverParked, found[0].Kind)
			kept, ok := strings.CutPrefix(found[0].Action, "kept as ")
			require.True(t, ok, found[0].Action)
			got, err := os.ReadFile(filepath.Join(dir, kept))
			require.NoError(t, err)
			require.Equal(t, former, string(got))
		})
	}
}
