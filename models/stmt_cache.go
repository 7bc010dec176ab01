package models

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"hash/maphash"

	"github.com/uptrace/bun/driver/pgdriver"
)

// Both databases prepare (parse and plan) every statement they run, and
// bun writes its arguments into the SQL text, so the same list request
// parses and plans the same few queries again each time: a fifth of a
// small list's CPU on sqlite, and most of PostgreSQL's time for a
// statement of several subqueries (the jobs list's owners). The
// statement cache keeps each connection's most recently used SELECT
// statements prepared, keyed by their text. A statement whose rows are
// still open is never reused (a query run while iterating the same query
// gets a statement of its own), and on sqlite every kept statement is
// finalized before its connection closes.
type stmtCacheConnector struct {
	connect func(context.Context) (driver.Conn, error)
	drv     driver.Driver
	size    int
	// server: the statements live in a database server's session
	// (PostgreSQL), where preparing one costs a round trip of its own and
	// closing one another, too much for a text run once (most carry an
	// id): a statement is kept only when its text comes a second time,
	// and the kept ones end with their session, unclosed.
	server bool
}

func (c *stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(innerConn)
	if !ok {
		conn.Close()
		return nil, errors.New("database driver lacks the context methods the statement cache needs")
	}
	return &stmtCacheConn{innerConn: inner, size: c.size, server: c.server, byText: map[string]*list.Element{},
		lru: list.New(), seen: map[uint64]bool{}, seed: maphash.MakeSeed()}, nil
}

func (c *stmtCacheConnector) Driver() driver.Driver { return c.drv }

// innerConn is what the drivers' connections (modernc's, pgdriver's)
// implement and database/sql uses.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type stmtCacheConn struct {
	innerConn
	size   int
	server bool
	byText map[string]*list.Element // of *cachedStmt, most recent at the front of lru
	lru    *list.List
	seen   map[uint64]bool // server: hashes of the texts run once, unprepared
	seed   maphash.Seed
}

type cachedStmt struct {
	text    string
	stmt    driver.Stmt
	busy    bool // its rows are open
	evicted bool // out of the cache: close it when its rows close
}

// QueryContext runs query through its kept statement when it has one that
// is free, else prepares it and keeps it.
func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) != 0 || !isSelect(query) {
		return c.innerConn.QueryContext(ctx, query, args)
	}
	var cs *cachedStmt
	if e, ok := c.byText[query]; ok {
		cs = e.Value.(*cachedStmt)
		if cs.busy {
			return c.innerConn.QueryContext(ctx, query, args)
		}
		c.lru.MoveToFront(e)
	} else if c.firstTime(query) {
		return c.innerConn.QueryContext(ctx, query, args)
	} else {
		st, err := c.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		cs = &cachedStmt{text: query, stmt: st}
		c.byText[query] = c.lru.PushFront(cs)
		for c.lru.Len() > c.size {
			c.evict(c.lru.Back())
		}
	}
	rows, err := cs.stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
	if planChanged(err) {
		// PostgreSQL refuses a kept statement whose columns a schema
		// change altered: prepare it anew next time.
		c.evict(c.byText[query])
		return c.innerConn.QueryContext(ctx, query, args)
	}
	if err != nil {
		return nil, err
	}
	cs.busy = true
	if typed, ok := rows.(typedRows); ok {
		return &cachedTypedRows{typedRows: typed, cs: cs}, nil
	}
	return &cachedRows{Rows: rows, cs: cs}, nil
}

// firstTime tells whether query is to run unprepared as not seen before
// (on a server), and remembers it; the memory is forgotten as it grows.
func (c *stmtCacheConn) firstTime(query string) bool {
	if !c.server {
		return false
	}
	h := maphash.String(c.seed, query)
	if c.seen[h] {
		delete(c.seen, h)
		return false
	}
	if len(c.seen) >= 64*c.size {
		clear(c.seen)
	}
	c.seen[h] = true
	return true
}

// planChanged tells whether err is PostgreSQL's refusal of a prepared
// statement whose result columns changed since it was prepared.
func planChanged(err error) bool {
	var pgErr pgdriver.Error
	return errors.As(err, &pgErr) && pgErr.Field('C') == "0A000"
}

func (c *stmtCacheConn) evict(e *list.Element) {
	cs := c.lru.Remove(e).(*cachedStmt)
	delete(c.byText, cs.text)
	cs.evicted = true
	if !cs.busy {
		_ = cs.stmt.Close()
	}
}

// Close finalizes the kept statements (a server's session ends with its
// connection), then closes the connection.
func (c *stmtCacheConn) Close() error {
	for !c.server && c.lru.Len() > 0 {
		c.evict(c.lru.Back())
	}
	return c.innerConn.Close()
}

func isSelect(q string) bool {
	for len(q) > 0 && (q[0] == ' ' || q[0] == '\n' || q[0] == '\t') {
		q = q[1:]
	}
	return len(q) >= 6 && (q[:6] == "SELECT" || q[:6] == "select" || q[:4] == "WITH")
}

// typedRows are rows that tell their columns' types (modernc's do):
// database/sql asks for them, so kept statements' rows pass them on.
type typedRows interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// cachedRows and cachedTypedRows free their statement for the next query
// when closed.
type cachedRows struct {
	driver.Rows
	cs *cachedStmt
}

func (r *cachedRows) Close() error { return r.cs.release(r.Rows.Close()) }

type cachedTypedRows struct {
	typedRows
	cs *cachedStmt
}

func (r *cachedTypedRows) Close() error { return r.cs.release(r.typedRows.Close()) }

// release marks cs free once its rows closed (with err), closing it if
// it was evicted meanwhile.
func (cs *cachedStmt) release(err error) error {
	cs.busy = false
	if cs.evicted {
		if e := cs.stmt.Close(); err == nil {
			err = e
		}
	}
	return err
}
