package runstate_test

import (
	"errors"
	"testing"

	"github.com/agentsessions/sessions/runstate"
)

// FuzzLoad feeds arbitrary documents to Load. Loading never panics, every
// refusal is a *LoadError wrapping one of the load sentinels, and whatever
// loads writes back, under the label it was loaded with, to a document that
// loads again and rewrites to the same bytes.
func FuzzLoad(f *testing.F) {
	for _, name := range fixtureNames {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"$schemaVersion":"1.15","current_step":null,"current_turn_persisted_item_count":0}`))
	f.Add([]byte(`{"$schemaVersion":"1.17","terminal_unrecoverable":true}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := runstate.Load(data)
		if err != nil {
			var le *runstate.LoadError
			if !errors.As(err, &le) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if !errors.Is(err, runstate.ErrInvalidDocument) && !errors.Is(err, runstate.ErrInvalidPendingWrite) &&
				!errors.Is(err, runstate.ErrInvalidTerminalMarker) && !errors.Is(err, runstate.ErrUnsupportedSchema) {
				t.Fatalf("error wraps no load sentinel: %v", err)
			}
			if le.Rule == "" {
				t.Fatalf("error names no rule: %v", err)
			}
			return
		}
		out, err := cp.MarshalJSON()
		if err != nil {
			t.Fatalf("loaded but cannot write: %v", err)
		}
		if laid, err := runstate.PythonLayout(out); err != nil || string(laid) != string(out) {
			t.Fatalf("the document written is not in Python's layout (%v):\n%s", err, out)
		}
		back, err := runstate.Load(out)
		if err != nil {
			t.Fatalf("written document does not load: %v\n%s", err, out)
		}
		if back.Schema != cp.Schema {
			t.Fatalf("loaded as %s, written as %s", cp.Schema, back.Schema)
		}
		again, err := back.MarshalJSON()
		if err != nil {
			t.Fatalf("second write: %v", err)
		}
		if string(again) != string(out) {
			t.Fatalf("writing is not idempotent:\n%s\n---\n%s", out, again)
		}
	})
}
