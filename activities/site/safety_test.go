package site

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/thehub/hub/activities/targets"
)

// TestTwoSitesShareATarget is issue 8's first finding: two sites migrate
// the same relative path, with different content, to one target. Before
// content addressing the second upload replaced the first site's only
// copy, and its recall failed with the file gone.
func TestTwoSitesShareATarget(t *testing.T) {
	t.Parallel()
	for name, mk := range targetKinds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			target := mk(t)
			tf := only("archive", target)
			content := map[string]string{"site1": "site1 precious data", "site2": "other content of site2"}
			roots := map[string]*Root{}
			for site, data := range content {
				dir := t.TempDir()
				require.NoError(t, os.MkdirAll(filepath.Join(dir, "coll"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "coll", "a.txt"), []byte(data), 0o644))
				roots[site] = newRoot(t, dir, false)
			}
			for _, site := range []string{"site1", "site2"} {
				res, err := Migrate(ctx, roots[site], []string{"/coll/a.txt"}, target, "archive", StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, []string{"/coll/a.txt"})
			}
			for _, site := range []string{"site1", "site2"} {
				res, err := Recall(ctx, roots[site], []string{"/coll/a.txt"}, tf, StepOptions{DeleteOnRecall: true})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, []string{"/coll/a.txt"})
				got, err := os.ReadFile(filepath.Join(roots[site].Dir(), "coll", "a.txt"))
				require.NoError(t, err)
				require.Equal(t, content[site], string(got), site)
			}
		})
	}
}

// TestSharedContentOutlivesOneSite: two sites hold stubs of the same
// content (as send leaves them); one site deleting its file with its
// remote copies cannot take the other's data with it.
func TestSharedContentOutlivesOneSite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	tf := only("archive", target)
	var roots []*Root
	for range 2 {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "same.bin"), []byte("identical bytes"), 0o644))
		root := newRoot(t, dir, false)
		res, err := Migrate(ctx, root, []string{"/same.bin"}, target, "archive", StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeOK, []string{"/same.bin"})
		roots = append(roots, root)
	}
	require.Equal(t, 1, countContent(t, target), "one content, stored once")
	require.Equal(t, 2, countRefs(t, target))

	res, err := Delete(ctx, roots[0], []string{"/same.bin"}, tf, StepOptions{DeleteRemote: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/same.bin"})
	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Equal(t, CollectResult{Objects: 1}, cr, "still referenced by the other site")

	res, err = Recall(ctx, roots[1], []string{"/same.bin"}, tf, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/same.bin"})
	got, err := os.ReadFile(filepath.Join(roots[1].Dir(), "same.bin"))
	require.NoError(t, err)
	require.Equal(t, "identical bytes", string(got))
}

// TestCollectorRace plays the one interleaving where the collector acts on
// a stale listing: it moved content to the trash just before a writer
// recorded its reference and relied on the content. Recalls read from the
// trash meanwhile, and the next collection puts the content back instead
// of deleting it.
func TestCollectorRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := fsTarget(t)
	tf := only("archive", target)
	root, dir, rec := migrateOne(t, target, "payload")

	// The collector's view: no reference (hidden here), so the content goes
	// to the trash; the stub's reference is back by the time it moved.
	require.NoError(t, dropRef(ctx, target, *rec))
	cr, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, cr.Trashed)
	require.NoError(t, root.addRef(ctx, target, rec.Checksum, rec.Ref, "f.bin", rec.Ino))
	require.Zero(t, countContent(t, target))

	// Far enough in the future that the grace has passed: still kept,
	// because the reference is there again.
	cr, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
	require.NoError(t, err)
	require.Equal(t, CollectResult{Objects: 0, Restored: 1}, cr)
	require.Equal(t, 1, countContent(t, target))

	// And a stub whose content sits in the trash recalls from there.
	require.NoError(t, dropRef(ctx, target, *rec))
	_, err = Collect(ctx, target, CollectOptions{Grace: time.Hour})
	require.NoError(t, err)
	require.NoError(t, root.addRef(ctx, target, rec.Checksum, rec.Ref, "f.bin", rec.Ino))
	res, err := Recall(ctx, root, []string{"/f.bin"}, tf, StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	got, err := os.ReadFile(filepath.Join(dir, "f.bin"))
	require.NoError(t, err)
	require.Equal(t, "payload", string(got))
}

// migrateOne migrates a new site's one file, f.bin holding data, to the
// target "archive", and returns the site, its folder and the file's record.
func migrateOne(t *testing.T, target targets.Driver, data string) (*Root, string, *Record) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.bin"), []byte(data), 0o644))
	root := newRoot(t, dir, false)
	res, err := Migrate(context.Background(), root, []string{"/f.bin"}, target, "archive", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/f.bin"})
	_, rec, err := root.Stat("/f.bin")
	require.NoError(t, err)
	return root, dir, rec
}

// fileState is everything a failed or refused step must leave unchanged.
type fileState struct {
	data   string
	mtime  time.Time
	record string
}

func snapshot(t *testing.T, abs string) fileState {
	t.Helper()
	data, err := os.ReadFile(abs)
	require.NoError(t, err)
	fi, err := os.Lstat(abs)
	require.NoError(t, err)
	rec, _ := lgetxattr(abs, recordXattr)
	return fileState{data: string(data), mtime: fi.ModTime(), record: string(rec)}
}

// TestFailedRecallLeavesTheStub: a remote copy that is missing or wrong
// fails the recall and leaves stub, mtime and record exactly as they were;
// once the copy is right again the same recall succeeds.
func TestFailedRecallLeavesTheStub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	files := makeTree(t, dir, 1, func(int) int { return 50000 })
	p := sortedPaths(files)[0]
	abs := filepath.Join(dir, p)
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := Migrate(ctx, root, []string{p}, target, "t", StepOptions{StubSize: 1000})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{p})
	before := snapshot(t, abs)
	object := filepath.Join(tdir, filepath.FromSlash(contentKey(sha(files[p].data))))

	for name, damage := range map[string]func(){
		"wrong content": func() { require.NoError(t, os.WriteFile(object, []byte("other content entirely"), 0o644)) },
		"missing":       func() { require.NoError(t, os.Remove(object)) },
	} {
		damage()
		res, err := Recall(ctx, root, []string{p}, only("t", target), StepOptions{})
		require.NoError(t, err)
		requireAll(t, res, CodeFailed, []string{p})
		require.Equal(t, before, snapshot(t, abs), name)
		requireNoTempFiles(t, dir)
	}
	require.NoError(t, os.WriteFile(object, files[p].data, 0o644))
	res, err = Recall(ctx, root, []string{p}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{p})
	requireFiles(t, dir, files)
}

func requireNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*", "*", ".hub-tmp-*"))
	require.NoError(t, err)
	require.Empty(t, matches)
}

// TestTamperedRecordsAreRefused: the file's owner can write its
// user.hub.record attribute. A record edited to point at another file's
// content, copied from another stub, replayed after it was superseded, or
// never signed is refused with a clear error and nothing moves.
func TestTamperedRecordsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root := newRoot(t, dir, false)
	if root.StateBackend() != "xattr" {
		t.Fatalf("this test needs user extended attributes in %s", dir)
	}
	target := fsTarget(t)
	tf := only("t", target)
	write := func(name, data string) string {
		abs := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(abs, []byte(data), 0o644))
		return abs
	}
	victim, mine, other := write("victim.txt", "the victim's secret"), write("mine.txt", "mine"), write("other.txt", "x")
	res, err := Migrate(ctx, root, []string{"/victim.txt", "/mine.txt", "/other.txt"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/victim.txt", "/mine.txt", "/other.txt"})
	victimRec, err := lgetxattr(victim, recordXattr)
	require.NoError(t, err)
	refused := func(p, abs, why string) {
		t.Helper()
		before := snapshot(t, abs)
		res, err := Recall(ctx, root, []string{p}, tf, StepOptions{})
		require.NoError(t, err)
		require.Equal(t, CodeFailed, res[0].Code, why)
		require.Contains(t, res[0].Message, ErrUntrustedRecord.Error(), why)
		require.Contains(t, res[0].Message, "nothing was moved", why)
		require.Equal(t, before, snapshot(t, abs), why)
	}

	// Edited: my stub's record now names the victim's content.
	var rec Record
	mustRecord(t, mine, &rec)
	var vrec Record
	mustRecord(t, victim, &vrec)
	rec.Key, rec.Checksum, rec.Size = vrec.Key, vrec.Checksum, vrec.Size
	setRecord(t, mine, rec)
	refused("/mine.txt", mine, "edited")

	// Copied: the victim's whole record, signature and all, on my stub.
	require.NoError(t, lsetxattr(mine, recordXattr, victimRec))
	require.NoError(t, os.Chtimes(mine, time.Unix(0, vrec.Mtime), time.Unix(0, vrec.Mtime)))
	refused("/mine.txt", mine, "copied")

	// Unsigned: a record in the legacy form.
	rec = vrec
	rec.Sig, rec.Ref = "", ""
	setRecord(t, other, rec)
	refused("/other.txt", other, "unsigned")

	// Replayed: the victim recalls with delete_on_recall (its reference
	// goes), then the old stub and record are put back.
	res, err = Recall(ctx, root, []string{"/victim.txt"}, tf, StepOptions{DeleteOnRecall: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/victim.txt"})
	require.NoError(t, os.Truncate(victim, 0))
	require.NoError(t, lsetxattr(victim, recordXattr, victimRec))
	require.NoError(t, os.Chtimes(victim, time.Unix(0, vrec.Mtime), time.Unix(0, vrec.Mtime)))
	refused("/victim.txt", victim, "replayed")
}

func mustRecord(t *testing.T, abs string, rec *Record) {
	t.Helper()
	b, err := lgetxattr(abs, recordXattr)
	require.NoError(t, err)
	require.NoError(t, jsonUnmarshal(b, rec))
}

// setRecord writes a record as a user would: no signing.
func setRecord(t *testing.T, abs string, rec Record) {
	t.Helper()
	b, err := jsonMarshal(rec)
	require.NoError(t, err)
	require.NoError(t, unix.Lsetxattr(abs, recordXattr, b, 0))
}

func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestLostRecordKeyIsNotReplaced: a site whose record key file went
// missing (deleted by hand, left out of a restore) made a new key at the
// next step: every stub then refused to recall, and once the old key was
// put back, the records signed with the new one did. Now no key is made
// while the site has signed records; steps fail saying what to do, and
// the key put back makes everything recall.
func TestLostRecordKeyIsNotReplaced(t *testing.T) {
	t.Parallel()
	for name, index := range stateBackends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			data := []byte("migrated before the key went missing")
			writeOld(t, filepath.Join(dir, "a.txt"), data)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.txt"), []byte("to migrate meanwhile"), 0o644))
			target := fsTarget(t)
			res, err := Migrate(ctx, newRoot(t, dir, index), []string{"/a.txt"}, target, "t", StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/a.txt"})

			keyFile := filepath.Join(dir, hubDir, recordKeyFile)
			key, err := os.ReadFile(keyFile)
			require.NoError(t, err)
			require.NoError(t, os.Remove(keyFile))
			reopen := func() *Root { // as a new worker process would
				signers.Delete(dir)
				return newRoot(t, dir, index)
			}
			root := reopen()
			res, err = Recall(ctx, root, []string{"/a.txt"}, only("t", target), StepOptions{})
			require.NoError(t, err)
			require.Equal(t, CodeFailed, res[0].Code)
			require.Contains(t, res[0].Message, "put the key back from a backup")
			res, err = Migrate(ctx, root, []string{"/b.txt"}, target, "t", StepOptions{})
			require.NoError(t, err)
			require.Equal(t, CodeFailed, res[0].Code)
			require.NoFileExists(t, keyFile)

			require.NoError(t, os.WriteFile(keyFile, key, 0o600))
			root = reopen()
			res, err = Recall(ctx, root, []string{"/a.txt"}, only("t", target), StepOptions{})
			require.NoError(t, err)
			require.Equal(t, CodeOK, res[0].Code, res[0].Message)
			got, err := os.ReadFile(filepath.Join(dir, "a.txt"))
			require.NoError(t, err)
			require.Equal(t, data, got)
		})
	}
}

// TestAdoptRecords: records from before signing are refused until an
// operator adopts them; then the files recall from their legacy copies.
func TestAdoptRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	root := newRoot(t, dir, false)
	if root.StateBackend() != "xattr" {
		t.Fatalf("this test needs user extended attributes in %s", dir)
	}
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	// What the old layout left: the object under the file's path, an empty
	// stub and an unsigned record.
	data := []byte("legacy data")
	require.NoError(t, os.WriteFile(filepath.Join(tdir, "old.txt"), data, 0o644))
	abs := filepath.Join(dir, "old.txt")
	require.NoError(t, os.WriteFile(abs, nil, 0o644))
	mtime := time.Unix(1600000000, 0)
	require.NoError(t, os.Chtimes(abs, mtime, mtime))
	setRecord(t, abs, Record{State: Migrated, Size: int64(len(data)), Mtime: mtime.UnixNano(), Target: "t",
		Key: "old.txt", Checksum: sha(data)})

	res, err := Recall(ctx, root, []string{"/old.txt"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code)
	require.Contains(t, res[0].Message, "adopt-records")

	// Unsigned records no earlier hub wrote (a user's, say): one naming a
	// reference, as only signed records do, and ones without the copy's
	// key or a valid SHA-256. They are never signed.
	forged := map[string]Record{
		"ref.txt":   {Target: "t", Key: "old.txt", Checksum: sha(data), Ref: "r1"},
		"nosum.txt": {Target: "t", Key: "old.txt"},
		"short.txt": {Target: "t", Key: "old.txt", Checksum: "a"},
		"nokey.txt": {Target: "t", Checksum: sha(data)},
	}
	for name, rec := range forged {
		rec.State, rec.Size, rec.Mtime = Migrated, int64(len(data)), mtime.UnixNano()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		require.NoError(t, os.Chtimes(filepath.Join(dir, name), mtime, mtime))
		setRecord(t, filepath.Join(dir, name), rec)
	}

	ar, err := AdoptRecords(ctx, root, true)
	require.NoError(t, err)
	require.Equal(t, AdoptResult{Adopted: 1, Refused: len(forged)}, ar)
	ar, err = AdoptRecords(ctx, root, false)
	require.NoError(t, err)
	require.Equal(t, AdoptResult{Adopted: 1, Refused: len(forged)}, ar)
	for name := range forged {
		res, err := Recall(ctx, root, []string{"/" + name}, only("t", target), StepOptions{DeleteOnRecall: true})
		require.NoError(t, err)
		require.Equal(t, CodeFailed, res[0].Code, name)
		require.Contains(t, res[0].Message, "unsigned", name)
	}
	res, err = Recall(ctx, root, []string{"/old.txt"}, only("t", target), StepOptions{DeleteOnRecall: true})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/old.txt"})
	got, err := os.ReadFile(abs)
	require.NoError(t, err)
	require.Equal(t, data, got)
	require.FileExists(t, filepath.Join(tdir, "old.txt"), "legacy copies are never deleted by the hub")
}

// TestLegacyRefMarkers: a target written before markers moved from
// refs/<sha256>/<ref> to refs/<aa>/<sha256>.<ref> keeps working. The old
// marker keeps its content through collections past the grace period, a
// stub that relies on it recalls, an audit sees it as the site's own, and
// dropping the reference (recall with delete_on_recall) removes it, after
// which the content is collected.
func TestLegacyRefMarkers(t *testing.T) {
	t.Parallel()
	for name, mk := range targetKinds {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			target := mk(t)
			tf := only("archive", target)
			root, dir, rec := migrateOne(t, target, "old payload")

			// Where an earlier version wrote it.
			rc, err := target.Get(ctx, refKey(rec.Checksum, rec.Ref))
			require.NoError(t, err)
			body, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			require.NoError(t, target.Put(ctx, legacyRefKey(rec.Checksum, rec.Ref), bytes.NewReader(body), int64(len(body))))
			require.NoError(t, target.Delete(ctx, refKey(rec.Checksum, rec.Ref)))
			require.Equal(t, 1, countRefs(t, target))

			for range 2 {
				cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
				require.NoError(t, err)
				require.Equal(t, CollectResult{Objects: 1}, cr, "an old marker keeps its content")
			}
			later := func() time.Time { return time.Now().Add(DefaultAuditMinAge + time.Hour) }
			ar, err := AuditRefs(ctx, root, map[string]targets.Driver{"archive": target}, AuditOptions{Now: later, Drop: true})
			require.NoError(t, err)
			require.Equal(t, AuditResult{Records: 1, Refs: 1, Ours: 1, Leaked: []LeakedRef{}, UnreadablePaths: []string{}}, ar)

			res, err := Recall(ctx, root, []string{"/f.bin"}, tf, StepOptions{DeleteOnRecall: true})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/f.bin"})
			got, err := os.ReadFile(filepath.Join(dir, "f.bin"))
			require.NoError(t, err)
			require.Equal(t, "old payload", string(got))
			require.Zero(t, countRefs(t, target), "the old marker is dropped with the record")
			cr, err := Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
			require.NoError(t, err)
			require.Equal(t, CollectResult{Objects: 1, Trashed: 1, Deleted: 1}, cr)
		})
	}
}

