// Package prepared runs a process's fixed SQL statements as statements prepared once per
// database connection. lib/pq otherwise parses and plans every statement that has parameters
// on every call, and spends two round trips on it (parse and describe, then bind and execute)
// where a prepared statement needs one: under load, parsing and planning are a large part of
// the publisher's backend's CPU (docs/performance.md).
//
// Do not Prepare a statement whose plan depends on its parameter values (a partial index that
// only a given value proves usable): PostgreSQL may switch a prepared statement to a generic
// plan after five executions. Such a statement can still be run through a Tx; a query the
// Cache does not hold runs unprepared.
package prepared

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// Cache holds the statements prepared by Prepare; database/sql prepares each again on every
// connection that runs it. A query the Cache does not hold runs unprepared. Safe for
// concurrent use.
type Cache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// New returns an empty Cache over db.
func New(db *sql.DB) *Cache {
	return &Cache{db: db, m: map[string]*sql.Stmt{}}
}

// Prepare prepares the queries the Cache does not hold yet. Call it outside a transaction:
// it takes a connection from the pool, which a transaction waiting for it may hold. What
// fails to prepare (the database is away) runs unprepared until a later Prepare succeeds, so
// the error is only worth logging.
func (c *Cache) Prepare(ctx context.Context, queries ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, q := range queries {
		if _, ok := c.m[q]; ok {
			continue
		}
		s, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.m[q] = s
	}
	return errors.Join(errs...)
}

func (c *Cache) stmt(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

// ExecContext runs query on the pool, prepared if the Cache holds it.
func (c *Cache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := c.stmt(query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return c.db.ExecContext(ctx, query, args...)
}

// In returns tx's view of the cache: its statements run in tx.
func (c *Cache) In(tx *sql.Tx) Tx { return Tx{c: c, tx: tx} }

// Close closes every prepared statement; the Cache can be used again afterwards.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, s := range c.m {
		errs = append(errs, s.Close())
		delete(c.m, q)
	}
	return errors.Join(errs...)
}

// Tx runs statements in one transaction, prepared where the Cache holds them. Its methods have the signatures of
// *sql.Tx's, so code written against those takes either.
type Tx struct {
	c  *Cache
	tx *sql.Tx
}

// ExecContext runs query in the transaction.
func (t Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := t.c.stmt(query); s != nil {
		return t.tx.StmtContext(ctx, s).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs query in the transaction.
func (t Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := t.c.stmt(query); s != nil {
		return t.tx.StmtContext(ctx, s).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query in the transaction.
func (t Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := t.c.stmt(query); s != nil {
		return t.tx.StmtContext(ctx, s).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}
