package mongo

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// Following.
//
// A cursor names the session (a hash of its id), the generation it was
// read in, the message document holding the last readable item a reader
// was given (r: its seq, its _id and how many records the reader's view
// of it held), the last document it read past (x: seq and _id, beyond r
// only when documents of unreadable records followed r's) and k, how many
// documents holding a record the reader's view showed at or before x:
// "m2:<hash>:<generation>:<r seq>,<r _id>,<r records>:<x seq>,<x _id>:<k>",
// r and x empty and k 0 while the reader has seen none. Documents are
// ordered by (seq, _id), as a full read orders them.
//
// ItemsSince reads the session document, then the documents from r's seq
// on (one find on the {session_id, seq} index) and, beside it, counts the
// documents at or before x that the same view would show (countFilter, a
// count on the {session_id, generation, seq} index). It requires r's
// document to be visible in the current generation with exactly as many
// records as the reader saw: appends never add to a document (every batch
// is one document of its own) and a pop takes the newest readable record,
// so while r's document holds the records the reader saw, every item up to
// r is there; a pop of one of them shrinks it (or deletes a legacy
// document), and a clear, a replace or an expiry restart moves the
// generation or hides it. It also requires the count to be k: a batch can
// become visible below x, since a Python batch is visible at its insert
// and a batch of this package at its commit, each at a seq reserved
// earlier (a Python batch below a batch of either language already read, a
// batch of this package below a Python one), and the count then grew. An
// expiry that hides this package's items below an unstamped Python batch
// at r makes it shrink. Either way the cursor is reported lost, and the
// reader reads again from the start. Pops do not move the count: they
// empty or delete documents only at r (lost anyway) or above x, and the
// empty documents Python's pop deletes are not counted. What the check
// cannot see is a batch landing below x together with a document at or
// below x losing its last record between two reads, which only a Python
// pop of unreadable records at x does. A cursor of the previous format
// ("m1:", without k) is reported lost.
//
// A read overlapping a transition is settled as read is: a document of
// another generation above the session document's _seq makes it look at
// the session document again.

var _ session.Follower = (*Session)(nil)

const followPrefix = "m2:"

// oldFollowPrefix starts the cursors of the previous format, which held no
// count (see parseFollowCursor).
const oldFollowPrefix = "m1:"

// docPos is a message document's place in the order of a read: its seq,
// then its _id (the BSON type, then the value's bytes). ok is false for
// "none".
type docPos struct {
	ok  bool
	seq int64
	id  []byte
}

// followCursor is what a cursor holds.
type followCursor struct {
	gen  int64
	r    docPos
	rLen int // records in the reader's view of r's document
	x    docPos
	k    int64 // documents at or before x that the reader counted (see countFilter)
}

// followTag names the session in its cursors, so that a cursor of another
// session is refused rather than read as this one's.
func followTag(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%08x", h.Sum32())
}

func posOf(d *messageDoc) docPos {
	return docPos{ok: true, seq: d.seq, id: append([]byte{byte(d.id.Type)}, d.id.Value...)}
}

// after reports whether p sorts after q (anything sorts after none).
func (p docPos) after(q docPos) bool {
	if !q.ok {
		return p.ok
	}
	if !p.ok {
		return false
	}
	if p.seq != q.seq {
		return p.seq > q.seq
	}
	return bytes.Compare(p.id, q.id) > 0
}

func (p docPos) same(q docPos) bool {
	return p.ok == q.ok && p.seq == q.seq && bytes.Equal(p.id, q.id)
}

func (p docPos) String() string {
	if !p.ok {
		return ""
	}
	return strconv.FormatInt(p.seq, 10) + "," + hex.EncodeToString(p.id)
}

func (c followCursor) format(sid string) session.Cursor {
	r := c.r.String()
	if c.r.ok {
		r += "," + strconv.Itoa(c.rLen)
	}
	return session.Cursor(followPrefix + followTag(sid) + ":" + strconv.FormatInt(c.gen, 10) + ":" + r + ":" + c.x.String() +
		":" + strconv.FormatInt(c.k, 10))
}

// parseFollowCursor parses a cursor of session sid; the zero Cursor is
// the start of the history. A cursor of the previous format ("m1:", no
// count) cannot tell whether a batch landed below it: one that names this
// session is reported lost.
func parseFollowCursor(sid string, cur session.Cursor) (followCursor, bool, error) {
	if cur == "" {
		return followCursor{}, true, nil
	}
	invalid := fmt.Errorf("mongo: %w: %q is not a cursor of this session", session.ErrInvalidCursor, string(cur))
	if rest, ok := strings.CutPrefix(string(cur), oldFollowPrefix+followTag(sid)+":"); ok {
		if _, err := parseCursorFields(strings.Split(rest, ":"), 3); err != nil {
			return followCursor{}, false, invalid
		}
		return followCursor{}, false, fmt.Errorf("mongo: %w: a cursor of an older release", session.ErrCursorLost)
	}
	rest, ok := strings.CutPrefix(string(cur), followPrefix+followTag(sid)+":")
	if !ok {
		return followCursor{}, false, invalid
	}
	c, err := parseCursorFields(strings.Split(rest, ":"), 4)
	if err != nil || c.format(sid) != cur {
		return followCursor{}, false, invalid
	}
	return c, false, nil
}

