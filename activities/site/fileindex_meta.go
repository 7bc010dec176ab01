package site

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/thehub/hub/internal/fault"
)

// User metadata and tags are kept with the file, in extended attributes:
// each field as user.hub.meta.<key> (the value as is), the tags as one
// attribute, user.hub.tags (a JSON array, sorted). They are the user's,
// unsigned, and travel with the file on send and site_sync. Where the
// filesystem has no user xattrs they live in the site's file index only
// (docs/search-analytics.md).
const (
	metaXattrPrefix = "user.hub.meta."
	tagsXattr       = "user.hub.tags"
)

// Limits of user metadata, checked by the API and again by the site.
const (
	MaxMetaValue = 1024 // bytes of a value
	MaxMetaKeys  = 64   // fields and tags on one file, each
)

var metaKeyRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// ValidMetaKey tells whether k can name a metadata field ("tags" names
// the tags wherever fields are listed, so it is no field's name).
func ValidMetaKey(k string) bool { return k != "tags" && metaKeyRE.MatchString(k) }

// ValidTag tells whether t can be a tag: 1 to 64 printable characters,
// no comma (lists of tags are written with commas).
func ValidTag(t string) bool {
	if t == "" || len(t) > 64 || !utf8.ValidString(t) || strings.ContainsRune(t, ',') {
		return false
	}
	for _, r := range t {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Meta is a file's user metadata.
type Meta struct {
	Fields map[string]string `json:"metadata,omitempty"`
	Tags   []string          `json:"tags,omitempty"`
}

func (m Meta) empty() bool { return len(m.Fields) == 0 && len(m.Tags) == 0 }

// MetaChange changes a file's metadata: Set fields to values (a nil
// value removes the field), add and remove tags.
type MetaChange struct {
	Set        map[string]*string `json:"set,omitempty"`
	AddTags    []string           `json:"add_tags,omitempty"`
	RemoveTags []string           `json:"remove_tags,omitempty"`
}

// Validate checks keys, values and tags; the error names what is wrong.
func (c MetaChange) Validate() error {
	for k, v := range c.Set {
		if !ValidMetaKey(k) {
			return fmt.Errorf("metadata key %q: letters, digits, _ . - (at most 64, not starting with . or -)", k)
		}
		if v != nil && (len(*v) > MaxMetaValue || !utf8.ValidString(*v)) {
			return fmt.Errorf("metadata %q: a value is UTF-8 text of at most %d bytes", k, MaxMetaValue)
		}
	}
	for _, t := range append(slices.Clone(c.AddTags), c.RemoveTags...) {
		if !ValidTag(t) {
			return fmt.Errorf("tag %q: 1 to 64 printable characters without a comma", t)
		}
	}
	return nil
}

// apply returns m changed by c.
func (c MetaChange) apply(m Meta) (Meta, error) {
	out := Meta{Fields: map[string]string{}}
	for k, v := range m.Fields {
		out.Fields[k] = v
	}
	for k, v := range c.Set {
		if v == nil {
			delete(out.Fields, k)
		} else {
			out.Fields[k] = *v
		}
	}
	tags := map[string]bool{}
	for _, t := range m.Tags {
		tags[t] = true
	}
	for _, t := range c.AddTags {
		tags[t] = true
	}
	for _, t := range c.RemoveTags {
		delete(tags, t)
	}
	for t := range tags {
		out.Tags = append(out.Tags, t)
	}
	slices.Sort(out.Tags)
	if len(out.Fields) > MaxMetaKeys || len(out.Tags) > MaxMetaKeys {
		return m, fmt.Errorf("a file holds at most %d metadata fields and %d tags", MaxMetaKeys, MaxMetaKeys)
	}
	if len(out.Fields) == 0 {
		out.Fields = nil
	}
	return out, nil
}

// readXattrMeta reads the metadata kept in abs's attributes; ok is false
// where the filesystem has none.
func readXattrMeta(abs string) (m Meta, ok bool, err error) {
	names, err := llistxattr(abs)
	if errors.Is(err, errXattrUnsupported) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	for _, n := range names {
		switch {
		case n == tagsXattr:
			b, err := lgetxattr(abs, n)
			if err != nil {
				continue // removed meanwhile
			}
			var tags []string
			if json.Unmarshal(b, &tags) == nil {
				for _, t := range tags {
					if ValidTag(t) {
						m.Tags = append(m.Tags, t)
					}
				}
			}
		case strings.HasPrefix(n, metaXattrPrefix):
			k := strings.TrimPrefix(n, metaXattrPrefix)
			if !ValidMetaKey(k) {
				continue
			}
			b, err := lgetxattr(abs, n)
			if err != nil {
				continue
			}
			if m.Fields == nil {
				m.Fields = map[string]string{}
			}
			m.Fields[k] = string(b)
		}
	}
	slices.Sort(m.Tags)
	return m, true, nil
}

// writeXattrMeta makes abs's attributes hold exactly m (old holds what
// they held). ok is false where the filesystem keeps no user attributes.
func writeXattrMeta(abs string, old, m Meta) (ok bool, err error) {
	set := func(name string, v []byte) error { return lsetxattr(abs, name, v) }
	for k, v := range m.Fields {
		if ov, had := old.Fields[k]; had && ov == v {
			continue
		}
		if err := set(metaXattrPrefix+k, []byte(v)); err != nil {
			return notSupported(err)
		}
		fault.Point("meta.xattr")
	}
	for k := range old.Fields {
		if _, keep := m.Fields[k]; !keep {
			if err := lremovexattr(abs, metaXattrPrefix+k); err != nil && !errors.Is(err, errNoAttr) {
				return notSupported(err)
			}
			fault.Point("meta.xattr")
		}
	}
	if !slices.Equal(old.Tags, m.Tags) {
		if len(m.Tags) == 0 {
			if err := lremovexattr(abs, tagsXattr); err != nil && !errors.Is(err, errNoAttr) {
				return notSupported(err)
			}
		} else {
			b, _ := json.Marshal(m.Tags)
			if err := set(tagsXattr, b); err != nil {
				return notSupported(err)
			}
		}
	}
	return true, nil
}

// notSupported turns "no user attributes here" (or none we may write: a
// symlink, a file of another user) into ok=false.
func notSupported(err error) (bool, error) {
	if errors.Is(err, errXattrUnsupported) || errors.Is(err, fs.ErrPermission) {
		return false, nil
	}
	return false, err
}
