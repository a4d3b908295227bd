package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/session"
)

// Items as json.dumps writes them, so that Go stores the bytes the class
// would.
var (
	advBatch1 = []string{`{"role": "user", "content": "one"}`, `{"role": "assistant", "content": "1"}`}
	advBatch2 = []string{
		`{"role": "user", "content": "two"}`,
		`{"type": "function_call", "call_id": "c", "name": "f", "namespace": "ns", "arguments": "{}"}`,
		`{"type": "function_call_output", "call_id": "c", "output": "ok"}`,
	}
	advBatch3 = []string{
		`{"type": "mcp_call", "server_label": "srv", "name": "look"}`,
		`{"type": "mcp_approval_request", "server_label": "srv"}`,
		`{"type": "computer_call", "call_id": "k"}`,
		`{"type": "tool_search_output"}`,
		`{"role": "user", "content": "three, and a long one: ` + strings.Repeat("é", 120) + `"}`,
		`{"role": "user", "content": [{"type": "input_text", "text": "four"}]}`,
		`{"type": "function_call", "name": "same", "namespace": "same"}`,
		`{"role": "system", "content": "sys"}`,
	}
)

func advItems(texts []string) []session.Item {
	out := make([]session.Item, len(texts))
	for i, s := range texts {
		out[i] = session.MustItem(s)
	}
	return out
}

// advancedPair opens an AdvancedSQLiteSession file the class created, a
// Store on it, and two sessions: "go", written by Go, and "py", written
// by the class with the same items, whose structure rows the Go session's
// must equal.
func advancedPair(t *testing.T) (st *Store, s *Session, pyGo, pyRef *advancedPy) {
	path := filepath.Join(t.TempDir(), "advanced.db")
	pyGo = newAdvancedPy(t, path, "go")
	pyRef = pyGo.session("py")
	st = openStore(t, path, Options{})
	require.True(t, st.isAdvanced())
	s, err := st.Session("go")
	require.NoError(t, err)
	return st, s, pyGo, pyRef
}

// addBoth appends items through Go to "go" and through the class to "py".
func addBoth(t *testing.T, s *Session, pyRef *advancedPy, items []string) {
	require.NoError(t, s.AddItems(context.Background(), advItems(items)))
	pyRef.addItems(items...)
}

// noOrphans: the class's orphan cleanup finds nothing to delete in the
// session.
func noOrphans(t *testing.T, py *advancedPy) {
	t.Helper()
	require.Zero(t, py.cleanup(), "the class's cleanup deletes none of Go's rows")
}

