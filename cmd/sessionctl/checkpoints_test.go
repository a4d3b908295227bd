package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// Items of the checkpoint tests, in the JSON text the store keeps.
const (
	cpUser   = `{"role":"user","content":"write the report"}`
	cpCall   = `{"type":"function_call","id":"fc_1","call_id":"c1","name":"write_file","arguments":"{}"}`
	cpOutput = `{"type":"function_call_output","call_id":"c1","output":"done"}`
	cpAnswer = `{"type":"message","role":"assistant","content":"The report is written."}`
	// cpCallParked is cpCall as runstate.Park converts it (keys sorted).
	cpCallParked = `{"arguments":"{}","call_id":"c1","id":"fc_1","name":"write_file","type":"function_call"}`
	cpZeroDig    = "0000000000000000000000000000000000000000000000000000000000000000"
)

// cpOpen opens dsn read-write for the test to write through.
func cpOpen(t *testing.T, dsn string) adapters.Store {
	t.Helper()
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// cpSession returns session id of st with the checkpoint capability,
// holding items.
func cpSession(t *testing.T, st adapters.Store, id string, items ...string) session.CheckpointStore {
	t.Helper()
	s, err := st.Session(id)
	require.NoError(t, err)
	cs, ok := s.(session.CheckpointStore)
	require.True(t, ok, "the store's sessions keep checkpoints")
	if len(items) > 0 {
		its, err := session.ParseItems(items...)
		require.NoError(t, err)
		require.NoError(t, s.AddItems(context.Background(), its))
	}
	return cs
}

func cpSave(t *testing.T, cs session.CheckpointStore, name string, doc []byte) {
	t.Helper()
	v, err := cs.SaveCheckpoint(context.Background(), name, doc, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
}

func cpItems(t *testing.T, items ...string) []session.Item {
	t.Helper()
	its, err := session.ParseItems(items...)
	require.NoError(t, err)
	return its
}

func cpDigests(t *testing.T, items ...string) []string {
	t.Helper()
	ds, err := history.Digests(cpItems(t, items...), false)
	require.NoError(t, err)
	return ds
}

// ordinaryDoc writes a 1.17 document by hand, as the Python SDK writes it:
// a run-again step and an ordinary pending write of items whose before
// digests are before (nil: null, no append attempted).
func ordinaryDoc(t *testing.T, sessionID string, items []string, before []string) []byte {
	t.Helper()
	b := "null"
	if before != nil {
		raw, err := json.Marshal(before)
		require.NoError(t, err)
		b = string(raw)
	}
	doc := fmt.Sprintf(`{"$schemaVersion": "1.17", "current_step": {"type": "next_step_run_again"}, "current_turn_persisted_item_count": 1, `+
		`"pending_session_write": {"session_id": %q, "items": [%s], "before": %s, "persisted_count": %d}}`,
		sessionID, strings.Join(items, ", "), b, 1+len(items))
	cp, err := runstate.Load([]byte(doc))
	require.NoError(t, err, "the hand-written document is one runstate reads")
	require.NotNil(t, cp.Pending)
	require.False(t, cp.Pending.Held)
	return []byte(doc)
}

// brokenDoc is a checkpoint document Load refuses: a step of a type no
// SDK writes, whose name (which Load's error quotes) holds a C1 control
// (CSI, which a terminal reads as ESC [) and a bidirectional override.
const brokenDoc = "{\"$schemaVersion\": \"1.17\", \"current_step\": {\"type\": \"\u009b31m\u202ebogus\"}}"

// brokenErr is Load's error for brokenDoc.
func brokenErr(t *testing.T) string {
	t.Helper()
	_, err := runstate.Load([]byte(brokenDoc))
	require.Error(t, err, "the broken document is one runstate refuses")
	require.Contains(t, err.Error(), "\u009b31m\u202ebogus", "Load's error quotes the step type")
	return err.Error()
}

// seedCheckpointStore writes, through the checkpoint capability, one
// session per case:
//
//	plain      no checkpoint
//	held       a held record (runstate.Park) awaiting approval of c1
//	landed     an ordinary record whose batch is in the tail after its before digests
//	notlanded  an ordinary record whose before digests are the tail
//	notstarted an ordinary record with null before
//	ambiguous  an ordinary record whose before digests are not the tail's
//	broken     an unreadable document, and a checkpoint without a record
//	over       a terminal checkpoint
func seedCheckpointStore(t *testing.T, dsn string) {
	t.Helper()
	st := cpOpen(t, dsn)
	ctx := context.Background()

	cpSession(t, st, "plain", cpUser)

	held := cpSession(t, st, "held", cpUser)
	cp := runstate.New()
	cp.Step = runstate.Step{Kind: runstate.StepInterruption, PendingCallIDs: []string{"c1"}}
	require.NoError(t, cp.Park(held, cpItems(t, cpCall), runstate.ParkOptions{}))
	require.NotNil(t, cp.Pending)
	require.True(t, cp.Pending.Held)
	doc, err := cp.MarshalJSON()
	require.NoError(t, err)
	cpSave(t, held, "run", doc)

	landed := cpSession(t, st, "landed", cpUser, cpCall, cpOutput, cpAnswer)
	cpSave(t, landed, "run", ordinaryDoc(t, "landed", []string{cpOutput, cpAnswer}, cpDigests(t, cpUser, cpCall)))

	notLanded := cpSession(t, st, "notlanded", cpUser, cpCall)
	cpSave(t, notLanded, "run", ordinaryDoc(t, "notlanded", []string{cpOutput, cpAnswer}, cpDigests(t, cpUser, cpCall)))

	notStarted := cpSession(t, st, "notstarted", cpUser)
	cpSave(t, notStarted, "run", ordinaryDoc(t, "notstarted", []string{cpAnswer}, nil))

	ambiguous := cpSession(t, st, "ambiguous", cpUser, cpCall, cpOutput)
	cpSave(t, ambiguous, "run", ordinaryDoc(t, "ambiguous", []string{cpOutput}, []string{cpZeroDig, cpZeroDig}))

	broken := cpSession(t, st, "broken", cpUser)
	cpSave(t, broken, "bad", []byte(brokenDoc))
	brokenErr(t)
	idle := runstate.New()
	idle.Step = runstate.Step{Kind: runstate.StepRunAgain}
	doc, err = idle.MarshalJSON()
	require.NoError(t, err)
	cpSave(t, broken, "idle", doc)

	over := cpSession(t, st, "over", cpUser)
	cpSave(t, over, "run", []byte(`{"$schemaVersion": "1.17", "current_step": null, "terminal_unrecoverable": true}`))

	names, err := broken.ListCheckpoints(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"bad", "idle"}, names)
}

// storedState is every session's items and checkpoints (document and
// version), to show the read-only commands change nothing.
func storedState(t *testing.T, dsn string) map[string]string {
	t.Helper()
	ctx := context.Background()
	st := cpOpen(t, dsn)
	ids, err := st.(adapters.Lister).ListSessions(ctx)
	require.NoError(t, err)
	out := map[string]string{}
	for _, id := range ids {
		s, err := st.Session(id)
		require.NoError(t, err)
		items, err := session.All(ctx, s)
		require.NoError(t, err)
		var b strings.Builder
		for _, it := range items {
			b.WriteString(it.String() + "\n")
		}
		cs := s.(session.CheckpointStore)
		names, err := cs.ListCheckpoints(ctx)
		require.NoError(t, err)
		for _, n := range names {
			doc, v, err := cs.LoadCheckpoint(ctx, n)
			require.NoError(t, err)
			fmt.Fprintf(&b, "checkpoint %s v%d %q\n", n, v, doc)
		}
		out[id] = b.String()
	}
	return out
}

// listColumns returns list's CHECKPOINT column per session.
func listColumns(t *testing.T, out string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	head := lines[0]
	at := strings.Index(head, "CHECKPOINT")
	require.Positive(t, at, "a CHECKPOINT column: %q", head)
	cols := map[string]string{}
	for _, l := range lines[1 : len(lines)-1] {
		id := strings.Trim(strings.Fields(l)[0], `"`)
		rest := l[at:]
		cols[id] = strings.Fields(rest + " ")[0]
	}
	return cols
}

func TestCheckpointsListInspectDoctor(t *testing.T) {
	dsn := checkpointStoreURL(t)
	seedCheckpointStore(t, dsn)
	before := storedState(t, dsn)

	// list: the column, and -json's fields.
	code, out, stderr := sessionctl(t, "list", dsn)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, map[string]string{
		"plain": "-", "held": "approval", "landed": "recover", "notlanded": "recover", "notstarted": "recover",
		"ambiguous": "recover", "broken": "unreadable,model", "over": "terminal",
	}, listColumns(t, out), out)
	require.Regexp(t, `(?m)^"broken" .* unreadable,model\s+1 unreadable checkpoint \(run inspect\); "idle" settled, waiting for its model call$`, out)

	code, out, stderr = sessionctl(t, "list", "-json", dsn)
	require.Equal(t, 0, code, stderr)
	var lr listReport
	require.NoError(t, json.Unmarshal([]byte(out), &lr))
	got := map[string]listSession{}
	for _, ls := range lr.Sessions {
		got[ls.SessionID] = ls
	}
	require.Len(t, got, 8)
	require.Equal(t, "-", got["plain"].Checkpoint)
	require.Empty(t, got["plain"].Checkpoints)
	require.Len(t, got["held"].Checkpoints, 1)
	held := got["held"].Checkpoints[0]
	held.Bytes = 0
	require.Equal(t, listCheckpoint{Name: "run", Version: 1, State: "held", nextJSON: nextJSON{Next: "approval", CallIDs: []string{"c1"}}}, held)
	require.Equal(t, "unreadable,model", got["broken"].Checkpoint)
	require.Len(t, got["broken"].Checkpoints, 2)
	require.Equal(t, "bad", got["broken"].Checkpoints[0].Name)
	require.Equal(t, "unreadable", got["broken"].Checkpoints[0].State)
	require.Equal(t, brokenErr(t), got["broken"].Checkpoints[0].Error, "Load's error")
	idle := got["broken"].Checkpoints[1]
	idle.Bytes = 0
	require.Equal(t, listCheckpoint{Name: "idle", Version: 1, State: "none", nextJSON: nextJSON{Next: "model"}}, idle)

	// inspect: after the history, each checkpoint and its record.
	code, out, stderr = sessionctl(t, "inspect", dsn, "held")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(out, "\n")
	hist := strings.Index(out, "0 problems (0 severe), 0 unreadable records\n")
	require.Positive(t, hist, out)
	require.Contains(t, out[hist:], "checkpoint \"run\" version 1: schema 1.18, step next_step_interruption, awaiting approval: c1\n"+
		"  held record: 1 item, persisted count 1, before digests not set (a held write has none)\n"+
		"      0  function_call c1         "+cpCallParked+"\n"+
		"  next: awaiting approval of c1\n"+
		"1 checkpoint, 0 unreadable\n", "the checkpoint section comes after the history")
	require.Equal(t, "", lines[len(lines)-1])

	code, out, _ = sessionctl(t, "inspect", dsn, "landed")
	require.Equal(t, 0, code)
	require.Contains(t, out, "checkpoint \"run\" version 1: schema 1.17, step next_step_run_again, awaiting approval: none\n"+
		"  ordinary record: 2 items, persisted count 3, before digests set (2 digests)\n"+
		"      0  function_call_output c1  "+cpOutput+"\n"+
		"      1  message/assistant        "+cpAnswer+"\n")

	code, out, _ = sessionctl(t, "inspect", dsn, "notstarted")
	require.Equal(t, 0, code)
	require.Contains(t, out, "  ordinary record: 1 item, persisted count 2, before digests not set (no append attempted)\n")

	code, out, _ = sessionctl(t, "inspect", "-width", "30", dsn, "landed")
	require.Equal(t, 0, code)
	require.Contains(t, out, "      0  function_call_output c1  "+truncate(cpOutput, 30)+"\n", "record items are cut to -width as history items are")

	code, out, stderr = sessionctl(t, "inspect", dsn, "broken")
	require.Equal(t, 1, code, "an unreadable checkpoint is an error of the diagnosis, as in doctor: %s", stderr)
	require.Contains(t, out, `checkpoint "bad" version 1: unreadable (`+fmt.Sprint(len(brokenDoc))+` bytes, left in the store): `+sanitize(brokenErr(t))+"\n", "Load's error, escaped")
	require.Contains(t, out, `\u009b31m\u202ebogus`, "the control characters are escaped")
	require.NotContains(t, out, "\u009b", "no raw control reaches the terminal")
	require.NotContains(t, out, "\u202e", "no raw override reaches the terminal")
	require.Contains(t, out, "checkpoint \"idle\" version 1: schema 1.17, step next_step_run_again, awaiting approval: none\n  no pending write (persisted count 0)\n")
	require.Contains(t, out, "2 checkpoints, 1 unreadable\n")

	code, out, _ = sessionctl(t, "inspect", dsn, "over")
	require.Equal(t, 0, code)
	require.Contains(t, out, "step none, awaiting approval: none\n  terminal: the run is never resumed (terminal_unrecoverable)\n")

	code, out, _ = sessionctl(t, "inspect", dsn, "plain")
	require.Equal(t, 0, code)
	require.True(t, strings.HasSuffix(out, "0 problems (0 severe), 0 unreadable records\n"), "no checkpoint section without a checkpoint: %s", out)
	code, out, _ = sessionctl(t, "inspect", "-json", dsn, "plain")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"checkpoints": []`, "-json says the store keeps checkpoints and this session has none")

	code, out, stderr = sessionctl(t, "inspect", "-json", dsn, "landed")
	require.Equal(t, 0, code, stderr)
	var ir inspectReport
	require.NoError(t, json.Unmarshal([]byte(out), &ir))
	require.Len(t, ir.Checkpoints, 1)
	c := ir.Checkpoints[0]
	require.Equal(t, "run", c.Name)
	require.Equal(t, "pending", c.State)
	require.Equal(t, "1.17", c.Schema)
	require.Equal(t, "next_step_run_again", c.Step)
	require.NotNil(t, c.Record)
	require.False(t, c.Record.Held)
	require.True(t, c.Record.BeforeSet)
	require.Equal(t, cpDigests(t, cpUser, cpCall), c.Record.Before)
	require.Equal(t, 3, c.Record.PersistedCount)
	require.Equal(t, []checkpointItem{
		{Index: 0, Type: "function_call_output", CallID: "c1", Item: cpOutput},
		{Index: 1, Type: "message", Role: "assistant", Item: cpAnswer},
	}, c.Record.Items, "record items are their stored JSON text exactly")

	code, out, _ = sessionctl(t, "inspect", "-json", dsn, "held")
	require.Equal(t, 0, code)
	ir = inspectReport{}
	require.NoError(t, json.Unmarshal([]byte(out), &ir))
	require.Len(t, ir.Checkpoints, 1)
	require.Equal(t, []string{"c1"}, ir.Checkpoints[0].PendingCallIDs)
	require.True(t, ir.Checkpoints[0].Record.Held)
	require.False(t, ir.Checkpoints[0].Record.BeforeSet)
	require.Nil(t, ir.Checkpoints[0].Record.Before)

	// doctor: what the next resume does with each pending write.
	code, out, stderr = sessionctl(t, "doctor", dsn)
	require.Equal(t, 1, code, "an ambiguous write and an unreadable checkpoint are errors: %s%s", out, stderr)
	want := []string{
		`error: session "ambiguous" checkpoint "run" (version 1): pending write can be neither confirmed nor refuted: the session's newest 3 items match neither its 2 before digests followed by its 1 item nor its before digests alone; the next resume refuses it (repair the session first; do not rerun the completed tool)`,
		`error: session "broken" checkpoint "bad" (version 1): unreadable (` + fmt.Sprint(len(brokenDoc)) + ` bytes, left in the store): ` + sanitize(brokenErr(t)) + "\n",
		`note: session "held" checkpoint "run" (version 1): held write of 1 item, awaiting approval of c1`,
		`note: session "landed" checkpoint "run" (version 1): pending write of 2 items landed, the next resume accepts it`,
		`note: session "notlanded" checkpoint "run" (version 1): pending write of 2 items not landed, the next resume appends it`,
		`note: session "notstarted" checkpoint "run" (version 1): pending write of 1 item not started, the next resume appends it`,
		`note: session "over" checkpoint "run" (version 1): terminal: the run is never resumed`,
	}
	for _, w := range want {
		require.Contains(t, out, w)
	}
	require.NotContains(t, out, `session "plain"`, "a session without checkpoint or problem has no finding")
	require.Contains(t, out, `note: session "broken" checkpoint "idle" (version 1): settled, waiting for its model call`+"\n", "a checkpoint without a record says what comes next")
	require.NotContains(t, out, "\u009b")
	require.NotContains(t, out, "\u202e")
	require.Contains(t, out, "8 sessions checked, 2 with errors\n")

	for _, tc := range []struct {
		id   string
		code int
	}{{"held", 0}, {"landed", 0}, {"notlanded", 0}, {"notstarted", 0}, {"over", 0}, {"ambiguous", 1}, {"broken", 1}} {
		code, out, _ := sessionctl(t, "doctor", dsn, "--session", tc.id)
		require.Equal(t, tc.code, code, "%s: %s", tc.id, out)
	}

	code, out, _ = sessionctl(t, "doctor", "-json", dsn)
	require.Equal(t, 1, code)
	var dr doctorReport
	require.NoError(t, json.Unmarshal([]byte(out), &dr))
	require.Equal(t, 2, dr.SessionsWithErrors)
	kinds := map[string]string{}
	for _, ds := range dr.Sessions {
		for _, f := range ds.Checkpoints {
			kinds[ds.SessionID+"/"+f.Checkpoint] = f.Kind + " " + f.Severity + " " + fmt.Sprint(f.Severe)
		}
	}
	require.Equal(t, map[string]string{
		"ambiguous/run":  "pending-write-ambiguous error true",
		"broken/bad":     "unreadable-checkpoint error true",
		"broken/idle":    "run-model note false",
		"held/run":       "held-write note false",
		"landed/run":     "pending-write-landed note false",
		"notlanded/run":  "pending-write-not-landed note false",
		"notstarted/run": "pending-write-not-started note false",
		"over/run":       "terminal note false",
	}, kinds)
	var ids []string
	for _, ds := range dr.Sessions {
		ids = append(ids, ds.SessionID)
	}
	sort.Strings(ids)
	require.Equal(t, []string{"ambiguous", "broken", "held", "landed", "notlanded", "notstarted", "over"}, ids, "sessions with notes are reported, plain is not")

	require.Equal(t, before, storedState(t, dsn), "list, inspect and doctor wrote nothing")
}

