package mongo

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/session"
)

// Field names. The Python SDK's MongoDBSession uses the same ones; the
// fields marked "ours" are extra, and the SDK ignores them.
const (
	fSessionID = "session_id" // both collections; unique on sessions
	fCreatedAt = "created_at" // both collections
	fUpdatedAt = "updated_at" // session documents

	fSeq        = "_seq"        // session: how many seqs were ever reserved (the next batch starts there)
	fGeneration = "_generation" // session: the current generation

	fBaseGeneration   = "_base_generation"   // session (ours): the generation a replace installed
	fBaseSeq          = "_base_seq"          // session (ours): the seq of that replace's batch
	fExpiresAt        = "expires_at"         // both (ours): session expiry / message purge time
	fMessagesExpireAt = "messages_expire_at" // session (ours): a lower bound of its messages' expires_at
	fPurgeBy          = "_purge_by"          // session (ours): an upper bound of every expires_at ever stamped on its messages
	fExpiredThrough   = "_expired_through"   // session (ours): stamped messages with expires_at up to this are expired for good

	fTop       = "_top"       // session (ours): the seq of the newest batch committed by an append of this package
	fResv      = "_resv"      // session (ours): {hex _id: time} of appends reserved and not yet committed
	fAbandoned = "_abandoned" // session (ours): {hex _id: true} of reservations given up on by others
	fPops      = "_pops"      // session (ours): how many pops of this package were ever committed
	fPopping   = "_popping"   // session (ours): the pop committed but maybe not yet applied to its document
	fOps       = "_ops"       // session (ours): {hash: operation id} of appends at most once not yet moved to the operations collection
	fOpsMoved  = "_ops_moved" // session (ours): how many times operation ids were moved out of _ops

	fMsgSeq        = "seq"          // message: the 0-based position of the batch's last item
	fMsgCommit     = "_c"           // message (ours): 1 on an append's batch, visible once committed
	fMsgGeneration = "generation"   // message: the generation it belongs to
	fMessageData   = "message_data" // message: array of item JSON strings (legacy: one string)
)

// sessionDoc is the part of a session document the adapter reads.
type sessionDoc struct {
	Seq              int64      `bson:"_seq"`
	Generation       int64      `bson:"_generation"`
	BaseGeneration   *int64     `bson:"_base_generation,omitempty"`
	BaseSeq          int64      `bson:"_base_seq"`
	ExpiresAt        *time.Time `bson:"expires_at,omitempty"`
	MessagesExpireAt *time.Time `bson:"messages_expire_at,omitempty"`
	PurgeBy          *time.Time `bson:"_purge_by,omitempty"`
	ExpiredThrough   *time.Time `bson:"_expired_through,omitempty"`
	Top              int64      `bson:"_top"`
	Pops             int64      `bson:"_pops"`
	Resv             bson.Raw   `bson:"_resv,omitempty"`
	Abandoned        bson.Raw   `bson:"_abandoned,omitempty"`
	Popping          *popIntent `bson:"_popping,omitempty"`
	Ops              bson.Raw   `bson:"_ops,omitempty"`
	OpsMoved         int64      `bson:"_ops_moved"`
}

// popIntent is a committed pop (see "Linearizability" in the package
// documentation): record J of the message document ID, which held N
// records in generation G when the pop chose it.
type popIntent struct {
	ID bson.RawValue `bson:"id"`
	J  int64         `bson:"j"`
	N  int64         `bson:"n"`
	G  int64         `bson:"g"`
}

// committed reports whether the append's batch document with _id id and
// seq seq is committed as of d: at or below _top, and neither reserved
// still nor abandoned.
func (d *sessionDoc) committed(id bson.RawValue, seq int64) bool {
	if seq > d.Top {
		return false
	}
	oid, ok := id.ObjectIDOK()
	if !ok {
		return false
	}
	return !listed(d.Resv, oid.Hex()) && !listed(d.Abandoned, oid.Hex())
}

// listed reports whether document doc has the key key.
func listed(doc bson.Raw, key string) bool {
	if doc == nil {
		return false
	}
	_, err := doc.LookupErr(key)
	return err == nil
}