// TestAdvancedGoWritesClassReads: Go's appends write the structure rows
// the class's add_items writes for the same items (type, sequence, turns,
// tool name), so its get_items and get_conversation_turns show them, and
// its cleanup deletes none of them.
func TestAdvancedGoWritesClassReads(t *testing.T) {
	ctx := context.Background()
	_, s, pyGo, pyRef := advancedPair(t)
	for _, b := range [][]string{advBatch1, advBatch2, advBatch3} {
		addBoth(t, s, pyRef, b)
	}
	all := append(append(append([]string{}, advBatch1...), advBatch2...), advBatch3...)
	require.Equal(t, pyRef.structure(), pyGo.structure(), "Go's structure rows are the class's")
	require.Len(t, pyGo.structure(), len(all))
	require.Equal(t, all, pyGo.getItems(""), "the class's get_items shows Go's writes")
	require.Equal(t, all, pyGo.instance().getItems("main"))
	require.Equal(t, pyRef.conversationTurns(""), pyGo.conversationTurns(""), "the class's turn listing shows Go's turns")
	noOrphans(t, pyGo)
	var own int
	require.NoError(t, pyGo.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('agentsessions_structure_branch_turn', 'agentsessions_structure_message')`).Scan(&own))
	require.Equal(t, 2, own, "Go's first write added its indexes")

	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, all, texts(got))
	latest, err := s.LatestItems(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, all[len(all)-3:], texts(latest))

	turns, err := s.Turns(ctx, "")
	require.NoError(t, err)
	pyTurns := pyGo.conversationTurns("")
	require.Len(t, turns, 4)
	for i, tr := range turns {
		require.Equal(t, pyTurns[i].Turn, tr.Number)
	}
	require.Equal(t, "one", turns[0].Preview)
	require.Equal(t, pyTurns[2].Content, turns[2].Preview, "the class's 100-character preview")
	require.True(t, strings.HasSuffix(turns[2].Preview, "..."))
	require.Equal(t, `[{"type": "input_text", "text": "four"}]`, turns[3].Preview, "structured content as json.dumps(ensure_ascii=False) writes it")
	require.JSONEq(t, `[{"type":"input_text","text":"four"}]`, string(turns[3].Content))
}

// TestAdvancedClassBranchGoReads: a branch the class creates from a turn
// is listed, switched to and read by Go; Go's appends on it write the
// rows the class writes on it.
func TestAdvancedClassBranchGoReads(t *testing.T) {
	ctx := context.Background()
	_, s, pyGo, pyRef := advancedPair(t)
	for _, py := range []*advancedPy{pyGo, pyRef} {
		py.addItems(advBatch1...)
		py.addItems(advBatch2...)
		py.addItems(`{"role": "user", "content": "main three"}`)
		require.Empty(t, py.createBranchFromTurn(2, "alt"))
		py.addItems(`{"role": "user", "content": "alt two"}`, `{"role": "assistant", "content": "alt 2"}`)
	}

	branches, err := s.ListBranches(ctx)
	require.NoError(t, err)
	require.Len(t, branches, 2)
	py := pyGo.listBranches()
	for i, b := range branches {
		require.Equal(t, py[i].ID, b.ID)
		require.Equal(t, py[i].Messages, b.MessageCount)
		require.Equal(t, py[i].UserTurns, b.UserTurns)
		require.Equal(t, b.ID == MainBranch, b.Current, "Go's handle is on main")
		require.False(t, b.CreatedAt.IsZero())
	}

	require.ErrorIs(t, s.SwitchBranch(ctx, "nope"), ErrBranchNotFound)
	require.Equal(t, MainBranch, s.CurrentBranch())
	require.NoError(t, s.SwitchBranch(ctx, "alt"))
	require.Equal(t, "alt", s.CurrentBranch())
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, pyGo.getItems("alt"), texts(got), "Go reads the class's branch")
	require.Equal(t, append(append([]string{}, advBatch1...), `{"role": "user", "content": "alt two"}`, `{"role": "assistant", "content": "alt 2"}`), texts(got))
	followed, _, err := s.ItemsSince(ctx, "")
	require.NoError(t, err)
	require.Equal(t, texts(got), texts(followed), "a follower reads the branch too")
	turns, err := s.Turns(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"one", "alt two"}, []string{turns[0].Preview, turns[1].Preview})
	mainTurns, err := s.Turns(ctx, MainBranch)
	require.NoError(t, err)
	require.Len(t, mainTurns, 3)

	more := []string{`{"role": "user", "content": "alt three"}`, `{"type": "web_search_call", "id": "w"}`}
	require.NoError(t, s.AddItems(ctx, advItems(more)))
	require.Empty(t, pyRef.switchToBranch("alt"))
	pyRef.addItems(more...)
	require.Equal(t, pyRef.structure(), pyGo.structure(), "Go's appends on the branch are the class's")
	require.Empty(t, pyGo.switchToBranch("alt"))
	require.Equal(t, texts(append(got, advItems(more)...)), pyGo.getItems(""))
	noOrphans(t, pyGo)
}

// TestAdvancedGoBranchClassReads: Go creates a branch from a turn, as the
// class's create_branch_from_turn does (the same structure rows), and the
// class's statements switch to it and read it; names are reserved as the
// class reserves them; deleting a branch deletes the rows the class's
// delete_branch deletes.
func TestAdvancedGoBranchClassReads(t *testing.T) {
	ctx := context.Background()
	_, s, pyGo, pyRef := advancedPair(t)
	for _, b := range [][]string{advBatch1, advBatch2, {`{"role": "user", "content": "three"}`, `{"role": "assistant", "content": "3"}`}} {
		addBoth(t, s, pyRef, b)
	}
	_, err := s.CreateBranchFromTurn(ctx, 9, "x")
	require.ErrorIs(t, err, ErrTurnNotFound)
	id, err := s.CreateBranchFromTurn(ctx, 2, "alt")
	require.NoError(t, err)
	require.Equal(t, "alt", id)
	require.Equal(t, "alt", s.CurrentBranch())
	require.Empty(t, pyRef.createBranchFromTurn(2, "alt"))
	require.Equal(t, pyRef.structure(), pyGo.structure(), "Go's branch rows are the class's")

	alt := []string{`{"role": "user", "content": "alt two"}`}
	addBoth(t, s, pyRef, alt)
	require.Equal(t, pyRef.structure(), pyGo.structure(), "the next append on the branch restarts turn 2, as the class's")

	require.Empty(t, pyGo.switchToBranch("alt"))
	require.Equal(t, append(append([]string{}, advBatch1...), alt...), pyGo.getItems(""), "the class reads Go's branch")
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, pyGo.getItems(""), texts(got))
	branches, err := s.ListBranches(ctx)
	require.NoError(t, err)
	py := pyGo.listBranches()
	require.Len(t, branches, len(py))
	for i, b := range branches {
		require.Equal(t, py[i].ID, b.ID)
		require.Equal(t, py[i].Messages, b.MessageCount)
		require.Equal(t, py[i].UserTurns, b.UserTurns)
		require.Equal(t, b.ID == "alt", b.Current)
	}

	require.Contains(t, pyGo.createBranchFromTurn(1, "alt"), "has already been used", "the class sees Go's reservation")
	_, err = s.CreateBranchFromTurn(ctx, 1, "alt")
	require.ErrorIs(t, err, ErrBranchUsed)
	auto, err := s.CreateBranchFromTurn(ctx, 1, "")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(auto, "branch_from_turn_1_"), auto)
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "a branch from turn 1 holds nothing before it")
	require.NoError(t, s.AddItems(ctx, advItems([]string{`{"role": "user", "content": "again"}`})))

	require.ErrorIs(t, s.DeleteBranch(ctx, MainBranch, false), ErrBranchProtected)
	require.ErrorIs(t, s.DeleteBranch(ctx, "  ", false), ErrBranchProtected)
	require.ErrorIs(t, s.DeleteBranch(ctx, auto, false), ErrBranchProtected)
	require.ErrorIs(t, s.DeleteBranch(ctx, "nope", false), ErrBranchNotFound)
	require.NoError(t, s.DeleteBranch(ctx, "alt", false))
	pyRef.deleteBranch("alt")
	var goRows, refRows []string
	for _, r := range pyGo.structure() {
		if !strings.HasPrefix(r, "branch_from_turn") {
			goRows = append(goRows, r)
		}
	}
	refRows = pyRef.structure()
	require.Equal(t, len(refRows), len(goRows))
	for i := range refRows {
		// Sequence numbers differ by the auto branch's two rows.
		require.Equal(t, strings.Fields(refRows[i])[:2], strings.Fields(goRows[i])[:2])
	}
	require.Empty(t, msgTexts(t, pyGo, `SELECT message_data FROM agent_messages WHERE session_id = 'go' AND message_data LIKE '%alt two%'`), "the deleted branch's own message went as an orphan")
	noOrphans(t, pyGo)
	require.NoError(t, s.DeleteBranch(ctx, auto, true), "force deletes the current branch")
	require.Equal(t, MainBranch, s.CurrentBranch())
	require.Len(t, pyGo.listBranches(), 1)
	noOrphans(t, pyGo)
}

func msgTexts(t *testing.T, py *advancedPy, q string) []string {
	rows, err := py.db.Query(q)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

// TestAdvancedUsage: Go records usage per turn in the row the class's
// store_run_usage writes, and reads the class's rows.
func TestAdvancedUsage(t *testing.T) {
	ctx := context.Background()
	st, s, pyGo, pyRef := advancedPair(t)
	addBoth(t, s, pyRef, advBatch1)
	require.NoError(t, s.RecordUsage(ctx, Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedTokens: 2, ReasoningTokens: 1}))
	pyRef.storeRunUsage(1, 10, 5, 15, 2, 1)
	addBoth(t, s, pyRef, advBatch2)
	require.NoError(t, s.RecordUsage(ctx, Usage{Requests: 2, InputTokens: 20, OutputTokens: 7, TotalTokens: 27}))
	pyRef.storeRunUsage(2, 20, 7, 27, 0, 0)
	require.NoError(t, s.RecordUsage(ctx, Usage{Requests: 3, InputTokens: 30, OutputTokens: 8, TotalTokens: 38, ReasoningTokens: 4}))
	pyRef.storeRunUsage(3, 30, 8, 38, 0, 4) // a second record of turn 2 replaces the first
	require.Equal(t, pyRef.turnUsage(""), pyGo.turnUsage(""), "Go's usage rows are the class's")
	require.Len(t, pyGo.turnUsage(""), 2)

	ref, err := st.Session("py")
	require.NoError(t, err)
	usage, err := ref.TurnUsage(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []TurnUsage{
		{Turn: 1, Usage: Usage{Requests: 1, InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedTokens: 2, ReasoningTokens: 1},
			InputTokensDetails: json.RawMessage(`{"cached_tokens": 2}`), OutputTokensDetails: json.RawMessage(`{"reasoning_tokens": 1}`)},
		{Turn: 2, Usage: Usage{Requests: 3, InputTokens: 30, OutputTokens: 8, TotalTokens: 38, ReasoningTokens: 4},
			InputTokensDetails: json.RawMessage(`{"cached_tokens": 0}`), OutputTokensDetails: json.RawMessage(`{"reasoning_tokens": 4}`)},
	}, usage, "Go reads the class's rows")

	// Popping turn 2's last item drops its usage row, as the class's pop does.
	for range advBatch2 {
		_, ok, err := s.PopItem(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.NotEmpty(t, pyRef.popItem())
	}
	require.Equal(t, pyRef.turnUsage(""), pyGo.turnUsage(""))
	require.Len(t, pyGo.turnUsage(""), 1)
	noOrphans(t, pyGo)
}

// TestAdvancedPopClear: Go's PopItem and Clear change the class's rows as
// its pop_item and clear_session do; the class pops Go's writes; a clear
// by either side sends the other's branch pointer back to main.
func TestAdvancedPopClear(t *testing.T) {
	ctx := context.Background()
	_, s, pyGo, pyRef := advancedPair(t)
	addBoth(t, s, pyRef, advBatch1)
	addBoth(t, s, pyRef, advBatch2)
	_, err := s.CreateBranchFromTurn(ctx, 2, "alt")
	require.NoError(t, err)
	require.Empty(t, pyRef.createBranchFromTurn(2, "alt"))
	addBoth(t, s, pyRef, []string{`{"role": "user", "content": "alt two"}`})

	// Pop on the branch: its own message goes.
	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, `{"role": "user", "content": "alt two"}`, pyRef.popItem())
	require.Equal(t, `{"role": "user", "content": "alt two"}`, it.String())
	require.Equal(t, pyRef.structure(), pyGo.structure())
	// Pop a message the main branch shares: the message row stays for main.
	_, _, err = s.PopItem(ctx)
	require.NoError(t, err)
	pyRef.popItem()
	require.Equal(t, pyRef.structure(), pyGo.structure())
	require.Equal(t, append(append([]string{}, advBatch1...), advBatch2...), pyGo.getItems("main"), "main keeps the shared message")
	noOrphans(t, pyGo)

	// The class pops Go's writes on main.
	main := pyGo.instance()
	require.Equal(t, advBatch2[2], main.popItem())
	require.NoError(t, s.SwitchBranch(ctx, MainBranch))
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, main.getItems(""), texts(got))

	// Go's Clear is the class's clear_session: every branch, the usage,
	// a new generation; the class's instance on alt goes back to main.
	onAlt := pyGo.instance()
	require.Empty(t, onAlt.switchToBranch("alt"))
	require.NoError(t, s.RecordUsage(ctx, Usage{Requests: 1}))
	require.NoError(t, s.Clear(ctx))
	pyRef.clearSession()
	require.Empty(t, onAlt.getItems(""))
	require.Equal(t, "main", onAlt.branch, "the class's pointer saw Go's clear")
	require.Empty(t, pyGo.structure())
	require.Empty(t, pyGo.turnUsage("main"))
	require.Empty(t, msgTexts(t, pyGo, `SELECT message_data FROM agent_messages WHERE session_id = 'go'`))
	require.Equal(t, reservations(t, pyRef, "py"), reservations(t, pyGo, "go"), "branch ids stay reserved, as the class keeps them")
	require.Equal(t, generation(t, pyRef, "py"), generation(t, pyGo, "go"))

	// The class's clear sends Go's pointer back to main.
	addBoth(t, s, pyRef, advBatch1)
	_, err = s.CreateBranchFromTurn(ctx, 1, "b2")
	require.NoError(t, err)
	require.Equal(t, "b2", s.CurrentBranch())
	pyGo.instance().clearSession()
	got, err = s.Items(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, MainBranch, s.CurrentBranch(), "Go's pointer saw the class's clear")
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	require.Equal(t, advBatch1, pyGo.instance().getItems("main"), "after the clear Go writes main again")
	noOrphans(t, pyGo)
}

func reservations(t *testing.T, py *advancedPy, id string) []string {
	return msgTexts(t, py, `SELECT branch_id FROM branch_reservations WHERE session_id = '`+id+`' ORDER BY branch_id`)
}

func generation(t *testing.T, py *advancedPy, id string) int64 {
	var g int64
	require.NoError(t, py.db.QueryRow(`SELECT generation FROM session_clear_generations WHERE session_id = ?`, id).Scan(&g))
	return g
}

// TestAdvancedReplace: ReplaceItems replaces the current branch alone, as
// deleting it and appending would; the other branches and the messages
// they share stay.
func TestAdvancedReplace(t *testing.T) {
	ctx := context.Background()
	_, s, pyGo, _ := advancedPair(t)
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	require.NoError(t, s.AddItems(ctx, advItems(advBatch2)))
	_, err := s.CreateBranchFromTurn(ctx, 2, "alt")
	require.NoError(t, err)
	v, err := s.HistoryVersion(ctx)
	require.NoError(t, err)
	repl := []string{`{"role": "user", "content": "summary"}`}
	require.NoError(t, s.ReplaceItemsIf(ctx, v, advItems(repl)))
	require.ErrorIs(t, s.ReplaceItemsIf(ctx, v, advItems(repl)), session.ErrHistoryChanged)
	require.Equal(t, repl, pyGo.getItems("alt"))
	require.Equal(t, append(append([]string{}, advBatch1...), advBatch2...), pyGo.getItems("main"))
	require.NoError(t, s.SwitchBranch(ctx, MainBranch))
	require.NoError(t, s.ReplaceItems(ctx, nil))
	require.Empty(t, pyGo.getItems("main"))
	require.Equal(t, repl, pyGo.getItems("alt"))
	noOrphans(t, pyGo)
}

// TestAdvancedStoreBecomesAdvancedAfterOpen: a file Go opened as a plain
// store, whose tables the class then creates: Go's later writes carry the
// class's structure rows (its reads show them), and Go reads the main
// branch once a write saw the tables. The row Go wrote before has none,
// as the class gives none to rows it finds: its cleanup deletes that one.
func TestAdvancedStoreBecomesAdvancedAfterOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st := openStore(t, path, Options{})
	s, err := st.Session("go")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, advItems([]string{`{"role": "user", "content": "before"}`})))
	require.False(t, st.isAdvanced())
	_, err = s.ListBranches(ctx)
	require.ErrorIs(t, err, ErrNotAdvanced)

	py := newAdvancedPy(t, path, "go") // the class's tables appear
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	require.True(t, st.isAdvanced())
	require.Equal(t, advBatch1, py.getItems(""))
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, advBatch1, texts(got), "Go reads the main branch now")
	require.EqualValues(t, 1, py.cleanup(), "only the row written before the class's tables existed")
	noOrphans(t, py)
}

// TestPlainStoreStaysPlain: an ordinary store never gets the class's
// tables, whatever Go does; the branch calls say it is not one.
func TestPlainStoreStaysPlain(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "plain.db"), Options{})
	s, err := st.Session("s")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	_, _, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.NoError(t, s.ReplaceItems(ctx, advItems(advBatch2)))
	require.NoError(t, s.Clear(ctx))
	require.NoError(t, st.RemoveSession(ctx, "s"))
	for name, call := range map[string]func() error{
		"SwitchBranch":         func() error { return s.SwitchBranch(ctx, "main") },
		"CreateBranchFromTurn": func() error { _, err := s.CreateBranchFromTurn(ctx, 1, ""); return err },
		"DeleteBranch":         func() error { return s.DeleteBranch(ctx, "x", false) },
		"ListBranches":         func() error { _, err := s.ListBranches(ctx); return err },
		"Turns":                func() error { _, err := s.Turns(ctx, ""); return err },
		"RecordUsage":          func() error { return s.RecordUsage(ctx, Usage{}) },
		"TurnUsage":            func() error { _, err := s.TurnUsage(ctx, ""); return err },
	} {
		err := call()
		require.ErrorIs(t, err, ErrNotAdvanced, name)
		require.ErrorIs(t, err, session.ErrUnsupported, name)
	}
	var n int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name IN ('message_structure', 'turn_usage', 'branch_reservations', 'session_clear_generations')`).Scan(&n))
	require.Zero(t, n, "no table of the class in an ordinary store")
}

