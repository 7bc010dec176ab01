package site

import (
	"bufio"
	"bytes"
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

// indexFile is the state index used where extended attributes are not
// available: a JSON-lines log under the root's .hub folder. Each line sets
// or (without "r") removes the record of one path; the last line for a
// path wins. The whole index is held in memory, and the log is rewritten
// when it holds mostly superseded lines.
const indexFile = "state.jsonl"

// compactMin is the number of lines below which the log is never
// rewritten: small logs are cheap to replay.
const compactMin = 4096

type indexLine struct {
	Path   string  `json:"p"`
	Record *Record `json:"r,omitempty"`
}

// index is shared by every Root of the same directory in this process, so
// that two activities never hold diverging copies. It assumes one site
// worker process per root.
type index struct {
	dir string // the root's .hub folder

	mu     sync.Mutex
	loaded bool
	recs   map[string]Record
	lines  int
	log    *os.File
}

var indexes sync.Map // root dir -> *index

func sharedIndex(rootDir string) *index {
	ix, _ := indexes.LoadOrStore(rootDir, &index{dir: filepath.Join(rootDir, hubDir)})
	return ix.(*index)
}

func (ix *index) path() string { return filepath.Join(ix.dir, indexFile) }

// load replays the log once; the caller holds mu.
func (ix *index) load() error {
	if ix.loaded {
		return nil
	}
	ix.recs = map[string]Record{}
	f, err := os.Open(ix.path())
	if errors.Is(err, fs.ErrNotExist) {
		ix.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l indexLine
		// A torn last line from a crash is skipped: its change never
		// completed, so the previous record still stands.
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Path == "" {
			continue
		}
		ix.lines++
		if l.Record == nil {
			delete(ix.recs, l.Path)
		} else {
			ix.recs[l.Path] = *l.Record
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	ix.loaded = true
	return nil
}

func (ix *index) get(rel string) (*Record, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.load(); err != nil {
		return nil, err
	}
	rec, ok := ix.recs[rel]
	if !ok {
		return nil, nil
	}
	return &rec, nil
}

func (ix *index) set(rel string, rec Record) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.load(); err != nil {
		return err
	}
	if err := ix.append(indexLine{Path: rel, Record: &rec}); err != nil {
		return err
	}
	ix.recs[rel] = rec
	return ix.maybeCompact()
}

func (ix *index) remove(rel string) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.load(); err != nil {
		return err
	}
	if _, ok := ix.recs[rel]; !ok {
		return nil
	}
	if err := ix.append(indexLine{Path: rel}); err != nil {
		return err
	}
	delete(ix.recs, rel)
	return ix.maybeCompact()
}

func (ix *index) removeTree(rel string) error {
	if rel == "" {
		return ix.removeMatching(func(string) bool { return true })
	}
	return ix.removeMatching(func(p string) bool { return p == rel || strings.HasPrefix(p, rel+"/") })
}

func (ix *index) removeMatching(match func(string) bool) error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.load(); err != nil {
		return err
	}
	for p := range ix.recs {
		if !match(p) {
			continue
		}
		if err := ix.append(indexLine{Path: p}); err != nil {
			return err
		}
		delete(ix.recs, p)
	}
	return ix.maybeCompact()
}

// append writes one line with a single write, so concurrent appends
// never interleave; the caller holds mu.
func (ix *index) append(l indexLine) error {
	if ix.log == nil {
		if err := os.MkdirAll(ix.dir, 0o755); err != nil {
			return fmt.Errorf("state index: %w", err)
		}
		f, err := os.OpenFile(ix.path(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("state index: %w", err)
		}
		ix.log = f
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := ix.log.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	ix.lines++
	return nil
}

// maybeCompact rewrites the log with one line per live record once more
// than half of its lines are superseded; the caller holds mu.
func (ix *index) maybeCompact() error {
	if ix.lines < compactMin || ix.lines < 2*len(ix.recs) {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for p, rec := range ix.recs {
		if err := enc.Encode(indexLine{Path: p, Record: &rec}); err != nil {
			return err
		}
	}
	if err := fsutil.WriteFile(ix.path(), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	if ix.log != nil {
		_ = ix.log.Close()
		ix.log = nil
	}
	ix.lines = len(ix.recs)
	return nil
}

func (ix *index) sync() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.log == nil {
		return nil
	}
	if err := ix.log.Sync(); err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	return nil
}
