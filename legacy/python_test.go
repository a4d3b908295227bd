package legacy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// These tests play the part of a Go process taking over from a Python one:
// it loads a checkpoint the Python SDK wrote (the shared corpus fixtures,
// and 1.17 records built by testdata/python/make_fixtures.py), opens the
// SQLite session store Python wrote (make_fixtures.py, with the SDK's
// SQLiteSession schema), settles the pending or held write with runstate,
// and writes a checkpoint Python's loader accepts. The checkpoints Go
// writes are kept under testdata/python/go_written/ (refresh with
// -update-python-golden) and checked at development time by
// testdata/python/check_checkpoint.py, which re-implements the loader's
// rules in Python.

var updatePythonGolden = flag.Bool("update-python-golden", false, "rewrite testdata/python/go_written/*.json")

const pyDir = "testdata/python"

// readFixture reads a file; a missing fixture fails the test.
func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err, "fixture %s is missing", path)
	return b
}

func runstateFixture(t *testing.T, rel string) []byte {
	t.Helper()
	return readFixture(t, filepath.Join("testdata", "python-runstate", rel))
}

// manifest is testdata/python/manifest.json, what make_fixtures.py saw.
type manifest struct {
	Python    string                         `json:"python"`
	Rows      map[string]map[string][]string `json:"rows"`
	Before117 []string                       `json:"before_117"`
	Digests   map[string]string              `json:"digests"`
}

func loadManifest(t *testing.T) manifest {
	t.Helper()
	var m manifest
	require.NoError(t, json.Unmarshal(readFixture(t, filepath.Join(pyDir, "manifest.json")), &m))
	return m
}

// openPythonDB copies a Python-written database to a temporary directory
// and opens it with the sqlite adapter.
func openPythonDB(t *testing.T, name string) *sqlite.Store {
	t.Helper()
	src := readFixture(t, filepath.Join(pyDir, name))
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, src, 0o600))
	st, err := sqlite.OpenFile(context.Background(), path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = st.Close()
		keepDB(t, path)
	})
	return st
}

