package runstate_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixture reads a file under shared/fixtures/python-runstate; a missing
// fixture fails the test.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "python-runstate", name))
	require.NoError(t, err, "fixture %s is missing", name)
	return b
}

var fixtureNames = []string{
	"minimal/v1_18.json",
	"minimal/v1_19.json",
	"features/v1_18_held_pending_session_write.json",
	"features/v1_19_held_pending_session_write.json",
	"features/v1_18_compaction_metadata.json",
	"features/v1_18_pending_input_session_write.json",
}

// canonical re-encodes a JSON document with sorted keys, for structural
// comparison.
func canonical(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v))
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

// edit loads a fixture as a generic document, lets fn change it, and
// returns the re-encoded bytes.
func edit(t testing.TB, name string, fn func(doc map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(fixture(t, name)))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&doc))
	fn(doc)
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return b
}
