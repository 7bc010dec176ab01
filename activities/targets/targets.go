// Package targets holds the drivers for the external storage targets that
// the hub copies file data to (migration targets). Every driver implements
// Driver, so the site activities never care where the bytes end up.
package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// ErrNotFound is returned (wrapped) by Get and Stat when the object does not exist.
var ErrNotFound = errors.New("object not found")

// ErrInvalidKey is returned (wrapped) for keys that are empty, absolute,
// not in clean form or that would climb out of the target with "..".
var ErrInvalidKey = errors.New("invalid object key")

// Object describes one stored object.
type Object struct {
	// Key is the object key relative to the target (Config.Prefix removed).
	Key string
	// Size is the object size in bytes.
	Size int64
	// Mtime is when the object was last written on the target.
	Mtime time.Time
	// Checksum is the hex SHA-256 of the content, or "" when the driver
	// cannot tell without reading the object back.
	Checksum string
	// Unflushed: Checksum is what the object's writer recorded with its
	// bytes, which may not be on disk yet (a filesystem target's object
	// changed since the target's last complete flush; see Filesystem.Sync).
	// A crash can leave such an object with its checksum and size and
	// without its bytes, so whoever relies on it reads it back.
	Unflushed bool
	// NotDurable: an Unflushed object on a filesystem other hosts write
	// to (NFS and the like), which this host can neither flush nor read
	// from the disk (it reads the server's cache): to rely on it, write
	// it again (Put flushes what it writes there).
	NotDurable bool
}

// Driver is a storage target. Keys are slash-separated relative paths
// ("projects/a.txt"). Implementations are safe for concurrent use.
type Driver interface {
	// Put stores size bytes read from r under key, replacing any previous
	// object, so retrying a Put is harmless. A reader that returns fewer
	// or more than size bytes fails the Put and leaves no new object.
	// Wrap r in a ChecksummedReader when its SHA-256 is already known.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object for reading; the caller closes it.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes the object without reading its content.
	Stat(ctx context.Context, key string) (Object, error)
	// Delete removes the object; deleting an absent object is not an error.
	Delete(ctx context.Context, key string) error
	// List returns up to max objects whose key starts with prefix and sorts
	// after marker, in key order. nextMarker is "" on the last page and is
	// otherwise the marker for the following call.
	List(ctx context.Context, prefix, marker string, max int) (objs []Object, nextMarker string, err error)
}

// Syncer is implemented by drivers whose Put does not make data durable
// on its own. Callers that are about to destroy their local copy (migrate)
// call Sync once per batch instead of paying a flush on every object.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Locker is implemented by drivers whose storage can hold a lock that
// other processes see: the filesystem driver takes an flock on a file in
// the target folder (which NFSv4 and NFSv3 with a lock service share
// between hosts), the S3 driver writes a lock object with conditional
// requests and renews it while it holds it. TryLock takes the lock name
// or fails at once with ErrLocked. The lock ends with release, or with the
// process (an S3 lock expires a minute after its last renewal). held is
// ctx until release, or until the lock is lost, when it ends with
// ErrLockLost as its cause: what the lock protects is done with held.
type Locker interface {
	TryLock(ctx context.Context, name string) (held context.Context, release func(), err error)
}

// StillHeld is nil while the lock whose held context ctx is (TryLock) is
// surely held, and otherwise why not, wrapping ErrLockLost (or ctx's
// cause, once ctx is done). What a lock protects calls it right before
// each step it takes: it looks at what the lock's own watch may not have
// seen yet (a lock file removed and made again by another process, a
// host that slept past an S3 lock's expiry). A ctx that holds no lock is
// only looked at for being done.
func StillHeld(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if check, ok := ctx.Value(heldCheck{}).(func() error); ok {
		return check()
	}
	return nil
}

// heldCheck is the context key of a lock's check (StillHeld).
type heldCheck struct{}

// holding is the held context of a lock: ctx until lose, carrying check
// for StillHeld; a check that fails ends it with its error as the cause.
func holding(ctx context.Context, check func() error) (held context.Context, lose context.CancelCauseFunc) {
	held, lose = context.WithCancelCause(ctx)
	return context.WithValue(held, heldCheck{}, func() error {
		err := check()
		if err != nil {
			lose(err)
		}
		return err
	}), lose
}

// ErrLocked: another process holds the lock.
var ErrLocked = errors.New("held by another process")

// ErrLockLost: a lock held was taken over by another process, or could
// not be renewed in time (S3).
var ErrLockLost = errors.New("lock lost")

// Pinner is implemented by drivers that can tell the object a read opened
// from one stored under the same key after it, so that a caller that
// judged what it read takes away that object and never a newer one: the
// filesystem driver by the file's identity (device, inode, mtime, size),
// the S3 driver by the object's ETag.
type Pinner interface {
	// GetPinned is Get, and also returns pin, which names the object
	// opened. On a filesystem the pin is exact while the reader is open
	// (the inode cannot be reused).
	GetPinned(ctx context.Context, key string) (rc io.ReadCloser, pin string, err error)
	// MovePinned moves the object pin names from key to the key to, only
	// if key still holds it. When key holds another object (written since
	// the pin was taken) it fails with ErrChanged: key keeps what it
	// holds, and nothing is left at to. ErrNotFound: key holds nothing.
	MovePinned(ctx context.Context, key, to, pin string) error
}

// ErrChanged: the key no longer holds the object pinned (Pinner).
var ErrChanged = errors.New("rewritten since it was read")

// Creator is implemented by drivers that can write a small new object in
// place, without the temporary object and rename that make Put atomic. It
// is for markers whose existence is what counts: a crash may leave one
// empty or partial, so a reader must treat a body it cannot parse as
// unknown, never as absent.
type Creator interface {
	// Create writes data at key. It fails (and writes nothing) when
	// anything is already there, which the caller then replaces with Put.
	Create(ctx context.Context, key string, data []byte) error
}