// TestContentNames: only a lowercase hex SHA-256 names content, and the
// key functions answer for any string instead of panicking.
func TestContentNames(t *testing.T) {
	sum := sha([]byte("x"))
	for name, want := range map[string]bool{
		sum: true, "": false, "a": false, sum[:63]: false, sum + "0": false,
		strings.ToUpper(sum): false, "." + sum[1:]: false, "g" + sum[1:]: false, "/" + sum[1:]: false,
	} {
		require.Equal(t, want, validSum(name), "%q", name)
	}
	require.Equal(t, "objects/"+sum[:2]+"/"+sum, contentKey(sum))
	require.Equal(t, "refs/"+sum[:2]+"/"+sum+".r", refKey(sum, "r"))
	for _, bad := range []string{"", "a"} {
		require.NotPanics(t, func() { _, _ = contentKey(bad), refKey(bad, "r") }, "%q", bad)
	}
}

// TestReceiveRefusesMalformedChecksums: a sent file whose SHA-256 is
// missing or malformed (a record from before checksums, or a damaged
// message) fails alone with a clear message, as a stub and as data, and
// leaves the destination's file at that path as it was; nothing panics.
// Without the check, "" and "a" panicked, and "zz" replaced the file with
// a stub that no recall could ever verify.
func TestReceiveRefusesMalformedChecksums(t *testing.T) {
	t.Parallel()
	dir, tdir := t.TempDir(), t.TempDir()
	a := &Activities{Root: newRoot(t, dir, false), Site: "dst"}
	data := []byte("the sent content")
	sum := putContent(t, tdir, data)
	own := filepath.Join(dir, "own.txt")
	require.NoError(t, os.WriteFile(own, []byte("the destination's own"), 0o644))
	spec := TargetSpec{Name: "t", Config: targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir}}
	sent := SentFile{Path: "/own.txt", Type: TypeFile, Target: "t", Key: contentKey(sum), Size: int64(len(data)),
		Mtime: time.Now().UnixNano()}
	var files []SentFile
	for _, bad := range []string{"", "a", "zz", strings.ToUpper(sum), sum[:63]} {
		f := sent
		f.Checksum = bad
		files = append(files, f)
	}
	for _, hydrate := range []bool{false, true} {
		out := receive(t, a, ReceiveInput{JobID: 1, Step: "send", Files: files, Hydrate: hydrate, Targets: []TargetSpec{spec}})
		require.Len(t, out.Outcomes, len(files))
		for _, o := range out.Outcomes {
			require.Equal(t, OutcomeFailure, o.State)
			require.Contains(t, o.Message, "without a valid SHA-256")
		}
		got, err := os.ReadFile(own)
		require.NoError(t, err)
		require.Equal(t, "the destination's own", string(got))
	}
	sent.Checksum = sum
	out := receive(t, a, ReceiveInput{JobID: 2, Step: "send", Files: []SentFile{sent}, Hydrate: true, Targets: []TargetSpec{spec}})
	require.Equal(t, OutcomeSuccess, out.Outcomes[0].State, out.Outcomes[0].Message)
	got, err := os.ReadFile(own)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// TestParseRefKey reads marker keys of both layouts and nothing else.
