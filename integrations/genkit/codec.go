package genkit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/firebase/genkit/go/ai/exp"
	"github.com/firebase/genkit/go/core/status"
)

// indexVersion is the format of the index document: {"v":1,"snapshots":
// [{"id":..., "createdAt":...}, ...]}, oldest first.
const indexVersion = 1

// index lists a genkit session's snapshots, sorted by CreatedAt, then id.
type index struct {
	V         int          `json:"v"`
	Snapshots []indexEntry `json:"snapshots"`
}

type indexEntry struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
}

func (a indexEntry) compare(b indexEntry) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// put records e, replacing the entry of the same id, and reports whether
// the index changed.
func (x *index) put(e indexEntry) bool {
	i := slices.IndexFunc(x.Snapshots, func(o indexEntry) bool { return o.ID == e.ID })
	if i >= 0 {
		if x.Snapshots[i].CreatedAt.Equal(e.CreatedAt) {
			return false
		}
		x.Snapshots = slices.Delete(x.Snapshots, i, i+1)
	}
	at, _ := slices.BinarySearchFunc(x.Snapshots, e, indexEntry.compare)
	x.Snapshots = slices.Insert(x.Snapshots, at, e)
	return true
}

func encodeIndex(x index) ([]byte, error) {
	x.V = indexVersion
	if x.Snapshots == nil {
		x.Snapshots = []indexEntry{}
	}
	b, err := json.Marshal(x)
	if err != nil {
		return nil, status.Errorf(status.ErrInvalidArgument, "genkit: encode snapshot index: %w", err)
	}
	return b, nil
}

// decodeIndex decodes a stored index document. It accepts only what
// encodeIndex writes: format 1, non-empty unique ids; the entries are
// sorted again whatever their stored order.
func decodeIndex(doc []byte) (index, error) {
	var x index
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return index{}, status.Errorf(ErrCorruptSnapshot, "genkit: corrupt snapshot index: %v", err)
	}
	if dec.More() {
		return index{}, status.Errorf(ErrCorruptSnapshot, "genkit: corrupt snapshot index: data after the document")
	}
	if x.V != indexVersion {
		return index{}, status.Errorf(ErrCorruptSnapshot, "genkit: snapshot index format %d, want %d", x.V, indexVersion)
	}
	seen := make(map[string]bool, len(x.Snapshots))
	for _, e := range x.Snapshots {
		if e.ID == "" {
			return index{}, status.Errorf(ErrCorruptSnapshot, "genkit: corrupt snapshot index: an entry without an id")
		}
		if seen[e.ID] {
			return index{}, status.Errorf(ErrCorruptSnapshot, "genkit: corrupt snapshot index: snapshot %q listed twice", e.ID)
		}
		seen[e.ID] = true
	}
	slices.SortFunc(x.Snapshots, indexEntry.compare)
	return x, nil
}

// encodeSnapshot is genkit's own JSON of the row.
func encodeSnapshot[State any](snap *exp.SessionSnapshot[State]) ([]byte, error) {
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, status.Errorf(status.ErrInvalidArgument, "genkit: save snapshot %q: encode: %w", snap.SnapshotID, err)
	}
	return b, nil
}

// decodeSnapshot decodes the row stored for snapshotID: genkit's JSON of
// a SessionSnapshot whose SnapshotID is snapshotID and whose SessionID is
// set. Anything else is ErrCorruptSnapshot; the message never quotes the
// document, whose state is the conversation.
func decodeSnapshot[State any](doc []byte, snapshotID string) (*exp.SessionSnapshot[State], error) {
	var snap exp.SessionSnapshot[State]
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&snap); err != nil {
		return nil, status.Errorf(ErrCorruptSnapshot, "genkit: snapshot %q: corrupt row (%d bytes): %v", snapshotID, len(doc), err)
	}
	if dec.More() {
		return nil, status.Errorf(ErrCorruptSnapshot, "genkit: snapshot %q: corrupt row (%d bytes): data after the document", snapshotID, len(doc))
	}
	if snap.SnapshotID != snapshotID {
		return nil, status.Errorf(ErrCorruptSnapshot, "genkit: snapshot %q: the row stored for it is snapshot %q", snapshotID, snap.SnapshotID)
	}
	if snap.SessionID == "" {
		return nil, status.Errorf(ErrCorruptSnapshot, "genkit: snapshot %q: the row has no session id", snapshotID)
	}
	return &snap, nil
}
