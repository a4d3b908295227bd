package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestListPageStartsAtCursor: a page of ListSessionsPage reads the messages
// index from the cursor on, in the custom plan and in the generic one
// PostgreSQL switches to for a statement pgx keeps prepared (which once
// merge-joined from the index's first session: every page read the whole
// index before the cursor). The rows the plan's nodes on the messages
// table produce are counted, not timed.
func TestListPageStartsAtCursor(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, Options{})
	c := planConn(t, st,
		`INSERT INTO `+st.q.sessions+` (session_id) SELECT 's' || lpad(g::text, 6, '0') FROM generate_series(1, 100000) AS g`,
		`INSERT INTO `+st.q.messages+` (session_id, message_data) SELECT 's' || lpad(g::text, 6, '0'), '{}' FROM generate_series(1, 3) AS k, generate_series(1, 100000) AS g`,
		`ANALYZE `+st.q.sessions,
		`ANALYZE `+st.q.messages)
	for _, mode := range planModes {
		_, err := c.Exec(ctx, `SET plan_cache_mode = `+mode)
		require.NoError(t, err)
		_, err = c.Exec(ctx, `PREPARE list_page_`+mode+`(text, bigint) AS `+st.q.listPage)
		require.NoError(t, err)
		var out []byte
		require.NoError(t, c.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE list_page_`+mode+`('s090000', 20)`).Scan(&out))
		var plan []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal(out, &plan))
		read := plan[0].Plan.rowsOf("agent_messages")
		require.Positive(t, read, "%s: the plan reads the messages table:\n%s", mode, out)
		require.LessOrEqual(t, read, 1000, "%s: a page of 20 after the cursor read %d message index entries:\n%s", mode, read, out)
	}
}

// planModes are the settings of plan_cache_mode a prepared statement's
// plan is checked in: the plan for its arguments, and the generic plan
// PostgreSQL switches to for a statement pgx keeps prepared.
var planModes = []string{"force_custom_plan", "force_generic_plan"}

// planConn runs setup on st and returns a connection of its pool for
// EXPLAIN, released when the test ends.
func planConn(t *testing.T, st *Store, setup ...string) *pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	for _, q := range setup {
		_, err := st.Pool().Exec(ctx, q)
		require.NoError(t, err)
	}
	c, err := st.Pool().Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(c.Release)
	return c
}

// explainText returns the text EXPLAIN q prints on c.
func explainText(t *testing.T, c *pgxpool.Conn, q string) string {
	t.Helper()
	rows, err := c.Query(context.Background(), q)
	require.NoError(t, err)
	var plan []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan = append(plan, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(plan, "\n")
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	Relation string     `json:"Relation Name"`
	Rows     float64    `json:"Actual Rows"`
	Loops    float64    `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// rowsOf returns the rows the nodes scanning table produced, over all
// their loops.
func (n planNode) rowsOf(table string) int {
	total := 0
	if n.Relation == table {
		total += int(n.Rows * n.Loops)
	}
	for _, c := range n.Plans {
		total += c.rowsOf(table)
	}
	return total
}
