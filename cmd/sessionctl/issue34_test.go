package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/storetest"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// Issue 34 item 5: operators keep every approval.

// runOpts are the options of the runs the tests park: a held turn under
// the output-guardrail gate, as an agent with output guardrails that
// stops on its first tool writes it.
var runOpts = runstate.Options{OutputGuardrails: true, ToolUse: runstate.ToolUseStopOnFirstTool, Owner: "agent-host:4242"}

// einoDoc stands for eino's checkpoint: gob bytes, not JSON.
var einoDoc = []byte("\x0f\xff\x81\x03\x01\x01\x0bCheckPoint\x01\xff\x82\x00\x01\x02\x01\x05Chans\x01\x0c\x00\x00\x00\x07\xff\x82\x01\x03abc\x00")

// openRun opens a run on session id of st.
func openRun(t *testing.T, st adapters.Store, id string) *runstate.Run {
	t.Helper()
	s, err := st.Session(id)
	require.NoError(t, err)
	run, err := runstate.Open(context.Background(), s, runOpts)
	require.NoError(t, err)
	return run
}

// seedRuns writes, with the runstate API, one session per case:
//
//	parked   its input stored, a turn awaiting approval of c1 (held)
//	claimed  parked, then c1 claimed (the process died in the tool): in doubt
//	settled  c1 approved, claimed, answered and settled: waits for its model call after resp_1
//	cponly   nothing but its checkpoint: a turn awaiting approval of c2, no input stored
//	eino     an item and an eino checkpoint (opaque gob bytes)
func seedRuns(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	call := cpItems(t, cpCall)
	user := cpItems(t, cpUser)

	run := openRun(t, st, "parked")
	require.NoError(t, run.Input(ctx, user...))
	require.NoError(t, run.Interrupt(ctx, "resp_1", call, "c1"))

	run = openRun(t, st, "claimed")
	require.NoError(t, run.Input(ctx, user...))
	require.NoError(t, run.Interrupt(ctx, "resp_1", call, "c1"))
	require.NoError(t, run.Claim(ctx, "c1"))

	run = openRun(t, st, "settled")
	require.NoError(t, run.Input(ctx, user...))
	require.NoError(t, run.Interrupt(ctx, "resp_1", call, "c1"))
	require.NoError(t, run.Claim(ctx, "c1"))
	require.NoError(t, run.Output(ctx, cpItems(t, cpOutput)[0]))
	require.NoError(t, run.Settle(ctx))

	run = openRun(t, st, "cponly")
	require.NoError(t, run.Interrupt(ctx, "resp_9", cpItems(t, `{"type":"function_call","id":"fc_2","call_id":"c2","name":"send_mail","arguments":"{}"}`), "c2"))

	seed(t, dsn, "eino", cpUser)
	s, err := st.Session("eino")
	require.NoError(t, err)
	cs := s.(session.CheckpointStore)
	v, err := cs.SaveCheckpoint(ctx, "eino", einoDoc, 0)
	require.NoError(t, err)
	v, err = cs.SaveCheckpoint(ctx, "eino", einoDoc, v)
	require.NoError(t, err)
	require.Equal(t, int64(2), v)

	// What each run must do next, as a process that loads it sees it.
	for id, want := range map[string]runstate.Next{
		"parked":  {Kind: runstate.NextApproval, CallIDs: []string{"c1"}},
		"claimed": {Kind: runstate.NextResolve, CallIDs: []string{"c1"}},
		"settled": {Kind: runstate.NextModel, ResponseID: "resp_1"},
		"cponly":  {Kind: runstate.NextApproval, CallIDs: []string{"c2"}},
	} {
		require.Equal(t, want, storedNext(t, st, id), id)
	}
	s, err = st.Session("cponly")
	require.NoError(t, err)
	items, err := session.All(ctx, s)
	require.NoError(t, err)
	require.Empty(t, items, "cponly holds nothing but its checkpoint")
}

// storedNext is what runstate.Open on session id of st says comes next.
func storedNext(t *testing.T, st adapters.Store, id string) runstate.Next {
	t.Helper()
	s, err := st.Session(id)
	require.NoError(t, err)
	doc, _, err := s.(session.CheckpointStore).LoadCheckpoint(context.Background(), runstate.DefaultName)
	require.NoError(t, err)
	cp, err := runstate.Load(doc)
	require.NoError(t, err)
	n := cp.Next()
	run, err := runstate.Open(context.Background(), s, runOpts)
	require.NoError(t, err)
	require.Equal(t, n, run.Next(), "%s: runstate.Open sees what Checkpoint.Next says", id)
	return n
}