// The digest rule follows the session: a batch that landed is refuted
// once the tail moves on past it, and a tail that changed under a write
// that had not landed is ambiguous.
func TestDoctorCheckpointRuleFollowsTheTail(t *testing.T) {
	dsn := checkpointStoreURL(t)
	st := cpOpen(t, dsn)
	s := cpSession(t, st, "s", cpUser, cpCall)
	cpSave(t, s, "run", ordinaryDoc(t, "s", []string{cpOutput}, cpDigests(t, cpUser, cpCall)))

	doctor := func() (int, string) {
		code, out, _ := sessionctl(t, "doctor", dsn)
		return code, out
	}
	code, out := doctor()
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "pending write of 1 item not landed")

	require.NoError(t, s.AddItems(context.Background(), cpItems(t, cpOutput)))
	code, out = doctor()
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "pending write of 1 item landed")

	require.NoError(t, s.AddItems(context.Background(), cpItems(t, cpAnswer)))
	code, out = doctor()
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "pending write can be neither confirmed nor refuted")

	// Before == [] (an empty session at the append): unchanged only while
	// the session is empty.
	e := cpSession(t, st, "empty")
	cpSave(t, e, "run", ordinaryDoc(t, "empty", []string{cpUser}, []string{}))
	code, out, _ = sessionctl(t, "doctor", dsn, "--session", "empty")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "pending write of 1 item not landed")
	require.NoError(t, e.AddItems(context.Background(), cpItems(t, cpUser)))
	code, out, _ = sessionctl(t, "doctor", dsn, "--session", "empty")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "pending write of 1 item landed")

	// A record naming another session is not checked against this one.
	x := cpSession(t, st, "x", cpUser)
	cpSave(t, x, "run", ordinaryDoc(t, "y", []string{cpAnswer}, []string{cpZeroDig}))
	code, out, _ = sessionctl(t, "doctor", dsn, "--session", "x")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, `warning: session "x" checkpoint "run" (version 1): pending write of 1 item belongs to session "y"; a resume with this session refuses it`)
	require.NotContains(t, out, "neither confirmed nor refuted")
}

