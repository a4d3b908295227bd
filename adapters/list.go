package adapters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/agentsessions/sessions/session"
)

// ErrCannotList reports a store that implements neither PageLister nor
// Lister.
var ErrCannotList = errors.New("adapters: the store cannot list its sessions")

// PageLister is implemented by stores that list their sessions a page at a
// time, so that listing a store of any size holds one page in memory.
//
// ListSessionsPage returns the ids of at most limit sessions (limit > 0)
// that come after cursor ("" starts the listing) and the cursor to pass
// for the next page, "" once the listing is done. A page may hold fewer
// than limit ids, even none, before the end. A cursor is opaque text,
// meaningful only to the store that returned it (and to another store on
// the same data with the same options).
//
// Stores that list in order (memory, SQLite, PostgreSQL, MongoDB) return
// ids in ListSessions's order (bytewise, except PostgreSQL's: its stored
// ids in the column's collation), and their cursor is the last id
// returned: within one pass no id repeats, a session present from the
// first page to the last is listed once, one added or removed between
// pages is listed or not, and one added behind the cursor is not. Redis
// pages follow SCAN: a session present for the whole pass is listed at
// least once, and may be listed twice (a rehash between pages), and ids
// come in no particular order; there a session is present while its item
// list exists, or while its checkpoint hash holds a checkpoint and it has
// no item list (one that gains or loses its item list during the pass
// may be listed twice, or, gaining it behind SCAN, not at all).
//
// Every backend here lists the sessions that hold items or a checkpoint:
// a session that holds only a checkpoint is listed.
type PageLister interface {
	ListSessionsPage(ctx context.Context, cursor string, limit int) (ids []string, next string, err error)
}

// ListPage returns one page of st's sessions, as PageLister's
// ListSessionsPage does. A store that is not a PageLister but a Lister is
// paged from ListSessions, which reads every id for every page: correct,
// with the cost and memory of a full listing per page. ListPage returns an
// error wrapping ErrCannotList for a store that is neither.
func ListPage(ctx context.Context, st Store, cursor string, limit int) (ids []string, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("adapters: list page: limit %d is not positive", limit)
	}
	if pl, ok := st.(PageLister); ok {
		return pl.ListSessionsPage(ctx, cursor, limit)
	}
	l, ok := st.(Lister)
	if !ok {
		return nil, "", ErrCannotList
	}
	all, err := l.ListSessions(ctx)
	if err != nil {
		return nil, "", err
	}
	return PageOf(all, cursor, limit)
}

// PageOf returns the page of ids after cursor, as ListSessionsPage does,
// for a store that holds its ids in memory: ids sorted (a copy, when they
// are not), the cursor the last id returned.
func PageOf(ids []string, cursor string, limit int) (page []string, next string, err error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("adapters: list page: limit %d is not positive", limit)
	}
	if !sort.StringsAreSorted(ids) {
		ids = slices.Clone(ids)
		sort.Strings(ids)
	}
	i := 0
	if cursor != "" {
		i = sort.Search(len(ids), func(i int) bool { return ids[i] > cursor })
	}
	j := min(len(ids), i+limit)
	page = slices.Clone(ids[i:j])
	if j < len(ids) {
		next = ids[j-1]
	}
	return page, next, nil
}

// SessionSummary is what a store holds of one session, as sessionctl list
// shows it.
type SessionSummary struct {
	// ID is the session's id.
	ID string
	// Items counts the records that read as items: what session.All
	// returns.
	Items int
	// Bytes is the stored size of those items (len of Item.Bytes).
	Bytes int64
	// Unreadable counts the records that do not read as items: those a
	// read skips and reports to the store's corrupt-record handler. A
	// summary counts them without reporting each.
	Unreadable int
	// Updated is when the session was last written, zero where the store
	// keeps no such time.
	Updated time.Time
	// Checkpoints are the session's checkpoints (session.CheckpointStore),
	// sorted by name; none where the store keeps none.
	Checkpoints []StoredCheckpoint
}

// StoredCheckpoint is one checkpoint of a session, as stored.
type StoredCheckpoint struct {
	Name     string
	Version  int64
	Document []byte
	// Err is why the store could not read the checkpoint (LoadCheckpoint's
	// error); Version and Document are then zero.
	Err error
}

// Summarizer is implemented by stores that summarize a page of sessions
// with a fixed number of queries, whatever the number of sessions in the
// page, instead of reading each session on its own.
//
// SummarizeSessions returns one summary for each of ids, in the order of
// ids; an id the store holds nothing of has a summary with only its ID.
// Every record is decoded as a read decodes it, so that Items and
// Unreadable are what session.All and the corrupt-record handler would
// say. each, when not nil, is called with every item read, oldest first
// within a session.
//
// A store without it is summarized by reading each session: session.All
// (with the corrupt-record handler counting Unreadable), ListCheckpoints
// and LoadCheckpoint, and Timestamps.SessionTimes. sessionctl list does
// that.
type Summarizer interface {
	SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]SessionSummary, error)
}
