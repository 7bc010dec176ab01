package site

import (
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
