package site

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendBatchEntryIsEncodingJSON: the hand-written batch line is the
// one encoding/json writes, whatever the path holds.
func TestAppendBatchEntryIsEncodingJSON(t *testing.T) {
	t.Parallel()
	paths := []string{"/a.txt", "/", "/with space/x", `/q"uote`, `/back\slash`, "/tab\there", "/nl\nx", "/<html>&", "/été/ü",
		"/bad\xffutf8", "/line\u2028sep", "/\x00nul", "/\x7fdel", "/日本語"}
	for _, p := range paths {
		for _, e := range []batchEntry{
			{Path: p, Type: TypeFile, Size: 42},
			{Path: p, Type: TypeDirectory, State: Migrated, Size: -1, Change: "renamed", OldPath: p + "/old"},
			{Path: p, Type: TypeFile, Size: 7, Change: Deleted, Mtime: 1764000000123456789},
		} {
			var want bytes.Buffer
			if err := json.NewEncoder(&want).Encode(e); err != nil {
				t.Fatal(err)
			}
			if got := appendBatchEntry(nil, &e); string(got) != want.String() {
				t.Errorf("%q:\n got %s\nwant %s", p, got, want.String())
			}
		}
	}
}

// FuzzAppendBatchEntry: any path encodes as encoding/json encodes it.
func FuzzAppendBatchEntry(f *testing.F) {
	f.Add("/a\"b<c>", int64(7))
	f.Fuzz(func(t *testing.T, p string, size int64) {
		e := batchEntry{Path: p, Type: TypeFile, Size: size}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(e); err != nil {
			t.Fatal(err)
		}
		if got := appendBatchEntry(nil, &e); string(got) != want.String() {
			t.Fatalf("%q: got %s want %s", p, got, want.String())
		}
	})
}