// sessionProjection names the fields of sessionDoc.
var sessionProjection = bson.D{
	{Key: "_id", Value: 0},
	{Key: fSeq, Value: 1},
	{Key: fGeneration, Value: 1},
	{Key: fBaseGeneration, Value: 1},
	{Key: fBaseSeq, Value: 1},
	{Key: fExpiresAt, Value: 1},
	{Key: fMessagesExpireAt, Value: 1},
	{Key: fPurgeBy, Value: 1},
	{Key: fExpiredThrough, Value: 1},
	{Key: fTop, Value: 1},
	{Key: fPops, Value: 1},
	{Key: fResv, Value: 1},
	{Key: fAbandoned, Value: 1},
	{Key: fPopping, Value: 1},
	{Key: fOps, Value: 1},
	{Key: fOpsMoved, Value: 1},
}

// messageProjection names the fields of a message document the adapter
// reads (leaving out session_id, which may be long, and the timestamps).
var messageProjection = bson.D{
	{Key: fMsgSeq, Value: 1},
	{Key: fMsgGeneration, Value: 1},
	{Key: fMessageData, Value: 1},
	{Key: fExpiresAt, Value: 1},
	{Key: fMsgCommit, Value: 1},
}

// expired reports whether the session document's expiry has passed. A
// session document without expires_at never expires.
func (d *sessionDoc) expired(now time.Time) bool {
	return d.ExpiresAt != nil && !now.Before(*d.ExpiresAt)
}

// hides reports whether expiry hides message document d (see "Expiry" in
// the package documentation): only a document stamped with a BSON date
// expires_at is ever hidden, because only such a document is deleted by
// the TTL index (or by the next write, on a server without one); a document
// without one (every document the Python SDK writes, until a write of this
// package stamps it) is never hidden by an expiry.
func (d *sessionDoc) hides(m *messageDoc, now time.Time) bool {
	if !m.stamped {
		return false
	}
	if d.expired(now) {
		return true
	}
	return d.ExpiredThrough != nil && m.expiresAt <= d.ExpiredThrough.UnixMilli()
}

// expiredThrough returns the bound a restart of this expired session
// hides stamped documents up to: _purge_by, or, for a session last written
// by an older release of this package (which stamped no bound), its expiry
// plus an hour, the most those releases stamped beyond it.
func (d *sessionDoc) expiredThrough() time.Time {
	t := d.ExpiresAt.Add(legacyMaxSlack)
	if d.PurgeBy != nil {
		t = *d.PurgeBy
	}
	if d.ExpiredThrough != nil && d.ExpiredThrough.After(t) {
		t = *d.ExpiredThrough
	}
	return t
}

// legacyMaxSlack is the most an older release stamped a message's
// expires_at beyond its session's.
const legacyMaxSlack = time.Hour

// batchSeq returns the seq of a batch reserved by the update that returned
// d: as the Python SDK numbers it, the 0-based position of its last item,
// which is _seq after the $inc, minus one.
func (d *sessionDoc) batchSeq() int64 { return d.Seq - 1 }

// base returns the seq of the batch that installed the current generation
// by a replace, if it did.
func (d *sessionDoc) base() (int64, bool) {
	if d.BaseGeneration != nil && *d.BaseGeneration == d.Generation {
		return d.BaseSeq, true
	}
	return 0, false
}

// byID is the filter of everything about one session. The id is only ever
// a value, never a key or an operator, so no id can reach another
// session's documents.
func byID(id string) bson.E { return bson.E{Key: fSessionID, Value: id} }

// liveClause matches a session document that has not expired (or has no
// expiry at all).
func liveClause(now time.Time) bson.E {
	return bson.E{Key: "$or", Value: bson.A{
		bson.D{{Key: fExpiresAt, Value: bson.D{{Key: "$gt", Value: now}}}},
		bson.D{{Key: fExpiresAt, Value: nil}},
	}}
}

