package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

var (
	_ adapters.Summarizer = (*Store)(nil)
	_ adapters.Summarizer = (*urlStore)(nil)
)

// SummarizeSessions summarizes the sessions ids (adapters.Summarizer): one
// find of their session documents, then one find of their message
// documents (the {session_id, seq} index, one session after another, so
// that one session's documents are in memory at a time), each session's
// filtered and walked exactly as Items reads and walks them; then one
// distinct on the checkpoints collection, and, for the sessions holding
// checkpoint documents only, ListCheckpoints and LoadCheckpoint. A session
// whose documents show a clear or a replace racing the summary is read on
// its own (as Items would start over). Unreadable records are counted,
// not reported to Options.OnCorrupt (a read of the session reports each).
func (st *Store) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if st.closed.Load() {
		return nil, session.ErrClosed
	}
	out := make([]adapters.SessionSummary, len(ids))
	at := make(map[string]int, len(ids))
	uniq := make([]string, 0, len(ids))
	for i, id := range ids {
		out[i].ID = id
		if _, dup := at[id]; !dup {
			at[id] = i
			uniq = append(uniq, id)
		}
	}
	if len(uniq) > 0 {
		if err := st.ensureIndexes(ctx); err != nil {
			return nil, fmt.Errorf("mongo: summarize sessions: %w", err)
		}
		if err := st.summarize(ctx, uniq, out, at, each); err != nil {
			return nil, fmt.Errorf("mongo: summarize sessions: %w", err)
		}
	}
	for i, id := range ids {
		if j := at[id]; j != i {
			out[i] = out[j]
		}
	}
	return out, nil
}

// SummarizeSessions summarizes a page of sessions (adapters.Summarizer).
func (s *urlStore) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	return s.st.SummarizeSessions(ctx, ids, each)
}

// summaryProjection is messageProjection with what a summary groups by.
var summaryProjection = append(bson.D{{Key: fSessionID, Value: 1}}, popProjection...)

func (st *Store) summarize(ctx context.Context, ids []string, out []adapters.SessionSummary, at map[string]int, each func(string, session.Item)) error {
	in := bson.D{{Key: fSessionID, Value: bson.D{{Key: "$in", Value: ids}}}}
	sds := make(map[string]*sessionDoc, len(ids))
	proj := append(bson.D{{Key: fSessionID, Value: 1}, {Key: fUpdatedAt, Value: 1}}, sessionProjection[1:]...)
	cur, err := st.sessions.Find(ctx, in, options.Find().SetProjection(proj))
	if err != nil {
		return fmt.Errorf("read session documents: %w", err)
	}
	for cur.Next(ctx) {
		var head struct {
			ID      string     `bson:"session_id"`
			Updated *time.Time `bson:"updated_at"`
		}
		var sd sessionDoc
		if err := cur.Decode(&head); err != nil {
			_ = cur.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("read session documents: %w", err)
		}
		if err := cur.Decode(&sd); err != nil {
			_ = cur.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("read session documents: %w", err)
		}
		i, ok := at[head.ID]
		if !ok {
			continue
		}
		sds[head.ID] = &sd
		if head.Updated != nil {
			out[i].Updated = *head.Updated
		}
	}
	err = cur.Err()
	_ = cur.Close(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("read session documents: %w", err)
	}

	// The messages after the session documents, as a read takes them.
	now := st.now()
	var again []string
	finish := func(id string, docs []messageDoc) {
		i, ok := at[id]
		sd := sds[id]
		if !ok || sd == nil {
			return
		}
		slices.Reverse(docs) // newest first, as a read fetches them
		if laterGeneration(docs, sd) {
			again = append(again, id)
			return
		}
		items, bad, _ := collect(view(docs, sd), sd, now, id, -1)
		st.tally(&out[i], items, len(bad), each)
	}
	cur, err = st.messages.Find(ctx, in, options.Find().
		SetSort(bson.D{{Key: fSessionID, Value: 1}, {Key: fMsgSeq, Value: 1}}).
		SetProjection(summaryProjection))
	if err != nil {
		return fmt.Errorf("read message documents: %w", err)
	}
	var (
		curID string
		docs  []messageDoc
	)
	for cur.Next(ctx) {
		id, ok := cur.Current.Lookup(fSessionID).StringValueOK()
		if !ok {
			continue
		}
		if id != curID {
			finish(curID, docs)
			curID, docs = id, nil
		}
		if _, want := sds[id]; !want {
			continue
		}
		d, err := parseMessageDoc(slices.Clone(cur.Current))
		if err != nil {
			_ = cur.Close(context.WithoutCancel(ctx))
			return err
		}
		docs = append(docs, d)
	}
	err = cur.Err()
	_ = cur.Close(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("read message documents: %w", err)
	}
	finish(curID, docs)

	for _, id := range again {
		if err := st.summarizeOne(ctx, id, &out[at[id]], each); err != nil {
			return err
		}
	}
	return st.summarizeCheckpoints(ctx, ids, out, at)
}

// tally counts items and unreadable records into sum, and hands the items
// (newest first in items) to each, oldest first.
func (st *Store) tally(sum *adapters.SessionSummary, items []session.Item, bad int, each func(string, session.Item)) {
	sum.Items, sum.Bytes, sum.Unreadable = len(items), 0, bad
	for k := len(items) - 1; k >= 0; k-- {
		sum.Bytes += int64(len(items[k].Bytes()))
		if each != nil {
			each(sum.ID, items[k])
		}
	}
}

// summarizeOne summarizes one session with the reads of Items (counting
// the unreadable records instead of reporting them).
func (st *Store) summarizeOne(ctx context.Context, id string, sum *adapters.SessionSummary, each func(string, session.Item)) error {
	s, err := st.Session(id)
	if err != nil {
		return err
	}
	for range maxUnsettled {
		sd, docs, err := s.fetch(ctx, 0, true)
		if err != nil {
			return err
		}
		if sd == nil {
			*sum = adapters.SessionSummary{ID: sum.ID}
			return nil
		}
		if laterGeneration(docs, sd) {
			sd2, err := s.loadSession(ctx)
			if err != nil {
				return err
			}
			if sd2 == nil || sd2.Generation != sd.Generation {
				continue
			}
		}
		items, bad, _ := collect(view(docs, sd), sd, st.now(), id, -1)
		st.tally(sum, items, len(bad), each)
		return nil
	}
	return errUnsettled
}

// summarizeCheckpoints fills in the checkpoints of the sessions that hold
// checkpoint documents (one distinct finds them), as ListCheckpoints and
// LoadCheckpoint give them.
func (st *Store) summarizeCheckpoints(ctx context.Context, ids []string, out []adapters.SessionSummary, at map[string]int) error {
	with, err := distinctIDs(ctx, st.checkpoints, bson.D{{Key: fSessionID, Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return fmt.Errorf("list checkpoints: %w", err)
	}
	for _, id := range with {
		i, ok := at[id]
		if !ok {
			continue
		}
		s, err := st.Session(id)
		if err != nil {
			return err
		}
		names, err := s.ListCheckpoints(ctx)
		if err != nil {
			return err
		}
		for _, n := range names {
			doc, v, err := s.LoadCheckpoint(ctx, n)
			c := adapters.StoredCheckpoint{Name: n, Version: v, Document: doc}
			if err != nil {
				if errors.Is(err, session.ErrNoCheckpoint) {
					continue // deleted since it was listed
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				c = adapters.StoredCheckpoint{Name: n, Err: err}
			}
			out[i].Checkpoints = append(out[i].Checkpoints, c)
		}
	}
	return nil
}
