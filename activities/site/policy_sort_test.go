package site

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// randomSelection returns n files with distinct paths in random order,
// whose keys are drawn by key: few distinct values (long runs of equal
// keys), or values over the whole int64 range (every byte of the radix
// sort, the sign included). The names start with up to 11 x's, so that
// many paths agree on more than 8 bytes after their shared prefix and some
// are prefixes of others.
func randomSelection(rng *rand.Rand, n int, key func() int64) []policyFile {
	files := make([]policyFile, n)
	for i, j := range rng.Perm(n) {
		files[i] = policyFile{path: fmt.Sprintf("/d%d/%s%d", rng.IntN(20), strings.Repeat("x", rng.IntN(12)), j),
			key: key(), size: rng.Int64N(1 << 20), state: Resident}
	}
	return files
}

// TestPolicySortedMatchesCompare: the selection's sort gives exactly the
// order of one comparison sort by (*policyScan).compare, for every order
// and direction, below and above the size where the radix sort starts,
// with many equal keys and with keys spread over the whole int64 range.
func TestPolicySortedMatchesCompare(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	keys := map[string]func() int64{
		"few":  func() int64 { return rng.Int64N(7) },
		"days": func() int64 { return 1_700_000_000_000_000_000 - rng.Int64N(730)*86_400_000_000_000 },
		"wide": func() int64 { return int64(rng.Uint64()) },
		"ends": func() int64 { return []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}[rng.IntN(5)] },
	}
	for _, n := range []int{0, 1, 2, 17, radixMin - 1, radixMin, radixMin + 1, 5000, 30_000} {
		for name, key := range keys {
			files := randomSelection(rng, n, key)
			for _, order := range []string{OrderAtime, OrderSize, OrderPath} {
				for _, reverse := range []bool{false, true} {
					p := &policyScan{orderBy: order, reverse: reverse}
					want := slices.Clone(files)
					slices.SortFunc(want, func(a, b policyFile) int { return p.compare(&a, &b) })
					got := (&selection{p: p, files: slices.Clone(files)}).sorted()
					require.Equal(t, want, got, "n=%d keys=%s order=%s reverse=%v", n, name, order, reverse)
				}
			}
		}
	}
}

// TestPolicySortedBoundedLarge: a bounded selection (a heap) large enough
// for the radix sort comes out as the prefix of one comparison sort that
// frees what it needs.
func TestPolicySortedBoundedLarge(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	files := randomSelection(rng, 20_000, func() int64 { return rng.Int64N(100) })
	for _, reverse := range []bool{false, true} {
		p := &policyScan{orderBy: OrderMtime, reverse: reverse}
		var total int64
		for _, f := range files {
			total += f.counted()
		}
		need := total / 2
		sel := &selection{p: p, bounded: true, need: need}
		for _, f := range files {
			sel.add(f)
		}
		require.Greater(t, len(sel.files), radixMin)
		require.Equal(t, boundedWant(p, files, need), sel.sorted(), "reverse=%v", reverse)
	}
}

// BenchmarkPolicySort sorts a selection like BenchmarkPolicyScan's: 60,000
// files by atime, whose ages are whole days over two years.
func BenchmarkPolicySort(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	files := make([]policyFile, 60_000)
	for i, n := range rng.Perm(len(files)) {
		files[i] = policyFile{path: fmt.Sprintf("/space/p%03d/s%d/f%06d.pdf", n/1000, n/100%10, n),
			key: 1_700_000_000_000_000_000 - int64(n*7919%730)*86_400_000_000_000, state: Resident}
	}
	p := &policyScan{orderBy: OrderAtime}
	for b.Loop() {
		(&selection{p: p, files: slices.Clone(files)}).sorted()
	}
}
