//go:build !linux

package site

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// direntReader reads the entries of one open folder with
// os.File.ReadDir; only Linux parses getdents64(2) records itself.
type direntReader struct {
	d   *os.File
	des []os.DirEntry // entries of the last fill not yet returned
	err error         // what the last ReadDir returned with its entries
}

// newDirentReader reads the folder d, which must stay open while the
// reader is used.
func newDirentReader(d *os.File) direntReader { return direntReader{d: d} }

func (r *direntReader) close() { r.des = nil }

// fill reads the next entries, and reports false once the folder has none
// left. An error ReadDir returns with some entries is reported by the
// fill after them.
func (r *direntReader) fill() (bool, error) {
	if r.err != nil {
		return false, r.err
	}
	des, err := r.d.ReadDir(1024)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	r.des, r.err = des, err
	if len(des) == 0 {
		return false, err
	}
	return true, nil
}

// count is how many entries the last fill left.
func (r *direntReader) count() int { return len(r.des) }

// next returns the next entry of the last fill: its name and its mode
// type (see entryType). ok is false once they are all returned.
func (r *direntReader) next() (name string, mode fs.FileMode, ok bool) {
	if len(r.des) == 0 {
		return "", 0, false
	}
	de := r.des[0]
	r.des = r.des[1:]
	return de.Name(), de.Type(), true
}

// entryType is the type of an entry of mode type mode.
func (r *direntReader) entryType(_ string, mode fs.FileMode) (string, error) {
	return typeOf(mode), nil
}
