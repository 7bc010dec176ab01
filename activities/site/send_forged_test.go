package site

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestASendNeverCarriesARecordItsUserForged: a send describes each file
// to the destination by its record's key and checksum, which the
// destination fetches and checks. The file's user can write its record
// (an attribute of the file) between the send's premigrate and that read:
// an unsigned record naming another content (whose SHA-256 the user knows,
// someone else's file on the shared target), or another file's signed
// record copied over. The send read the record unchecked and the
// destination received the other content (a reviewer's finding). The path
// now fails, naming the record untrusted, and nothing is described.
func TestASendNeverCarriesARecordItsUserForged(t *testing.T) {
	// Not parallel: afterSendsPremigrate is the package's.
	secret := []byte("someone else's content, whose sha256 the user knows")
	forgeries := map[string]func(t *testing.T, dir, abs string) []byte{
		"unsigned": func(t *testing.T, _, abs string) []byte {
			fi, err := os.Stat(abs)
			require.NoError(t, err)
			forged, err := json.Marshal(Record{State: Premigrated, Size: fi.Size(), Mtime: fi.ModTime().UnixNano(),
				Target: "t", Key: contentKey(sha(secret)), Checksum: sha(secret), Ref: "r"})
			require.NoError(t, err)
			return forged
		},
		"another file's": func(t *testing.T, dir, _ string) []byte {
			b := make([]byte, 4096)
			n, err := unix.Lgetxattr(filepath.Join(dir, "secret.txt"), recordXattr, b)
			require.NoError(t, err)
			return b[:n]
		},
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			ctx := context.WithValue(context.Background(), stepReporterKey{},
				&stepReporter{ctx: context.Background(), beat: func(context.Context, ...any) {}, every: time.Hour})
			dir := t.TempDir()
			target := fsTarget(t)
			root := newRoot(t, dir, false)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "secret.txt"), secret, 0o600))
			res, err := Premigrate(ctx, root, []string{"/secret.txt"}, target, "t", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/secret.txt"})

			abs := filepath.Join(dir, "f.txt")
			require.NoError(t, os.WriteFile(abs, bytes.Repeat([]byte("u"), len(secret)), 0o644))
			forged := forge(t, dir, abs)
			afterSendsPremigrate = func() { require.NoError(t, unix.Lsetxattr(abs, recordXattr, forged, 0)) }
			t.Cleanup(func() { afterSendsPremigrate = nil })
			a := &Activities{Root: root, Site: "src"}
			ds := newDriverSet(nil, nil)
			ds.opened["t"] = target
			outs, err := a.sendChunk(StepInput{Targets: []TargetSpec{{Name: "t"}}}, ds)(ctx, []batchEntry{{Path: "/f.txt", Type: TypeFile, Change: Created}})
			require.NoError(t, err)
			require.Len(t, outs, 1)
			require.Equal(t, OutcomeFailure, outs[0].State, "%+v", outs[0])
			require.Nil(t, outs[0].Sent)
			require.Contains(t, outs[0].Message, ErrUntrustedRecord.Error())
		})
	}
}
