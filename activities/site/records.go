package site

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/thehub/hub/activities/fsutil"
)

// ErrUntrustedRecord is returned (wrapped, with the reason) for a migration
// record the site did not write for this file: edited, copied from another
// file, replayed after it was superseded, or written before records were
// signed. Nothing is moved for such a file.
var ErrUntrustedRecord = errors.New("migration record not trusted")

// recordKeyFile, in the root's .hub folder, holds the key the site signs
// its records with: 32 random bytes readable only by the worker's user.
// The nodes of a site share the root, and so the key.
const recordKeyFile = "record.key"

// signDomain separates record signatures from any other use of the key.
const signDomain = "hub migration record v1\x00"

// signer signs and checks records with the site's key, created on first use.
type signer struct {
	dir string // the root's .hub folder
	mu  sync.Mutex
	key []byte
}

var signers sync.Map // root dir -> *signer

func sharedSigner(rootDir string) *signer {
	s, _ := signers.LoadOrStore(rootDir, &signer{dir: filepath.Join(rootDir, hubDir)})
	return s.(*signer)
}

// loadKey reads the key, creating it if the site has none yet. Creation
// links a complete temporary file into place, so concurrent first uses on
// two nodes agree on one key and nobody reads half a key.
func (s *signer) loadKey() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	name := filepath.Join(s.dir, recordKeyFile)
	key, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		if signedBefore(s.dir) {
			return nil, fmt.Errorf("site record key %s: %w", name, ErrRecordKeyLost)
		}
		key, err = createKey(s.dir, name)
	}
	if err != nil {
		return nil, fmt.Errorf("site record key: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("site record key %s: %d bytes, want 32", name, len(key))
	}
	s.key = key
	return key, nil
}

// ErrRecordKeyLost: the site's record key is gone, but the site wrote
// records with it. A new key would make every one of them untrusted (every
// stub refusing to recall), and records signed with it untrusted in turn
// once the old key is put back, so none is made.
var ErrRecordKeyLost = errors.New("missing, but this site has records signed with it: put the key back from a backup of the site's .hub folder (with a new key every migrated file would refuse to recall); a site starting over without records removes .hub/state and .hub/xattr-folders first")

// signedBefore reports whether the site in whose .hub folder dir is shows
// signs of records signed with a key: a signed one in the state index (the
// unsigned records of earlier versions, imported, wait for a key to be
// adopted), or a folder marked as holding one (a folder is marked before
// its first record is signed). A site of a version before the marks,
// keeping records in attributes only, shows none.
func signedBefore(dir string) bool {
	found := errors.New("found")
	err := filepath.WalkDir(filepath.Join(dir, indexDir), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			return nil
		}
		if l, err := readRecordFile(p); err == nil && l.Record != nil && l.Record.Sig != "" {
			return found
		}
		return nil
	})
	if err == found {
		return true
	}
	marks, _ := os.ReadDir(filepath.Join(dir, folderMarksDir))
	for _, e := range marks {
		if n := e.Name(); n != marksComplete && n != cleanFoldersDir && !strings.HasPrefix(n, ".") {
			return true
		}
	}
	return false
}

func createKey(dir, name string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := createFile(name, key); errors.Is(err, fs.ErrExist) {
		return os.ReadFile(name) // another node made it first
	} else if err != nil {
		return nil, err
	}
	// Durable before anything is signed with it: a key lost to a power
	// failure would make every record signed with it untrusted.
	if err := fsutil.SyncDir(dir); err != nil {
		return nil, err
	}
	// Recorded now, so that a copy of the site made before its first
	// audit is known for one too; if this fails, the first audit that
	// drops a reference records it.
	if o, err := originOf(name); err == nil {
		_ = writeKeyOrigin(dir, o)
	}
	return key, nil
}

// createFile makes the file name holding data, complete and flushed,
// unless one exists (fs.ErrExist): the data is written to a temporary
// file linked into place, so concurrent makers on the nodes of a site
// agree on the first one.
func createFile(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".hub-tmp-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp.Name(), name)
}

func (s *signer) mac(rec Record) ([]byte, error) {
	key, err := s.loadKey()
	if err != nil {
		return nil, err
	}
	rec.Sig = ""
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signDomain))
	m.Write(b)
	return m.Sum(nil), nil
}

// sign sets rec.Sig.
func (s *signer) sign(rec *Record) error {
	sum, err := s.mac(*rec)
	if err != nil {
		return err
	}
	rec.Sig = base64.RawStdEncoding.EncodeToString(sum)
	return nil
}

// check verifies that the site wrote rec.
func (s *signer) check(rec Record) error {
	if rec.Sig == "" {
		return fmt.Errorf("%w: it is unsigned (written by a hub before records were signed, or by someone else); "+
			"an operator can adopt such records with `hub site adopt-records`", ErrUntrustedRecord)
	}
	got, err := base64.RawStdEncoding.DecodeString(rec.Sig)
	if err != nil {
		return fmt.Errorf("%w: its signature is malformed", ErrUntrustedRecord)
	}
	want, err := s.mac(rec)
	if err != nil {
		return err
	}
	if !hmac.Equal(got, want) {
		return fmt.Errorf("%w: its signature does not match (edited, or written by another site)", ErrUntrustedRecord)
	}
	return nil
}

// trust checks a record read for the file with inode ino before
// any step acts on it: the site's signature, and that it was written for
// this very file. A record of the index can be stale for a file since
// replaced under the same name; that is not tampering and is reported by
// stale, the file being resident.
func (s *stateStore) trust(rec *Record, ino uint64, btime func() int64) (stale bool, err error) {
	if err := s.signer.check(*rec); err != nil {
		return false, err
	}
	sameIno := rec.Ino == 0 || rec.Ino == ino
	sameBirth := rec.Btime == 0 || rec.Btime == btime()
	switch {
	case sameIno && sameBirth:
		return false, nil
	case !rec.fromXattr:
		return true, nil
	}
	return false, fmt.Errorf("%w: it was written for another file (copied with its attributes)", ErrUntrustedRecord)
}

// refID names the reference a record of the file fi (born at btime) and
// content sum holds on the target. It is derived rather than random so
// that a step retried after a crash reuses the reference it may already
// have written, and it is keyed so that nobody else can name (and so drop)
// a site's reference. A file on a filesystem mounted beneath the root
// adds its device: inode numbers repeat across filesystems, and birth
// times are 0 where the filesystem keeps none, so two copies of one tree
// on two mounts would share references, and the drop of one (a file
// migrated again, recalled) would leave the other's stub without its. A
// device that changes across a reboot makes a retried step write another
// reference, and the first one leaks (an audit drops it).
func (r *Root) refID(fi fs.FileInfo, btime int64, sum string) (string, error) {
	key, err := r.state.signer.loadKey()
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "hub reference v1\x00%d\x00%d\x00%s", inode(fi), btime, sum)
	if dev := device(fi); dev != r.dev {
		fmt.Fprintf(m, "\x00device %d", dev)
	}
	return hex.EncodeToString(m.Sum(nil)[:16]), nil
}
