package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

func init() {
	commands["list"] = command{"list the sessions of a store with item counts, sizes and checkpoints (read-only)", runList}
}

// listSession is one session in list's -json output. UpdatedAt (RFC 3339,
// UTC) is absent where the store keeps no such time (memory, and the Redis
// native layout, which stamps created_at only).
type listSession struct {
	SessionID      string `json:"session_id"`
	Items          int    `json:"items"`
	Bytes          int    `json:"bytes"`
	CorruptRecords int    `json:"corrupt_records"`
	// Encrypted counts the envelopes read without a key (their bytes are
	// in Bytes: the stored size).
	Encrypted int    `json:"encrypted_items,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
	// Checkpoint is the CHECKPOINT column: "-" (no checkpoint, or a store
	// that keeps none), else the states of the session's checkpoints, most
	// urgent first: unreadable, terminal, held, pending, none.
	Checkpoint  string           `json:"checkpoint"`
	Checkpoints []listCheckpoint `json:"checkpoints,omitempty"`
	// CheckpointError is why the session's checkpoints could not be listed.
	CheckpointError string `json:"checkpoint_error,omitempty"`
	// AlsoInLayout names the other Redis layout ("python", "native") when
	// it holds a session with this id too: two disjoint histories.
	AlsoInLayout string `json:"also_in_layout,omitempty"`
	Error        string `json:"error,omitempty"`
}

// listCheckpoint is one checkpoint in list's -json output.
type listCheckpoint struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	State   string `json:"state"`
	Error   string `json:"error,omitempty"` // why it is unreadable
}

// listReport is list's -json output.
type listReport struct {
	Store    string        `json:"store"`
	Sessions []listSession `json:"sessions"`
}

// runList reads every session the store lists and prints its item count
// and size (the stored bytes of its items).
func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "list", "URL")
	sf := addStoreFlags(fs)
	keysFile := addKeysFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	keys, err := loadKeys(*keysFile)
	if err != nil {
		return err
	}
	st, corrupt, ids, err := openListed(ctx, e, pos, *sf.connectTimeout, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	rep := listReport{Store: redactDSN(pos[0]), Sessions: make([]listSession, 0, len(ids))}
	p := newProgress(e, "read", len(ids))
	failed := 0
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			p.done()
			return err
		}
		e.setStatus("%d of %d sessions listed; nothing changed (list is read-only)", i, len(ids))
		ls := listSession{SessionID: id}
		var items []session.Item
		s, serr := keys.session(st, id)
		err := serr
		if err == nil {
			items, err = session.All(ctx, s)
		}
		if err != nil {
			if ctx.Err() != nil {
				p.done()
				return ctx.Err()
			}
			ls.Error = err.Error()
			failed++
		}
		ls.Items = len(items)
		ls.Encrypted = countEnvelopes(items)
		for _, it := range items {
			ls.Bytes += len(it.Bytes())
		}
		ls.CorruptRecords = len(corrupt.Reports(id))
		ls.Checkpoint = cpAbsent
		if serr == nil {
			cps, _, err := readCheckpoints(ctx, s)
			switch {
			case err != nil && ctx.Err() != nil:
				p.done()
				return ctx.Err()
			case err != nil:
				ls.Checkpoint, ls.CheckpointError = cpUnreadable, err.Error()
				failed++
			default:
				ls.Checkpoint = summarizeCheckpoints(cps)
				for _, c := range cps {
					ls.Checkpoints = append(ls.Checkpoints, listCheckpoint{Name: c.name, Version: c.version, State: c.state(), Error: c.errText()})
				}
			}
		}
		if ts, ok := st.(adapters.Timestamps); ok {
			if t, found, err := ts.SessionTimes(ctx, id); err == nil && found && !t.Updated.IsZero() {
				ls.UpdatedAt = t.Updated.UTC().Format(time.RFC3339)
			}
		}
		rep.Sessions = append(rep.Sessions, ls)
		p.step(i + 1)
	}
	p.done()
	layout, also := otherLayout(ctx, pos[0], ids, *sf.connectTimeout)
	for i := range rep.Sessions {
		if also[rep.Sessions[i].SessionID] {
			rep.Sessions[i].AlsoInLayout = layout
		}
	}
	if *sf.json {
		if err := writeJSON(e, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "%-40s %8s %10s  %-20s  %-15s  %s\n", "SESSION", "ITEMS", "BYTES", "UPDATED", "CHECKPOINT", "NOTES")
		for _, ls := range rep.Sessions {
			var notes []string
			if ls.CorruptRecords > 0 {
				notes = append(notes, plural(ls.CorruptRecords, "unreadable record", "unreadable records")+" (run doctor)")
			}
			if ls.Encrypted > 0 {
				notes = append(notes, plural(ls.Encrypted, "encrypted item", "encrypted items")+" ("+keysHint+")")
			}
			if n := unreadableCheckpoints(ls.Checkpoints); n > 0 {
				notes = append(notes, plural(n, "unreadable checkpoint", "unreadable checkpoints")+" (run inspect)")
			}
			if ls.CheckpointError != "" {
				notes = append(notes, "cannot list checkpoints: "+oneLine(ls.CheckpointError))
			}
			if ls.Error != "" {
				notes = []string{"cannot read: " + oneLine(ls.Error)}
			}
			updated := ls.UpdatedAt
			if updated == "" {
				updated = "-"
			}
			line := fmt.Sprintf("%-40s %8d %10d  %-20s  %-15s  %s", quoteID(truncate(ls.SessionID, 38)), ls.Items, ls.Bytes, updated, ls.Checkpoint, strings.Join(notes, "; "))
			fmt.Fprintln(e.stdout, strings.TrimRight(line, " "))
		}
		fmt.Fprintf(e.stdout, "%s\n", plural(len(rep.Sessions), "session", "sessions"))
		for _, ls := range rep.Sessions {
			if ls.AlsoInLayout != "" {
				fmt.Fprintf(e.stdout, "note: session %s also exists in the %s layout (?layout=%s): two disjoint histories; each URL reads one\n", quoteID(ls.SessionID), layout, layout)
			}
		}
	}
	if failed > 0 {
		return errFailed
	}
	return nil
}

// unreadableCheckpoints counts the unreadable checkpoints of a session.
func unreadableCheckpoints(cps []listCheckpoint) int {
	n := 0
	for _, c := range cps {
		if c.State == cpUnreadable {
			n++
		}
	}
	return n
}

// otherLayout returns, for a Redis URL, the other key layout's name
// ("python" for a native URL, "native" for ?layout=python) and which of
// ids also have a session there, found with a latest-1 read of each
// (one LRANGE; no second scan of the keyspace). The other layout is
// opened with its default key_prefix. It finds nothing for other
// backends, for Redis Cluster (which refuses the Python layout), and when
// the other layout cannot be opened.
func otherLayout(ctx context.Context, dsn string, ids []string, timeout time.Duration) (string, map[string]bool) {
	u, err := url.Parse(dsn)
	if err != nil || len(ids) == 0 {
		return "", nil
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel":
	default:
		return "", nil
	}
	q := u.Query()
	layout := "python"
	if strings.EqualFold(q.Get("layout"), "python") {
		layout = "native"
	}
	q.Set("layout", layout)
	q.Del("key_prefix")
	u.RawQuery = q.Encode()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	corrupt := &driver.CorruptLog{}
	st, err := adapters.OpenWith(cctx, u.String(), adapters.Options{ReadOnly: true, OnCorrupt: corrupt.Handler()})
	if err != nil {
		return "", nil
	}
	defer st.Close()
	found := map[string]bool{}
	for _, id := range ids {
		s, err := st.Session(id)
		if err != nil {
			continue // an id the other layout refuses has no session there
		}
		items, err := session.Latest(cctx, s, 1)
		if err == nil && (len(items) > 0 || len(corrupt.Reports(id)) > 0) {
			found[id] = true
		}
	}
	return layout, found
}
