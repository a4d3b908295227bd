package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
)

var _ adapters.Summarizer = (*urlStore)(nil)

// SummarizeSessions summarizes the sessions ids (adapters.Summarizer) in
// one pipeline, one round trip per node: for each session an LRANGE of its
// items (decoded as Items decodes them), an HGETALL of its checkpoint hash,
// and an HMGET of its times. In the native layout updated_at counts only
// with the version of the history it describes, as SessionTimes reads it;
// the version is taken here of the records the LRANGE read, so a summary's
// time and items describe the same history. It never refreshes an expiry,
// even with RefreshOnRead. Unreadable records are counted, not reported to
// Options.OnCorrupt (a read of the session reports each).
func (s *urlStore) SummarizeSessions(ctx context.Context, ids []string, each func(id string, it session.Item)) ([]adapters.SessionSummary, error) {
	st := s.st
	if st.closed.Load() {
		return nil, session.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]adapters.SessionSummary, len(ids))
	at := make(map[string]int, len(ids))
	type reads struct {
		h     *Session
		items *goredis.StringSliceCmd
		ckpts *goredis.MapStringStringCmd
		times *goredis.SliceCmd
	}
	var todo []reads
	pipe := st.client.Pipeline()
	for i, id := range ids {
		out[i].ID = id
		if _, dup := at[id]; dup {
			continue
		}
		at[id] = i
		h, err := st.Session(id)
		if err != nil {
			return nil, fmt.Errorf("redis: summarize sessions: %w", err)
		}
		todo = append(todo, reads{h: h,
			items: pipe.LRange(ctx, h.keys[0], 0, -1),
			ckpts: pipe.HGetAll(ctx, h.CheckpointKey()),
			times: pipe.HMGet(ctx, h.keys[1], "created_at", "updated_at", "updated_version"),
		})
	}
	if len(todo) > 0 {
		_, _ = pipe.Exec(ctx) // each command's error is looked at below
	}
	for _, r := range todo {
		i := at[r.h.id]
		raws, err := r.items.Result()
		if err != nil {
			return nil, fmt.Errorf("redis: summarize sessions: read session %q: %w", r.h.id, err)
		}
		items, bad := r.h.decode(raws, -1, func(int) string { return "" })
		out[i].Items, out[i].Unreadable = len(items), len(bad)
		for _, it := range items {
			out[i].Bytes += int64(len(it.Bytes()))
			if each != nil {
				each(r.h.id, it)
			}
		}
		fields, err := r.ckpts.Result()
		if err != nil {
			return nil, fmt.Errorf("redis: summarize sessions: list checkpoints of session %q: %w", r.h.id, err)
		}
		out[i].Checkpoints = storedCheckpoints(r.h, fields)
		vals, err := r.times.Result()
		if err != nil {
			return nil, fmt.Errorf("redis: summarize sessions: session times of %q: %w", r.h.id, err)
		}
		if st.opts.Layout == LayoutNative && (vals[2] == nil || vals[2] != historyVersion(raws)) {
			vals[1] = nil // describes another history (see SessionTimes)
		}
		if vals[0] != nil || vals[1] != nil {
			out[i].Updated = st.parseStamp(vals[1])
		}
	}
	for i, id := range ids {
		if j := at[id]; j != i {
			out[i] = out[j]
		}
	}
	return out, nil
}

// SessionsExist reports, for each of ids, whether the store holds a
// session of that id, readable or not: whether its items list exists
// (Redis deletes a list with its last record). One pipeline of EXISTS, one
// round trip per node; an id the layout refuses holds no session.
// sessionctl list uses it to note the sessions the other layout holds too.
func (s *urlStore) SessionsExist(ctx context.Context, ids []string) ([]bool, error) {
	if s.st.closed.Load() {
		return nil, session.ErrClosed
	}
	out := make([]bool, len(ids))
	cmds := make([]*goredis.IntCmd, len(ids))
	pipe := s.st.client.Pipeline()
	for i, id := range ids {
		if h, err := s.st.Session(id); err == nil {
			cmds[i] = pipe.Exists(ctx, h.keys[0])
		}
	}
	if pipe.Len() == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redis: sessions exist: %w", err)
	}
	for i, c := range cmds {
		out[i] = c != nil && c.Val() > 0
	}
	return out, nil
}

// storedCheckpoints reads a checkpoint hash as ListCheckpoints and
// LoadCheckpoint do: a checkpoint per version field, sorted by name, and
// damaged (Err) when its version or document is not what a save writes.
func storedCheckpoints(h *Session, fields map[string]string) []adapters.StoredCheckpoint {
	var out []adapters.StoredCheckpoint
	for f, v := range fields {
		name, ok := strings.CutPrefix(f, versionField)
		if !ok {
			continue
		}
		doc, dok := fields[documentField+name]
		version, perr := strconv.ParseInt(v, 10, 64)
		if !dok || perr != nil || version < 1 {
			out = append(out, adapters.StoredCheckpoint{Name: name, Err: fmt.Errorf("redis: load checkpoint %q of session %q: the stored checkpoint is damaged (version field %q, document present: %t)",
				name, h.id, v, dok)})
			continue
		}
		out = append(out, adapters.StoredCheckpoint{Name: name, Version: version, Document: []byte(doc)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// historyVersion is the version of the history raws (Session.HistoryVersion)
// computed in the client as history_version computes it on the server: the
// number of records, ':', and the SHA-1 of every record prefixed with its
// length and ':'.
func historyVersion(raws []string) string {
	h := sha1.New()
	var n [20]byte
	for _, v := range raws {
		h.Write(strconv.AppendInt(n[:0], int64(len(v)), 10))
		h.Write([]byte{':'})
		io.WriteString(h, v)
	}
	return strconv.Itoa(len(raws)) + ":" + hex.EncodeToString(h.Sum(nil))
}
