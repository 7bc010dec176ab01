package site

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// The sort of a policy scan's selection runs after the walk, on the scan's
// critical path, so it avoids the general comparison where it can: files
// ordered by a key (a time or the size) are sorted by that key alone with a
// radix sort over a compact (key, index) array, which moves 16 bytes per
// file instead of a policyFile and compares nothing, and only the runs of
// files with equal keys are then sorted by path. The order is exactly the
// one (*policyScan).compare gives.

// radixMin is the selection size from which the radix sort pays: below it
// the histograms cost more than a comparison sort.
const radixMin = 1024

// ranked is a selected file in the radix sort: its order key mapped to an
// unsigned number whose ascending order is the scan order of the keys, and
// the file's index in selection.files.
type ranked struct {
	u uint64
	i int
}

// rankOf maps a key to an unsigned number in scan order: flipping the sign
// bit orders int64s as uint64s; flipping every bit reverses that order.
func (p *policyScan) rankOf(key int64) uint64 {
	u := uint64(key) ^ 1<<63
	if p.reverse {
		u = ^u
	}
	return u
}

// sorted returns the selection in scan order.
func (s *selection) sorted() []policyFile {
	switch {
	case len(s.files) < radixMin:
		slices.SortFunc(s.files, func(a, b policyFile) int { return s.p.compare(&a, &b) })
	case s.p.orderBy == OrderPath:
		s.sortedByPath()
	default:
		s.sortedByKey()
	}
	return s.files
}

// sortedByKey sorts a selection ordered by a key: a radix sort by key, then
// a sort by path of each run of equal keys, in two halves at once (split
// where a run ends), then the files put in that order. The arrays sorted
// hold no pointers, which the garbage collector need not scan.
func (s *selection) sortedByKey() {
	n := len(s.files)
	r := make([]ranked, n)
	for i := range s.files {
		r[i] = ranked{u: s.p.rankOf(s.files[i].key), i: i}
	}
	r = radixSort(r, make([]ranked, n))
	mid := n / 2
	for mid < n && r[mid].u == r[mid-1].u {
		mid++
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.sortRuns(r[:mid]) })
	s.sortRuns(r[mid:])
	wg.Wait()
	s.permute(r)
}

// sortRuns sorts by path each run of r with equal keys.
func (s *selection) sortRuns(r []ranked) {
	for lo := 0; lo < len(r); {
		hi := lo + 1
		for hi < len(r) && r[hi].u == r[lo].u {
			hi++
		}
		if hi-lo > 1 {
			s.sortByPath(r[lo:hi])
		}
		lo = hi
	}
}

// sortByPath sorts r by the paths of its files. The paths of a run of equal
// keys share a long prefix (the space and its folders), where a string
// comparison spends its time, so the 8 bytes after that prefix replace the
// key in r as one big-endian number (padded with zeros) and a comparison
// reads the paths only when those numbers are equal. A number orders as its
// bytes do, and a zero pad orders a path before the paths it is a prefix
// of, so a smaller number is a smaller path.
func (s *selection) sortByPath(r []ranked) {
	first := s.files[r[0].i].path
	shared := len(first)
	for _, x := range r[1:] {
		path := s.files[x.i].path
		if len(path) >= shared && path[:shared] == first[:shared] {
			continue // most paths: one comparison of the whole prefix
		}
		k := 0
		for k < min(shared, len(path)) && path[k] == first[k] {
			k++
		}
		shared = k
	}
	for j := range r {
		rest := s.files[r[j].i].path[shared:]
		var abbr uint64
		for k := range 8 {
			abbr <<= 8
			if k < len(rest) {
				abbr |= uint64(rest[k])
			}
		}
		r[j].u = abbr
	}
	slices.SortFunc(r, func(a, b ranked) int {
		if c := cmp.Compare(a.u, b.u); c != 0 {
			return c
		}
		return strings.Compare(s.files[a.i].path[shared:], s.files[b.i].path[shared:])
	})
}

// permute puts s.files in the order of r, in place: the file at j is the
// one at r[j].i. It follows each cycle of the permutation, marking the
// places it filled in r.
func (s *selection) permute(r []ranked) {
	for j := range r {
		if r[j].i < 0 {
			continue
		}
		held := s.files[j]
		k := j
		for {
			from := r[k].i
			r[k].i = -1
			if from == j {
				s.files[k] = held
				break
			}
			s.files[k] = s.files[from]
			k = from
		}
	}
}

// radixSort sorts r by u, stably, one byte at a time from the lowest, with
// buf (as long as r) as the other side of each pass; it returns whichever
// of the two holds the result. A byte every key shares (the high bytes of
// times a few years apart, the low bytes of times whole seconds apart)
// needs no pass, and the histograms of all eight bytes are counted in one
// read of r.
func radixSort(r, buf []ranked) []ranked {
	var counts [8][256]int
	for _, x := range r {
		for b := range 8 {
			counts[b][byte(x.u>>(8*b))]++
		}
	}
	for b := range 8 {
		c := &counts[b]
		if c[byte(r[0].u>>(8*b))] == len(r) {
			continue
		}
		// Turn the counts into each byte value's first place in buf.
		at := 0
		for v := range c {
			at, c[v] = at+c[v], at
		}
		for _, x := range r {
			v := byte(x.u >> (8 * b))
			buf[c[v]] = x
			c[v]++
		}
		r, buf = buf, r
	}
	return r
}

// sortedByPath sorts a selection ordered by path: in two halves at once,
// then merged, as every comparison is a string comparison.
func (s *selection) sortedByPath() {
	order := func(a, b policyFile) int { return s.p.compare(&a, &b) }
	n := len(s.files)
	lo, hi := s.files[:n/2], s.files[n/2:]
	var wg sync.WaitGroup
	wg.Go(func() { slices.SortFunc(lo, order) })
	slices.SortFunc(hi, order)
	wg.Wait()
	out := make([]policyFile, 0, n)
	for len(lo) > 0 && len(hi) > 0 {
		if order(lo[0], hi[0]) <= 0 {
			out, lo = append(out, lo[0]), lo[1:]
		} else {
			out, hi = append(out, hi[0]), hi[1:]
		}
	}
	s.files = append(append(out, lo...), hi...)
}
