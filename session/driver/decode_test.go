package driver_test

import (
	"errors"
	"testing"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// TestDecodeStoredPythonTokens: a record Python's json.dumps wrote with a
// NaN or an infinity is an item, returned byte for byte, not a corrupt
// record.
func TestDecodeStoredPythonTokens(t *testing.T) {
	for _, row := range []string{
		`{"type": "function_call_output", "call_id": "c1", "output": NaN}`,
		`{"type": "message", "role": "assistant", "content": [{"score": -Infinity, "max": Infinity}]}`,
	} {
		it, err := driver.DecodeStoredString(row)
		if err != nil {
			t.Fatalf("DecodeStoredString(%s): %v", row, err)
		}
		if it.String() != row {
			t.Errorf("bytes changed: %s", it)
		}
		if it.Type() == "" {
			t.Errorf("Type() of %s is empty", row)
		}
		b, err := driver.DecodeStored([]byte(row))
		if err != nil || !b.Equal(it) {
			t.Errorf("DecodeStored(%s) = %v, %v", row, b, err)
		}
	}
	for _, row := range []string{`{"output": -NaN}`, `{"output": nan}`, `{"output": +Infinity}`, `{"output": NaN1}`, ``, `[NaN]`} {
		_, err := driver.DecodeStoredString(row)
		if !errors.Is(err, session.ErrCorruptRecord) || !errors.Is(err, session.ErrInvalidItem) {
			t.Errorf("DecodeStoredString(%q) = %v, want a corrupt record", row, err)
		}
	}
}

func TestDecodeStoredStringAllocations(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := driver.DecodeStoredString(typicalRow); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("DecodeStoredString allocates %v times per item, want 1 (the Item itself)", allocs)
	}
}