// allCheckpoints is every checkpoint of every session the test names:
// session/name -> version and document.
func allCheckpoints(t *testing.T, dsn string, ids ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	out := map[string]string{}
	for _, id := range ids {
		s, err := st.Session(id)
		require.NoError(t, err)
		cs := s.(session.CheckpointStore)
		names, err := cs.ListCheckpoints(ctx)
		require.NoError(t, err)
		for _, n := range names {
			doc, _, err := cs.LoadCheckpoint(ctx, n)
			require.NoError(t, err)
			out[id+"/"+n] = string(doc)
		}
	}
	return out
}

var runIDs = []string{"claimed", "cponly", "eino", "parked", "settled"}

func TestMigrateCarriesCheckpoints(t *testing.T) {
	targets := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return sqliteURL(t, "b.db") },
		"redis": func(t *testing.T) string {
			return testservers.Redis(t) + "?key_prefix=" + storetest.Unique("mig")
		},
		"redis-cluster": func(t *testing.T) string {
			return "redis+cluster://" + strings.Join(testservers.RedisCluster(t), ",") + "?key_prefix=" + storetest.Unique("mig")
		},
		"mongo": func(t *testing.T) string {
			u, err := url.Parse(testservers.Mongo(t))
			require.NoError(t, err)
			u.Path = "/" + storetest.Unique("mig")
			return u.String()
		},
		"postgres": func(t *testing.T) string {
			p := testservers.Postgres(t)
			sep := "?"
			if strings.Contains(p, "?") {
				sep = "&"
			}
			u := storetest.Unique("mig")
			return p + sep + "messages_table=" + u + "_msg&sessions_table=" + u + "_ses&checkpoints_table=" + u + "_ck"
		},
	}
	for name, target := range targets {
		t.Run(name, func(t *testing.T) {
			src := sqliteURL(t, "a.db")
			seedRuns(t, src)
			dst := target(t)
			want := allCheckpoints(t, src, runIDs...)
			require.Len(t, want, 5)

			code, out, stderr := sessionctl(t, "migrate", "--from", src, "--to", dst)
			require.Equal(t, 0, code, out+stderr)
			require.Equal(t, "5 sessions: 5 copied, 0 already present, 0 failed; 5 checkpoints: 5 copied, 0 already present\n", out)
			require.Equal(t, want, allCheckpoints(t, dst, runIDs...), "every checkpoint arrives byte for byte")

			st, err := adapters.Open(context.Background(), dst)
			require.NoError(t, err)
			defer st.Close()
			srcSt, err := adapters.Open(context.Background(), src)
			require.NoError(t, err)
			defer srcSt.Close()
			for _, id := range []string{"parked", "claimed", "settled", "cponly"} {
				require.Equal(t, storedNext(t, srcSt, id), storedNext(t, st, id), id)
			}
			require.Equal(t, read(t, src, "parked"), read(t, dst, "parked"))

			// The destination lists the session that holds only a
			// checkpoint, with its state, and every other session once.
			code, out, stderr = sessionctl(t, "list", dst)
			require.Equal(t, 0, code, out+stderr)
			require.Regexp(t, `(?m)^"cponly"\s+0\s+0 .* approval\s+"run" awaiting approval of c2$`, out)
			require.Contains(t, out, "\n5 sessions\n")
			for _, id := range runIDs {
				require.Equal(t, 1, strings.Count(out, "\n\""+id+"\" "), id)
			}
			// So does doctor, which reads the listing.
			code, out, stderr = sessionctl(t, "doctor", dst)
			require.Equal(t, 0, code, out+stderr)
			require.Contains(t, out, `note: session "cponly" checkpoint "run" (version 1): held write of 1 item, awaiting approval of c2`)
			require.Contains(t, out, "5 sessions checked, 0 with errors, 1 needing an operator")

			// A second run finds everything there.
			code, out, stderr = sessionctl(t, "migrate", "--from", src, "--to", dst)
			require.Equal(t, 0, code, out+stderr)
			require.Equal(t, "5 sessions: 0 copied, 5 already present, 0 failed; 5 checkpoints: 0 copied, 5 already present\n", out)
		})
	}
}