// Grouper is implemented by drivers that can keep many small markers as
// names of one stored body (the filesystem driver: hard links to one
// file), which saves a file, an inode and a block per marker. The body is
// the group's entries, one line each; a reader finds a marker's entry in
// it by what the line says, so each line must name its marker.
type Grouper interface {
	// NewGroup starts an empty body with no name.
	NewGroup(ctx context.Context) (Group, error)
}

// Group is a body shared by markers (Grouper). It is used by one
// goroutine at a time.
type Group interface {
	// Add appends line (ending in a newline) to the body, then makes key
	// one of its names. It fails, making no name, when anything is at key
	// already, which the caller then replaces with Put; the line stays,
	// an entry no marker names.
	Add(ctx context.Context, key string, line []byte) error
	// Len is the number of lines the body has.
	Len() int
	Close() error
}

// Walker is a driver that visits everything under a prefix, in key order,
// more cheaply than pages of List would (the filesystem driver reads each
// folder once). As with pages, an object created after its folder was
// read may be missed, and one deleted meanwhile is skipped.
type Walker interface {
	Each(ctx context.Context, prefix string, fn func(Object) error) error
}

// ChecksummedReader carries content whose hex SHA-256 the caller has
// already computed. Drivers use it to skip a hashing pass and to have the
// bytes received checked against the sum: the filesystem driver fails a
// Put whose data does not match Sum, and the S3 driver signs Sum as the
// payload hash, which AWS S3 verifies (S3-compatible servers may not).
type ChecksummedReader struct {
	io.ReadSeeker
	Sum string
}

// Config selects and configures a driver. Fields that do not apply to
// the chosen storage type are ignored.
type Config struct {
	// StorageType is "filesystem" or "s3".
	StorageType string
	// MigrationTargetFolder is the directory holding the objects (filesystem).
	MigrationTargetFolder string
	// Endpoint is the S3 host name, or a full URL such as
	// "http://127.0.0.1:9000". Empty means AWS itself.
	Endpoint string
	// Port is appended to a bare Endpoint host when non-zero.
	Port int
	// Scheme is "http" or "https" (default) for a bare Endpoint host.
	Scheme string
	// Region is the S3 signing region; default "us-east-1".
	Region string
	// SSLVerify enables TLS certificate verification. The hub API's
	// ssl_verify defaults to true, as does a --target-config file of the
	// hub site commands; code building a Config sets it.
	SSLVerify bool
	// Bucket is the S3 bucket.
	Bucket string
	// AccessKeyID and SecretAccessKey are static S3 credentials; when
	// both are empty requests are sent unsigned.
	AccessKeyID, SecretAccessKey string
	// Prefix namespaces every key inside the target (a sub-folder or a key
	// prefix). Keys returned by List do not include it.
	Prefix string
	// Seen, for a filesystem target opened by a site, is the site's folder
	// remembering the target folders it has used: one that lost its
	// marker since (not mounted) is refused (filesystem_marker.go). Set by
	// the site itself, never sent (a workflow input must not choose where
	// a site writes).
	Seen string `json:"-"`
	// MustExist, for a filesystem target opened only to read it (by the
	// hub, or a maintenance command), refuses a folder that does not
	// exist instead of creating it: one beneath a volume not mounted,
	// made, would then be taken by a site's first use.
	MustExist bool `json:"-"`
}

var (
	_ Driver = (*Filesystem)(nil)
	_ Syncer = (*Filesystem)(nil)
	_ Driver = (*S3)(nil)
	_ Locker = (*Filesystem)(nil)
	_ Locker = (*S3)(nil)
	_ Pinner = (*Filesystem)(nil)
	_ Pinner = (*S3)(nil)
)

// openers maps a storage type to its constructor; azure and gcs drivers
// slot in here.
var openers = map[string]func(Config) (Driver, error){
	"filesystem": func(c Config) (Driver, error) { return NewFilesystem(c) },
	"s3":         func(c Config) (Driver, error) { return NewS3(c) },
}

// Open returns the driver for cfg.StorageType.
func Open(cfg Config) (Driver, error) {
	typ := strings.ToLower(strings.TrimSpace(cfg.StorageType))
	open, ok := openers[typ]
	if !ok {
		known := make([]string, 0, len(openers))
		for k := range openers {
			known = append(known, k)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("targets: unknown storage type %q (supported: %s)", cfg.StorageType, strings.Join(known, ", "))
	}
	d, err := open(cfg)
	if err != nil {
		return nil, fmt.Errorf("targets: open %s target: %w", typ, err)
	}
	return d, nil
}

// checkKey refuses keys that do not name a single object strictly inside
// the target; the filesystem driver relies on it to stay in its folder.
func checkKey(key string) error {
	switch {
	case key == "", key == ".", key == "..":
	case strings.HasPrefix(key, "/"), strings.HasPrefix(key, "../"):
	case strings.ContainsRune(key, 0):
	case path.Clean(key) != key:
	default:
		return nil
	}
	return fmt.Errorf("%w: %q", ErrInvalidKey, key)
}

// cleanPrefix turns a configured prefix into "a/b/" form ("" stays "").
func cleanPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	if err := checkKey(p); err != nil {
		return "", fmt.Errorf("prefix: %w", err)
	}
	return p + "/", nil
}

// copyBufs recycles copy buffers: a fresh 32 KiB buffer per io.Copy is a
// measurable share of the cost of copying many small files.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// copyBuffer is io.Copy with a pooled buffer.
func copyBuffer(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(dst, src, *bp)
}

// ctxReader stops a long copy soon after its context is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