// keepDB copies the database Go wrote to $LEGACY_KEEP_DB, when set, so
// that check_checkpoint.py --db can read it the way Python's SQLiteSession
// does (a development-time check).
func keepDB(t *testing.T, path string) {
	dir := os.Getenv("LEGACY_KEEP_DB")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(path)
	if err == nil {
		name := strings.NewReplacer("/", "_", " ", "_", ",", "", "(", "", ")", "", ":", "").Replace(t.Name()) + ".db"
		err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	if err != nil {
		t.Errorf("keep database: %v", err)
	}
}

// rows returns a session's message_data column as stored, oldest first:
// what Python's SQLiteSession will json.loads.
func rows(t *testing.T, st *sqlite.Store, id string) []string {
	t.Helper()
	rs, err := st.DB().QueryContext(context.Background(),
		`SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id`, id)
	require.NoError(t, err)
	defer rs.Close()
	out := []string{}
	for rs.Next() {
		var s string
		require.NoError(t, rs.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rs.Err())
	return out
}

// members returns a JSON object's top-level members.
func members(t *testing.T, doc []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(doc, &m))
	return m
}

func jsonEqual(t *testing.T, want, got json.RawMessage, msgAndArgs ...any) {
	t.Helper()
	assert.JSONEq(t, string(want), string(got), msgAndArgs...)
}

// assertRewrite checks a checkpoint Go wrote against the Python-written
// one it was loaded from: the label is wantLabel, the persisted count is
// wantCount, the pending record is gone when settled, and every other
// member is unchanged and no member was added or lost.
func assertRewrite(t *testing.T, original, written []byte, wantLabel string, wantCount int, settled bool) {
	t.Helper()
	o, w := members(t, original), members(t, written)
	jsonEqual(t, json.RawMessage(`"`+wantLabel+`"`), w["$schemaVersion"], "label")
	jsonEqual(t, mustMarshal(t, wantCount), w["current_turn_persisted_item_count"], "persisted count")
	wantKeys := keys(o)
	if settled {
		wantKeys = slices.DeleteFunc(wantKeys, func(k string) bool { return k == "pending_session_write" })
		assert.NotContains(t, w, "pending_session_write", "a settled record is not written")
	}
	assert.Equal(t, wantKeys, keys(w), "top-level key set")
	for k, v := range o {
		switch k {
		case "$schemaVersion", "current_turn_persisted_item_count", "pending_session_write":
			continue
		}
		jsonEqual(t, v, w[k], "member %s must be unchanged", k)
	}
	// Python's writer layout: json.dumps(indent=2, sort_keys=True) + "\n".
	assert.True(t, bytes.HasSuffix(written, []byte("}\n")))
	assert.True(t, bytes.HasPrefix(written, []byte("{\n  \"$schemaVersion\": ")))
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func mustMarshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// checkPythonKeyRules re-checks, independently of runstate's key table, the
// rules of semantics §3.2 that a written pending_session_write must meet for
// the Python loader of the PR #4828 line: the exact key set (the four base
// keys, plus held/response_id/store/reasoning_item_id_policy on a held
// record only), held a real bool, held => before null, before null or a
// list of strings, items a non-empty list of objects, persisted_count a
// non-negative int, and a run-again or interruption step.
func checkPythonKeyRules(t *testing.T, doc []byte) {
	t.Helper()
	m := members(t, doc)
	raw, ok := m["pending_session_write"]
	if !ok || string(raw) == "null" {
		return
	}
	var label string
	require.NoError(t, json.Unmarshal(m["$schemaVersion"], &label))
	require.Contains(t, []string{"1.17", "1.18"}, label, "a record Go writes carries a label the Python loader knows")
	var step struct {
		Type string `json:"type"`
	}
	require.NoError(t, json.Unmarshal(m["current_step"], &step))
	require.Contains(t, []string{"next_step_run_again", "next_step_interruption"}, step.Type)
	w := members(t, raw)
	base := []string{"before", "items", "persisted_count", "session_id"}
	optional := map[string]bool{}
	if _, held := w["held"]; held && label == "1.18" {
		optional = map[string]bool{"held": true, "response_id": true, "store": true, "reasoning_item_id_policy": true}
	}
	var rest []string
	for _, k := range keys(w) {
		if !optional[k] {
			rest = append(rest, k)
		}
	}
	require.Equal(t, base, rest, "pending_session_write key set under %s", label)
	if h, ok := w["held"]; ok {
		require.Contains(t, []string{"true", "false"}, string(h), "held is a real bool")
		if string(h) == "true" {
			require.Equal(t, "null", string(w["before"]), "a held record has before null")
		}
	}
	if string(w["before"]) != "null" {
		var before []string
		require.NoError(t, json.Unmarshal(w["before"], &before), "before is null or a list of strings")
	}
	var items []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(w["items"], &items), "items is a list of objects")
	require.NotEmpty(t, items)
	for _, it := range items {
		require.NotNil(t, it, "items is a list of objects")
	}
	var count json.Number
	dec := json.NewDecoder(bytes.NewReader(w["persisted_count"]))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&count))
	n, err := count.Int64()
	require.NoError(t, err, "persisted_count is an int")
	require.GreaterOrEqual(t, n, int64(0))
	var sid string
	require.NoError(t, json.Unmarshal(w["session_id"], &sid))
}

// golden compares a checkpoint Go wrote with its copy under
// testdata/python/go_written (rewritten with -update-python-golden).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(pyDir, "go_written", name+".json")
	if *updatePythonGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	assert.Equal(t, string(readFixture(t, path)), string(got), "golden %s (refresh with -update-python-golden, then run check_checkpoint.py)", path)
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.Compact(&buf, []byte(s)))
	return buf.String()
}

// The pair the held fixtures carry, as Go appends it (the record's items,
// compact).
var (
	heldCall   = `{"arguments":"{}","call_id":"call_held_1","name":"write_thing","type":"function_call"}`
	heldOutput = `{"call_id":"call_held_1","output":"wrote","type":"function_call_output"}`
)

