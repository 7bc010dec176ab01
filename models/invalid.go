package models

import (
	"fmt"
	"slices"
	"strings"
)

// FieldErrors maps the fields of a request to what is wrong with them,
// e.g. {"site": ["Site \"x\" does not exist."]}. Code below the API
// (job requests, schedules, policies) reports bad input with it; the API
// renders it as 400 with the fields as the body.
type FieldErrors map[string][]string

func (v FieldErrors) Error() string {
	return fmt.Sprintf("validation failed: %v", map[string][]string(v))
}

// Messages is v in one line, field by field ("site: …; workflow: …").
func (v FieldErrors) Messages() string {
	var parts []string
	for f, msgs := range v {
		parts = append(parts, f+": "+strings.Join(msgs, " "))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// Add records a message for a field.
func (v FieldErrors) Add(field, msg string) { v[field] = append(v[field], msg) }

// Check records msg for field when ok is false.
func (v FieldErrors) Check(ok bool, field, msg string) {
	if !ok {
		v.Add(field, msg)
	}
}

// Err returns v as an error, or nil when no field failed.
func (v FieldErrors) Err() error {
	if len(v) == 0 {
		return nil
	}
	return v
}

// Invalid is a one-field FieldErrors.
func Invalid(field, msg string) error { return FieldErrors{field: {msg}} }

// MaxNameLen bounds names and the names that refer to records (sites,
// spaces, users, queues, workflows, C+J items), in characters.
const MaxNameLen = 150

// Refused is a write the record's state refuses (HTTP 409), with the
// reason a client may read.
type Refused struct{ Detail string }

func (e *Refused) Error() string { return e.Detail }

// Refusef is a Refused with a formatted reason.
func Refusef(format string, args ...any) error { return &Refused{Detail: fmt.Sprintf(format, args...)} }
