package genkit

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// FuzzDecodeSnapshot: a stored row, whatever its bytes, decodes or fails
// with ErrCorruptSnapshot, never panics; what decodes is for the id it is
// stored under and survives a save and a load unchanged.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte(`{"createdAt":"2026-12-06T03:00:00Z","sessionId":"s1","snapshotId":"x","state":{"custom":{"text":"hi"},"messages":[{"content":[{"text":"hi"}],"role":"user"}]},"status":"completed","updatedAt":"2026-12-06T03:00:00Z"}`), "x")
	f.Add([]byte(`{"snapshotId":"x","sessionId":"s1","status":"pending","heartbeatAt":"2026-12-06T03:00:00Z","error":{"status":"ABORTED","message":"m"}}`), "x")
	f.Add([]byte(`{"snapshotId":"y","sessionId":"s1"}`), "x")
	f.Add([]byte(`{"snapshotId":"x"}`), "x")
	f.Add([]byte(`null`), "x")
	f.Add([]byte(`{"snapshotId":"x","sessionId":"s1"} {}`), "x")
	f.Add([]byte(`{"snapshotId":"x","sessionId":"s1","createdAt":"not a time"}`), "x")
	f.Fuzz(func(t *testing.T, doc []byte, id string) {
		snap, err := decodeSnapshot[map[string]any](doc, id)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v is not ErrCorruptSnapshot", err)
			}
			return
		}
		if snap.SnapshotID != id || snap.SessionID == "" {
			t.Fatalf("decoded snapshot %q of session %q for id %q", snap.SnapshotID, snap.SessionID, id)
		}
		again, err := encodeSnapshot(snap)
		if err != nil {
			// A value JSON cannot encode again (none known); not a decoder fault.
			t.Skip(err)
		}
		snap2, err := decodeSnapshot[map[string]any](again, id)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", again, err)
		}
		third, err := encodeSnapshot(snap2)
		if err != nil || !bytes.Equal(again, third) {
			t.Fatalf("not stable: %s then %s (%v)", again, third, err)
		}
	})
}

// FuzzDecodeIndex: a stored index decodes or fails with
// ErrCorruptSnapshot; what decodes is sorted, its ids unique and
// non-empty, and it survives encodeIndex and put unchanged.
func FuzzDecodeIndex(f *testing.F) {
	f.Add([]byte(`{"v":1,"snapshots":[]}`))
	f.Add([]byte(`{"v":1,"snapshots":[{"id":"b","createdAt":"2026-12-06T03:00:00Z"},{"id":"a","createdAt":"2026-12-06T03:00:00Z"}]}`))
	f.Add([]byte(`{"v":1,"snapshots":[{"id":"a","createdAt":"2026-12-06T03:00:00Z"},{"id":"a","createdAt":"2026-12-06T03:00:01Z"}]}`))
	f.Add([]byte(`{"v":2,"snapshots":[]}`))
	f.Add([]byte(`{"v":1,"snapshots":[{"id":"","createdAt":"2026-12-06T03:00:00Z"}]}`))
	f.Add([]byte(`{"v":1,"snapshots":null,"extra":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		idx, err := decodeIndex(doc)
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v is not ErrCorruptSnapshot", err)
			}
			return
		}
		if !slices.IsSortedFunc(idx.Snapshots, indexEntry.compare) {
			t.Fatalf("not sorted: %+v", idx.Snapshots)
		}
		doc2, err := encodeIndex(idx)
		if err != nil {
			t.Fatalf("encode what decoded: %v", err)
		}
		again, err := decodeIndex(doc2)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(again.Snapshots) != len(idx.Snapshots) {
			t.Fatalf("re-decoded %d entries, had %d", len(again.Snapshots), len(idx.Snapshots))
		}
		for i := range idx.Snapshots {
			if again.Snapshots[i].ID != idx.Snapshots[i].ID || !again.Snapshots[i].CreatedAt.Equal(idx.Snapshots[i].CreatedAt) {
				t.Fatalf("entry %d changed: %+v then %+v", i, idx.Snapshots[i], again.Snapshots[i])
			}
		}
		for _, e := range idx.Snapshots {
			if again.put(e) {
				t.Fatalf("putting %+v again changed the index", e)
			}
		}
	})
}

// TestEncodeIndexShape pins the stored index's bytes.
func TestEncodeIndexShape(t *testing.T) {
	var x index
	if !x.put(indexEntry{ID: "a"}) || x.put(indexEntry{ID: "a"}) {
		t.Fatal("put reports its change")
	}
	got, err := encodeIndex(x)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"snapshots":[{"id":"a","createdAt":"0001-01-01T00:00:00Z"}]}`
	if string(got) != want {
		t.Fatalf("encodeIndex = %s, want %s", got, want)
	}
	if empty, err := encodeIndex(index{}); err != nil || string(empty) != `{"v":1,"snapshots":[]}` {
		t.Fatalf("empty index = %s, %v", empty, err)
	}
}