func TestParseRefKey(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for key, want := range map[string][2]string{
		refKey(sum, "r1"):       {sum, "r1"},
		legacyRefKey(sum, "r1"): {sum, "r1"},
		"refs/cd/" + sum + ".r": {}, // under the wrong folder
		"refs/ab/" + sum:        {}, // no reference name
		"refs/ab/x/y":           {}, // too deep
		"refs/" + sum:           {}, // no folder
		"objects/ab/" + sum:     {}, // not a marker
		"refs/ab/" + sum + ".":  {}, // empty reference name
		"refs//r1":              {}, // empty folder
		"refs/ab/ab.r1":         {}, // content name too short
	} {
		s, r, ok := parseRefKey(key)
		require.Equal(t, want != [2]string{}, ok, key)
		require.Equal(t, want, [2]string{s, r}, key)
	}
}

// TestCollectManyContents collects contents spread over every two-digit
// prefix, some kept by a marker of the current layout, some by an old one,
// some by both and some by none, with more than a listing page (1,000) of
// markers under one prefix: exactly the unreferenced ones go to the trash,
// a marker written afterwards brings its content back, and only the rest
// is deleted once the grace has passed.
func TestCollectManyContents(t *testing.T) {
	t.Parallel()
	for name, mk := range targetKinds {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			target := mk(t)
			put := func(key, body string) {
				require.NoError(t, target.Put(ctx, key, strings.NewReader(body), int64(len(body))))
			}
			var kept, unkept []string
			for i := range 700 {
				body := fmt.Sprintf("content %d", i)
				sum := sha([]byte(body))
				put(contentKey(sum), body)
				switch i % 4 {
				case 0:
					put(refKey(sum, "r1"), "{}")
				case 1:
					put(legacyRefKey(sum, "r1"), "{}")
				case 2:
					put(refKey(sum, "r1"), "{}")
					put(legacyRefKey(sum, "r2"), "{}")
				case 3:
					unkept = append(unkept, sum)
					continue
				}
				kept = append(kept, sum)
			}
			// Files nobody should have put there, which the collector
			// leaves alone: names too short to shard, names where content
			// would be but that are no SHA-256 (one of them with a
			// marker), and an operator's note in the trash, older than
			// any grace.
			junk := []string{"objects/a", "objects/zz/short", "objects/zz/zzz", "objects/ab/AB" + strings.Repeat("0", 62),
				"trash/b", "trash/notes.txt", "trash/zzz", "refs/c", "refs/ab/x", "refs/zz/zzz.r"}
			for _, key := range junk {
				put(key, "junk")
			}
			// 1,100 markers of other contents under one prefix: the
			// prefix's markers take two pages.
			for i := range 1100 {
				put(refKey(kept[0][:2]+fmt.Sprintf("%062x", i), "r"), "{}")
			}
			cr, err := Collect(ctx, target, CollectOptions{Grace: time.Hour})
			require.NoError(t, err)
			require.Equal(t, CollectResult{Objects: 700, Trashed: len(unkept)}, cr)
			for _, sum := range kept {
				_, err := target.Stat(ctx, contentKey(sum))
				require.NoError(t, err, "kept content %s stays", sum)
			}
			for _, sum := range unkept {
				_, err := target.Stat(ctx, trashKey(sum))
				require.NoError(t, err, "unkept content %s is in the trash", sum)
			}

			put(legacyRefKey(unkept[len(unkept)-1], "late"), "{}")
			cr, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
			require.NoError(t, err)
			require.Equal(t, CollectResult{Objects: len(kept), Restored: 1, Deleted: len(unkept) - 1}, cr)
			_, err = target.Stat(ctx, contentKey(unkept[len(unkept)-1]))
			require.NoError(t, err, "the content of the late marker is back")
			require.Equal(t, len(kept)+1+4, countContent(t, target), "the kept contents, the restored one and four junk files")
			for _, key := range junk {
				_, err := target.Stat(ctx, key)
				require.NoError(t, err, "%s is left alone", key)
			}
		})
	}
}