// parseCursorFields parses a cursor's fields after the session's tag:
// generation, r, x and, when n is 4, the count.
func parseCursorFields(f []string, n int) (followCursor, error) {
	if len(f) != n {
		return followCursor{}, strconv.ErrSyntax
	}
	var c followCursor
	var err error
	if c.gen, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return followCursor{}, err
	}
	var rest []string
	if c.r, rest, err = parsePos(f[1], 1); err != nil {
		return followCursor{}, err
	}
	if c.r.ok {
		if c.rLen, err = strconv.Atoi(rest[0]); err != nil || c.rLen < 1 {
			return followCursor{}, strconv.ErrSyntax
		}
	}
	if c.x, _, err = parsePos(f[2], 0); err != nil || c.r.after(c.x) || (c.r.ok && !c.x.ok) {
		return followCursor{}, strconv.ErrSyntax
	}
	if n == 4 {
		if c.k, err = strconv.ParseInt(f[3], 10, 64); err != nil || c.k < 0 || (!c.x.ok && c.k != 0) {
			return followCursor{}, strconv.ErrSyntax
		}
	}
	return c, nil
}

// parsePos parses "" or "<seq>,<hex id>" followed by extra more fields.
func parsePos(s string, extra int) (docPos, []string, error) {
	if s == "" {
		return docPos{}, nil, nil
	}
	f := strings.Split(s, ",")
	if len(f) != 2+extra {
		return docPos{}, nil, strconv.ErrSyntax
	}
	seq, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return docPos{}, nil, err
	}
	id, err := hex.DecodeString(f[1])
	if err != nil || len(id) == 0 {
		return docPos{}, nil, strconv.ErrSyntax
	}
	p := docPos{ok: true, seq: seq, id: id}
	if p.idValue().Validate() != nil {
		return docPos{}, nil, strconv.ErrSyntax
	}
	return p, f[2:], nil
}

// idValue returns the _id p names.
func (p docPos) idValue() bson.RawValue {
	return bson.RawValue{Type: bson.Type(p.id[0]), Value: p.id[1:]}
}

// ItemsSince returns the items appended after cursor, oldest first, and
// the cursor after them (cursor itself when nothing is new): two round
// trips, a read of the session document, then a find of the documents from
// the cursor's on with a count of those before it in flight beside it, so
// its cost follows what is new, not the history. It returns
// session.ErrCursorLost when the history changed at or before the cursor
// (a pop of an item the reader was given, a clear, a replace, an expiry,
// a batch that became visible below the cursor), and an error wrapping
// session.ErrInvalidCursor for a cursor no handle on this session
// returned. Unreadable records are skipped and reported once. See
// "Following" in follow.go.
func (s *Session) ItemsSince(ctx context.Context, cursor session.Cursor) (_ []session.Item, _ session.Cursor, err error) {
	defer refusedID(&err, s.id, "")
	c, zero, err := parseFollowCursor(s.id, cursor)
	if err != nil {
		return nil, cursor, err
	}
	if err := s.check(ctx); err != nil {
		return nil, cursor, err
	}
	if err := s.st.ensureIndexes(ctx); err != nil {
		return nil, cursor, fmt.Errorf("mongo: items since: %w", err)
	}
	for unsettled := 0; unsettled < maxUnsettled; unsettled++ {
		items, next, lost, settled, err := s.since(ctx, c, zero)
		if err != nil {
			return nil, cursor, fmt.Errorf("mongo: items since: %w", err)
		}
		if !settled {
			continue
		}
		if lost {
			return nil, cursor, fmt.Errorf("mongo: items since: %w", session.ErrCursorLost)
		}
		if next == nil {
			return nil, cursor, nil
		}
		return items, next.format(s.id), nil
	}
	return nil, cursor, fmt.Errorf("mongo: items since: %w", errUnsettled)
}

