package site

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/fsutil"
)

// TestSyncReplaceSparesAUserSave: a sync (newest) replacing an older
// destination file checked it, then renamed its download over the name:
// a save in the instant between the two was replaced. Now the download
// and the file are exchanged, and the file, under the temporary name, is
// leased and compared before it goes; a save in place, by rename over
// the name, the file's removal, or a program holding it open keep it; a
// file created where there was none is not replaced either.
func TestSyncReplaceSparesAUserSave(t *testing.T) {
	for name, index := range stateBackends {
		for _, how := range []string{"in place", "rename over", "held open", "removed", "created"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				fx := newTransferFixture(t, index)
				older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
				if how != "created" { // there is nothing to replace at first
					fx.write(t, "/f.txt", "the destination's older copy", older)
				}
				saved, content := time.Now(), "the user's new work, saved just now"
				var held *os.File
				withReceiveRace(t, func(string) {
					switch how {
					case "in place", "created":
						fx.write(t, "/f.txt", content, saved)
					case "rename over":
						fx.write(t, "/.f.txt.swp", content, saved)
						require.NoError(t, os.Rename(fx.abs("/.f.txt.swp"), fx.abs("/f.txt")))
					case "removed":
						require.NoError(t, os.Remove(fx.abs("/f.txt")))
					default: // writes once the sync looked
						var err error
						held, err = os.OpenFile(fx.abs("/f.txt"), os.O_WRONLY, 0)
						require.NoError(t, err)
					}
				})
				msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
				require.NoError(t, err)
				require.Contains(t, msg, "kept the destination's copy")
				switch how {
				case "removed":
					require.NoFileExists(t, fx.abs("/f.txt"))
				case "held open":
					require.Contains(t, msg, "open in another program")
					_, err := held.WriteAt([]byte(content), 0)
					require.NoError(t, err)
					require.NoError(t, held.Close())
					require.NoError(t, os.Chtimes(fx.abs("/f.txt"), saved, saved))
					fallthrough
				default:
					fx.requireFile(t, "/f.txt", content, saved)
				}
				requireNoTemp(t, fx.dir)

				// Untouched, it is replaced.
				receiveRace = nil
				fx.write(t, "/f.txt", "the destination's older copy", older)
				msg, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
				require.NoError(t, err)
				require.Equal(t, "copied", msg)
				fx.requireFile(t, "/f.txt", string(fx.data), time.Unix(0, fx.sent.Mtime))
				requireNoTemp(t, fx.dir)
			})
		}
	}
}

// TestSyncReplaceRacedAfterTheExchange: saves made in the instant after
// the download took the name. A program that had the file open writes
// into it (the file goes back to its name), and another saves a new
// version over the download: both are kept, the latter beside the file.
// A save over the download alone, the former file untouched, is the
// file at the name afterwards.
func TestSyncReplaceRacedAfterTheExchange(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			fx := newTransferFixture(t, index)
			older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
			fx.write(t, "/f.txt", "the destination's older copy", older)
			held, err := os.OpenFile(fx.abs("/f.txt"), os.O_WRONLY, 0)
			require.NoError(t, err)
			exchangeRace = func(string) {
				_, err := held.WriteAt([]byte("written through a descriptor"), 0)
				require.NoError(t, err)
				require.NoError(t, held.Close())
				fx.write(t, "/.f.txt.swp", "saved over the download", time.Now())
				require.NoError(t, os.Rename(fx.abs("/.f.txt.swp"), fx.abs("/f.txt")))
			}
			t.Cleanup(func() { exchangeRace = nil })
			msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
			require.NoError(t, err)
			require.Contains(t, msg, "kept the destination's copy: it changed during the download; a save made meanwhile is kept as f.txt.sync-kept-")
			got, err := os.ReadFile(fx.abs("/f.txt"))
			require.NoError(t, err)
			require.Equal(t, "written through a descriptor", string(got))
			kept := fx.abs("/" + strings.TrimPrefix(msg[strings.Index(msg, "f.txt.sync-kept-"):], "/"))
			got, err = os.ReadFile(kept)
			require.NoError(t, err)
			require.Equal(t, "saved over the download", string(got))
			require.NoError(t, os.Remove(kept))
			requireNoTemp(t, fx.dir)

			fx.write(t, "/f.txt", "the destination's older copy", older)
			exchangeRace = func(string) {
				fx.write(t, "/.f.txt.swp", "saved over the download", time.Now())
				require.NoError(t, os.Rename(fx.abs("/.f.txt.swp"), fx.abs("/f.txt")))
			}
			msg, err = fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
			require.NoError(t, err)
			require.Equal(t, "copied", msg)
			got, err = os.ReadFile(fx.abs("/f.txt"))
			require.NoError(t, err)
			require.Equal(t, "saved over the download", string(got))
			requireNoTemp(t, fx.dir)
			entries, err := os.ReadDir(fx.dir)
			require.NoError(t, err)
			for _, e := range entries {
				require.NotContains(t, e.Name(), "sync-kept", "nothing else was kept")
			}
		})
	}
}