// lateMarker writes a marker for victim the moment the collector deletes
// the content from objects/ (after copying it to the trash): a writer
// whose reference came after the collector had read that prefix's markers.
type lateMarker struct {
	targets.Driver
	victim string
	done   bool
}

func (l *lateMarker) Delete(ctx context.Context, key string) error {
	if key == contentKey(l.victim) && !l.done {
		l.done = true
		if err := l.Put(ctx, refKey(l.victim, "late"), strings.NewReader("{}"), 2); err != nil {
			return err
		}
	}
	return l.Driver.Delete(ctx, key)
}

// lateWalker is a lateMarker whose collector visits the target's folders
// once each (Filesystem.Each) instead of by pages of List.
type lateWalker struct{ *lateMarker }

func (l lateWalker) Each(ctx context.Context, prefix string, fn func(targets.Object) error) error {
	return l.Driver.(targets.Walker).Each(ctx, prefix, fn)
}

// TestCollectMarkerDuringPass: a marker written while the collector goes
// through the content, for a prefix whose markers it has already read,
// keeps its content even with no grace at all, because the trash pass
// reads the markers again before it deletes anything; whether the
// collector lists by pages or visits each folder once.
func TestCollectMarkerDuringPass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, wrap := range map[string]func(*lateMarker) targets.Driver{
		"pages": func(l *lateMarker) targets.Driver { return l },
		"each":  func(l *lateMarker) targets.Driver { return lateWalker{l} },
	} {
		t.Run(name, func(t *testing.T) {
			target := fsTarget(t)
			body := "written before its marker"
			sum := sha([]byte(body))
			require.NoError(t, target.Put(ctx, contentKey(sum), strings.NewReader(body), int64(len(body))))
			late := &lateMarker{Driver: target, victim: sum}
			cr, err := Collect(ctx, wrap(late), CollectOptions{Grace: time.Nanosecond})
			require.NoError(t, err)
			require.True(t, late.done)
			require.Equal(t, CollectResult{Objects: 1, Trashed: 1, Restored: 1}, cr)
			rc, err := target.Get(ctx, contentKey(sum))
			require.NoError(t, err)
			got, err := io.ReadAll(rc)
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			require.Equal(t, body, string(got))
		})
	}
}

