// Package setting is what the library packages' Configs share with the commands that fill
// them: the error that names a Config field, so that a command can name the environment
// variable it read the value from (cmd/internal/setup.Explain).
package setting

import (
	"errors"
	"fmt"
)

// Error is a bad value of one Config field. It wraps the package's ErrConfig, so callers that
// only ask errors.Is(err, pkg.ErrConfig) see no difference.
type Error struct {
	// Pkg is the package's ErrConfig sentinel.
	Pkg error
	// Field is the Config field's name, as in the Go source.
	Field string
	// Expected says what would be accepted ("expected at least 10s").
	Expected string
	// Value is the rejected value, as the package sees it.
	Value any
}

// Invalid returns an *Error for field of the package whose ErrConfig is pkg.
func Invalid(pkg error, field string, value any, expected string, args ...any) error {
	return &Error{Pkg: pkg, Field: field, Value: value, Expected: fmt.Sprintf(expected, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("%v: %s %v: %s", e.Pkg, e.Field, e.Value, e.Expected)
}

func (e *Error) Unwrap() error { return e.Pkg }

// Within returns err with its Field under parent ("Broker" and "HeartBeat" make
// "Broker.HeartBeat"), for a Config that validates a Config of another package it holds;
// other errors unchanged.
func Within(parent string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Field = parent + "." + e.Field
	return &c
}