// since makes one attempt of ItemsSince. next is nil when nothing is new;
// settled is false when a transition raced the read (try again).
func (s *Session) since(ctx context.Context, c followCursor, zero bool) (items []session.Item, next *followCursor, lost, settled bool, err error) {
	sd, err := s.loadSession(ctx)
	if err != nil {
		return nil, nil, false, false, err
	}
	if sd == nil {
		return nil, nil, c.r.ok, true, nil
	}
	if c.r.ok && c.gen != sd.Generation {
		return nil, nil, true, true, nil
	}
	from := c.r
	if !from.ok && c.gen == sd.Generation {
		from = c.x
	}
	if zero || c.gen != sd.Generation {
		// From the start of the current generation: what the reader read
		// past belongs to another one.
		c = followCursor{gen: sd.Generation}
		from = docPos{}
	}
	if b := takeBetweenReads(); b != nil {
		b.hook() // a test's writer, between the two reads
	}
	now := s.st.now()
	type counted struct {
		n   int64
		err error
	}
	var counts chan counted
	if c.x.ok {
		counts = make(chan counted, 1)
		go func() {
			n, err := s.st.messages.CountDocuments(ctx, countFilter(s.id, sd, c.x, now))
			counts <- counted{n, err}
		}()
	}
	docs, err := s.loadFrom(ctx, from)
	moved := false
	if counts != nil {
		r := <-counts
		if err == nil && r.err != nil {
			err = fmt.Errorf("count message documents: %w", r.err)
		}
		moved = r.n != c.k
	}
	if err != nil {
		return nil, nil, false, false, err
	}
	if laterGeneration(docs, sd) {
		sd2, err := s.loadSession(ctx)
		if err != nil {
			return nil, nil, false, false, err
		}
		if sd2 == nil || sd2.Generation != sd.Generation {
			return nil, nil, false, false, nil
		}
	}
	var dec driver.Decoder
	var bad []driver.CorruptRecord
	out := c
	advanced := false
	found := !c.r.ok
	for _, d := range view(docs, sd) {
		if !d.inGeneration(sd.Generation) || sd.hides(&d, now) {
			continue
		}
		p := posOf(&d)
		if !found {
			if p.same(c.r) {
				if d.records() != c.rLen {
					return nil, nil, true, true, nil
				}
				found = true
			}
			continue
		}
		if !p.after(c.x) || d.records() == 0 {
			continue
		}
		readable := false
		for j := range d.records() {
			it, cr := d.record(&dec, s.id, j)
			if cr != nil {
				bad = append(bad, *cr)
				continue
			}
			items = append(items, it)
			readable = true
		}
		out.x, advanced = p, true
		if d.hasSeq {
			out.k++
		}
		if readable {
			out.r, out.rLen = p, d.records()
		}
	}
	if !found || moved {
		return nil, nil, true, true, nil
	}
	s.report(ctx, bad)
	s.noteSeq(sd.Seq)
	if !advanced {
		return nil, nil, false, true, nil
	}
	return items, &out, false, true, nil
}

// countFilter matches the documents of session id at or before x that
// since counts reading sd at now: those of the current generation that
// view shows, an expiry does not hide, and that hold a record.
func countFilter(id string, sd *sessionDoc, x docPos, now time.Time) bson.D {
	listed := bson.A{}
	for _, m := range []bson.Raw{sd.Resv, sd.Abandoned} {
		elems, _ := m.Elements()
		for _, e := range elems {
			if oid, err := bson.ObjectIDFromHex(e.Key()); err == nil {
				listed = append(listed, oid)
			}
		}
	}
	f := bson.D{
		byID(id),
		generationIs(fMsgGeneration, sd.Generation),
		{Key: "$and", Value: bson.A{
			bson.D{{Key: "$or", Value: bson.A{
				bson.D{{Key: fMsgSeq, Value: bson.D{{Key: "$lt", Value: x.seq}}}},
				bson.D{{Key: fMsgSeq, Value: x.seq}, {Key: "_id", Value: bson.D{{Key: "$lte", Value: x.idValue()}}}},
			}}},
			// messageDoc.records: an array's elements, else one.
			bson.D{{Key: "$or", Value: bson.A{
				bson.D{{Key: fMessageData + ".0", Value: bson.D{{Key: "$exists", Value: true}}}},
				bson.D{{Key: fMessageData, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "array"}}}}}},
			}}},
		}},
		// An append's batch (_c not 0) is shown once committed (see
		// sessionDoc.committed).
		{Key: "$nor", Value: bson.A{bson.D{
			{Key: fMsgCommit, Value: bson.D{{Key: "$type", Value: "number"}, {Key: "$ne", Value: 0}}},
			{Key: "$or", Value: bson.A{
				bson.D{{Key: fMsgSeq, Value: bson.D{{Key: "$gt", Value: sd.Top}}}},
				bson.D{{Key: "_id", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "objectId"}}}}}},
				bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: listed}}}},
			}},
		}}},
	}
	// sessionDoc.hides: only documents stamped with a date expire.
	switch {
	case sd.expired(now):
		f = append(f, bson.E{Key: fExpiresAt, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$type", Value: "date"}}}}})
	case sd.ExpiredThrough != nil:
		f = append(f, bson.E{Key: fExpiresAt, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$lte", Value: *sd.ExpiredThrough}}}}})
	}
	return f
}

// loadFrom reads the session's message documents from position p on (all
// of them when p is none), of every generation, in (seq, _id) order.
func (s *Session) loadFrom(ctx context.Context, p docPos) ([]messageDoc, error) {
	filter := bson.D{byID(s.id)}
	if p.ok {
		filter = append(filter, bson.E{Key: fMsgSeq, Value: bson.D{{Key: "$gte", Value: p.seq}}})
	}
	return s.findMessages(ctx, filter, options.Find().
		SetSort(bson.D{{Key: fMsgSeq, Value: 1}, {Key: "_id", Value: 1}}).
		SetProjection(popProjection))
}
