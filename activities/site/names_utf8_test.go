package site

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestANameThatIsNotUTF8IsNeverTakenForAnother: paths travel as JSON text
// (batch files, Temporal, the hub), which turns a byte that is not UTF-8
// into U+FFFD. A file named in Latin-1 ("caf\xe9.txt") beside one named
// with that character ("caf\uFFFD.txt") was batched under the second
// one's name, so a delete removed the file nobody selected (a reviewer's
// finding). Discovery now skips such paths, saying why, and batches the
// others; a folder so named is skipped with everything in it.
func TestANameThatIsNotUTF8IsNeverTakenForAnother(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(rel, data string) {
		abs := filepath.Join(dir, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(abs), 0o755))
		require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
	}
	write("caf\xe9.txt", "latin-1 name")
	write("caf\uFFFD.txt", "utf-8 name")
	write("d\xff/inner.txt", "in a folder whose name is not utf-8")
	a := &Activities{Root: newRoot(t, dir, false), Site: "s"}
	for _, mode := range []string{"recursive", "policy"} {
		in := DiscoverInput{JobID: 1, Run: 1, Mode: mode, Paths: []string{"/"}, BatchSize: 100,
			Rules: []RuleFilter{{Type: TypeFile}}}
		if mode == "policy" {
			in.JobID, in.Policy = 2, &PolicySelect{}
		}
		out, err := discover(t, a, in)
		require.NoError(t, err, mode)
		var batched []string
		for _, paths := range batchedPaths(t, a, in, out) {
			batched = append(batched, paths...)
		}
		require.Equal(t, []string{"/caf\uFFFD.txt"}, batched, mode)
		require.Len(t, out.Failed, 2, mode)
		for _, o := range out.Failed {
			require.Equal(t, OutcomeSkipped, o.State, mode)
			require.Contains(t, o.Message, "not valid UTF-8", mode)
		}
	}
}

// TestASyncNeverTurnsANameThatIsNotUTF8IntoAnother: the snapdiff manifest
// is JSON too. It kept a Latin-1 name as U+FFFD, and once the file was
// deleted (or renamed, as the skip's message asks) the next diff sent the
// deletion (or the move) of the other name: the destination deleted (or
// moved) its own file of that name (a reviewer's finding). Such names are
// kept out of the manifest, and a manifest of the earlier version is read
// without the names it may have changed.
func TestASyncNeverTurnsANameThatIsNotUTF8IntoAnother(t *testing.T) {
	t.Parallel()
	for _, rename := range []bool{false, true} {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "proj"), 0o755))
		latin := filepath.Join(dir, "proj", "caf\xe9.txt")
		require.NoError(t, os.WriteFile(latin, []byte("latin-1 named, source only"), 0o644))
		a := &Activities{Root: newRoot(t, dir, false), Site: "src"}
		job := int64(0)
		run := func() (entries []batchEntry, skipped []Outcome) {
			job++
			in := DiscoverInput{JobID: job, Run: 1, Mode: "snapdiff", Paths: []string{"/proj"}, BatchSize: 100,
				Rules: []RuleFilter{{Type: TypeFile}, {Type: TypeDirectory}}}
			out, err := discover(t, a, in)
			require.NoError(t, err)
			for _, b := range out.Batches {
				batch, err := readBatch(batchFile(a.jobDir(in.JobID, in.Run), b.Index, b.Attempt))
				require.NoError(t, err)
				entries = append(entries, batch...)
			}
			require.NoError(t, CommitSnapdiff(out.Snapdiff))
			return entries, out.Failed
		}
		entries, skipped := run()
		require.Len(t, entries, 1)
		require.Equal(t, "/proj", entries[0].Path, "the folder alone is sent")
		require.Len(t, skipped, 1)
		if rename {
			require.NoError(t, os.Rename(latin, filepath.Join(dir, "proj", "cafe.txt")))
		} else {
			require.NoError(t, os.Remove(latin))
		}
		entries, _ = run()
		for _, e := range entries {
			require.NotContains(t, e.Path+e.OldPath, "\uFFFD", "%+v", e)
		}
		if rename {
			require.Len(t, entries, 1)
			require.Equal(t, Created, entries[0].Change, "the renamed file is new to the sync")
		} else {
			require.Empty(t, entries)
		}
	}
}

// TestAnEarlierManifestIsReadWithoutTheNamesItMayHaveChanged: a manifest
// written before the hub left such names out (no "utf8" in its header)
// holds U+FFFD where a name was not UTF-8; its entries so named are left
// out (a file truly so named is found created again), never diffed as
// deleted. The version stays: a node of the earlier version, which
// ignores the field, still diffs against the manifest.
func TestAnEarlierManifestIsReadWithoutTheNamesItMayHaveChanged(t *testing.T) {
	t.Parallel()
	name := filepath.Join(t.TempDir(), "m")
	want := manifestHeader{Version: manifestVersion, Root: "/r", Path: "/p", UTF8: true}
	earlier := want
	earlier.UTF8 = false
	body := func(h manifestHeader) string {
		b, err := json.Marshal(h)
		require.NoError(t, err)
		return string(b) + "\n" + `{"p":"/p/caf\ufffd.txt","t":"file"}` + "\n" + `{"p":"/p/ok.txt","t":"file"}` + "\n"
	}
	require.NoError(t, os.WriteFile(name, []byte(body(earlier)), 0o600))
	old, err := readManifest(name, want, nil)
	require.NoError(t, err)
	require.Len(t, old, 1)
	require.Contains(t, old, "/p/ok.txt")
	require.NoError(t, os.WriteFile(name, []byte(body(want)), 0o600))
	old, err = readManifest(name, want, nil)
	require.NoError(t, err)
	require.Len(t, old, 2, "the current version's names are its own")
}