// A destination holding a different checkpoint under the same name is
// refused for that session, which it leaves as it was.
func TestMigrateRefusesADifferentCheckpoint(t *testing.T) {
	src := sqliteURL(t, "a.db")
	seedRuns(t, src)
	dst := sqliteURL(t, "b.db")
	seed(t, dst, "other", cpUser)
	st, err := adapters.Open(context.Background(), dst)
	require.NoError(t, err)
	s, err := st.Session("parked")
	require.NoError(t, err)
	_, err = s.(session.CheckpointStore).SaveCheckpoint(context.Background(), runstate.DefaultName, []byte(`{"$schemaVersion": "1.17", "current_step": null}`), 0)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	code, out, stderr := sessionctl(t, "migrate", "--from", src, "--to", dst)
	require.Equal(t, 1, code, out+stderr)
	require.Contains(t, stderr, `session "parked": the destination already holds a different checkpoint "run" (version 1`)
	require.Contains(t, out, "5 sessions: 4 copied, 0 already present, 1 failed; 4 checkpoints: 4 copied, 0 already present\n")
	require.Empty(t, read(t, dst, "parked"), "the refused session got nothing")
	got := allCheckpoints(t, dst, "parked")
	require.Equal(t, `{"$schemaVersion": "1.17", "current_step": null}`, got["parked/run"], "not overwritten")
}

// A destination that keeps no checkpoints is refused, for every session
// holding one, with a non-zero exit.
func TestMigrateRefusesADestinationWithoutCheckpoints(t *testing.T) {
	src := sqliteURL(t, "a.db")
	seedRuns(t, src)
	seed(t, src, "plain", cpUser)
	dst := fmt.Sprintf("%s://%s", plainScheme, t.Name()) // sessions that are not CheckpointStores

	code, out, stderr := sessionctl(t, "migrate", "--offline", "--from", src, "--to", dst)
	require.Equal(t, 1, code, out+stderr)
	require.Contains(t, stderr, `session "parked": the destination cannot keep checkpoints`)
	require.Contains(t, stderr, `session "cponly": the destination cannot keep checkpoints`)
	require.Contains(t, out, "6 sessions: 1 copied, 0 already present, 5 failed; 0 checkpoints: 0 copied, 0 already present\n")
}

func TestListAndDoctorShowRunStates(t *testing.T) {
	dsn := sqliteURL(t, "runs.db")
	seedRuns(t, dsn)

	code, out, stderr := sessionctl(t, "list", dsn)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, map[string]string{"claimed": "in-doubt", "cponly": "approval", "eino": "opaque", "parked": "approval", "settled": "model"},
		listColumns(t, out), out)
	require.Regexp(t, `(?m)^"claimed" .* in-doubt\s+"run" in doubt: c1 \(claimed \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ by agent-host:4242\)$`, out)
	require.Regexp(t, `(?m)^"cponly"\s+0\s+0 .* approval\s+"run" awaiting approval of c2$`, out)
	require.Regexp(t, `(?m)^"settled" .* model\s+"run" settled, waiting for its model call \(after response resp_1\)$`, out)
	require.Regexp(t, `(?m)^"eino" .* opaque\s+"eino" opaque \(`+fmt.Sprint(len(einoDoc))+` bytes, version 2\)$`, out)

	code, out, stderr = sessionctl(t, "list", "-json", dsn)
	require.Equal(t, 0, code, stderr)
	var lr listReport
	require.NoError(t, json.Unmarshal([]byte(out), &lr))
	rows := map[string]listSession{}
	for _, r := range lr.Sessions {
		rows[r.SessionID] = r
	}
	require.Len(t, rows, 5)
	c := rows["claimed"].Checkpoints[0]
	require.Equal(t, "in-doubt", c.Next)
	require.Equal(t, []string{"c1"}, c.CallIDs)
	require.Len(t, c.Claims, 1)
	require.Equal(t, "c1", c.Claims[0].CallID)
	require.Equal(t, "agent-host:4242", c.Claims[0].By)
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, c.Claims[0].ClaimedAt)
	require.Equal(t, "resp_1", rows["settled"].Checkpoints[0].ResponseID)
	require.Equal(t, listCheckpoint{Name: "eino", Version: 2, State: "opaque", Bytes: len(einoDoc), nextJSON: nextJSON{Next: "opaque"}}, rows["eino"].Checkpoints[0])

	code, out, stderr = sessionctl(t, "doctor", dsn)
	require.Equal(t, 0, code, "calls in doubt need an operator, and are not corruption: %s%s", out, stderr)
	for _, w := range []string{
		`warning: session "claimed" checkpoint "run" (version 3): in doubt: c1 (claimed `,
		`note: session "parked" checkpoint "run" (version 2): held write of 1 item, awaiting approval of c1`,
		`note: session "cponly" checkpoint "run" (version 1): held write of 1 item, awaiting approval of c2`,
		`note: session "settled" checkpoint "run" (version 5): settled, waiting for its model call (after response resp_1)`,
		`note: session "eino" checkpoint "eino" (version 2): opaque: ` + fmt.Sprint(len(einoDoc)) + ` bytes not in runstate's format`,
		"5 sessions checked, 0 with errors, 1 needing an operator (claimed calls in doubt)\n",
	} {
		require.Contains(t, out, w)
	}
	require.Regexp(t, `by agent-host:4242\); their tools may have run: resolve each \(Output with what the tool's system reports, Reclaim, or Abandon\); needs an operator`, out)

	code, out, _ = sessionctl(t, "doctor", "-json", dsn)
	require.Equal(t, 0, code)
	var dr doctorReport
	require.NoError(t, json.Unmarshal([]byte(out), &dr))
	require.Equal(t, 1, dr.SessionsNeedingOperator)
	require.Zero(t, dr.SessionsWithErrors)
	kinds := map[string][]string{}
	for _, ds := range dr.Sessions {
		for _, f := range ds.Checkpoints {
			kinds[ds.SessionID] = append(kinds[ds.SessionID], f.Kind+" "+f.Severity)
		}
	}
	require.Equal(t, map[string][]string{
		"claimed": {"claims-in-doubt warning", "held-write note"},
		"cponly":  {"held-write note"},
		"eino":    {"opaque-checkpoint note"},
		"parked":  {"held-write note"},
		"settled": {"run-model note"},
	}, kinds)
}