// TestPythonHeldCheckpointSettles loads the Python-written held-write
// checkpoints (1.18 and 1.19, run-again), settles them at resume entry on
// the session Python wrote, and checks the exact history and the rewritten
// checkpoint.
func TestPythonHeldCheckpointSettles(t *testing.T) {
	m := loadManifest(t)
	for _, tc := range []struct {
		fixture string
		label   string // the label Go writes back
	}{
		{"features/v1_18_held_pending_session_write.json", "1.18"},
		// A newer label than the held record needs (1.18) is kept, never
		// mislabelled as older.
		{"features/v1_19_held_pending_session_write.json", "1.19"},
	} {
		t.Run(filepath.Base(tc.fixture), func(t *testing.T) {
			ctx := context.Background()
			original := runstateFixture(t, tc.fixture)
			cp, err := runstate.Load(original)
			require.NoError(t, err)
			require.NotNil(t, cp.Pending)
			require.True(t, cp.Pending.Held)
			require.Equal(t, "session-118", cp.Pending.SessionID)

			st := openPythonDB(t, "python_sessions.db")
			s, err := st.Session("session-118")
			require.NoError(t, err)
			pyRows := m.Rows["python_sessions.db"]["session-118"]
			require.Equal(t, pyRows, rows(t, st, "session-118"), "the Python-written history reads back byte for byte")

			_, err = cp.Resume(ctx, s)
			require.NoError(t, err)
			want := append(slices.Clone(pyRows), heldCall, heldOutput)
			assert.Equal(t, want, rows(t, st, "session-118"), "call then output, once, after Python's history")
			items, err := s.Items(ctx)
			require.NoError(t, err)
			assert.Equal(t, want, texts(items))
			assert.Nil(t, cp.Pending)
			assert.Equal(t, 2, cp.PersistedCount)

			// A second resume finds nothing to do and writes nothing.
			_, err = cp.Resume(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, want, rows(t, st, "session-118"))

			written, err := cp.MarshalJSON()
			require.NoError(t, err)
			assertRewrite(t, original, written, tc.label, 2, true)
			checkPythonKeyRules(t, written)
			again, err := runstate.Load(written)
			require.NoError(t, err, "Go reads back what it wrote")
			assert.Nil(t, again.Pending)
			golden(t, strings.TrimSuffix(filepath.Base(tc.fixture), ".json")+"_settled", written)
		})
	}
}

