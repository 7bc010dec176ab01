package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/thehub/hub/models"
)

// Limits on the text a client may store, shared by the hub API (Bind)
// and the C+J API (api/cj), and documented in docs/input-limits.md.
// Lengths count characters (Unicode code points), as Django does.
const (
	// MaxNameLen bounds names and the names that refer to records:
	// sites, spaces, users, queues, workflows, C+J items.
	MaxNameLen = models.MaxNameLen
	// MaxLabelLen bounds labels, titles, e-mail addresses and object keys.
	MaxLabelLen = 255
	// MaxTextLen bounds free text: descriptions, comments, messages, rules.
	MaxTextLen = 4096
	// MaxPathLen bounds file system paths and globs (Linux's PATH_MAX).
	MaxPathLen = 4096
	// MaxStringLen bounds every other string: URLs, regular expressions,
	// keys and certificates, values of free-form settings.
	MaxStringLen = 64 << 10
)

// fieldLimits gives the fields whose strings have a tighter limit than
// MaxStringLen, by JSON name. A string inside a list or an object takes
// the limit of the innermost field that holds it.
var fieldLimits = map[string]int{
	"name": MaxNameLen, "username": MaxNameLen, "first_name": MaxNameLen, "last_name": MaxNameLen,
	"site": MaxNameLen, "workflow": MaxNameLen, "jobtype": MaxNameLen, "queue": MaxNameLen,
	"preferred_queue": MaxNameLen, "destination_site": MaxNameLen, "destination_queue": MaxNameLen,
	"shortcode": MaxNameLen, "pool": MaxNameLen, "pool_name": MaxNameLen, "space": MaxNameLen,
	"label": MaxLabelLen, "friendly_name": MaxLabelLen, "title": MaxLabelLen, "email": MaxLabelLen,
	"key": MaxLabelLen, "hosts": MaxTextLen, "clients": MaxLabelLen, "valid_users": MaxLabelLen,
	"description": MaxTextLen, "desc": MaxTextLen, "comment": MaxTextLen, "message": MaxTextLen,
	"summary": MaxTextLen, "rule": MaxTextLen,
	"path": MaxPathLen, "paths": MaxPathLen, "mountpoint": MaxPathLen, "directories": MaxPathLen,
	"include": MaxPathLen, "exclude": MaxPathLen, "destination_path": MaxPathLen,
	"migration_target_folder": MaxPathLen, "default_space_location": MaxPathLen, "db_backup_dir": MaxPathLen,
}

// FieldLimit returns the most characters a string of the named field may
// hold.
func FieldLimit(name string) int {
	if n, ok := fieldLimits[name]; ok {
		return n
	}
	return MaxStringLen
}

// Messages of the text checks, shared by both APIs.
const (
	msgNUL     = "Null characters are not allowed."
	msgTooLong = "Ensure this field has no more than %d characters."
	msgKey     = "Ensure every key has at most %d characters and no null character."
	msgUTF8    = "The text is not valid UTF-8."

	msgNumberRange = "A valid number is required: at most 1.7976931348623157e308 in size."
)

// CheckText walks v, a value decoded from JSON, and reports every string
// no API stores: one holding a NUL character (no database keeps NUL in
// text) or longer than the limit of its field (FieldLimit), and every
// object key longer than MaxLabelLen or holding NUL. field is v's own
// name ("" for a whole body); report gets the dotted path of each
// offending field (paths[2], profile.timezone) and a message.
func CheckText(field string, v any, report func(field, msg string)) {
	checkText(field, field, v, report)
}

// checkText is CheckText with the name whose limit applies: the
// innermost object key above v.
func checkText(path, name string, v any, report func(field, msg string)) {
	switch x := v.(type) {
	case string:
		switch limit := FieldLimit(name); {
		case strings.IndexByte(x, 0) >= 0:
			report(path, msgNUL)
		case len(x) > limit && utf8.RuneCountInString(x) > limit:
			report(path, fmt.Sprintf(msgTooLong, limit))
		}
	case json.Number:
		// Stored as given, a number no float64 holds (1e999) could not
		// be read back: every later read of the record failed.
		if f, err := x.Float64(); err != nil || math.IsInf(f, 0) {
			report(path, msgNumberRange)
		}
	case []any:
		for i, e := range x {
			checkText(path+"["+strconv.Itoa(i)+"]", name, e, report)
		}
	case map[string]any:
		for k, e := range x {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if strings.IndexByte(k, 0) >= 0 || utf8.RuneCountInString(k) > MaxLabelLen {
				report(printable(sub, MaxLabelLen), fmt.Sprintf(msgKey, MaxLabelLen))
				continue
			}
			checkText(sub, k, e, report)
		}
	}
}

// printable keeps a field path fit to echo back: at most n characters,
// without NUL.
func printable(s string, n int) string {
	s = strings.ReplaceAll(s, "\x00", "")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

// JSONTextError says why a JSON body holds text no API accepts: invalid
// UTF-8, or a \u escape of half a surrogate pair, which decoders would
// silently replace with U+FFFD. It returns "" for a body that is fine.
func JSONTextError(body []byte) string {
	if !utf8.Valid(body) {
		return "The request body is not valid UTF-8."
	}
	if loneSurrogate(body) {
		return "The request body holds a \\u escape of an unpaired UTF-16 surrogate, which is no character."
	}
	return ""
}

// loneSurrogate reports whether JSON text holds \uD800–\uDFFF not forming
// a high-low pair. Backslashes occur only inside strings, so skipping each
// escaped character is enough to tell \\uD800 (text) apart.
func loneSurrogate(body []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(body) || body[i] != '\\' || body[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i+1 < len(body); i++ {
		if body[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok:
			i++ // some other escape: skip the escaped character
		case r >= 0xDC00 && r <= 0xDFFF:
			return true // a low half without its high half
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := hex4(i + 6)
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// URLTextError is the first text of a URL no API accepts: a path or a
// query parameter holding NUL or invalid UTF-8. Param is "" for the path.
type URLTextError struct {
	Param   string
	NUL     bool
	Message string
}

// CheckURLText returns what is wrong with u's path or query, or nil.
func CheckURLText(u *url.URL) *URLTextError {
	switch p := u.Path; {
	case strings.IndexByte(p, 0) >= 0:
		return &URLTextError{NUL: true, Message: msgNUL}
	case !utf8.ValidString(p):
		return &URLTextError{Message: "The path is not valid UTF-8."}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// Query() drops what it cannot parse; what remains is checked.
		q = u.Query()
	}
	for name, values := range q {
		for _, v := range append(values, name) {
			switch {
			case strings.IndexByte(v, 0) >= 0:
				return &URLTextError{Param: printable(strings.ToValidUTF8(name, "?"), MaxLabelLen), NUL: true, Message: msgNUL}
			case !utf8.ValidString(v):
				return &URLTextError{Param: printable(strings.ToValidUTF8(name, "?"), MaxLabelLen), Message: msgUTF8}
			}
		}
	}
	return nil
}

// decodeAny decodes JSON text into plain values, numbers as json.Number.
func decodeAny(body []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
