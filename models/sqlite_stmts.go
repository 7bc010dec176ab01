package models

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
)

// sqlite prepares (parses and plans) every statement it runs, and bun
// writes its arguments into the SQL text, so the same list request parses
// the same few queries again each time: a fifth of a small list's CPU.
// stmtCacheConnector keeps the connection's most recently used SELECT
// statements prepared, keyed by their text. A statement whose rows are
// still open is never reused (a query run while iterating the same query
// gets a statement of its own), and every kept statement is finalized
// before its connection closes.
type stmtCacheConnector struct {
	drv  driver.Driver
	dsn  string
	size int
}

func (c *stmtCacheConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(sqliteConn)
	if !ok {
		conn.Close()
		return nil, errors.New("sqlite driver lacks the context methods the statement cache needs")
	}
	return &stmtCacheConn{sqliteConn: inner, size: c.size, byText: map[string]*list.Element{}, lru: list.New()}, nil
}

func (c *stmtCacheConnector) Driver() driver.Driver { return c.drv }

// sqliteConn is what modernc's connection implements and database/sql uses.
type sqliteConn interface {
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
	sqliteConn
	size   int
	byText map[string]*list.Element // of *cachedStmt, most recent at the front of lru
	lru    *list.List
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
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	var cs *cachedStmt
	if e, ok := c.byText[query]; ok {
		cs = e.Value.(*cachedStmt)
		if cs.busy {
			return c.sqliteConn.QueryContext(ctx, query, args)
		}
		c.lru.MoveToFront(e)
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
	if err != nil {
		return nil, err
	}
	sr, ok := rows.(sqliteRows)
	if !ok {
		rows.Close()
		return nil, errors.New("sqlite driver rows lack the column-type methods the statement cache passes on")
	}
	cs.busy = true
	return &cachedRows{sqliteRows: sr, cs: cs}, nil
}

func (c *stmtCacheConn) evict(e *list.Element) {
	cs := c.lru.Remove(e).(*cachedStmt)
	delete(c.byText, cs.text)
	cs.evicted = true
	if !cs.busy {
		_ = cs.stmt.Close()
	}
}

// Close finalizes the kept statements, then closes the connection.
func (c *stmtCacheConn) Close() error {
	for c.lru.Len() > 0 {
		c.evict(c.lru.Back())
	}
	return c.sqliteConn.Close()
}

func isSelect(q string) bool {
	for len(q) > 0 && (q[0] == ' ' || q[0] == '\n' || q[0] == '\t') {
		q = q[1:]
	}
	return len(q) >= 6 && (q[:6] == "SELECT" || q[:6] == "select" || q[:4] == "WITH")
}

// sqliteRows is what modernc's rows implement.
type sqliteRows interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// cachedRows frees its statement for the next query when closed.
type cachedRows struct {
	sqliteRows
	cs *cachedStmt
}

func (r *cachedRows) Close() error {
	err := r.sqliteRows.Close()
	r.cs.busy = false
	if r.cs.evicted {
		if e := r.cs.stmt.Close(); err == nil {
			err = e
		}
	}
	return err
}
