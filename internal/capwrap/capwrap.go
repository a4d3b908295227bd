// Package capwrap builds session wrappers that keep exactly the optional
// capabilities of the session they wrap. A wrapper that always implemented
// LatestReader would claim O(limit) reads over a session that has none; one
// that never did would turn a backend's O(limit) reads into full reads. Both
// break the conformance suite's capability checks (declared = implemented).
//
// A wrapper supplies its Core and the Parts the wrapped session supports;
// Compose returns a value whose method set holds exactly those parts.
package capwrap

//go:generate go run gen.go

import (
	"context"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Core is the part every wrapper implements: the Session methods, and the
// two capabilities whose presence is a run-time answer rather than a method
// set (a wrapper reports what the session it wraps reports).
type Core interface {
	session.Session
	AcceptsRunContext() bool
	IgnoreIDsForMatching() bool
}

// Parts are the optional capabilities to add to a Core; a nil field is
// absent from the composed value.
type Parts struct {
	Latest     func(ctx context.Context, n int) ([]session.Item, error)
	Replace    func(ctx context.Context, items []session.Item) error
	Expirer    session.Expirer
	Compaction func(ctx context.Context, args session.CompactionArgs) error
	// Deferrer is used only with Compaction.
	Deferrer session.CompactionDeferrer
	// Checkpoints serves the checkpoint methods.
	Checkpoints Checkpoints
	// Commit is AppendWithCheckpoint; used only with Checkpoints.
	Commit func(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error)
	// Versioned serves HistoryVersion and ReplaceItemsIf; used only with
	// Replace.
	Versioned Versioned
	// Follow is ItemsSince.
	Follow func(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error)
	// Once is AddItemsOnce.
	Once func(ctx context.Context, opID string, items []session.Item) (bool, error)
}

// Versioned are session.VersionedReplacer's own methods.
type Versioned interface {
	HistoryVersion(ctx context.Context) (string, error)
	ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error
}

// Of returns the Parts of inner's own capabilities, each delegating to
// inner, for wrappers that pass some of them through unchanged.
func Of(inner session.Session) Parts {
	var p Parts
	if l, ok := inner.(session.LatestReader); ok {
		p.Latest = l.LatestItems
	}
	if r, ok := inner.(session.Replacer); ok {
		p.Replace = r.ReplaceItems
	}
	if e, ok := inner.(session.Expirer); ok {
		p.Expirer = e
	}
	if c, ok := inner.(session.CompactionAware); ok {
		p.Compaction = c.RunCompaction
	}
	if d, ok := inner.(session.CompactionDeferrer); ok {
		p.Deferrer = d
	}
	if c, ok := inner.(session.CheckpointStore); ok {
		p.Checkpoints = c
	}
	if c, ok := inner.(session.CheckpointCommitter); ok {
		p.Commit = c.AppendWithCheckpoint
	}
	if v, ok := inner.(session.VersionedReplacer); ok {
		p.Versioned = v
	}
	if f, ok := inner.(session.Follower); ok {
		p.Follow = f.ItemsSince
	}
	if o, ok := inner.(session.OnceAppender); ok {
		p.Once = o.AddItemsOnce
	}
	return p
}

// AcceptsRunContext reports what inner reports, false when it does not say.
func AcceptsRunContext(inner session.Session) bool {
	a, ok := inner.(session.RunContextAware)
	return ok && a.AcceptsRunContext()
}

// IgnoresIDs reports what inner reports, false when it does not say.
func IgnoresIDs(inner session.Session) bool {
	return session.Probe(inner).Has(session.CapIgnoresIDs)
}

type latestPart struct {
	f func(ctx context.Context, n int) ([]session.Item, error)
}

func (p latestPart) LatestItems(ctx context.Context, n int) ([]session.Item, error) {
	return p.f(ctx, n)
}

type replacePart struct {
	f func(ctx context.Context, items []session.Item) error
}

func (p replacePart) ReplaceItems(ctx context.Context, items []session.Item) error {
	return p.f(ctx, items)
}

type expirePart struct{ e session.Expirer }

func (p expirePart) TTL() time.Duration { return p.e.TTL() }
func (p expirePart) ExpiresIn(ctx context.Context) (time.Duration, bool, error) {
	return p.e.ExpiresIn(ctx)
}
func (p expirePart) Touch(ctx context.Context) error { return p.e.Touch(ctx) }

type compactPart struct {
	f func(ctx context.Context, args session.CompactionArgs) error
}

func (p compactPart) RunCompaction(ctx context.Context, args session.CompactionArgs) error {
	return p.f(ctx, args)
}

type deferPart struct{ d session.CompactionDeferrer }

func (p deferPart) DeferCompaction(ctx context.Context, responseID string, store *bool) error {
	return p.d.DeferCompaction(ctx, responseID, store)
}
func (p deferPart) DeferredCompaction() (string, bool) { return p.d.DeferredCompaction() }

// Checkpoints are session.CheckpointStore's own methods.
type Checkpoints interface {
	LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error)
	SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error)
	DeleteCheckpoint(ctx context.Context, name string, version int64) error
	ListCheckpoints(ctx context.Context) ([]string, error)
}

type checkpointPart struct{ c Checkpoints }

func (p checkpointPart) LoadCheckpoint(ctx context.Context, name string) ([]byte, int64, error) {
	return p.c.LoadCheckpoint(ctx, name)
}
func (p checkpointPart) SaveCheckpoint(ctx context.Context, name string, doc []byte, version int64) (int64, error) {
	return p.c.SaveCheckpoint(ctx, name, doc, version)
}
func (p checkpointPart) DeleteCheckpoint(ctx context.Context, name string, version int64) error {
	return p.c.DeleteCheckpoint(ctx, name, version)
}
func (p checkpointPart) ListCheckpoints(ctx context.Context) ([]string, error) {
	return p.c.ListCheckpoints(ctx)
}

type commitPart struct {
	f func(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error)
}

func (p commitPart) AppendWithCheckpoint(ctx context.Context, items []session.Item, name string, doc []byte, version int64) (int64, error) {
	return p.f(ctx, items, name, doc, version)
}

type versionedPart struct{ v Versioned }

func (p versionedPart) HistoryVersion(ctx context.Context) (string, error) {
	return p.v.HistoryVersion(ctx)
}
func (p versionedPart) ReplaceItemsIf(ctx context.Context, version string, items []session.Item) error {
	return p.v.ReplaceItemsIf(ctx, version, items)
}

type followPart struct {
	f func(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error)
}

func (p followPart) ItemsSince(ctx context.Context, cursor session.Cursor) ([]session.Item, session.Cursor, error) {
	return p.f(ctx, cursor)
}

type oncePart struct {
	f func(ctx context.Context, opID string, items []session.Item) (bool, error)
}

func (p oncePart) AddItemsOnce(ctx context.Context, opID string, items []session.Item) (bool, error) {
	return p.f(ctx, opID, items)
}

// mask numbers the parts present, one bit each, as compose_gen.go's switch
// expects.
func (p Parts) mask() int {
	m := 0
	if p.Latest != nil {
		m |= 1
	}
	if p.Replace != nil {
		m |= 2
		if p.Versioned != nil {
			m |= 128
		}
	}
	if p.Expirer != nil {
		m |= 4
	}
	if p.Compaction != nil {
		m |= 8
		if p.Deferrer != nil {
			m |= 16
		}
	}
	if p.Checkpoints != nil {
		m |= 32
		if p.Commit != nil {
			m |= 64
		}
	}
	if p.Follow != nil {
		m |= 256
	}
	if p.Once != nil {
		m |= 512
	}
	return m
}
