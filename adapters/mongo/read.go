package mongo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodrv "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// maxUnsettled bounds how many times a read starts over because a clear,
// replace or expiry restart raced it.
const maxUnsettled = 10

// errUnsettled reports a read that kept racing generation changes.
var errUnsettled = errors.New("mongo: the session's generation kept changing during the read (concurrent clears or replaces)")

// Items returns the whole history, oldest first.
func (s *Session) Items(ctx context.Context) (_ []session.Item, err error) {
	defer refusedID(&err, s.id, "")
	items, err := s.read(ctx, -1)
	if err != nil {
		return nil, fmt.Errorf("mongo: items: %w", err)
	}
	return items, nil
}

// LatestItems returns the newest n items, oldest first: n > 0 gives at
// most n items, n == 0 none, n < 0 an error wrapping
// session.ErrInvalidLimit. Corrupt records do not count towards n.
//
// It costs one round trip for typical batch sizes: the session document
// and the newest message documents are read by two commands in flight at
// once (see the package documentation).
func (s *Session) LatestItems(ctx context.Context, n int) (_ []session.Item, err error) {
	defer refusedID(&err, s.id, "")
	if n < 0 {
		return nil, fmt.Errorf("mongo: latest items: %w: %d", session.ErrInvalidLimit, n)
	}
	items, err := s.read(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("mongo: latest items: %w", err)
	}
	return items, nil
}

// read returns the newest n valid items (all when n < 0), oldest first.
//
// Each attempt reads the session document S and the newest w message
// documents M of every generation, concurrently, then checks that the two
// agree before trusting M filtered to S's generation G:
//
//   - A document in M with a seq above S._seq and a generation other than G
//     was reserved after S was read, under a later generation (or by a
//     replace not yet committed): a clear or replace may have begun and
//     its garbage collection may have removed part of G. Every transition
//     writes such a document (its marker) before it deletes anything, so a
//     read overlapping a collection always sees one. S is then read again: an unchanged generation means nothing
//     happened (the document was an uncommitted replace's batch or a stale
//     leftover) and M stands; a changed one starts the read over.
//   - If G was installed by a replace, its batch (seq S._base_seq) was
//     written before G became current. When M reaches down to that seq but
//     does not hold the batch, M was read before S; the read starts over,
//     this time reading M after S.
//
// If the window holds fewer than n valid items and was full, it doubles.
func (s *Session) read(ctx context.Context, n int) ([]session.Item, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if n == 0 {
		return []session.Item{}, nil
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return nil, err
	}
	w := 0 // no limit
	if n > 0 {
		w = s.st.est.window(n)
	}
	// The session document first, then the messages: a batch is visible
	// when its commit on the session document is (see view), so the
	// messages must be read after it.
	sequential, baseRetried := true, false
	for unsettled := 0; unsettled < maxUnsettled; {
		sd, docs, err := s.fetch(ctx, w, sequential)
		if err != nil {
			return nil, err
		}
		if sd == nil {
			return []session.Item{}, nil
		}
		if laterGeneration(docs, sd) {
			sd2, err := s.loadSession(ctx)
			if err != nil {
				return nil, err
			}
			if sd2 == nil {
				return []session.Item{}, nil
			}
			if sd2.Generation != sd.Generation {
				unsettled++
				continue
			}
		}
		if !baseRetried && baseMissing(docs, sd, w) {
			// (Only a test's hook reads the messages first.)
			baseRetried = true
			unsettled++
			continue
		}
		items, bad, walked := collect(view(docs, sd), sd, s.st.now(), s.id, n)
		if n > 0 && len(items) < n && len(docs) == w {
			w = nextWindow(w)
			continue
		}
		for i := range bad {
			s.st.opts.OnCorrupt.Report(ctx, bad[i])
		}
		s.noteSeq(sd.Seq)
		if len(docs) > 0 && docs[0].hasSeq {
			s.noteSeq(docs[0].seq + 1)
		}
		if n > 0 {
			s.st.est.observe(len(items)+len(bad), walked)
		}
		slices.Reverse(items)
		return items, nil
	}
	return nil, errUnsettled
}

// fetch reads the session document and the newest w message documents
// (all when w == 0), concurrently unless sequential.
func (s *Session) fetch(ctx context.Context, w int, sequential bool) (*sessionDoc, []messageDoc, error) {
	if hook := takeBetweenReads(); hook != nil {
		return s.fetchWithHook(ctx, w, hook)
	}
	if sequential {
		sd, err := s.loadSession(ctx)
		if err != nil || sd == nil {
			return nil, nil, err
		}
		docs, err := s.loadMessages(ctx, w)
		return sd, docs, err
	}
	return s.alongSession(ctx, func() ([]messageDoc, error) { return s.loadMessages(ctx, w) })
}

// alongSession reads the session document concurrently with load (a read
// of message documents) and returns both.
func (s *Session) alongSession(ctx context.Context, load func() ([]messageDoc, error)) (*sessionDoc, []messageDoc, error) {
	type result struct {
		sd  *sessionDoc
		err error
	}
	ch := make(chan result, 1)
	go func() {
		sd, err := s.loadSession(ctx)
		ch <- result{sd, err}
	}()
	docs, mErr := load()
	r := <-ch
	if r.err != nil {
		return nil, nil, r.err
	}
	if mErr != nil {
		return nil, nil, mErr
	}
	return r.sd, docs, nil
}

// betweenReads, when a test sets it, makes the next fetch read the session
// document and the messages one after the other, in the order it says,
// and run its hook in between: the worst moment for a concurrent writer.
type betweenReads struct {
	messagesFirst bool
	hook          func()
}

var (
	testBetweenReadsMu sync.Mutex
	testBetweenReads   *betweenReads
)

