package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentsessions/sessions/internal/pyjson"
	"github.com/agentsessions/sessions/session"
)

// Turns and usage of an AdvancedSQLiteSession store.

// Turn is a user turn of a branch, as the class's get_conversation_turns
// lists it.
type Turn struct {
	Number    int64           // its branch turn number: what CreateBranchFromTurn takes
	Preview   string          // the content, as text, cut to 100 characters and "..."
	Content   json.RawMessage // the user message's content as stored ("" when it has none)
	CreatedAt time.Time       // its structure row's created_at (UTC, to the second)
}

// Usage is what a run used, the fields of the SDK's Usage that the class's
// store_run_usage records.
type Usage struct {
	Requests, InputTokens, OutputTokens, TotalTokens int64
	// CachedTokens is input_tokens_details.cached_tokens.
	CachedTokens int64
	// ReasoningTokens is output_tokens_details.reasoning_tokens.
	ReasoningTokens int64
}

// TurnUsage is a turn_usage row, as the class's get_turn_usage returns it.
type TurnUsage struct {
	Turn int64 // user_turn_number
	Usage
	// InputTokensDetails and OutputTokensDetails are the row's JSON
	// details as stored (nil when NULL); Usage's CachedTokens and
	// ReasoningTokens are read from them.
	InputTokensDetails, OutputTokensDetails json.RawMessage
}

// Turns lists the user turns of branch ("" for the current branch),
// oldest first, with the class's content previews: the message's content,
// as text (a string as it is, structured content as JSON), cut to 100
// characters followed by "...". A user message that is not a JSON object
// is left out, as the class leaves it out.
func (s *Session) Turns(ctx context.Context, branch string) ([]Turn, error) {
	if err := s.requireAdvanced(ctx); err != nil {
		return nil, err
	}
	branch, err := s.branchOrCurrent(ctx, branch)
	if err != nil {
		return nil, s.st.wrap(ctx, "list turns", err)
	}
	rows, err := s.st.db.QueryContext(ctx, s.st.aq.turns, s.id, branch)
	if err != nil {
		return nil, s.st.wrap(ctx, "list turns", err)
	}
	var out []Turn
	for rows.Next() {
		var (
			num     sql.NullInt64
			data    string
			created sql.NullString
		)
		if err := rows.Scan(&num, &data, &created); err != nil {
			rows.Close()
			return nil, s.st.wrap(ctx, "list turns", err)
		}
		it, err := session.NewItem([]byte(data))
		if err != nil {
			continue // json.loads fails, or .get on a non-dict
		}
		content, ok := it.Field("content")
		if !ok {
			content = json.RawMessage(`""`)
		}
		out = append(out, Turn{Number: num.Int64, Preview: contentPreview(content, 100), Content: content, CreatedAt: parseSQLiteTime(created.String)})
	}
	return out, s.st.wrap(ctx, "list turns", closeRows(rows))
}

// branchOrCurrent returns branch, or the current branch when it is "".
func (s *Session) branchOrCurrent(ctx context.Context, branch string) (string, error) {
	if branch != "" {
		return branch, nil
	}
	return s.readBranch(ctx)
}

// contentPreview is the class's _content_preview: a string as it is, any
// other value as json.dumps(value, ensure_ascii=False), then cut to max
// characters (code points) followed by "...".
func contentPreview(content json.RawMessage, max int) string {
	text, ok := jsonString(content)
	if !ok {
		out, err := pyjson.Dumps(content, pyjson.Options{})
		if err != nil {
			text = string(content)
		} else {
			text = string(out)
		}
	}
	if utf8.RuneCountInString(text) <= max {
		return text
	}
	n := 0
	for i := range text {
		if n == max {
			return text[:i] + "..."
		}
		n++
	}
	return text
}

// RecordUsage records what a run used against the current turn of the
// current branch, as the class's store_run_usage does: one turn_usage row
// per (branch, user turn), replaced by a later record of the same turn.
// The current turn is the branch's highest user-turn number, 0 before its
// first user message. Turn, anchor check and row are one transaction, so
// a turn popped meanwhile is never charged.
func (s *Session) RecordUsage(ctx context.Context, u Usage) error {
	if err := s.requireAdvanced(ctx); err != nil {
		return err
	}
	return s.st.writeW(ctx, fmt.Sprintf("record usage of session %q", s.id), false, func(ctx context.Context, w *wconn, _ bool) error {
		q := &s.st.aq
		branch, err := s.branchIn(ctx, w.c)
		if err != nil {
			return err
		}
		var turn int64
		if err := w.c.QueryRowContext(ctx, q.currentTurn, s.id, branch).Scan(&turn); err != nil {
			return err
		}
		in := `{"cached_tokens": ` + strconv.FormatInt(u.CachedTokens, 10) + `}`
		out := `{"reasoning_tokens": ` + strconv.FormatInt(u.ReasoningTokens, 10) + `}`
		return w.exec(ctx, q.insertUsage, s.id, branch, turn, u.Requests, u.InputTokens, u.OutputTokens, u.TotalTokens, in, out)
	})
}

// TurnUsage returns the usage rows of branch ("" for the current
// branch), by turn, as the class's get_turn_usage does.
func (s *Session) TurnUsage(ctx context.Context, branch string) ([]TurnUsage, error) {
	if err := s.requireAdvanced(ctx); err != nil {
		return nil, err
	}
	branch, err := s.branchOrCurrent(ctx, branch)
	if err != nil {
		return nil, s.st.wrap(ctx, "read turn usage", err)
	}
	rows, err := s.st.db.QueryContext(ctx, s.st.aq.turnUsage, s.id, branch)
	if err != nil {
		return nil, s.st.wrap(ctx, "read turn usage", err)
	}
	var out []TurnUsage
	for rows.Next() {
		var (
			t       TurnUsage
			r, i, o sql.NullInt64
			total   sql.NullInt64
			in, ou  sql.NullString
		)
		if err := rows.Scan(&t.Turn, &r, &i, &o, &total, &in, &ou); err != nil {
			rows.Close()
			return nil, s.st.wrap(ctx, "read turn usage", err)
		}
		t.Requests, t.InputTokens, t.OutputTokens, t.TotalTokens = r.Int64, i.Int64, o.Int64, total.Int64
		if in.Valid {
			t.InputTokensDetails = json.RawMessage(in.String)
			var d struct {
				CachedTokens int64 `json:"cached_tokens"`
			}
			if json.Unmarshal(t.InputTokensDetails, &d) == nil {
				t.CachedTokens = d.CachedTokens
			}
		}
		if ou.Valid {
			t.OutputTokensDetails = json.RawMessage(ou.String)
			var d struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			}
			if json.Unmarshal(t.OutputTokensDetails, &d) == nil {
				t.ReasoningTokens = d.ReasoningTokens
			}
		}
		out = append(out, t)
	}
	return out, s.st.wrap(ctx, "read turn usage", closeRows(rows))
}