// TestPython117OrdinarySettles loads a 1.17 checkpoint with an ordinary
// pending write that Python registered (its before digests computed by
// Python) and settles it on the session Python wrote: appending when the
// batch has not landed, accepting a lost acknowledgement when Python's
// append had committed, and recording the tail itself when no append was
// attempted yet.
func TestPython117OrdinarySettles(t *testing.T) {
	m := loadManifest(t)
	output := compact(t, `{"call_id": "call_117", "output": "sunny, 21\u00b0C", "type": "function_call_output"}`)
	for _, tc := range []struct {
		name       string
		checkpoint string
		db         string
		want       func(py []string) []string
	}{
		{"before recorded, batch not landed: append once", "v1_17_ordinary_pending_session_write.json", "python_sessions.db",
			func(py []string) []string { return append(slices.Clone(py), output) }},
		{"before recorded, Python's append committed (lost acknowledgement): accept, no duplicate", "v1_17_ordinary_pending_session_write.json", "python_sessions_committed.db",
			func(py []string) []string { return py }},
		{"no append attempted yet: record the tail, append once", "v1_17_ordinary_unattempted.json", "python_sessions.db",
			func(py []string) []string { return append(slices.Clone(py), output) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			original := readFixture(t, filepath.Join(pyDir, tc.checkpoint))
			cp, err := runstate.Load(original)
			require.NoError(t, err)
			require.Equal(t, "1.17", cp.Schema)
			require.NotNil(t, cp.Pending)
			require.False(t, cp.Pending.Held)
			require.Equal(t, "ordinary", cp.Pending.Variant())
			require.Equal(t, 1, cp.PersistedCount)

			st := openPythonDB(t, tc.db)
			s, err := st.Session("session-117")
			require.NoError(t, err)
			pyRows := m.Rows[tc.db]["session-117"]
			require.Equal(t, pyRows, rows(t, st, "session-117"))

			// Go digests Python's rows exactly as Python did.
			items, err := s.Items(ctx)
			require.NoError(t, err)
			ds, err := history.Digests(items[:2], false)
			require.NoError(t, err)
			assert.Equal(t, m.Before117, ds, "Go's digests of the Python-written tail match Python's")
			if cp.Pending.Before != nil {
				assert.Equal(t, m.Before117, cp.Pending.Before)
			}

			_, err = cp.Resume(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, tc.want(pyRows), rows(t, st, "session-117"))
			assert.Nil(t, cp.Pending)
			assert.Equal(t, 2, cp.PersistedCount, "the record's persisted_count")

			written, err := cp.MarshalJSON()
			require.NoError(t, err)
			assertRewrite(t, original, written, "1.17", 2, true)
			checkPythonKeyRules(t, written)
			_, err = runstate.Load(written)
			require.NoError(t, err)
		})
	}
	t.Run("the settled checkpoint", func(t *testing.T) {
		cp, err := runstate.Load(readFixture(t, filepath.Join(pyDir, "v1_17_ordinary_pending_session_write.json")))
		require.NoError(t, err)
		st := openPythonDB(t, "python_sessions.db")
		s, err := st.Session("session-117")
		require.NoError(t, err)
		_, err = cp.Resume(context.Background(), s)
		require.NoError(t, err)
		written, err := cp.MarshalJSON()
		require.NoError(t, err)
		golden(t, "v1_17_ordinary_pending_session_write_settled", written)
	})
}

