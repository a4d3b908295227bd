package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/interleave"
)

// BenchmarkCommitFloor measures what a versioned commit of a 20-item turn
// and its checkpoint can cost here, against the append of the same items,
// interleaved op by op. lib is the adapter's AppendWithCheckpoint; the
// other sides:
//
//	append          the adapter's AddItems on a session of its own
//	raw-schema      the append as the tightest code on the adapter's tables
//	                writes it (BenchmarkAppend20's raw-schema: one batch of
//	                the session upsert and the 20-row INSERT)
//	raw-checkpoint  the same batch with the checkpoint's versioned UPDATE
//	                queued first. The batch is one implicit transaction, but
//	                the INSERT does not depend on the UPDATE's row count:
//	                cheaper than any correct commit, so a floor.
//
// Reported besides interleave's metrics: raw-checkpoint ÷ raw-schema (the
// floor of the commit's ratio to the append) and lib ÷ append.
func BenchmarkCommitFloor(b *testing.B) {
	ctx := context.Background()
	st, _ := benchStore(b)
	items := benchItems(20)
	data := texts(items)
	doc := []byte(`{"$schemaVersion":"1.17","current_step":{"type":"next_step_run_again"},"current_turn_persisted_item_count":20}`)
	pool := st.Pool()
	q := st.q
	insert := valuesInsert(q.messages, len(data))
	lib, err := st.Session("floor-lib")
	require.NoError(b, err)
	plain, err := st.Session("floor-append")
	require.NoError(b, err)
	libV, err := lib.SaveCheckpoint(ctx, "run", doc, 0)
	require.NoError(b, err)
	raw, err := st.Session("floor-raw-checkpoint")
	require.NoError(b, err)
	rawV, err := raw.SaveCheckpoint(ctx, "run", doc, 0)
	require.NoError(b, err)
	args := make([]any, 0, len(data)+1)
	rawBatch := func(sid string, checkpoint bool) {
		args = append(args[:0], sid)
		for _, d := range data {
			args = append(args, d)
		}
		var batch pgx.Batch
		if checkpoint {
			batch.Queue(q.ck.update, sid, "run", doc, rawV)
		}
		batch.Queue(q.upsertSession, sid)
		batch.Queue(insert, args...)
		if err := pool.SendBatch(ctx, &batch).Close(); err != nil {
			b.Fatal(err)
		}
		if checkpoint {
			rawV++
		}
	}
	med := interleave.Run(b, nil, func() {
		var err error
		if libV, err = lib.AppendWithCheckpoint(ctx, items, "run", doc, libV); err != nil {
			b.Fatal(err)
		}
	}, interleave.Side{Name: "append", Op: func() {
		if err := plain.AddItems(ctx, items); err != nil {
			b.Fatal(err)
		}
	}}, interleave.Side{Name: "raw-schema", Op: func() {
		rawBatch("floor-raw-schema", false)
	}}, interleave.Side{Name: "raw-checkpoint", Op: func() {
		rawBatch("floor-raw-checkpoint", true)
	}})
	var stored int64
	require.NoError(b, pool.QueryRow(ctx, q.ck.version, "floor-raw-checkpoint", "run").Scan(&stored))
	require.Equal(b, rawV, stored, "the raw side's checkpoint updates all landed")
	b.ReportMetric(med["raw-checkpoint"]/med["raw-schema"], "raw-checkpoint/raw-schema")
	b.ReportMetric(med[interleave.Lib]/med["append"], "lib/append")
}