// TestSyncReplaceFaultChild is the worker TestKillReplacingAFile kills;
// on its own it does nothing.
func TestSyncReplaceFaultChild(t *testing.T) {
	dir, tdir := os.Getenv("HUB_REPLACE_FAULT_ROOT"), os.Getenv("HUB_REPLACE_FAULT_TARGET")
	if dir == "" {
		return
	}
	syncReplace(t, dir, tdir, os.Getenv("HUB_REPLACE_FAULT_INDEX") == "1")
}

// syncReplace receives the fixture's sent file at the site at dir, as a
// sync (newest) with the target at tdir.
func syncReplace(t *testing.T, dir, tdir string, index bool) string {
	t.Helper()
	fx := newTransferFixtureAt(t, dir, tdir, index)
	msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
	require.NoError(t, err)
	return msg
}

// TestKillReplacingAFile: a sync killed right after exchanging its
// download with the destination's older file leaves the download (marked
// as exchanged) at the name and the file under the temporary name, never
// compared. The rerun keeps that file beside the name, whatever happened
// since, and decides about the file at the name as about any other:
// nothing is removed, whether the user then saved into the set-aside file
// (through a descriptor opened before), or into the download at the name
// (which keeps its marker: the audit's case, where exchanging back by the
// marker alone removed that save).
func TestKillReplacingAFile(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			idx := map[bool]string{false: "0", true: "1"}[index]
			for _, saved := range []string{"", "aside", "at the name"} {
				dir, tdir := t.TempDir(), t.TempDir()
				fx := newTransferFixtureAt(t, dir, tdir, index)
				older := time.Unix(0, fx.sent.Mtime).Add(-time.Hour)
				fx.write(t, "/f.txt", "the destination's older copy", older)
				require.True(t, runChild(t, "^TestSyncReplaceFaultChild$", "HUB_REPLACE_FAULT_ROOT="+dir,
					"HUB_REPLACE_FAULT_TARGET="+tdir, "HUB_REPLACE_FAULT_INDEX="+idx, "HUB_FAULT_POINT=sync.replace.exchanged@1"))
				set := "/" + filepath.Base(fsutil.PrivateName("xchg", "f.txt"))
				got, err := os.ReadFile(fx.abs(set))
				require.NoError(t, err, "the older file is under the exchange's private name")
				require.Equal(t, "the destination's older copy", string(got))
				aside, atName := "the destination's older copy", string(fx.data)
				switch saved {
				case "aside":
					aside = "saved after the kill, aside"
					fx.write(t, set, aside, time.Now())
				case "at the name":
					atName = "saved after the kill, at the name"
					require.NoError(t, os.WriteFile(fx.abs("/f.txt"), []byte(atName), 0)) // in place: the marker stays
				}
				msg := syncReplace(t, dir, tdir, index)
				if saved == "at the name" {
					require.Contains(t, msg, "kept the destination's newer copy", saved)
				} else {
					require.Contains(t, msg, "already up to date", saved)
				}
				require.Contains(t, msg, "the file an interrupted sync set aside is kept as f.txt.sync-kept-", saved)
				got, err = os.ReadFile(fx.abs("/f.txt"))
				require.NoError(t, err)
				require.Equal(t, atName, string(got), saved)
				kept, err := filepath.Glob(fx.abs("/f.txt.sync-kept-*"))
				require.NoError(t, err)
				require.Len(t, kept, 1, saved)
				got, err = os.ReadFile(kept[0])
				require.NoError(t, err)
				require.Equal(t, aside, string(got), saved)
				f, err := os.Open(fx.abs("/f.txt"))
				require.NoError(t, err)
				marked, _ := fsutil.Marked(f)
				require.NoError(t, f.Close())
				require.False(t, marked, "the file in place is not marked as temporary")
				requireNoTemp(t, dir)
			}
		})
	}
}