// checkpointStoreURL is the store the checkpoint tests write and read: an
// SQLite file (whose sessions keep checkpoints in agent_checkpoints).
func checkpointStoreURL(t *testing.T) string { return sqliteURL(t, "checkpoints.db") }

// A database from before checkpoints (no checkpoints table, as Python's
// sqlite3 session writes it) is listed, inspected and diagnosed without a
// checkpoint, and the read-only commands do not create the table.
func TestCheckpointColumnsOnAStoreWithoutTheTable(t *testing.T) {
	dsn := checkpointStoreURL(t)
	seed(t, dsn, "a", cpUser)
	path := strings.TrimPrefix(dsn, "sqlite://")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec(`DROP TABLE agent_checkpoints`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	tables := sqliteTables(t, path)
	require.NotContains(t, tables, "agent_checkpoints")

	code, out, stderr := sessionctl(t, "list", dsn)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, map[string]string{"a": "-"}, listColumns(t, out))
	code, out, stderr = sessionctl(t, "inspect", dsn, "a")
	require.Equal(t, 0, code, stderr)
	require.True(t, strings.HasSuffix(out, "0 problems (0 severe), 0 unreadable records\n"), out)
	code, out, stderr = sessionctl(t, "doctor", dsn)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "1 session checked, 0 with errors\n", out)
	require.Equal(t, tables, sqliteTables(t, path), "no table created")
}