// generationIs matches documents of generation g in field: generation 0
// also matches a missing or null field, as legacy documents have none.
func generationIs(field string, g int64) bson.E {
	if g == 0 {
		return bson.E{Key: field, Value: bson.D{{Key: "$in", Value: bson.A{int64(0), nil}}}}
	}
	return bson.E{Key: field, Value: g}
}

// newGeneration returns a generation for a replace: random in
// [2^40, 2^62), so that no other writer reaches it by counting up from the
// current generation (a clear adds one) and a batch written under it stays
// invisible unless the replace commits.
func newGeneration(current int64) int64 {
	for {
		g := 1<<40 + rand.Int64N(1<<62-1<<40)
		if g != current {
			return g
		}
	}
}

// Encoded sizes of the parts of a batch document.
const (
	bsonDocOverhead = 4 + 1                                 // length and terminator
	bsonInt64Elem   = 1 + 8                                 // type byte and value, plus the key
	bsonDateElem    = 1 + 8                                 //
	bsonOIDElem     = 1 + 12                                //
	bsonStringValue = 4 + 1                                 // length and terminator, plus the bytes
	bsonKeyOverhead = 1                                     // the key's terminator
	bsonArrayElem   = 1 + bsonKeyOverhead + bsonDocOverhead // type byte, key terminator, array framing
)

// batchDocSize returns the exact encoded size of an append's batch
// document (with its _c field), without building it.
func batchDocSize(id string, items []session.Item, withExpiry bool) int {
	n := bsonDocOverhead
	n += bsonOIDElem + len("_id") + bsonKeyOverhead
	n += 1 + len(fSessionID) + bsonKeyOverhead + bsonStringValue + len(id)
	n += bsonInt64Elem + len(fMsgSeq) + bsonKeyOverhead
	n += bsonInt64Elem + len(fMsgGeneration) + bsonKeyOverhead
	n += bsonArrayElem + len(fMessageData)
	for i, it := range items {
		n += 1 + len(strconv.Itoa(i)) + bsonKeyOverhead + bsonStringValue + len(it.Bytes())
	}
	n += bsonDateElem + len(fCreatedAt) + bsonKeyOverhead
	if withExpiry {
		n += bsonDateElem + len(fExpiresAt) + bsonKeyOverhead
	}
	n += 1 + 4 + len(fMsgCommit) + bsonKeyOverhead // _c, an int32
	return n
}

// checkBatchSize refuses a batch whose document would exceed the limit.
func (st *Store) checkBatchSize(id string, items []session.Item) error {
	if size := batchDocSize(id, items, st.opts.TTL > 0); size > st.opts.MaxBatchBytes {
		return fmt.Errorf("%w: %d items encode to a %d-byte document, over the %d-byte limit",
			session.ErrBatchTooLarge, len(items), size, st.opts.MaxBatchBytes)
	}
	return nil
}

// batchDoc is one message document: a batch of items (possibly none, for a
// marker) under one seq and generation.
type batchDoc struct {
	id      bson.ObjectID
	session string
	seq     int64
	gen     int64
	items   []session.Item
	created time.Time
	expires *time.Time // nil without a TTL
	commit  int32      // _c: 0 (none), or 1 for an append's batch
}

// marshal encodes the document in the layout's field order.
func (b batchDoc) marshal() (bson.Raw, error) {
	data := make(bson.A, len(b.items))
	for i, it := range b.items {
		data[i] = string(it.Bytes())
	}
	d := bson.D{
		{Key: "_id", Value: b.id},
		{Key: fSessionID, Value: b.session},
		{Key: fMsgSeq, Value: b.seq},
		{Key: fMsgGeneration, Value: b.gen},
		{Key: fMessageData, Value: data},
		{Key: fCreatedAt, Value: b.created},
	}
	if b.expires != nil {
		d = append(d, bson.E{Key: fExpiresAt, Value: *b.expires})
	}
	if b.commit != 0 {
		d = append(d, bson.E{Key: fMsgCommit, Value: b.commit})
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("mongo: encode a batch: %w", err)
	}
	return raw, nil
}