// TestHardLinkedFiles: a file with several names (hard links) is one
// file. Releasing its data through one name would leave a stub under
// every name, where the site's state index (which keeps records by path)
// knows only one; and deleting one name with its remote copy would free
// the copy that the stub under another name still needs.
func TestHardLinkedFiles(t *testing.T) {
	t.Parallel()
	for _, index := range []bool{false, true} {
		t.Run(map[bool]string{false: "xattr state", true: "index state"}[index], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			files := map[string][]byte{}
			for _, p := range []string{"/a/x", "/c/z", "/g/h"} {
				data := bytes.Repeat([]byte(p), 2500)
				require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, p), data, 0o644))
				files[p] = data
			}
			link := func(from, to string) {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(to)), 0o755))
				require.NoError(t, os.Link(filepath.Join(dir, from), filepath.Join(dir, to)))
			}
			link("/a/x", "/b/y")
			root := newRoot(t, dir, index)
			target := fsTarget(t)
			drivers := func(string) (targets.Driver, error) { return target, nil }
			read := func(p string) []byte {
				b, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err)
				return b
			}

			// Migrating a linked file copies it but does not release it.
			res, err := Migrate(ctx, root, []string{"/a/x", "/c/z", "/g/h"}, target, "t", StepOptions{StubSize: 16})
			require.NoError(t, err)
			require.Equal(t, CodeFailed, res[0].Code, "%v", res)
			require.Contains(t, res[0].Message, "hard links")
			require.Equal(t, CodeOK, res[1].Code, "%v", res)
			require.Equal(t, CodeOK, res[2].Code, "%v", res)
			require.Equal(t, files["/a/x"], read("/a/x"))
			require.Equal(t, files["/a/x"], read("/b/y"))
			_, rec, err := root.Stat("/a/x")
			require.NoError(t, err)
			require.Equal(t, Premigrated, rec.State)

			// A name a user gives a stub afterwards outlives the delete of
			// the first name (a file, or a folder holding it), remote copy
			// included: the copy stays. Where records are kept by path,
			// the other name has none, so the delete is refused.
			link("/c/z", "/c/w")
			link("/g/h", "/e/v")
			res, err = Delete(ctx, root, []string{"/c/z", "/g"}, drivers, StepOptions{DeleteRemote: true})
			require.NoError(t, err)
			for _, r := range res {
				if index {
					require.Equal(t, CodeFailed, r.Code, "%v", res)
					require.Contains(t, r.Message, "1 stubs here have other names")
				} else {
					require.Equal(t, CodeOK, r.Code, "%v", res)
					require.Contains(t, r.Message, "1 kept for files that still have other names")
				}
			}
			if index {
				res, err = Recall(ctx, root, []string{"/c/z", "/g/h"}, drivers, StepOptions{})
				require.NoError(t, err)
				requireAll(t, res, CodeOK, []string{"/c/z", "/g/h"})
				require.Equal(t, files["/c/z"], read("/c/w"))
				require.Equal(t, files["/g/h"], read("/e/v"))
				res, err = Delete(ctx, root, []string{"/c/z"}, drivers, StepOptions{})
				require.NoError(t, err)
				require.Equal(t, CodeOK, res[0].Code, "a resident file with other names may go: %v", res)
				return
			}
			for range 2 {
				_, err = Collect(ctx, target, CollectOptions{Grace: time.Nanosecond})
				require.NoError(t, err)
			}
			for _, p := range []string{"/c/z", "/g/h"} {
				_, err = target.Stat(ctx, contentKey(sha(files[p])))
				require.NoError(t, err, "the copy of %s, which another name needs, was collected", p)
			}
			// The record lives in the file, under every name.
			res, err = Recall(ctx, root, []string{"/c/w", "/e/v"}, drivers, StepOptions{})
			require.NoError(t, err)
			requireAll(t, res, CodeOK, []string{"/c/w", "/e/v"})
			require.Equal(t, files["/c/z"], read("/c/w"))
			require.Equal(t, files["/g/h"], read("/e/v"))
		})
	}
}