// TestAdvancedOtherPairIsPlain: a file whose structure tables belong to
// another sessions/messages pair is, for a Store of this pair, an
// ordinary store (the class refuses to open the pair as advanced).
func TestAdvancedOtherPairIsPlain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "two.db")
	newAdvancedPy(t, path, "x")
	st := openStore(t, path, Options{SessionsTable: "other_sessions", MessagesTable: "other_messages"})
	require.False(t, st.isAdvanced())
	s, err := st.Session("x")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, advBatch1, texts(got))
	var n int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT count(*) FROM message_structure`).Scan(&n))
	require.Zero(t, n)
}

// TestCreateAdvancedTables: a Store makes its file an
// AdvancedSQLiteSession store with the class's tables, which the class's
// statements then use.
func TestCreateAdvancedTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "made.db")
	st := openStore(t, path, Options{})
	require.NoError(t, st.CreateAdvancedTables(ctx))
	require.True(t, st.isAdvanced())
	s, err := st.Session("go")
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	py := newAdvancedPy(t, path, "go") // CREATE ... IF NOT EXISTS: the tables are the Store's
	require.Equal(t, advBatch1, py.getItems(""))
	second := openStore(t, path, Options{})
	require.True(t, second.isAdvanced())
	noOrphans(t, py)
}

// TestAdvancedReadOnly: a read-only Store reads any branch of a file the
// class wrote: SwitchBranch needs no write.
func TestAdvancedReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ro.db")
	py := newAdvancedPy(t, path, "s")
	py.addItems(advBatch1...)
	py.addItems(advBatch2...)
	require.Empty(t, py.createBranchFromTurn(2, "alt"))
	py.addItems(`{"role": "user", "content": "alt two"}`)
	st := openStore(t, path, Options{ReadOnly: true})
	s, err := st.Session("s")
	require.NoError(t, err)
	require.ErrorIs(t, s.SwitchBranch(ctx, "nope"), ErrBranchNotFound)
	require.NoError(t, s.SwitchBranch(ctx, "alt"))
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Equal(t, py.getItems("alt"), texts(got))
	_, err = s.CreateBranchFromTurn(ctx, 1, "x")
	require.ErrorIs(t, err, ErrReadOnly)
}

// TestAdvancedRefusalText: a refusal names the package once, and what
// was refused.
func TestAdvancedRefusalText(t *testing.T) {
	ctx := context.Background()
	_, s, _, _ := advancedPair(t)
	require.NoError(t, s.AddItems(ctx, advItems(advBatch1)))
	_, err := s.CreateBranchFromTurn(ctx, 1, "b")
	require.NoError(t, err)
	require.NoError(t, s.SwitchBranch(ctx, MainBranch))
	for _, err := range []error{
		s.SwitchBranch(ctx, "nope"),
		s.DeleteBranch(ctx, "nope", false),
		func() error { _, err := s.CreateBranchFromTurn(ctx, 7, "x"); return err }(),
		func() error { _, err := s.CreateBranchFromTurn(ctx, 1, "b"); return err }(),
	} {
		require.Error(t, err)
		require.Equal(t, 1, strings.Count(err.Error(), "sqlite: "), err.Error())
		require.Contains(t, err.Error(), `session "go"`)
	}
}

// TestAdvancedPopDanglingAndUnreadable: a structure row whose message is
// gone is deleted on the way down, as the class's pop deletes it; an
// unreadable record is left in place (the class would delete it), and the
// newest readable item below it is popped.
func TestAdvancedPopDanglingAndUnreadable(t *testing.T) {
	ctx := context.Background()
	st, s, pyGo, pyRef := advancedPair(t)
	addBoth(t, s, pyRef, advBatch1)
	addBoth(t, s, pyRef, []string{`{"role": "user", "content": "two"}`})
	for _, id := range []string{"go", "py"} {
		_, err := pyGo.db.Exec(`INSERT INTO message_structure (session_id, message_id, branch_id, message_type, sequence_number, user_turn_number, branch_turn_number)
            VALUES (?1, 999999, 'main', 'assistant', (SELECT max(sequence_number) + 1 FROM message_structure WHERE session_id = ?1), 2, 2)`, id)
		require.NoError(t, err)
	}
	it, ok, err := s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, `{"role": "user", "content": "two"}`, it.String())
	require.Equal(t, `{"role": "user", "content": "two"}`, pyRef.popItem())
	require.Equal(t, pyRef.structure(), pyGo.structure(), "the dangling row went, as the class's pop deletes it")

	require.NoError(t, st.appendRaw(ctx, "go", []byte(`not json`)))
	it, ok, err = s.PopItem(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, advBatch1[1], it.String(), "the newest readable item")
	rows := pyGo.structure()
	require.Len(t, rows, 2)
	require.True(t, strings.HasPrefix(rows[1], "main other "), "the unreadable record stays: %v", rows)
	require.Equal(t, advBatch1[:1], pyGo.getItems(""))
	noOrphans(t, pyGo)
}
