package session_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

func TestItemFields(t *testing.T) {
	it := session.MustItem(`{"Type":"upper","type":"function_call","call_id":"c","id":5,"call_id":"c2"}`)
	require.Equal(t, "function_call", it.Type(), "keys match exactly, not case-insensitively")
	require.Equal(t, "c2", it.CallID(), "the last duplicate wins, as in Python")
	require.Equal(t, "", it.ID(), "a non-string id is no id")
	require.False(t, it.HasField("missing"))
	var zero session.Item
	require.False(t, zero.Valid())
	_, err := zero.MarshalJSON()
	require.ErrorIs(t, err, session.ErrInvalidItem)
	b := []byte(`{"a":1}`)
	n, err := session.NewItem(b)
	require.NoError(t, err)
	b[2] = 'X'
	require.Equal(t, `{"a":1}`, n.String(), "NewItem copies")
}

// TestItemConstruction: ParseItem and NewItem take exactly one JSON object
// and refuse everything else with ErrInvalidItem (moved here from the
// conformance suite, which never touched an adapter for it).
func TestItemConstruction(t *testing.T) {
	for _, bad := range []string{
		``, ` `, `null`, `[]`, `[{"a":1}]`, `"str"`, `1`, `true`,
		`{`, `{"a":}`, `{"a":1}{"b":2}`, `{"a":1},`, `{'a':1}`,
		"{\"a\":\"\xff\"}", strings.Repeat("[", 20000),
	} {
		_, err := session.ParseItem(bad)
		require.ErrorIs(t, err, session.ErrInvalidItem, "%.40q must be rejected", bad)
		_, err = session.NewItem([]byte(bad))
		require.ErrorIs(t, err, session.ErrInvalidItem, "%.40q must be rejected", bad)
	}
	for _, ok := range []string{`{}`, ` {"a":1} `, "\n{\"a\":[1,{\"b\":null}]}\t"} {
		_, err := session.ParseItem(ok)
		require.NoError(t, err, "%q is a JSON object", ok)
		_, err = session.NewItem([]byte(ok))
		require.NoError(t, err, "%q is a JSON object", ok)
	}
}

func TestItemErrorSaysItOnce(t *testing.T) {
	_, err := session.ParseItems(`{}`, `{"a":`)
	if err == nil {
		t.Fatal("want an error")
	}
	if got, want := err.Error(), "session: item 1 is not a JSON object: invalid JSON"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, session.ErrInvalidItem) {
		t.Fatal("not ErrInvalidItem")
	}
}

func TestTooDeepItemSaysSo(t *testing.T) {
	deep := strings.Repeat(`{"a":`, session.MaxItemDepth+1) + "1" + strings.Repeat("}", session.MaxItemDepth+1)
	_, err := session.ParseItem(deep)
	if !errors.Is(err, session.ErrInvalidItem) || !strings.Contains(err.Error(), "nested deeper than 10000 levels") {
		t.Fatalf("ParseItem(too deep) = %v", err)
	}
	ok := strings.Repeat(`{"a":`, session.MaxItemDepth) + `"}}{{"` + strings.Repeat("}", session.MaxItemDepth)
	if _, err := session.ParseItem(ok); err != nil {
		t.Fatalf("ParseItem(at the limit, braces in a string) = %v", err)
	}
}