func TestInspectShowsAnEinoCheckpointAsOpaque(t *testing.T) {
	dsn := sqliteURL(t, "runs.db")
	seedRuns(t, dsn)
	code, out, stderr := sessionctl(t, "inspect", dsn, "eino")
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, `checkpoint "eino" version 2: opaque, `+fmt.Sprint(len(einoDoc))+` bytes: not a run-state document`)
	require.Contains(t, out, "1 checkpoint, 0 unreadable, 1 opaque\n")
	require.NotContains(t, out, "unreadable (")

	code, out, _ = sessionctl(t, "inspect", "-json", dsn, "eino")
	require.Equal(t, 0, code)
	var ir inspectReport
	require.NoError(t, json.Unmarshal([]byte(out), &ir))
	require.Len(t, ir.Checkpoints, 1)
	require.Equal(t, "opaque", ir.Checkpoints[0].State)
	require.Equal(t, len(einoDoc), ir.Checkpoints[0].Bytes)
	require.Equal(t, int64(2), ir.Checkpoints[0].Version)
	require.Empty(t, ir.Checkpoints[0].Error)

	code, out, stderr = sessionctl(t, "inspect", dsn, "claimed")
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `  next: in doubt: c1 \(claimed \S+ by agent-host:4242\); their tools may have run`, out)
	code, out, _ = sessionctl(t, "inspect", dsn, "cponly")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "session \"cponly\": 0 items")
	require.Contains(t, out, "  next: awaiting approval of c2\n")
}

// sqliteMaster is the schema of an SQLite file, as sqlite_master lists it.
func sqliteMaster(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a, b, c, d string
		require.NoError(t, rows.Scan(&a, &b, &c, &d))
		out = append(out, strings.Join([]string{a, b, c, d}, "|"))
	}
	require.NoError(t, rows.Err())
	return out
}