// failInserts makes every insert into the Python-written messages table
// fail inside SQLite itself, as a full disk would.
func failInserts(t *testing.T, st *sqlite.Store) {
	t.Helper()
	_, err := st.DB().ExecContext(context.Background(),
		`CREATE TRIGGER fail_insert BEFORE INSERT ON agent_messages BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
	require.NoError(t, err)
}

func healInserts(t *testing.T, st *sqlite.Store) {
	t.Helper()
	_, err := st.DB().ExecContext(context.Background(), `DROP TRIGGER fail_insert`)
	require.NoError(t, err)
}

// TestPythonFailedSettleLeavesLoadableRecord: when the settle's append
// fails, the checkpoint Go writes still carries the batch, as an ordinary
// record under the document's own label with the key set Python's loader
// accepts; a later resume
// (a new process loading that checkpoint) settles it exactly once.
func TestPythonFailedSettleLeavesLoadableRecord(t *testing.T) {
	m := loadManifest(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		checkpoint []byte
		id         string
		count      int // current_turn_persisted_item_count written while the record stands
		before     []string
		appended   []string
		label      string // the label Go writes: the document's own
	}{
		{"v1_18_held_pending_session_write", runstateFixture(t, "features/v1_18_held_pending_session_write.json"),
			"session-118", 0, []string{m.Digests["user_118"]}, []string{heldCall, heldOutput}, "1.18"},
		{"v1_17_ordinary_unattempted", readFixture(t, filepath.Join(pyDir, "v1_17_ordinary_unattempted.json")),
			"session-117", 1, m.Before117, []string{compact(t, `{"call_id":"call_117","output":"sunny, 21\u00b0C","type":"function_call_output"}`)}, "1.17"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := runstate.Load(tc.checkpoint)
			require.NoError(t, err)
			st := openPythonDB(t, "python_sessions.db")
			s, err := st.Session(tc.id)
			require.NoError(t, err)
			pyRows := m.Rows["python_sessions.db"][tc.id]

			failInserts(t, st)
			_, err = cp.Resume(ctx, s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "disk full", "the session's own error comes back")
			assert.Equal(t, pyRows, rows(t, st, tc.id), "nothing was written")
			require.NotNil(t, cp.Pending, "the record stays for the next resume")
			assert.False(t, cp.Pending.Held, "a held batch settling at entry is registered as the ordinary write")
			assert.Equal(t, tc.before, cp.Pending.Before, "the tail read before the append attempt")

			written, err := cp.MarshalJSON()
			require.NoError(t, err)
			assertRewrite(t, tc.checkpoint, written, tc.label, tc.count, false)
			checkPythonKeyRules(t, written)
			w := members(t, members(t, written)["pending_session_write"])
			assert.Equal(t, []string{"before", "items", "persisted_count", "session_id"}, keys(w))
			golden(t, tc.name+"_append_failed", written)

			// A new process loads Go's checkpoint and settles it once the
			// store works again.
			healInserts(t, st)
			next, err := runstate.Load(written)
			require.NoError(t, err)
			_, err = next.Resume(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, append(slices.Clone(pyRows), tc.appended...), rows(t, st, tc.id))
			assert.Nil(t, next.Pending)
			_, err = next.Resume(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, append(slices.Clone(pyRows), tc.appended...), rows(t, st, tc.id), "exactly once")
		})
	}
}

// TestPython117ForeignWriteRefused: a history that changed after Python
// recorded its tail (another writer appended) proves neither outcome; the
// settle refuses, writes nothing, and the written checkpoint keeps the
// Python record unchanged under its 1.17 label.
func TestPython117ForeignWriteRefused(t *testing.T) {
	m := loadManifest(t)
	ctx := context.Background()
	original := readFixture(t, filepath.Join(pyDir, "v1_17_ordinary_pending_session_write.json"))
	cp, err := runstate.Load(original)
	require.NoError(t, err)
	st := openPythonDB(t, "python_sessions.db")
	s, err := st.Session("session-117")
	require.NoError(t, err)
	foreign := session.MustItem(`{"role":"user","content":"someone else"}`)
	require.NoError(t, s.AddItems(ctx, []session.Item{foreign}))

	_, err = cp.Resume(ctx, s)
	require.True(t, errors.Is(err, runstate.ErrCannotReconcile), "got %v", err)
	assert.Equal(t, append(slices.Clone(m.Rows["python_sessions.db"]["session-117"]), foreign.String()), rows(t, st, "session-117"))
	require.NotNil(t, cp.Pending)

	written, err := cp.MarshalJSON()
	require.NoError(t, err)
	assertRewrite(t, original, written, "1.17", 1, false)
	checkPythonKeyRules(t, written)
	jsonEqual(t, members(t, original)["pending_session_write"], members(t, written)["pending_session_write"],
		"the Python record is written back unchanged")
	golden(t, "v1_17_ordinary_pending_session_write_refused", written)
}

// The Python-written stores hold what the manifest says, and Go's sqlite
// adapter reads them as Python wrote them.
func TestPythonStores(t *testing.T) {
	m := loadManifest(t)
	require.NotEmpty(t, m.Python)
	for db, sessions := range m.Rows {
		st := openPythonDB(t, db)
		for id, want := range sessions {
			assert.Equal(t, want, rows(t, st, id), "%s %s", db, id)
			s, err := st.Session(id)
			require.NoError(t, err)
			items, err := s.Items(context.Background())
			require.NoError(t, err)
			assert.Equal(t, want, texts(items), "%s %s through the adapter", db, id)
		}
	}
	item := func(s string) session.Item { return session.MustItem(s) }
	for name, raw := range map[string]string{
		"user_118":   m.Rows["python_sessions.db"]["session-118"][0],
		"user_117":   m.Rows["python_sessions.db"]["session-117"][0],
		"call_117":   m.Rows["python_sessions.db"]["session-117"][1],
		"output_117": m.Rows["python_sessions_committed.db"]["session-117"][2],
	} {
		d, err := history.Digest(item(raw), false)
		require.NoError(t, err)
		assert.Equal(t, m.Digests[name], d, name)
	}
}
