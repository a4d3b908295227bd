package driver_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// TestDecoderAsDecodeStored: a Decoder gives, record for record, what
// DecodeStored and DecodeStoredString give, across block boundaries, with
// and without Expect, with corrupt records among the good ones.
func TestDecoderAsDecodeStored(t *testing.T) {
	var rows []string
	for i := range 300 {
		switch i % 7 {
		case 3:
			rows = append(rows, fmt.Sprintf(`{"type":"message","content":"%d"`, i)) // truncated
		case 5:
			rows = append(rows, "")
		default:
			rows = append(rows, fmt.Sprintf(`{"type":"function_call","call_id":"c%d","n":%d}`, i, i))
		}
	}
	for _, expect := range []int{0, 1, 50, 300, 1000} {
		t.Run(fmt.Sprintf("expect=%d", expect), func(t *testing.T) {
			var d driver.Decoder
			if expect > 0 {
				d.Expect(expect)
			}
			var got []session.Item
			for i, row := range rows {
				want, wantErr := driver.DecodeStoredString(row)
				var it session.Item
				var err error
				if i%2 == 0 {
					it, err = d.DecodeString(row)
				} else {
					it, err = d.Decode([]byte(row))
				}
				if (err == nil) != (wantErr == nil) || (err != nil && !errors.Is(err, session.ErrCorruptRecord)) {
					t.Fatalf("row %d: err %v, DecodeStoredString's %v", i, err, wantErr)
				}
				if err != nil {
					continue
				}
				if !it.Equal(want) || it.CallID() != want.CallID() {
					t.Fatalf("row %d: %s, want %s", i, it, want)
				}
				got = append(got, it)
			}
			// Items of one block stay apart: each still reads as its own.
			for _, it := range got {
				n, _ := it.Field("n")
				if it.CallID() != "c"+string(n) {
					t.Fatalf("%s: call id %q", it, it.CallID())
				}
			}
		})
	}
}

// TestDecoderAllocations: a read of 50 records through a Decoder that
// expects them costs one block, not one allocation per record.
func TestDecoderAllocations(t *testing.T) {
	row := `{"type":"message","role":"user","content":"hi"}`
	per := testing.AllocsPerRun(100, func() {
		var d driver.Decoder
		d.Expect(50)
		for range 50 {
			if _, err := d.DecodeString(row); err != nil {
				t.Fatal(err)
			}
		}
	})
	if per > 2 {
		t.Errorf("%v allocations for 50 records, want at most 2", per)
	}
}