// check on a file laid out as the Python SDK's SQLiteSession writes it
// (agent_sessions and agent_messages only) leaves its schema as it was:
// the tables its stores create for checkpoints and operation ids go again.
func TestCheckLeavesAPythonSchemaAsItWas(t *testing.T) {
	path := copyFile(t, filepath.Join("..", "..", "adapters", "sqlite", "testdata", "python", "session.db"))
	before := sqliteMaster(t, path)
	for _, o := range before {
		require.NotRegexp(t, regexp.MustCompile(`agent_checkpoints|_operations`), o, "the fixture is Python's")
	}
	code, out, stderr := sessionctl(t, "check", "sqlite://"+path)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "\nlevel FULL\n")
	require.Contains(t, out, "schema: as it was (dropped what the check created: table agent_checkpoints, table agent_messages_operations)\n")
	require.Equal(t, before, sqliteMaster(t, path), "sqlite_master is as it was")

	// A file that has the tables keeps them.
	path2 := copyFile(t, filepath.Join("..", "..", "adapters", "sqlite", "testdata", "python", "session.db"))
	seed(t, "sqlite://"+path2, "go-written", cpUser)
	before = sqliteMaster(t, path2)
	code, out, stderr = sessionctl(t, "check", "-run", "core", "sqlite://"+path2)
	require.Equal(t, 0, code, out+stderr)
	require.Contains(t, out, "schema: as it was (the check created nothing)\n")
	require.Equal(t, before, sqliteMaster(t, path2))
}

// TestSeedStoresForDocs writes seedRuns's store to the SQLite file
// $SESSIONCTL_SEED_RUNS names, and seedCheckpointStore's to the one
// $SESSIONCTL_SEED_CHECKPOINTS names, for docs/sessionctl.md's captures;
// it is skipped without them.
func TestSeedStoresForDocs(t *testing.T) {
	runs, cps := os.Getenv("SESSIONCTL_SEED_RUNS"), os.Getenv("SESSIONCTL_SEED_CHECKPOINTS")
	if runs == "" && cps == "" {
		t.Skip("set SESSIONCTL_SEED_RUNS or SESSIONCTL_SEED_CHECKPOINTS to a new SQLite file to write the docs' stores")
	}
	if runs != "" {
		seedRuns(t, "sqlite://"+runs)
	}
	if cps != "" {
		seedCheckpointStore(t, "sqlite://"+cps)
	}
}

// A checkpoint that moves in the source during the copy (the parked run
// is approved and claimed meanwhile) fails the session: its copy is
// deleted again, so that a rerun copies the new one instead of refusing
// a stale one.
func TestMigrateReportsACheckpointThatChangedDuringTheCopy(t *testing.T) {
	src, dst := sqliteURL(t, "a.db"), sqliteURL(t, "b.db")
	seedRuns(t, src)
	st, err := adapters.Open(context.Background(), src)
	require.NoError(t, err)
	defer st.Close()
	migrateHookAfterWrite = func(id string) {
		if id == "parked" {
			require.NoError(t, openRun(t, st, "parked").Claim(context.Background(), "c1"))
		}
	}
	code, out, stderr := sessionctl(t, "migrate", "--from", src, "--to", dst, "--session", "parked")
	migrateHookAfterWrite = nil
	require.Equal(t, 1, code, out+stderr)
	require.Contains(t, stderr, `session "parked": the source changed during the copy: its checkpoints changed while they were copied; the copies saved are deleted again; run migrate again`)
	require.Empty(t, allCheckpoints(t, dst, "parked"))

	code, out, stderr = sessionctl(t, "migrate", "--from", src, "--to", dst, "--session", "parked")
	require.Equal(t, 0, code, out+stderr)
	require.Equal(t, "1 session: 1 copied, 0 already present, 0 failed; 1 checkpoint: 1 copied, 0 already present\n", out)
	require.Equal(t, allCheckpoints(t, src, "parked"), allCheckpoints(t, dst, "parked"))
	dstSt, err := adapters.Open(context.Background(), dst)
	require.NoError(t, err)
	defer dstSt.Close()
	require.Equal(t, runstate.Next{Kind: runstate.NextResolve, CallIDs: []string{"c1"}}, storedNext(t, dstSt, "parked"))
}

// The memory adapter lists a session that holds only a checkpoint too.
func TestListShowsACheckpointOnlySessionOnMemory(t *testing.T) {
	dsn := sharedURL(t)
	st, err := adapters.Open(context.Background(), dsn)
	require.NoError(t, err)
	defer st.Close()
	run := openRun(t, st, "cponly")
	require.NoError(t, run.Interrupt(context.Background(), "resp_1", cpItems(t, cpCall), "c1"))
	code, out, stderr := sessionctl(t, "list", dsn)
	require.Equal(t, 0, code, out+stderr)
	require.Regexp(t, `(?m)^"cponly"\s+0\s+0 .* approval\s+"run" awaiting approval of c1$`, out)
}