// TestLinkMadeDuringMigration: a user gives a file a second name after
// migrate has marked it for release and before it truncates it (the
// worker is killed at that instant, then the step runs again, as a
// retried activity does). The release must still see the second name.
func TestLinkMadeDuringMigration(t *testing.T) {
	t.Parallel()
	dir, tdir := t.TempDir(), t.TempDir()
	data := bytes.Repeat([]byte("linked later "), 1000)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), data, 0o644))
	cmd := exec.Command(os.Args[0], "-test.run=^TestLinkFaultChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HUB_FAULT_POINT=migrate.marked@1", "HUB_FAULT_CHILD_ROOT="+dir, "HUB_FAULT_CHILD_TARGET="+tdir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "%s", out)

	require.NoError(t, os.Link(filepath.Join(dir, "x"), filepath.Join(dir, "y")))
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := Migrate(context.Background(), root, []string{"/x"}, target, "t", StepOptions{StubSize: 16})
	require.NoError(t, err)
	require.Equal(t, CodeFailed, res[0].Code, "%v", res)
	require.Contains(t, res[0].Message, "hard links")
	for _, name := range []string{"x", "y"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, data, got, name)
	}
	_, rec, err := root.Stat("/y")
	require.NoError(t, err)
	require.Equal(t, Premigrated, rec.State)
	require.Empty(t, rec.Pending)
}

