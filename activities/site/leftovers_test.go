package site

import (
	"context"
	"os"
	"path/filepath"
	"sort"
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
