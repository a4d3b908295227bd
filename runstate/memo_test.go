package runstate_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentsessions/sessions/runstate"
)

// TestMarshalAfterChanges: MarshalJSON reuses its last layout only for the
// same members. After each change (or a caller writing into a returned
// document) it writes what a fresh copy of the checkpoint, which never
// encoded anything, writes.
func TestMarshalAfterChanges(t *testing.T) {
	cp := runstate.New()
	cp.SetStep(runstate.StepRunAgain)
	check := func(what string) []byte {
		t.Helper()
		got, err := cp.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := cp.Clone().MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: MarshalJSON wrote\n%s\nwant\n%s", what, got, want)
		}
		return got
	}
	d1 := check("first")
	if d := check("again"); !bytes.Equal(d, d1) {
		t.Fatalf("unchanged checkpoint wrote %s, then %s", d1, d)
	}
	orig := bytes.Clone(d1)
	d1[0] = 'X' // the caller's copy
	check("after the caller wrote into a returned document")
	cp.PersistedCount = 5
	if d := check("count"); bytes.Equal(d, orig) {
		t.Fatal("a changed count wrote the same document")
	}
	if err := cp.SetField("extra", json.RawMessage(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	check("member set")
	if err := cp.SetField("extra", json.RawMessage(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	d := check("member changed")
	if !bytes.Contains(d, []byte(`"a": 2`)) {
		t.Fatalf("changed member not written: %s", d)
	}
	cp.SetStep(runstate.StepInterruption)
	cp.Step.PendingCallIDs = []string{"call_1"}
	check("step")
	cp.Step.PendingCallIDs[0] = "call_2" // in place
	if d := check("step changed in place"); !bytes.Contains(d, []byte("call_2")) {
		t.Fatalf("in-place change not written: %s", d)
	}
}