// TestLinkFaultChild is the worker TestLinkMadeDuringMigration kills.
func TestLinkFaultChild(t *testing.T) {
	dir := os.Getenv("HUB_FAULT_CHILD_ROOT")
	if dir == "" || os.Getenv("HUB_FAULT_POINT") == "" {
		return
	}
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: os.Getenv("HUB_FAULT_CHILD_TARGET")})
	require.NoError(t, err)
	_, err = Migrate(context.Background(), newRoot(t, dir, false), []string{"/x"}, target, "t", StepOptions{StubSize: 16})
	require.NoError(t, err)
}

// TestRewrittenObjectIsNotTrusted: content on a filesystem target that
// was rewritten in place (same size, other bytes) no longer reports its
// checksum; a migration of another file with that content reads it back,
// finds it wrong, and uploads the content again instead of releasing the
// file onto it.
func TestRewrittenObjectIsNotTrusted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	data := []byte(strings.Repeat("the only copy ", 1000))
	for _, name := range []string{"a.bin", "b.bin"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	root := newRoot(t, dir, false)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := Migrate(ctx, root, []string{"/a.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a.bin"})

	object := filepath.Join(tdir, filepath.FromSlash(contentKey(sha(data))))
	require.NoError(t, os.WriteFile(object, make([]byte, len(data)), 0o644))
	res, err = Migrate(ctx, root, []string{"/b.bin"}, target, "t", StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/b.bin"})
	require.NotContains(t, res[0].Message, "already had", "the rewritten object was trusted")

	// Both stubs recall their data: the upload mended the shared object.
	res, err = Recall(ctx, root, []string{"/a.bin", "/b.bin"}, only("t", target), StepOptions{})
	require.NoError(t, err)
	requireAll(t, res, CodeOK, []string{"/a.bin", "/b.bin"})
	for _, name := range []string{"a.bin", "b.bin"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, data, got, name)
	}
}