// TestStaleMarkerBesideAWritersTemp: a writer killed just after its rename
// leaves the plain marker on the stored file (fsutil.Commit), and another
// killed just after creating its temporary file leaves it empty and
// unmarked. A sync's rerun must not take them for a killed exchange (the
// audit's second case: the empty file was exchanged in and the user's
// file removed).
func TestStaleMarkerBesideAWritersTemp(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			dir, tdir := t.TempDir(), t.TempDir()
			fx := newTransferFixtureAt(t, dir, tdir, index)
			newer := time.Unix(0, fx.sent.Mtime).Add(time.Hour)
			fx.write(t, "/f.txt", "the user's newer file", newer)
			require.NoError(t, unix.Setxattr(fx.abs("/f.txt"), "user.hub.tmp", []byte("1"), 0))
			require.NoError(t, os.WriteFile(fx.abs("/"+fsutil.TmpPrefix+"f.txt"), nil, 0o600))
			msg, err := fx.receive(ReceiveInput{Step: "site_sync", Preference: "newest"}, fx.sent, nil)
			require.NoError(t, err)
			require.Equal(t, "kept the destination's newer copy", msg)
			fx.requireFile(t, "/f.txt", "the user's newer file", newer)
		})
	}
}

// TestRecallKeepsAUserSavesMtime: a recall wrote the data back, flushed,
// then set the file's original mtime by path: a save made by its user in
// between (here, during the flush) got the old mtime back, and so looked
// older than it is (a sync choosing the newest version would replace
// it). Now the mtime is restored only while the file is as the recall
// left it, under a lease. Untouched files still get their mtime back.
func TestRecallKeepsAUserSavesMtime(t *testing.T) {
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir, target := t.TempDir(), fsTarget(t)
			root := newRoot(t, dir, index)
			writeOld(t, filepath.Join(dir, "saved.txt"), []byte("the original data"))
			writeOld(t, filepath.Join(dir, "other.txt"), []byte("another file"))
			original, err := os.Stat(filepath.Join(dir, "other.txt"))
			require.NoError(t, err)
			paths := []string{"/saved.txt", "/other.txt"}
			res, err := Migrate(ctx, root, paths, target, "t", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)

			saved := time.Now().Truncate(time.Second).Add(time.Hour)
			flushSite = func(dir *os.File) error {
				abs := filepath.Join(dir.Name(), "saved.txt")
				require.NoError(t, os.WriteFile(abs, []byte("the user's newer work"), 0o644))
				require.NoError(t, os.Chtimes(abs, saved, saved))
				return fsutil.SyncFSOf(dir)
			}
			t.Cleanup(func() { flushSite = fsutil.SyncFSOf })
			res, err = Recall(ctx, root, paths, only("t", target), StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, paths)
			require.Contains(t, res[0].Message, "written since by its user")

			fi, err := os.Stat(filepath.Join(dir, "saved.txt"))
			require.NoError(t, err)
			require.True(t, saved.Equal(fi.ModTime()), "the save's mtime is %v, want %v", fi.ModTime(), saved)
			got, err := os.ReadFile(filepath.Join(dir, "saved.txt"))
			require.NoError(t, err)
			require.Equal(t, "the user's newer work", string(got))
			fi, err = os.Stat(filepath.Join(dir, "other.txt"))
			require.NoError(t, err)
			require.True(t, original.ModTime().Equal(fi.ModTime()), "the untouched file's mtime is restored")
		})
	}
}

// TestKilledSyncKeepsAStubBesideWithItsRecord: the destination's older
// file is a stub whose record the state index keeps by its path. A sync
// killed right after exchanging its download with the stub leaves the
// stub under the temporary name; the rerun keeps it beside the name, and
// its record goes with it: the kept stub still recalls. Before, the
// record stayed at the name, for another file, and the kept stub read as
// an empty resident file whose data no record led to.
func TestKilledSyncKeepsAStubBesideWithItsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	fx := newTransferFixtureAt(t, dir, tdir, true)
	const data = "the destination's older copy, migrated"
	fx.write(t, "/f.txt", data, time.Unix(0, fx.sent.Mtime).Add(-time.Hour))
	res, err := Migrate(ctx, fx.root, []string{"/f.txt"}, fx.target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.txt"})
	require.True(t, runChild(t, "^TestSyncReplaceFaultChild$", "HUB_REPLACE_FAULT_ROOT="+dir,
		"HUB_REPLACE_FAULT_TARGET="+tdir, "HUB_REPLACE_FAULT_INDEX=1", "HUB_FAULT_POINT=sync.replace.exchanged@1"))

	msg := syncReplace(t, dir, tdir, true)
	require.Contains(t, msg, "the file an interrupted sync set aside is kept as f.txt.sync-kept-")
	kept, err := filepath.Glob(fx.abs("/f.txt.sync-kept-*"))
	require.NoError(t, err)
	require.Len(t, kept, 1)
	p := "/" + filepath.Base(kept[0])
	root := newRoot(t, dir, true)
	res, err = Recall(ctx, root, []string{p}, only("t", fx.target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{p})
	got, err := os.ReadFile(kept[0])
	require.NoError(t, err)
	require.Equal(t, data, string(got))
}
