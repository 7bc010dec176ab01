package auth

import (
	"context"
	"errors"
	"sync"

	"github.com/thehub/hub/models"
)

// sharedReads lets concurrent requests share their generations reads
// (models.ReadGenerations, one per authenticated request). On PostgreSQL
// each read is a round trip, and under load its cost is mostly the
// database's and the scheduler's, not the hub's.
//
// A request must see every commit made before it arrived, so it never
// takes a read that had already started when it came: it waits for the
// read in flight to end and shares the next one with every request that
// came meanwhile. That next read starts after all of them arrived. One
// request alone reads as before, at once.
type sharedReads struct {
	read func(context.Context) (models.Generations, error)

	mu      sync.Mutex
	ended   sync.Cond // signalled when a read ends
	running bool
	next    *sharedRead // the read the requests that came since the last one started wait for
}

type sharedRead struct {
	done bool
	gens models.Generations
	err  error
}

var errNoRead = errors.New("the shared generations read did not end")

func newSharedReads(read func(context.Context) (models.Generations, error)) *sharedReads {
	r := &sharedReads{read: read}
	r.ended.L = &r.mu
	return r
}

// get returns generations read after it was called.
func (r *sharedReads) get(ctx context.Context) (models.Generations, error) {
	r.mu.Lock()
	c := r.next
	if c == nil {
		c = new(sharedRead)
		r.next = c
	}
	for r.running && !c.done {
		r.ended.Wait()
	}
	if c.done {
		r.mu.Unlock()
		if c.err != nil {
			// The error may be the reading request's own (it was
			// cancelled, say): this one reads for itself.
			return r.read(ctx)
		}
		return c.gens, nil
	}
	// Nothing is running and c has not started: this request reads for
	// everyone waiting for c; those who come from now on wait for the next.
	r.running, r.next = true, nil
	r.mu.Unlock()
	c.err = errNoRead // kept if read panics: the others then read for themselves
	defer func() {
		r.mu.Lock()
		c.done, r.running = true, false
		r.ended.Broadcast()
		r.mu.Unlock()
	}()
	c.gens, c.err = r.read(ctx)
	return c.gens, c.err
}
