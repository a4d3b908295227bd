package mongo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// messageDoc is one stored message document, parsed enough to order it,
// place it in a generation and walk its records.
//
// A record is one item slot: an element of a message_data array (a batch
// document), or the whole message_data when it is a string (a legacy
// per-item document). A document whose message_data is missing or of
// another type is one corrupt record.
type messageDoc struct {
	id     bson.RawValue
	seq    int64
	hasSeq bool
	gen    int64 // 0 when absent or null
	genOK  bool  // false when generation holds something that is not an integer
	data   bson.RawValue
	vals   []bson.RawValue // array elements, once split
	// stamped is true when expires_at is a BSON date (the only type a TTL
	// index acts on); expiresAt is then its value in Unix milliseconds.
	stamped   bool
	expiresAt int64
	// commit is the _c field: 0 when absent (a document of the Python SDK,
	// a replace, a marker), 1 for an append's batch (visible once
	// committed, see sessionDoc.committed).
	commit int64
}

// errNotDocument reports bytes that are not a valid BSON document.
var errNotDocument = errors.New("mongo: invalid BSON document")

// parseMessageDoc parses a message document. It never panics, whatever
// the bytes: invalid BSON is an error.
func parseMessageDoc(raw bson.Raw) (messageDoc, error) {
	var d messageDoc
	if err := raw.Validate(); err != nil {
		return d, fmt.Errorf("%w: %v", errNotDocument, err)
	}
	d.id, _ = raw.LookupErr("_id")
	if v, err := raw.LookupErr(fMsgSeq); err == nil {
		d.seq, d.hasSeq = integer(v)
	}
	d.genOK = true
	if v, err := raw.LookupErr(fMsgGeneration); err == nil && v.Type != bson.TypeNull {
		d.gen, d.genOK = integer(v)
	}
	if v, err := raw.LookupErr(fExpiresAt); err == nil {
		d.expiresAt, d.stamped = v.DateTimeOK()
	}
	if v, err := raw.LookupErr(fMsgCommit); err == nil {
		d.commit, _ = integer(v)
	}
	d.data, _ = raw.LookupErr(fMessageData)
	if arr, ok := d.data.ArrayOK(); ok {
		vals, err := arr.Values()
		if err != nil {
			return d, fmt.Errorf("%w: message_data: %v", errNotDocument, err)
		}
		d.vals = vals
	}
	return d, nil
}

// stringBytes returns the bytes of a BSON string without copying them,
// capped so that an append cannot reach the rest of the buffer.
func stringBytes(v bson.RawValue) ([]byte, bool) {
	if v.Type != bson.TypeString || len(v.Value) < 5 {
		return nil, false
	}
	n := int(int32(binary.LittleEndian.Uint32(v.Value))) - 1
	if n < 0 || 4+n >= len(v.Value) {
		return nil, false
	}
	return v.Value[4 : 4+n : 4+n], true
}

// integer returns the value of an int32, an int64 or an integral double.
func integer(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeInt64:
		return v.Int64(), true
	case bson.TypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
			return int64(f), true
		}
	}
	return 0, false
}

// inGeneration reports whether the document belongs to generation g:
// legacy documents (no generation) belong to generation 0.
func (d *messageDoc) inGeneration(g int64) bool { return d.genOK && d.gen == g }

// isArray reports whether message_data is an array (a batch document).
func (d *messageDoc) isArray() bool { return d.data.Type == bson.TypeArray }

// records returns how many records the document holds.
func (d *messageDoc) records() int {
	if d.isArray() {
		return len(d.vals)
	}
	return 1
}

// record decodes record i (0 is the oldest) through dec (nil for a record
// read alone). It returns the item, or a corrupt-record report naming the
// session and the record's position.
// The item's bytes alias the document's buffer, which nothing modifies
// (documents are copied out of the cursor); a report's bytes are a copy.
func (d *messageDoc) record(dec *driver.Decoder, sessionID string, i int) (session.Item, *driver.CorruptRecord) {
	if d.isArray() {
		v := d.vals[i]
		if b, ok := stringBytes(v); ok {
			it, err := dec.Decode(b)
			if err == nil {
				return it, nil
			}
			return session.Item{}, d.corrupt(sessionID, i, b, err)
		}
		return session.Item{}, d.corrupt(sessionID, i, rawBytes(v),
			fmt.Errorf("%w: message_data element is a BSON %s, not a string", session.ErrCorruptRecord, v.Type))
	}
	if b, ok := stringBytes(d.data); ok {
		it, err := dec.Decode(b)
		if err == nil {
			return it, nil
		}
		return session.Item{}, d.corrupt(sessionID, -1, b, err)
	}
	if d.data.Type == 0 {
		return session.Item{}, d.corrupt(sessionID, -1, nil,
			fmt.Errorf("%w: message_data is missing", session.ErrCorruptRecord))
	}
	return session.Item{}, d.corrupt(sessionID, -1, rawBytes(d.data),
		fmt.Errorf("%w: message_data is a BSON %s", session.ErrCorruptRecord, d.data.Type))
}

// rawBytes returns what a corrupt report carries for a value that is not a
// string: a binary's own bytes, else the value as extended JSON.
func rawBytes(v bson.RawValue) []byte {
	if _, data, ok := v.BinaryOK(); ok {
		return data
	}
	return []byte(v.String())
}

// corrupt builds a report for record i (-1: the whole document).
func (d *messageDoc) corrupt(sessionID string, i int, raw []byte, err error) *driver.CorruptRecord {
	return &driver.CorruptRecord{SessionID: sessionID, Position: d.position(i), Raw: bytes.Clone(raw), Err: err}
}

// position names record i in the backend's terms.
func (d *messageDoc) position(i int) string {
	var b bytes.Buffer
	if d.hasSeq {
		fmt.Fprintf(&b, "seq %d", d.seq)
	} else {
		b.WriteString("seq missing")
	}
	if i >= 0 {
		fmt.Fprintf(&b, " index %d", i)
	}
	if oid, ok := d.id.ObjectIDOK(); ok {
		fmt.Fprintf(&b, " (_id %s)", oid.Hex())
	} else if d.id.Type != 0 {
		fmt.Fprintf(&b, " (_id %s)", d.id.String())
	}
	return b.String()
}

// decodeAll decodes every record of a document, oldest first. It is the
// whole decoding path in one call, for tests and the fuzz target.
func decodeAll(raw bson.Raw, sessionID string) ([]session.Item, []driver.CorruptRecord, error) {
	d, err := parseMessageDoc(raw)
	if err != nil {
		return nil, nil, err
	}
	var items []session.Item
	var bad []driver.CorruptRecord
	var dec driver.Decoder
	for i := range d.records() {
		it, c := d.record(&dec, sessionID, i)
		if c != nil {
			bad = append(bad, *c)
			continue
		}
		items = append(items, it)
	}
	return items, bad, nil
}