// takeBetweenReads returns and clears the test hook.
func takeBetweenReads() *betweenReads {
	testBetweenReadsMu.Lock()
	defer testBetweenReadsMu.Unlock()
	b := testBetweenReads
	testBetweenReads = nil
	return b
}

func (s *Session) fetchWithHook(ctx context.Context, w int, b *betweenReads) (*sessionDoc, []messageDoc, error) {
	if b.messagesFirst {
		docs, err := s.loadMessages(ctx, w)
		if err != nil {
			return nil, nil, err
		}
		b.hook()
		sd, err := s.loadSession(ctx)
		return sd, docs, err
	}
	sd, err := s.loadSession(ctx)
	if err != nil {
		return nil, nil, err
	}
	b.hook()
	docs, err := s.loadMessages(ctx, w)
	return sd, docs, err
}

// loadSession reads the session document; nil when there is none.
func (s *Session) loadSession(ctx context.Context) (*sessionDoc, error) {
	var sd sessionDoc
	err := s.st.sessions.FindOne(ctx, bson.D{byID(s.id)},
		options.FindOne().SetProjection(sessionProjection)).Decode(&sd)
	if errors.Is(err, mongodrv.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the session document: %w", err)
	}
	return &sd, nil
}

// loadMessages reads the session's newest w message documents of every
// generation (all when w == 0), newest first.
func (s *Session) loadMessages(ctx context.Context, w int) ([]messageDoc, error) {
	fo := options.Find().SetSort(bson.D{{Key: fMsgSeq, Value: -1}}).SetProjection(messageProjection)
	if w > 0 {
		fo.SetLimit(int64(w))
	}
	return s.findMessages(ctx, bson.D{byID(s.id)}, fo)
}

// findMessages runs a find on the message documents and parses what it
// returns.
func (s *Session) findMessages(ctx context.Context, filter bson.D, fo *options.FindOptionsBuilder) ([]messageDoc, error) {
	cur, err := s.st.messages.Find(ctx, filter, fo)
	if err != nil {
		return nil, fmt.Errorf("read message documents: %w", err)
	}
	defer func() { _ = cur.Close(context.WithoutCancel(ctx)) }()
	var docs []messageDoc
	for cur.Next(ctx) {
		d, err := parseMessageDoc(slices.Clone(cur.Current))
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("read message documents: %w", err)
	}
	return docs, nil
}

// laterGeneration reports whether docs hold a document reserved after sd
// was read that belongs to another generation: a seq at or above sd's
// _seq, the first position no reservation seen by sd handed out.
func laterGeneration(docs []messageDoc, sd *sessionDoc) bool {
	for i := range docs {
		if docs[i].hasSeq && docs[i].seq >= sd.Seq && !docs[i].inGeneration(sd.Generation) {
			return true
		}
	}
	return false
}

// baseMissing reports whether the current generation was installed by a
// replace whose batch the window should hold but does not.
func baseMissing(docs []messageDoc, sd *sessionDoc, w int) bool {
	b, ok := sd.base()
	if !ok {
		return false
	}
	covers := w == 0 || len(docs) < w || (len(docs) > 0 && docs[len(docs)-1].hasSeq && docs[len(docs)-1].seq <= b)
	if !covers {
		return false
	}
	for i := range docs {
		if docs[i].hasSeq && docs[i].seq == b && docs[i].inGeneration(sd.Generation) {
			return false
		}
	}
	return true
}

// collect walks docs (newest first) of sd's generation from the newest
// record back, skipping documents an expiry hides, and returns up to n
// valid items (all when n < 0) newest first, the corrupt records it
// passed, and how many non-empty documents it walked.
func collect(docs []messageDoc, sd *sessionDoc, now time.Time, sessionID string, n int) (items []session.Item, bad []driver.CorruptRecord, walked int) {
	var dec driver.Decoder
	if n > 0 {
		dec.Expect(n)
	}
	for i := range docs {
		d := &docs[i]
		if !d.inGeneration(sd.Generation) || d.records() == 0 || sd.hides(d, now) {
			continue
		}
		walked++
		for j := d.records() - 1; j >= 0; j-- {
			it, c := d.record(&dec, sessionID, j)
			if c != nil {
				bad = append(bad, *c)
				continue
			}
			items = append(items, it)
			if n > 0 && len(items) == n {
				return items, bad, walked
			}
		}
	}
	return items, bad, walked
}

// nextWindow doubles a window.
func nextWindow(w int) int {
	if w > math.MaxInt32 {
		return w
	}
	return 2 * w
}

// estimator keeps a running average of records per non-empty message
// document, so that a latest-n read asks for about as many documents as it
// needs: enough for one round trip, few enough to transfer little.
type estimator struct {
	bits atomic.Uint64 // float64; 0 = no observation yet
}

// observe folds in a read or write of records spread over docs documents.
func (e *estimator) observe(records, docs int) {
	if docs <= 0 || records <= 0 {
		return
	}
	x := float64(records) / float64(docs)
	for {
		old := e.bits.Load()
		avg := math.Float64frombits(old)
		next := x
		if avg > 0 {
			next = 0.75*avg + 0.25*x
		}
		if e.bits.CompareAndSwap(old, math.Float64bits(next)) {
			return
		}
	}
}

// window returns how many documents a latest-n read fetches: n over the
// average batch size with a quarter to spare, plus one for an empty marker
// or a partly popped batch; never more than n+1.
func (e *estimator) window(n int) int {
	avg := math.Float64frombits(e.bits.Load())
	if avg < 1 {
		avg = 1
	}
	w := int(math.Ceil(float64(n)/avg*1.25)) + 1
	return min(w, n+1)
}
