package auth

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/models"
)

// numberedReads is a read function whose n-th read answers Auth = n,
// after wait(n) returns.
type numberedReads struct {
	started atomic.Int64
	wait    func(n int64) error
}

func (nr *numberedReads) read(context.Context) (models.Generations, error) {
	n := nr.started.Add(1)
	if nr.wait != nil {
		if err := nr.wait(n); err != nil {
			return models.Generations{}, err
		}
	}
	return models.Generations{Auth: n}, nil
}

// waitingFor returns once some request waits for the next read.
func waitingFor(t *testing.T, r *sharedReads) {
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.next != nil
	}, 5*time.Second, time.Millisecond)
}

// Requests that come while a read runs do not take its answer (it began
// before them and can miss a commit they must see): they share the next.
func TestSharedReadsNeverStartedBeforeTheRequest(t *testing.T) {
	release := make(chan struct{})
	nr := &numberedReads{wait: func(n int64) error {
		if n == 1 {
			<-release
		}
		return nil
	}}
	r := newSharedReads(nr.read)
	first := make(chan models.Generations)
	go func() {
		g, err := r.get(context.Background())
		require.NoError(t, err)
		first <- g
	}()
	require.Eventually(t, func() bool { return nr.started.Load() == 1 }, 5*time.Second, time.Millisecond)

	later := make(chan models.Generations, 3)
	for range 3 {
		go func() {
			g, err := r.get(context.Background())
			require.NoError(t, err)
			later <- g
		}()
	}
	waitingFor(t, r)
	close(release)
	require.Equal(t, int64(1), (<-first).Auth)
	for range 3 {
		require.Greater(t, (<-later).Auth, int64(1), "a later request took the read that started before it")
	}
}

// Under load every answer comes from a read that started after its
// request, and the requests share reads.
func TestSharedReadsUnderLoad(t *testing.T) {
	nr := &numberedReads{wait: func(int64) error { time.Sleep(100 * time.Microsecond); return nil }}
	r := newSharedReads(nr.read)
	const clients, each = 8, 300
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range each {
				before := nr.started.Load()
				g, err := r.get(context.Background())
				if err != nil || g.Auth <= before {
					t.Errorf("answer of read %d for a request that came after read %d had started (%v)", g.Auth, before, err)
					return
				}
			}
		})
	}
	wg.Wait()
	reads := nr.started.Load()
	t.Logf("%d requests, %d reads", clients*each, reads)
	require.Less(t, reads*2, int64(clients*each), "requests that came together did not share reads")
}

// When the read a request waited for fails, it reads for itself: the
// failure may be the reading request's own.
func TestSharedReadsFailureReadsAgain(t *testing.T) {
	release := make(chan struct{})
	nr := &numberedReads{wait: func(n int64) error {
		switch n {
		case 1:
			<-release
		case 2:
			return context.Canceled
		}
		return nil
	}}
	r := newSharedReads(nr.read)
	go func() { _, _ = r.get(context.Background()) }()
	require.Eventually(t, func() bool { return nr.started.Load() == 1 }, 5*time.Second, time.Millisecond)
	type answer struct {
		g   models.Generations
		err error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			g, err := r.get(context.Background())
			answers <- answer{g, err}
		}()
	}
	waitingFor(t, r)
	time.Sleep(20 * time.Millisecond) // let both wait for read 2
	close(release)
	a, b := <-answers, <-answers
	if a.err == nil {
		a, b = b, a
	}
	require.True(t, errors.Is(a.err, context.Canceled), "the request that read gets its own error: %v", a.err)
	require.NoError(t, b.err)
	require.Equal(t, int64(3), b.g.Auth, "the other reads for itself")
}
